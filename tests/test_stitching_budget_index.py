"""The anchor-budget kind beyond its page: its index cells (the page's numbers, handed
over), the index's section *Anchor budget* over two tasks, and its rows of ``relbench
export --summary``, all on toy rows built here."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from relbench.leaderboard import kind_sections
from relbench.api import Page, fmt, fmt_interval
from relbench.summary import CELL_COLUMNS, task_summary
from relbench.testing import make_task, spec
from relbench_metrics import Accuracy
from relbench_relreps import NonStitched, RandomAnchors, RelativeDecoder
from relbench_relreps.similarities import Cosine
from relbench_stitching import budget_page
from relbench_stitching.budget import AnchorBudget
from relbench_stitching.budget_index import (BUDGET_MEASURE, PEAKED, budget_text, index_cells, peak, ranked_methods,
                                             section, summary_cells)
from relbench_stitching.budget_page import measure

SEEDS = (0, 1, 2)
RANDOM, FPS = "random · cosine · relative", "fps · cosine · relative"
#: per task, per method (selector), the stitched score of seed 0 at each budget (seed s adds 0.01·s)
CURVES = {
    "small": {"random": {8: 0.50, 16: 0.96, 32: 1.00}, "fps": {8: 0.94, 16: 0.96, 32: 0.98}},
    "large": {"random": {8: 0.50, 16: 0.60, 64: 1.00}, "fps": {8: 0.50, 16: 0.97, 64: 1.00}},
    # random peaks at 16 anchors and falls at the full budget (as affine's least squares does at the width)
    "fall": {"random": {8: 0.40, 16: 0.80, 64: 0.50}, "fps": {8: 0.50, 16: 0.90, 64: 1.00}},
}
#: the non-stitched heads' score on their own encoders (no anchors)
OWN = 0.9


def _row(selector, similarity, stitcher, source, target, budget, seed, value) -> dict:
    return {"metric": "accuracy", "value": value, "direction": "higher", "status": "ok", "selector": selector,
            "similarity": similarity, "stitcher": stitcher, "regularizer": None, "source": source,
            "target": target, "held_out": None, "num_anchors": budget, "anchors_used": budget, "seed": seed}


def _rows(task: str) -> pd.DataFrame:
    """Rows of a two-encoder task: per method, budget and seed its stitched pairs (a→b,
    b→a) and its own pairs (which the page leaves out where stitched ones exist), and the
    non-stitched heads on their own encoders."""
    rows = []
    for seed in SEEDS:
        for selector, curve in CURVES[task].items():
            for budget, value in curve.items():
                for source, target in (("a", "b"), ("b", "a")):
                    rows.append(_row(selector, "cosine", "relative", source, target, budget, seed, value + 0.01 * seed))
                for encoder in "ab":
                    rows.append(_row(selector, "cosine", "relative", encoder, encoder, budget, seed, 0.2))
        for encoder in "ab":
            rows.append(_row(None, None, "non-stitched", encoder, encoder, 0, seed, OWN + 0.01 * seed))
    return pd.DataFrame(rows)


def _cells(task: str) -> list[dict]:
    return index_cells(measure(_rows(task)))


def test_index_cells_hold_each_methods_full_score_95_percent_budget_and_curve():
    cells = _cells("small")
    assert [c["method"] for c in cells] == [RANDOM, FPS]  # the page's order: best full score first
    fps = cells[1]
    assert fps["selector"] == "fps" and fps["regularizer"] is None and fps["metric"] == "accuracy"
    assert fps["score"] == pytest.approx(0.99) and fps["low"] < 0.99 < fps["high"] and fps["seeds"] == 3
    assert (fps["largest"], fps["budget"], fps["budget_low"], fps["budget_high"]) == (32, 8, 8, 8)
    assert (cells[0]["budget"], cells[0]["largest"]) == (16, 32)
    assert [k for k, _ in fps["curve"]] == [8, 16, 32]
    assert [v for _, v in fps["curve"]] == pytest.approx([0.95, 0.97, 0.99])
    assert json.loads(json.dumps(cells, allow_nan=False)) == cells  # the manifest keeps them as JSON


def test_index_cells_are_the_numbers_the_page_drew(tmp_path, monkeypatch):
    kind, rows = AnchorBudget(), _rows("small")
    calls = []
    monkeypatch.setattr(budget_page, "measure", lambda df: calls.append(1) or measure(df))
    page = Page(tmp_path, "small")
    kind.page(rows, page)
    cells = kind.index_cells(rows, page)
    assert len(calls) == 1 and cells == _cells("small")  # handed over, not computed again
    assert page.headline["best"] == cells[0]["method"] and page.headline["budget"] == cells[0]["budget"]
    assert kind.index_cells(rows.copy(), page) == cells and len(calls) == 2  # other rows: computed for them


def test_a_task_without_a_method_with_anchors_has_no_cells():
    rows = _rows("small")
    references = measure(rows[rows["num_anchors"] == 0])
    assert index_cells(references) is None
    assert [(c["stitcher"], c["measure"]) for c in summary_cells(references)] == [("non-stitched", "own")]
    assert AnchorBudget().index_cells(rows.iloc[:0], None) is None


def test_the_section_tables_methods_by_tasks_and_names_the_method_needing_fewest_anchors():
    text = AnchorBudget.index_section({"small": _cells("small"), "large": _cells("large")})
    assert text.startswith("## Anchor budget\n\n- **Measured:** per method, the smallest anchor budget")
    # fps: 8 of 32 and 16 of 64, a quarter of the full budget each; random: 16 of 32 and 64 of 64
    assert "- **Fewest anchors:** fps · cosine · relative, 25 % of the full budget on average: 8 [8, 8] of 32 on " \
           "small; 16 [16, 16] of 64 on large.\n" in text
    assert "fewer anchors than the full budget are shown to suffice for 95 % of fps · cosine · relative's" in text
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| method"))
    assert [c.strip() for c in lines[header].strip("|").split("|")] == ["method", "small", "large"]
    body = [[c.strip() for c in line.strip("|").split("|")] for line in lines[header + 2:header + 4]]
    assert body == [[FPS, "8 [8, 8] of 32", "16 [16, 16] of 64"], [RANDOM, "16 [16, 16] of 32", "64 [64, 64] of 64"]]
    assert "[small](small.md) (accuracy)" in text and max(map(len, lines[header:])) <= 160


def test_the_section_says_when_the_interval_reaches_the_full_budget():
    cells = _cells("large")
    late = [dict(c, budget_high=c["largest"]) for c in cells]
    text = section({"large": late})
    assert "fps · cosine · relative's interval reaches the full budget on every task" in text
    text = section({"small": _cells("small"), "large": late})
    assert "shown to suffice for fps · cosine · relative on small only" in text


def test_a_wide_section_is_split_into_tables_of_at_most_160_characters():
    cells = _cells("small")
    text = section({f"anchor-budget-task-number-{i}": cells for i in range(8)})
    table_lines = [line for line in text.splitlines() if line.startswith("|")]
    assert text.count("| method") > 1 and max(map(len, table_lines)) <= 160
    assert all(text.count(f"| anchor-budget-task-number-{i} ") == 1 for i in range(8))  # each task once


def test_methods_measured_on_more_tasks_rank_first():
    def cell(method, budget):
        return {"method": method, "budget": budget, "budget_low": budget, "budget_high": budget, "largest": 100}

    ranked = ranked_methods({"t1": [cell("x", 10), cell("y", 50)], "t2": [cell("y", 30)]})
    assert [(m, sorted(tasks), share) for m, tasks, share in ranked] == [("y", ["t1", "t2"], 0.4), ("x", ["t1"], 0.1)]


def test_no_section_without_cells():
    assert AnchorBudget.index_section({}) is None and section({"small": []}) is None
    task = make_task(AnchorBudget, name="small", encoders=["a", "b"])
    assert kind_sections([task], {"small": {"cells": None}}) == []
    assert kind_sections([task], {"small": {"cells": _cells("small")}})[0].startswith("## Anchor budget")


def _task(name: str):
    return make_task(AnchorBudget, name=name, encoders=["a", "b"], metrics=[spec(Accuracy)], seeds=list(SEEDS),
                     grid={"selectors": [spec(RandomAnchors)], "similarities": [spec(Cosine)],
                           "stitchers": [spec(RelativeDecoder), spec(NonStitched)]})


def test_summary_rows_are_the_pages_scores_per_budget_and_its_95_percent_budgets(tmp_path):
    rows = _rows("small")
    frame = task_summary(_task("small"), rows)
    assert list(frame.columns) == ["task", "kind", "selector", "similarity", "stitcher", "regularizer",
                                   *CELL_COLUMNS, "measure", "num_anchors", "anchors_used", "revision"]
    assert set(frame["kind"]) == {"anchor-budget"} and frame["tie_group"].isna().all()
    budgets = frame[frame["measure"] == BUDGET_MEASURE]
    assert list(zip(budgets["selector"], budgets["score"], budgets["low"], budgets["high"], budgets["num_anchors"],
                    budgets["n"])) == [("random", 16, 16, 16, 32, 3), ("fps", 8, 8, 8, 32, 3)]
    fps = frame[(frame["selector"] == "fps") & (frame["measure"] == "stitched")]
    assert list(fps["num_anchors"]) == [8, 16, 32] and list(fps["score"]) == pytest.approx([0.95, 0.97, 0.99])
    own = frame[frame["stitcher"] == "non-stitched"]
    assert list(own["measure"]) == ["own"] and list(own["num_anchors"]) == [0] and own["selector"].isna().all()
    assert float(own["score"].iloc[0]) == pytest.approx(OWN + 0.01)
    text = AnchorBudget().page(rows, Page(tmp_path, "small"))  # the page shows the same numbers
    for _, r in frame.iterrows():
        shown = (f"{r['score']} [{r['low']}, {r['high']}]" if r["measure"] == BUDGET_MEASURE
                 else f"{fmt(r['score'])} {fmt_interval(r['low'], r['high'])}")
        assert shown in text


def test_summary_cells_score_every_budget_of_every_combination_once():
    measured = measure(_rows("large"))
    cells = summary_cells(measured)
    scores = [(c["selector"], c["num_anchors"]) for c in cells if c["measure"] != BUDGET_MEASURE]
    assert len(scores) == len(set(scores)) == len(measured.curves) == 2 * 3 + 1
    means = {(c["selector"], c["num_anchors"]): c["score"] for c in cells if c["measure"] == "stitched"}
    assert means[("random", 16)] == pytest.approx(np.mean([0.60 + 0.01 * s for s in SEEDS]))
    assert AnchorBudget().matrix_cells(_rows("large"), None) is None and not AnchorBudget.matrix_axes


def test_the_board_s_curves_are_the_summary_s_scores_per_budget_without_the_95_percent_budgets():
    rows = _rows("large")
    curves = AnchorBudget().curve_cells(rows, None)
    assert AnchorBudget.curve_axis == "num_anchors"
    scores = [c for c in summary_cells(measure(rows)) if c["measure"] != BUDGET_MEASURE]
    assert [(c["selector"], c["measure"], c["num_anchors"], c["score"], c["low"], c["high"], c["n"]) for c in curves] \
        == [(c["selector"], c["measure"], c["num_anchors"], c["score"], c["low"], c["high"], c["n"]) for c in scores]
    assert all("anchors_used" not in c and "tie_group" not in c for c in curves)
    assert [c["num_anchors"] for c in curves if c["measure"] == "own"] == [0]  # the reference: a level line


def test_a_curve_that_falls_at_the_full_budget_is_marked_and_never_heads_the_section():
    cells = {c["method"]: c for c in _cells("fall")}
    fallen, rising = cells[RANDOM], cells[FPS]
    assert fallen["budget"] == 16 and rising["budget"] == 64  # 95 % of a fallen 0.51 is reached at 16 anchors
    assert peak(fallen) == (16, pytest.approx(0.81)) and peak(rising) is None
    assert budget_text(fallen) == f"16 [16, 16] of 64 {PEAKED} 0.810 at 16" and PEAKED not in budget_text(rising)
    assert [m for m, _, _ in ranked_methods({"fall": list(cells.values())})] == [FPS, RANDOM]
    text = section({"fall": list(cells.values())})
    assert f"**Fewest anchors:** {FPS}," in text and f"**Not ranked first:** {RANDOM}:" in text
    assert "add at most" not in text


def test_peak_follows_the_metric_s_direction_and_the_95_percent_rule():
    def cell(curve, direction="higher"):
        return {"score": curve[-1][1], "direction": direction, "curve": curve}

    assert peak(cell([[8, 0.90], [16, 0.86]])) is None  # 0.86 ≥ 0.95 × 0.90: within the rule
    assert peak(cell([[8, 0.90], [16, 0.85]])) == (8, 0.90)
    assert peak(cell([[8, 0.10], [16, 0.20]], "lower")) == (8, 0.10)  # an error falling is better
    assert peak(cell([[8, 0.20], [16, 0.10]], "lower")) is None
    assert peak({"score": 0.5, "direction": "higher", "curve": []}) is None
    assert peak(cell([[8, -0.6], [16, -0.5]])) is None  # best at the full budget, whatever the sign
