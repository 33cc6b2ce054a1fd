"""The table behind the pages (``relbench export --summary``): one row per cell of a
task's page, with the numbers the page shows.

Each task's kind gives its page's cells (:meth:`~relbench.interfaces.TaskKind.summary_cells`)
from the rows and :class:`~relbench.pages.Page` its page is drawn from, by the same
computation as the page (intervals, groups of the indistinguishable), so that the
export and the page cannot differ. A row names the task and its kind, the combination
by the kind's method columns (:func:`method_columns`, one typed column per plugin
interface of the kind's grid, never one free-form label), then the cell's metric,
score, 95 % interval, seeds, tie group, whatever the kind adds, and the git
revisions of the result rows the cell comes from.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from relbench import deferred
from relbench.export import gathered
from relbench.interfaces import TaskKind
from relbench.leaderboard import task_page
from relbench.task_model import Task

pd = deferred.load("pandas")

#: the columns of every cell, after the task, its kind and the kind's method columns
CELL_COLUMNS = ("metric", "score", "low", "high", "n", "tie_group")
#: the nested records of a stored row that a flat table (a release) holds as dotted columns
NESTED = ("per_sample", "extra")


def method_columns(kind: TaskKind | type[TaskKind]) -> list[str]:
    """The columns naming a kind's combination: the interface of each of its grid
    :attr:`~relbench.interfaces.TaskKind.axes` that is also one of its ``columns``, in
    the order of its axes."""
    return [axis.interface for axis in kind.axes.values() if axis.interface in kind.columns]


def task_summary(task: Task, rows: pd.DataFrame) -> pd.DataFrame | None:
    """The summary rows of one task from the rows its page is drawn from (current
    identities, in plan order); None when its kind gives no summary (the default) or
    there are no rows. Figures a kind might draw go to a temporary folder, removed."""
    if rows.empty:
        return None
    kind = task.kind.build()
    with tempfile.TemporaryDirectory(prefix="relbench-summary-") as root:
        cells = kind.summary_cells(rows, task_page(Path(root), task))
    if cells is None:
        return None
    methods = method_columns(kind)
    # as objects, so that the export types each column by its values (an int with None: a nullable int)
    frame = pd.DataFrame({key: pd.Series([cell.get(key) for cell in cells], dtype=object)
                          for key in _ordered(cells, methods)})
    frame.insert(0, "task", task.name)
    frame.insert(1, "kind", kind.name)
    frame["revision"] = [revisions(rows, cell, methods) for cell in cells]
    return frame


def _ordered(cells: list[dict[str, Any]], methods: list[str]) -> list[str]:
    """The method columns, :data:`CELL_COLUMNS`, then the kind's own keys in first-seen order."""
    fixed = [*methods, *CELL_COLUMNS]
    own = dict.fromkeys(key for cell in cells for key in cell if key not in fixed)
    return [*fixed, *own]


def revisions(rows: pd.DataFrame, cell: dict[str, Any], methods: list[str]) -> str | None:
    """The git revisions (comma-separated, sorted) of the rows of ``cell``'s combination
    and metric; None where they record none."""
    if "git" not in rows:
        return None
    mask = rows["metric"] == cell.get("metric")
    for column in methods:
        value = cell.get(column)
        values = rows[column] if column in rows else pd.Series(None, index=rows.index, dtype=object)
        mask &= values.isna() if value is None else values == value
    found = sorted({str(v) for v in rows.loc[mask, "git"].dropna() if str(v)})
    return ", ".join(found) or None


def release_rows(rows: pd.DataFrame, task: str) -> pd.DataFrame:
    """One task's rows of a release's flat table, shaped as a results store loads them:
    the nested records (:data:`NESTED`) gathered back from their dotted columns."""
    mine = rows[rows["task"] == task].reset_index(drop=True)
    return mine.assign(**{column: gathered(mine, column) for column in NESTED})


def combined(frames: list[pd.DataFrame | None]) -> pd.DataFrame:
    """The tasks' summary frames as one table (a kind's columns empty in other kinds' rows)."""
    found = [f for f in frames if f is not None and not f.empty]
    return pd.concat(found, ignore_index=True) if found else pd.DataFrame(columns=["task", "kind", *CELL_COLUMNS])
