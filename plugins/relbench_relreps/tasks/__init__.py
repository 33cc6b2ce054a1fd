"""Task kinds of the relative-representations paper: word neighbourhoods (§4.1),
latent similarity as a performance proxy (§4.2), training with relative vs absolute bottlenecks (§4.3)
and reconstruction stitching (§5.1), with fully connected and with convolutional (variational)
autoencoders."""

from relbench_relreps.tasks.conv_reconstruction import ConvReconstruction
from relbench_relreps.tasks.proxy import PerformanceProxy
from relbench_relreps.tasks.reconstruction import Reconstruction
from relbench_relreps.tasks.training import RelativeTraining
from relbench_relreps.tasks.words import WordNeighbourhoods

__all__ = ["ConvReconstruction", "PerformanceProxy", "Reconstruction", "RelativeTraining", "WordNeighbourhoods"]
