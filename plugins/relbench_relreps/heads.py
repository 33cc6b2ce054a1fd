"""The identity-initialised adapter and the relative decoder's training when
regularizers join the loss (the reference head and its per-modality settings live in
:mod:`relbench.training`)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from relbench.interfaces import Regularizer, RegularizerBatch, Similarity
from relbench.training import NonFinite, HeadSettings, train_loop

class Adapter(nn.Module):
    """A trainable ``Linear(d, d)`` initialised to the identity, placed in front of a
    frozen encoder so that regularizers acting on the embeddings have something to move."""

    def __init__(self, dim: int):
        super().__init__()
        self.linear = nn.Linear(dim, dim)
        with torch.no_grad():
            self.linear.weight.copy_(torch.eye(dim))
            self.linear.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


@dataclass
class AdaptedRelative:
    """What training with regularizers leaves behind: the adapter (or None), the
    similarity refitted on the adapted bank, and the head."""

    adapter: Adapter | None
    similarity: Similarity
    head: nn.Module


def train_relative_with_regularizers(
    encoder: str,
    X: torch.Tensor,
    y: torch.Tensor,
    A: torch.Tensor,
    similarity: Similarity,
    regularizers: Sequence[Regularizer],
    settings: HeadSettings,
    num_classes: int,
    seed: int,
    partners: dict[str, torch.Tensor] | None = None,
) -> AdaptedRelative:
    """Train (adapter →) relative projection → head with cross-entropy plus every
    regularizer's loss.

    ``partners`` (encoder → fixed relative training features, rows aligned with ``X``)
    join every batch's :class:`RegularizerBatch` under their own names, for regularizers
    that compare banks.

    Mirrors :func:`relbench.training.train_classifier` (seeded Adam, seeded batches,
    class-balanced when a regularizer asks through ``batch_shape()``; the first one that
    asks wins). With an adapter the similarity is a private copy refitted on the adapted
    training bank at the start of every epoch and once more at the end, so per-bank
    statistics (robust cosine, vq-cosine) follow the adapter as a BatchNorm's running
    statistics would.
    """
    torch.manual_seed(seed)
    device = X.device
    adapter = Adapter(X.shape[1]).to(device) if any(r.needs_adapter for r in regularizers) else None
    sim = copy.deepcopy(similarity) if adapter is not None else similarity
    with torch.no_grad():
        width = sim.project(X[:2], A).shape[1]
    head = settings.build(width, num_classes, device)
    params = list(head.parameters()) + (list(adapter.parameters()) if adapter is not None else [])
    balanced = next((r.batch_shape() for r in regularizers if r.batch_shape() is not None), None)
    y = y.to(device)

    def refit() -> None:
        if adapter is not None:
            with torch.no_grad():
                sim.fit(adapter(X))

    def step_loss(idx: torch.Tensor) -> torch.Tensor:
        idx = idx.to(device)
        emb = adapter(X[idx]) if adapter is not None else X[idx]
        anchors = adapter(A) if adapter is not None else A
        rel = sim.project(emb, anchors)
        loss = nn.functional.cross_entropy(head(rel), y[idx])
        fixed = {name: F[idx] for name, F in (partners or {}).items()}
        batch = RegularizerBatch(labels=y[idx], embeddings={encoder: emb}, relative={encoder: rel, **fixed},
                                 trained=encoder)
        for reg in regularizers:
            term = reg.loss(batch)
            if not torch.isfinite(term):
                raise NonFinite(f"regularizer {reg.name!r} returned a non-finite loss ({float(term)}) for a training "
                                f"batch of encoder {encoder!r}")
            loss = loss + term
        return loss

    head.train()
    train_loop(params, len(X), step_loss, epochs=settings.epochs, lr=settings.lr, batch_size=settings.batch_size,
               seed=seed, labels=y, balanced=balanced, on_epoch=refit)
    refit()
    head.eval()
    if adapter is not None:
        adapter.eval()
    return AdaptedRelative(adapter, sim, head)
