"""Representational-similarity measures between two spaces of the same samples.

Each takes ``X`` (``n × d_x``) and ``Y`` (``n × d_y``) float64 arrays whose rows are the
same samples and returns a float; the widths may differ. Only numpy is used, so that
registering them imports nothing heavy.

* ``linear-cka`` and ``debiased-cka``: centred kernel alignment with linear kernels
  (Kornblith et al. 2019), the latter from the unbiased HSIC estimator (Song et al. 2012);
* ``mutual-knn`` and ``cknna``: the neighbourhood measures of Huh et al. 2024 (the
  platonic-representation code's ``mutual_knn`` and ``cknna``, on L2-normalised rows as
  its ``compute_score`` gives them);
* ``svcca``: singular-vector CCA (Raghu et al. 2017);
* ``procrustes-distance``: the orthogonal Procrustes distance of centred, unit-norm spaces
  (Ding et al. 2021).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from relbench.api import SpaceMeasure

#: every transform of one space that the centred kernel and subspace measures ignore
EUCLIDEAN = frozenset({"orthogonal", "scale", "translation", "permutation"})
#: what the neighbourhood measures on L2-normalised rows ignore (not a translation)
ANGULAR = frozenset({"orthogonal", "scale", "permutation"})
#: the constant the platonic-representation code adds to CKNNA's denominator
CKNNA_EPS = 1e-6


def centred(X: np.ndarray) -> np.ndarray:
    """``X`` with each column's mean subtracted."""
    return X - X.mean(axis=0, keepdims=True)


def unit_rows(X: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (a zero row stays zero), as ``F.normalize`` does."""
    return X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)


def u_centred(gram: np.ndarray) -> np.ndarray:
    """The U-centred Gram matrix (Song et al. 2012; Kornblith et al. 2019's
    ``center_gram(unbiased=True)``): its inner products with another U-centred Gram
    matrix are ``n (n − 3)`` times the unbiased HSIC estimate."""
    n = len(gram)
    gram = gram.copy()
    np.fill_diagonal(gram, 0.0)
    means = gram.sum(axis=0) / (n - 2)
    means -= means.sum() / (2 * (n - 1))
    gram -= means[:, None] + means[None, :]
    np.fill_diagonal(gram, 0.0)
    return gram


def hsic_unbiased(K: np.ndarray, L: np.ndarray) -> float:
    """Song et al. 2012's unbiased HSIC estimator (their equation 5) of two ``n × n``
    kernel matrices, in ``O(n²)``; ``K`` and ``L`` need not be symmetric (CKNNA masks them)."""
    m = len(K)
    K, L = K.copy(), L.copy()
    np.fill_diagonal(K, 0.0)
    np.fill_diagonal(L, 0.0)
    trace_term = float(np.sum(K * L.T))
    sums_term = float(K.sum() * L.sum()) / ((m - 1) * (m - 2))
    product_sum = float(K.sum(axis=0) @ L.sum(axis=1))  # the sum of the entries of K @ L
    return (trace_term + sums_term - 2 * product_sum / (m - 2)) / (m * (m - 3))


def _ratio(num: float, a: float, b: float) -> float:
    """``num / sqrt(a b)``; ``ValueError`` when a space has no variance to compare."""
    if a <= 0 or b <= 0:
        raise ValueError("a space without variance (every sample alike) has no similarity to another")
    return float(num / np.sqrt(a * b))


@dataclass
class LinearCKA(SpaceMeasure):
    """Linear centred kernel alignment (Kornblith et al. 2019): ``‖Yᵀ X‖²_F / (‖Xᵀ X‖_F
    ‖Yᵀ Y‖_F)`` of the column-centred spaces, the normalised HSIC of linear kernels.

    1 for spaces equal up to an orthogonal map and a scale, 0 for orthogonal ones."""

    name: ClassVar[str] = "linear-cka"
    invariances: ClassVar[frozenset[str]] = EUCLIDEAN

    def measure(self, X: np.ndarray, Y: np.ndarray) -> float:
        """Linear CKA of ``X`` and ``Y`` (computed in feature space)."""
        X, Y = centred(X), centred(Y)
        return _ratio(np.linalg.norm(Y.T @ X) ** 2, np.linalg.norm(X.T @ X) ** 2, np.linalg.norm(Y.T @ Y) ** 2)


@dataclass
class DebiasedCKA(SpaceMeasure):
    """Debiased linear CKA (Kornblith et al. 2019, from Song et al. 2012's unbiased HSIC
    estimator): CKA whose HSIC terms are unbiased, so that unrelated spaces of few samples
    and many dimensions score near 0 (linear CKA's estimate is biased upwards).

    Needs at least 4 samples; may be slightly negative."""

    name: ClassVar[str] = "debiased-cka"
    invariances: ClassVar[frozenset[str]] = EUCLIDEAN

    def measure(self, X: np.ndarray, Y: np.ndarray) -> float:
        """Debiased CKA of the linear kernels ``X Xᵀ`` and ``Y Yᵀ`` (U-centred Gram matrices)."""
        if len(X) < 4:
            raise ValueError(f"debiased CKA needs at least 4 samples, got {len(X)}")
        K, L = u_centred(X @ X.T), u_centred(Y @ Y.T)
        return _ratio(float(np.sum(K * L)), float(np.sum(K * K)), float(np.sum(L * L)))


def knn_sets(S: np.ndarray, topk: int) -> np.ndarray:
    """The ``n × n`` 0/1 mask of each row's ``topk`` largest entries of ``S`` off the
    diagonal (the diagonal itself is never a neighbour)."""
    S = S.copy()
    np.fill_diagonal(S, -np.inf)
    nearest = np.argpartition(-S, topk - 1, axis=1)[:, :topk]
    mask = np.zeros_like(S)
    np.put_along_axis(mask, nearest, 1.0, axis=1)
    return mask


def _check_topk(topk: int, n: int, name: str) -> None:
    if not 1 <= topk < n:
        raise ValueError(f"{name}: topk must be in [1, n − 1] = [1, {n - 1}], got {topk}")


@dataclass
class MutualKNN(SpaceMeasure):
    """Mutual k-nearest-neighbour alignment (Huh et al. 2024, the platonic-representation
    code's ``mutual_knn``): the mean over samples of the fraction of a sample's ``topk``
    nearest neighbours (by inner product, of L2-normalised rows: cosine) in ``X`` that are
    also among its ``topk`` nearest in ``Y``.

    Parameters:
        topk: neighbours per sample. Default 10 (the reference code's default).
        normalize: L2-normalise the rows first, as the reference code's ``compute_score``
            does by default. Default True.
    """

    name: ClassVar[str] = "mutual-knn"
    invariances: ClassVar[frozenset[str]] = ANGULAR
    topk: int = 10
    normalize: bool = True

    def measure(self, X: np.ndarray, Y: np.ndarray) -> float:
        """The mean fraction of shared nearest neighbours."""
        _check_topk(self.topk, len(X), self.name)
        if self.normalize:
            X, Y = unit_rows(X), unit_rows(Y)
        shared = knn_sets(X @ X.T, self.topk) * knn_sets(Y @ Y.T, self.topk)
        return float(shared.sum(axis=1).mean() / self.topk)


@dataclass
class CKNNA(SpaceMeasure):
    """Centred kernel nearest-neighbour alignment (Huh et al. 2024, the
    platonic-representation code's ``cknna``): CKA whose unbiased HSIC counts only the
    pairs that are mutual ``topk`` nearest neighbours in both spaces (inner-product
    kernels of L2-normalised rows), with the reference code's 1e-6 added to the
    denominator.

    Not symmetric: the unbiased HSIC of the masked (non-symmetric) kernels depends on
    their order. Parameters as :class:`MutualKNN` (``topk`` ≥ 2)."""

    name: ClassVar[str] = "cknna"
    symmetric: ClassVar[bool] = False
    invariances: ClassVar[frozenset[str]] = ANGULAR
    topk: int = 10
    normalize: bool = True

    def measure(self, X: np.ndarray, Y: np.ndarray) -> float:
        """``hsic(M∘K, M∘L) / (sqrt(hsic(M_K∘K, M_K∘K) hsic(M_L∘L, M_L∘L)) + 1e-6)``."""
        _check_topk(self.topk, len(X), self.name)
        if self.topk < 2 or len(X) < 4:
            raise ValueError("cknna needs topk ≥ 2 and at least 4 samples")
        if self.normalize:
            X, Y = unit_rows(X), unit_rows(Y)
        K, L = X @ X.T, Y @ Y.T
        mask_k, mask_l = knn_sets(K, self.topk), knn_sets(L, self.topk)
        both = mask_k * mask_l
        kl = hsic_unbiased(both * K, both * L)
        kk, ll = hsic_unbiased(mask_k * K, mask_k * K), hsic_unbiased(mask_l * L, mask_l * L)
        return float(kl / (np.sqrt(kk * ll) + CKNNA_EPS))


def top_directions(X: np.ndarray, dims: int) -> np.ndarray:
    """An orthonormal basis (``n × k``) of the span of the centred ``X``'s ``k = min(dims,
    rank)`` leading left singular vectors."""
    U, S, _ = np.linalg.svd(centred(X), full_matrices=False)
    rank = int(np.sum(S > S[0] * max(X.shape) * np.finfo(float).eps)) if S.size and S[0] > 0 else 0
    if rank == 0:
        raise ValueError("a space without variance (every sample alike) has no similarity to another")
    return U[:, : min(dims, rank)]


@dataclass
class SVCCA(SpaceMeasure):
    """Singular-vector canonical correlation analysis (Raghu et al. 2017): each centred
    space is reduced to its ``dims`` leading singular directions, and the mean of the
    canonical correlations between the two reductions is reported.

    The canonical correlations are the singular values of ``U_Xᵀ U_Y``, the two
    reductions' orthonormal bases (there are ``min(k_X, k_Y)`` of them).

    Parameters:
        dims: singular directions kept per space. Default 10 (the platonic-representation
            code's ``cca_dim``).
    """

    name: ClassVar[str] = "svcca"
    invariances: ClassVar[frozenset[str]] = EUCLIDEAN
    dims: int = 10

    def __post_init__(self) -> None:
        if self.dims < 1:
            raise ValueError(f"svcca: dims must be ≥ 1, got {self.dims}")

    def measure(self, X: np.ndarray, Y: np.ndarray) -> float:
        """The mean canonical correlation of the two reduced spaces."""
        correlations = np.linalg.svd(top_directions(X, self.dims).T @ top_directions(Y, self.dims), compute_uv=False)
        return float(np.clip(correlations, 0.0, 1.0).mean())


@dataclass
class ProcrustesDistance(SpaceMeasure):
    """Orthogonal Procrustes distance (Ding et al. 2021): the least squared Frobenius
    distance between the centred, unit-norm spaces over orthogonal maps of one onto the
    other, ``2 − 2 ‖Xᵀ Y‖_*``; lower is more similar (0: equal up to an orthogonal map,
    a translation and a scale). Spaces of different widths are compared as if the
    narrower were padded with zero columns."""

    name: ClassVar[str] = "procrustes-distance"
    higher_is_similar: ClassVar[bool] = False
    invariances: ClassVar[frozenset[str]] = EUCLIDEAN

    def measure(self, X: np.ndarray, Y: np.ndarray) -> float:
        """``2 − 2 × `` the nuclear norm of ``Xᵀ Y`` (normalised spaces), at least 0."""
        X, Y = centred(X), centred(Y)
        nx, ny = np.linalg.norm(X), np.linalg.norm(Y)
        if nx == 0 or ny == 0:
            raise ValueError("a space without variance (every sample alike) has no similarity to another")
        nuclear = np.linalg.svd((X / nx).T @ (Y / ny), compute_uv=False).sum()
        return float(max(2.0 - 2.0 * nuclear, 0.0))


MEASURES = [LinearCKA, DebiasedCKA, MutualKNN, CKNNA, SVCCA, ProcrustesDistance]
