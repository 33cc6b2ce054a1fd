"""Seeded, stratified splitting and subsampling: what data set plugins use to cut their
splits and what the harness uses to draw each seed's samples.

Both functions return sorted index arrays (the source order is kept) and depend only
on the labels and the seed, so a draw is the same on every machine.
"""

from __future__ import annotations

import numpy as np


def stratified_split(labels: np.ndarray | None, n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split ``n`` samples into (train, test) index arrays.

    With labels, every class with at least two members puts ``round(count ×
    test_fraction)`` of them (at least one, at most ``count − 1``) into the test split;
    a class with one member stays in train. Without labels the split is a seeded
    random draw of ``round(n × test_fraction)`` samples.
    """
    rng = np.random.default_rng(seed)
    if labels is None:
        perm = rng.permutation(n)
        k = int(round(n * test_fraction))
        return np.sort(perm[k:]), np.sort(perm[:k])
    labels = np.asarray(labels)
    test = []
    for cls in np.unique(labels):
        members = np.flatnonzero(labels == cls)
        if len(members) < 2:
            continue
        k = min(max(int(round(len(members) * test_fraction)), 1), len(members) - 1)
        test.append(rng.permutation(members)[:k])
    test_idx = np.sort(np.concatenate(test)) if test else np.zeros(0, dtype=np.int64)
    train_mask = np.ones(n, dtype=bool)
    train_mask[test_idx] = False
    return np.flatnonzero(train_mask), test_idx


def stratified_subsample(labels: np.ndarray | None, n: int, size: int | None, seed: int) -> np.ndarray:
    """Indices of a seeded subsample of ``size`` out of ``n`` samples (all when ``size`` is
    ``None`` or not smaller than ``n``).

    Stratified: member ``j`` of a shuffled class of ``n_c`` samples gets the key
    ``j / n_c`` and the ``size`` smallest keys are kept (random tie-breaks), so each class
    gets ``size × n_c / n`` samples up to one, and every class is present when ``size`` is
    at least the number of classes.
    """
    if size is None or size >= n:
        return np.arange(n)
    rng = np.random.default_rng(seed)
    if labels is None:
        return np.sort(rng.permutation(n)[:size])
    labels = np.asarray(labels)
    key = np.empty(n, dtype=np.float64)
    for cls in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == cls))
        key[members] = np.arange(len(members)) / len(members)
    order = np.lexsort((rng.random(n), key))
    return np.sort(order[:size])
