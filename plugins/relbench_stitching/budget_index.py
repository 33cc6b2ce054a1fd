"""The anchor-budget kind's numbers beyond its page: its cells of the leaderboard index
and their section *Anchor budget* (per method and task, the smallest budget reaching
95 % of the full-budget score, with its interval), and its rows of ``relbench export
--summary``. Every number is the page's (:func:`relbench_stitching.budget_page.measure`).

**Fewest anchors across tasks.** Tasks sweep different largest budgets (300 anchors on
one, 768 on another), so methods are compared by the *share* of its full budget a
method's 95 % budget is, averaged over the tasks it was measured on; methods measured on
more tasks come first, so that a method missing from a task cannot win on the others
alone (:func:`ranked_methods`).

**Curves that fall at the full budget.** The 95 % budget is measured against the score at
the largest budget. A method whose curve peaks earlier and falls there (affine's least
squares does when the budget reaches the embeddings' width) reaches 95 % of that fallen
score with few anchors, which says nothing about how many anchors it needs to work: such
a method is marked (:func:`peak`) and ranked after the others, so it never heads the
section.
"""

from __future__ import annotations

import numpy as np

from relbench.api import deferred_import, table
from relbench_stitching.budget_page import FRACTION, SHARE, Measured
from relbench_stitching.intervals import COMBO
from relbench_stitching.scores import combo_label

pd = deferred_import("pandas")

#: the ``measure`` of a summary row holding a method's 95 % budget (its score: a number of anchors)
BUDGET_MEASURE = "budget-95"
#: a table cell of a method the task did not measure
MISSING = "—"
#: marks a 95 % budget measured against a curve that falls at the full budget (:func:`peak`)
PEAKED = "†"


def _finite(value: float) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


def _plugins(row: pd.Series) -> dict[str, str | None]:
    """The combination's plugin labels by :data:`COMBO` column, None where it has none."""
    return {c: None if row[c] == "-" else row[c] for c in COMBO}


def _curve_of(measured: Measured, combo: tuple) -> pd.DataFrame:
    """The rows of ``measured.curves`` of the combination ``combo`` (its :data:`COMBO`
    values), smallest budget first."""
    curves = measured.curves
    return curves[(curves[COMBO] == list(combo)).all(axis=1)]


def index_cells(measured: Measured) -> list[dict] | None:
    """Per method with anchors, in the page's order (best full-budget score first): its
    ``method`` label and plugins, the ``metric`` and its ``direction``, its full-budget
    ``score`` with the ends of its 95 % t-interval over seeds (``low``, ``high``; None
    where none), ``seeds``, the ``largest`` budget, its 95 % ``budget`` and that
    budget's interval (``budget_low``, ``budget_high``), and its ``curve``: ``[budget,
    mean score]`` per budget, smallest first. None when no method has anchors."""
    if not len(measured.summary):
        return None
    return [{"method": combo_label(r), **_plugins(r), "metric": measured.metric, "direction": measured.direction,
             "score": float(r["full"]), "low": _finite(r["full_ci"][0]), "high": _finite(r["full_ci"][1]),
             "seeds": int(r["seeds"]), "largest": int(r["largest"]), "budget": int(r["budget"]),
             "budget_low": int(r["budget_lo"]), "budget_high": int(r["budget_hi"]),
             "curve": [[int(c["num_anchors"]), _finite(c["mean"])]
                       for _, c in _curve_of(measured, tuple(r[COMBO])).iterrows()]}
            for _, r in measured.summary.iterrows()]


def summary_cells(measured: Measured) -> list[dict]:
    """The page's tables as rows of ``relbench export --summary``: per combination (the
    page's methods, best first, then the references without anchors), its score at each
    budget (``measure``: ``stitched``, or ``own`` for a reference scored on its own
    encoders; ``num_anchors``: the budget, 0 for no anchors; ``anchors_used``: the mean
    anchors fitted with), then, for a method with anchors, its 95 % budget (``measure``
    :data:`BUDGET_MEASURE`; ``score``, ``low``, ``high``: the budget and its interval's
    ends; ``num_anchors``: the largest budget, whose score it reaches 95 % of).
    ``tie_group`` is None: the page groups no indistinguishable cells."""
    summary = {tuple(r[COMBO]): r for _, r in measured.summary.iterrows()}
    cells = []
    for combo in dict.fromkeys([*summary, *measured.curves[COMBO].itertuples(index=False, name=None)]):
        cells += [_score_cell(measured, c) for _, c in _curve_of(measured, combo).iterrows()]
        if combo in summary:
            cells.append(_budget_cell(measured, summary[combo]))
    return cells


def _score_cell(measured: Measured, point: pd.Series) -> dict:
    return {**_plugins(point), "metric": measured.metric, "measure": "stitched" if point["stitched"] else "own",
            "num_anchors": int(point["num_anchors"]), "score": float(point["mean"]), "low": _finite(point["lo"]),
            "high": _finite(point["hi"]), "n": int(point["seeds"]), "tie_group": None,
            "anchors_used": _finite(point["used"])}


def _budget_cell(measured: Measured, method: pd.Series) -> dict:
    return {**_plugins(method), "metric": measured.metric, "measure": BUDGET_MEASURE,
            "num_anchors": int(method["largest"]), "score": int(method["budget"]), "low": int(method["budget_lo"]),
            "high": int(method["budget_hi"]), "n": int(method["seeds"]), "tie_group": None,
            "anchors_used": _finite(method["used"])}


def peak(cell: dict) -> tuple[int, float] | None:
    """``(budget, mean score)`` of the best point of a method's mean curve (its index
    cell's ``curve``; best in the metric's ``direction``) where the full-budget score falls
    short of :data:`FRACTION` of it, the rule of the 95 % budget turned on the curve's own
    best; None where the full budget scores within that of the best (or no curve is kept)."""
    points = [(int(b), float(s)) for b, s in cell.get("curve") or () if s is not None and np.isfinite(s)]
    if not points:
        return None
    higher = cell.get("direction") != "lower"
    budget, best = max(points, key=lambda p: (p[1] if higher else -p[1], -p[0]))  # best score, fewest anchors
    if budget == max(b for b, _ in points):  # the curve is best at the full budget: nothing fell
        return None
    full = cell["score"]
    return (budget, best) if (full < FRACTION * best if higher else full > best / FRACTION) else None


def budget_text(cell: dict) -> str:
    """``k [low, high] of K``: a cell's 95 % budget, its interval and the largest budget;
    followed by :data:`PEAKED` and the curve's best point where :func:`peak` finds one."""
    text = f"{cell['budget']} [{cell['budget_low']}, {cell['budget_high']}] of {cell['largest']}"
    top = peak(cell)
    return f"{text} {PEAKED} {top[1]:.3f} at {top[0]}" if top else text


def ranked_methods(cells_by_task: dict[str, list[dict]]) -> list[tuple[str, dict[str, dict], float]]:
    """Per method of the cells: its label, its cell per task and the mean over those
    tasks of the share of the full budget its 95 % budget is; methods whose curve falls at
    the full budget on some task (:func:`peak`) last, then methods measured on more tasks
    first, then by that share, smallest first (ties in the order the cells name them)."""
    by_method: dict[str, dict[str, dict]] = {}
    for task, cells in cells_by_task.items():
        for cell in cells:
            by_method.setdefault(cell["method"], {})[task] = cell
    ranked = [(method, tasks, float(np.mean([c["budget"] / c["largest"] for c in tasks.values()])))
              for method, tasks in by_method.items()]
    return sorted(ranked, key=lambda m: (any(peak(c) for c in m[1].values()), -len(m[1]), m[2]))


def summary_lines(cells_by_task: dict[str, list[dict]]) -> str:
    """The section's three lines: what is measured, the method needing fewest anchors, and what that means."""
    ranked = ranked_methods(cells_by_task)
    best, mine, share = ranked[0]
    each = "; ".join(f"{budget_text(c)} on {task}" for task, c in mine.items())
    shown = [task for task, c in mine.items() if c["budget_high"] < c["largest"]]
    if any(peak(c) for c in mine.values()):
        means = (f"every method's curve falls at the full budget on some task ({PEAKED}), so no 95 % budget here "
                 f"says how many anchors a method needs; see the curves on the tasks' pages.")
    elif len(shown) == len(mine):
        means = (f"fewer anchors than the full budget are shown to suffice for {SHARE} of {best}'s full-budget score "
                 f"on every task (each interval ends below the full budget).")
    elif shown:
        means = (f"fewer anchors are shown to suffice for {best} on {', '.join(shown)} only; elsewhere its "
                 f"interval reaches the full budget, so these seeds do not show that fewer anchors suffice there.")
    else:
        means = (f"{best}'s interval reaches the full budget on every task: these seeds do not show that fewer "
                 f"anchors than the full budget suffice.")
    fallen = [method for method, tasks, _ in ranked if any(peak(c) for c in tasks.values())]
    marked = (f"- **Not ranked first:** {', '.join(fallen)}: {PEAKED} marks a task where the full-budget score is "
              f"below {SHARE} of the curve's best mean score (shown, with its budget), so the 95 % budget there is "
              f"measured against a fallen score.\n") if fallen and fallen[0] != best else ""
    return (f"- **Measured:** per method, the smallest anchor budget whose mean score over seeds reaches {SHARE} of "
            f"its score at the task's largest budget (nested anchor sets; interval from paired Student-t draws over "
            f"seeds).\n"
            f"- **Fewest anchors:** {best}, {round(share * 100)} % of the full budget on average: {each}.\n"
            f"- **Means:** {means}\n{marked}")


def section(cells_by_task: dict[str, list[dict]]) -> str | None:
    """The index's section *Anchor budget*: its three-line summary (:func:`summary_lines`)
    and a table of methods × tasks whose cells read ``k [low, high] of K``
    (:func:`budget_text`), methods in the order of :func:`ranked_methods`,
    split so that no line is wider than 160 characters; None when no task has cells."""
    found = {task: cells for task, cells in cells_by_task.items() if cells}
    if not found:
        return None
    rows = [[method, *(budget_text(tasks[t]) if t in tasks else MISSING for t in found)]
            for method, tasks, _ in ranked_methods(found)]
    pages = ", ".join(f"[{task}]({task}.md) ({cells[0]['metric']})" for task, cells in found.items())
    legend = (f"Cells: the {SHARE} budget [its 95 % interval, from paired Student-t draws over seeds] of the task's "
              f"largest budget; {PEAKED} *s at b*: the method's curve peaks at b anchors with mean score s, and its "
              f"full-budget score falls short of {SHARE} of s; {MISSING}: not measured. Rows: methods with a "
              f"{PEAKED} last, then methods measured on more tasks first, then by their mean share of the full "
              f"budget, smallest first. Tasks (first metric): {pages}.\n")
    return (f"## Anchor budget\n\n{summary_lines(found)}\n{legend}\n"
            f"{table(rows, headers=['method', *found])}\n")

