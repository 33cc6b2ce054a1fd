"""relbench.testing.check_metric: every registered metric passes it on inputs of the
output it declares, a metric declaring a score of each output passes it, and broken
declarations are caught with a message naming what failed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from relbench.interfaces import METRIC_OUTPUTS, Metric
from relbench.testing import check_metric


def test_every_registered_metric_passes(registry):
    for name in registry.names("metric"):
        metric = registry.get("metric", name)()
        check_metric(metric)
        check_metric(metric, classes=12, samples=300, cells=40, resamples=3, seed=1)  # more than one block of cells


@dataclass
class TopOne(Metric):
    """Top-1 accuracy from per-class scores (a test fixture)."""

    name: ClassVar[str] = "top-one"
    output: ClassVar[str] = "scores"
    aggregation: ClassVar[str] = "mean"

    def per_sample(self, y_true, y_pred):
        return (np.asarray(y_pred).argmax(axis=1) == np.asarray(y_true)).astype(float)


def test_a_scores_metric_is_checked_on_per_class_scores():
    assert "scores" in METRIC_OUTPUTS
    check_metric(TopOne())


@dataclass
class Undeclared(Metric):
    """A metric declaring an output relbench does not know (a test fixture)."""

    name: ClassVar[str] = "undeclared"
    output: ClassVar[str] = "probabilities"

    def compute(self, y_true, y_pred):
        return 0.0


@dataclass
class UnknownAggregation(Undeclared):
    """A metric declaring an aggregation relbench does not know (a test fixture)."""

    output: ClassVar[str] = "labels"
    aggregation: ClassVar[str] = "median"


@dataclass
class NotItsMean(TopOne):
    """Declares ``mean`` but scores something else (a test fixture)."""

    def compute(self, y_true, y_pred):
        return 1.0


@dataclass
class OneValue(TopOne):
    """Per-sample values of the wrong shape (a test fixture)."""

    def per_sample(self, y_true, y_pred):
        return np.ones(1)

    def compute(self, y_true, y_pred):
        return 1.0


@dataclass
class WholeSetWithoutCompute(Metric):
    """A whole-set metric that implements nothing (a test fixture)."""

    name: ClassVar[str] = "nothing"


@pytest.mark.parametrize("metric, message", [
    (Undeclared(), "output is 'probabilities'"),
    (UnknownAggregation(), "aggregation is 'median'"),
    (NotItsMean(), "not the mean of its per-sample values"),
    (OneValue(), "must return 40 finite values"),
], ids=lambda case: type(case).__name__ if isinstance(case, Metric) else "")
def test_broken_declarations_are_caught(metric, message):
    with pytest.raises(AssertionError, match=message):
        check_metric(metric)


def test_a_metric_without_compute_says_what_to_implement():
    with pytest.raises(NotImplementedError, match="a 'mean' metric implements per_sample"):
        check_metric(WholeSetWithoutCompute())
