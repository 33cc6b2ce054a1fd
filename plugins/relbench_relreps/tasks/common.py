"""Helpers the task kinds share: default grid entries, anchor contexts without
encoders, and tables of means with intervals for their pages."""

from __future__ import annotations

from collections.abc import Sequence

import lazy_loader
import numpy as np

from relbench.api import AnchorContext, Anchors, PluginSpec, arrow, bootstrap_columns, directions, table

pd = lazy_loader.load("pandas")
torch = lazy_loader.load("torch")


def specs_or_default(specs: Sequence[PluginSpec], interface: str, cls: type) -> list[PluginSpec]:
    """The grid's specs, or one spec of ``cls`` with default parameters when empty."""
    return list(specs) if specs else [PluginSpec(interface, cls.name, {}, cls.name, cls)]


def select_without_banks(spec: PluginSpec, ids: list[str], labels: np.ndarray | None, seed: int,
                         num_anchors: int, device: torch.device) -> Anchors:
    """Run a selector that needs no embeddings (random, stratified) on raw sample ids."""
    def no_pool(name: str):
        raise ValueError(f"this task kind trains its own models; out-of-domain pools ({name!r}) are not available")

    ctx = AnchorContext(num_anchors=num_anchors, seed=seed, ids=list(ids), labels=labels, banks={},
                        excluded=frozenset(), device=device, views={}, pool_banks=no_pool)
    return spec.build().select(ctx)


def without_failures(df: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The rows that are not failures, and a note counting the failed units (empty if
    none; a failed unit is stored as a single ``error`` row)."""
    failed = df["status"] == "error"
    note = f"\n\n{int(failed.sum())} unit(s) failed; see the results store.\n" if failed.any() else ""
    return df[~failed], note


def with_arrows(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with each metric name followed by its declared direction's arrow (for headers)."""
    dirs = directions(df)
    return df.assign(metric=df["metric"].map(lambda m: arrow(m, dirs.get(m, "neutral"))))


def summary_table(df: pd.DataFrame, index: list[str], column: str, digits: int = 3) -> str:
    """A pipe table with one row per ``index`` combination and one column per value of
    ``column``; a cell is the mean over seeds of the mean of ``value`` over its other
    rows, with its 95 % hierarchical-bootstrap interval (:mod:`relbench.uncertainty`:
    from the rows' per-sample values where stored, over seeds otherwise). Cells whose
    rows are all not achievable show ``n/a``. Wider than a screen, the table is split,
    the ``index`` columns repeated (:func:`relbench.api.table`)."""
    if df.empty:
        return "_no results yet_"
    cols = sorted(df[column].dropna().unique().tolist(), key=str)
    rows = []
    for keys, group in df.groupby(index, sort=True, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        cells = []
        for col in cols:
            sub = group[group[column] == col]
            ok = sub[(sub["status"] == "ok") & sub["value"].notna()]
            cells.append(_with_interval(ok, digits) if len(ok) else ("n/a" if len(sub) else ""))
        rows.append([*keys, *cells])
    return table(rows, headers=[*index, *cols], keep=len(index))


def _with_interval(rows: pd.DataFrame, digits: int) -> str:
    draws = bootstrap_columns(rows, {"cell": pd.Series(True, index=rows.index)}, None)
    low, high = draws.interval("cell")
    mean = f"{draws.point[0]:.{digits}f}"
    return mean if low == high else f"{mean} [{low:.{digits}f}, {high:.{digits}f}]"
