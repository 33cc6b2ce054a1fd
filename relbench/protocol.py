"""The evaluation protocol of a task: what each seed draws, what is held out for
choosing constants, and how heads predict.

For every seed the harness draws the seed's own samples from the data set's splits
(the *pool* a data set plugin loads and the encoders embed once): ``train_size``
training samples and ``test_size`` test samples, stratified by class. The training draw
is then divided, stratified, into a *fit* part (what decoders, adapters and learned
anchors train on) and a *validation* part of fraction ``validation`` (what tunable
constants are chosen on). Test samples are only ever predicted and scored.

Draws depend on the labels and the seed only, so they are the same on every machine;
different seeds draw different samples (the pool is shared, each sample is encoded
once per encoder).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from relbench.sampling import stratified_split, stratified_subsample

#: the fraction of a seed's training draw held out for validation when the tasks file
#: does not say (a common choice; ≥ 1,000 validation samples at the suite's 5,000)
DEFAULT_VALIDATION = 0.2
#: the largest validation fraction accepted (the fit part must keep most of the draw)
MAX_VALIDATION = 0.5


@dataclass(frozen=True)
class EvaluationProtocol:
    """A task's protocol (tasks.yaml ``protocol:``, in ``suite:`` or per task).

    Parameters:
        train_size: training samples each seed draws from the data set's training pool
            (``null``: the whole pool, the same for every seed).
        test_size: test samples each seed draws from the test pool (``null``: all).
        validation: fraction of the seed's training draw held out to choose tunable
            constants (stratified); 0 switches tuning off (defaults are used).
        evaluation: ``inductive`` (a prediction never depends on other test samples)
            or ``transductive`` (heads normalise over the evaluated split, as the
            reference code does at test time).
    """

    train_size: int | None = None
    test_size: int | None = None
    validation: float = DEFAULT_VALIDATION
    evaluation: Literal["inductive", "transductive"] = "inductive"

    def identity(self) -> dict[str, Any]:
        """What enters every unit's fingerprint."""
        return asdict(self)


@dataclass(frozen=True)
class Draw:
    """One seed's samples: positions in the data set's train split (``fit``,
    ``validation``) and test split (``test``), each sorted."""

    fit: np.ndarray
    validation: np.ndarray
    test: np.ndarray

    def positions(self, split: str) -> np.ndarray:
        """The positions of ``split`` (``train`` is the fit part)."""
        return {"train": self.fit, "fit": self.fit, "validation": self.validation, "test": self.test}[split]


def _seed_for(seed: int, part: int) -> int:
    """A seed for one part of a draw, independent across parts and seeds."""
    return int(np.random.SeedSequence([int(seed), part]).generate_state(1)[0])


def draw(protocol: EvaluationProtocol, train_labels: np.ndarray | None, n_train: int,
         test_labels: np.ndarray | None, n_test: int, seed: int) -> Draw:
    """The samples of ``seed`` under ``protocol`` (see the module docstring)."""
    train = stratified_subsample(train_labels, n_train, protocol.train_size, _seed_for(seed, 0))
    test = stratified_subsample(test_labels, n_test, protocol.test_size, _seed_for(seed, 1))
    if protocol.validation <= 0:
        return Draw(train, train[:0], test)
    labels = None if train_labels is None else np.asarray(train_labels)[train]
    fit, val = stratified_split(labels, len(train), protocol.validation, _seed_for(seed, 2))
    return Draw(train[fit], train[val], test)
