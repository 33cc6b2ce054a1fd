"""The anchor-budget kind: nested budgets (each a prefix of one selection per seed), rows
typed with the budget and the anchors used, the 95 % budget statistic, its page, and the
stitching kind left as it was."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from relbench.interfaces import Anchors, DatasetData
from relbench.pages import Page
from relbench.testing import TaskRunDouble, make_task, spec
from relbench_irp.fps import FPSSelector
from relbench_metrics import Accuracy
from relbench_param.selector import PARAMSelector
from relbench_relreps import NonStitched, RandomAnchors, RelativeDecoder
from relbench_relreps.similarities import Cosine
from relbench_stitching.budget import AnchorBudget, AnchorPrefixes, log_budgets
from relbench_stitching.budget_page import budget_interval, smallest_budget
from relbench_stitching.kind import Stitching
from test_core_sharing import _banks  # encoders a and b (a rotation of a), 4 classes in 12 dims

DATA = DatasetData("blobs", {}, [str(i) for i in range(4)], {"x": "image"}, "x")
HEAD = {"epochs": 2, "batch_size": 32}


class RecordingRun(TaskRunDouble):
    """The double, recording the anchor ids of every realisation."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.realised: list[list[str]] = []

    def realise(self, anchors, label):
        self.realised.append(list(anchors.ids))
        return super().realise(anchors, label)


def _task(selectors, stitchers=None, seeds=(0, 1), **params):
    stitchers = stitchers or [spec(RelativeDecoder, **HEAD), spec(NonStitched, **HEAD)]
    return make_task(AnchorBudget, encoders=["a", "b"], metrics=[spec(Accuracy)], seeds=list(seeds), num_anchors=32,
                     grid={"selectors": selectors, "similarities": [spec(Cosine)], "stitchers": stitchers}, **params)


def _run(selectors, **params) -> RecordingRun:
    run = RecordingRun(_task(selectors, **params), banks=_banks(), dataset=DATA)
    run.run()
    return run


def test_the_default_budgets_double_from_eight_up_to_the_tasks_anchors():
    assert log_budgets(300) == [8, 16, 32, 64, 128, 256, 300]
    assert log_budgets(64) == [8, 16, 32, 64]
    assert log_budgets(5) == [5]
    assert AnchorBudget().budgets_of(_task([spec(RandomAnchors)])) == [8, 16, 32]
    assert AnchorBudget(budgets=[16, 4, 16]).budgets_of(_task([spec(RandomAnchors)])) == [4, 16]


def test_every_budgets_anchors_are_a_prefix_of_the_seeds_one_selection():
    run = _run([spec(RandomAnchors)], budgets=[4, 8, 32])
    full = [ids for ids in run.realised if len(ids) == 32]
    assert full and all(ids == full[0] for ids in full[:2])  # one selection, realised in each encoder
    for ids in run.realised:
        assert any(ids == whole[:len(ids)] for whole in full)
    assert {len(ids) for ids in run.realised} == {4, 8, 32}


def test_a_prefix_cuts_every_encoders_ids_and_is_made_once():
    whole = Anchors(ids=["i0", "i1", "i2", "i3"], encoder_ids={"b": ["j0", "j1", "j2", "j3"]})
    prefixes = AnchorPrefixes()
    cut = prefixes.prefix(whole, 2)
    assert cut.ids == ["i0", "i1"] and cut.encoder_ids == {"b": ["j0", "j1"]} and cut.info["prefix_of"] == 4
    assert prefixes.prefix(whole, 2) is cut and prefixes.prefix(whole, 9) is whole


def test_rows_carry_the_budget_and_the_anchors_used_as_typed_columns():
    df = _run([spec(RandomAnchors)], budgets=[4, 8, 32]).frame()
    relative = df[df["stitcher"] == RelativeDecoder.name]
    assert sorted(relative["num_anchors"].unique()) == [4, 8, 32]
    assert (relative["anchors_used"] == relative["num_anchors"]).all()
    assert set(df[df["stitcher"] == NonStitched.name]["num_anchors"]) == {0}
    assert all(isinstance(v, int) for v in df["num_anchors"]) and all(isinstance(v, int) for v in df["anchors_used"])
    stitched = relative[(relative["metric"] == "accuracy") & (relative["source"] != relative["target"])]
    assert len(stitched) == 2 * 2 * 3  # seeds × ordered pairs × budgets


def test_a_selector_that_stops_early_reports_the_budget_it_used():
    fps = spec(FPSSelector, delta=0.9)
    df = _run([fps], stitchers=[spec(RelativeDecoder, **HEAD)], seeds=(0,), budgets=[2, 32]).frame()
    largest = df[df["num_anchors"] == 32]
    assert (largest["anchors_used"] < 32).all() and (largest["anchors_used"] >= 1).all()
    assert (df[df["num_anchors"] == 2]["anchors_used"] <= 2).all()


def test_selectors_whose_prefix_is_not_their_choice_and_budgets_beyond_the_selection_are_refused():
    with pytest.raises(ValueError, match=r"selectors \['param'\] choose their anchors for one count"):
        AnchorBudget().validate(_task([spec(PARAMSelector)]))
    with pytest.raises(ValueError, match=r"budgets \[64\] are not whole numbers from 1 to the task's num_anchors"):
        AnchorBudget(budgets=[8, 64]).validate(_task([spec(RandomAnchors)]))


def test_the_95_percent_budget_is_the_first_reaching_that_share_of_the_full_score():
    budgets = np.array([8, 16, 32, 64])
    assert smallest_budget(np.array([0.5, 0.8, 0.96, 1.0]), budgets, higher=True) == 32
    assert smallest_budget(np.array([0.5, 0.8, 0.94, 1.0]), budgets, higher=True) == 64
    assert smallest_budget(np.array([2.0, 1.2, 1.04, 1.0]), budgets, higher=False) == 32
    assert budget_interval(np.array([[0.5, 0.8, 0.96, 1.0]] * 3), budgets, higher=True) == (32, 32, 32)


def test_the_95_percent_budgets_interval_draws_whole_curves_from_the_seeds_student_t():
    budgets = np.array([8, 16, 32, 64])
    early, late = [0.5, 0.97, 0.98, 1.0], [0.5, 0.6, 0.7, 1.0]
    # mean curve 0.5, 0.785, 0.84, 1.0 → 64; t with one degree of freedom draws curves that reach at 16
    assert budget_interval(np.array([early, late]), budgets, higher=True) == (64, 16, 64)
    # five seeds that all reach at 32: each budget's draws spread as its t-interval, and the
    # 95 % budget of a drawn curve moves only where a t-interval straddles the 95 % line
    rng = np.random.default_rng(0)
    seeds = np.array([0.5, 0.8, 0.97, 1.0]) + rng.normal(0, 0.004, size=(5, 4))
    assert budget_interval(seeds, budgets, higher=True) == (32, 32, 32)
    # 32 reaches 95 % on the mean curve, but not by much: its t-interval reaches below the line, so
    # some drawn curves first reach at 64 (a percentile bootstrap over these five seeds gave (32, 32, 32))
    close = np.array([0.5, 0.8, 0.958, 1.0]) + np.random.default_rng(0).normal(0, 0.01, size=(5, 4))
    assert budget_interval(close, budgets, higher=True) == (32, 32, 64)


def test_the_page_draws_a_curve_per_method_with_its_95_percent_budget(tmp_path):
    run = _run([spec(RandomAnchors)], budgets=[4, 8, 32])
    page = Page(tmp_path, "blobs")
    text = AnchorBudget(budgets=[4, 8, 32]).page(run.frame(), page)
    assert "### Anchors needed for 95 % of the full-budget accuracy" in text
    assert "![curve](figures/blobs/budget-random-cosine-relative.png)" in text
    assert (tmp_path / "figures" / "blobs" / "budget-random-cosine-relative.png").exists()
    assert (tmp_path / "figures" / "blobs" / "budget-random-cosine-relative.svg").exists()
    assert page.headline["best"] == "random · cosine · relative" and page.headline["budget"] in (4, 8, 32)
    assert "non-stitched" in text and "own" in text
    assert "kept" not in text  # no method prunes its anchors: no column for it
    sentence = AnchorBudget().meaning(page.headline, "higher")
    assert sentence.startswith(f"random · cosine · relative needs {page.headline['budget']} of its 32 anchors (95 % "
                               f"interval ")
    assert "to reach 95 % of its full-budget accuracy" in sentence


def test_the_stitching_kind_keeps_its_parameters_columns_and_plan():
    assert [f.name for f in dataclasses.fields(Stitching)] == ["protocol", "held_out", "budget_task"]
    assert Stitching.presentation_params == ("budget_task",)  # names a companion: in no unit's identity
    assert Stitching.columns == ("selector", "similarity", "stitcher", "regularizer", "source", "target", "held_out")
    assert Stitching.row_fields == {"role": str, "needs_both_spaces": bool}
    task = _task([spec(RandomAnchors)])
    stitching = make_task(Stitching, encoders=["a", "b"], metrics=[spec(Accuracy)], seeds=[0, 1], num_anchors=32,
                          grid=task.grid)
    assert AnchorBudget().plan(task) == Stitching().plan(stitching)


def test_a_method_that_prunes_its_anchors_shows_how_many_it_kept_beside_those_it_was_given(tmp_path):
    """IRP prunes the anchors it is given (farthest-point sampling to δ) and inverts only
    those it keeps: the page's *kept* column is the mean of its ``anchors_kept`` diagnostic
    over its stitched rows, per budget; a method that keeps every anchor shows -."""
    from relbench_irp.stitchers import IRPStitcher

    task = _task([spec(RandomAnchors)], stitchers=[spec(RelativeDecoder, **HEAD), spec(IRPStitcher, **HEAD)],
                 budgets=[8, 32])
    run = RecordingRun(task, banks=_banks(), dataset=DATA)
    run.run()
    df = run.frame()
    text = AnchorBudget(budgets=[8, 32]).page(df, Page(tmp_path, "blobs"))
    assert "*kept*: the mean anchors the fit kept" in text
    curve = text.split("by anchor budget")[1]
    header = next(line for line in curve.splitlines() if line.startswith("| selector"))
    names = [h.strip() for h in header.strip("|").split("|")]
    assert names[names.index("used") + 1] == "kept"
    for budget in (8, 32):
        irp = df[(df["stitcher"] == "irp") & (df["metric"] == "anchors_kept") & (df["num_anchors"] == budget)
                 & (df["source"] != df["target"])]
        expected = irp.groupby("seed")["value"].mean().mean()  # mean over seeds of each seed's mean
        assert 1 <= expected < budget  # pruned
        row = next(line for line in curve.splitlines() if "| irp " in line and f"| {budget} " in line)
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[names.index("kept")] == f"{expected:.1f}"
    relative = next(line for line in curve.splitlines() if "| relative " in line and "| 32 " in line)
    assert [c.strip() for c in relative.strip("|").split("|")][names.index("kept")] == "-"


def test_a_combination_that_needs_both_spaces_is_marked_where_the_index_names_it():
    """Procrustes fits its map on both spaces' anchors: the kind marks it (the index's
    line of the task, when it is the best, and its ranking) as the stitching kind does."""
    from relbench_irp.stitchers import ProcrustesStitcher
    from relbench_stitching.cells import BOTH_SPACES

    task = _task([spec(RandomAnchors)], stitchers=[spec(RelativeDecoder, **HEAD), spec(ProcrustesStitcher, **HEAD)],
                 budgets=[8, 32])
    run = RecordingRun(task, banks=_banks(), dataset=DATA)
    run.run()
    marks = AnchorBudget(budgets=[8, 32]).ranking_marks(run.frame())
    assert {label: mark for label, (mark, _) in marks.items()} == {"random · procrustes": BOTH_SPACES}
