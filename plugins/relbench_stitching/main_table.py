"""The stitching kind's section of the leaderboard index: the main table, combinations ×
stitching tasks, drawn from the cells each task's page recorded
(:func:`relbench_stitching.page.index_cells`: every number and interval is the page's).

Tasks are grouped by what their encoders read: *one view* (the encoders see the same
inputs: cross-architecture and cross-seed stitching) or *several views* (languages, or
images and their names). A group's tasks are split over as few tables as keep every
line under :data:`WIDTH` characters. Each group has an aggregate over its *common set*
(:func:`common_tasks`: specialised studies that measured little of the shared grid drop
out) and the combinations all of its tasks measured: the mean over those tasks of
the score and of the rank, each with a 95 % interval conditional on those tasks
(:func:`tasks_interval`: the set of tasks is the design, as a task's encoder pairs are)
that carries each task's own uncertainty through the draws its page keeps (paired across
combinations: the page's draws of the mean over seeds, see :mod:`relbench.uncertainty`),
and its cost: the median over those tasks of the mean wall
seconds of its units (:func:`compact_seconds`). References (absolute heads on the pairs
they reach, each encoder's own head) are shown under the methods for context, unranked.

**Anchors needed.** A stitching task may name its anchor-budget companion (the kind's
``budget_task``: the same data set and encoders, the number of anchors swept). Under its
group's tables, each combination then gets, per such task, its *95 % budget* as that
task's page computed it (:mod:`relbench_stitching.budget_page`: the smallest budget whose
mean score reaches 95 % of the score at the largest budget, with an interval from
paired Student-t draws over seeds), and the mean over those tasks of the budget's share of the largest
(:func:`budget_table`).
"""

from __future__ import annotations

import re
from typing import Callable

import numpy as np
from tabulate import tabulate

from relbench.api import arrow, lower_is_better
from relbench_stitching.budget_index import PEAKED, peak
from relbench_stitching.cells import BOTH_SPACES, BOTH_SPACES_MEANING
from relbench_stitching.intervals import KEPT_DRAWS, unpack_draws

#: the widest line a table may have (a 160-column terminal)
WIDTH = 160
#: a group needs this many tasks for an aggregate (one task's mean is its cell)
MIN_TASKS = 2
#: the mark of a combination indistinguishable from its task's best
TIE = "≈"
ONE_VIEW, SEVERAL_VIEWS, UNKNOWN = "one view", "several views", "views not recorded"
GROUP_TITLES = {ONE_VIEW: "Encoders of the same inputs (one view: cross-architecture and cross-seed)",
                SEVERAL_VIEWS: "Encoders of different views (languages, or images and their names)",
                UNKNOWN: "Tasks whose rows do not record their encoders' views"}


def tasks_interval(values: np.ndarray, draws: list[np.ndarray] | None = None) -> tuple[np.ndarray, ...]:
    """``(mean, low, high)`` per row of ``values`` (methods × tasks): the mean over the
    tasks and, with ``draws`` (per task, an array draws × methods: its page's paired draws
    of each row's value), the 95 % percentile interval of the mean over the tasks of draw
    ``b`` of each, over the draws finite in every task. The interval is conditional on the
    tasks, as the pages' are on their encoder pairs: the set of tasks is the design, and
    each task carries its own uncertainty. Draw ``b`` of every page comes from the same
    generator state (:func:`relbench.uncertainty.t_draws`: the same Student-t variates for
    the same seed), so for tasks measured on the same seeds draw ``b`` of the mean is the
    draw of the seeds' means over the tasks, and the interval is the t-interval over seeds
    of each seed's mean over the tasks. Without draws, NaN ends (no interval)."""
    mean = values.mean(axis=1)
    if draws is None:
        return mean, np.full_like(mean, np.nan), np.full_like(mean, np.nan)
    count = min(len(d) for d in draws)
    stacked = np.stack([d[:count] for d in draws])  # tasks × draws × methods
    finite = np.isfinite(stacked).all(axis=(0, 2))
    if not finite.any():
        return mean, np.full_like(mean, np.nan), np.full_like(mean, np.nan)
    low, high = np.percentile(stacked[:, finite].mean(axis=0), [2.5, 97.5], axis=0)
    return mean, low, high


def abbreviations(tasks: list[str]) -> dict[str, str]:
    """A short column header per task: the initials of its name's words, upper case,
    numbered where two tasks would share one."""
    out: dict[str, str] = {}
    for task in tasks:
        short = "".join(word[0] for word in re.split(r"[^A-Za-z0-9]+", task) if word).upper() or "T"
        candidate, n = short, 1
        while candidate in out.values():
            n += 1
            candidate = f"{short}{n}"
        out[task] = candidate
    return out


def _group(cells: list[dict]) -> str:
    views = cells[0].get("views") or []
    return UNKNOWN if not views else ONE_VIEW if len(views) == 1 else SEVERAL_VIEWS


def _decimals(value: float) -> str:
    """Three decimals, without the leading zero of a magnitude below one."""
    text = f"{value:.3f}"
    return text.replace("0.", ".", 1) if abs(value) < 1 else text


def compact_seconds(seconds: float | None) -> str:
    """A duration in the largest of seconds, minutes and hours it reaches, with one
    decimal below ten and none from ten on (``3.4 s``, ``12 s``, ``3.4 min``, ``2.0 h``);
    empty when unknown (None)."""
    if seconds is None:
        return ""
    unit, size = next((u, n) for u, n in (("h", 3600), ("min", 60), ("s", 1)) if seconds >= n or u == "s")
    value = seconds / size
    return f"{value:.1f} {unit}" if round(value, 1) < 10 else f"{value:.0f} {unit}"


def median_seconds(cells: list[dict]) -> float | None:
    """The median of the cells' ``seconds`` (the mean wall seconds of a combination's
    units on each task), over the cells that know it; None when none does (rows of
    stores that did not record them)."""
    known = [c["seconds"] for c in cells if c.get("seconds") is not None]
    return float(np.median(known)) if known else None


def cell_text(cell: dict) -> str:
    """``score±h`` (h: the larger distance from the score to an end of its interval),
    the score in bold for the task's best, marked :data:`TIE` for the others of its group."""
    score = _decimals(cell["score"])
    if cell["best"]:
        score = f"**{score}**"
    spread = ""
    if cell.get("low") is not None and cell.get("high") is not None:
        spread = "±" + _decimals(max(cell["high"] - cell["score"], cell["score"] - cell["low"]))
    return score + spread + (TIE if cell["tie"] and not cell["best"] else "")


def _ranked(cells: list[dict]) -> list[dict]:
    """A task's ranked cells (references left out)."""
    return [c for c in cells if not c.get("reference")]


def common_tasks(cells_by_task: dict[str, list[dict]]) -> list[str]:
    """The group's common set, in the group's order: of the task sets met while
    dropping, one at a time, the task whose removal most enlarges what the others share
    (fewest combinations first on ties), the one with the most (task, shared
    combination) cells, the larger on ties; empty when no :data:`MIN_TASKS` tasks share
    a combination."""
    methods = {task: {c["method"] for c in _ranked(cells)} for task, cells in cells_by_task.items()}
    tasks = [t for t in cells_by_task if methods[t]]

    def shared(names: list[str]) -> set[str]:
        return set.intersection(*(methods[t] for t in names))

    best: list[str] = []
    best_cells = 0
    while len(tasks) >= MIN_TASKS:
        cells = len(tasks) * len(shared(tasks))
        if cells > best_cells:
            best, best_cells = list(tasks), cells
        tasks.remove(max(tasks, key=lambda t: (len(shared([u for u in tasks if u != t])), -len(methods[t]), t)))
    return best


def task_draws(task_cells: dict[str, dict], methods: list[str]) -> np.ndarray | None:
    """A task's kept draws of the stitched score of ``methods`` (draws × methods, paired:
    row ``b`` is the page's draw ``b``, kept in place even where not finite, so that row
    ``b`` of every task stays draw ``b``); None when a method's cell keeps no draws."""
    if any(not task_cells[m].get("draws") for m in methods):
        return None
    return np.column_stack([unpack_draws(task_cells[m]["draws"]) for m in methods])


def ranks_of_draws(draws: np.ndarray, task_cells: dict[str, dict], methods: list[str]) -> np.ndarray:
    """Each method's place (1 = best) among ``methods`` in each draw (draws × methods) of
    a task, ordered as its page ranks: by the share of encoder pairs reached
    (``coverage``, more first; equal when the cells do not record it), then by the
    drawn score in the metric's direction, then by the page's order."""
    cells = [task_cells[m] for m in methods]
    coverage = np.array([c.get("coverage", 1.0) for c in cells])
    position = np.array([c["rank"] for c in cells])
    sign = 1.0 if lower_is_better(cells[0]["direction"]) else -1.0
    cost = sign * draws  # lower is better
    ahead = ((coverage[:, None] > coverage[None, :])[None]  # ahead[b, j, i]: method j placed before i in draw b
             | ((coverage[:, None] == coverage[None, :])[None]
                & ((cost[:, :, None] < cost[:, None, :])
                   | ((cost[:, :, None] == cost[:, None, :]) & (position[:, None] < position[None, :])[None]))))
    return ahead.sum(axis=1) + 1.0


def aggregate(cells_by_task: dict[str, list[dict]]) -> dict[str, dict]:
    """Per combination of the common set (:func:`common_tasks`, the combinations all of
    its tasks measured), its mean score over those tasks (None when their metrics
    differ) and mean rank (None when it is the only such combination), each as ``(mean,
    low, high)`` from :func:`tasks_interval`, its ``seconds`` (:func:`median_seconds`
    over those tasks) and ``intervals``: whether the ends are known (every task's cells
    keep their page's draws, :func:`task_draws`; NaN ends otherwise). The rank in a task
    is the combination's place among the combinations aggregated, in the page's order
    (1 = best); within a draw, its place in the drawn scores (:func:`ranks_of_draws`; a
    draw not finite in some task ranks nothing)."""
    tasks = common_tasks(cells_by_task)
    if not tasks:
        return {}
    cells_by_task = {t: _ranked(cells_by_task[t]) for t in tasks}
    by_method = [{c["method"]: c for c in cells} for cells in cells_by_task.values()]
    complete = [m for m in by_method[0] if all(m in cells for cells in by_method)]
    scores = np.array([[cells[m]["score"] for cells in by_method] for m in complete])
    positions = np.array([[cells[m]["rank"] for cells in by_method] for m in complete])
    ranks = positions.argsort(axis=0).argsort(axis=0) + 1.0
    score_draws = [task_draws(cells, complete) for cells in by_method]
    known = all(d is not None for d in score_draws)
    rank_draws = None
    if known:
        count = min(len(d) for d in score_draws)
        score_draws = [d[:count] for d in score_draws]
        finite = np.logical_and.reduce([np.isfinite(d).all(axis=1) for d in score_draws])
        rank_draws = [np.where(finite[:, None], ranks_of_draws(np.nan_to_num(d), cells, complete), np.nan)
                      for d, cells in zip(score_draws, by_method)]
    metrics = {(c["metric"], c["direction"]) for cells in cells_by_task.values() for c in cells}
    mean_score = tasks_interval(scores, score_draws if known else None) if len(metrics) == 1 else None
    mean_rank = tasks_interval(ranks, rank_draws) if len(complete) > 1 else None
    shown = mean_score or mean_rank
    known = known and shown is not None and bool(np.isfinite(shown[1]).all())
    return {m: {"score": tuple(float(x[i]) for x in mean_score) if mean_score else None,
                "rank": tuple(float(x[i]) for x in mean_rank) if mean_rank else None,
                "seconds": median_seconds([cells[m] for cells in by_method]), "intervals": known}
            for i, m in enumerate(complete)}


def _methods(cells_by_task: dict[str, list[dict]], aggregated: dict[str, dict]) -> list[str]:
    """Rows in order: the aggregated combinations by mean rank, then the others by how
    many tasks they were measured on and their mean place on those pages."""
    places: dict[str, list[int]] = {}
    for cells in cells_by_task.values():
        for c in cells:
            places.setdefault(c["method"], []).append(c["rank"] if c["rank"] is not None else np.inf)

    def order(method: str) -> tuple:
        if method in aggregated:
            return (0, (aggregated[method]["rank"] or (1.0,))[0], method)
        if np.isinf(places[method]).all():  # a reference: after every method
            return (2, method)
        return (1, -len(places[method]), float(np.mean(places[method])), method)

    return sorted(places, key=order)


def _aggregate_cells(method: str, aggregated: dict[str, dict], measured: int, tasks: int) -> list[str]:
    found = aggregated.get(method)
    if found is None:
        return [f"{measured}/{tasks}", "", "", ""]
    score = "n/a"
    if found["score"]:
        mean, low, high = found["score"]
        score = _decimals(mean) + (f"±{_decimals(max(high - mean, mean - low))}" if np.isfinite([low, high]).all()
                                   else "")
    rank = ""
    if found["rank"]:
        mean, low, high = found["rank"]
        rank = f"{mean:.1f}" + (f" ({low:.1f}–{high:.1f})" if np.isfinite([low, high]).all() else "")
    return [f"{measured}/{tasks}", score, rank, compact_seconds(found["seconds"])]


def _table(methods: list[str], chunk: list[str], cells_by_task: dict[str, list[dict]], short: dict[str, str],
           aggregated: dict[str, dict], summary: str | None) -> str:
    """One table: a column per task of ``chunk`` and a row per combination measured on
    one of them, or, with the group's aggregate columns (``summary``: the mean score's
    header), a row per combination of the group."""
    by_task = {task: {c["method"]: c for c in cells_by_task[task]} for task in chunk}
    measured = {m: sum(m in {c["method"] for c in cells} for cells in cells_by_task.values()) for m in methods}
    rows = []
    both = both_spaces_methods(cells_by_task)
    for method in methods:
        row = [f"{method} {BOTH_SPACES}" if method in both else method,
               *(cell_text(by_task[t][method]) if method in by_task[t] else "-" for t in chunk)]
        if not summary and set(row[1:]) == {"-"}:
            continue
        if summary:
            row += _aggregate_cells(method, aggregated, measured[method], len(cells_by_task))
        rows.append(row)
    headers = ["combination", *(short[t] for t in chunk)] + (["tasks", summary, "mean rank", "cost"] if summary else [])
    return tabulate(rows, headers=headers, tablefmt="pipe", disable_numparse=True,
                    colalign=["left"] + ["right"] * (len(headers) - 1))


def _tables(cells_by_task: dict[str, list[dict]], short: dict[str, str], aggregated: dict[str, dict],
            summary: str | None) -> list[str]:
    """The group's tables, its tasks split as :func:`fitted` does (the aggregate on the last)."""
    methods = _methods(cells_by_task, aggregated)
    return fitted(list(cells_by_task), lambda chunk, last: _table(methods, chunk, cells_by_task, short, aggregated,
                                                                   summary if last else None))


def fitted(tasks: list[str], draw: Callable[[list[str], bool], str]) -> list[str]:
    """The tables ``draw(chunk, last)`` gives for ``tasks`` split into as few
    consecutive, even chunks as keep every line under :data:`WIDTH` (``last``: the final
    chunk's table, which carries the aggregate columns); one task a table when even that
    is wider."""
    for count in range(1, len(tasks) + 1):
        chunks = [list(c) for c in np.array_split(np.array(tasks, dtype=object), count)]
        tables = [draw(chunk, i == count - 1) for i, chunk in enumerate(chunks)]
        if max(len(line) for table in tables for line in table.splitlines()) < WIDTH:
            break
    return tables


def both_spaces_methods(cells_by_task: dict[str, list[dict]]) -> set[str]:
    """The combinations whose cells, on any task, need both encoders' spaces at fit time."""
    return {c["method"] for cells in cells_by_task.values() for c in cells if c.get("both_spaces")}


def _legend(cells_by_task: dict[str, list[dict]], short: dict[str, str]) -> str:
    """Each abbreviation, linked to its task's page, with the task's metric."""
    return "; ".join(f"**{short[t]}**: [{t}]({t}.md) ({arrow(cells[0]['metric'], cells[0]['direction'])})"
                     for t, cells in cells_by_task.items())


def budget_cells(companions: dict[str, dict[str, dict]], kind: str) -> dict[str, tuple[str, dict[str, dict]]]:
    """Per stitching task, its companion of the task kind ``kind`` (the anchor budget's):
    its name and its index cells by combination; tasks without one, or whose companion's
    page recorded no cells, are left out."""
    out: dict[str, tuple[str, dict[str, dict]]] = {}
    for task, named in companions.items():
        for name, companion in named.items():
            if companion.get("kind") == kind and companion.get("cells"):
                out[task] = (name, {c["method"]: c for c in companion["cells"]})
    return out


def budget_text(cell: dict) -> str:
    """``k [low, high]/K``: a combination's 95 % budget, its interval and the largest budget,
    followed by :data:`~relbench_stitching.budget_index.PEAKED` where its curve falls at the
    largest budget (:func:`~relbench_stitching.budget_index.peak`)."""
    text = f"{cell['budget']} [{cell['budget_low']}, {cell['budget_high']}]/{cell['largest']}"
    return f"{text} {PEAKED}" if peak(cell) else text


def mean_share(cells: list[dict]) -> str:
    """The mean over ``cells`` of the 95 % budget's share of the largest budget, in per cent."""
    return f"{np.mean([c['budget'] / c['largest'] for c in cells]):.0%}".replace("%", " %")


def budget_table(methods: list[str], cells_by_task: dict[str, list[dict]],
                 budgets: dict[str, tuple[str, dict[str, dict]]], short: dict[str, str]) -> list[str]:
    """The group's *anchors needed* tables: a row per combination of ``methods`` (the main
    table's order) that a companion measured, a column per task of the group with a
    companion (:func:`budget_text`; -: not measured there), and the mean share
    (:func:`mean_share`) over the tasks that measured it, split as :func:`fitted` does;
    none when no task of the group has a companion."""
    found = {t: budgets[t][1] for t in cells_by_task if t in budgets}
    tasks = list(found)
    rows = [m for m in methods if any(m in found[t] for t in tasks)]
    if not rows:
        return []

    def draw(chunk: list[str], last: bool) -> str:
        body = [[m, *(budget_text(found[t][m]) if m in found[t] else "-" for t in chunk),
                 *([mean_share([found[t][m] for t in tasks if m in found[t]])] if last else [])] for m in rows]
        headers = ["combination", *(short[t] for t in chunk), *(["mean share"] if last else [])]
        return tabulate(body, headers=headers, tablefmt="pipe", disable_numparse=True,
                        colalign=["left"] + ["right"] * (len(headers) - 1))

    return fitted(tasks, draw)


def _budget_legend(tasks: list[str], budgets: dict[str, tuple[str, dict[str, dict]]], short: dict) -> str:
    named = "; ".join(f"**{short[t]}**: [{budgets[t][0]}]({budgets[t][0]}.md)" for t in tasks if t in budgets)
    return (f"**Anchors needed** (the same combinations on each task's anchor-budget companion: its data set and "
            f"encoders, the number of anchors swept, nested anchor sets): *k [low, high]/K*, the smallest budget "
            f"k whose mean score over seeds reaches 95 % of the score at the largest budget K, with its 95 % "
            f"interval (from paired Student-t draws over seeds), as the companion's page gives it; {PEAKED}: the "
            f"combination's curve peaks at fewer anchors and its score at K falls short of 95 % of that peak, so k "
            f"is measured against a fallen score (the peak is in the index's *Anchor budget* section); -: not "
            f"measured there. "
            f"*mean share*: the mean of k/K over the tasks that measured the combination (descriptive: no "
            f"interval). Companions: {named}.\n")


def _group_section(title: str, cells_by_task: dict[str, list[dict]], short: dict[str, str],
                   budgets: dict[str, tuple[str, dict[str, dict]]]) -> str:
    aggregated = aggregate(cells_by_task)
    metrics = {(c["metric"], c["direction"]) for cells in cells_by_task.values() for c in cells}
    summary = None
    if len(cells_by_task) >= MIN_TASKS:
        summary = f"mean {arrow(*next(iter(metrics)))}" if len(metrics) == 1 else "mean score"
    text = [f"### {title}\n", *(t + "\n" for t in _tables(cells_by_task, short, aggregated, summary)),
            "Tasks: " + _legend(cells_by_task, short) + ".\n"]
    if summary:
        common = common_tasks(cells_by_task)
        over = (f"the {len(common)} tasks that share the most combinations ({', '.join(short[t] for t in common)}; "
                f"the others measured fewer of them)" if common and len(common) < len(cells_by_task) else
                "all of them")
        text.append(
            f"*tasks*: how many of the {len(cells_by_task)} tasks above measured the combination. Aggregated over "
            f"{over}, for the combinations all of those measured: *{summary}*, the mean over those tasks of the "
            f"score"
            f"{'' if len(metrics) == 1 else ' (n/a: the tasks rank by different metrics)'}, and *mean rank*, the mean "
            f"over the tasks of the combination's place among these combinations in the task's ranking (1 = best; "
            f"empty when there is one); "
            f"each with {_resampled(aggregated)} The others get no aggregate. *cost*: for the aggregated "
            f"combinations, the median over the same tasks of the combination's mean wall seconds per unit (one "
            f"seed × target encoder of the combination, all its source encoders) on the machine that made the rows, "
            f"including the head training the unit paid for; heads and embeddings shared through the cache are paid "
            f"by the first unit that needs them, so the cost is indicative (empty where the rows do not record it). "
            f"Rows marked *(reference)* are absolute heads scored on the encoder pairs they reach "
            f"(equal widths), *(own head)* each encoder's own decoder{_null_legend(cells_by_task)}: context, not "
            f"ranked.\n")
    needed = budget_table(_methods(cells_by_task, aggregated), cells_by_task, budgets, short)
    if needed:
        text += [*(t + "\n" for t in needed), _budget_legend(list(cells_by_task), budgets, short)]
    return "\n".join(text)


def _null_legend(cells_by_task: dict[str, list[dict]]) -> str:
    """The legend's words for chance-null rows, where the section has any (else nothing)."""
    nulls = any(c.get("chance_null") for cells in cells_by_task.values() for c in cells)
    return (", *(chance null)* the same method with anchors that correspond to nothing across spaces (how far "
            "chance reaches)") if nulls else ""


def _resampled(aggregated: dict[str, dict]) -> str:
    """What the aggregate's intervals carry: each task's own uncertainty, conditional on
    the tasks, when every aggregated task's cells keep their page's draws; nothing else."""
    if aggregated and all(found["intervals"] for found in aggregated.values()):
        how = (f"a 95 % interval conditional on these tasks (the set of tasks is the design, as a task's encoder "
               f"pairs are; no interval here generalises to other tasks or resamples encoder pairs), carrying each "
               f"task's own uncertainty: the 2.5th and 97.5th percentiles, over the first {KEPT_DRAWS:,} draws each "
               f"page keeps for this table, of the mean over the tasks of draw b of each (each draw a draw of the "
               f"task's means over seeds from the Student-t its seeds imply, paired across combinations; for a "
               f"one-seed task a resample of its test samples). Draw b of every page is drawn from the same "
               f"Student-t variates for the same seed, so for tasks measured on the same seeds this is the "
               f"t-interval over seeds of each seed's mean over the tasks; the ranks are recomputed from the drawn "
               f"scores (encoder pairs reached first, as on the page).")
    else:
        how = ("no interval: some of these tasks' cells keep no draws of their page (recorded before they were kept, "
               "or the page drew no interval), and the tasks alone are too few to resample.")
    return how


def section(cells_by_task: dict[str, list[dict]], companions: dict[str, dict[str, dict]] | None = None,
            budget_kind: str = "") -> str | None:
    """The main table's section of the index (None without cells): per group of tasks
    (one view or several), its tables, abbreviations and aggregate, and the anchors its
    combinations need where tasks have a ``companions`` entry of the kind ``budget_kind``
    (:func:`budget_table`)."""
    budgets = budget_cells(companions or {}, budget_kind)
    cells_by_task = {task: cells for task, cells in cells_by_task.items() if cells}
    if not cells_by_task:
        return None
    short = abbreviations(list(cells_by_task))
    groups: dict[str, dict[str, list[dict]]] = {}
    for task, cells in cells_by_task.items():
        groups.setdefault(_group(cells), {})[task] = cells
    intro = ("## Main table: stitching\n\n"
             "Each stitching task's combinations (rows) by the task's ranking score (columns; the abbreviations "
             "are defined under each group's last table): the mean over seeds of the mean over stitched encoder "
             "pairs, as on the task's page. *score±h*: h is the larger distance from the score to an end of its "
             "95 % interval (the page's: Student-t over seeds, each seed's score on its own test samples where the "
             "protocol draws them; it need not be symmetric, and the "
             f"page gives both ends). **Bold**: the task's best; {TIE}: indistinguishable from it (the page's bold "
             "group); -: not measured on that task (not in its grid, or no stitched pair scored). "
             f"{BOTH_SPACES}: {BOTH_SPACES_MEANING}.\n")
    return "\n".join([intro, *(_group_section(GROUP_TITLES[g], tasks, short, budgets)
                              for g, tasks in groups.items())])
