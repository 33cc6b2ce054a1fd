"""PARAM's training loop: Adam on the mixture logits P over minibatches of training rows,
the loss-convergence and validation stops, and the record of what one training did."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from relbench.api import autocast, deferred_import, minibatches
from relbench_param.spaces import BankSpace
from relbench_param.validation import Checkpoints, TransferValidation

if TYPE_CHECKING:
    from relbench_param.selector import PARAMSelector

torch = deferred_import("torch")

#: training counts as not having moved P when no mixture logit ``P/τ`` changed by more
#: than this (a relative change of every mixture weight below about 0.1 %)
MIN_LOGIT_CHANGE = 1e-3


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
class Training:
    """What one training of P did: the per-epoch loss, the Adam steps taken, why it
    stopped (``budget``, ``converged`` or ``validation``) and the validation record."""

    curve: list[float] = field(default_factory=list)
    steps: int = 0
    stop: str = "budget"
    checkpoints: Checkpoints | None = None

    def record(self) -> dict:
        """The ``info`` fields of the chosen checkpoint and the validation curve (the
        last epoch and no scores when there was no validation)."""
        c = self.checkpoints
        if c is None:
            return {"param_chosen_epoch": len(self.curve), "param_chosen_steps": self.steps,
                    "param_validation_score": None, "param_validation_curve": []}
        return {"param_chosen_epoch": c.best_epoch, "param_chosen_steps": c.best_steps,
                "param_validation_score": c.best_score,
                "param_validation_curve": [[e, float(f"{v:.6g}")] for e, v in c.curve]}



def train(selector: PARAMSelector, spaces: dict[str, BankSpace], P: torch.Tensor, n: int, gen: torch.Generator,
          device: torch.device, validation: TransferValidation | None = None) -> Training:
    """Adam on P, in place, with ``selector``'s settings: at most ``epochs`` passes over
    the ``n`` training rows, stopping once :func:`has_converged` or, with ``validation``,
    once ``patience`` scores in a row missed the best; P is then set to the best trained
    checkpoint."""
    opt = torch.optim.Adam([P], lr=selector.lr)
    run = Training(checkpoints=Checkpoints(selector.patience) if validation else None)
    score = (lambda: validation.score(spaces, torch.softmax(P.detach() / selector.temperature, dim=1))
             ) if validation else None
    if run.checkpoints:
        run.checkpoints.record(0, 0, score(), P)
    for epoch in range(1, selector.epochs + 1):
        total, count = train_epoch(selector, spaces, P, opt, n, gen, device)
        if not count:
            break
        run.steps += count
        run.curve.append(total / count)
        if run.checkpoints and epoch % selector.eval_every == 0 and run.checkpoints.record(
                epoch, run.steps, score(), P):
            run.stop = "validation"
            break
        if has_converged(run.curve, selector.window, selector.tol):
            run.stop = "converged"
            break
    if run.checkpoints and run.curve:
        if run.checkpoints.last_epoch != len(run.curve):
            run.checkpoints.record(len(run.curve), run.steps, score(), P)
        with torch.no_grad():
            P.copy_(run.checkpoints.best_P)
    return run


def train_epoch(selector: PARAMSelector, spaces: dict[str, BankSpace], P: torch.Tensor, opt: torch.optim.Optimizer,
                n: int, gen: torch.Generator, device: torch.device) -> tuple[float, int]:
    """One pass over the ``n`` training rows (one-row batches skipped) minimising
    ``selector``'s loss; the summed loss and the number of steps. The loss runs at the
    task's precision."""
    total, count = 0.0, 0
    for idx in minibatches(n, selector.batch_size, gen):
        if len(idx) < 2:
            continue
        with autocast(device):
            loss = selector.loss(spaces, idx.to(device), P)
        value = float(loss.detach())
        if not math.isfinite(value):
            raise ValueError(f"param: the training loss is {value} at step {count + 1} of an epoch")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        total, count = total + value, count + 1
    return total, count
