"""Vector-quantised cosine (Moschella et al. 2023, appendix A.3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
import torch
from torch.nn import functional as F

from relbench.interfaces import Similarity


@dataclass
class VQCosine(Similarity):
    """Vector-quantised cosine: points are snapped to agglomerative-cluster centroids of
    the bank before the cosine, for robustness to small non-isometric distortions
    (Moschella et al. 2023, appendix A.3).

    ``fit`` clusters the bank's training embeddings at distance threshold ``t`` and keeps
    each cluster's mean as a centroid. ``project`` replaces every row of ``X`` and of the
    anchors by its nearest centroid (training rows included, so one rule serves every
    split; a training row's nearest centroid is nearly always its own cluster's mean)
    and takes the cosine. The snap is piecewise constant; gradients pass
    straight through it (``x + (c − x).detach()``) so the projection stays usable in
    training.

    Parameters
    ----------
    t : float, default 0.5
        Distance threshold of the agglomerative clustering (paper: several values of
        ``t``, none singled out). With ``normalise`` it is a Euclidean distance between
        unit vectors, in ``(0, 2]``.
    linkage : "average" | "complete" | "single" | "ward", default "average"
        Linkage of the clustering (not stated in the paper; ours: average, whose
        threshold reads as a mean distance).
    normalise : bool, default True
        Cluster L2-normalised embeddings (the cosine only sees directions; ours), so that
        ``t`` means the same in every bank.
    max_fit_samples : int, default 2000
        Cluster at most this many training rows, drawn with ``seed`` (agglomerative
        clustering is quadratic in memory; ours).
    seed : int, default 0
        Seed of that draw.
    """

    name: ClassVar[str] = "vq-cosine"
    t: float = 0.5
    linkage: Literal["average", "complete", "single", "ward"] = "average"
    normalise: bool = True
    max_fit_samples: int = 2000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.t <= 0:
            raise ValueError(f"t must be positive, got {self.t}")
        if self.max_fit_samples < 2:
            raise ValueError(f"max_fit_samples must be at least 2, got {self.max_fit_samples}")
        self._centroids: torch.Tensor | None = None  # fitted state, not a parameter

    def _prep(self, X: torch.Tensor) -> torch.Tensor:
        return F.normalize(X, dim=1) if self.normalise else X

    def fit(self, X: torch.Tensor) -> None:
        """Cluster (a seeded subsample of) the bank and keep the cluster means."""
        from sklearn.cluster import AgglomerativeClustering

        Z = self._prep(X.detach().float())
        if len(Z) > self.max_fit_samples:
            g = torch.Generator().manual_seed(self.seed)
            Z = Z[torch.randperm(len(Z), generator=g)[: self.max_fit_samples].to(Z.device)]
        if len(Z) < 2:
            self._centroids = Z.clone()
            return
        labels = AgglomerativeClustering(n_clusters=None, distance_threshold=self.t,
                                         linkage=self.linkage).fit_predict(Z.cpu().numpy())
        ids = torch.as_tensor(labels, device=Z.device)
        n_clusters = int(np.max(labels)) + 1
        sums = torch.zeros(n_clusters, Z.shape[1], device=Z.device, dtype=Z.dtype).index_add_(0, ids, Z)
        counts = torch.bincount(ids, minlength=n_clusters).clamp_min(1).unsqueeze(1)
        self._centroids = sums / counts

    @property
    def num_centroids(self) -> int:
        """How many centroids the fit produced (0 before fit)."""
        return 0 if self._centroids is None else int(self._centroids.shape[0])

    def quantise(self, X: torch.Tensor) -> torch.Tensor:
        """Each row replaced by its nearest centroid (straight-through gradient)."""
        if self._centroids is None:
            raise RuntimeError("vq-cosine: call fit(X) on the bank before project()")
        Z = self._prep(X)
        C = self._centroids.to(Z.device, Z.dtype)
        nearest = torch.cdist(Z.detach(), C).argmin(dim=1)
        return Z + (C[nearest] - Z).detach()

    def project(self, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """``n × k`` cosine between quantised rows and quantised anchors."""
        return F.normalize(self.quantise(X), dim=1) @ F.normalize(self.quantise(A), dim=1).T
