"""The identity-initialised adapter and the relative decoder's training when
regularizers join the loss (the reference head and its per-modality settings live in
:mod:`relbench.training`)."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from relbench.api import deferred_import
from relbench.api import (HeadSettings, NonFinite, Regularizer, RegularizerBatch, Similarity, autocast, finish_training,
                          minibatches, seeded_generator, train_loop)

torch = deferred_import("torch")

if TYPE_CHECKING:
    from relbench_relreps.adapter import Adapter

#: the adapter's default decay weight towards the identity (see
#: :class:`~relbench_relreps.adapter.Adapter`)
ADAPTER_DECAY = 0.1
#: at most this many of the first epoch's batches are shown to a regularizer's
#: ``prepared`` hook (to measure scales such as topological densification's β)
CALIBRATION_BATCHES = 64


@dataclass
class AdaptedRelative:
    """What training with regularizers leaves behind: the adapter (or None), the
    similarity refitted on the adapted bank, the head, and the regularizers as
    prepared for this training (their measured scales: ``diagnostics()``)."""

    adapter: Adapter | None
    similarity: Similarity
    head: torch.nn.Module
    regularizers: list[Regularizer] = field(default_factory=list)

    def relative(self, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """Relative features of ``X`` on anchors ``A`` of this encoder, through its
        adapter and refitted similarity."""
        with torch.no_grad():
            if self.adapter is None:
                return self.similarity.project(X, A)
            return self.similarity.project(self.adapter(X), self.adapter(A))


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
    adapter_decay: float = ADAPTER_DECAY,
    evaluation: str = "inductive",
) -> AdaptedRelative:
    """Train (adapter →) relative projection → head with cross-entropy plus every
    regularizer's loss (plus the adapter's decay towards the identity).

    ``partners`` (encoder → fixed relative training features, rows aligned with ``X``)
    join every batch's :class:`RegularizerBatch` under their own names, for regularizers
    that compare banks.

    Mirrors :func:`relbench.training.train_classifier` (seeded Adam, seeded batches,
    class-balanced when a regularizer asks through ``batch_shape()``; the first one that
    asks wins). With an adapter the similarity is a private copy refitted on the adapted
    training bank at the start of every epoch and once more at the end, so per-bank
    statistics (robust cosine, vq-cosine) follow the adapter as a BatchNorm's running
    statistics would (a similarity without per-bank statistics, whose ``fit`` is the
    interface's no-op, is not refitted: the adapted bank would be computed for nothing).
    At the end the head's normalisation statistics are fixed on the final relative
    training features (:func:`relbench.training.finish_training` with ``evaluation``).

    Each step sends the batch's rows and the anchors through the adapter in one matrix
    product (one pass over ``W`` forwards and one backwards instead of two), and the
    adapter's decay enters as its gradient, added in place after each backward
    (:meth:`~relbench_relreps.adapter.Adapter.decaying`). The steps (adapter, projection, head, regularizers) run
    at the task's precision (:func:`relbench.precision.autocast`: bfloat16 matrix
    products under ``bf16``, nothing changes under ``fp32``); the β calibration, the
    refits and the final features stay fp32.

    A regularizer with a ``prepared(batches, steps)`` method gets the batches of the
    first epoch (at most :data:`CALIBRATION_BATCHES`, computed before any step, through
    the identity adapter) and the number of optimiser steps, and returns the copy that
    trains (topological densification measures its β there).

    Raises ``ValueError`` when a regularizer's loss has no trainable path (it would add
    a constant and train nothing), e.g. a term on the relative features of a frozen
    encoder without an adapter; a control that declares it adds no loss
    (``adds_loss`` False) needs none, but is refused when its loss is not exactly zero.
    """
    torch.manual_seed(seed)
    device = X.device
    from relbench_relreps.adapter import Adapter

    adapter = Adapter(X.shape[1]).to(device) if any(r.needs_adapter for r in regularizers) else None
    sim = copy.deepcopy(similarity) if adapter is not None else similarity
    with torch.no_grad():
        width = sim.project(X[:2], A).shape[1]
    head = settings.build(width, num_classes, device)
    params = list(head.parameters()) + (list(adapter.parameters()) if adapter is not None else [])
    balanced = next((r.batch_shape() for r in regularizers if r.batch_shape() is not None), None)
    y = y.to(device)

    refits = adapter is not None and type(sim).fit is not Similarity.fit
    rows = torch.cat([X, A]) if adapter is not None else None  # a batch's rows and the anchors, adapted together
    anchor_rows = torch.arange(len(X), len(X) + len(A), device=device)

    def refit() -> None:
        if refits:
            with torch.no_grad():
                sim.fit(adapter(X))

    def batch_of(idx: torch.Tensor) -> RegularizerBatch:
        idx = idx.to(device)
        if adapter is not None:
            adapted = adapter(rows[torch.cat([idx, anchor_rows])])
            emb, rel = adapted[:len(idx)], sim.project(adapted[:len(idx)], adapted[len(idx):])
        else:
            emb, rel = X[idx], sim.project(X[idx], A)
        fixed = {name: F[idx] for name, F in (partners or {}).items()}
        return RegularizerBatch(labels=y[idx], embeddings={encoder: emb}, relative={encoder: rel, **fixed},
                                trained=encoder)

    refit()
    first_epoch = [idx for idx in minibatches(len(X), settings.batch_size, seeded_generator(seed), y.cpu(), balanced)
                   if len(idx) >= 2]
    steps = settings.epochs * len(first_epoch)
    if regularizers:
        with torch.no_grad():
            shown = [batch_of(idx) for idx in first_epoch[:CALIBRATION_BATCHES]]
        regularizers = [r.prepared(shown, steps) for r in regularizers]

    def step_loss(idx: torch.Tensor) -> torch.Tensor:
        with autocast(device):
            batch = batch_of(idx)
            loss = torch.nn.functional.cross_entropy(head(batch.relative[encoder]), batch.labels)
            return sum((_checked(reg, reg.loss(batch), adapter, encoder) for reg in regularizers), loss)

    head.train()
    with adapter.decaying(adapter_decay) if adapter is not None else contextlib.nullcontext():
        train_loop(params, len(X), step_loss, epochs=settings.epochs, lr=settings.lr, batch_size=settings.batch_size,
                   seed=seed, labels=y, balanced=balanced, on_epoch=refit)
    refit()
    if adapter is not None:
        adapter.eval()
    fitted = AdaptedRelative(adapter, sim, head, list(regularizers))
    finish_training(head, fitted.relative(X, A), evaluation)
    return fitted


def _checked(reg: Regularizer, term: torch.Tensor, adapter: Adapter | None, encoder: str) -> torch.Tensor:
    """A regularizer's loss for one batch, refused when it trains nothing or is not finite.

    A control that declares it adds no loss (``adds_loss`` False) is meant to train
    nothing itself: its loss needs no trainable path, but must be exactly zero."""
    if not type(reg).adds_loss:
        if term.item() != 0.0:
            raise ValueError(f"regularizer {reg.name!r} declares adds_loss = False but returned a loss of "
                             f"{term.item()} for a training batch of encoder {encoder!r}: a control must add nothing "
                             f"(return an exact zero, or declare adds_loss = True)")
        return term
    if not term.requires_grad:
        raise ValueError(
            f"regularizer {reg.name!r} trains nothing for encoder {encoder!r}: its loss has no path to a "
            f"trainable parameter (the encoder is frozen, and "
            f"{'the terms it reads do not pass through the adapter' if adapter is not None else 'no adapter was inserted because no regularizer declares needs_adapter'}), "
            f"so it would add a constant and the row would silently report the unregularized decoder. Make "
            f"the regularizer act on the adapted embeddings or the relative features of the trained bank "
            f"(and declare needs_adapter), or drop it from the grid.")
    if not torch.isfinite(term):
        raise NonFinite(f"regularizer {reg.name!r} returned a non-finite loss ({float(term)}) for a training "
                        f"batch of encoder {encoder!r}")
    return term
