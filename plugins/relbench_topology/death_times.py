"""0-dimensional death times of point clouds as numbers to report (not to train on):
the minimum-spanning-tree edge lengths, found by scipy, per class and per group of the
size topological densification's batches give a class."""

from __future__ import annotations

import numpy as np

def mst_death_times(points: np.ndarray) -> np.ndarray:
    """The ``m − 1`` finite 0-dim death times of the Vietoris–Rips filtration of ``points``
    (``m × d``): the Euclidean minimum spanning tree's edge lengths, sorted ascending.

    Computed in float64 with :func:`scipy.sparse.csgraph.minimum_spanning_tree` on the
    dense distance matrix; identical points merge at 0 (scipy reads a zero entry as a
    missing edge, so their zero distance enters as half the smallest positive distance,
    which keeps Kruskal's order, and leaves as 0)."""
    from scipy.sparse.csgraph import minimum_spanning_tree
    from scipy.spatial.distance import cdist

    X = np.asarray(points, dtype=np.float64)
    if len(X) < 2:
        return np.zeros(0)
    D = cdist(X, X)
    zero = (D == 0) & ~np.eye(len(X), dtype=bool)
    stand_in = D[D > 0].min() / 2 if (D > 0).any() else 1.0
    D[zero] = stand_in
    lengths = minimum_spanning_tree(D).data.copy()
    lengths[lengths == stand_in] = 0.0
    return np.sort(lengths)


def grouped_death_times(points: np.ndarray, labels: np.ndarray, group_size: int, seed: int) -> np.ndarray:
    """Death times of same-class groups of ``group_size`` points, concatenated: each
    class's rows are shuffled (seeded) and cut into consecutive groups of ``group_size``,
    the incomplete last group left out, so every cloud has the size a class has in the
    regularizer's class-balanced batches (death times shrink as a cloud grows). A class
    with fewer than ``group_size`` rows gives no group."""
    if group_size < 2:
        raise ValueError(f"a group needs at least two points (an edge), got group_size={group_size}")
    X, y = np.asarray(points, dtype=np.float64), np.asarray(labels)
    rng = np.random.default_rng(seed)
    parts = []
    for c in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == c))
        for start in range(0, len(members) - group_size + 1, group_size):
            parts.append(mst_death_times(X[members[start:start + group_size]]))
    return np.concatenate(parts) if parts else np.zeros(0)


def quantile_metric(q: float) -> str:
    """The metric name of death-time quantile ``q``: ``death_time_q10`` for 0.1."""
    return f"death_time_q{round(100 * q):02d}"
