"""relbench_metrics: classification metrics against sklearn; Jaccard@k, MRR and Pearson r."""

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

from relbench_metrics import MAE, MSE, Accuracy, MacroF1, WeightedF1, jaccard_at_k, mrr, pearson_r

RNG = np.random.default_rng(0)
Y_TRUE = RNG.integers(0, 5, 300)
Y_PRED = np.where(RNG.random(300) < 0.6, Y_TRUE, RNG.integers(0, 5, 300))


@pytest.mark.parametrize("metric, reference", [
    (Accuracy(), skm.accuracy_score(Y_TRUE, Y_PRED)),
    (WeightedF1(), skm.f1_score(Y_TRUE, Y_PRED, average="weighted")),
    (MacroF1(), skm.f1_score(Y_TRUE, Y_PRED, average="macro")),
    (MAE(), skm.mean_absolute_error(Y_TRUE, Y_PRED)),
    (MSE(), skm.mean_squared_error(Y_TRUE, Y_PRED)),
])
def test_classification_metrics_agree_with_sklearn(metric, reference):
    assert metric.compute(Y_TRUE, Y_PRED) == pytest.approx(reference, abs=1e-12)


def test_error_metrics_are_lower_is_better():
    assert not MAE.higher_is_better and not MSE.higher_is_better and Accuracy.higher_is_better
    assert MAE().compute(np.array([1, 2]), np.array([1, 2])) == 0.0


def test_identical_tables_score_one():
    X = torch.randn(200, 16)
    assert jaccard_at_k(X, X, 10) == pytest.approx(1.0)
    assert mrr(X, X, 10) == pytest.approx(1.0)


def test_rotation_keeps_neighbourhoods_within_space_but_not_across():
    X = torch.randn(300, 16, dtype=torch.float64)
    Q, _ = torch.linalg.qr(torch.randn(16, 16, dtype=torch.float64))
    # the source vector searched in a rotated target space: neighbourhoods are lost
    assert jaccard_at_k(X, X @ Q, 10) < 0.2
    assert mrr(X, X @ Q, 10) < 0.2


def test_mrr_and_jaccard_by_hand():
    target = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.7, 0.71]])
    # source row 0 points at target row 2 first, then row 0: reciprocal rank 1/2
    source = torch.tensor([[0.72, 0.69], [0.0, 1.0], [0.7, 0.71]])
    assert mrr(source, target, 2) == pytest.approx((0.5 + 1 + 1) / 3)
    # k=1: own neighbour sets {0},{1},{2}; cross {2},{1},{2} → Jaccard (0 + 1 + 1)/3
    assert jaccard_at_k(source, target, 1) == pytest.approx(2 / 3)


def test_pearson_r_matches_numpy():
    a, b = RNG.random(50), RNG.random(50)
    assert pearson_r(a, b) == pytest.approx(np.corrcoef(a, b)[0, 1])
    assert pearson_r(a, 2 * a + 1) == pytest.approx(1.0)
    assert np.isnan(pearson_r([1, 1, 1], [1, 2, 3]))


@pytest.mark.parametrize("seed", range(20))
def test_f1_agrees_with_sklearn_on_random_labels_with_missing_classes(seed):
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, 6, size=int(rng.integers(1, 60)))
    y_pred = rng.integers(1, 8, size=len(y_true))  # class 0 never predicted, 6 and 7 never true
    assert WeightedF1().compute(y_true, y_pred) == pytest.approx(
        skm.f1_score(y_true, y_pred, average="weighted", zero_division=0), abs=1e-12)
    assert MacroF1().compute(y_true, y_pred) == pytest.approx(
        skm.f1_score(y_true, y_pred, average="macro", zero_division=0), abs=1e-12)
