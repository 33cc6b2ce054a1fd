"""IRP, Procrustes and affine stitchers on a small real data set (sklearn digits), and
the translation-quality and scale-invariance task kinds against relbench's TaskRunDouble."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from relbench.interfaces import DIRECTIONS, Bank, DatasetData, FitContext, StitchSide
from relbench.pages import Page
from relbench.protocol import EvaluationProtocol
from relbench.testing import TaskRunDouble, make_task, spec
from relbench_irp.quality import TranslationQuality
from relbench_irp.scale import ScaleInvariance
from relbench_irp.stitchers import AffineStitcher, IRPStitcher, ProcrustesStitcher
from relbench_relreps import RandomAnchors


def _encoders():
    """Three 'encoders' of the digits: pixels (64-d), a rotated wider copy (80-d) and a
    nonlinear random feature map (96-d)."""
    digits = load_digits()
    X = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target)
    g = torch.Generator().manual_seed(0)
    Q = torch.linalg.qr(torch.randn(80, 80, generator=g))[0][:64]
    W = torch.randn(64, 96, generator=g) / 4
    spaces = {"pixels": X, "rotated": 2.5 * X @ Q + 1.0, "tanh": torch.tanh(X @ W)}
    ids = [f"d{i}" for i in range(len(X))]
    n_train, n_fit = 1200, 1000
    banks = {split: {} for split in ("train", "validation", "test")}
    for name, Z in spaces.items():
        banks["train"][name] = Bank(name, "train", Z[:n_fit], ids[:n_fit], y[:n_fit])
        banks["validation"][name] = Bank(name, "validation", Z[n_fit:n_train], ids[n_fit:n_train], y[n_fit:n_train])
        banks["test"][name] = Bank(name, "test", Z[n_train:], ids[n_train:], y[n_train:])
    return banks


BANKS = _encoders()


def side(name, anchor_ids, banks=BANKS):
    tr = banks["train"][name]
    return StitchSide(name, tr, banks["test"][name], tr.rows(anchor_ids), None)


def fit_ctx():
    return FitContext(seed=0, device=torch.device("cpu"), num_classes=10, modality="image", regularizers=[])


ANCHORS = BANKS["train"]["pixels"].ids[:200]

#: every diagnostic the translating stitchers report, with the direction it must declare
EXTRA_DIRECTIONS = {"reconstruction_cosine": "higher", "condition_number": "lower",
                    "irp_singular_anchor_sets": "lower", "anchors_kept": "neutral", "irp_initial_anchors": "neutral",
                    "irp_anchor_shortfall": "lower",
                    "procrustes_rank": "neutral", "procrustes_width": "neutral"}


def values(pred):
    """A prediction's diagnostics as plain numbers."""
    return {name: d.value for name, d in pred.extras.items()}


@pytest.mark.parametrize("cls,params,extras", [
    (IRPStitcher, {"delta": 0.5}, {"reconstruction_cosine", "condition_number", "anchors_kept",
                                   "irp_singular_anchor_sets", "irp_initial_anchors", "irp_anchor_shortfall"}),
    (ProcrustesStitcher, {}, {"reconstruction_cosine", "procrustes_rank", "procrustes_width"}),
    (AffineStitcher, {}, {"reconstruction_cosine"})])
def test_translating_stitchers_reach_every_pair(cls, params, extras):
    stitcher = cls(epochs=15, lr=1e-3, **params)
    stitcher.fit(side("pixels", ANCHORS), fit_ctx())
    accs = {}
    for source in ("pixels", "rotated", "tanh"):
        pred = stitcher.predict(side(source, ANCHORS))
        y = BANKS["test"][source].labels
        accs[source] = float((pred.logits.argmax(1) == y).float().mean())
        assert 0.0 <= pred.extras["reconstruction_cosine"].value <= 1.0 + 1e-6
        assert {n: d.direction for n, d in pred.extras.items()} == {n: EXTRA_DIRECTIONS[n] for n in extras}
    assert accs["pixels"] > 0.85
    assert accs["rotated"] > 0.8  # an isometric copy of another width is stitched
    assert accs["tanh"] > 0.3  # a nonlinear space, far above chance (0.1)


def test_irp_extras_and_reconstruction_cosine_is_matched_by_id():
    stitcher = IRPStitcher(epochs=2, omega=4, delta=0.5)
    stitcher.fit(side("rotated", ANCHORS), fit_ctx())
    extras = values(stitcher.predict(side("pixels", ANCHORS)))
    assert set(extras) == {"reconstruction_cosine", "condition_number", "anchors_kept",
                           "irp_singular_anchor_sets", "irp_initial_anchors", "irp_anchor_shortfall"}
    assert extras["reconstruction_cosine"] > 0.9
    assert 1 <= extras["anchors_kept"] <= len(ANCHORS) and extras["condition_number"] >= 1
    assert extras["irp_singular_anchor_sets"] == 0 and extras["irp_initial_anchors"] == len(ANCHORS)
    assert extras["irp_anchor_shortfall"] == 0  # 200 anchors for an 80-d target: the paper's k ≥ d start
    # the same samples in another order give the same cosine (alignment by id, not position)
    test = BANKS["test"]["pixels"]
    perm = torch.randperm(len(test.ids), generator=torch.Generator().manual_seed(0))
    shuffled = Bank("pixels", "test", test.X[perm], [test.ids[i] for i in perm.tolist()], test.labels[perm])
    src = StitchSide("pixels", BANKS["train"]["pixels"], shuffled, BANKS["train"]["pixels"].rows(ANCHORS), None)
    assert values(stitcher.predict(src))["reconstruction_cosine"] == pytest.approx(extras["reconstruction_cosine"],
                                                                                  abs=1e-5)
    with pytest.raises(ValueError, match="omega"):
        IRPStitcher(omega=0)


def _rank_deficient_banks():
    """Two 12-d spaces (one a rotation of the other) whose 20 anchors span 5 dimensions."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(200, 12, generator=g)
    y = torch.arange(200) % 4
    A = torch.randn(20, 5, generator=g) @ torch.randn(5, 12, generator=g)
    Q = torch.linalg.qr(torch.randn(12, 12, generator=g))[0]
    ids = [f"s{i}" for i in range(200)]
    sides = {}
    for name, T in (("a", torch.eye(12)), ("b", Q)):
        sides[name] = StitchSide(name, Bank(name, "train", X[:150] @ T, ids[:150], y[:150]),
                                 Bank(name, "test", X[150:] @ T, ids[150:], y[150:]), A @ T, None)
    return sides


def test_irp_counts_singular_anchor_sets_instead_of_dropping_them():
    sides = _rank_deficient_banks()
    full = IRPStitcher(epochs=1, omega=3, delta=0.0)  # no pruning: 20 anchors of rank 5 in 12-d
    full.fit(sides["b"], fit_ctx())
    extras = values(full.predict(sides["a"]))
    assert extras["irp_singular_anchor_sets"] == 3 and "condition_number" not in extras  # nothing to average
    assert all(np.isfinite(v) for v in extras.values())  # a unit never stores a non-finite number
    assert extras["anchors_kept"] == 20
    pruned = IRPStitcher(epochs=1, omega=3, delta=0.5)  # pruning keeps at most 5 anchors: invertible
    pruned.fit(sides["b"], fit_ctx())
    extras = values(pruned.predict(sides["a"]))
    assert extras["irp_singular_anchor_sets"] == 0 and 1 <= extras["condition_number"] < 10
    assert extras["anchors_kept"] <= 5


def test_irp_can_start_from_as_many_anchors_as_the_target_has_dimensions():
    wide_anchors = BANKS["train"]["pixels"].ids[:300]
    for start, expected in (("task", 300), ("dim", 80)):  # the target "rotated" is 80-d
        stitcher = IRPStitcher(epochs=1, omega=2, delta=0.5, initial_anchors=start)
        stitcher.fit(side("rotated", wide_anchors), fit_ctx())
        extras = values(stitcher.predict(side("pixels", wide_anchors)))
        assert extras["irp_initial_anchors"] == expected and extras["anchors_kept"] <= expected
        assert extras["reconstruction_cosine"] > 0.8 and extras["irp_anchor_shortfall"] == 0


def test_irp_reports_starting_from_fewer_anchors_than_dimensions():
    """The task's 30 anchors fall 50 short of the 80-d target's k = d start, whichever
    ``initial_anchors``; a 64-d target is 34 short."""
    few = BANKS["train"]["pixels"].ids[:30]
    for target, shortfall in (("rotated", 50), ("pixels", 34)):
        for start in ("task", "dim"):
            stitcher = IRPStitcher(epochs=1, omega=2, delta=0.5, initial_anchors=start)
            stitcher.fit(side(target, few), fit_ctx())
            extras = values(stitcher.predict(side("tanh", few)))
            assert extras["irp_initial_anchors"] == 30 and extras["irp_anchor_shortfall"] == shortfall
    with pytest.raises(ValueError, match="initial_anchors"):
        IRPStitcher(initial_anchors="all")


def test_procrustes_reports_the_anchor_rank_against_the_width():
    pixels = BANKS["train"]["pixels"]
    for anchors in (pixels.ids[:20], ANCHORS):
        stitcher = ProcrustesStitcher(epochs=1)
        stitcher.fit(side("tanh", anchors), fit_ctx())  # 96-d target, 64-d source: width 96
        extras = values(stitcher.predict(side("pixels", anchors)))
        assert extras["procrustes_width"] == 96
        # centred anchors lose one dimension; constant pixels (always blank) span none
        centred = pixels.rows(anchors) - pixels.rows(anchors).mean(dim=0)
        assert extras["procrustes_rank"] == int(torch.linalg.matrix_rank(centred)) < 96
    assert extras["procrustes_rank"] > 19  # 200 anchors span more than 20 do


# ----------------------------------------------------------------------------- task kinds


DIGITS = DatasetData("digits", {}, [str(i) for i in range(10)], {"image": "image"}, "x")


def double(kind, tmp_path, banks=BANKS, **params):
    """A TaskRunDouble of ``kind`` over the three digit encoders, random anchors, with a
    validation part."""
    task = make_task(kind, encoders=list(BANKS["train"]), grid={"selectors": [spec(RandomAnchors)]}, num_anchors=150,
                     protocol=EvaluationProtocol(validation=0.2), **params)
    return TaskRunDouble(task, banks=banks, dataset=DIGITS, tmp=tmp_path)


def check_directions(df, expected):
    """Every row declares a valid direction, and each metric the one listed."""
    assert df["direction"].isin(DIRECTIONS).all()
    assert df.groupby("metric")["direction"].agg(set).to_dict() == {m: {d} for m, d in expected.items()}


def test_translation_quality_chooses_its_best_omega_delta_without_the_test_split(tmp_path):
    """Poisoning every test bank changes the reported cosines, never the (ω, δ) chosen."""
    def chosen(banks, where):
        run = double(TranslationQuality, where, banks=banks, omegas=[1, 4], deltas=[0.3, 0.6], max_samples=200)
        run.run()
        df = run.frame()
        page = run.kind.page(df, Page(where, "t"))
        return page[page.index("Per pair at"):].split("(")[0], df

    clean, df = chosen(BANKS, tmp_path / "a")
    g = torch.Generator().manual_seed(1)
    poisoned = {**BANKS, "test": {k: Bank(k, "test", torch.randn(b.X.shape, generator=g) * 9, b.ids, b.labels)
                                  for k, b in BANKS["test"].items()}}
    dirty, df2 = chosen(poisoned, tmp_path / "b")
    assert clean == dirty
    cos = lambda d: d[d["metric"] == "reconstruction_cosine"]["value"].mean()
    assert abs(cos(df) - cos(df2)) > 0.1  # the test numbers did change


def test_translation_quality_grid_and_page(tmp_path):
    run = double(TranslationQuality, tmp_path, omegas=[1, 4], deltas=[0.3, 0.6], max_samples=300)
    run.run()
    df = run.frame()
    # one unit per (seed, selector, target); the double refused any unit outside the plan
    assert len(run.kind.plan(run.task)) == len(df.drop_duplicates(["seed", "selector", "target"])) == 1 * 1 * 3
    check_directions(df, {"reconstruction_cosine": "higher", "absolute_cosine": "higher",
                          "validation_reconstruction_cosine": "higher",
                          "condition_number": "lower", "irp_singular_anchor_sets": "lower",
                          "anchors_kept": "neutral", "translated_accuracy": "higher"})
    cos = df[df["metric"] == "reconstruction_cosine"]
    assert len(cos) == 3 * 3 * 2 * 2  # sources × targets × ω × δ
    assert len(cos.drop_duplicates(["source", "target", "omega", "delta"])) == len(cos)
    absolute = df[df["metric"] == "absolute_cosine"]
    assert absolute["omega"].isna().all() and (absolute["source"] == absolute["target"]).all()  # widths differ
    intra = cos[(cos["source"] == cos["target"])]
    inter_rot = cos[(cos["source"] == "pixels") & (cos["target"] == "rotated")]
    assert intra["value"].min() > 0.75 and inter_rot["value"].min() > 0.75
    cond = df[df["metric"] == "condition_number"]
    assert cond[cond["delta"] == 0.6]["value"].mean() < cond[cond["delta"] == 0.3]["value"].mean()
    singular = df[df["metric"] == "irp_singular_anchor_sets"].merge(
        cond, on=["target", "source", "omega", "delta"], suffixes=("", "_cond"))
    # the digits' always-blank pixels leave the 64-d and 80-d anchor sets rank-deficient unless pruned hard
    mild = singular[(singular["delta"] == 0.3) & (singular["target"] != "tanh")]
    assert (mild["value"] == mild["omega"]).all() and mild["value_cond"].isna().all()
    assert (singular[singular["target"] == "tanh"]["value"] == 0).all()
    run.run()  # resume: every unit is done, nothing recomputed
    assert len(run.rows) == len(df)
    page = run.kind.page(df, Page(tmp_path, "t"))
    assert "![" in page and "ω \\ δ" in page and "IRP cosine ↑" in page and "on the validation part" in page
    assert "ω = 4, δ = 0.3: 8 of 12" in page  # 2 of 3 targets × 4 subspaces singular
    assert "[95 % t-interval over seeds]" in page and " ± " not in page
    assert (tmp_path / "figures" / "t" / "omega_delta_random.png").stat().st_size > 1000
    assert "accuracy of the target's head on the translated embeddings" in page and "report 0.7." in page


def test_translated_accuracy_is_the_target_heads_accuracy_on_the_decoded_test_embeddings(tmp_path):
    """Figure 6 (right), recomputed slowly for one cell: the target's reference head, trained
    on its fit part as the absolute stitcher trains it, applied to IRP's decoding of the
    source's test rows (the unit's own sample subset), scored against the labels."""
    from relbench.training import fit_reference_head, head_settings, predict_logits
    from relbench_irp.quality import sample_ids
    from relbench_irp.translate import TargetDecoder, centre_normalise

    run = double(TranslationQuality, tmp_path, omegas=[2], deltas=[0.6], max_samples=150)
    run.run()
    df = run.frame()
    accuracy = df[df["metric"] == "translated_accuracy"]
    assert len(accuracy) == 3 * 3 and accuracy["value"].between(0, 1).all()
    source, target, seed = "pixels", "rotated", 0
    train, test = run.banks("train", seed), run.banks("test", seed)
    anchors = run.anchors(seed, run.task.grid["selectors"][0])
    head = fit_reference_head(train[target].X, train[target].labels, head_settings("image", None, None, 256, 32),
                              num_classes=10, seed=seed, evaluation="inductive")
    ids = sample_ids(test[target].ids, 150, seed)
    dec = TargetDecoder.build(run.realise(anchors, target), omega=2, delta=0.6, seed=seed, pinv="plain",
                              ridge_alpha=0.01, scale=None)
    centre, maps = dec.maps(run.realise(anchors, source))
    Y = dec.decode(centre_normalise(test[source].rows(ids), centre), sum(maps) / 2, False)
    labels = torch.stack([test[target].labels[test[target].ids.index(i)] for i in ids])
    expected = float((predict_logits(head, Y).argmax(dim=1) == labels).float().mean())
    mine = accuracy[(accuracy["source"] == source) & (accuracy["target"] == target)]["value"]
    assert float(mine.iloc[0]) == pytest.approx(expected, abs=1e-6)
    own = accuracy[(accuracy["source"] == target) & (accuracy["target"] == target)]["value"]
    assert float(own.iloc[0]) > 0.5  # a space translated into itself keeps its head's accuracy


def test_without_labels_or_with_accuracy_off_no_accuracy_is_scored(tmp_path):
    run = double(TranslationQuality, tmp_path, omegas=[1], deltas=[0.6], max_samples=100, accuracy=False)
    run.run()
    assert "translated_accuracy" not in set(run.frame()["metric"])


def test_translation_quality_needs_a_selector():
    with pytest.raises(ValueError, match="grid.selectors"):
        TranslationQuality().validate(make_task(TranslationQuality, encoders=["a", "b"]))


def test_scale_invariance_curves_and_page(tmp_path):
    run = double(ScaleInvariance, tmp_path, alphas=[0.01, 1.0, 10.0, 1000.0], activations=["relu", "cos"], epochs=5,
                 hidden=64, omega=2, delta=0.3, max_samples=300)
    run.run()
    df = run.frame()
    # one unit per (seed, target, activation); the double refused any unit outside the plan
    assert len(run.kind.plan(run.task)) == len(df.drop_duplicates(["seed", "target", "activation"])) == 1 * 3 * 2
    check_directions(df, {"accuracy": "higher", "accuracy_unscaled": "higher", "mean_norm": "neutral"})
    acc = df[df["metric"] == "accuracy"]
    raw_relu = acc[(acc["input"] == "raw") & (acc["activation"] == "relu") & (acc["target"] == "pixels")]
    by_alpha = dict(zip(raw_relu["alpha"], raw_relu["value"]))
    norm = float(BANKS["train"]["pixels"].X.norm(dim=1).mean())
    assert 1.0 < norm < 10.0
    assert df[(df["metric"] == "mean_norm") & (df["target"] == "pixels")]["value"].tolist() == pytest.approx([norm] * 2)
    # a ReLU MLP classifies well once inputs are rescaled to (or above) the data's scale
    assert by_alpha[10.0] > 0.75 and by_alpha[1000.0] > 0.7  # 1,000 fit samples
    assert set(acc["input"]) == {"raw", "irp"}
    irp_rows = acc[acc["input"] == "irp"]
    assert (irp_rows["source"] != irp_rows["target"]).all() and (irp_rows["selector"] == "random").all()
    assert acc[acc["input"] == "raw"]["selector"].isna().all()
    assert len(irp_rows) == 3 * 2 * 2 * 4  # targets × other sources × activations × α
    page = run.kind.page(df, Page(tmp_path, "t"))
    assert "α=1000" in page and "Accuracy ↑" in page and "[95 % t-interval over seeds]" in page
    assert (tmp_path / "figures" / "t" / "scale_invariance.png").exists()
    assert "mean embedding norm" in (tmp_path / "figures" / "t" / "scale_invariance.svg").read_text()  # legend
    assert np.isfinite(acc["value"]).all()
