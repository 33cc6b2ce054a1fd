"""PARAM anchors: learned convex mixtures of a shared subset, one weight matrix for all banks."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch

from relbench.interfaces import AnchorContext, AnchorSelector, Anchors, Bank, Similarity
from relbench.training import minibatches, seeded_generator
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
from relbench_param.wip import WhitenedInnerProduct
from relbench_relreps.similarities import Cosine

#: training counts as not having moved P when no mixture logit ``P/τ`` changed by more
#: than this (a relative change of every mixture weight below about 0.1 %)
MIN_LOGIT_CHANGE = 1e-3


def inner_product(X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """``X Aᵀ``: WIP on rows that are already whitened."""
    return X @ A.t()


@dataclass
class BankSpace:
    """One bank as P's training sees it: its training rows and the shared subset's rows,
    in the coordinates the projection works in, and the projection.

    WIP is an inner product after the affine whitening ``z = L⁻¹(x − μ)``; since the
    rows of ``S = softmax(P/τ)`` sum to one, the whitened anchors are ``S Z_sub``. Rows
    are whitened once and expressed in an orthonormal basis of the subset's span (at
    most ``min(k, d)`` coordinates), which leaves every inner product with an anchor
    unchanged, so a step costs the same at any embedding width. Any other similarity is
    used as it is, fitted on the bank's training rows: ``rel = project(X[idx], S X_sub)``.
    Anchor cohesion is measured on ``subset``: whitened rows for WIP, raw rows otherwise.
    """

    train: torch.Tensor
    subset: torch.Tensor
    project: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

    @classmethod
    def build(cls, bank: Bank, train_ids: list[str], subset_ids: list[str], similarity: Similarity,
              device: torch.device) -> BankSpace:
        """Fit a copy of ``similarity`` on the bank's training rows and prepare its coordinates."""
        X = bank.rows(train_ids).to(device)
        Xs = bank.rows(subset_ids).to(device)
        sim = copy.deepcopy(similarity)
        sim.fit(X)
        if isinstance(sim, WhitenedInnerProduct):
            Z, Zs = sim.whiten(X), sim.whiten(Xs)
            basis = torch.linalg.qr(Zs.t()).Q
            return cls(Z @ basis, Zs @ basis, inner_product)
        return cls(X, Xs, sim.project)

    def relative(self, idx: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
        """Relative features of training rows ``idx`` w.r.t. ``anchors = S · subset``."""
        return self.project(self.train.index_select(0, idx), anchors)


def mixture_size(weights: torch.Tensor) -> float:
    """Effective number of points per anchor: the mean over anchors (rows) of
    ``exp(entropy(w_i))``, the perplexity of the mixture (1 for a single point, k for
    a uniform mixture of k)."""
    entropy = -(weights * weights.clamp_min(1e-30).log()).sum(dim=1)
    return float(entropy.exp().mean())


def has_converged(curve: list[float], window: int, tol: float) -> bool:
    """Whether a per-epoch loss curve has flattened.

    The loss is smoothed by averaging over windows of ``window`` epochs; training has
    converged when the last window improved on the one before by at most ``tol`` times
    the improvement from the first window to the last (a loss that stopped falling, or
    rises, has converged too). The change is relative to the distance travelled, not
    to the loss value, which has no natural zero (the uniformity term is negative).
    Needs at least ``2 · window`` epochs.
    """
    if len(curve) < 2 * window:
        return False
    first, previous, last = (sum(part) / window for part in
                             (curve[:window], curve[-2 * window:-window], curve[-window:]))
    return previous - last <= tol * abs(first - last)


def unmoved_message(change: float, epochs: int, steps: int, lr: float) -> str:
    """The one-paragraph error of a training that left P where it started."""
    return (f"param: training did not move the anchor mixture weights (largest change of a logit P/τ: {change:.2e}, "
            f"below {MIN_LOGIT_CHANGE:g}) after {epochs} epoch(s) and {steps} Adam step(s) at lr={lr:g}. The anchors "
            f"would be the random initial mixtures, and rows labelled 'param' would report untrained anchors. Give "
            f"the selector a budget (epochs ≥ 1, lr > 0), at least two training samples per batch, and a loss that "
            f"depends on P (two or more banks, or w_cohesion > 0).")


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

    **Budget and convergence.** The paper gives no budget; the authors' earlier code
    (``anchors_in_relreps``, ``experiments/zs_classification.py``) takes 400 full-batch
    Adam steps at lr 1e-2 with τ = 0.2, mixing over the whole bank (10,000 CIFAR-100
    rows). Here an epoch is a pass over the training rows in minibatches (at least one
    Adam step), ``epochs`` = 400 is the most training allowed, and training stops earlier
    once the per-epoch loss has converged (:func:`has_converged` with ``window`` and
    ``tol``). ``info`` holds the loss curve (one mean loss per epoch), the epochs and
    steps taken, whether it converged, the largest logit change and the effective mixture
    size (:func:`mixture_size`) before and after training. A training that leaves P where
    it started (no epochs, lr 0, no usable batch, a loss independent of P) raises
    ``ValueError`` instead of returning random mixtures.

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
    version: ClassVar[str] = "2"
    learns_from_banks: ClassVar[bool] = True
    subset_size: int = 10_000
    temperature: float = 0.2
    lr: float = 1e-2
    epochs: int = 400
    window: int = 10
    tol: float = 0.02
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
                    "jaccard_temperature": self.jaccard_temperature}
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
        """Train P on the visible banks until convergence or the budget, and return the mixture recipe."""
        leaked = set(ctx.banks) & set(ctx.excluded)
        if leaked:
            raise ValueError(f"param: the held-out encoder(s) {sorted(leaked)} must not be among the training banks")
        if not ctx.banks:
            raise ValueError("param learns from the banks but none was given (all encoders excluded?)")
        t0 = time.perf_counter()
        gen = seeded_generator(ctx.seed)
        ids = list(ctx.ids)
        subset_ids = [ids[i] for i in torch.randperm(len(ids), generator=gen)[: self.subset_size].tolist()]
        train_perm = torch.randperm(len(ids), generator=gen)
        if self.max_samples:
            train_perm = train_perm[: self.max_samples].sort().values
        train_ids = [ids[i] for i in train_perm.tolist()]
        names = sorted(ctx.banks)
        similarity, source = self.training_similarity(ctx)
        spaces = {b: BankSpace.build(ctx.banks[b], train_ids, subset_ids, similarity, ctx.device) for b in names}
        P0 = (torch.randn(ctx.num_anchors, len(subset_ids), generator=gen) * self.init_std).to(ctx.device)
        P = P0.clone().requires_grad_(True)
        curve, steps = self.train(spaces, P, len(train_ids), gen, ctx.device)
        change = float((P.detach() - P0).abs().max()) / self.temperature
        if change < MIN_LOGIT_CHANGE:
            raise ValueError(unmoved_message(change, len(curve), steps, self.lr))
        weights = torch.softmax(P.detach() / self.temperature, dim=1)
        return Anchors(ids=subset_ids, weights=weights, info={
            "param_banks": names,
            "param_similarity": similarity.name,
            "param_similarity_params": similarity.params(),
            "param_similarity_source": source,
            "param_subset_size": len(subset_ids),
            "param_train_samples": len(train_ids),
            "param_epochs": len(curve),
            "param_steps": steps,
            "param_converged": has_converged(curve, self.window, self.tol),
            "param_loss_curve": [float(f"{v:.6g}") for v in curve],
            "param_loss_first_epoch": curve[0],
            "param_loss_last_epoch": curve[-1],
            "param_max_logit_change": change,
            "param_mixture_size_initial": mixture_size(torch.softmax(P0 / self.temperature, dim=1)),
            "param_mixture_size": mixture_size(weights),
            "param_seconds": time.perf_counter() - t0})

    def train(self, spaces: dict[str, BankSpace], P: torch.Tensor, n: int, gen: torch.Generator,
              device: torch.device) -> tuple[list[float], int]:
        """Adam on P, in place: at most ``epochs`` passes over the ``n`` training rows,
        stopping once :func:`has_converged`. Returns the per-epoch mean loss and the
        number of steps taken."""
        opt = torch.optim.Adam([P], lr=self.lr)
        curve: list[float] = []
        steps = 0
        for _ in range(self.epochs):
            total, count = 0.0, 0
            for idx in minibatches(n, self.batch_size, gen):
                if len(idx) < 2:
                    continue
                loss = self.loss(spaces, idx.to(device), P)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total, count = total + float(loss.detach()), count + 1
            if not count:
                break
            steps += count
            curve.append(total / count)
            if has_converged(curve, self.window, self.tol):
                break
        return curve, steps

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

