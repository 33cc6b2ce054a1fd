"""Intervals and paired comparisons for the stitching page's ranking
(:mod:`relbench.uncertainty` computes them: Student-t over seeds; with one seed, a
bootstrap over its test samples from the stored per-sample predictions).

For each combination: the interval of its stitched score (off-diagonal cells) and of its
own-space score (diagonal cells), and the paired difference to the best combination with
its interval. A difference is taken on the encoder pairs both combinations reach (an
absolute head that reaches only equal widths is compared with the best on those pairs),
on the same seeds and test samples; a combination reaching as many pairs as the best
whose interval of that difference contains 0 is *indistinguishable from the best*.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from relbench.api import bootstrap_columns, deferred_import, Draws, indistinguishable, with_samples

pd = deferred_import("pandas")

#: the columns that make a combination (the page's grid)
COMBO = ["selector", "similarity", "stitcher", "regularizer"]
#: a cell of a stitching unit (the unit id fixes the combination, target and seed)
CELL = ["source"]
#: how many of a page's paired draws of a combination's stitched score its index cell
#: keeps (the first ones; a page draws 1,000): 4 bytes each, base64 in the leaderboard manifest
KEPT_DRAWS = 1000


def _key(combo: Any) -> str:
    return " · ".join(map(str, combo))


def _pairs(rows: pd.DataFrame) -> pd.Series:
    return rows["source"].astype(str) + "\0" + rows["target"].astype(str)


def combination_draws(df: pd.DataFrame, metric: str, scorer: Any, best: tuple | None) -> Draws | None:
    """Paired draws of every combination's stitched and own-space score of
    ``metric`` (columns ``"<combo> | stitched"``, ``"<combo> | own"``) and, against
    ``best`` (a combination tuple), of each combination and the best on their shared pairs
    (``"<combo> | shared"``, ``"<combo> | best on shared"``). ``scorer``: the metric's
    plugin (None: stored values only, intervals over seeds)."""
    rows = df[(df["metric"] == metric) & (df["status"] == "ok")]
    if rows.empty:
        return None
    rows = with_samples(rows, df, CELL)
    stitched = rows["source"] != rows["target"]
    pairs = _pairs(rows)
    groups = rows.groupby(COMBO, sort=False, dropna=False).groups
    columns: dict[str, pd.Series] = {}
    best_rows = rows.index.isin(groups[best]) & stitched if best in groups else None
    for combo, index in groups.items():
        member = rows.index.isin(index)
        columns[f"{_key(combo)} | stitched"] = pd.Series(member & stitched, index=rows.index)
        columns[f"{_key(combo)} | own"] = pd.Series(member & ~stitched, index=rows.index)
        if best_rows is not None and combo != best:
            shared = set(pairs[member & stitched]) & set(pairs[best_rows])
            in_shared = pairs.isin(shared).to_numpy()
            columns[f"{_key(combo)} | shared"] = pd.Series(member & stitched & in_shared, index=rows.index)
            columns[f"{_key(combo)} | best on shared"] = pd.Series(best_rows & in_shared, index=rows.index)
    return bootstrap_columns(rows, columns, scorer)


def add_intervals(scores: pd.DataFrame, draws: Draws | None, best: tuple | None, reverse: bool) -> pd.DataFrame:
    """``scores`` (one row per combination) with ``stitched_lo/hi``, ``own_lo/hi``,
    ``delta`` (oriented: negative means worse than the best), ``delta_lo/hi`` and
    ``tie`` (indistinguishable from the best) filled in from ``draws``."""
    out = scores.copy()
    for col in ("stitched_lo", "stitched_hi", "own_lo", "own_hi", "delta", "delta_lo", "delta_hi"):
        out[col] = np.nan
    out["tie"] = False
    if draws is None:
        return out
    best_coverage = out.loc[[tuple(r) == best for r in out[COMBO].itertuples(index=False)], "coverage"]
    for i, r in out.iterrows():
        combo = tuple(r[COMBO])
        key = _key(combo)
        for part in ("stitched", "own"):
            label = f"{key} | {part}"
            if label in draws.labels and np.isfinite(draws.point[draws.column(label)]):
                out.loc[i, [f"{part}_lo", f"{part}_hi"]] = draws.interval(label)
        if combo == best:
            out.loc[i, ["delta", "delta_lo", "delta_hi", "tie"]] = [0.0, 0.0, 0.0, True]
        elif f"{key} | shared" in draws.labels:
            diff, low, high = draws.difference(f"{key} | shared", f"{key} | best on shared")
            if not reverse:  # lower is better: a positive difference is worse
                diff, low, high = -diff, -high, -low
            out.loc[i, ["delta", "delta_lo", "delta_hi"]] = [diff, low, high]
            out.loc[i, "tie"] = (len(best_coverage) and r["coverage"] >= best_coverage.iloc[0]
                                 and not bool(r["reference"]) and indistinguishable(low, high))
    return out


def draw_label(combo: tuple, part: str) -> str:
    """The label of ``combo``'s column ``part`` (``stitched`` or ``own``) in the draws of
    :func:`combination_draws`."""
    return f"{_key(combo)} | {part}"


def stitched_draws(draws: Draws | None, combo: tuple) -> str | None:
    """The first :data:`KEPT_DRAWS` draws of ``combo``'s stitched score, packed
    (:func:`pack_draws`) to be kept in the leaderboard manifest; None without them. Draw
    ``b`` of every combination of a page is the same draw (of the seeds' multivariate t,
    or of one seed's test samples), so the kept draws stay paired across its
    combinations."""
    label = f"{_key(combo)} | stitched"
    if draws is None or label not in draws.labels:
        return None
    return pack_draws(draws.draws[:KEPT_DRAWS, draws.column(label)])


def pack_draws(values: np.ndarray) -> str:
    """Draws as text for JSON: base64 of little-endian float32 (NaN kept: a resample that
    drew no seed with a stitched cell of the combination)."""
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode("ascii")


def unpack_draws(text: str) -> np.ndarray:
    """The draws :func:`pack_draws` packed, as float64."""
    return np.frombuffer(base64.b64decode(text), dtype="<f4").astype(float)
