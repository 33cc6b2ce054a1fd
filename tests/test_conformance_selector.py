"""relbench.testing.check_anchor_selector: every registered selector passes it, and
broken ones are caught with a message naming what failed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from relbench.interfaces import AnchorContext, AnchorSelector, Anchors
from relbench.testing import check_anchor_selector

#: every registered selector → the parameters it is checked with (PARAM's budget cut
#: to a few epochs: the check is about the contract, not the training)
CASES = {
    "random": {},
    "stratified": {},
    "parallel": {},
    "ood": {"dataset": "ui-strings"},
    "fps": {},
    "param": {"epochs": 10, "batch_size": 16, "eval_every": 2, "patience": 2},
    "class-parallel": {},
    "mismatched": {},
    "toy-spy": {},
}


def test_every_registered_selector_has_a_case(registry):
    assert set(registry.names("selector")) == set(CASES)


@pytest.mark.parametrize("name", CASES)
def test_the_registered_selector_passes(registry, name):
    check_anchor_selector(registry.get("selector", name)(**CASES[name]))


def test_a_selector_that_stops_early_by_design_passes_when_the_check_allows_fewer(registry):
    fps = registry.get("selector", "fps")(delta=0.9)
    with pytest.raises(AssertionError, match="returned [1-7] anchors.*fewer_allowed=True"):
        check_anchor_selector(fps)
    check_anchor_selector(fps, fewer_allowed=True)


@dataclass
class GlobalRandom(AnchorSelector):
    """Random anchors from the global random state (not seeded by ctx.seed)."""

    name: ClassVar[str] = "global-random"

    def select(self, ctx: AnchorContext) -> Anchors:
        return Anchors(ids=list(np.random.choice(ctx.ids, ctx.num_anchors, replace=False)))


@dataclass
class Peeking(AnchorSelector):
    """Anchors that include a sample outside the fit ids."""

    name: ClassVar[str] = "peeking"

    def select(self, ctx: AnchorContext) -> Anchors:
        return Anchors(ids=ctx.ids[: ctx.num_anchors - 1] + ["test-0"])


@dataclass
class Short(AnchorSelector):
    """One anchor fewer than asked."""

    name: ClassVar[str] = "short"

    def select(self, ctx: AnchorContext) -> Anchors:
        return Anchors(ids=ctx.ids[: ctx.num_anchors - 1])


@dataclass
class Repeating(AnchorSelector):
    """The same sample as every anchor."""

    name: ClassVar[str] = "repeating"

    def select(self, ctx: AnchorContext) -> Anchors:
        return Anchors(ids=ctx.ids[:1] * ctx.num_anchors)


@dataclass
class PeekingInOneSpace(AnchorSelector):
    """Its own ids for encoder ``b`` include a sample outside the fit ids."""

    name: ClassVar[str] = "peeking-in-one-space"

    def select(self, ctx: AnchorContext) -> Anchors:
        ids = ctx.ids[: ctx.num_anchors]
        return Anchors(ids=ids, encoder_ids={"b": ids[:-1] + ["test-0"]})


@dataclass
class UnseededInOneSpace(AnchorSelector):
    """Seeded ids, but encoder ``b``'s own ids from the global random state."""

    name: ClassVar[str] = "unseeded-in-one-space"

    def select(self, ctx: AnchorContext) -> Anchors:
        own = list(np.random.choice(ctx.ids, ctx.num_anchors, replace=False))
        return Anchors(ids=ctx.ids[: ctx.num_anchors], encoder_ids={"b": own})


@dataclass
class FalselyNested(AnchorSelector):
    """Declares that its prefixes are its smaller selections, but takes the last ids."""

    name: ClassVar[str] = "falsely-nested"
    prefix_nested: ClassVar[bool] = True

    def select(self, ctx: AnchorContext) -> Anchors:
        return Anchors(ids=ctx.ids[-ctx.num_anchors:])


@pytest.mark.parametrize("broken,message", [
    (FalselyNested(), r"declares prefix_nested, but its 4 anchors asked for 4 are not the first of its 8"),
    (PeekingInOneSpace(), r"anchor ids \['test-0'\] are not among the fit ids"),
    (UnseededInOneSpace(), "two selections with the same seed differ"),
    (GlobalRandom(), "GlobalRandom \\(selector 'global-random'\\): two selections with the same seed differ "
                     "\\(on seed 0, .*seeded_generator"),
    (Peeking(), r"anchor ids \['test-0'\] are not among the fit ids.*never validation or test samples"),
    (Short(), "returned 7 anchors \\(on seed 0, 8 anchors asked"),
    (Repeating(), "the same sample is an anchor twice.*without replacement"),
])
def test_a_broken_selector_is_caught(broken, message):
    with pytest.raises(AssertionError, match=message):
        check_anchor_selector(broken)
