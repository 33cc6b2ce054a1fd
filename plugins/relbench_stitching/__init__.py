"""The zero-shot stitching task kind and its leaderboard page, and the ``symmetry`` kind
(which symmetry group relates two encoders' spaces).

Registered through the same ``relbench`` entry-point group as every other plugin: the
harness knows no task kind by name.
"""

from relbench.api import hookimpl
from relbench_stitching.kind import Combination, Stitching, expand_grid
from relbench_stitching.symmetry import Symmetry


@hookimpl
def relbench_task_kinds():
    """The zero-shot stitching protocol and the symmetry-group fits."""
    return [Stitching, Symmetry]


__all__ = ["Combination", "Stitching", "Symmetry", "expand_grid"]
