"""The label-permutation null of a stitching score: what the same stitched predictions
score against the test labels in a random order, the chance level given how often the
decoder predicts each class and how often each class occurs.

A task whose grid holds no selector declared a chance null (anchors that correspond to
nothing, :mod:`relbench_stitching.chance`) still gets a floor for its *From chance to own
head* table from this one, computed from the per-sample predictions the rows store, with
no unit recomputed. For each stitched cell the predictions are scored by the page's own
metric plugin against :data:`PERMUTATIONS` seeded random pairings of predictions and
labels (permuting the predictions pairs them with the labels as permuting the labels
does), and the null is the mean of those scores. It is the weaker of the two nulls: it
keeps the method's class frequencies but not its head, anchors or tuning.
"""

from __future__ import annotations

import numpy as np

from relbench.api import deferred_import, read_predictions, with_samples
from relbench_stitching.intervals import CELL, COMBO

pd = deferred_import("pandas")

#: random pairings of predictions with labels per stitched cell, and the seed of their draw
PERMUTATIONS = 20
NULL_SEED = 0


def permuted_score(y_true: np.ndarray, y_pred: np.ndarray, metric, permutations: int = PERMUTATIONS,
                   seed: int = NULL_SEED) -> float:
    """The mean score of ``metric`` (a metric plugin) over ``permutations`` seeded random
    pairings of the predictions ``y_pred`` with the labels ``y_true``."""
    rng = np.random.default_rng(seed)
    shuffled = np.stack([y_pred[rng.permutation(len(y_pred))] for _ in range(permutations)])
    return float(np.mean(metric.compute_weighted(y_true, shuffled, np.ones((1, len(y_true)), dtype=np.int64))))


def null_per_seed(df: pd.DataFrame, combo: tuple, metric_name: str, metric) -> pd.Series:
    """Per seed, the mean over ``combo``'s stitched cells of ``metric_name`` of their
    permutation null (a prepared frame; cells without stored predictions are left out,
    and a seed without any has none)."""
    rows = df[(df["metric"] == metric_name) & (df["status"] == "ok") & (df[COMBO] == list(combo)).all(axis=1)
              & (df["source"] != df["target"])]
    if rows.empty or metric is None:
        return pd.Series(dtype=float)
    rows = with_samples(rows, df, CELL)
    nulls = [_null_of(record, metric) for record in rows["per_sample"]]
    return pd.Series(nulls, index=rows.index).groupby(rows["seed"]).mean().dropna()


def _null_of(record, metric) -> float:
    """A cell's permutation null from its stored predictions; NaN without them."""
    try:
        return permuted_score(*read_predictions(record), metric) if isinstance(record, dict) else np.nan
    except ValueError:  # a record of per-sample values, not of predictions
        return np.nan
