"""A tiny citation-like graph written in the Planetoid file format (``ind.<graph>.*``,
pickled SciPy/NumPy objects and a test-index text file), with the truth it encodes."""

from __future__ import annotations

import pickle
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse


@dataclass
class TinyGraph:
    """What the files hold: every node's features and label (−1: none) and the
    undirected edges as a set of ``(u, v)`` with ``u < v``."""

    features: np.ndarray
    labels: np.ndarray
    edges: set[tuple[int, int]]


def tiny_graph(classes: int = 3, per_class: int = 20, gap: int | None = 45, seed: int = 0) -> TinyGraph:
    """Communities that are the classes (dense inside, sparse across), features that
    hint at the class through noise; node ``gap`` is isolated, featureless and unlabelled
    (CiteSeer has such nodes inside its test range)."""
    rng = np.random.default_rng(seed)
    n = classes * per_class
    labels = np.arange(n) % classes
    features = (rng.random((n, 12)) < 0.15).astype(np.float32)
    features[np.arange(n), labels] += (rng.random(n) < 0.6).astype(np.float32)
    same = labels[:, None] == labels[None, :]
    draws = rng.random((n, n)) < np.where(same, 0.3, 0.02)
    edges = {(u, v) for u, v in zip(*np.nonzero(np.triu(draws, 1)))}
    if gap is not None:
        features[gap] = 0
        labels = labels.copy()
        labels[gap] = -1
        edges = {(u, v) for u, v in edges if gap not in (u, v)}
    return TinyGraph(features, labels.astype(np.int64), {(int(u), int(v)) for u, v in edges})


def _onehot(labels: np.ndarray, classes: int) -> np.ndarray:
    out = np.zeros((len(labels), classes), dtype=np.int32)
    out[np.arange(len(labels)), labels] = 1
    return out


def _dump(path: Path, obj) -> None:
    with open(path, "wb") as fh:
        pickle.dump(obj, fh, protocol=2)


def write_planetoid(folder: Path, graph: str, truth: TinyGraph, first_test: int = 40, seed: int = 0) -> None:
    """Write ``truth`` as Planetoid files: nodes before ``first_test`` in ``allx``/``ally``
    (the first ten also in ``x``/``y``), the labelled nodes from ``first_test`` on in
    ``tx``/``ty`` in a shuffled order that ``test.index`` gives; the adjacency lists name
    some edges in one direction only, one twice, and hold a self-loop."""
    folder.mkdir(parents=True, exist_ok=True)
    classes = int(truth.labels.max()) + 1
    test_order = np.flatnonzero(truth.labels[first_test:] >= 0) + first_test
    np.random.default_rng(seed).shuffle(test_order)
    head = np.arange(first_test)
    parts = {"x": head[:10], "allx": head, "tx": test_order}
    for name, nodes in parts.items():
        _dump(folder / f"ind.{graph}.{name}", scipy.sparse.csr_matrix(truth.features[nodes]))
        _dump(folder / f"ind.{graph}.{name.replace('x', 'y')}", _onehot(truth.labels[nodes], classes))
    adjacency = defaultdict(list)
    for i, (u, v) in enumerate(sorted(truth.edges)):
        adjacency[u].append(v)
        if i % 2:
            adjacency[v].append(u)
    first = min(truth.edges)
    adjacency[first[0]] += [first[1], first[0]]  # a repeated edge and a self-loop
    _dump(folder / f"ind.{graph}.graph", adjacency)
    (folder / f"ind.{graph}.test.index").write_text("".join(f"{i}\n" for i in test_order))
