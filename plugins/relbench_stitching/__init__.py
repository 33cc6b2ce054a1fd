"""The zero-shot stitching task kind and its leaderboard page.

Registered through the same ``relbench`` entry-point group as every other plugin: the
harness knows no task kind by name.
"""

from relbench.api import hookimpl
from relbench_stitching.kind import Combination, Stitching, expand_grid


@hookimpl
def relbench_task_kinds():
    """The zero-shot stitching protocol."""
    return [Stitching]


__all__ = ["Combination", "Stitching", "expand_grid"]
