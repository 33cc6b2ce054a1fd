"""Direct translations fitted on parallel anchors (the peers IRP compares against).

* :func:`procrustes_fit` — Maiorca et al. 2023 ("Latent space translation via semantic
  alignment"), as in their reference code: standard-scale each space with its anchors'
  per-dimension mean and std, zero-pad the narrower space to the wider width, the
  orthogonal map ``R = U Vᵀ`` from ``svd(Â_sᵀ Â_t) = U Σ Vᵀ`` (on the anchors' span when
  there are fewer anchors than dimensions), drop the padding and undo the target's
  scaling. The fitted :class:`ProcrustesMap` reports the rank of the scaled source
  anchors beside the padded width: below the width, part of the source space is not
  determined by the anchors (see :func:`_orthogonal_map`).
* :func:`affine_fit` — least squares with a bias: ``[A_s, 1] W ≈ A_t`` (minimum-norm
  solution through the pseudo-inverse, so it also works with fewer anchors than
  dimensions and on CUDA).

Each returns a callable translating source rows into target coordinates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

Scaling = Literal["standard", "center", "none"]


def _scaler(A: torch.Tensor, scaling: Scaling) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-dimension shift and scale of a space, fitted on its anchors."""
    shift = A.mean(dim=0) if scaling != "none" else torch.zeros_like(A[0])
    scale = torch.ones_like(A[0])
    if scaling == "standard" and len(A) > 1:
        std = A.std(dim=0)
        scale = torch.where(std > 0, std, torch.ones_like(std))
    return shift, scale


def _orthogonal_map(Xs: torch.Tensor, Yt: torch.Tensor) -> torch.Tensor:
    """``R = U Vᵀ`` from ``svd(Xsᵀ Yt)``: the orthogonal map best sending the rows of
    ``Xs`` onto those of ``Yt`` (both ``k × w``).

    With fewer anchors than dimensions (k < w) the solution is unique only on the
    anchors' span; the full SVD of the ``w × w`` cross-covariance would complete it with
    an arbitrary rotation of the rest. We solve in the k-dimensional span instead
    (thin QR of both anchor sets, SVD of a ``k × k`` matrix) and map the rest to zero,
    which gives the same translation of every anchor-span component at a fraction of
    the cost (k³ instead of w³).
    """
    k, w = Xs.shape
    if k >= w:
        U, _, Vh = torch.linalg.svd(Xs.t() @ Yt)
        return U @ Vh
    Qs, Rs = torch.linalg.qr(Xs.t())  # w × k, k × k
    Qt, Rt = torch.linalg.qr(Yt.t())
    u, _, vh = torch.linalg.svd(Rs @ Rt.t())
    return (Qs @ u) @ (vh @ Qt.t())


@dataclass
class ProcrustesMap:
    """A fitted Procrustes translation, callable on source rows (→ target coordinates).

    ``rank`` is the numerical rank of the scaled, padded source anchors and ``width``
    the padded width ``max(d_s, d_t)``. With ``rank < width`` the anchors determine the
    map on a ``rank``-dimensional subspace only: with fewer anchors than dimensions the
    rest of the source space is sent to zero (a full SVD would rotate it arbitrarily).
    Standard or centre scaling subtracts the anchor mean, so ``k`` anchors have rank at
    most ``k − 1``.
    """

    s_shift: torch.Tensor
    s_scale: torch.Tensor
    t_shift: torch.Tensor
    t_scale: torch.Tensor
    R: torch.Tensor  # width × width
    rank: int

    @property
    def width(self) -> int:
        """The padded width both spaces are mapped in."""
        return self.R.shape[0]

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        """Source rows ``X`` (``n × d_s``) in target coordinates (``n × d_t``)."""
        ds, dt = len(self.s_shift), len(self.t_shift)
        Z = F.pad((X - self.s_shift) / self.s_scale, (0, self.width - ds)) @ self.R
        return Z[:, :dt] * self.t_scale + self.t_shift


def procrustes_fit(As: torch.Tensor, At: torch.Tensor, scaling: Scaling = "standard") -> ProcrustesMap:
    """Fit the orthogonal Procrustes translation source → target on parallel anchors."""
    s_shift, s_scale = _scaler(As, scaling)
    t_shift, t_scale = _scaler(At, scaling)
    ds, dt = As.shape[1], At.shape[1]
    width = max(ds, dt)
    Xs = F.pad((As - s_shift) / s_scale, (0, width - ds))
    Yt = F.pad((At - t_shift) / t_scale, (0, width - dt))
    rank = int(torch.linalg.matrix_rank(Xs))
    return ProcrustesMap(s_shift, s_scale, t_shift, t_scale, _orthogonal_map(Xs, Yt), rank)


def affine_fit(As: torch.Tensor, At: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """Fit the least-squares affine map ``x ↦ [x, 1] W`` source → target on parallel anchors."""
    ones = As.new_ones((len(As), 1))
    W = torch.linalg.pinv(torch.cat([As, ones], dim=1)) @ At

    def translate(X: torch.Tensor) -> torch.Tensor:
        return torch.cat([X, X.new_ones((len(X), 1))], dim=1) @ W

    return translate
