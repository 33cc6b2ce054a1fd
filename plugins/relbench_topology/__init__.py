"""relbench built-in plugins from García-Castellanos et al., "Relative representations:
topological and geometric perspectives": the robust cosine and topological
densification."""

from relbench.api import hookimpl
from relbench_topology.regularizer import Topological
from relbench_topology.robust import RobustCosine


@hookimpl
def relbench_similarities():
    """The robust cosine."""
    return [RobustCosine]


@hookimpl
def relbench_regularizers():
    """Topological densification."""
    return [Topological]


__all__ = ["RobustCosine", "Topological"]
