"""0-dimensional persistent homology of a point cloud's Vietoris–Rips filtration.

Every connected component is born at 0 and dies when an edge of the minimum spanning
tree (MST) merges it into another, so the death times are exactly the MST's edge
lengths. The tree is found on detached distances; the lengths are then recomputed from
the points, so gradients flow to the points through the chosen edges (Hofer et al. 2020).
"""

from __future__ import annotations

from relbench.api import deferred_import

torch = deferred_import("torch")


def mst_edges(D: torch.Tensor) -> torch.Tensor:
    """Edges of a minimum spanning tree of the complete graph with distance matrix ``D``.

    ``D`` is ``m × m`` (→ ``(m−1) × 2`` edges) or a batch ``C × m × m`` of independent
    graphs (→ ``C × (m−1) × 2``). Prim's algorithm, vectorised over nodes and over the
    batch: ``m − 1`` steps whatever the batch size.
    """
    with torch.no_grad():
        single = D.ndim == 2
        D = D.unsqueeze(0) if single else D
        C, m, _ = D.shape
        if m < 2:
            out = torch.zeros(C, 0, 2, dtype=torch.long, device=D.device)
            return out[0] if single else out
        rows = torch.arange(C, device=D.device)
        in_tree = torch.zeros(C, m, dtype=torch.bool, device=D.device)
        in_tree[:, 0] = True
        best = D[:, 0].clone()
        parent = torch.zeros(C, m, dtype=torch.long, device=D.device)
        edges = []
        for _ in range(m - 1):
            j = best.masked_fill(in_tree, float("inf")).argmin(dim=1)
            edges.append(torch.stack([parent[rows, j], j], dim=1))
            in_tree[rows, j] = True
            candidate = D[rows, j]
            closer = candidate < best
            best = torch.where(closer, candidate, best)
            parent = torch.where(closer, j.unsqueeze(1), parent)
        out = torch.stack(edges, dim=1)
        return out[0] if single else out


def death_times(points: torch.Tensor) -> torch.Tensor:
    """The ``m−1`` finite 0-dimensional death times of ``points`` (``m × d``), i.e. the
    MST edge lengths, differentiable with respect to the points."""
    edges = mst_edges(torch.cdist(points.detach(), points.detach()))
    if len(edges) == 0:
        return points.new_zeros(0)
    diff = points[edges[:, 0]] - points[edges[:, 1]]
    return diff.pow(2).sum(dim=1).clamp_min(1e-12).sqrt()


def death_times_per_class(points: torch.Tensor, labels: torch.Tensor) -> list[torch.Tensor]:
    """The death times of each class's points, one tensor per class with two or more
    points (in sorted label order; a class with one point has no edge and is left out).

    Classes of equal size (the usual class-balanced batch) share one batched MST."""
    classes, counts = torch.unique(labels, return_counts=True)
    per_class: dict[int, torch.Tensor] = {}
    for size in torch.unique(counts).tolist():
        if size < 2:
            continue
        chosen = classes[counts == size]
        members = torch.stack([torch.nonzero(labels == c).flatten() for c in chosen])
        group = points[members]  # C × size × d
        edges = mst_edges(torch.cdist(group.detach(), group.detach()))  # C × (size−1) × 2
        picked = group.gather(1, edges.reshape(len(chosen), -1, 1).expand(-1, -1, group.shape[2]))
        picked = picked.reshape(len(chosen), size - 1, 2, group.shape[2])
        lengths = (picked[:, :, 0] - picked[:, :, 1]).pow(2).sum(dim=2).clamp_min(1e-12).sqrt()
        per_class.update(zip(chosen.tolist(), lengths))
    return [per_class[c] for c in sorted(per_class)]


def class_death_times(points: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Death times of each class's points, concatenated (classes with one point have none)."""
    parts = death_times_per_class(points, labels)
    return torch.cat(parts) if parts else points.new_zeros(0)
