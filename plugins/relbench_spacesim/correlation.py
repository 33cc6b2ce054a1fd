"""Does a similarity measure predict whether stitching works? The rank correlation, over
encoder pairs, between a measure and a stitching score of the same task."""

from __future__ import annotations

from typing import Any

import numpy as np
from relbench.api import deferred_import

pd = deferred_import("pandas")

PAIR = ["source", "target"]


def pair_means(rows: pd.DataFrame, value: str) -> pd.Series:
    """The mean of column ``value`` per (source, target) pair, over seeds and any other
    rows of the pair, without the diagonal (an encoder with itself)."""
    rows = rows[rows["source"] != rows["target"]]
    return rows.groupby(PAIR)[value].mean()


def spearman_over_pairs(measure_rows: pd.DataFrame, stitching_rows: pd.DataFrame, score: str = "score",
                        resamples: int = 9999, seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """Spearman's ρ between a measure and a stitching score over the encoder pairs both
    frames have, with a percentile bootstrap interval over pairs.

    ``measure_rows``: a measure's rows (``source``, ``target``, ``value``; e.g. the
    space-similarity kind's rows of one metric); ``stitching_rows``: ``source``,
    ``target`` and ``score`` (one method's stitched score). Each pair enters once, with
    its mean over seeds; pairs of an encoder with itself are left out. Returns ``rho``,
    ``low``, ``high`` (the interval, NaN with fewer than 3 pairs or a constant
    resample) and ``pairs`` (their number). The sign is the measure's own: a distance
    (lower is more similar) that predicts stitching correlates negatively."""
    from scipy.stats import bootstrap, spearmanr

    both = pd.concat([pair_means(measure_rows, "value").rename("measure"),
                      pair_means(stitching_rows, score).rename("score")], axis=1, join="inner").dropna()
    x, y = both["measure"].to_numpy(float), both["score"].to_numpy(float)
    rho = float(spearmanr(x, y).statistic) if len(both) >= 2 else float("nan")
    low = high = float("nan")
    if len(both) >= 3:
        with np.errstate(invalid="ignore", divide="ignore"):
            interval = bootstrap((x, y), lambda a, b: spearmanr(a, b).statistic, paired=True, vectorized=False,
                                 n_resamples=resamples, confidence_level=level, method="percentile",
                                 random_state=np.random.default_rng(seed)).confidence_interval
        low, high = float(interval.low), float(interval.high)
    return {"rho": rho, "low": low, "high": high, "pairs": len(both)}
