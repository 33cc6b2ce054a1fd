"""Topological densification (Hofer et al. 2020), applied before and after the relative
projection as García-Castellanos et al. do."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from relbench.api import deferred_import, Diagnostic, Regularizer, RegularizerBatch, Tunable
from relbench_topology.persistence import class_death_times, death_times_per_class

torch = deferred_import("torch")

PLACES = ("before", "after")


def densification_loss(points: torch.Tensor, labels: torch.Tensor, beta: float) -> torch.Tensor:
    """``mean over the batch's classes of Σ_i |d_i − β|``, the ``d_i`` being one
    class's 0-dim death times (classes with a single point have none and do not count).

    The mean, not the sum, over classes: Hofer et al.'s reference code divides the
    batch's sum by its number of class sub-batches, and García-Castellanos et al.'s
    accumulates one class per step with the loss divided by the accumulation count. So
    λ means the same whatever the number of classes in a batch."""
    per_class = death_times_per_class(points, labels)
    if not per_class:
        return points.new_zeros(())
    return torch.stack([(d - beta).abs().sum() for d in per_class]).mean()


def cyclical_schedule(steps: int, cycles: int = 4, ramp: float = 0.75) -> list[float]:
    """The factor of λ at each of ``steps`` optimiser steps under the authors' cyclical
    schedule (García-Castellanos et al.'s reference code, after Fu et al. 2019's cyclical
    annealing): the steps are cut into ``cycles`` periods of ``steps / cycles``; each
    period starts at 0 and rises by ``1 / (ramp · period)`` per step while that stays
    ≤ 1 (about the first ``ramp`` of the period), and holds 1 for the rest."""
    factors = [1.0] * steps
    period = steps / cycles
    rise = 1.0 / (period * ramp)
    for c in range(cycles):
        i = 0
        while i * rise <= 1.0 and int(c * period + i) < steps:
            factors[int(c * period + i)] = i * rise
            i += 1
    return factors


@dataclass
class Topological(Regularizer):
    """Topological densification: pull each class's 0-dimensional persistence death
    times (its minimum-spanning-tree edge lengths within a batch) towards a scale β, on
    the adapted embeddings before the relative projection and on the relative features
    after it (García-Castellanos et al., after Hofer et al. 2020).

    Loss per batch: ``λ_t · (weight_before · L(emb, β_before) + weight_after · L(rel,
    β_after))`` with ``L(z, β) = mean over classes of Σ_i |d_i(z) − β|`` (see
    :func:`densification_loss`), summed over the trained banks of the batch.

    **β per space.** Death times have the units of their space: raw embeddings and
    relative features (cosines, at most 2 apart) differ by orders of magnitude, and so do
    two encoders. β is therefore set per place as the ``beta_quantile`` quantile of the
    death times measured on the fit data in that place's space, before training (the
    identity adapter): the death times of the class-balanced batches the training will
    draw first (:meth:`prepared`, called by the relative decoder's training). The
    measured values, in absolute units, are :meth:`diagnostics` (``beta_before``,
    ``beta_after``). The authors' β = 3–4 (Hofer: 0.7) are absolute values for their
    fine-tuned spaces; ours have other scales (on the offline suite's CNN embeddings an
    absolute 3.5 lies above nearly every death time, which would spread classes out
    instead of densifying them).

    **Trainable path.** Both terms act through a trainable adapter in front of the
    frozen encoder (:attr:`needs_adapter`): the term before the projection moves the
    adapter's output directly, the term after it through the projection. Without an
    adapter a frozen encoder's relative features are fixed and the term would train
    nothing; a configuration where every term is off (``lam = 0``, or both weights 0) is
    refused.

    Parameters
    ----------
    weight_before : float, default 0.1
        Weight of the term on the adapted embeddings (reference code: 0.1).
    weight_after : float, default 0.9
        Weight of the term on the relative features (reference code: 0.9).
    beta_quantile : float, default 0.5
        β as a quantile of each place's measured death times (0–1; our choice: the
        median, so the long edges of sparse classes are pulled in and the shortest
        pushed out, concentrating the death times as the poster's figure shows).
        Tunable: 0.5, 0.25, 0.75.
    lam : float, default 0.02
        Overall weight λ of the regularizer (reference code: 0.02; Hofer: 0.1).
    lam_schedule : "constant" | "cyclical", default "constant"
        ``constant``: λ at every step (METHODS.md). ``cyclical``: the authors'
        reference-code schedule, λ times :func:`cyclical_schedule` over the training's
        optimiser steps (the thesis behind the poster uses it with a cosine learning
        rate schedule; the poster does not mention it).
    lam_cycles : int, default 4
        Cycles of the cyclical schedule (reference code: 4).
    lam_ramp : float, default 0.75
        Fraction of each cycle spent rising from 0 to λ (reference code: 0.75).
    classes_per_batch : int, default 8
        Classes per class-balanced batch (Hofer: 8).
    samples_per_class : int, default 16
        Samples per class in a batch (Hofer: 16; García-Castellanos: 16).
    """

    name: ClassVar[str] = "topological"
    version: ClassVar[str] = "3"  # 3: the adapter's training reorganised (one product, decay as its gradient)
    needs_adapter: ClassVar[bool] = True
    tunable: ClassVar[dict[str, Tunable]] = {
        "beta_quantile": Tunable(values=(0.5, 0.25, 0.75),
                                 relative_to="quantile of the 0-dim death times measured in each space (before and "
                                             "after the projection) on the fit data's class-balanced batches"),
    }
    weight_before: float = 0.1
    weight_after: float = 0.9
    beta_quantile: float = 0.5
    lam: float = 0.02
    lam_schedule: Literal["constant", "cyclical"] = "constant"
    lam_cycles: int = 4
    lam_ramp: float = 0.75
    classes_per_batch: int = 8
    samples_per_class: int = 16

    def __post_init__(self) -> None:
        for key in ("weight_before", "weight_after", "lam"):
            if getattr(self, key) < 0:
                raise ValueError(f"{key} must be non-negative, got {getattr(self, key)}")
        if self.lam == 0 or self.weight_before == self.weight_after == 0:
            raise ValueError(
                f"topological: this configuration adds nothing to the training (lam={self.lam}, weight_before="
                f"{self.weight_before}, weight_after={self.weight_after}): with λ = 0, or both weights 0, the "
                f"regularizer's loss is identically zero, and a row labelled 'topological' would silently report the "
                f"unregularized decoder. Set lam > 0 and at least one of weight_before / weight_after > 0, or drop "
                f"the regularizer from the grid (the `none` entry already gives the unregularized decoder).")
        if not 0.0 <= self.beta_quantile <= 1.0:
            raise ValueError(f"beta_quantile is a quantile in [0, 1], got {self.beta_quantile}")
        if self.lam_schedule not in ("constant", "cyclical"):
            raise ValueError(f"lam_schedule is 'constant' or 'cyclical', got {self.lam_schedule!r}")
        if self.lam_cycles < 1 or not 0.0 < self.lam_ramp <= 1.0:
            raise ValueError(f"lam_cycles must be ≥ 1 and lam_ramp in (0, 1], got {self.lam_cycles}, {self.lam_ramp}")
        if self.classes_per_batch < 1:
            raise ValueError(f"classes_per_batch must be at least 1, got {self.classes_per_batch}")
        if self.samples_per_class < 2:
            raise ValueError(f"samples_per_class must be at least 2 (a class needs an edge), "
                             f"got {self.samples_per_class}")
        self._betas: dict[str, float] | None = None  # absolute β per active place, once measured
        self._factors: list[float] | None = None  # λ's factor per step (cyclical schedule)
        self._step = 0

    def weight(self, place: str) -> float:
        """The weight of the term ``"before"`` or ``"after"`` the projection."""
        return {"before": self.weight_before, "after": self.weight_after}[place]

    def batch_shape(self) -> tuple[int, int]:
        """``(classes_per_batch, samples_per_class)``."""
        return self.classes_per_batch, self.samples_per_class

    def calibrated(self, beta_before: float | None, beta_after: float | None, steps: int | None = None) -> Topological:
        """A copy with absolute β values (None for an inactive place) and, for the
        cyclical schedule, the number of optimiser steps it spans (its loss then
        advances one step per call)."""
        if self.lam_schedule == "cyclical" and not steps:
            raise ValueError("the cyclical λ schedule needs the training's number of optimiser steps")
        betas = {p: b for p, b in zip(PLACES, (beta_before, beta_after)) if self.weight(p) > 0}
        if any(b is None or b < 0 for b in betas.values()):
            raise ValueError(f"topological: every active term needs a β ≥ 0, got before={beta_before}, "
                             f"after={beta_after}")
        out = copy.copy(self)
        out._betas = {p: float(b) for p, b in betas.items()}
        out._factors = cyclical_schedule(steps, self.lam_cycles, self.lam_ramp) if self.lam_schedule == "cyclical" else None
        out._step = 0
        return out

    def prepared(self, batches: Sequence[RegularizerBatch], steps: int) -> Topological:
        """A copy for one training: β measured per active place as the
        ``beta_quantile`` quantile of the death times of ``batches`` (the training's
        first class-balanced batches, drawn before any step: embeddings through the
        identity adapter, and their relative features) in the trained bank, and the
        schedule spread over ``steps`` optimiser steps.

        Raises ``ValueError`` when an active place has no death times to measure (e.g.
        no relative features: that term would have nothing to act on)."""
        betas = {}
        for place in PLACES:
            if self.weight(place) == 0:
                betas[place] = None
                continue
            times = [class_death_times(cloud, b.labels) for b in batches for cloud in _trained(b, place)]
            times = torch.cat(times) if times else torch.zeros(0)
            if len(times) == 0:
                raise ValueError(f"topological: the term {place} the projection (weight_{place}="
                                 f"{self.weight(place)}) found no death times in the training's batches "
                                 f"({'no relative features' if place == 'after' else 'no embeddings'} of the trained "
                                 f"bank, or no class with two samples), so it would train nothing. Give it a trained "
                                 f"bank with labelled classes of two or more samples, or set weight_{place}: 0.")
            betas[place] = float(torch.quantile(times.detach().double().cpu(), self.beta_quantile))
        return self.calibrated(betas["before"], betas["after"], steps)

    def diagnostics(self) -> dict[str, Diagnostic]:
        """The measured β per active place, in the units of its space (empty before
        :meth:`prepared` or :meth:`calibrated`)."""
        return {f"beta_{place}": Diagnostic(beta, "neutral") for place, beta in (self._betas or {}).items()}

    def loss(self, batch: RegularizerBatch) -> torch.Tensor:
        """The weighted densification loss of the batch (advances the λ schedule).

        The death times are computed in float32 whatever the precision of the clouds
        (under a ``bf16`` task the adapter's products arrive in bfloat16; the minimum
        spanning tree and the edge lengths are not left to its 8-bit mantissa)."""
        if self._betas is None:
            raise RuntimeError("topological: β is not measured yet; train through the relative decoder (it calls "
                               "prepared()) or set absolute values with calibrated(beta_before, beta_after)")
        factor = 1.0
        if self._factors is not None:
            factor = self._factors[min(self._step, len(self._factors) - 1)]
            self._step += 1
        total = batch.labels.new_zeros((), dtype=torch.float32)
        for place, beta in self._betas.items():
            for cloud in _trained(batch, place):
                total = total + self.weight(place) * densification_loss(cloud.float(), batch.labels, beta)
        return self.lam * factor * total


def _trained(batch: RegularizerBatch, place: str) -> list[torch.Tensor]:
    """The point clouds a place acts on: the adapted embeddings (``before``) or the
    relative features (``after``) of the trained bank, or of every embedded bank when
    the batch names none (fixed partner banks are never regularized)."""
    banks = [batch.trained] if batch.trained else list(batch.embeddings)
    source = batch.embeddings if place == "before" else batch.relative
    return [source[b] for b in banks if b in source]
