"""Stitchers that translate the source into the target's absolute space, then apply a
head trained on that space: IRP (zero-shot, through the relative space), and the direct
Procrustes and affine translations fitted on both spaces' parallel anchors."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from relbench.api import deferred_import
from relbench.api import (Bank, Diagnostic, FitContext, Prediction, StitchSide, Stitcher, head_key, head_settings,
                          predict_logits)
from relbench_irp.heads import HeadKind, fit_absolute_head, head_variant
from relbench_irp.maps import AffineMap, Scaling, ScaledAnchors, augmented_pinv, procrustes_join
from relbench_irp.translate import PinvKind, TargetDecoder, centre_normalise, centred_anchors

torch = deferred_import("torch")

_HEAD_DOC = """
        head: ``reference`` (the harness's reference head, shared with the absolute
            baseline; default) or ``mlp`` (two hidden layers, no normalisation, ReLU:
            the heads of IRP §4.2). The paper does not describe its stitching heads.
        epochs: training epochs; None = the modality's reference default (image 10,
            text/word 5). Default None.
        lr: Adam learning rate; None = the modality's reference default (image 1e-4,
            text/word 1e-3). Default None.
        hidden: hidden width of the head. Default 256 (our choice).
        batch_size: training batch size. Default 32 (reference code).
        text_relu: end the ``reference`` head of a non-image modality with a ReLU on
            its logits, as the IRP reference code's text head does. Default False:
            every stitcher decodes with the same head, the harness's reference head
            that the relative decoder and the absolute baseline train (with the
            default, the translating stitchers share the absolute baseline's fitted
            head), so a comparison between stitchers compares their translations
            only. True is the reference code's variant, a different head: it is
            part of the unit's identity and shown on the page as a parameter.
"""


def _with_head_doc(cls: type) -> type:
    """Append the shared head parameters to a stitcher's docstring."""
    cls.__doc__ = cls.__doc__.rstrip() + "\n" + _HEAD_DOC
    return cls


def reconstruction_cosine(Y: torch.Tensor, ids: list[str], truth: Bank) -> float:
    """Mean cosine between translated rows ``Y`` (of samples ``ids``) and the true target
    embeddings of the same samples, matched by id."""
    X = truth.X if list(truth.ids) == list(ids) else _rows(truth, ids)
    return float(torch.nn.functional.cosine_similarity(Y, X.to(Y.dtype), dim=1).mean())


def side_memo(side: StitchSide, key: tuple, build: Callable[[], Any]) -> Any:
    """``build()``, kept in ``side.memo`` under ``key`` (which names what it is and every
    parameter it depends on besides the side's anchors): work that depends on one side
    only is done once for every stitch that side takes part in."""
    if key not in side.memo:
        side.memo[key] = build()
    return side.memo[key]


def memo_on_test_bank(side: StitchSide, key: tuple, build: Callable[[], Any]) -> Any:
    """:func:`side_memo` for work on the side's test bank, keyed by that bank too (a
    side evaluated on another split shares the memo); the entry holds the bank, so its
    ``id`` is not reused while the entry lives."""
    return side_memo(side, (*key, id(side.test)), lambda: (side.test, build()))[1]


def _rows(bank: Bank, ids: list[str]) -> torch.Tensor:
    try:
        return bank.rows(ids)
    except KeyError as exc:
        raise ValueError(f"sample {exc} of the source's test split is missing from target {bank.encoder!r}; "
                         f"the reconstruction cosine needs the same samples in both") from None


@dataclass
class AbsoluteTranslationStitcher(Stitcher):
    """Base of stitchers that train a head on the target's absolute space and translate
    every source into that space (not registered itself). Translations are fitted on
    the anchors only and applied to each test row on its own; the head predicts as
    ``FitContext.evaluation`` says."""

    uses_similarity: ClassVar[bool] = False
    role: ClassVar[str] = "method"
    head: HeadKind = "reference"
    epochs: int | None = None
    lr: float | None = None
    hidden: int = 256
    batch_size: int = 32
    text_relu: bool = False

    def __post_init__(self) -> None:
        if self.epochs is not None and self.epochs <= 0:
            raise ValueError(f"{self.name}: epochs must be positive (or null for the modality default), got {self.epochs}")
        if self.lr is not None and self.lr <= 0:
            raise ValueError(f"{self.name}: lr must be positive (or null for the modality default), got {self.lr}")
        if self.hidden <= 0 or self.batch_size < 2:
            raise ValueError(f"{self.name}: hidden must be positive and batch_size ≥ 2, got {self.hidden}, "
                             f"{self.batch_size}")

    def fit(self, target: StitchSide, ctx: FitContext) -> None:
        """Train the head on the target's absolute training embeddings (its
        normalisation statistics fixed there under ``ctx.evaluation``; one fit per
        target, seed and settings, shared through ``ctx.shared`` with every stitcher
        training the same head) and keep what the translation needs (the target's
        anchors and test bank)."""
        if target.anchors is None:
            raise ValueError(f"{self.name} needs the target's anchors")
        if target.train.labels is None:
            raise ValueError(f"encoder {target.encoder!r}: the training bank has no labels to fit a head on")
        settings = head_settings(ctx.modality, self.epochs, self.lr, self.hidden, self.batch_size)
        key = head_key(target.encoder, head_variant(self.head, ctx.modality, text_relu=self.text_relu), settings,
                       num_classes=ctx.num_classes, seed=ctx.seed, evaluation=ctx.evaluation)
        self._head = ctx.shared.get(key, lambda: fit_absolute_head(
            self.head, target.train.X, target.train.labels, num_classes=ctx.num_classes, modality=ctx.modality,
            seed=ctx.seed, hidden=self.hidden, batch_size=self.batch_size, epochs=self.epochs, lr=self.lr,
            text_relu=self.text_relu, evaluation=ctx.evaluation))
        self._target = target
        self._prepare(target, ctx)

    def _prepare(self, target: StitchSide, ctx: FitContext) -> None:
        """Target-side precomputation (default: none)."""

    def _translate(self, source: StitchSide) -> tuple[torch.Tensor, dict[str, Diagnostic]]:
        """Source test embeddings in target coordinates, and extra diagnostics."""
        raise NotImplementedError

    def predict(self, source: StitchSide) -> Prediction:
        """Translate the source's test bank, decode it, and measure the reconstruction."""
        if source.anchors is None:
            raise ValueError(f"{self.name} needs the source's anchors")
        with torch.no_grad():
            Y, extras = self._translate(source)
        extras["reconstruction_cosine"] = Diagnostic(reconstruction_cosine(Y, source.test.ids, self._target.test),
                                                     "higher")
        return Prediction(logits=predict_logits(self._head, Y), extras=extras)


@_with_head_doc
@dataclass
class IRPStitcher(AbsoluteTranslationStitcher):
    """Inverse relative projection (Maiorca et al. 2024): zero-shot translation into the target's absolute space.

    The head is trained on the target's absolute embeddings. A source is centred on its
    anchor mean and L2-normalised, projected on its (parallel) anchors, decoded with the
    pseudo-inverse of the target's anchors, rescaled to the target's mean norm and
    shifted by the target's anchor mean. The target's anchors are pruned with
    farthest-point sampling (1 − |cos|) to δ, ω times with different seeds, and the ω
    decodings are averaged. Works between any widths.

    Starting anchors: the paper starts from k = d random training samples (d: the
    target's width). The anchors come from the task's selector (``num_anchors`` of
    them, the same rows in every encoder); ``initial_anchors`` chooses how many of them
    pruning starts from: ``task`` = all of them, ``dim`` = the first min(num_anchors, d)
    in the selector's order (a random subset for the random selector, a class-balanced
    one for stratified), so that one task serves targets of several widths with k = d
    each. Tasks that run IRP should set ``num_anchors`` ≥ d of the widest encoder: with
    fewer, every pruned subspace and the anchors' union span less than the target space,
    the components outside it are lost, and the cell reports it in
    ``irp_anchor_shortfall`` (d − k, 0 when the start has at least d anchors).

    Nothing is fitted on the evaluated split: centres, pruning and inverses come from
    the anchors (training rows), the ``train`` mean norm from the target's training
    split, each test row is translated on its own, and the head predicts as
    ``FitContext.evaluation`` says (inductive by default: statistics fixed on its
    training data).

    Extras per cell: ``reconstruction_cosine`` ↑ (translated vs true target test
    embeddings of the same samples), ``condition_number`` ↓ (mean over the pruned
    anchor matrices that are not numerically singular), ``irp_singular_anchor_sets`` ↓
    (how many of the ω were singular, so none is dropped silently), and, describing
    rather than scoring (neutral), ``anchors_kept`` (mean after pruning) and
    ``irp_initial_anchors`` (anchors before pruning); ``irp_anchor_shortfall`` ↓ (how
    many anchors the start had fewer than the target's width d; 0 is the paper's
    protocol).

    Parameters:
        omega: number of anchor subspaces ω. Default 8 (paper, Table 2).
        delta: FPS pruning threshold δ. Default 0.7 (paper: 0.65 MNIST/Fashion-MNIST/
            20 News, 0.70 CIFAR-100 coarse/TREC, 0.75 CIFAR-10/CIFAR-100 fine, 0.8
            cross-modal).
        completion: anchor completion (§3.3): translate the source's canonical basis
            through the anchors and decode with the orthogonal (polar) factor of its
            image, the rotation and reflection the anchors estimate. Default False.
        pinv: ``plain`` Moore–Penrose pseudo-inverse (paper) or ``ridge`` (Tikhonov).
            Default plain.
        ridge_alpha: Tikhonov α for ``ridge``. Default 0.01 (our choice).
        mean_norm: the norm decoded rows get: the mean norm of the centred target
            ``anchors`` (paper: "anchor statistics") or of the centred target ``train``
            embeddings. Default anchors.
        initial_anchors: ``task`` (all the selector's anchors) or ``dim`` (the first
            min(num_anchors, d_target): the paper's k = d). Default task.
"""

    name: ClassVar[str] = "irp"
    omega: int = 8
    delta: float = 0.7
    completion: bool = False
    pinv: PinvKind = "plain"
    ridge_alpha: float = 0.01
    mean_norm: Literal["anchors", "train"] = "anchors"
    initial_anchors: Literal["task", "dim"] = "task"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.initial_anchors not in ("task", "dim"):
            raise ValueError(f"irp: initial_anchors must be 'task' or 'dim', got {self.initial_anchors!r}")
        if self.omega < 1:
            raise ValueError(f"irp: omega (number of anchor subspaces) must be ≥ 1, got {self.omega}")
        if not 0.0 <= self.delta <= 1.0:
            raise ValueError(f"irp: delta must lie in [0, 1] (1 − |cos| distances), got {self.delta}")
        if self.ridge_alpha <= 0:
            raise ValueError(f"irp: ridge_alpha must be positive, got {self.ridge_alpha}")

    def _prepare(self, target: StitchSide, ctx: FitContext) -> None:
        k = len(target.anchors)
        self._k = min(k, target.anchors.shape[1]) if self.initial_anchors == "dim" else k
        At = target.anchors[: self._k]
        scale = None
        if self.mean_norm == "train":
            scale = float((target.train.X - At.mean(dim=0)).norm(dim=1).mean())
        self._decoder = TargetDecoder.build(At, omega=self.omega, delta=self.delta, seed=ctx.seed,
                                            pinv=self.pinv, ridge_alpha=self.ridge_alpha, scale=scale)

    def _translate(self, source: StitchSide) -> tuple[torch.Tensor, dict[str, Diagnostic]]:
        """Decode the source's test rows; its centred anchors are computed once per side
        (``source.memo``). Its centred test rows are not kept: centring and normalising
        them costs milliseconds, and kept on every side they held 19 MB a side (844 MB
        over the full-scale anchor-budget sweep's 45 sides of a selector)."""
        dec = self._decoder
        key = ("irp/centred-anchors", self._k, dec.anchors.dtype)
        centre, Ahat = side_memo(source, key, lambda: self._source_anchors(source))
        X_hat = centre_normalise(source.test.X, centre)
        M = torch.stack(dec.subspace_maps(Ahat)).mean(dim=0)
        Y = dec.decode(X_hat, M, self.completion)
        shortfall = max(0, dec.anchors.shape[1] - self._k)
        return Y, {**dec.diagnostics(), "irp_initial_anchors": Diagnostic(float(self._k), "neutral"),
                   "irp_anchor_shortfall": Diagnostic(float(shortfall), "lower")}

    def _source_anchors(self, source: StitchSide) -> tuple[torch.Tensor, torch.Tensor]:
        """The source's anchor mean and centred, normalised starting anchors."""
        centre, Ahat = centred_anchors(source.anchors[: self._k])
        return centre, Ahat.to(self._decoder.anchors.dtype)


@_with_head_doc
@dataclass
class ProcrustesStitcher(AbsoluteTranslationStitcher):
    """Procrustes translation (Maiorca et al. 2023): orthogonal map fitted on both spaces' parallel anchors.

    Each space is standard-scaled with its anchors' statistics, the narrower one is
    zero-padded, the orthogonal map comes from the SVD of ``Â_sᵀ Â_t``, the padding is
    dropped and the target's scaling undone. Needs both spaces (not zero-shot); the map
    is fitted at prediction time from the source's anchors and the target's anchors kept
    at fit. Extras per cell: ``reconstruction_cosine`` ↑, and, describing the fit
    (neutral), ``procrustes_rank`` (numerical rank of the scaled source anchors) and
    ``procrustes_width`` (the padded width): below the width (fewer anchors than
    dimensions, and one direction fewer once the scaling subtracts the anchor mean) the
    anchors determine the map on their span only, and every source component outside
    it is sent to zero, unlike a full SVD, which would rotate it as rounding happens to
    leave its singular vectors (so the map would depend on the anchors' order).

    Parameters:
        scaling: ``standard`` (per-dimension mean and std of the anchors, reference
            code), ``center`` (anchor mean only) or ``none``. Default standard.
"""

    name: ClassVar[str] = "procrustes"
    version: ClassVar[str] = "2"  # 2: directions at or below the rank cut-off are sent to zero
    needs_both_spaces: ClassVar[bool] = True
    scaling: Scaling = "standard"

    def _prepare(self, target: StitchSide, ctx: FitContext) -> None:
        """Decompose the target's scaled anchors (once per target side)."""
        self._scaled(target, target.anchors.dtype)

    def _translate(self, source: StitchSide) -> tuple[torch.Tensor, dict[str, Diagnostic]]:
        """Join the two sides' decomposed anchors (each computed once per side, in
        ``memo``) and translate the source's test rows, projected once per side."""
        dtype = source.anchors.dtype
        src, tgt = (self._scaled(side, dtype) for side in (source, self._target))
        translate = procrustes_join(src, tgt)
        P = memo_on_test_bank(source, ("procrustes/projected-test", self.scaling, dtype),
                              lambda: src.project(source.test.X))
        return translate.translate_projected(P), {
            "procrustes_rank": Diagnostic(float(translate.rank), "neutral"),
            "procrustes_width": Diagnostic(float(translate.width), "neutral")}

    def _scaled(self, side: StitchSide, dtype: torch.dtype) -> ScaledAnchors:
        """A side's scaled, decomposed anchors in ``dtype`` (once per side)."""
        return side_memo(side, ("procrustes/scaled-anchors", self.scaling, dtype),
                         lambda: ScaledAnchors.fit(side.anchors.to(dtype), self.scaling))


@_with_head_doc
@dataclass
class AffineStitcher(AbsoluteTranslationStitcher):
    """Affine translation: least-squares map with bias fitted on both spaces' parallel anchors.

    ``[A_s, 1] W ≈ A_t`` (minimum-norm least squares), applied to the source's test
    embeddings. Needs both spaces (not zero-shot). Extra per cell:
    ``reconstruction_cosine`` ↑.

    Parameters:
"""

    name: ClassVar[str] = "affine"
    needs_both_spaces: ClassVar[bool] = True

    def _translate(self, source: StitchSide) -> tuple[torch.Tensor, dict[str, Diagnostic]]:
        """Fit ``W`` from the source's pseudo-inverse (computed once per side, in
        ``source.memo``) and translate the source's test rows."""
        pinv = side_memo(source, ("affine/augmented-pinv",), lambda: augmented_pinv(source.anchors))
        translate = AffineMap(pinv @ self._target.anchors.to(source.anchors.dtype))
        return translate(source.test.X), {}
