"""The whitened inner product (WIP) of PARAM (Svendsen, Jakobsen et al., §2.2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from relbench.interfaces import Similarity


def shrinkage_covariance(X: torch.Tensor, lam: float, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean ``μ`` and ``Σλ = (1−λ) Σ̂ + λ·tr(Σ̂)/d·I + εI`` of the rows of ``X``.

    ``Σ̂`` is the unbiased empirical covariance (the biased one for a single row).
    """
    n, d = X.shape
    mu = X.mean(dim=0)
    Xc = X - mu
    cov = Xc.t() @ Xc / max(n - 1, 1)
    eye = torch.eye(d, dtype=X.dtype, device=X.device)
    return mu, (1.0 - lam) * cov + (lam * torch.diagonal(cov).sum() / d + eps) * eye


@dataclass
class WhitenedInnerProduct(Similarity):
    """Whitened inner product (PARAM): (x−μ)ᵀ Σλ⁻¹ (a−μ) with a shrinkage covariance fitted on the bank.

    ``fit(X)`` estimates ``μ`` and ``Σλ = (1−λ)Σ̂ + λ·tr(Σ̂)/d·I + εI`` and its Cholesky
    factor ``Σλ = L Lᵀ``; rows are whitened by a triangular solve, ``z = L⁻¹(x − μ)``
    (no explicit inverse), and the score is ``⟨z_x, z_a⟩``. Invariant to translations
    and, with λ = 0, to any invertible linear map of the space. Differentiable in X and A.

    Parameters:
        lam: shrinkage λ towards the scaled identity. Default 0.1 (our choice: the
            paper gives no value; some shrinkage keeps Σλ well conditioned when the
            training split is small relative to d).
        eps: ridge ε added to the diagonal. Default 1e-6 (the authors' earlier code).
    """

    name: ClassVar[str] = "wip"
    lam: float = 0.1
    eps: float = 1e-6

    def __post_init__(self) -> None:
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"wip: lam (shrinkage λ) must lie in [0, 1], got {self.lam}")
        if self.eps < 0:
            raise ValueError(f"wip: eps must be ≥ 0, got {self.eps}")
        self.mu: torch.Tensor | None = None
        self.chol: torch.Tensor | None = None

    def fit(self, X: torch.Tensor) -> None:
        """Estimate μ and the Cholesky factor of Σλ from the bank's training rows."""
        self.mu, sigma = shrinkage_covariance(X.detach(), self.lam, self.eps)
        chol, info = torch.linalg.cholesky_ex(sigma)
        if int(info) != 0:
            raise ValueError(f"wip: the shrinkage covariance is not positive definite (lam={self.lam}, "
                             f"eps={self.eps}); raise lam or eps")
        self.chol = chol

    def whiten(self, X: torch.Tensor) -> torch.Tensor:
        """``L⁻¹(x − μ)`` for every row (the whitened coordinates)."""
        if self.chol is None:
            raise RuntimeError("wip: call fit() on the bank's training embeddings before projecting")
        L = self.chol.to(X.device, X.dtype)
        return torch.linalg.solve_triangular(L, (X - self.mu.to(X.device, X.dtype)).t(), upper=False).t()

    def project(self, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """``(x−μ)ᵀ Σλ⁻¹ (a−μ)`` for every row of X and anchor of A: ``n × k``."""
        return self.whiten(X) @ self.whiten(A).t()
