"""relbench built-in plugins from Moschella et al. 2023, "Relative representations
enable zero-shot latent space communication": relative projections, anchor selectors,
relative/absolute decoders and the paper's non-classification task kinds."""

from relbench.api import hookimpl
from relbench_relreps.selectors import MismatchedAnchors, OODAnchors, ParallelAnchors, RandomAnchors, StratifiedAnchors
from relbench_relreps.similarities import L1, Angular, Concat, Cosine, Euclidean
from relbench_relreps.stitchers import AbsoluteDecoder, NonStitched, RelativeDecoder
from relbench_relreps.tasks import (ConvReconstruction, PerformanceProxy, Reconstruction, RelativeTraining,
                                    WordNeighbourhoods)
from relbench_relreps.vq import VQCosine


@hookimpl
def relbench_similarities():
    """Cosine, vq-cosine, euclidean, l1, angular and their concatenation."""
    return [Cosine, VQCosine, Euclidean, L1, Angular, Concat]


@hookimpl
def relbench_anchor_selectors():
    """Random, stratified, parallel and out-of-domain anchors, and the mismatched null."""
    return [RandomAnchors, StratifiedAnchors, ParallelAnchors, OODAnchors, MismatchedAnchors]


@hookimpl
def relbench_stitchers():
    """The relative decoder, the absolute baseline and the non-stitched reference."""
    return [RelativeDecoder, AbsoluteDecoder, NonStitched]


@hookimpl
def relbench_task_kinds():
    """Word neighbourhoods, reconstruction stitching (fully connected and convolutional
    autoencoders), the performance proxy and relative training."""
    return [WordNeighbourhoods, Reconstruction, ConvReconstruction, PerformanceProxy, RelativeTraining]


__all__ = ["L1", "AbsoluteDecoder", "Angular", "Concat", "ConvReconstruction", "Cosine", "Euclidean",
           "MismatchedAnchors", "NonStitched", "OODAnchors", "ParallelAnchors", "PerformanceProxy", "RandomAnchors",
           "Reconstruction", "RelativeDecoder", "RelativeTraining", "StratifiedAnchors", "VQCosine",
           "WordNeighbourhoods"]
