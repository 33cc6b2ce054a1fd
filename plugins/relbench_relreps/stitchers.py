"""Decoders of the relative-representations paper: the relative decoder, the absolute
baseline and the non-stitched reference."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from relbench.api import deferred_import
from relbench.api import (Diagnostic, FitContext, NotAchievable, Prediction, StitchSide, Stitcher, fit_reference_head,
                          head_key, head_settings, predict_logits, train_classifier, validate_head_params)
from relbench_relreps.heads import ADAPTER_DECAY, AdaptedRelative, train_relative_with_regularizers

torch = deferred_import("torch")

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
    cross-entropy, deterministic for a seed; it predicts inductively unless the
    protocol asks for transductive evaluation (``FitContext.evaluation``).

    Regularizers add their losses. When one of them ``needs_adapter``, every encoder
    gets its own trainable adapter (:class:`~relbench_relreps.adapter.Adapter`: an affine
    map started at the identity, decayed towards it with weight ``adapter_decay``) in
    front of its frozen embeddings and anchors, trained with its own head as its own fit
    trains it (García-Castellanos et al. fine-tune each encoder with its own decoder,
    then stitch). A stitched pair feeds the source through the *source's* adapter and
    its similarity refitted on the adapted source training bank, into the *target's*
    head. The source's adapter is trained exactly as the source's own fit would train it
    (same regularizers, settings, seed; partner banks, for regularizers that compare
    banks: every encoder of the unit but the source; head settings: the target's
    modality, as a side does not name its own) and cached in ``source.memo``, so each
    encoder's adapter is trained once per side. Training it reads the source's own
    training bank and labels (and, for a regularizer that compares banks, the other
    encoders' training relative features), never the target's head or any test data.

    Cells with an adapter report ``adapter_drift`` (``‖W − I‖_F / ‖I‖_F`` of the adapter
    the source went through) and the regularizers' measured scales (topological
    densification's ``beta_before`` / ``beta_after`` of the target's fit, in absolute
    units).

    Parameters
    ----------
    (the head parameters below)
    adapter_decay : float, default 0.1
        Weight of the adapter's decay towards the identity, ``adapter_decay · (‖W −
        I‖²_F + ‖b‖²)`` added to the training loss (our choice; the authors fine-tune
        the encoder itself, with AdamW weight decay 0.01 and a small layer-wise learning
        rate). Must be positive: an unconstrained adapter can drift arbitrarily far from
        the space it adapts. With 0.1, topological densification on the offline suite's
        1280-d Fashion-MNIST CNN embeddings (40 steps at lr 1e-3) leaves ``adapter_drift``
        ≈ 0.04; 0.001 lets it reach 0.25, 1.0 holds it at 0.013.
    """

    name: ClassVar[str] = "relative"
    version: ClassVar[str] = "2"
    accepts_regularizers: ClassVar[bool] = True
    role: ClassVar[str] = "method"
    epochs: int | None = None
    lr: float | None = None
    hidden: int = 256
    batch_size: int = 32
    adapter_decay: float = ADAPTER_DECAY

    def __post_init__(self) -> None:
        validate_head_params(self.epochs, self.lr, self.hidden, self.batch_size)
        if not self.adapter_decay > 0:
            raise ValueError(f"adapter_decay must be positive (the adapter's decay towards the identity), "
                             f"got {self.adapter_decay}")
        self._fitted: AdaptedRelative | None = None

    def fit(self, target: StitchSide, ctx: FitContext) -> None:
        """Train the head (and the target's adapter, when a regularizer needs one) on the target."""
        _check_relative(target)
        self._fitted = None
        self._settings = head_settings(ctx.modality, self.epochs, self.lr, self.hidden, self.batch_size)
        self._ctx, self._target = ctx, target.encoder
        if ctx.regularizers:
            self._pool = {**ctx.partners, target.encoder: target.relative("train")} if ctx.partners else {}
            self._ids = target.train.ids
            self._fitted = self._own_training(target, dict(ctx.partners))
            self._head = self._fitted.head
            return
        feats = target.relative("train")
        torch.manual_seed(ctx.seed)
        self._head = self._settings.build(feats.shape[1], ctx.num_classes, target.train.X.device)
        train_classifier(self._head, feats, _labels(target), epochs=self._settings.epochs, lr=self._settings.lr,
                         batch_size=self._settings.batch_size, seed=ctx.seed, evaluation=ctx.evaluation)

    def _own_training(self, side: StitchSide, partners: dict[str, torch.Tensor]) -> AdaptedRelative:
        """``side``'s own adapter, refitted similarity and head, trained as its own fit
        trains them; kept in ``side.memo`` under everything the result depends on
        besides the side itself (whose banks, anchors and similarity are fixed)."""
        ctx = self._ctx
        key = ("relative-decoder/own-training", repr(sorted(self.params().items())),
               tuple((r.name, repr(sorted(r.params().items()))) for r in ctx.regularizers),
               ctx.seed, ctx.num_classes, ctx.modality, ctx.evaluation, tuple(sorted(partners)))
        if key not in side.memo:
            side.memo[key] = train_relative_with_regularizers(
                side.encoder, side.train.X, _labels(side), side.anchors, side.similarity, ctx.regularizers,
                self._settings, ctx.num_classes, ctx.seed, partners=dict(sorted(partners.items())),
                adapter_decay=self.adapter_decay, evaluation=ctx.evaluation)
        return side.memo[key]

    def _source_training(self, source: StitchSide) -> AdaptedRelative:
        """The source's own training: the target's when the source is the target."""
        if source.encoder == self._target:
            return self._fitted
        _check_relative(source)
        partners = {name: F for name, F in self._pool.items() if name != source.encoder}
        if partners and source.train.ids != self._ids:
            raise ValueError(f"encoder {source.encoder!r}: its training rows are not in the target's order, so the "
                             f"partner banks cannot be aligned with them for its own adapter's training")
        return self._own_training(source, partners)

    def predict(self, source: StitchSide) -> Prediction:
        """Project the source's test bank on its own anchors (through its own adapter
        when the decoder trained with one) and decode with the target's head."""
        extras = {}
        if self._fitted is not None and self._fitted.adapter is not None:
            own = self._source_training(source)
            feats = own.relative(source.test.X, source.anchors)
            extras["adapter_drift"] = Diagnostic(own.adapter.drift(), "neutral")
            for reg in self._fitted.regularizers:
                extras.update(reg.diagnostics())
        else:
            _check_relative(source)
            feats = source.relative("test")
        width = self._head.net[0].normalized_shape[0]
        if feats.shape[1] != width:
            raise NotAchievable(f"the head reads {width} relative features but the source gives {feats.shape[1]}")
        return Prediction(logits=predict_logits(self._head, feats), extras=extras)


def _check_relative(side: StitchSide) -> None:
    if side.similarity is None or side.anchors is None:
        raise ValueError(f"the relative decoder needs encoder {side.encoder!r}'s similarity and anchors")


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
    role: ClassVar[str] = "reference"
    epochs: int | None = None
    lr: float | None = None
    hidden: int = 256
    batch_size: int = 32

    def __post_init__(self) -> None:
        validate_head_params(self.epochs, self.lr, self.hidden, self.batch_size)

    def fit(self, target: StitchSide, ctx: FitContext) -> None:
        """Train the head on the target's absolute training embeddings (one fit per
        target, seed and settings, shared through ``ctx.shared`` with every stitcher
        training the same head)."""
        settings = head_settings(ctx.modality, self.epochs, self.lr, self.hidden, self.batch_size)
        X = target.train.X
        key = head_key(target.encoder, "reference", settings, num_classes=ctx.num_classes, seed=ctx.seed,
                       evaluation=ctx.evaluation)
        self._head = ctx.shared.get(key, lambda: fit_reference_head(
            X, _labels(target), settings, num_classes=ctx.num_classes, seed=ctx.seed, evaluation=ctx.evaluation))
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
    role: ClassVar[str] = "own-head"

    def predict(self, source: StitchSide) -> Prediction:
        """Decode the target's own test bank; any other source is not achievable."""
        if source.encoder != self._target:
            raise NotAchievable("the non-stitched reference is evaluated only on its own encoder")
        return super().predict(source)
