"""relbench built-in plugins: classification and error metrics, retrieval metrics of
rankings (Jaccard@k, MRR), Pearson r, and the neighbour search that makes rankings."""

from relbench.api import hookimpl
from relbench_metrics.classification import MAE, MSE, Accuracy, MacroF1, WeightedF1
from relbench_metrics.retrieval import MRR, JaccardAtK, PearsonR, neighbour_rankings, top_k_neighbours


@hookimpl
def relbench_metrics():
    """The metrics of this package."""
    return [Accuracy, WeightedF1, MacroF1, MAE, MSE, JaccardAtK, MRR, PearsonR]


__all__ = ["MAE", "MRR", "MSE", "Accuracy", "JaccardAtK", "MacroF1", "PearsonR", "WeightedF1", "neighbour_rankings",
           "top_k_neighbours"]
