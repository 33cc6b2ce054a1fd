"""relbench.testing.check_stitcher: every registered stitcher passes it under both
evaluations, and broken ones (a transductive stitcher under the inductive protocol, a
NotAchievable the class does not declare) are caught with a message naming what failed.

A stitcher cannot declare itself transductive: the protocol asks for it
(``FitContext.evaluation``), or a similarity declares it (``Similarity.transductive``);
only then does the check skip its inductive test."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch

from relbench.interfaces import FitContext, NotAchievable, Prediction, StitchSide
from relbench.testing import check_stitcher
from relbench_relreps.stitchers import AbsoluteDecoder
from relbench_topology.robust import RobustCosine

#: every registered stitcher → its parameters (short trainings, fewer IRP subspaces)
CASES = {
    "relative": {"epochs": 3},
    "absolute": {"epochs": 3},
    "non-stitched": {"epochs": 3},
    "irp": {"epochs": 3, "omega": 2},
    "procrustes": {"epochs": 3},
    "affine": {"epochs": 3},
}


def test_every_registered_stitcher_has_a_case(registry):
    assert set(registry.names("stitcher")) == set(CASES)


@pytest.mark.parametrize("evaluation", ["inductive", "transductive"])
@pytest.mark.parametrize("name", CASES)
def test_the_registered_stitcher_passes(registry, name, evaluation):
    check_stitcher(registry.get("stitcher", name)(**CASES[name]), evaluation=evaluation)


def test_the_relative_decoder_passes_with_a_fitted_similarity(registry):
    check_stitcher(registry.get("stitcher", "relative")(epochs=3), similarity=RobustCosine())


@dataclass
class BatchStandardised(AbsoluteDecoder):
    """The absolute head fed test rows standardised over the test batch, whatever the
    protocol says (transductive while claiming nothing)."""

    name: ClassVar[str] = "batch-standardised"

    def predict(self, source: StitchSide) -> Prediction:
        X = source.test.X
        batch = StitchSide(source.encoder, source.train, type(source.test)(
            source.encoder, "test", (X - X.mean(dim=0)) / X.std(dim=0), source.test.ids), None, None)
        return super().predict(batch)


def test_a_transductive_stitcher_under_the_inductive_protocol_is_caught():
    with pytest.raises(AssertionError) as caught:
        check_stitcher(BatchStandardised(epochs=3))
    message = str(caught.value)
    assert "BatchStandardised (stitcher 'batch-standardised'): a test sample's logits change by" in message
    assert "when the other test samples change (on target a" in message and "inductive evaluation)" in message
    assert "fix normalisation statistics on the training rows" in message


def test_a_transductive_similarity_exempts_the_stitcher_from_the_inductive_test(registry):
    check_stitcher(registry.get("stitcher", "relative")(epochs=3), similarity=RobustCosine(statistics="batch"))
    check_stitcher(BatchStandardised(epochs=3), evaluation="transductive")


@dataclass
class Picky(AbsoluteDecoder):
    """Refuses every source but its own, without declaring ``diagonal_only``."""

    name: ClassVar[str] = "picky"

    def fit(self, target: StitchSide, ctx: FitContext) -> None:
        super().fit(target, ctx)
        self._own = target.encoder

    def predict(self, source: StitchSide) -> Prediction:
        if source.encoder != self._own:
            raise NotAchievable("only my own encoder")
        return super().predict(source)


@dataclass
class Wide(AbsoluteDecoder):
    """Logits with one class too many."""

    name: ClassVar[str] = "wide"

    def predict(self, source: StitchSide) -> Prediction:
        logits = super().predict(source).logits
        return Prediction(logits=torch.cat([logits, logits[:, :1]], dim=1))


@dataclass
class Crashing(AbsoluteDecoder):
    """Raises a plain error on another width instead of NotAchievable."""

    name: ClassVar[str] = "crashing"

    def predict(self, source: StitchSide) -> Prediction:
        if source.test.dim != 6:
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")
        return super().predict(source)


@pytest.mark.parametrize("broken,message", [
    (Picky(epochs=3), r"predict\(\) raised NotAchievable \(only my own encoder\) \(on target a .* source b"
                      r".*set diagonal_only = True"),
    (Wide(epochs=3), r"predict\(\) returned shape \(30, 4\) logits, not finite 30 × 3"),
    (Crashing(epochs=3), r"predict\(\) raised RuntimeError: mat1 and mat2 .* source wide.*raise NotAchievable"),
])
def test_a_broken_stitcher_is_caught(broken, message):
    with pytest.raises(AssertionError, match=message):
        check_stitcher(broken)
