"""The reference decoder heads, their per-modality defaults, the identity-initialised
adapter, and the training loop used when regularizers join the loss."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from relbench.interfaces import Regularizer, RegularizerBatch, Similarity
from relbench.training import ReferenceHead, minibatches, seeded_generator

#: reference-code head settings per modality: (activation, blocks, lr, epochs).
#: Vision: Tanh, one block, Adam 1e-4; text: SiLU, two blocks, Adam 1e-3 (METHODS.md).
#: Epochs: the low ends of the 10–20 (vision) and 3–5 (text) ranges, to keep CPU runs short.
MODALITY_DEFAULTS = {
    "image": ("tanh", 1, 1e-4, 10),
    "text": ("silu", 2, 1e-3, 5),
    "word": ("silu", 2, 1e-3, 5),
}


@dataclass
class HeadSettings:
    """Resolved head hyper-parameters for one fit."""

    activation: str
    blocks: int
    lr: float
    epochs: int
    hidden: int
    batch_size: int

    def build(self, in_dim: int, num_classes: int, device: torch.device) -> nn.Module:
        """A fresh :class:`ReferenceHead` on ``device`` (seed the RNG before calling)."""
        return ReferenceHead(in_dim, self.hidden, num_classes, self.activation, self.blocks).to(device)


def resolve(modality: str, epochs: int | None, lr: float | None, hidden: int, batch_size: int) -> HeadSettings:
    """The modality's reference settings, with explicit ``epochs``/``lr`` taking precedence."""
    act, blocks, d_lr, d_epochs = MODALITY_DEFAULTS.get(modality, MODALITY_DEFAULTS["text"])
    return HeadSettings(act, blocks, d_lr if lr is None else lr, d_epochs if epochs is None else epochs,
                        hidden, batch_size)


def validate_head_params(epochs: int | None, lr: float | None, hidden: int, batch_size: int) -> None:
    """Raise ``ValueError`` for non-positive head parameters."""
    if epochs is not None and epochs <= 0:
        raise ValueError(f"epochs must be positive (or null for the modality default), got {epochs}")
    if lr is not None and lr <= 0:
        raise ValueError(f"lr must be positive (or null for the modality default), got {lr}")
    if hidden <= 0:
        raise ValueError(f"hidden must be positive, got {hidden}")
    if batch_size < 2:
        raise ValueError(f"batch_size must be at least 2, got {batch_size}")


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
) -> AdaptedRelative:
    """Train (adapter →) relative projection → head with cross-entropy plus every
    regularizer's loss.

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
    opt = torch.optim.Adam(params, lr=settings.lr)
    balanced = next((r.batch_shape() for r in regularizers if r.batch_shape() is not None), None)
    gen = seeded_generator(seed)
    y = y.to(device)

    def refit() -> None:
        if adapter is not None:
            with torch.no_grad():
                sim.fit(adapter(X))

    head.train()
    for _ in range(settings.epochs):
        refit()
        for idx in minibatches(len(X), settings.batch_size, gen, y, balanced):
            idx = idx.to(device)
            if len(idx) < 2:
                continue
            emb = adapter(X[idx]) if adapter is not None else X[idx]
            anchors = adapter(A) if adapter is not None else A
            rel = sim.project(emb, anchors)
            logits = head(rel)
            loss = nn.functional.cross_entropy(logits, y[idx])
            batch = RegularizerBatch(labels=y[idx], embeddings={encoder: emb}, relative={encoder: rel})
            for reg in regularizers:
                loss = loss + reg.loss(batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    refit()
    head.eval()
    if adapter is not None:
        adapter.eval()
    return AdaptedRelative(adapter, sim, head)
