"""0-dimensional persistent homology of a point cloud's Vietoris–Rips filtration.

Every connected component is born at 0 and dies when an edge of the minimum spanning
tree (MST) merges it into another, so the death times are exactly the MST's edge
lengths. The tree is found on detached distances; the lengths are then recomputed from
the points, so gradients flow to the points through the chosen edges (Hofer et al. 2020).
"""

from __future__ import annotations

import torch


@torch.no_grad()
def mst_edges(D: torch.Tensor) -> torch.Tensor:
    """Edges ``(m−1) × 2`` of a minimum spanning tree of the complete graph with
    distance matrix ``D`` (``m × m``), by Prim's algorithm vectorised over nodes."""
    m = D.shape[0]
    if m < 2:
        return torch.zeros(0, 2, dtype=torch.long, device=D.device)
    in_tree = torch.zeros(m, dtype=torch.bool, device=D.device)
    in_tree[0] = True
    best = D[0].clone()
    parent = torch.zeros(m, dtype=torch.long, device=D.device)
    edges = []
    for _ in range(m - 1):
        j = torch.argmin(best.masked_fill(in_tree, float("inf")))
        edges.append(torch.stack([parent[j], j]))
        in_tree[j] = True
        closer = D[j] < best
        best = torch.where(closer, D[j], best)
        parent = torch.where(closer, j, parent)
    return torch.stack(edges)


def death_times(points: torch.Tensor) -> torch.Tensor:
    """The ``m−1`` finite 0-dimensional death times of ``points`` (``m × d``), i.e. the
    MST edge lengths, differentiable with respect to the points."""
    edges = mst_edges(torch.cdist(points.detach(), points.detach()))
    if len(edges) == 0:
        return points.new_zeros(0)
    diff = points[edges[:, 0]] - points[edges[:, 1]]
    return diff.pow(2).sum(dim=1).clamp_min(1e-12).sqrt()


def class_death_times(points: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Death times of each class's points, concatenated (classes with one point have none)."""
    parts = [death_times(points[labels == c]) for c in torch.unique(labels)]
    return torch.cat(parts) if parts else points.new_zeros(0)
