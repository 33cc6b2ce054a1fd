"""Scores of predicted class indices against true ones (sklearn's definitions)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from sklearn import metrics as skm

from relbench.interfaces import Metric


def _as_indices(y: np.ndarray) -> np.ndarray:
    return np.asarray(y).reshape(-1)


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
        return float(skm.accuracy_score(_as_indices(y_true), _as_indices(y_pred)))


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
        return float(skm.f1_score(_as_indices(y_true), _as_indices(y_pred), average="weighted", zero_division=0))


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
        return float(skm.f1_score(_as_indices(y_true), _as_indices(y_pred), average="macro", zero_division=0))


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
        return float(skm.mean_absolute_error(_as_indices(y_true), _as_indices(y_pred)))


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
        return float(skm.mean_squared_error(_as_indices(y_true), _as_indices(y_pred)))
