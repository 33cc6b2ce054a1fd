"""Neighbourhood agreement between two aligned spaces, and Pearson correlation.

Row ``i`` of ``source`` and of ``target`` is the same item (a word, a sample) embedded
in two spaces. Following the relative-representations paper's word-embedding protocol
(§4.1, and its reference code), the *target neighbours* of item ``i`` are the top-k
rows of ``target`` nearest (by cosine) to ``target[i]``, and its *cross neighbours* the
top-k rows of ``target`` nearest to ``source[i]``: the source vector is searched in the
target space, which is why the absolute spaces of two different models score ≈ 0.
"""

from __future__ import annotations

import lazy_loader
import numpy as np

torch = lazy_loader.load("torch")


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


def jaccard_per_item(source, target, k: int = 10) -> np.ndarray:
    """Per item, the Jaccard index between its top-k neighbours in ``target`` and the
    top-k neighbours of its ``source`` vector searched in ``target`` (needs equal widths)."""
    own = top_k_neighbours(target, target, k)
    cross = top_k_neighbours(source, target, k)
    return np.array([len(set(a) & set(b)) / len(set(a) | set(b)) for a, b in zip(own.tolist(), cross.tolist())],
                    dtype=float)


def jaccard_at_k(source, target, k: int = 10) -> float:
    """Mean over items of :func:`jaccard_per_item`; 1 for identical tables."""
    scores = jaccard_per_item(source, target, k)
    return float(scores.mean()) if len(scores) else float("nan")


def reciprocal_ranks(source, target, k: int = 10) -> np.ndarray:
    """Per item ``i``, the reciprocal rank of ``i`` among the top-k neighbours of
    ``source[i]`` searched in ``target`` (0 when it is not among them)."""
    cross = top_k_neighbours(source, target, k)
    hit = cross == torch.arange(cross.shape[0], device=cross.device).unsqueeze(1)
    ranks = torch.arange(1, cross.shape[1] + 1, dtype=torch.float32, device=cross.device)
    return (hit.float() / ranks).sum(dim=1).cpu().numpy().astype(float)


def mrr(source, target, k: int = 10) -> float:
    """Mean reciprocal rank (:func:`reciprocal_ranks`); 1 for identical tables."""
    rr = reciprocal_ranks(source, target, k)
    return float(rr.mean()) if len(rr) else float("nan")


def pearson_r(x, y) -> float:
    """Pearson correlation coefficient of two equally long sequences (nan when either
    is constant or shorter than two)."""
    a = np.asarray(x, dtype=np.float64).reshape(-1)
    b = np.asarray(y, dtype=np.float64).reshape(-1)
    if a.shape != b.shape:
        raise ValueError(f"pearson_r needs equal lengths, got {a.shape[0]} and {b.shape[0]}")
    if a.size < 2:
        return float("nan")
    a = a - a.mean()
    b = b - b.mean()
    denom = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / denom) if denom > 0 else float("nan")
