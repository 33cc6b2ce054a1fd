"""relbench_metrics: classification and error metrics against sklearn, Pearson r against
SciPy, Jaccard@k and MRR against set- and list-based formulations, and the word
protocol's neighbour rankings."""

import numpy as np
import pytest
import torch
from scipy import stats
from sklearn import metrics as skm

from relbench_metrics import (MAE, MRR, MSE, Accuracy, JaccardAtK, MacroF1, PearsonR, WeightedF1, neighbour_rankings,
                              top_k_neighbours)

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


@pytest.mark.parametrize("shape", [(200,), (200, 7)])
def test_error_metrics_of_real_values_agree_with_sklearn(shape):
    y_true = RNG.normal(size=shape)
    y_pred = y_true + RNG.normal(size=shape)
    assert MSE().compute(y_true, y_pred) == pytest.approx(skm.mean_squared_error(y_true, y_pred), rel=1e-12)
    assert MAE().compute(y_true, y_pred) == pytest.approx(skm.mean_absolute_error(y_true, y_pred), rel=1e-12)
    per_sample = MSE().per_sample(y_true, y_pred)  # one value per sample, whatever its width
    assert per_sample.shape == (200,) and per_sample.mean() == pytest.approx(MSE().compute(y_true, y_pred))


def test_mse_of_tensors_is_taken_in_torch():
    """Reconstructed pixels are scored where they are, as torch's own mean of the squares,
    in their own precision (numpy has no bfloat16)."""
    g = torch.Generator().manual_seed(2)
    y_true, y_pred = torch.rand(100, 784, generator=g), torch.rand(100, 784, generator=g)
    assert MSE().compute(y_true, y_pred) == float(torch.mean((y_pred - y_true) ** 2))
    assert MSE().compute(y_true, y_pred) == pytest.approx(skm.mean_squared_error(y_true.numpy(), y_pred.numpy()),
                                                          rel=1e-6)
    half_true, half_pred = y_true.bfloat16(), y_pred.bfloat16()
    assert MSE().compute(half_true, half_pred) == float(torch.mean((half_pred - half_true) ** 2))


def test_pearson_r_agrees_with_scipy():
    for _ in range(5):
        a = RNG.normal(size=50)
        b = 0.5 * a + RNG.normal(size=50)
        assert PearsonR().compute(a, b) == pytest.approx(stats.pearsonr(a, b).statistic, abs=1e-12)
    a = RNG.random(50)
    assert PearsonR().compute(a, 2 * a + 1) == pytest.approx(1.0)
    assert np.isnan(PearsonR().compute([1, 1, 1], [1, 2, 3])) and np.isnan(PearsonR().compute([1.0], [2.0]))
    with pytest.raises(ValueError, match="equal lengths"):
        PearsonR().compute([1, 2, 3], [1, 2])


def _random_rankings(queries: int, items: int, depth: int) -> np.ndarray:
    return np.stack([RNG.permutation(items)[:depth] for _ in range(queries)])


def test_jaccard_at_k_agrees_with_sets():
    relevant, retrieved = _random_rankings(300, 12, 4), _random_rankings(300, 12, 5)
    expected = [len(set(a) & set(b)) / len(set(a) | set(b)) for a, b in zip(relevant.tolist(), retrieved.tolist())]
    assert np.array_equal(JaccardAtK().per_sample(relevant, retrieved), expected)
    assert JaccardAtK().compute(relevant, retrieved) == pytest.approx(np.mean(expected), abs=1e-15)


def _reciprocal_rank(relevant: list[int], retrieved: list[int]) -> float:
    ranks = [retrieved.index(item) + 1 for item in relevant if item in retrieved]
    return 1 / min(ranks) if ranks else 0.0


@pytest.mark.parametrize("relevant_per_query", [1, 3])
def test_mrr_agrees_with_list_positions(relevant_per_query):
    relevant, retrieved = _random_rankings(300, 12, relevant_per_query), _random_rankings(300, 12, 5)
    expected = [_reciprocal_rank(a, b) for a, b in zip(relevant.tolist(), retrieved.tolist())]
    assert MRR().per_sample(relevant, retrieved) == pytest.approx(expected, rel=1e-7)  # single precision
    assert MRR().compute(relevant, retrieved) == pytest.approx(np.mean(expected), rel=1e-7)
    if relevant_per_query == 1:  # one relevant item per query may be given as a flat array
        assert np.array_equal(MRR().per_sample(relevant[:, 0], retrieved), MRR().per_sample(relevant, retrieved))


def test_ranking_metrics_refuse_mismatched_shapes():
    with pytest.raises(ValueError, match="n × k"):
        MRR().compute(np.arange(5), np.arange(5))


def _word_scores(source, target, k):
    own, cross = neighbour_rankings(source, target, k)
    return JaccardAtK().compute(own, cross), MRR().compute(np.arange(len(cross)), cross)


def test_identical_tables_score_one():
    X = torch.randn(200, 16)
    assert _word_scores(X, X, 10) == pytest.approx((1.0, 1.0))


def test_rotation_keeps_neighbourhoods_within_space_but_not_across():
    X = torch.randn(300, 16, dtype=torch.float64)
    Q, _ = torch.linalg.qr(torch.randn(16, 16, dtype=torch.float64))
    # the source vector searched in a rotated target space: neighbourhoods are lost
    assert max(_word_scores(X, X @ Q, 10)) < 0.2


def test_mrr_and_jaccard_by_hand():
    target = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.7, 0.71]])
    # source row 0 points at target row 2 first, then row 0: reciprocal rank 1/2
    source = torch.tensor([[0.72, 0.69], [0.0, 1.0], [0.7, 0.71]])
    assert _word_scores(source, target, 2)[1] == pytest.approx((0.5 + 1 + 1) / 3)
    # k=1: own neighbour sets {0},{1},{2}; cross {2},{1},{2} → Jaccard (0 + 1 + 1)/3
    assert _word_scores(source, target, 1)[0] == pytest.approx(2 / 3)
    assert top_k_neighbours(source, target, 5).shape == (3, 3)  # k is capped at the index size


def test_metric_declarations():
    """What each metric scores and how its samples aggregate, as the kinds rely on."""
    declared = {type(m).name: (m.output, m.aggregation, m.direction())
                for m in (Accuracy(), WeightedF1(), MacroF1(), MAE(), MSE(), JaccardAtK(), MRR(), PearsonR())}
    assert declared == {
        "accuracy": ("labels", "mean", "higher"), "weighted_f1": ("labels", "whole_set", "higher"),
        "macro_f1": ("labels", "whole_set", "higher"), "mae": ("regression", "mean", "lower"),
        "mse": ("regression", "mean", "lower"), "jaccard": ("ranking", "mean", "higher"),
        "mrr": ("ranking", "mean", "higher"), "pearson_r": ("regression", "whole_set", "higher")}
