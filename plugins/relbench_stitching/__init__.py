"""The zero-shot stitching task kind and its leaderboard page, the ``anchor-budget`` kind
(stitching swept over nested anchor budgets) and the ``symmetry`` kind (which symmetry
group relates two encoders' spaces).

Registered through the same ``relbench`` entry-point group as every other plugin: the
harness knows no task kind by name.
"""

from relbench.api import hookimpl
from relbench_stitching.budget import AnchorBudget
from relbench_stitching.kind import Combination, Stitching, expand_grid
from relbench_stitching.symmetry import Symmetry


@hookimpl
def relbench_task_kinds():
    """The zero-shot stitching protocol, its anchor-budget sweep and the symmetry-group fits."""
    return [Stitching, AnchorBudget, Symmetry]


__all__ = ["AnchorBudget", "Combination", "Stitching", "Symmetry", "expand_grid"]
