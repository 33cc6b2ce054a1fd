"""relbench built-in plugins: classification metrics, and the pure retrieval and
correlation functions (Jaccard@k, MRR, Pearson r) that task kinds compute themselves."""

from relbench.api import hookimpl
from relbench_metrics.classification import MAE, MSE, Accuracy, MacroF1, WeightedF1
from relbench_metrics.retrieval import (jaccard_at_k, jaccard_per_item, mrr, pearson_r, reciprocal_ranks,
                                       top_k_neighbours)


@hookimpl
def relbench_metrics():
    """The classification metrics of this package."""
    return [Accuracy, WeightedF1, MacroF1, MAE, MSE]


__all__ = ["MAE", "MSE", "Accuracy", "MacroF1", "WeightedF1", "jaccard_at_k", "jaccard_per_item", "mrr", "pearson_r",
           "reciprocal_ranks",
           "top_k_neighbours"]
