"""Vector-quantised cosine (Moschella et al. 2023, appendix A.3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import collections
import hashlib

import numpy as np

from relbench.api import deferred_import, Similarity, Tunable

torch = deferred_import("torch")


class Dendrogram:
    """The full agglomerative tree of some rows, cut at any distance threshold.

    One tree serves every threshold: the candidates of ``threshold_quantile`` that
    validation tuning tries, and the final fit, cut the same tree instead of clustering
    the bank again (the clustering is deterministic, so this changes no label)."""

    def __init__(self, rows: np.ndarray, linkage: str):
        from scipy.cluster.hierarchy import linkage as build
        from scipy.spatial.distance import pdist

        #: the condensed pairwise Euclidean distances (what the threshold's quantile reads)
        self.distances = pdist(rows)
        self.tree = build(rows, method="ward") if linkage == "ward" else build(self.distances, method=linkage)

    def cut(self, threshold: float) -> np.ndarray:
        """Cluster labels ``0 … c−1`` when merges at a height ≥ ``threshold`` are undone:
        ``AgglomerativeClustering(distance_threshold=threshold)``'s clusters, up to renaming."""
        from scipy.cluster.hierarchy import fcluster

        raw = fcluster(self.tree, np.nextafter(threshold, -np.inf), criterion="distance")
        return np.unique(raw, return_inverse=True)[1]


#: the trees of the last fits, by a digest of their rows and the linkage
_TREES: collections.OrderedDict[tuple[str, str], Dendrogram] = collections.OrderedDict()
#: how many trees are kept: the banks of a unit (each at most 2,000 rows: 16 MB of distances)
TREES_KEPT = 8


def dendrogram(rows: np.ndarray, linkage: str) -> Dendrogram:
    """The :class:`Dendrogram` of ``rows``, shared by every fit of the same rows and
    linkage in this process (the last :data:`TREES_KEPT` kept)."""
    key = (hashlib.sha256(np.ascontiguousarray(rows).tobytes()).hexdigest() + str(rows.shape), linkage)
    if key in _TREES:
        _TREES.move_to_end(key)
    else:
        _TREES[key] = Dendrogram(rows, linkage)
        while len(_TREES) > TREES_KEPT:
            _TREES.popitem(last=False)
    return _TREES[key]


@dataclass
class VQCosine(Similarity):
    """Vector-quantised cosine: points are snapped to agglomerative-cluster centroids of
    the bank before the cosine, for robustness to small non-isometric distortions
    (Moschella et al. 2023, appendix A.3).

    ``fit`` clusters the bank's training embeddings at a distance threshold and keeps
    each cluster's mean as a centroid. ``project`` replaces every row of ``X`` and of the
    anchors by its nearest centroid (training rows included, so one rule serves every
    split; a training row's nearest centroid is nearly always its own cluster's mean)
    and takes the cosine. The snap is piecewise constant; gradients pass
    straight through it (``x + (c − x).detach()``) so the projection stays usable in
    training.

    **Threshold.** The paper clusters "at various thresholds t" and singles none out.
    An absolute t does not carry across spaces: on the offline suite's CNN embeddings
    (unit-normalised, 600 rows) most pairwise distances lie in 0.5–1.2 and t = 0.5 left
    about one cluster per row (586 of 600), i.e. no quantisation. The threshold is
    therefore measured on the data being clustered: ``t`` is the
    ``threshold_quantile`` quantile of its pairwise distances. This makes the clustering
    invariant to rescaling the bank (also with ``normalise=False``) and the number of
    clusters comparable across encoders: on those banks 0.05 / 0.1 / 0.2 give about
    130 / 65 / 27 clusters of 600, on every encoder alike. After ``fit``,
    :attr:`threshold` is the absolute t used and :attr:`num_centroids` the number of
    clusters.

    Parameters
    ----------
    threshold_quantile : float, default 0.1
        The distance threshold of the clustering, as a quantile in (0, 1) of the
        pairwise (Euclidean) distances between the clustered rows (ours: 0.1 leaves
        clusters of about ten rows on the suite's banks). Tunable: 0.1, 0.05, 0.2.
    linkage : "average" | "complete" | "single" | "ward", default "average"
        Linkage of the clustering (not stated in the paper; ours: average, whose
        merge height is a mean pairwise distance and so reads on the same scale as the
        threshold; ward's merge heights are variance increases, larger than distances).
    normalise : bool, default True
        Cluster L2-normalised embeddings (the cosine only sees directions; ours).
    max_fit_samples : int, default 2000
        Cluster at most this many training rows, drawn with ``seed`` (agglomerative
        clustering is quadratic in memory; ours).
    seed : int, default 0
        Seed of that draw.
    """

    name: ClassVar[str] = "vq-cosine"
    invariances: ClassVar[frozenset[str]] = frozenset({"orthogonal", "scale", "permutation"})
    version: ClassVar[str] = "3"  # one scipy tree per bank, cut per threshold (same clusters as before)
    tunable: ClassVar[dict[str, Tunable]] = {
        "threshold_quantile": Tunable(values=(0.1, 0.05, 0.2),
                                      relative_to="quantile of the pairwise distances between the bank's clustered "
                                                  "(normalised) training rows"),
    }
    threshold_quantile: float = 0.1
    linkage: Literal["average", "complete", "single", "ward"] = "average"
    normalise: bool = True
    max_fit_samples: int = 2000
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold_quantile < 1.0:
            raise ValueError(f"threshold_quantile is a quantile in (0, 1), got {self.threshold_quantile}")
        if self.max_fit_samples < 2:
            raise ValueError(f"max_fit_samples must be at least 2, got {self.max_fit_samples}")
        self._centroids: torch.Tensor | None = None  # fitted state, not a parameter
        #: the absolute distance threshold of the last fit (None before fit)
        self.threshold: float | None = None

    def _prep(self, X: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(X, dim=1) if self.normalise else X

    def fit(self, X: torch.Tensor) -> None:
        """Cluster (a seeded subsample of) the bank at the measured threshold and keep the cluster means."""
        Z = self._prep(X.detach().float())
        if len(Z) > self.max_fit_samples:
            g = torch.Generator().manual_seed(self.seed)
            Z = Z[torch.randperm(len(Z), generator=g)[: self.max_fit_samples].to(Z.device)]
        if len(Z) < 2:
            self._centroids = Z.clone()
            return
        tree = dendrogram(Z.cpu().double().numpy(), self.linkage)
        self.threshold = float(np.quantile(tree.distances, self.threshold_quantile))
        labels = tree.cut(self.threshold)
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
        normalize = torch.nn.functional.normalize
        return normalize(self.quantise(X), dim=1) @ normalize(self.quantise(A), dim=1).T
