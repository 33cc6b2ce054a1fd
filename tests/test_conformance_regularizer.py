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
    "adapter": {},
}


def test_every_registered_regularizer_has_a_case(registry):
    assert set(registry.names("regularizer")) == set(CASES)


@pytest.mark.parametrize("name", CASES)
def test_the_registered_regularizer_passes(registry, name):
    check_regularizer(registry.get("regularizer", name)(**CASES[name]))


def test_the_topological_default_batch_shape_passes_too(registry):
    check_regularizer(registry.get("regularizer", "topological")())


def test_the_control_adds_an_exact_zero_through_the_graph_in_topological_default_batches(registry):
    control, topological = registry.get("regularizer", "adapter")(), registry.get("regularizer", "topological")()
    assert control.batch_shape() == topological.batch_shape() == (8, 16)
    assert type(control).needs_adapter and not type(control).adds_loss and type(topological).adds_loss
    X = torch.randn(6, 4, requires_grad=True)
    loss = control.loss(RegularizerBatch(labels=torch.arange(6) % 2, embeddings={"a": X}, relative={}, trained="a"))
    assert loss.item() == 0.0 and loss.requires_grad


def test_the_control_refuses_an_empty_batch_shape(registry):
    with pytest.raises(ValueError, match="samples_per_class must be at least 1"):
        registry.get("regularizer", "adapter")(samples_per_class=0)


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


@dataclass
class LossyControl(Regularizer):
    """Declares it adds no loss, but returns the spread of the trained bank."""

    name: ClassVar[str] = "lossy-control"
    needs_adapter: ClassVar[bool] = True
    adds_loss: ClassVar[bool] = False

    def loss(self, batch: RegularizerBatch) -> torch.Tensor:
        return batch.embeddings[batch.trained].std()


@pytest.mark.parametrize("broken,message", [
    (LossyControl(), r"it declares adds_loss = False but its loss is [1-9][0-9.]*.*return an exact zero"),
    (PartnerOnly(), "the trained bank's embeddings get no finite, non-zero gradient.*depend differentiably"),
    (Detached(), r"Detached \(regularizer 'detached'\): the loss carries no gradient \(on a batch of 3 classes × 8 "
                 r"samples.*without \.detach\(\), \.item\(\) or numpy"),
    (PerSample(), r"loss\(\) returned shape \(24,\), not a finite scalar tensor"),
    (LogOfZero(), r"loss\(\) returned shape \(\), not a finite scalar tensor.*guard divisions"),
])
def test_a_broken_regularizer_is_caught(broken, message):
    with pytest.raises(AssertionError, match=message):
        check_regularizer(broken)
