"""The chance null of stitching: the ``mismatched`` selector (the random draw, every space
its own order of it) and the page's scores from chance to the own head, found from the
selector class the rows record (``chance_null``), never from its label."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import toy_plugins
import torch

from relbench.config import load_suite
from relbench.errors import ConfigError
from relbench.export import flatten
from relbench.interfaces import AnchorContext
from relbench.pages import Page
from relbench.plugins import Registry, _discover
from relbench.runner import Runner
from relbench_relreps import MismatchedAnchors, RandomAnchors
from relbench_stitching import Stitching
from relbench_stitching import page
from relbench_stitching.chance import chance_corrected, chance_ratio
from relbench_stitching.declared import chance_nulls
from relbench_stitching.scores import score

IDS = [f"s{i}" for i in range(100)]


def _ctx(k=30, seed=0, encoders=("a", "b", "c")):
    return AnchorContext(num_anchors=k, seed=seed, ids=list(IDS), labels=None, banks={}, excluded=frozenset(),
                         device=torch.device("cpu"), views={e: "x" for e in encoders}, pool_banks=lambda name: {})


# ------------------------------------------------------------------ the selector


@pytest.mark.parametrize("seed", [0, 3])
def test_every_encoder_reads_its_own_order_of_the_random_draw(seed):
    anchors = MismatchedAnchors().select(_ctx(seed=seed))
    assert anchors.ids == RandomAnchors().select(_ctx(seed=seed)).ids  # the same real anchors as `random`
    orders = [anchors.ids_for(e) for e in ("a", "b", "c")]
    assert all(sorted(o) == sorted(anchors.ids) for o in orders)  # a permutation of the one draw
    assert len({tuple(o) for o in orders}) == 3  # and a different one in every space
    for x, first in enumerate(orders):
        for second in orders[x + 1:]:
            assert sum(a == b for a, b in zip(first, second)) < len(first) // 3  # anchor k: another sample


def test_the_orders_are_seeded_and_do_not_depend_on_the_other_encoders():
    first = MismatchedAnchors().select(_ctx(seed=4))
    assert MismatchedAnchors().select(_ctx(seed=4)).encoder_ids == first.encoder_ids
    assert MismatchedAnchors().select(_ctx(seed=5)).encoder_ids["a"] != first.encoder_ids["a"]
    fewer = MismatchedAnchors().select(_ctx(seed=4, encoders=("c", "a")))
    assert fewer.encoder_ids == {e: first.encoder_ids[e] for e in ("a", "c")}


def test_it_declares_itself_the_chance_null_and_no_prefix_nesting():
    assert MismatchedAnchors.chance_null and not RandomAnchors.chance_null
    assert not MismatchedAnchors.prefix_nested


def test_one_encoder_is_refused():
    with pytest.raises(ConfigError, match="no two encoders"):
        MismatchedAnchors().select(_ctx(encoders=("a",)))


# ------------------------------------------------------------------ a run on the toy blobs

SUITE = """\
suite: {seeds: [0, 1], num_anchors: 16, output: results, leaderboards: boards}
tasks:
  - name: blobs
    dataset: {name: toy-blobs, params: {classes: 4}}
    encoders:
      - {name: toy-rotated, label: a, params: {seed: 1}}
      - {name: toy-rotated, label: b, params: {seed: 2, scale: 3.0}}
      - {name: toy-rotated, label: c, params: {seed: 3, scale: 0.5}}
    grid:
      selectors: [random, {name: mismatched, label: shuffled}]
      similarities: [cosine]
      stitchers: [{name: relative, label: relative, params: {epochs: 3}},
                  {name: non-stitched, label: own, params: {epochs: 3}}]
    metrics: [accuracy]
"""


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> pd.DataFrame:
    """The rows of a run of the suite above (the null relabelled ``shuffled``)."""
    folder = tmp_path_factory.mktemp("null")
    (folder / "tasks.yaml").write_text(SUITE)
    registry = Registry(_discover() + [("toy", toy_plugins, "tests 0")])
    runner = Runner(load_suite(folder / "tasks.yaml", registry), registry, quiet=True)
    stats = runner.run()
    assert not stats.failures, stats.failures
    return runner.store.load("blobs")


def _mean(rows: pd.DataFrame, selector: str, stitched: bool) -> float:
    d = rows[(rows["selector"] == selector) & (rows["metric"] == "accuracy") & (rows["status"] == "ok")]
    return d[(d["source"] != d["target"]) == stitched]["value"].mean()


def test_mismatched_anchors_stitch_at_chance_while_random_ones_stitch(stored):
    assert _mean(stored, "random", stitched=True) > 0.9
    assert _mean(stored, "shuffled", stitched=True) < 0.5  # four classes: chance is 0.25
    # within a space the decoder reads its own order on both sides: unaffected
    assert _mean(stored, "shuffled", stitched=False) > 0.9


@pytest.mark.parametrize("form", [lambda rows: rows, flatten], ids=["store", "release"])
def test_the_null_is_found_from_the_stored_class_not_the_label(stored, form):
    nulls = chance_nulls(form(stored))
    assert nulls.equals(stored["selector"] == "shuffled")


def test_the_page_shows_each_method_from_chance_to_own_head(stored, tmp_path):
    text = Stitching().page(stored, Page(tmp_path, "blobs"))
    assert "### From chance to own head (accuracy)" in text
    found = chance_corrected(score(stored, Page(tmp_path, "again")))
    assert list(found["combo"]) == [("random", "cosine", "relative", "-")]
    assert list(found["null"]) == [("shuffled", "cosine", "relative", "-")]
    assert 0.8 < found["point"].iloc[0] <= 1.1 and found["seeds"].iloc[0] == 2
    assert found["low"].iloc[0] <= found["high"].iloc[0]
    lines = [x for x in text.splitlines() if x.startswith("| random · cosine · relative | shuffled")]
    assert sum(x.count("[") for x in lines) == 4  # stitched, null, own head and the ratio, each with its interval


def test_the_null_is_shown_beside_the_ranking_not_ranked_as_a_method(stored, tmp_path):
    kind = Stitching()
    kind.page(stored, Page(tmp_path, "blobs"))
    cells = kind.index_cells(stored, Page(tmp_path, "blobs"))
    ranked = [c["method"] for c in cells if c["rank"] is not None]
    assert ranked == ["random · cosine · relative"]
    nulls = [c for c in cells if "shuffled" in c["method"]]
    assert [c["method"] for c in nulls] == ["shuffled · cosine · relative (chance null)"]
    assert nulls[0]["reference"] and nulls[0]["chance_null"] and nulls[0]["rank"] is None
    from relbench_stitching.main_table import _null_legend

    assert "*(chance null)*" in _null_legend({"t": cells})
    assert not _null_legend({"t": [c for c in cells if c not in nulls]})


# ------------------------------------------------------------------ the formula on constructed rows

RELATIVE = "relbench_relreps.stitchers:RelativeDecoder"
OWN = "relbench_relreps.stitchers:NonStitched"
NULL = "relbench_relreps.selectors:MismatchedAnchors"
RANDOM = "relbench_relreps.selectors:RandomAnchors"
#: per seed: method stitched, null stitched, own head
VALUES = {0: (0.8, 0.3, 0.9), 1: (0.6, 0.2, 0.7)}


def _rows(with_null: bool) -> pd.DataFrame:
    """Flat rows of two encoders and two seeds: random · cosine · relative, its null
    (labelled ``m``) and the non-stitched head, valued as :data:`VALUES`."""
    rows = []
    for seed, (method, null, own) in VALUES.items():
        for source in ("a", "b"):
            for target in ("a", "b"):
                stitched = source != target
                combos = [("random", RANDOM, method if stitched else 0.95)]
                if with_null:
                    combos.append(("m", NULL, null if stitched else 0.95))
                rows += [_row(seed, sel, cls, "cosine", "relative", RELATIVE, source, target, value)
                         for sel, cls, value in combos]
                if not stitched:
                    rows.append(_row(seed, None, None, None, "non-stitched", OWN, source, target, own))
    return pd.DataFrame(rows)


def _row(seed, selector, selector_cls, similarity, stitcher, stitcher_cls, source, target, value) -> dict:
    return {"seed": seed, "selector": selector, "similarity": similarity, "stitcher": stitcher, "regularizer": None,
            "source": source, "target": target, "held_out": None, "metric": "accuracy", "value": value,
            "direction": "higher", "status": "ok", "error": None, "extra": None, "unit": f"{seed}{selector}{target}",
            "inputs.unit.selector.class": selector_cls, "inputs.unit.stitcher.class": stitcher_cls}


def test_the_ratio_is_taken_per_seed_then_averaged(tmp_path):
    found = chance_corrected(score(_rows(with_null=True), Page(tmp_path, "t")))
    per_seed = [(m - n) / (o - n) for m, n, o in VALUES.values()]
    assert found["point"].iloc[0] == pytest.approx(np.mean(per_seed))  # 0.8167, not the ratio of means 0.818
    assert found["std"].iloc[0] == pytest.approx(np.std(per_seed))
    # no per-sample data: the page's draws are paired Student-t draws over the two seeds (one degree of freedom),
    # so the ratio's interval reaches beyond the two seeds' ratios (a bootstrap over two seeds stopped at them)
    assert found["low"].iloc[0] < min(per_seed) < max(per_seed) < found["high"].iloc[0]


def test_chance_ratio_pairs_by_seed_and_leaves_an_own_head_at_chance_undefined():
    ratio = chance_ratio(pd.Series([0.3, 0.7, 0.9], index=[0, 1, 2]), pd.Series([0.2, 0.3], index=[1, 0]),
                         pd.Series([0.9, 0.2], index=[0, 1]))
    assert list(ratio.index) == [0, 1] and np.isnan(ratio[1])
    assert ratio[0] == pytest.approx(0.0)  # stitched at the null: chance
    assert chance_ratio(pd.Series([1.0]), pd.Series([0.25]), pd.Series([1.0]))[0] == pytest.approx(1.0)


def test_a_page_without_null_rows_is_drawn_as_before(tmp_path, monkeypatch):
    rows = _rows(with_null=False)
    text = Stitching().page(rows, Page(tmp_path, "t"))
    assert "From chance" not in text and "null" not in text
    assert not chance_nulls(rows).any() and chance_corrected(score(rows, Page(tmp_path, "t"))).empty
    monkeypatch.setattr(page, "chance_section", lambda scored, metric=None: "")  # the page without the section
    assert Stitching().page(rows, Page(tmp_path, "t")) == text



# ------------------------------------------------------------------ the label-permutation null


def test_the_permutation_null_of_accuracy_is_the_chance_given_both_class_frequencies():
    from relbench_metrics import Accuracy
    from relbench_stitching.permutation_null import permuted_score

    rng = np.random.default_rng(3)
    y_true, y_pred = rng.integers(0, 4, 2000), rng.choice(4, 2000, p=[0.7, 0.1, 0.1, 0.1])
    expected = sum(np.mean(y_true == c) * np.mean(y_pred == c) for c in range(4))  # E[accuracy] under permutation
    assert permuted_score(y_true, y_pred, Accuracy(), permutations=200) == pytest.approx(expected, abs=0.005)
    perfect = permuted_score(y_true, y_true, Accuracy())
    assert perfect < 0.3  # a perfect decoder's predictions, paired at random: chance


def test_without_a_declared_null_the_page_takes_the_label_permutation_null(stored, tmp_path):
    """The ratio per seed against a slow reference: every stitched cell's predictions
    scored by scikit-learn against the labels in the same seeded random orders."""
    from sklearn.metrics import accuracy_score

    from relbench.samples import read_predictions
    from relbench.uncertainty import with_samples
    from relbench_metrics import Accuracy
    from relbench_stitching.permutation_null import NULL_SEED, PERMUTATIONS

    rows = stored[stored["selector"] != "shuffled"]
    found = chance_corrected(score(rows, Page(tmp_path, "t")), Accuracy())
    assert list(found["combo"]) == [("random", "cosine", "relative", "-")] and found["null"].iloc[0] is None
    acc = rows[(rows["metric"] == "accuracy") & (rows["status"] == "ok")]
    stitched = acc[(acc["selector"] == "random") & (acc["source"] != acc["target"])]
    own = acc[(acc["stitcher"] == "own")]
    nulls = []
    for record in with_samples(stitched, rows, ["source"])["per_sample"]:
        y_true, y_pred = read_predictions(record)
        generator = np.random.default_rng(NULL_SEED)
        nulls.append(np.mean([accuracy_score(y_true, y_pred[generator.permutation(len(y_pred))])
                              for _ in range(PERMUTATIONS)]))
    null = pd.Series(nulls, index=stitched.index).groupby(stitched["seed"]).mean()
    ratio = (stitched.groupby("seed")["value"].mean() - null) / (own.groupby("seed")["value"].mean() - null)
    assert found["point"].iloc[0] == pytest.approx(ratio.mean(), abs=1e-9)
    assert found["null_score"].iloc[0] == pytest.approx(null.mean(), abs=1e-9) and 0.15 < null.mean() < 0.35
    assert found["low"].iloc[0] <= found["point"].iloc[0] <= found["high"].iloc[0] + 1e-9
    text = Stitching().page(rows, Page(tmp_path, "blobs", metrics={"accuracy": Accuracy()}))
    assert "### From chance to own head (accuracy)" in text and "null (labels permuted)" in text
    assert "From chance" not in Stitching().page(rows, Page(tmp_path, "blobs"))  # no metric plugin: no null
