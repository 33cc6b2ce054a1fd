"""The pairwise PARAM losses as regularizers of a relative decoder trained beside other banks.

PARAM trains its anchors with losses *between* banks: the same samples' relative
features in two encoders' spaces should agree. As regularizers they act on the bank a
relative decoder trains on: a trainable adapter (identity-initialised, decayed towards
the identity: :class:`relbench_relreps.adapter.Adapter`) sits in front of the frozen
encoder, and the loss pulls the adapted encoder's relative features towards those of
every *partner* bank (the other encoders' training banks, fixed, each with its own
anchors). Every encoder trains its own adapter this way, and a stitched source goes
through its own adapter into the target's head. The partners are supplied by the stitching
protocol (``FitContext.partners``), never including an encoder the unit holds out; rows
record them (``partner_banks``) and are marked ``needs_both_spaces``, like Procrustes'.

Each loss is the mean over partners of ``loss(trained, partner)``. Anchor cohesion is
not offered: it constrains anchor mixture weights, which a head's training does not have.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from relbench.api import deferred_import, Regularizer, RegularizerBatch
from relbench_param.losses import align_uniform, barlow_twins, soft_jaccard

torch = deferred_import("torch")


def against_partners(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], batch: RegularizerBatch) -> torch.Tensor:
    """Mean of ``fn(trained, partner)`` over the batch's partner banks.

    Raises ``ValueError`` when the batch has no trained bank or no partner: a between-bank
    loss with nothing to compare would silently add zero.
    """
    if batch.trained not in batch.relative:
        raise ValueError("a between-bank regularizer needs the trained bank's relative features "
                         "(RegularizerBatch.trained)")
    trained = batch.relative[batch.trained]
    partners = [F for name, F in batch.relative.items() if name != batch.trained]
    if not partners:
        raise ValueError("a between-bank regularizer (soft-jaccard, barlow-twins, align-uniform) needs at least one "
                         "other encoder's bank to compare with; give the task two or more encoders")
    return torch.stack([fn(trained, F) for F in partners]).mean()


class _BetweenBanks(Regularizer):
    """Shared class attributes of the PARAM regularizers."""

    needs_adapter: ClassVar[bool] = True
    needs_partner_banks: ClassVar[bool] = True
    #: 2: the adapter trains in one product with the anchors, its decay as a gradient
    #: (relbench_relreps.heads; equal up to float rounding)
    version: ClassVar[str] = "2"

    def _check_weight(self) -> None:
        """Refuse a non-positive ``weight`` (every subclass has one): at 0 the
        regularizer is inert."""
        weight = self.weight  # type: ignore[attr-defined]
        if not weight > 0:
            raise ValueError(
                f"{self.name}: weight must be positive, got {weight}. With weight 0 the loss adds nothing, yet the "
                f"decoder would still train an adapter and receive the partner banks, and its rows would carry the "
                f"regularizer's label and be marked as having seen both spaces while reporting an unregularized "
                f"decoder. Give it a positive weight, or drop the regularizer from the grid (the `none` entry gives "
                f"the unregularized decoder).")


@dataclass
class SoftJaccardRegularizer(_BetweenBanks):
    """Soft-Jaccard loss between banks' relative features (PARAM), as a regularizer.

    Parameters:
        weight: multiplier of the loss, positive. Default 1.0 (our choice).
        temperature: temperature of the anchor-wise activation profiles. Default 1.0
            (our choice; see relbench_param.losses.soft_jaccard).
    """

    name: ClassVar[str] = "soft-jaccard"
    weight: float = 1.0
    temperature: float = 1.0

    def __post_init__(self) -> None:
        self._check_weight()
        if self.temperature <= 0:
            raise ValueError(f"soft-jaccard: temperature must be positive, got {self.temperature}")

    def loss(self, batch: RegularizerBatch) -> torch.Tensor:
        """Weighted mean Soft-Jaccard loss between the trained bank and each partner bank."""
        return self.weight * against_partners(lambda a, b: soft_jaccard(a, b, self.temperature), batch)


@dataclass
class BarlowTwinsRegularizer(_BetweenBanks):
    """Barlow Twins loss between banks' relative features (PARAM, after Zbontar et al. 2021), as a regularizer.

    Parameters:
        weight: multiplier of the loss, positive. Default 1.0 (our choice).
        lam: off-diagonal weight λ. Default 5e-3 (Zbontar et al.).
    """

    name: ClassVar[str] = "barlow-twins"
    weight: float = 1.0
    lam: float = 5e-3

    def __post_init__(self) -> None:
        self._check_weight()
        if self.lam < 0:
            raise ValueError(f"barlow-twins: lam must be ≥ 0, got {self.lam}")

    def loss(self, batch: RegularizerBatch) -> torch.Tensor:
        """Weighted mean Barlow Twins loss between the trained bank and each partner bank."""
        return self.weight * against_partners(lambda a, b: barlow_twins(a, b, self.lam), batch)


@dataclass
class AlignUniformRegularizer(_BetweenBanks):
    """Alignment–uniformity loss between banks' relative features (PARAM, after Wang & Isola 2020), as a regularizer.

    Parameters:
        weight: multiplier of the loss, positive. Default 1.0 (our choice).
        t: uniformity temperature t. Default 2.0 (Wang & Isola).
    """

    name: ClassVar[str] = "align-uniform"
    weight: float = 1.0
    t: float = 2.0

    def __post_init__(self) -> None:
        self._check_weight()
        if self.t <= 0:
            raise ValueError(f"align-uniform: t must be positive, got {self.t}")

    def loss(self, batch: RegularizerBatch) -> torch.Tensor:
        """Weighted mean alignment–uniformity loss between the trained bank and each partner bank."""
        return self.weight * against_partners(lambda a, b: align_uniform(a, b, self.t), batch)
