"""The pairwise PARAM losses as regularizers of heads trained on several banks.

Each is computed over every unordered pair of ``batch.relative`` entries (the same
samples' relative features in different banks) and averaged; with a single bank it is
0. Anchor cohesion is not offered: it needs the anchor mixture weights, which a
regularizer does not see.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from relbench.interfaces import Regularizer, RegularizerBatch
from relbench_param.losses import align_uniform, barlow_twins, pairwise_mean, soft_jaccard


def _zero(batch: RegularizerBatch) -> torch.Tensor:
    device = next(iter(batch.relative.values())).device if batch.relative else batch.labels.device
    return torch.zeros((), device=device)


@dataclass
class SoftJaccardRegularizer(Regularizer):
    """Soft-Jaccard loss between banks' relative features (PARAM), as a regularizer.

    Parameters:
        weight: multiplier of the loss. Default 1.0 (our choice).
        temperature: temperature of the anchor-wise activation profiles. Default 1.0
            (our choice; see relbench_param.losses.soft_jaccard).
    """

    name: ClassVar[str] = "soft-jaccard"
    weight: float = 1.0
    temperature: float = 1.0

    def __post_init__(self) -> None:
        if self.weight < 0 or self.temperature <= 0:
            raise ValueError("soft-jaccard: weight must be ≥ 0 and temperature positive")

    def loss(self, batch: RegularizerBatch) -> torch.Tensor:
        """Weighted mean Soft-Jaccard loss over bank pairs (0 with one bank)."""
        value = pairwise_mean(lambda a, b: soft_jaccard(a, b, self.temperature), batch.relative)
        return _zero(batch) if value is None else self.weight * value


@dataclass
class BarlowTwinsRegularizer(Regularizer):
    """Barlow Twins loss between banks' relative features (PARAM, after Zbontar et al. 2021), as a regularizer.

    Parameters:
        weight: multiplier of the loss. Default 1.0 (our choice).
        lam: off-diagonal weight λ. Default 5e-3 (Zbontar et al.).
    """

    name: ClassVar[str] = "barlow-twins"
    weight: float = 1.0
    lam: float = 5e-3

    def __post_init__(self) -> None:
        if self.weight < 0 or self.lam < 0:
            raise ValueError("barlow-twins: weight and lam must be ≥ 0")

    def loss(self, batch: RegularizerBatch) -> torch.Tensor:
        """Weighted mean Barlow Twins loss over bank pairs (0 with one bank)."""
        value = pairwise_mean(lambda a, b: barlow_twins(a, b, self.lam), batch.relative)
        return _zero(batch) if value is None else self.weight * value


@dataclass
class AlignUniformRegularizer(Regularizer):
    """Alignment–uniformity loss between banks' relative features (PARAM, after Wang & Isola 2020), as a regularizer.

    Parameters:
        weight: multiplier of the loss. Default 1.0 (our choice).
        t: uniformity temperature t. Default 2.0 (Wang & Isola).
    """

    name: ClassVar[str] = "align-uniform"
    weight: float = 1.0
    t: float = 2.0

    def __post_init__(self) -> None:
        if self.weight < 0 or self.t <= 0:
            raise ValueError("align-uniform: weight must be ≥ 0 and t positive")

    def loss(self, batch: RegularizerBatch) -> torch.Tensor:
        """Weighted mean alignment–uniformity loss over bank pairs (0 with one bank)."""
        value = pairwise_mean(lambda a, b: align_uniform(a, b, self.t), batch.relative)
        return _zero(batch) if value is None else self.weight * value
