"""Direct translations fitted on parallel anchors (the peers IRP compares against).

* :func:`procrustes_fit` — Maiorca et al. 2023 ("Latent space translation via semantic
  alignment"), as in their reference code: standard-scale each space with its anchors'
  per-dimension mean and std, zero-pad the narrower space to the wider width, the
  orthogonal map ``R = U Vᵀ`` from ``svd(Â_sᵀ Â_t) = U Σ Vᵀ``, drop the padding and undo
  the target's scaling. The map is solved on the anchors' numerical span only (see
  :func:`procrustes_join`): each side's scaled anchors are decomposed once
  (:class:`ScaledAnchors`, reusable with every partner space), and directions at or
  below the rank cut-off are sent to zero instead of being rotated by whatever rounding
  left in their singular vectors. The fitted :class:`ProcrustesMap` reports the rank of
  the scaled source anchors beside the padded width: below the width, part of the
  source space is not determined by the anchors.
* :func:`affine_fit` — least squares with a bias: ``[A_s, 1] W ≈ A_t`` (minimum-norm
  solution through the pseudo-inverse, so it also works with fewer anchors than
  dimensions and on CUDA); the pseudo-inverse depends on the source only
  (:func:`augmented_pinv`).

Each returns a callable translating source rows into target coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from relbench.api import deferred_import

torch = deferred_import("torch")

Scaling = Literal["standard", "center", "none"]


def _scaler(A: torch.Tensor, scaling: Scaling) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-dimension shift and scale of a space, fitted on its anchors."""
    shift = A.mean(dim=0) if scaling != "none" else torch.zeros_like(A[0])
    scale = torch.ones_like(A[0])
    if scaling == "standard" and len(A) > 1:
        std = A.std(dim=0)
        scale = torch.where(std > 0, std, torch.ones_like(std))
    return shift, scale


@dataclass
class ScaledAnchors:
    """One space's side of a Procrustes fit: its anchors' shift and scale, and the thin
    SVD ``U diag(S) Vᵀ`` of the scaled anchors (``k × d``; ``U`` is ``k × m``, ``V`` is
    ``d × m``, ``m = min(k, d)``, ``S`` descending). It depends on this space alone, so
    one decomposition serves every partner space (:func:`procrustes_join`).
    """

    shift: torch.Tensor
    scale: torch.Tensor
    U: torch.Tensor
    S: torch.Tensor
    V: torch.Tensor

    @classmethod
    def fit(cls, A: torch.Tensor, scaling: Scaling = "standard") -> ScaledAnchors:
        """Scale the anchors ``A`` (``k × d``) and decompose them."""
        shift, scale = _scaler(A, scaling)
        U, S, Vh = torch.linalg.svd((A - shift) / scale, full_matrices=False)
        return cls(shift, scale, U, S, Vh.t())

    @property
    def dim(self) -> int:
        """Width ``d`` of the space."""
        return len(self.shift)

    def rank(self, width: int) -> int:
        """Numerical rank of the scaled anchors zero-padded to ``width`` columns, with
        ``torch.linalg.matrix_rank``'s (and numpy's) tolerance: singular values above
        ``max(k, width)·eps·σ_max`` (padding adds only zero singular values)."""
        if not len(self.S):
            return 0
        cutoff = max(len(self.U), width) * torch.finfo(self.S.dtype).eps * self.S[0]
        return int((self.S > cutoff).sum())

    def project(self, X: torch.Tensor) -> torch.Tensor:
        """Rows ``X`` (``n × d``), scaled, in the coordinates of the anchors' right
        singular vectors (``n × m``): what :meth:`ProcrustesMap.translate_projected`
        takes."""
        return ((X - self.shift) / self.scale) @ self.V


@dataclass
class ProcrustesMap:
    """A fitted Procrustes translation, callable on source rows (→ target coordinates).

    ``rank`` is the numerical rank of the scaled, padded source anchors and ``width``
    the padded width ``max(d_s, d_t)``. With ``rank < width`` the anchors determine the
    map on a ``rank``-dimensional subspace only, and the rest of the source space is
    sent to zero (a full SVD would rotate it arbitrarily). Standard or centre scaling
    subtracts the anchor mean, so ``k`` anchors have rank at most ``k − 1``.
    """

    source: ScaledAnchors
    t_shift: torch.Tensor
    t_scale: torch.Tensor
    M: torch.Tensor  # rank × d_t: the source's first `rank` singular coordinates → scaled target
    rank: int
    width: int

    def translate_projected(self, P: torch.Tensor) -> torch.Tensor:
        """Source rows already projected by ``source.project`` (``n × m``) in target
        coordinates (``n × d_t``)."""
        return (P[:, : self.rank] @ self.M) * self.t_scale + self.t_shift

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        """Source rows ``X`` (``n × d_s``) in target coordinates (``n × d_t``)."""
        return self.translate_projected(self.source.project(X))


def procrustes_join(source: ScaledAnchors, target: ScaledAnchors) -> ProcrustesMap:
    """The Procrustes map between two decomposed sides of parallel anchors.

    With ``Â_s = U_s S_s V_sᵀ`` and ``Â_t = U_t S_t V_tᵀ``, each truncated to its rank
    at the padded width, ``Â_sᵀ Â_t = V_s K V_tᵀ`` with ``K = S_s U_sᵀ U_t S_t``, so the
    orthogonal factor of the cross-covariance is ``V_s · u vᵀ · V_tᵀ`` from ``K = u Σ
    vᵀ``: the padded ``R = U Vᵀ`` on the anchors' numerical span, and zero on every
    direction at or below either side's rank cut-off (:meth:`ScaledAnchors.rank`), whose
    singular vectors only rounding chose (a centred side always has one). Zero padding
    needs no explicit columns: it only sets the width. The map is therefore invariant
    to the order of the anchors (``K`` is singular only when some direction of one
    side's anchor span is orthogonal to the other's), and equals the full SVD solution
    when the padded source anchors have full rank.
    """
    if len(source.U) != len(target.U):
        raise ValueError(f"Procrustes needs parallel anchors: the source has {len(source.U)}, "
                         f"the target {len(target.U)}")
    width = max(source.dim, target.dim)
    rs, rt = source.rank(width), target.rank(width)
    K = source.S[:rs, None] * (source.U[:, :rs].t() @ target.U[:, :rt]) * target.S[:rt]
    u, _, vh = torch.linalg.svd(K, full_matrices=False)
    M = u @ (vh @ target.V[:, :rt].t())
    return ProcrustesMap(source, target.shift, target.scale, M, rs, width)


def procrustes_fit(As: torch.Tensor, At: torch.Tensor, scaling: Scaling = "standard") -> ProcrustesMap:
    """Fit the orthogonal Procrustes translation source → target on parallel anchors."""
    return procrustes_join(ScaledAnchors.fit(As, scaling), ScaledAnchors.fit(At, scaling))


def augmented_pinv(As: torch.Tensor) -> torch.Tensor:
    """``pinv([A_s, 1])`` (``(d_s + 1) × k``): the source's part of :func:`affine_fit`."""
    return torch.linalg.pinv(torch.cat([As, As.new_ones((len(As), 1))], dim=1))


@dataclass
class AffineMap:
    """A fitted affine translation ``x ↦ [x, 1] W``, callable on source rows."""

    W: torch.Tensor  # (d_s + 1) × d_t

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        """Source rows ``X`` (``n × d_s``) in target coordinates (``n × d_t``)."""
        return torch.cat([X, X.new_ones((len(X), 1))], dim=1) @ self.W


def affine_fit(As: torch.Tensor, At: torch.Tensor) -> AffineMap:
    """Fit the least-squares affine map ``x ↦ [x, 1] W`` source → target on parallel anchors."""
    return AffineMap(augmented_pinv(As) @ At)
