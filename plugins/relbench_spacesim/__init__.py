"""relbench built-in plugins: representational-similarity measures between two spaces,
and the task kind that measures every encoder pair of a task with them.

* space measures ``linear-cka``, ``debiased-cka`` (Kornblith et al. 2019; Song et al.
  2012's unbiased HSIC), ``mutual-knn``, ``cknna`` (Huh et al. 2024, the
  platonic-representation code), ``svcca`` (Raghu et al. 2017) and
  ``procrustes-distance`` (Ding et al. 2021);
* task kind ``space-similarity``: every measure of its grid on every encoder pair of the
  task's test draws;
* :func:`spearman_over_pairs`: the rank correlation over encoder pairs between a measure
  and a stitching score, with a bootstrap interval over pairs.
"""

from relbench.api import hookimpl
from relbench_spacesim.correlation import spearman_over_pairs
from relbench_spacesim.kind import SpaceSimilarity
from relbench_spacesim.measures import (CKNNA, MEASURES, SVCCA, DebiasedCKA, LinearCKA, MutualKNN,
                                        ProcrustesDistance)

__all__ = ["CKNNA", "SVCCA", "DebiasedCKA", "LinearCKA", "MutualKNN", "ProcrustesDistance", "SpaceSimilarity",
           "spearman_over_pairs"]


@hookimpl
def relbench_space_measures():
    """The representational-similarity measures."""
    return list(MEASURES)


@hookimpl
def relbench_task_kinds():
    """The space-similarity kind."""
    return [SpaceSimilarity]
