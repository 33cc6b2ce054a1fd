"""The interactive board: a static site of the leaderboards that works offline from the
file system (``file://``), with no server and no library.

``index.html`` holds the main table: every page cell of every task, one row per row of
``relbench export --summary`` (:mod:`relbench.summary`: the same computation, so the
board and the export cannot differ), with the task's data modality, sortable by any
column and filterable by modality, kind, metric and each method column. ``<task>.html``
holds the task's cells and, where its kind declares
:attr:`~relbench.interfaces.TaskKind.matrix_axes`, one matrix per combination
(:meth:`~relbench.interfaces.TaskKind.matrix_cells`) whose cells say their score,
95 % interval and seeds on hover; beside it, the matrices of the tasks its kind reads
as companions (:meth:`~relbench.interfaces.TaskKind.companion_tasks`: a similarity
task's stitching task); and where its kind declares
:attr:`~relbench.interfaces.TaskKind.curve_axis`, its curves
(:meth:`~relbench.interfaces.TaskKind.curve_cells`: score and interval band over that
axis, one line per series). Each page embeds its data as JSON in a
``<script type="application/json">`` block; ``board.js`` draws it with text nodes only
(never markup), ``board.css`` styles it.

More views hook in by name: a page lists the views it shows (:data:`INDEX_VIEWS`,
:data:`TASK_VIEWS`) beside their data, and ``board.js`` draws each with the function of
the same name in its ``VIEWS`` table.
"""

from __future__ import annotations

import html
import json
import math
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relbench import deferred
from relbench.cache import atomic_write_bytes
from relbench.errors import UserError
from relbench.interfaces import DatasetData
from relbench.leaderboard import task_page
from relbench.names import inside
from relbench.rows import TASK_ERROR
from relbench.summary import method_columns, release_rows, task_summary
from relbench.task_model import Task

pd = deferred.load("pandas")

#: the files every board copies beside its pages (shipped in the package, next to this module)
ASSETS = ("board.js", "board.css")
#: the views of the main page and of a task's page, drawn in this order by board.js
INDEX_VIEWS = ("filters", "table")
TASK_VIEWS = ("filters", "table", "matrix", "companions", "curves")
#: the columns of the main table every task has (the modality follows the kind)
LEADING = ("task", "kind", "modality")
#: the columns the board leaves out of its tables (provenance, not a cell's value)
HIDDEN = ("revision",)
#: the keys of a matrix or curve cell that are its numbers, not what names its series
NUMBERS = ("score", "low", "high", "n", "tie_group", "direction")
#: the mark of a page the board wrote (a page without it in the folder is someone else's)
GENERATOR = '<meta name="generator" content="relbench board">'
#: the modality of a task whose data set could not be described here
UNKNOWN = "not known"


@dataclass
class TaskBoard:
    """What the board shows of one task: its name, kind, data modality (the view
    modalities its data set declares, ``+``-joined), its summary rows
    (:func:`relbench.summary.task_summary`, None where its kind gives none), the kind's
    method columns, its matrix (:meth:`TaskKind.matrix_cells` with the two
    :attr:`~TaskKind.matrix_axes`; no cells: no matrix), the names of its companion
    tasks (:meth:`TaskKind.companion_tasks`) and its curves
    (:meth:`TaskKind.curve_cells` over :attr:`~TaskKind.curve_axis`; none: no curves)."""

    task: str
    kind: str
    modality: str
    summary: pd.DataFrame | None
    methods: list[str] = field(default_factory=list)
    axes: tuple[str, ...] = ()
    matrix: list[dict[str, Any]] | None = None
    companions: tuple[str, ...] = ()
    curve_axis: str = ""
    curves: list[dict[str, Any]] | None = None


def task_board(task: Task, rows: pd.DataFrame, modality: str) -> TaskBoard:
    """The board's view of one task from the rows its page is drawn from: its summary
    (:func:`~relbench.summary.task_summary`) and, where its kind declares matrix axes,
    its matrix cells, and where it declares a curve axis its curve cells, computed with
    the page's metric plugins (figures a kind might draw go to a temporary folder, removed)."""
    kind = task.kind.build()
    matrix = curves = None
    if (kind.matrix_axes or kind.curve_axis) and not rows.empty:
        with tempfile.TemporaryDirectory(prefix="relbench-board-") as root:
            page = task_page(Path(root), task)
            matrix = kind.matrix_cells(rows, page) if kind.matrix_axes else None
            curves = kind.curve_cells(rows, page) if kind.curve_axis else None
    return TaskBoard(task.name, kind.name, modality, task_summary(task, rows), method_columns(kind),
                     tuple(kind.matrix_axes), matrix, tuple(kind.companion_tasks()), kind.curve_axis, curves)


def data_modality(dataset: Callable[[], DatasetData]) -> str:
    """The modalities a task's data set declares for its views (``view_modalities``),
    sorted and ``+``-joined (``image+text``); :data:`UNKNOWN` when ``dataset`` (its
    description, or the data set itself) cannot be had here."""
    try:
        views = dataset().view_modalities
    except (UserError, OSError):
        return UNKNOWN
    return "+".join(sorted(set(views.values()))) or UNKNOWN


def store_boards(runner: Any) -> list[TaskBoard]:
    """Every planned task of ``runner`` (a :class:`~relbench.runner.Runner`) from its
    results store: the rows of its current plan, as ``relbench export --summary`` reads them."""
    boards = []
    for run in runner.plans():
        rows = runner.store.load(run.task.name, units=[*(u.id for u in run.plan().units), TASK_ERROR])
        boards.append(task_board(run.task, rows, data_modality(lambda: runner.dataset(run.task.dataset))))
    return boards


def release_boards(runner: Any, rows: pd.DataFrame) -> list[TaskBoard]:
    """The tasks of ``runner``'s suite that a release's flat table (``rows``) holds, each
    from its rows there, as ``relbench export --summary --release`` reads them."""
    held = set(rows["task"])
    return [task_board(task, release_rows(rows, task.name), data_modality(lambda: runner.dataset(task.dataset)))
            for task in runner.suite.tasks if task.name in held]


def records(frame: pd.DataFrame | None) -> list[dict[str, Any]]:
    """A frame's rows as JSON-ready dicts: missing values as None, numpy scalars as Python's."""
    if frame is None or frame.empty:
        return []
    return [{key: plain(value) for key, value in row.items()} for row in frame.astype(object).to_dict("records")]


def plain(value: Any) -> Any:
    """A cell value as JSON writes it: None for a missing value, a Python number or string."""
    if value is None or (not isinstance(value, (list, dict, str)) and pd.isna(value)):
        return None
    if hasattr(value, "item"):
        value = value.item()
    return None if isinstance(value, float) and not math.isfinite(value) else value


def rows_of(board: TaskBoard) -> list[dict[str, Any]]:
    """A task's summary rows for the main table: each with the task's modality after its kind."""
    out = []
    for row in records(board.summary):
        out.append({"task": row.pop("task", board.task), "kind": row.pop("kind", board.kind),
                    "modality": board.modality, **row})
    return out


def columns_of(rows: list[dict[str, Any]]) -> list[str]:
    """The table's columns: :data:`LEADING`, then every other key in first-seen order, less :data:`HIDDEN`."""
    seen = dict.fromkeys([*LEADING, *(key for row in rows for key in row)])
    return [key for key in seen if key not in HIDDEN]


def labels_of(cells: list[dict[str, Any]] | None, axes: tuple[str, ...] | list[str]) -> list[str]:
    """The keys that name a matrix's or curve's series: every key of its cells but the
    axes and :data:`NUMBERS`, in first-seen order (stitching: the method columns and
    ``metric``)."""
    keys = dict.fromkeys(key for cell in cells or [] for key in cell)
    return [key for key in keys if key not in (*axes, *NUMBERS)]


def matrix_data(board: TaskBoard) -> dict[str, Any]:
    """A board's matrix as a page embeds it: its task, axes, series keys and cells."""
    return {"task": board.task, "axes": list(board.axes), "labels": labels_of(board.matrix, board.axes),
            "cells": [{k: plain(v) for k, v in c.items()} for c in board.matrix or []]}


def index_data(boards: list[TaskBoard]) -> dict[str, Any]:
    """The main page's data: its rows (every task's), columns, filters and each task's page."""
    rows = [row for board in boards for row in rows_of(board)]
    methods = list(dict.fromkeys(column for board in boards for column in board.methods))
    return {"title": "relbench leaderboards", "views": list(INDEX_VIEWS), "columns": columns_of(rows),
            "numeric": numeric(rows), "filters": ["modality", "kind", "metric", *methods], "rows": rows,
            "pages": {board.task: page_name(board.task) for board in boards}}


def task_data(board: TaskBoard, companions: list[TaskBoard] = ()) -> dict[str, Any]:
    """A task's page data: its rows as in the main table, its matrix with its axes, the
    matrices of its companion tasks (``companions``: their boards, those with a matrix
    shown) and its curves."""
    rows = rows_of(board)
    shown = [c for c in companions if c.matrix]
    return {"title": board.task, "kind": board.kind, "modality": board.modality, "views": list(TASK_VIEWS),
            "columns": columns_of(rows), "numeric": numeric(rows), "filters": ["metric", *board.methods],
            "rows": rows, "pages": {board.task: page_name(board.task), **{c.task: page_name(c.task) for c in shown}},
            "methods": board.methods, "matrix": matrix_data(board),
            "companions": [matrix_data(c) for c in shown],
            "curves": {"axis": board.curve_axis, "labels": labels_of(board.curves, [board.curve_axis]),
                       "cells": [{k: plain(v) for k, v in c.items()} for c in board.curves or []]}}


def numeric(rows: list[dict[str, Any]]) -> list[str]:
    """The columns whose values are all numbers (or missing): sorted as numbers."""
    keys = dict.fromkeys(key for row in rows for key in row)
    return [key for key in keys if all(isinstance(row.get(key), (int, float, type(None))) and
                                       not isinstance(row.get(key), bool) for row in rows)]


def page_name(task: str) -> str:
    """The file name of a task's page (relative to the board's folder)."""
    return f"{task}.html"


def embedded(data: dict[str, Any]) -> str:
    """``data`` as JSON safe inside a ``<script>`` block: ``<``, ``>`` and ``&`` escaped,
    so that no value can close the block or open a comment."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def document(data: dict[str, Any], home: bool) -> str:
    """One page: its title (escaped), the embedded data and the shared script and style."""
    back = "" if home else '<p><a href="index.html">all tasks</a></p>\n'
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n{GENERATOR}\n'
            f'<title>{html.escape(data["title"])}</title>\n<link rel="stylesheet" href="board.css">\n</head>\n'
            f'<body>\n{back}<h1>{html.escape(data["title"])}</h1>\n<main id="board"></main>\n'
            f'<script type="application/json" id="board-data">{embedded(data)}</script>\n'
            f'<script src="board.js"></script>\n</body>\n</html>\n')


def write(folder: Path, boards: list[TaskBoard]) -> list[Path]:
    """Write the board into ``folder`` (created if missing): ``index.html``, one page per
    task, ``board.js`` and ``board.css``; return the files written. Pages the board wrote
    earlier for tasks not in ``boards`` are removed."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _remove_stale(folder, {page_name(board.task) for board in boards})
    written = [folder / "index.html"]
    atomic_write_bytes(written[0], document(index_data(boards), home=True).encode())
    by_task = {board.task: board for board in boards}
    for board in boards:
        path = inside(folder, board.task, ".html")
        companions = [by_task[name] for name in board.companions if name in by_task]
        atomic_write_bytes(path, document(task_data(board, companions), home=False).encode())
        written.append(path)
    for asset in ASSETS:
        shutil.copyfile(Path(__file__).with_name(asset), folder / asset)
        written.append(folder / asset)
    return written


def _remove_stale(folder: Path, keep: set[str]) -> None:
    """Delete the pages in ``folder`` that carry :data:`GENERATOR` and are not in ``keep``."""
    for path in folder.glob("*.html"):
        if path.name != "index.html" and path.name not in keep and GENERATOR in path.read_text(errors="replace"):
            path.unlink()


def size(files: list[Path]) -> int:
    """The bytes of the board's files together."""
    return sum(path.stat().st_size for path in files)
