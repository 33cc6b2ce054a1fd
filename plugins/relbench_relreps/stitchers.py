"""Decoders of the relative-representations paper: the relative decoder, the absolute
baseline and the non-stitched reference."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from relbench.interfaces import FitContext, NotAchievable, Prediction, StitchSide, Stitcher
from relbench.training import predict_logits, train_classifier
from relbench.training import head_settings, validate_head_params
from relbench_relreps.heads import train_relative_with_regularizers

_HEAD_PARAMS_DOC = """
    epochs : int | None, default None
        Training epochs; None = the modality's reference default (image 10, text/word 5;
        METHODS.md gives 10–20 and 3–5).
    lr : float | None, default None
        Adam learning rate; None = the modality's reference default (image 1e-4, text/word
        1e-3).
    hidden : int, default 256
        Width of the head's hidden layer(s) (not given in the paper; ours).
    batch_size : int, default 32
        Training batch size (reference code).
"""


def _head_params_doc(cls: type) -> type:
    """Append the shared head-parameter documentation to a stitcher's docstring."""
    cls.__doc__ = cls.__doc__.replace("    (the head parameters below)\n", _HEAD_PARAMS_DOC.lstrip("\n"))
    return cls


def _labels(side: StitchSide) -> torch.Tensor:
    if side.train.labels is None:
        raise ValueError(f"encoder {side.encoder!r}: the training bank has no labels to fit a classifier on")
    return side.train.labels.long()


@_head_params_doc
@dataclass
class RelativeDecoder(Stitcher):
    """Relative decoder (Moschella et al. 2023): a head trained on the target's relative
    representation, fed the source's relative representation at test time.

    Head: the reference ``LayerNorm → Linear → act → InstanceNorm across the batch →
    Linear`` (image: Tanh, one block; text and word: SiLU, two blocks), Adam,
    cross-entropy, deterministic for a seed.

    Regularizers add their losses. When one of them ``needs_adapter``, a trainable
    ``Linear(d, d)`` initialised to the identity sits in front of the frozen target
    embeddings and their anchors, and trains with the head. The adapter belongs to the
    target encoder: it is applied when the target encoder is evaluated on itself, and
    never to another source, even of equal width — a map learnt inside one space means
    nothing in another, and a zero-shot source arrives as it is (its own adapter, from
    its own fit, is not part of this pair; identity-initialised, it stays close to the
    identity anyway).

    Parameters
    ----------
    (the head parameters below)
    """

    name: ClassVar[str] = "relative"
    accepts_regularizers: ClassVar[bool] = True
    epochs: int | None = None
    lr: float | None = None
    hidden: int = 256
    batch_size: int = 32

    def __post_init__(self) -> None:
        validate_head_params(self.epochs, self.lr, self.hidden, self.batch_size)
        self._fitted = None

    def fit(self, target: StitchSide, ctx: FitContext) -> None:
        """Train the head (and adapter, when a regularizer needs one) on the target."""
        if target.similarity is None or target.anchors is None:
            raise ValueError("the relative decoder needs the target's similarity and anchors")
        settings = head_settings(ctx.modality, self.epochs, self.lr, self.hidden, self.batch_size)
        X, y, A = target.train.X, _labels(target), target.anchors
        if ctx.regularizers:
            self._fitted = train_relative_with_regularizers(
                target.encoder, X, y, A, target.similarity, ctx.regularizers, settings, ctx.num_classes, ctx.seed,
                partners=ctx.partners)
            head, adapter = self._fitted.head, self._fitted.adapter
        else:
            with torch.no_grad():
                feats = target.relative("train")
            torch.manual_seed(ctx.seed)
            head = settings.build(feats.shape[1], ctx.num_classes, X.device)
            train_classifier(head, feats, y, epochs=settings.epochs, lr=settings.lr,
                             batch_size=settings.batch_size, seed=ctx.seed)
            adapter = None
        self._head, self._adapter, self._target = head, adapter, target.encoder

    def predict(self, source: StitchSide) -> Prediction:
        """Project the source's test bank on its own anchors and decode."""
        with torch.no_grad():
            if self._adapter is not None and source.encoder == self._target:
                sim = self._fitted.similarity
                feats = sim.project(self._adapter(source.test.X), self._adapter(source.anchors))
            else:
                if source.similarity is None or source.anchors is None:
                    raise ValueError("the relative decoder needs the source's similarity and anchors")
                feats = source.relative("test")
        width = self._head.net[0].normalized_shape[0]
        if feats.shape[1] != width:
            raise NotAchievable(f"the head reads {width} relative features but the source gives {feats.shape[1]}")
        return Prediction(logits=predict_logits(self._head, feats))


@_head_params_doc
@dataclass
class AbsoluteDecoder(Stitcher):
    """Absolute baseline: the same reference head trained on the target's raw
    embeddings. Another encoder's embeddings can be fed only when the widths agree (the
    cell is then evaluated, though the spaces differ); otherwise the cell is not
    achievable.

    Parameters
    ----------
    (the head parameters below)
    """

    name: ClassVar[str] = "absolute"
    uses_similarity: ClassVar[bool] = False
    uses_anchors: ClassVar[bool] = False
    epochs: int | None = None
    lr: float | None = None
    hidden: int = 256
    batch_size: int = 32

    def __post_init__(self) -> None:
        validate_head_params(self.epochs, self.lr, self.hidden, self.batch_size)

    def fit(self, target: StitchSide, ctx: FitContext) -> None:
        """Train the head on the target's absolute training embeddings."""
        settings = head_settings(ctx.modality, self.epochs, self.lr, self.hidden, self.batch_size)
        X = target.train.X
        torch.manual_seed(ctx.seed)
        self._head = settings.build(X.shape[1], ctx.num_classes, X.device)
        train_classifier(self._head, X, _labels(target), epochs=settings.epochs, lr=settings.lr,
                         batch_size=settings.batch_size, seed=ctx.seed)
        self._dim, self._target = X.shape[1], target.encoder

    def predict(self, source: StitchSide) -> Prediction:
        """Decode the source's raw test embeddings (widths must agree)."""
        if source.test.dim != self._dim:
            raise NotAchievable(
                f"the absolute head of {self._target!r} reads {self._dim}-d embeddings; "
                f"{source.encoder!r} gives {source.test.dim}-d")
        return Prediction(logits=predict_logits(self._head, source.test.X))


@_head_params_doc
@dataclass
class NonStitched(AbsoluteDecoder):
    """Non-stitched reference: the absolute head evaluated only on its own encoder (the
    upper bound a stitched decoder is compared with).

    Parameters
    ----------
    (the head parameters below)
    """

    name: ClassVar[str] = "non-stitched"
    diagonal_only: ClassVar[bool] = True

    def predict(self, source: StitchSide) -> Prediction:
        """Decode the target's own test bank; any other source is not achievable."""
        if source.encoder != self._target:
            raise NotAchievable("the non-stitched reference is evaluated only on its own encoder")
        return super().predict(source)
