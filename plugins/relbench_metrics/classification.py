"""Scores of predicted class indices against true ones, and the error metrics (MAE, MSE)
of numbers: real-valued predictions, or the class indices of ordinal labels.

The definitions are sklearn's (``f1_score`` with ``zero_division=0``: classes are those in
either array, F1 = 2·TP / (2·TP + FP + FN), 0 where that is 0/0), computed with numpy
bincounts: the suite scores tens of thousands of cells, and sklearn's input validation
costs more than the arithmetic. tests/test_metrics_basic.py checks agreement with sklearn.

Each metric also scores many predictions under many bootstrap weightings at once
(:meth:`~relbench.interfaces.Metric.compute_weighted`): accuracy, MAE and MSE are means of
per-sample values (the interface weights them); the F1 scores' weighted per-class counts
are products of the ``R × n`` weights with sparse indicator matrices (SciPy), so a page's
intervals over thousands of cells take seconds; the tests check them against the
interface's one-resample-at-a-time definition.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from relbench.api import Metric


def _as_indices(y: np.ndarray) -> np.ndarray:
    """``y`` as one flat numpy array."""
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


def weighted_class_counts(y_true: np.ndarray, y_preds: np.ndarray,
                          weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per resample, prediction and class: ``(tp, support, predicted)``, each ``R × cells × K``,
    the counts :func:`per_class_f1` takes, with sample ``i`` counted ``weights[r, i]`` times
    (``K`` = the largest class index + 1; a class absent from both arrays counts 0 everywhere).

    Each count is a product of the weights with a sparse ``n × (cells·K)`` indicator
    matrix (one entry per sample and cell: its predicted class; for ``tp`` only where that
    is the true class), so the work grows with ``R × n × cells``, not ``× K``."""
    from scipy.sparse import csr_matrix

    y_true, y_preds = _as_indices(y_true), np.atleast_2d(y_preds)
    weights = np.atleast_2d(weights).astype(float)
    cells, n = y_preds.shape
    k = int(max(y_true.max(initial=0), y_preds.max(initial=0))) + 1
    support = weights @ np.eye(k)[y_true]  # R × K, the same for every prediction
    columns = (np.arange(cells)[:, None] * k + y_preds).ravel()  # cell-major: cell c, class j → c·K + j
    rows = np.tile(np.arange(n), cells)
    hit = (y_preds == y_true[None]).ravel()

    def counted(mask: np.ndarray) -> np.ndarray:
        indicator = csr_matrix((np.ones(int(mask.sum())), (rows[mask], columns[mask])), shape=(n, cells * k))
        return np.asarray(indicator.T @ weights.T).T.reshape(len(weights), cells, k)

    tp, predicted = counted(hit), counted(np.ones_like(hit))
    return tp, np.broadcast_to(support[:, None, :], tp.shape), predicted


def _f1_from_counts(tp: np.ndarray, support: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    denominator = support + predicted
    return np.divide(2 * tp, denominator, out=np.zeros_like(tp), where=denominator > 0)


@dataclass
class Accuracy(Metric):
    """Accuracy: the fraction of predictions equal to the true class.

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "accuracy"
    aggregation: ClassVar[str] = "mean"

    def per_sample(self, y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
        """1 where the prediction is the true class, else 0."""
        return (_as_indices(y_true) == _as_indices(y_pred)).astype(float)


@dataclass
class WeightedF1(Metric):
    """Weighted F1: per-class F1 averaged with class-frequency weights (sklearn
    ``average="weighted"``), the score of the relative-representations paper.

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "weighted_f1"
    aggregation: ClassVar[str] = "whole_set"

    def compute(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        """sklearn ``f1_score(average="weighted", zero_division=0)``."""
        f1, support = per_class_f1(y_true, y_pred)
        return float(f1 @ support / support.sum()) if support.sum() else 0.0

    def compute_weighted(self, y_true: np.ndarray, y_preds: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Weighted F1 from weighted per-class counts, ``R × cells``."""
        tp, support, predicted = weighted_class_counts(y_true, y_preds, weights)
        total = support.sum(axis=2)
        score = (_f1_from_counts(tp, support, predicted) * support).sum(axis=2)
        return np.divide(score, total, out=np.zeros_like(score), where=total > 0)


@dataclass
class MacroF1(Metric):
    """Macro F1: the unweighted mean of per-class F1 (sklearn ``average="macro"``).

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "macro_f1"
    aggregation: ClassVar[str] = "whole_set"

    def compute(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        """sklearn ``f1_score(average="macro", zero_division=0)``."""
        f1, _ = per_class_f1(y_true, y_pred)
        return float(f1.mean())

    def compute_weighted(self, y_true: np.ndarray, y_preds: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Mean F1 over the classes present (in the resample's true or predicted values), ``R × cells``."""
        tp, support, predicted = weighted_class_counts(y_true, y_preds, weights)
        present = (support + predicted) > 0
        return _f1_from_counts(tp, support, predicted).sum(axis=2) / np.maximum(present.sum(axis=2), 1)


def _per_row_mean(values: np.ndarray) -> np.ndarray:
    """``n`` values (or ``n × …``, one row per sample) → each sample's mean, ``n``."""
    values = np.asarray(values)
    return values.reshape(len(values), -1).mean(axis=1)


def _is_tensor(value) -> bool:
    """Whether ``value`` is a torch tensor (torch is not imported for other inputs)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


@dataclass
class MAE(Metric):
    """Mean absolute error between numbers: real-valued predictions, or class indices
    of ordinal labels such as star ratings (lower is better).

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "mae"
    higher_is_better: ClassVar[bool] = False
    output: ClassVar[str] = "regression"
    aggregation: ClassVar[str] = "mean"

    def per_sample(self, y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
        """Per sample, the mean of ``|y_true - y_pred|`` over its entries."""
        return _per_row_mean(np.abs(np.asarray(y_true) - np.asarray(y_pred)))


@dataclass
class MSE(Metric):
    """Mean squared error between numbers: real-valued predictions (reconstructed
    pixels), or class indices of ordinal labels (lower is better).

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "mse"
    higher_is_better: ClassVar[bool] = False
    output: ClassVar[str] = "regression"
    aggregation: ClassVar[str] = "mean"

    def per_sample(self, y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
        """Per sample, the mean of ``(y_true - y_pred)²`` over its entries."""
        return _per_row_mean((np.asarray(y_true) - np.asarray(y_pred)) ** 2)

    def compute(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        """The mean of ``(y_true - y_pred)²`` over every entry (for samples of equal
        width, the mean of :meth:`per_sample`): torch tensors in torch, on their device
        and in their precision; anything else in numpy."""
        if _is_tensor(y_true) and _is_tensor(y_pred):
            return float(((y_true - y_pred) ** 2).mean())
        return float(np.mean((_as_indices(y_true) - _as_indices(y_pred)) ** 2))
