"""The summary cells a task kind gets when it computes none of its own: per cell of the
kind's :attr:`~relbench.interfaces.TaskKind.columns` and metric, the mean over seeds of
each seed's mean, with its Student-t interval over seeds
(:func:`relbench.uncertainty.seed_interval`, the interval the experiment pages print
beside such means) and the number of seeds.

It is what ``relbench export --summary`` and the board's tables show for a kind whose
page has no ranking of its own to export: every measured cell, not a page's selection
(a page that picks one setting on validation data shows a subset of these cells, with
the same numbers). A kind whose page computes its cells otherwise overrides
:meth:`~relbench.interfaces.TaskKind.summary_cells`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from relbench import deferred
from relbench.uncertainty import seed_interval

pd = deferred.load("pandas")

#: what these cells measure (the ``measure`` column of the summary)
MEASURE = "mean over seeds"


def seed_mean_cells(results: pd.DataFrame, columns: tuple[str, ...] | list[str],
                    summary: bool = True) -> list[dict[str, Any]] | None:
    """One cell per value of ``columns`` (those the rows have) and metric, over the rows
    with status ``ok`` and a finite value: ``score`` (the mean over seeds of each seed's
    mean), ``low`` and ``high`` (the 95 % t-interval over seeds, None where it cannot be
    drawn), ``n`` (seeds) and ``direction`` (the metric's, as stored); with ``summary``
    also ``tie_group`` None (no ranking) and ``measure`` :data:`MEASURE` (unless
    ``measure`` is one of the columns). A missing column value is None. None when no row
    qualifies."""
    if results.empty or "value" not in results:
        return None
    values = pd.to_numeric(results["value"], errors="coerce").astype(float)
    ok = results[(results["status"] == "ok") & np.isfinite(values)]
    if ok.empty:
        return None
    # a row stored without a seed (a deterministic baseline) counts as one seed of its own
    ok = ok.assign(value=values[ok.index], seed=ok["seed"].astype(object).where(ok["seed"].notna(), -1))
    keys = [c for c in columns if c in ok]
    keys_and_metric = [*keys, "metric"]
    cells = []
    for key, group in ok.groupby(keys_and_metric, sort=False, dropna=False):
        per_seed = group.groupby("seed", sort=True)["value"].mean()
        low, high = seed_interval(list(per_seed))
        direction = group["direction"].dropna().iloc[0] if "direction" in group and group["direction"].notna().any() \
            else None
        cell = {c: _plain(v) for c, v in zip(keys_and_metric, key)}
        cell.update(score=float(per_seed.mean()), low=_finite(low), high=_finite(high), n=int(len(per_seed)),
                    direction=direction)
        if summary:
            cell.update(tie_group=None, measure=cell.get("measure", MEASURE))
        cells.append(cell)
    return cells


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _plain(value: Any) -> Any:
    """A column value as a cell holds it: None for a missing one or the empty mark."""
    if value is None or value == "-" or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value
