"""Scores of predicted class indices against true ones.

The definitions are sklearn's (``f1_score`` with ``zero_division=0``: classes are those in
either array, F1 = 2·TP / (2·TP + FP + FN), 0 where that is 0/0), computed with numpy
bincounts: the suite scores tens of thousands of cells, and sklearn's input validation
costs more than the arithmetic. tests/test_metrics_basic.py checks agreement with sklearn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from relbench.interfaces import Metric


def _as_indices(y: np.ndarray) -> np.ndarray:
    return np.asarray(y).reshape(-1)


def per_class_f1(y_true: np.ndarray, y_pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """F1 and support of every class present in ``y_true`` or ``y_pred``."""
    y_true, y_pred = _as_indices(y_true), _as_indices(y_pred)
    classes, inverse = np.unique(np.concatenate([y_true, y_pred]), return_inverse=True)
    t, p = inverse[: len(y_true)], inverse[len(y_true):]
    n = len(classes)
    tp = np.bincount(t[t == p], minlength=n).astype(float)
    support = np.bincount(t, minlength=n).astype(float)
    predicted = np.bincount(p, minlength=n).astype(float)
    denominator = support + predicted  # = 2·TP + FP + FN
    f1 = np.divide(2 * tp, denominator, out=np.zeros(n), where=denominator > 0)
    return f1, support


@dataclass
class Accuracy(Metric):
    """Accuracy: the fraction of predictions equal to the true class.

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "accuracy"

    def compute(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        """Fraction of exact matches."""
        return float(np.mean(_as_indices(y_true) == _as_indices(y_pred)))


@dataclass
class WeightedF1(Metric):
    """Weighted F1: per-class F1 averaged with class-frequency weights (sklearn
    ``average="weighted"``), the score of the relative-representations paper.

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "weighted_f1"

    def compute(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        """sklearn ``f1_score(average="weighted", zero_division=0)``."""
        f1, support = per_class_f1(y_true, y_pred)
        return float(f1 @ support / support.sum()) if support.sum() else 0.0


@dataclass
class MacroF1(Metric):
    """Macro F1: the unweighted mean of per-class F1 (sklearn ``average="macro"``).

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "macro_f1"

    def compute(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        """sklearn ``f1_score(average="macro", zero_division=0)``."""
        f1, _ = per_class_f1(y_true, y_pred)
        return float(f1.mean())


@dataclass
class MAE(Metric):
    """Mean absolute error between class indices (meaningful for ordinal labels such as
    star ratings; lower is better).

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "mae"
    higher_is_better: ClassVar[bool] = False

    def compute(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        """Mean of ``|y_true - y_pred|`` over samples."""
        return float(np.mean(np.abs(_as_indices(y_true) - _as_indices(y_pred))))


@dataclass
class MSE(Metric):
    """Mean squared error between class indices (ordinal labels; lower is better).

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "mse"
    higher_is_better: ClassVar[bool] = False

    def compute(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        """Mean of ``(y_true - y_pred)²`` over samples."""
        return float(np.mean((_as_indices(y_true) - _as_indices(y_pred)) ** 2))
