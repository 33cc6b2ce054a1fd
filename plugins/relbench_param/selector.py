"""PARAM anchors: learned convex mixtures of a shared subset, one weight matrix for all banks.

The selector's settings and its loss live here; how the fit rows are divided is
:mod:`relbench_param.fit_rows`, the bank coordinates :mod:`relbench_param.spaces`, and the
training loop with its stops :mod:`relbench_param.training`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar, Literal

from relbench.api import AnchorContext, Anchors, AnchorSelector, deferred_import, seeded_generator, Similarity
from relbench_param.fit_rows import FitRows
from relbench_param.losses import (
    alignment,
    anchor_cohesion,
    barlow_twins_standardised,
    hypersphere,
    jaccard_profiles,
    pairwise_mean,
    soft_jaccard_profiles,
    standardise_columns,
    uniformity,
)
from relbench_param.spaces import BankSpace
from relbench_param.training import MIN_LOGIT_CHANGE, has_converged, mixture_size, train, unmoved_message
from relbench_param.wip import WhitenedInnerProduct
from relbench_relreps.similarities import Cosine

torch = deferred_import("torch")


@dataclass
class PARAMSelector(AnchorSelector):
    """PARAM anchors (Svendsen, Jakobsen et al.): convex mixtures softmax(P/τ)·X_sub of a shared subset, learned across banks.

    One ``P`` (m × k, m = ``num_anchors``) over a seeded subset of k training samples
    gives every bank its anchors ``A_b = softmax_rows(P/τ) · X_sub,b``. ``P`` is trained
    with Adam on minibatches of training samples: the Soft-Jaccard, Barlow Twins and
    alignment–uniformity losses between the relative features of every pair of banks,
    plus anchor cohesion (each anchor a mixture of nearby points, in the whitened space)
    in every bank (formulas in :mod:`relbench_param.losses`). Only ``ctx.banks`` are
    used: the encoder held out for zero-shot evaluation is never seen (a bank listed in
    ``ctx.excluded`` raises). The recipe is ``Anchors(ids=subset, weights=softmax(P/τ))``,
    which any bank — the held-out one included — realises as ``weights @ rows``.

    **Projection.** The relative features P is trained on are those of the grid entry the
    anchors are chosen for: a copy of ``ctx.similarity`` (with its parameters, e.g.
    WIP's λ), fitted on each bank's training rows. Only without one (``ctx.similarity``
    None) do ``similarity``, ``lam`` and ``eps`` below choose it. ``info`` records
    which (``param_similarity``, ``param_similarity_params``, ``param_similarity_source``).

    **Budget.** The paper gives no budget; the authors' earlier code
    (``anchors_in_relreps``, ``experiments/zs_classification.py``) takes 400 full-batch
    Adam steps at lr 1e-2 with τ = 0.2, mixing over the whole bank (10,000 CIFAR-100
    rows). Here an epoch is a pass over the training rows in minibatches (at least one
    Adam step) and ``epochs`` = 400 is the most training allowed.

    **Validation stop** (a relbench choice; the paper has no stopping rule). The fit rows
    (``ctx.ids``, the task's fit part: never its validation or test rows, never a
    held-out encoder) are split, seeded and stratified by class, into P's training rows
    and ``validation_fraction`` of P-validation rows, which P never trains on and the
    shared subset never mixes. A checkpoint of P is scored by the transfer PARAM is for,
    on the visible banks only: for every ordered pair (a, b) of visible banks, a ridge
    classifier on one-hot labels (closed form, :class:`~relbench_param.validation.RidgeClassifier`)
    fitted on bank a's relative features of at most ``validation_fit_rows`` seeded
    training rows and scored (accuracy) on bank b's relative features of the
    P-validation rows; the score is the mean over pairs. Untrained P is scored (recorded
    only), then P every ``eval_every`` epochs and after the last epoch. Training stops
    after ``patience`` evaluations in a row that do not beat the best (``validation``),
    once the per-epoch loss has converged (:func:`has_converged` with ``window`` and
    ``tol``: ``converged``), or at the budget (``budget``). The anchors returned are the
    best-scoring *trained* checkpoint (at least one epoch; the earliest among equal
    scores): even where untrained P scores higher, rows labelled param never report
    untrained anchors. Without a pair of visible banks, without class labels (or with
    ``validation_fraction`` 0) no rows are set aside and the loss test alone stops
    training, at the last epoch's P; ``param_validation`` says which rule ran and why.

    The defaults stop 20 epochs (5 % of the budget) after the best checkpoint. Trained
    to loss convergence (version 2), the held-out encoder's zero-shot accuracy on
    Fashion-MNIST fell from the first epochs on with cosine anchors (0.62 untrained,
    0.42 converged) and plateaued after 25–50 % of the epochs with WIP anchors; with
    these defaults a falling score stops at epoch 25 (keeping epoch 5) and a plateau
    about 20 epochs in. One evaluation (relative features of at most 2,000 + the
    P-validation rows, one 768-wide solve per bank) costs about two Adam steps at the
    task's shape, about 3 % of the five epochs it follows (``benchmarks/param_stop.py``).

    ``info`` holds the loss curve (one mean loss per epoch), the epochs and steps taken
    (``param_epochs``, ``param_steps``: the training's cost), why it stopped
    (``param_stop``), the validation rule (``param_validation``), rows
    (``param_validation_rows``), curve (``[epoch, score]``, epoch 0 untrained) and the
    chosen checkpoint (``param_chosen_epoch``, ``param_chosen_steps``,
    ``param_validation_score``), whether the loss converged, the largest logit change
    and the effective mixture size (:func:`mixture_size`) before and after training. A
    training that leaves P where it started (no epochs, lr 0, no usable batch, a loss
    independent of P) raises ``ValueError`` instead of returning random mixtures.

    **Precision.** P's minibatch loss (its forward pass) runs under
    :func:`relbench.precision.autocast`: at a task's bf16 its matrix products are
    bfloat16, at fp32 nothing changes. P, Adam's state and the validation score stay
    float32. A non-finite loss raises ``ValueError``.

    Parameters:
        subset_size: k, the shared subset's size (all training samples when fewer).
            Default 10,000 (the authors' earlier code mixes over its whole 10,000-row bank).
        temperature: τ in ``softmax(P/τ)``. Default 0.2 (authors' earlier code; the
            paper only says "row-softmax").
        lr: Adam learning rate. Default 1e-2 (authors' earlier code).
        epochs: the most passes over the training samples. Default 400 (the authors'
            earlier code's 400 steps; each epoch here takes one or more).
        window: epochs per smoothing window of the convergence test. Default 10 (ours).
        tol: convergence tolerance: the last window's improvement as a fraction of the
            improvement since the first window. Default 0.02 (ours).
        validation_fraction: share of the fit rows set aside to score P (0 = no
            validation stop). Default 0.2 (ours).
        eval_every: epochs between two scores of P. Default 5 (ours, see above).
        patience: scores in a row without a new best that stop training. Default 4 (ours).
        validation_fit_rows: most training rows the validation classifiers are fitted
            on (seeded subset). Default 2000 (ours).
        validation_ridge: the classifiers' ridge, relative to the mean diagonal of
            ``F_cᵀF_c``. Default 1e-2 (ours).
        batch_size: training samples per step. Default 256 (our choice).
        max_samples: training samples used (seeded subset; 0 = all). Default 5000.
        similarity: the projection used when the grid supplies none: ``wip`` (paper) or
            ``cosine``. Default wip.
        lam: WIP shrinkage λ, when the grid supplies no similarity. Default 0.1 (our choice).
        eps: WIP ridge ε (relative), likewise. Default 1e-6 (authors' earlier code).
        init_std: std of the Gaussian initialisation of P. Default 1.0 (authors' earlier
            code: ``torch.randn``; with τ = 0.2 each anchor starts near a few samples).
        w_jaccard, w_barlow, w_align_uniform, w_cohesion: loss weights. Defaults 1, 1,
            1, 0.1 (our choice; the paper gives none).
        jaccard_temperature: temperature of the Soft-Jaccard activation profiles.
            Default 1.0 (our choice).
        barlow_lambda: Barlow Twins off-diagonal weight. Default 5e-3 (Zbontar et al.).
    """

    name: ClassVar[str] = "param"
    version: ClassVar[str] = "3"
    learns_from_banks: ClassVar[bool] = True
    subset_size: int = 10_000
    temperature: float = 0.2
    lr: float = 1e-2
    epochs: int = 400
    window: int = 10
    tol: float = 0.02
    validation_fraction: float = 0.2
    eval_every: int = 5
    patience: int = 4
    validation_fit_rows: int = 2000
    validation_ridge: float = 1e-2
    batch_size: int = 256
    max_samples: int = 5000
    similarity: Literal["wip", "cosine"] = "wip"
    lam: float = 0.1
    eps: float = 1e-6
    init_std: float = 1.0
    w_jaccard: float = 1.0
    w_barlow: float = 1.0
    w_align_uniform: float = 1.0
    w_cohesion: float = 0.1
    jaccard_temperature: float = 1.0
    barlow_lambda: float = 5e-3

    def __post_init__(self) -> None:
        positive = {"subset_size": self.subset_size, "temperature": self.temperature, "window": self.window,
                    "jaccard_temperature": self.jaccard_temperature, "eval_every": self.eval_every,
                    "patience": self.patience, "validation_fit_rows": self.validation_fit_rows,
                    "validation_ridge": self.validation_ridge}
        bad = [k for k, v in positive.items() if v <= 0]
        if bad:
            raise ValueError(f"param: {', '.join(bad)} must be positive")
        if self.batch_size < 2:
            raise ValueError(f"param: batch_size must be at least 2, got {self.batch_size}")
        non_negative = (self.w_jaccard, self.w_barlow, self.w_align_uniform, self.w_cohesion, self.barlow_lambda,
                        self.init_std, self.max_samples, self.eps, self.epochs, self.lr, self.tol)
        if any(w < 0 for w in non_negative):
            raise ValueError("param: loss weights, barlow_lambda, init_std, max_samples, eps, epochs, lr and tol "
                             "must be ≥ 0")
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"param: lam must lie in [0, 1], got {self.lam}")
        if not 0.0 <= self.validation_fraction < 1.0:
            raise ValueError(f"param: validation_fraction must lie in [0, 1), got {self.validation_fraction}")

    def training_similarity(self, ctx: AnchorContext) -> tuple[Similarity, str]:
        """The (unfitted) projection P is trained with, and where it comes from:
        ``"grid"`` (``ctx.similarity``, of which each bank fits its own copy) or
        ``"selector"`` (this selector's ``similarity``, ``lam`` and ``eps``)."""
        if ctx.similarity is not None:
            return ctx.similarity, "grid"
        if self.similarity == "wip":
            return WhitenedInnerProduct(lam=self.lam, eps=self.eps), "selector"
        return Cosine(), "selector"

    def select(self, ctx: AnchorContext) -> Anchors:
        """Train P on the visible banks until the validation stop, convergence or the
        budget, and return the recipe of the chosen checkpoint."""
        leaked = set(ctx.banks) & set(ctx.excluded)
        if leaked:
            raise ValueError(f"param: the held-out encoder(s) {sorted(leaked)} must not be among the training banks")
        if not ctx.banks:
            raise ValueError("param learns from the banks but none was given (all encoders excluded?)")
        t0 = time.perf_counter()
        gen = seeded_generator(ctx.seed)
        rows = FitRows.draw(ctx, self.subset_size, self.max_samples, self.validation_fraction, gen)
        train_ids, subset_ids = rows.train_ids, rows.subset_ids
        similarity, source = self.training_similarity(ctx)
        spaces = rows.spaces(ctx, similarity)
        P0 = (torch.randn(ctx.num_anchors, len(subset_ids), generator=gen) * self.init_std).to(ctx.device)
        validation = rows.validation(ctx.device, gen, self.validation_fit_rows, self.validation_ridge)
        P = P0.clone().requires_grad_(True)
        run = train(self, spaces, P, len(train_ids), gen, ctx.device, validation)
        change = float((P.detach() - P0).abs().max()) / self.temperature
        if change < MIN_LOGIT_CHANGE:
            raise ValueError(unmoved_message(change, len(run.curve), run.steps, self.lr))
        weights = torch.softmax(P.detach() / self.temperature, dim=1)
        return Anchors(ids=subset_ids, weights=weights, info={
            "param_banks": sorted(ctx.banks),
            "param_similarity": similarity.name,
            "param_similarity_params": similarity.params(),
            "param_similarity_source": source,
            "param_subset_size": len(subset_ids),
            "param_train_samples": len(train_ids),
            "param_epochs": len(run.curve),
            "param_steps": run.steps,
            "param_stop": run.stop,
            "param_validation": rows.rule,
            "param_validation_rows": len(rows.held),
            **run.record(),
            "param_converged": has_converged(run.curve, self.window, self.tol),
            "param_loss_curve": [float(f"{v:.6g}") for v in run.curve],
            "param_loss_first_epoch": run.curve[0],
            "param_loss_last_epoch": run.curve[-1],
            "param_max_logit_change": change,
            "param_mixture_size_initial": mixture_size(torch.softmax(P0 / self.temperature, dim=1)),
            "param_mixture_size": mixture_size(weights),
            "param_seconds": time.perf_counter() - t0})

    def loss(self, spaces: dict[str, BankSpace], idx: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
        """The weighted PARAM loss of one minibatch of training rows.

        Equal to the weighted sum of the pairwise losses of :mod:`relbench_param.losses`
        averaged over bank pairs, plus cohesion averaged over banks; per-bank parts
        (anchors, profiles, standardised features, uniformity) are computed once per bank.
        """
        S = torch.softmax(P / self.temperature, dim=1)
        anchors = {b: S @ space.subset for b, space in spaces.items()}
        feats = {b: space.relative(idx, anchors[b]) for b, space in spaces.items()}
        loss = self.w_cohesion * torch.stack([anchor_cohesion(S, sp.subset, anchors[b])
                                              for b, sp in spaces.items()]).mean()
        if len(feats) < 2:
            return loss
        if self.w_jaccard > 0:
            prof = {b: jaccard_profiles(r, self.jaccard_temperature) for b, r in feats.items()}
            loss = loss + self.w_jaccard * pairwise_mean(soft_jaccard_profiles, prof)
        if self.w_barlow > 0:
            z = {b: standardise_columns(r) for b, r in feats.items()}
            loss = loss + self.w_barlow * pairwise_mean(
                lambda a, b: barlow_twins_standardised(a, b, self.barlow_lambda), z)
        if self.w_align_uniform > 0:
            f = {b: hypersphere(r) for b, r in feats.items()}
            uniform = torch.stack([uniformity(v) for v in f.values()]).mean()
            loss = loss + self.w_align_uniform * (pairwise_mean(alignment, f) + uniform)
        return loss
