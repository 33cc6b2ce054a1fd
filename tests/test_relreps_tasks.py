"""The task kinds of relbench_relreps, run against relbench.testing.TaskRunDouble (which
enforces the runner's contract: every unit in plan(), each computed once, rows stored
flat as the results store keeps them)."""

import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats
from sklearn.datasets import load_digits

from relbench.interfaces import DIRECTIONS, Bank, DatasetData, Split
from relbench.pages import Page
from relbench.testing import TaskRunDouble, make_task, spec
from relbench_relreps import Cosine, PerformanceProxy, RandomAnchors, Reconstruction, WordNeighbourhoods
from relbench_relreps.tasks.common import select_without_banks


def page_of(tmp_path) -> Page:
    """A page whose figures drawn during the run are those the double kept under ``tmp_path``."""
    store = SimpleNamespace(figure_path=lambda task, name: tmp_path / "figures" / name)
    return Page(tmp_path / "boards", "t", store)


def units(df) -> int:
    """How many units the stored rows came from (seed + the kind's key columns)."""
    key = [c for c in ("seed", "representation", "bottleneck", "encoder", "selector", "similarity") if c in df]
    return len(df[key].astype(str).drop_duplicates())


def assert_directions(df, expected: dict) -> None:
    assert df["direction"].isin(DIRECTIONS).all()
    assert df.groupby("metric")["direction"].agg(set).to_dict() == {m: {d} for m, d in expected.items()}


# ----------------------------------------------------------------------------- word neighbourhoods


def _word_run(tmp_path, **task):
    g = torch.Generator().manual_seed(0)
    words = [f"w{i}" for i in range(400)]
    X = torch.randn(400, 20, generator=g)
    Q, _ = torch.linalg.qr(torch.randn(20, 20, generator=g))
    banks = {"a": Bank("a", "train", X, words), "b": Bank("b", "train", X @ Q, words),
             "wide": Bank("wide", "train", torch.randn(400, 30, generator=g), words)}
    task = make_task(WordNeighbourhoods, encoders=list(banks), k=5, max_words=300, num_anchors=40, **task)
    return TaskRunDouble(task, {"train": banks}, tmp=tmp_path)


def test_word_neighbourhoods_relative_survives_rotation_absolute_does_not(tmp_path):
    run = _word_run(tmp_path, seeds=[0, 1])
    run.run()
    df = run.frame()
    rel = df[(df.representation == "relative") & (df.source == "a") & (df.target == "b")]
    assert len(rel) == 4 and np.allclose(rel.value, 1.0)  # 2 seeds × (jaccard, mrr)
    assert set(rel.selector) == {"random"} and set(rel.similarity) == {"cosine"}  # the defaults
    ab = df[(df.representation == "absolute") & (df.source == "a") & (df.target == "b")]
    assert (ab.value < 0.2).all() and ab.seed.isna().all() and ab.selector.isna().all()
    same = df[(df.representation == "absolute") & (df.source == "wide") & (df.target == "wide")]
    assert np.allclose(same.value, 1.0)
    na = df[(df.representation == "absolute") & (df.source == "a") & (df.target == "wide")]
    assert (na.status == "not_achievable").all() and len(na) == 2
    before = len(run.rows)
    run.run()  # everything is done: nothing recomputed
    assert len(run.rows) == before
    md = run.kind.page(df, page_of(tmp_path))
    assert "jaccard@5 ↑" in md and "mrr@5 ↑" in md and "n/a" in md and "representation" in md


def test_word_neighbourhoods_plan_lists_exactly_its_units(tmp_path):
    sims = [spec(Cosine), spec(Cosine, label="cosine-centred", center=True)]
    run = _word_run(tmp_path, seeds=[0, 1], grid={"similarities": sims})
    plan = run.kind.plan(run.task)
    assert len(plan) == 1 + 2 * 1 * 2  # absolute + seeds × selectors × similarities
    run.run()  # the double refuses a unit outside the plan and a unit computed twice
    df = run.frame()
    assert units(df) == len(plan)
    assert_directions(df, {"jaccard@5": "higher", "mrr@5": "higher"})


# ----------------------------------------------------------------------------- reconstruction


def _digits_data():
    d = load_digits()
    images = (d.images * 255 / 16).astype(np.uint8)
    ids = [f"d{i}" for i in range(len(images))]
    split = lambda sl: Split(ids=ids[sl], labels=d.target[sl], views={"image": list(images[sl])})
    return DatasetData(name="digits", splits={"train": split(slice(0, 1400)), "test": split(slice(1400, None))},
                       class_names=[str(i) for i in range(10)], view_modalities={"image": "image"},
                       fingerprint="digits")


RECONSTRUCTION = dict(latent_dim=16, hidden=64, epochs=8, train_samples=1000, test_samples=300, num_anchors=32)


class SeedZeroStored(TaskRunDouble):
    """A run resumed with every unit of task seed 0 already in the store."""

    def is_done(self, key):
        return super().is_done(key) or key.get("seed") == 0


def test_reconstruction_units_per_seed_and_bottleneck(tmp_path, monkeypatch):
    import relbench_relreps.tasks.reconstruction as rec

    drawn = []

    def recording(spec_, ids, labels, seed, num_anchors, device):
        drawn.append(seed)
        return select_without_banks(spec_, ids, labels, seed, num_anchors, device)

    monkeypatch.setattr(rec, "select_without_banks", recording)
    data = _digits_data()
    run = TaskRunDouble(make_task(Reconstruction, seeds=[0], **RECONSTRUCTION), {}, dataset=data, tmp=tmp_path)
    run.run()
    first = run.frame()
    assert units(first) == 2 and drawn == [0, 0]  # (seed 0) × (absolute, relative), anchors drawn with seed 0
    # a seed added later runs as new units; seed 0 is not recomputed
    later = SeedZeroStored(make_task(Reconstruction, seeds=[0, 1], **RECONSTRUCTION), {}, dataset=data,
                           tmp=tmp_path / "later")
    later.run()
    assert drawn == [0, 0, 1, 1] and set(later.frame().seed) == {1}
    df = pd.concat([first, later.frame()], ignore_index=True)
    assert len(df) == 2 * 2 * 4 and (df.metric == "mse").all()  # seeds × bottlenecks × (2 × 2 model pairs)
    assert sorted(df.seed.unique()) == [0, 1]
    assert set(df[df.seed == 1].encoder_seed) == {1000, 1001} == set(df[df.seed == 1].decoder_seed)
    stitched = df[df.encoder_seed != df.decoder_seed].groupby(["seed", "bottleneck"]).value.mean().unstack()
    assert (stitched["relative"] < stitched["absolute"]).all()  # in every replicate
    for bottleneck in ("absolute", "relative"):
        assert (tmp_path / "figures" / f"reconstruction_{bottleneck}.png").stat().st_size > 1000
    md = run.kind.page(df, page_of(tmp_path))
    per_seed = df[df.encoder_seed != df.decoder_seed].groupby(["bottleneck", "seed"]).value.mean()["relative"]
    shown = re.search(rf"{per_seed.mean():.4f} \[([0-9.]+), ([0-9.]+)\]", md)  # no per-sample data: over seeds
    expected = stats.ttest_1samp(per_seed.to_numpy(), 0).confidence_interval()  # a Student-t interval
    assert shown and (float(shown[1]), float(shown[2])) == pytest.approx((expected.low, expected.high), abs=1e-4)
    assert "2 task seed(s)" in md and "mse ↓" in md and "figures/t/reconstruction_relative.png" in md
    with pytest.raises(ValueError, match="model_seeds"):
        Reconstruction(model_seeds=[3])


def test_reconstruction_plan_lists_exactly_its_units(tmp_path):
    small = dict(RECONSTRUCTION, epochs=1, train_samples=100, test_samples=50)
    task = make_task(Reconstruction, seeds=[0, 1], **small)
    run = TaskRunDouble(task, {}, dataset=_digits_data(), tmp=tmp_path)
    plan = run.kind.plan(task)
    assert len(plan) == 2 * 1 * 2  # seeds × selectors × bottlenecks
    run.run()
    df = run.frame()
    assert units(df) == len(plan)
    assert_directions(df, {"mse": "lower"})


# ----------------------------------------------------------------------------- performance proxy


def _digits_banks():
    d = load_digits()
    X, y = torch.tensor(d.data / 16, dtype=torch.float32), torch.tensor(d.target)
    ids = [f"d{i}" for i in range(len(X))]
    return {"train": {"pix": Bank("pix", "train", X[:1200], ids[:1200], y[:1200])},
            "test": {"pix": Bank("pix", "test", X[1200:], ids[1200:], y[1200:])}}


DIGITS = SimpleNamespace(class_names=[str(i) for i in range(10)])


def test_proxy_correlates_similarity_and_accuracy(tmp_path):
    task = make_task(PerformanceProxy, encoders=["pix"], num_anchors=50, grid={"selectors": [spec(RandomAnchors)]},
                     epochs=[1, 2, 8], widths=[8, 32], activations=["relu"], model_seeds=[0], reference_epochs=15,
                     lr=3e-3)
    run = TaskRunDouble(task, _digits_banks(), dataset=DIGITS, tmp=tmp_path)
    run.run()
    df = run.frame()
    r = df[df.metric == "pearson_r"]
    assert len(r) == 1 and np.isfinite(r.value.iloc[0]) and r.value.iloc[0] > 0.3 and r.model.isna().all()
    acc = df[df.metric == "accuracy"]
    assert len(acc) == 6 and set(acc.encoder) == {"pix"} and acc.model.nunique() == 6
    md = run.kind.page(df, page_of(tmp_path))
    assert "pearson_r ↑" in md and (tmp_path / "boards" / "figures" / "t" / "proxy_scatter.png").exists()
    vector = (tmp_path / "boards" / "figures" / "t" / "proxy_scatter.svg").read_text()
    assert "Pearson r = " in vector  # the legend says what each group's r is


def test_proxy_plan_lists_exactly_its_units(tmp_path):
    sims = [spec(Cosine), spec(Cosine, label="cosine-centred", center=True)]
    task = make_task(PerformanceProxy, encoders=["pix"], seeds=[0, 1], num_anchors=20, grid={"similarities": sims},
                     epochs=[1], widths=[8], activations=["relu"], model_seeds=[0, 1], reference_epochs=1)
    run = TaskRunDouble(task, _digits_banks(), dataset=DIGITS, tmp=tmp_path)
    plan = run.kind.plan(task)
    assert len(plan) == 1 * 2 * 1 * 2  # encoders × seeds × selectors × similarities
    run.run()
    df = run.frame()
    assert units(df) == len(plan)
    assert_directions(df, {"accuracy": "higher", "similarity": "neutral", "pearson_r": "higher"})


def test_word_claims_compare_cross_space_pairs_only():
    import pandas as pd

    rows = pd.DataFrame([{"representation": "relative", "source": s, "target": t, "value": 1.0 if s == t else 0.1}
                         for s in "ab" for t in "ab"])
    kept = WordNeighbourhoods().claim_rows(rows)
    assert len(kept) == 2 and (kept["source"] != kept["target"]).all()


# ----------------------------------------------------------------------------- headlines (the index's line)


def _reconstruction_rows() -> pd.DataFrame:
    """Two seeds × two selectors × both bottlenecks; seed s's stitched pairs score
    ``base + s / 100``, the non-stitched ones far lower (most for random anchors: with
    them, relative · random would have the lowest mean over all pairs), plus one failed unit."""
    stitched = {("relative", "random"): 0.04, ("relative", "stratified"): 0.03,
                ("absolute", "random"): 0.20, ("absolute", "stratified"): 0.15}
    own = {"random": 0.001, "stratified": 0.02}
    rows = [{"seed": seed, "bottleneck": b, "selector": sel, "encoder_seed": i, "decoder_seed": j, "metric": "mse",
             "value": (base + seed / 100) if i != j else own[sel], "direction": "lower", "status": "ok"}
            for (b, sel), base in stitched.items() for seed in (0, 1) for i in (0, 1) for j in (0, 1)]
    rows.append({"seed": 2, "bottleneck": "relative", "selector": "fps", "metric": None, "value": None,
                 "direction": None, "status": "error"})
    return pd.DataFrame(rows)


def test_reconstruction_headline_is_the_best_relative_stitched_mse_beside_the_best_absolute_one():
    headline = Reconstruction().headline(_reconstruction_rows())
    # non-stitched pairs do not enter: stratified stitches best
    assert headline["best"] == "relative · stratified · stitched" and headline["metric"] == "mse"
    assert headline["score"] == pytest.approx(0.035)  # mean over seeds of 0.03 and 0.04
    low, high = headline["interval"]  # the Student-t interval over the two seeds
    expected = stats.ttest_1samp([0.03, 0.04], 0).confidence_interval()
    assert (low, high) == pytest.approx((expected.low, expected.high)) and low < headline["score"] < high
    assert headline["reference"] == pytest.approx(0.155)  # absolute · stratified, the lower absolute one
    assert "the reference is the lowest stitched MSE of an absolute bottleneck" in Reconstruction().meaning(
        headline, "lower")
    only_absolute = _reconstruction_rows().query("bottleneck != 'relative'")
    assert Reconstruction().headline(only_absolute) is None
    no_absolute = Reconstruction().headline(_reconstruction_rows().query("bottleneck != 'absolute'"))
    assert np.isnan(no_absolute["reference"]) and "reference" not in Reconstruction().meaning(no_absolute, "lower")


def _word_rows() -> pd.DataFrame:
    """Jaccard and MRR of three tables (``c`` narrower: no absolute comparison with it)."""
    def row(representation, source, target, metric, value, seed=None, status="ok"):
        relative = representation == "relative"
        return {"representation": representation, "selector": "random" if relative else None,
                "similarity": "cosine" if relative else None, "source": source, "target": target, "seed": seed,
                "metric": metric, "value": value, "direction": "higher", "status": status}

    jaccard = {("a", "b"): 0.30, ("b", "a"): 0.20, ("a", "c"): 0.25, ("a", "a"): 1.0}
    rows = [row("relative", s, t, "jaccard@10", v + seed / 100, seed) for (s, t), v in jaccard.items()
            for seed in (0, 1)]
    rows += [row("relative", "b", "c", "mrr@10", 0.9, seed) for seed in (0, 1)]  # another metric
    rows += [row("absolute", "a", "b", "jaccard@10", 0.05), row("absolute", "b", "a", "jaccard@10", 0.5),
             row("absolute", "a", "a", "jaccard@10", 1.0), row("absolute", "a", "c", "jaccard@10", None,
                                                                status="not_achievable")]
    return pd.DataFrame(rows)


def test_word_headline_is_the_best_relative_cross_table_jaccard_beside_the_same_pair_absolute():
    rows = _word_rows()
    headline = WordNeighbourhoods().headline(rows)
    # the tables' self-comparisons (1.0) and the MRR rows do not enter
    assert headline["best"] == "relative · random · cosine · a → b" and headline["metric"] == "jaccard@10"
    assert headline["score"] == pytest.approx(0.305)
    assert headline["reference"] == pytest.approx(0.05)  # absolute a → b, not b → a
    assert "absolute comparison of the same two tables" in WordNeighbourhoods().meaning(headline, "higher")
    # a best pair without an absolute comparison (widths differ) has no reference
    narrower = WordNeighbourhoods().headline(rows[~((rows.source == "a") & (rows.target == "b"))])
    assert narrower["best"].endswith("a → c") and np.isnan(narrower["reference"])
    assert WordNeighbourhoods().headline(rows[rows.representation == "absolute"]) is None


def test_proxy_headline_is_the_highest_pearson_r_and_names_what_it_correlates():
    def row(encoder, similarity, metric, value, seed, model=None):
        return {"encoder": encoder, "selector": "random", "similarity": similarity, "model": model, "seed": seed,
                "metric": metric, "value": value, "direction": "neutral" if metric == "similarity" else "higher",
                "status": "ok"}

    r = {("e1", "cosine"): 0.2, ("e1", "centred"): 0.7, ("e2", "cosine"): 0.6}
    per_model = [row("e1", "cosine", metric, 0.99, 0, "m") for metric in ("accuracy", "similarity")]
    rows = pd.DataFrame([row(enc, sim, "pearson_r", v + seed / 10, seed) for (enc, sim), v in r.items()
                         for seed in (0, 1)] + per_model)
    headline = PerformanceProxy().headline(rows)
    assert headline["best"] == "e1 · random · centred (similarity to the reference vs accuracy)"
    assert headline["metric"] == "pearson_r" and headline["score"] == pytest.approx(0.75)
    assert np.isnan(headline["reference"]) and headline["interval"][0] <= 0.75 <= headline["interval"][1]
    assert PerformanceProxy().headline(rows[rows.metric != "pearson_r"]) is None
    assert PerformanceProxy().headline(rows.assign(direction="neutral")) is None  # no better direction: no best


def test_the_word_task_s_protocol_paragraph_says_what_its_seeds_vary_not_a_sample_draw():
    from relbench.leaderboard import protocol_section

    words = make_task(WordNeighbourhoods, name="w", encoders=["a", "b"], seeds=[0, 1, 2])
    text = protocol_section(words, pd.DataFrame({"extra": [{"words": 10}], "unit": ["u"]}))
    assert text.startswith("**Protocol.** The 3 seeds [0, 1, 2]: each draws its own anchors")
    assert "validation part" not in text and "decoders fit on" not in text and "inductive" not in text
    stitching = make_task(PerformanceProxy, name="p", encoders=["a", "b"], seeds=[0, 1, 2])
    assert "validation part" in protocol_section(stitching, pd.DataFrame({"extra": [{}], "unit": ["u"]}))
