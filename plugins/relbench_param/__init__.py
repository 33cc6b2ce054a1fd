"""relbench built-in plugins from PARAM (Svendsen, Jakobsen et al., "Parameterized anchor
representations via adaptive matrices").

* similarity ``wip`` (whitened inner product with a shrinkage covariance);
* anchor selector ``param`` (learned convex-mixture anchors shared by every bank);
* anchor selector ``class-parallel`` (anchors matched by class, not by sample, across
  spaces: the Discussion's "class-level parallel sets");
* regularizers ``soft-jaccard``, ``barlow-twins``, ``align-uniform`` (the pairwise
  PARAM losses, for heads trained on several banks).

The losses themselves are pure functions in :mod:`relbench_param.losses`.
"""

from relbench.api import hookimpl
from relbench_param.class_parallel import ClassParallelAnchors
from relbench_param.regularizers import AlignUniformRegularizer, BarlowTwinsRegularizer, SoftJaccardRegularizer
from relbench_param.selector import PARAMSelector
from relbench_param.wip import WhitenedInnerProduct


@hookimpl
def relbench_similarities():
    """The whitened inner product."""
    return [WhitenedInnerProduct]


@hookimpl
def relbench_anchor_selectors():
    """Learned mixture anchors and class-level parallel anchors."""
    return [PARAMSelector, ClassParallelAnchors]


@hookimpl
def relbench_regularizers():
    """The pairwise PARAM losses."""
    return [SoftJaccardRegularizer, BarlowTwinsRegularizer, AlignUniformRegularizer]
