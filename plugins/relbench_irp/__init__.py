"""relbench built-in plugins from Maiorca et al. 2024, "Latent space translation via
inverse relative projection" (IRP), and the direct translations it compares against.

* anchor selector ``fps`` (farthest-point sampling, 1 − |cos|);
* stitchers ``irp``, ``procrustes``, ``affine`` (heads on the target's absolute space);
* task kinds ``translation-quality`` (§4.1), ``scale-invariance`` (§4.2),
  ``embedding-norms`` (§4.2, Figure 5) and ``layer-rescaling`` (§3.4, Figure 2).

The pure functions :func:`fps_indices` and :func:`irp_translate` are importable for use
outside the runner.
"""

from relbench.api import hookimpl
from relbench_irp.fps import FPSSelector, fps_indices
from relbench_irp.layers import LayerRescaling
from relbench_irp.norms import EmbeddingNorms
from relbench_irp.quality import TranslationQuality
from relbench_irp.scale import ScaleInvariance
from relbench_irp.stitchers import AffineStitcher, IRPStitcher, ProcrustesStitcher
from relbench_irp.translate import irp_translate

__all__ = ["fps_indices", "irp_translate"]


@hookimpl
def relbench_anchor_selectors():
    """FPS anchors."""
    return [FPSSelector]


@hookimpl
def relbench_stitchers():
    """IRP and the direct translations."""
    return [IRPStitcher, ProcrustesStitcher, AffineStitcher]


@hookimpl
def relbench_task_kinds():
    """Translation quality, scale invariance, embedding norms and layer rescaling."""
    return [TranslationQuality, ScaleInvariance, EmbeddingNorms, LayerRescaling]
