"""An example relbench plugin package: one similarity, registered by one hook."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from relbench.api import Similarity, hookimpl


@dataclass
class GaussianKernel(Similarity):
    """Gaussian-kernel relative projection: exp(-‖x − a‖² / 2σ²).

    Parameters:
        bandwidth: σ as a multiple of the median anchor-to-anchor distance in the bank,
            which makes the projection invariant to isotropic rescaling, rotations and
            translations. Default 1.0.
    """

    name: ClassVar[str] = "gaussian-kernel"
    invariances: ClassVar[frozenset[str]] = frozenset({"orthogonal", "scale", "translation", "permutation"})
    bandwidth: float = 1.0

    def __post_init__(self):
        if self.bandwidth <= 0:
            raise ValueError(f"bandwidth must be positive, got {self.bandwidth}")

    def project(self, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """Kernel values of every row of X against every anchor (n × k)."""
        sigma = self.bandwidth * torch.cdist(A, A).median().clamp_min(1e-12)
        return torch.exp(-torch.cdist(X, A).pow(2) / (2 * sigma**2))


@hookimpl
def relbench_similarities():
    """The similarities this package adds."""
    return [GaussianKernel]
