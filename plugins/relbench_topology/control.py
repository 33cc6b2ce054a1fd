"""The same-budget control for regularizers that train an adapter: everything
topological densification changes in the training but its loss term."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from relbench.api import deferred_import, Regularizer, RegularizerBatch
from relbench_topology.regularizer import Topological

torch = deferred_import("torch")


@dataclass
class AdapterControl(Regularizer):
    """The same-budget control for regularizers that train an adapter: it adds no loss
    term, but asks for what :class:`~relbench_topology.regularizer.Topological` asks for,
    so the relative decoder trains the same identity-initialised adapter in front of the
    frozen encoder (:attr:`needs_adapter`, with the decoder's decay towards the identity)
    on the same class-balanced batches (:meth:`batch_shape`), with the head's loss only.

    Compared with a regularizer that trains an adapter, the two arms then differ in that
    regularizer's loss term alone; compared with no regularizer at all, they would also
    differ in the adapter and the batches.

    Its loss is an exact zero that still carries the trained bank's graph
    (:attr:`adds_loss` is False: the conformance kit and the training check the zero).

    Parameters
    ----------
    classes_per_batch : int, default 8
        Classes per class-balanced batch (topological densification's default).
    samples_per_class : int, default 16
        Samples per class in a batch (topological densification's default).
    """

    name: ClassVar[str] = "adapter"
    needs_adapter: ClassVar[bool] = True
    adds_loss: ClassVar[bool] = False
    classes_per_batch: int = Topological.classes_per_batch
    samples_per_class: int = Topological.samples_per_class

    def __post_init__(self) -> None:
        for key in ("classes_per_batch", "samples_per_class"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be at least 1, got {getattr(self, key)}")

    def batch_shape(self) -> tuple[int, int]:
        """``(classes_per_batch, samples_per_class)``."""
        return self.classes_per_batch, self.samples_per_class

    def loss(self, batch: RegularizerBatch) -> torch.Tensor:
        """Zero, times the trained bank's embeddings (every embedded bank's when the
        batch names none), so the zero is a tensor of the training's graph."""
        banks = [batch.trained] if batch.trained else list(batch.embeddings)
        zero = batch.labels.new_zeros((), dtype=torch.float32)
        return sum((0 * batch.embeddings[b].float().sum() for b in banks if b in batch.embeddings), zero)
