"""Retrieval metrics (Jaccard@k, MRR) of rankings, Pearson r, and the neighbour search
that makes the word-embedding protocol's rankings.

Row ``i`` of ``source`` and of ``target`` is the same item (a word, a sample) embedded
in two spaces. Following the relative-representations paper's word-embedding protocol
(§4.1, and its reference code), the *target neighbours* of item ``i`` are the top-k
rows of ``target`` nearest (by cosine) to ``target[i]``, and its *cross neighbours* the
top-k rows of ``target`` nearest to ``source[i]``: the source vector is searched in the
target space, which is why the absolute spaces of two different models score ≈ 0.
:class:`JaccardAtK` compares the two lists, :class:`MRR` ranks item ``i`` itself in the
cross list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from relbench.api import deferred_import, Metric

torch = deferred_import("torch")


def _tensor(x) -> torch.Tensor:
    return x.detach().float() if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x), dtype=torch.float32)


def top_k_neighbours(queries, index, k: int, chunk: int = 2048) -> torch.Tensor:
    """Indices (``n × k``, best first) of the ``k`` rows of ``index`` with the highest
    cosine similarity to each row of ``queries``; computed in chunks of queries."""
    q = torch.nn.functional.normalize(_tensor(queries), dim=1)
    ix = torch.nn.functional.normalize(_tensor(index), dim=1).to(q.device)
    if q.shape[1] != ix.shape[1]:
        raise ValueError(f"queries have width {q.shape[1]} but the index has width {ix.shape[1]}")
    k = min(int(k), ix.shape[0])
    out = [torch.topk(part @ ix.T, k, dim=1).indices for part in q.split(chunk)]
    return torch.cat(out) if out else torch.zeros(0, k, dtype=torch.long)


def neighbour_rankings(source, target, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """The word-embedding protocol's two rankings of every item, ``n × k`` each (needs
    equal widths): its target neighbours, and the cross neighbours of its source vector."""
    own = top_k_neighbours(target, target, k)
    cross = top_k_neighbours(source, target, k)
    return own.cpu().numpy(), cross.cpu().numpy()


def _rankings(y_true, y_pred) -> tuple[np.ndarray, np.ndarray]:
    """The relevant items ``n × m`` (``y_true``; ``n``: one each) and the retrieved items
    ``n × k`` (``y_pred``) of ``n`` queries, as arrays."""
    relevant, retrieved = np.asarray(y_true), np.asarray(y_pred)
    relevant = relevant.reshape(len(relevant), -1)
    if retrieved.ndim != 2 or len(retrieved) != len(relevant):
        raise ValueError(f"a ranking metric needs n × k retrieved items for the n = {len(relevant)} queries, "
                         f"got shape {retrieved.shape}")
    return relevant, retrieved


def _hits(relevant: np.ndarray, retrieved: np.ndarray) -> np.ndarray:
    """``n × k``: whether each retrieved item is among its query's relevant items."""
    return (retrieved[:, :, None] == relevant[:, None, :]).any(axis=2)


@dataclass
class JaccardAtK(Metric):
    """Jaccard@k: per query, the Jaccard index |relevant ∩ retrieved| / |relevant ∪
    retrieved| of its relevant and its k retrieved items (each row listing distinct
    items), averaged over queries; 1 when the lists agree (row name ``jaccard@k``).

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "jaccard"
    output: ClassVar[str] = "ranking"
    aggregation: ClassVar[str] = "mean"

    def per_sample(self, y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
        """Each query's Jaccard index."""
        relevant, retrieved = _rankings(y_true, y_pred)
        common = _hits(relevant, retrieved).sum(axis=1)
        return common / (relevant.shape[1] + retrieved.shape[1] - common)


@dataclass
class MRR(Metric):
    """Mean reciprocal rank: per query, 1 / the rank of the first relevant item among
    the retrieved ones (0 when none is), averaged over queries; 1 when every query
    retrieves a relevant item first (row name ``mrr@k``). Reciprocal ranks are taken in
    single precision, as the stored results have them.

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "mrr"
    output: ClassVar[str] = "ranking"
    aggregation: ClassVar[str] = "mean"

    def per_sample(self, y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
        """Each query's reciprocal rank."""
        hits = _hits(*_rankings(y_true, y_pred))
        ranks = (hits.argmax(axis=1) + 1).astype(np.float32)
        return np.where(hits.any(axis=1), np.float32(1) / ranks, np.float32(0)).astype(float)


@dataclass
class PearsonR(Metric):
    """Pearson correlation coefficient of predictions with targets (a statistic of the
    whole set; nan when either is constant or shorter than two).

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "pearson_r"
    output: ClassVar[str] = "regression"
    aggregation: ClassVar[str] = "whole_set"
    #: a correlation moves in larger steps than a share of samples: 0.05 of r counts
    claim_margin: ClassVar[float] = 0.05

    def compute(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        """``Σ (t − t̄)(p − p̄) / √(Σ (t − t̄)² · Σ (p − p̄)²)`` over the flattened values."""
        a = np.asarray(y_pred, dtype=np.float64).reshape(-1)
        b = np.asarray(y_true, dtype=np.float64).reshape(-1)
        if a.shape != b.shape:
            raise ValueError(f"pearson_r needs equal lengths, got {a.shape[0]} and {b.shape[0]}")
        if a.size < 2:
            return float("nan")
        a = a - a.mean()
        b = b - b.mean()
        denom = np.sqrt((a * a).sum() * (b * b).sum())
        return float((a * b).sum() / denom) if denom > 0 else float("nan")
