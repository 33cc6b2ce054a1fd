"""relbench.testing.check_regularizer: every registered regularizer passes it, and
broken ones are caught with a message naming what failed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch

from relbench.interfaces import Regularizer, RegularizerBatch
from relbench.testing import check_regularizer

#: every registered regularizer → its parameters
CASES = {
    "soft-jaccard": {},
    "barlow-twins": {},
    "align-uniform": {},
    "topological": {"classes_per_batch": 3, "samples_per_class": 8},
}


def test_every_registered_regularizer_has_a_case(registry):
    assert set(registry.names("regularizer")) == set(CASES)


@pytest.mark.parametrize("name", CASES)
def test_the_registered_regularizer_passes(registry, name):
    check_regularizer(registry.get("regularizer", name)(**CASES[name]))


def test_the_topological_default_batch_shape_passes_too(registry):
    check_regularizer(registry.get("regularizer", "topological")())


@dataclass
class Detached(Regularizer):
    """Spread of the trained bank's relative features, computed through numpy."""

    name: ClassVar[str] = "detached"
    needs_adapter: ClassVar[bool] = True

    def loss(self, batch: RegularizerBatch) -> torch.Tensor:
        return torch.tensor(float(batch.relative[batch.trained].detach().numpy().std()))


@dataclass
class PerSample(Regularizer):
    """A loss per sample, never reduced."""

    name: ClassVar[str] = "per-sample"

    def loss(self, batch: RegularizerBatch) -> torch.Tensor:
        return batch.relative[batch.trained].pow(2).sum(dim=1)


@dataclass
class LogOfZero(Regularizer):
    """The log of a distance that is zero on the diagonal."""

    name: ClassVar[str] = "log-of-zero"

    def loss(self, batch: RegularizerBatch) -> torch.Tensor:
        X = batch.embeddings[batch.trained]
        return -torch.log(torch.cdist(X, X)).mean()


@dataclass
class PartnerOnly(Regularizer):
    """Asks for an adapter but scores only the fixed partner bank."""

    name: ClassVar[str] = "partner-only"
    needs_adapter: ClassVar[bool] = True

    def loss(self, batch: RegularizerBatch) -> torch.Tensor:
        partner = next(F for name, F in batch.relative.items() if name != batch.trained)
        return partner.pow(2).mean() + 0 * batch.embeddings[batch.trained].sum()


@pytest.mark.parametrize("broken,message", [
    (PartnerOnly(), "the trained bank's embeddings get no finite, non-zero gradient.*depend differentiably"),
    (Detached(), r"Detached \(regularizer 'detached'\): the loss carries no gradient \(on a batch of 3 classes × 8 "
                 r"samples.*without \.detach\(\), \.item\(\) or numpy"),
    (PerSample(), r"loss\(\) returned shape \(24,\), not a finite scalar tensor"),
    (LogOfZero(), r"loss\(\) returned shape \(\), not a finite scalar tensor.*guard divisions"),
])
def test_a_broken_regularizer_is_caught(broken, message):
    with pytest.raises(AssertionError, match=message):
        check_regularizer(broken)
