"""relbench built-in plugins from García-Castellanos et al., "Relative representations:
topological and geometric perspectives": the robust cosine and topological
densification, with its same-budget control (the adapter and batches it trains with,
without its loss term), and the task kind ``death-times`` (the poster's distributions of
0-dim death times without and with densification)."""

from relbench.api import hookimpl
from relbench_topology.control import AdapterControl
from relbench_topology.kind import DeathTimes
from relbench_topology.regularizer import Topological
from relbench_topology.robust import RobustCosine


@hookimpl
def relbench_similarities():
    """The robust cosine."""
    return [RobustCosine]


@hookimpl
def relbench_regularizers():
    """Topological densification and its same-budget control."""
    return [Topological, AdapterControl]


@hookimpl
def relbench_task_kinds():
    """Death-time distributions without and with densification."""
    return [DeathTimes]


__all__ = ["AdapterControl", "DeathTimes", "RobustCosine", "Topological"]
