"""What a stitching row says about its stitcher, as typed columns: ``role`` (the
stitcher class's :attr:`~relbench.interfaces.Stitcher.role`: ``method``, ``reference``
or ``own-head``) and ``needs_both_spaces`` (the class's flag, or the unit fitted on
partner banks). The kind writes both on every row it stores
(:attr:`~relbench_stitching.kind.Stitching.row_fields`); pages read them from here.

Rows stored before those columns existed (the committed release
``leaderboards/results.parquet``, users' stores) and the error row the runner stores for
a unit that failed lack them. Reading *derives* them where missing, and recomputes
nothing: from the classes the row's unit was planned with, which every stored unit
records in its inputs (``inputs.unit.stitcher.class``, the ``module:qualname`` the
registry resolved the tasks file's plugin name to, whatever label the tasks file gave
it). The role is the stitcher class's declaration; ``needs_both_spaces`` is the
stitcher's flag or its regularizer's
:attr:`~relbench.interfaces.Regularizer.needs_partner_banks` (the kind gives such a
regularizer every other encoder's bank the unit does not hold out, and fails the unit
when there is none, so every score of it was fitted on partner banks). A release drawn
again therefore keeps its identities, and its pages the same numbers. A class that can
no longer be found (a plugin uninstalled, rows built without inputs) gives the
interface's defaults: a ``method`` that needs one space.

Whether a row's anchors are a chance null (:func:`chance_nulls`: its selector class
declares :attr:`~relbench.interfaces.AnchorSelector.chance_null`) is derived the same
way on every row, old or new, and stored on none: it is no typed row field, so what a
unit writes is what it wrote before the declaration existed.
"""

from __future__ import annotations

import functools
import importlib

from relbench.api import AnchorSelector, deferred_import, Regularizer, Stitcher

pd = deferred_import("pandas")

#: the columns, in the order :func:`declared_columns` returns them
DECLARED = ("role", "needs_both_spaces")
#: the roles shown beside the ranking rather than in it
REFERENCE_ROLES = ("reference", "own-head")


def declared_columns(df: pd.DataFrame) -> pd.DataFrame:
    """``role`` and ``needs_both_spaces`` of every row of ``df`` (stored rows, nested
    as a store loads them or flat as the release holds them), indexed like ``df``: the
    row's own values, derived from its stored classes where missing (see above)."""
    out = pd.DataFrame({col: df[col] if col in df else pd.Series(None, index=df.index, dtype=object)
                        for col in DECLARED}).astype(object)
    missing = out.isna().any(axis=1)
    if missing.any():
        rows = df[missing]
        derived = [_declared_by(s, r) for s, r in zip(_class_paths(rows, "stitcher"),
                                                       _class_paths(rows, "regularizer"))]
        derived = pd.DataFrame(derived, index=rows.index, columns=list(DECLARED), dtype=object).reindex(out.index)
        out = out.where(out.notna(), derived)
    return out.astype({"role": str, "needs_both_spaces": bool})


def chance_nulls(df: pd.DataFrame) -> pd.Series:
    """Per row of ``df`` (stored rows, nested or flat), whether the selector class its unit
    records declares itself a chance null
    (:attr:`~relbench.interfaces.AnchorSelector.chance_null`); False where it records no
    selector, or one that can no longer be found. Never from the selector's label."""
    return _class_paths(df, "selector").map(_declares_chance_null).astype(bool)


@functools.lru_cache(maxsize=None)
def _declares_chance_null(path: object) -> bool:
    return bool(getattr(_plugin_class(path, AnchorSelector), "chance_null", False))


def _class_paths(rows: pd.DataFrame, column: str) -> pd.Series:
    """The ``module:qualname`` each row's unit records for its plugin of ``column``
    (None where it records none): from the flat column of a release, or the nested
    ``inputs`` of a loaded store."""
    flat = f"inputs.unit.{column}.class"
    if flat in rows:
        return rows[flat]
    if "inputs" not in rows:
        return pd.Series(None, index=rows.index, dtype=object)
    return rows["inputs"].map(lambda inputs: _class_in(inputs, column))


def _class_in(inputs: object, column: str) -> str | None:
    unit = inputs.get("unit") if isinstance(inputs, dict) else None
    spec = unit.get(column) if isinstance(unit, dict) else None
    return spec.get("class") if isinstance(spec, dict) else None


@functools.lru_cache(maxsize=None)
def _declared_by(stitcher: object, regularizer: object) -> tuple[str, bool]:
    """``(role, needs_both_spaces)`` as the stored classes declare them."""
    cls = _plugin_class(stitcher, Stitcher) or Stitcher
    partners = getattr(_plugin_class(regularizer, Regularizer), "needs_partner_banks", False)
    return cls.role, bool(cls.needs_both_spaces or partners)


@functools.lru_cache(maxsize=None)
def _plugin_class(path: object, interface: type) -> type | None:
    """The ``interface`` plugin class a stored ``module:qualname`` names, None when it
    names none (not a string, a module no longer installed, another kind of class).
    Imported from that path: a plugin reaches relbench through :mod:`relbench.api`
    alone, which holds no registry, and the path is the registered class's own."""
    if not isinstance(path, str) or ":" not in path:
        return None
    module, _, qualname = path.partition(":")
    try:
        found: object = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return None
    return found if isinstance(found, type) and issubclass(found, interface) else None
