"""Direct translations fitted on parallel anchors (the peers IRP compares against).

* :func:`procrustes_fit` — Maiorca et al. 2023 ("Latent space translation via semantic
  alignment"), as in their reference code: standard-scale each space with its anchors'
  per-dimension mean and std, zero-pad the narrower space to the wider width, the
  orthogonal map ``R = U Vᵀ`` from ``svd(Â_sᵀ Â_t) = U Σ Vᵀ``, drop the padding and undo
  the target's scaling.
* :func:`affine_fit` — least squares with a bias: ``[A_s, 1] W ≈ A_t`` (minimum-norm
  solution through the pseudo-inverse, so it also works with fewer anchors than
  dimensions and on CUDA).

Each returns a function translating source rows into target coordinates.
"""

from __future__ import annotations

from collections.abc import Callable
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


def procrustes_fit(As: torch.Tensor, At: torch.Tensor, scaling: Scaling = "standard") -> Callable[[torch.Tensor], torch.Tensor]:
    """Fit the orthogonal Procrustes translation source → target on parallel anchors."""
    s_shift, s_scale = _scaler(As, scaling)
    t_shift, t_scale = _scaler(At, scaling)
    ds, dt = As.shape[1], At.shape[1]
    width = max(ds, dt)
    Xs = F.pad((As - s_shift) / s_scale, (0, width - ds))
    Yt = F.pad((At - t_shift) / t_scale, (0, width - dt))
    U, _, Vh = torch.linalg.svd(Xs.t() @ Yt)
    R = U @ Vh

    def translate(X: torch.Tensor) -> torch.Tensor:
        Z = F.pad((X - s_shift) / s_scale, (0, width - ds)) @ R
        return Z[:, :dt] * t_scale + t_shift

    return translate


def affine_fit(As: torch.Tensor, At: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """Fit the least-squares affine map ``x ↦ [x, 1] W`` source → target on parallel anchors."""
    ones = As.new_ones((len(As), 1))
    W = torch.linalg.pinv(torch.cat([As, ones], dim=1)) @ At

    def translate(X: torch.Tensor) -> torch.Tensor:
        return torch.cat([X, X.new_ones((len(X), 1))], dim=1) @ W

    return translate
