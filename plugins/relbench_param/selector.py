"""PARAM anchors: learned convex mixtures of a shared subset, one weight matrix for all banks."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
import torch.nn.functional as F

from relbench.interfaces import AnchorContext, AnchorSelector, Anchors, Bank
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


@dataclass
class BankSpace:
    """One bank, reduced to what training P needs: the kernel between the training
    samples and the subset (``K``, ``n × k``) and the subset's Gram matrix (``G``).

    WIP: ``K = Z Z_subᵀ`` in whitened coordinates; since the rows of ``softmax(P)`` sum
    to one, the whitened anchors are ``S Z_sub`` and ``rel = K[idx] Sᵀ`` exactly.
    Cosine: ``K = X̂ X_subᵀ`` and ``rel = K[idx] Sᵀ / ‖S X_sub‖``. Training cost is then
    independent of the embedding width.
    """

    K: torch.Tensor
    G: torch.Tensor
    cosine: bool

    @classmethod
    def build(cls, bank: Bank, train_ids: list[str], subset_ids: list[str], similarity: str, lam: float,
              eps: float, device: torch.device) -> BankSpace:
        """Fit the similarity on the bank's training rows and precompute ``K`` and ``G``."""
        X = bank.rows(train_ids).to(device)
        Xs = bank.rows(subset_ids).to(device)
        if similarity == "wip":
            wip = WhitenedInnerProduct(lam=lam, eps=eps)
            wip.fit(X)
            Z, Zs = wip.whiten(X), wip.whiten(Xs)
            return cls(Z @ Zs.t(), Zs @ Zs.t(), cosine=False)
        return cls(F.normalize(X, dim=1) @ Xs.t(), Xs @ Xs.t(), cosine=True)

    def relative(self, idx: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
        """Relative features of training rows ``idx`` w.r.t. the anchors ``S · subset``."""
        rel = self.K.index_select(0, idx) @ S.t()
        if self.cosine:
            norms = ((S @ self.G) * S).sum(dim=1).clamp_min(1e-12).sqrt()
            rel = rel / norms
        return rel


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

    Parameters:
        subset_size: k, the shared subset's size. Default 500 (our choice; not given).
        temperature: τ in ``softmax(P/τ)``. Default 0.2 (authors' earlier code; the
            paper only says "row-softmax").
        lr: Adam learning rate. Default 1e-2 (authors' earlier code).
        epochs: passes over the training samples. Default 20 (our choice).
        batch_size: training samples per step. Default 256 (our choice).
        max_samples: training samples used (seeded subset; 0 = all). Default 5000.
        similarity: relative projection used in training: ``wip`` (paper) or ``cosine``.
            Default wip.
        lam: WIP shrinkage λ. Default 0.1 (our choice).
        eps: WIP ridge ε. Default 1e-6 (authors' earlier code).
        init_std: std of the Gaussian initialisation of P. Default 1.0 (our choice: with
            τ = 0.2 each anchor starts near a few random samples).
        w_jaccard, w_barlow, w_align_uniform, w_cohesion: loss weights. Defaults 1, 1,
            1, 0.1 (our choice; the paper gives none).
        jaccard_temperature: temperature of the Soft-Jaccard activation profiles.
            Default 1.0 (our choice).
        barlow_lambda: Barlow Twins off-diagonal weight. Default 5e-3 (Zbontar et al.).
    """

    name: ClassVar[str] = "param"
    learns_from_banks: ClassVar[bool] = True
    subset_size: int = 500
    temperature: float = 0.2
    lr: float = 1e-2
    epochs: int = 20
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
        positive = {"subset_size": self.subset_size, "temperature": self.temperature, "lr": self.lr,
                    "epochs": self.epochs, "jaccard_temperature": self.jaccard_temperature}
        bad = [k for k, v in positive.items() if v <= 0]
        if bad:
            raise ValueError(f"param: {', '.join(bad)} must be positive")
        if self.batch_size < 2:
            raise ValueError(f"param: batch_size must be at least 2, got {self.batch_size}")
        weights = (self.w_jaccard, self.w_barlow, self.w_align_uniform, self.w_cohesion, self.barlow_lambda,
                   self.init_std, self.max_samples, self.eps)
        if any(w < 0 for w in weights):
            raise ValueError("param: loss weights, barlow_lambda, init_std, max_samples and eps must be ≥ 0")
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"param: lam must lie in [0, 1], got {self.lam}")

    def select(self, ctx: AnchorContext) -> Anchors:
        """Train P on the visible banks and return the mixture recipe."""
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
        spaces = {b: BankSpace.build(ctx.banks[b], train_ids, subset_ids, self.similarity, self.lam, self.eps,
                                     ctx.device) for b in names}
        P = (torch.randn(ctx.num_anchors, len(subset_ids), generator=gen) * self.init_std).to(ctx.device)
        P.requires_grad_(True)
        opt = torch.optim.Adam([P], lr=self.lr)
        history = []
        for _ in range(self.epochs):
            total, steps = 0.0, 0
            for idx in minibatches(len(train_ids), self.batch_size, gen):
                if len(idx) < 2:
                    continue
                loss = self.loss(spaces, idx.to(ctx.device), P)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total, steps = total + float(loss.detach()), steps + 1
            history.append(total / max(steps, 1))
        weights = torch.softmax(P.detach() / self.temperature, dim=1)
        return Anchors(ids=subset_ids, weights=weights, info={
            "param_banks": names, "param_loss_first_epoch": history[0], "param_loss_last_epoch": history[-1],
            "param_seconds": time.perf_counter() - t0})

    def loss(self, spaces: dict[str, BankSpace], idx: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
        """The weighted PARAM loss of one minibatch of training rows.

        Equal to the weighted sum of the pairwise losses of :mod:`relbench_param.losses`
        averaged over bank pairs, plus cohesion averaged over banks; per-bank parts
        (profiles, standardised features, uniformity) are computed once per bank.
        """
        S = torch.softmax(P / self.temperature, dim=1)
        feats = {b: space.relative(idx, S) for b, space in spaces.items()}
        loss = self.w_cohesion * torch.stack([anchor_cohesion(S, sp.G) for sp in spaces.values()]).mean()
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
