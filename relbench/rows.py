"""How a unit's key and a plugin's :class:`~relbench.interfaces.ResultRow` become a
stored, flat result row. The runner and :class:`relbench.testing.TaskRunDouble` both
use it, so a kind tested against the double sees the rows the store would hold."""

from __future__ import annotations

import math
import numbers
from typing import Any

from relbench.interfaces import USES, Metric, ResultRow, TaskKind, UnitKey
from relbench.task_model import PluginSpec, Task

#: the unit id under which a whole task's failure is stored (not a unit of any plan)
TASK_ERROR = "task-error"


def display_key(key: UnitKey) -> dict[str, Any]:
    """A unit key as shown and stored: every plugin spec by its label, a list of them
    as its sorted labels joined by commas (a flat, hashable column); the :data:`USES`
    entry, which only enters the fingerprint, is left out."""
    def shown(value: Any) -> Any:
        if isinstance(value, PluginSpec):
            return value.label
        if isinstance(value, (list, tuple, set, frozenset)):
            return ",".join(sorted(str(shown(v)) for v in value))
        return value

    return {k: shown(v) for k, v in key.items() if k != USES}


def packages(inputs: Any) -> list[str]:
    """Every distribution ("name version") named in a unit's inputs, sorted."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("package"), str) and value["package"]:
                found.add(value["package"])
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(inputs)
    return sorted(found)


def row_fields(kind: TaskKind) -> dict[str, type]:
    """The typed columns a kind's rows may carry besides its ``columns``, by name with
    their type: what the unit's plugins declare about themselves (for stitching, the
    stitcher's ``role``), fixed per unit, never a cell's coordinate and never part of
    a unit's identity. A kind declares them as its ``row_fields`` (none by default) and
    sets them through a row's ``cell``."""
    return dict(getattr(kind, "row_fields", {}))


#: the fields every stored row has, empty or not (:func:`flat_row`), besides its kind's columns
ROW_KEYS = ("task", "kind", "dataset", "seed", "metric", "value", "direction", "status", "error", "extra", "packages")


def row_keys(kind: TaskKind) -> tuple[str, ...]:
    """The fields every stored row of ``kind`` has, None where unused: :data:`ROW_KEYS`
    and the kind's ``columns`` (:func:`flat_row` writes them all)."""
    return (*ROW_KEYS, *kind.columns)


def flat_row(task: Task, kind: TaskKind, r: ResultRow, display: dict[str, Any], inputs: dict[str, Any]) -> dict:
    """One stored row: task, kind, data set, seed, every column of the kind (None where
    unused), the metric, value, direction, status, error, extra and the packages of
    every plugin involved, and ``per_sample`` where the row carries it. A row's ``cell``
    may only set declared columns the unit key does not already fix, and the kind's
    :func:`row_fields` with values of their types; anything else is a bug of the kind,
    raised here."""
    fields = row_fields(kind)
    unknown = set(r.cell) - set(kind.columns) - set(fields)
    if unknown:
        raise TypeError(f"task kind {kind.name!r} emitted a row with columns {sorted(unknown)} it does not declare "
                        f"in `columns` {kind.columns}" + (f" nor `row_fields` {tuple(fields)}" if fields else ""))
    clash = {c for c in r.cell if c in display}
    if clash:
        raise TypeError(f"task kind {kind.name!r}: a row sets {sorted(clash)}, which its unit key already fixes")
    mistyped = {name: type(r.cell[name]).__name__ for name, kind_of in fields.items()
                if name in r.cell and not isinstance(r.cell[name], kind_of)}
    if mistyped:
        raise TypeError(f"task kind {kind.name!r}: a row sets {mistyped} (field: type given), not the types its "
                        f"`row_fields` declare {({n: t.__name__ for n, t in fields.items()})}")
    row = {
        "task": task.name, "kind": kind.name, "dataset": task.dataset.label, "seed": display.get("seed"),
        **{c: None for c in kind.columns}, **{k: v for k, v in display.items() if k != "seed"}, **r.cell,
        "metric": r.metric, "value": None if r.value is None else float(r.value),
        "direction": r.direction, "status": r.status, "error": r.error, "extra": r.extra,
        "packages": packages(inputs),
    }
    if r.per_sample is not None:  # only the rows that carry them (one per cell)
        row["per_sample"] = r.per_sample
    return row


def brief(text: str, most: int = 60) -> str:
    """``text`` cut to ``most`` characters (how messages quote a value they did not expect)."""
    return text if len(text) <= most else text[:most] + "…"


def finite_number(value: Any) -> float | None:
    """``value`` as a float when it is one finite real number (a Python or NumPy scalar,
    or a 0-d array or tensor), else None (NaN, inf, a string, None, an array, a bool)."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        value = value.item()
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return None
    try:
        return float(value) if math.isfinite(value) else None
    except OverflowError:  # an integer too large for a float
        return None


def metric_row(label: str, metric: Metric, y_true: Any, y_pred: Any, **fields: Any) -> ResultRow:
    """The row of the task's metric ``label`` (plugin ``metric``) scored on ``y_true`` and
    ``y_pred``, with the row's other ``fields`` (``cell``, ``extra`` …). A metric that
    raises, or returns anything but one finite number, gives an error row for itself
    alone, naming the plugin and what it returned, so that the unit's other rows stand."""
    try:
        value = metric.compute(y_true, y_pred)
    except Exception as exc:  # noqa: BLE001 - a faulty metric fails its own row
        problem = f"raised {type(exc).__name__}: {brief(str(exc), 200)}"
    else:
        number = finite_number(value)
        if number is not None:
            return ResultRow(metric=label, value=number, direction=metric.direction(), **fields)
        problem = f"returned {brief(repr(value))}, not a finite number"
    return ResultRow(metric=label, value=None, direction=metric.direction(), status="error",
                     error=f"metric {label!r} (plugin {type(metric).name!r}) {problem}", **fields)
