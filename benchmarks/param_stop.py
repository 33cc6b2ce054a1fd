"""PARAM's stopping rules and precisions side by side: seconds, epochs and a held-out proxy.

One PARAM ``select`` per (similarity, rule, precision) on the same banks, one seed:

* rule *loss*: the loss test alone (``validation_fraction=0``, the protocol before the
  validation stop: every fit row trains P, until the per-epoch loss converges or 400
  epochs);
* rule *validation*: the selector's defaults (20 % of the fit rows set aside, scored
  every 5 epochs, patience 4, the best trained checkpoint kept);
* precision fp32 or bf16 (:func:`relbench.precision.running_at`: P's loss under autocast).

Banks: synthetic, of the shape of ``fashion-param-held-out`` (the real Fashion-MNIST
banks need the data set and the encoders, which this script does not fetch): ``--rows``
fit rows of ten classes, three visible banks of widths 1,280 / 1,280 / 1,024 and one
held-out bank of width 1,280, each a ReLU of its own random map of a shared
class-clustered latent plus noise; subset 1,000, 768 anchors. ``--scale`` divides rows,
widths, subset and anchors for the trainings (default 2: a training to loss convergence
at the full shape takes many minutes of a shared core); the cost of one Adam step (fp32
and bf16) and of one validation score is measured first at the full shape.

Held-out proxy (for this report only, never used by any choice): the zero-shot transfer
PARAM is for, from the visible banks to the held-out one. For each visible bank a, a
ridge classifier (:class:`relbench_param.validation.RidgeClassifier`, the stop's own) is
fitted on a's relative features of 2,000 fit rows and scored on the held-out bank's
relative features of ``--eval-rows`` further rows that the selector never sees; the
proxy is the mean over a. Each bank's projection is fitted on its own fit rows (as the
task does). It is printed for untrained mixtures (a random P of the selector's
initialisation), for the loss rule's P and for the validation rule's P.

    python benchmarks/param_stop.py [--scale 2] [--similarities cosine wip]
                                    [--precisions fp32 bf16] [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from tabulate import tabulate

import relbench.precision
from relbench.interfaces import AnchorContext, Bank
from relbench.training import seeded_generator
from relbench_param.selector import BankSpace, PARAMSelector
from relbench_param.validation import RidgeClassifier, TransferValidation
from relbench_param.wip import WhitenedInnerProduct
from relbench_relreps.similarities import Cosine

CLASSES, LATENT = 10, 32
VISIBLE = {"cnn-a": 1280, "cnn-b": 1280, "cnn-c": 1024}
HELD_OUT = ("cnn-held-out", 1280)


def synthetic_banks(rows: int, widths: dict[str, int], seed: int = 0) -> tuple[dict[str, Bank], np.ndarray]:
    """Banks of ``rows`` samples: ReLU(latent · M_b + c_b) + noise, one random map per
    bank, over a latent of ten Gaussian class clusters; and the class of every row."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(rows) % CLASSES
    latent = 0.7 * torch.randn(CLASSES, LATENT, generator=g)[labels] + torch.randn(rows, LATENT, generator=g)
    ids = [f"r{i}" for i in range(rows)]
    banks = {}
    for name, width in widths.items():
        M = torch.randn(LATENT, width, generator=g) / LATENT ** 0.5
        X = torch.relu(latent @ M + torch.randn(width, generator=g)) + torch.rand(rows, width, generator=g)
        banks[name] = Bank(name, "train", X, ids)
    return banks, labels.numpy()


def similarity_of(name: str):
    """The grid entry's similarity (WIP with the task's Ledoit–Wolf shrinkage)."""
    return Cosine() if name == "cosine" else WhitenedInnerProduct(lam="ledoit-wolf")


def proxy(weights: torch.Tensor, subset: list[str], banks: dict[str, Bank], fit: list[str], evaluation: list[str],
          y_fit: torch.Tensor, y_eval: torch.Tensor, similarity) -> float:
    """Mean over visible banks a of the held-out bank's accuracy under a ridge head
    fitted on a's relative features (see the module docstring)."""
    feats = {}
    for name, bank in banks.items():
        space = BankSpace.build(bank, fit, subset, similarity, torch.device("cpu"), evaluation)
        anchors = weights @ space.subset
        feats[name] = (space.relative(torch.arange(len(fit)), anchors), space.held_relative(anchors))
    target = feats.pop(HELD_OUT[0])[1]
    return float(np.mean([RidgeClassifier.fit(F, y_fit, CLASSES, 1e-2).accuracy(target, y_eval)
                          for F, _ in feats.values()]))


def median_seconds(fn, rounds: int = 3) -> float:
    """The median wall time of ``fn()`` over ``rounds`` calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def step_costs(similarity_name: str, rows: int) -> str:
    """Seconds of one Adam step's loss and gradient (fp32, bf16) and of one validation
    score, at the full shape: 80 % of ``rows`` training P, 20 % held, subset 1,000."""
    banks, labels = synthetic_banks(rows, VISIBLE, seed=1)
    ids = banks["cnn-a"].ids
    train, held = ids[: rows * 4 // 5], ids[rows * 4 // 5:]
    selector = PARAMSelector(subset_size=1000)
    spaces = {b: BankSpace.build(bank, train, train[:1000], similarity_of(similarity_name), torch.device("cpu"), held)
              for b, bank in banks.items()}
    g = torch.Generator().manual_seed(0)
    P = torch.randn(768, 1000, generator=g).requires_grad_(True)
    idx = torch.randperm(len(train), generator=g)[:256]

    def step(precision: str) -> None:
        P.grad = None
        with relbench.precision.running_at(precision), relbench.precision.autocast("cpu"):
            loss = selector.loss(spaces, idx, P)
        loss.backward()
    y = torch.as_tensor(labels)
    fit_idx = torch.arange(2000)
    validation = TransferValidation(fit_idx, y[:2000], y[len(train):], CLASSES, selector.validation_ridge)
    fp32, bf16 = median_seconds(lambda: step("fp32")), median_seconds(lambda: step("bf16"))
    score = median_seconds(lambda: validation.score(spaces, torch.softmax(P.detach() / 0.2, dim=1)))
    steps = -(-len(train) // selector.batch_size)
    return (f"{similarity_name} at the full shape ({len(train):,} training rows, {len(held):,} held): a step "
            f"{fp32 * 1e3:.0f} ms fp32, {bf16 * 1e3:.0f} ms bf16 ({fp32 / bf16:.2f}×); a validation score "
            f"{score * 1e3:.0f} ms = {score / fp32:.1f} fp32 steps, {score / (fp32 * steps * 5):.1%} of the "
            f"{selector.eval_every} epochs ({steps} steps each) it follows")


def timed_scores() -> list[float]:
    """Wrap the validation score with a clock; returns the list its seconds go to."""
    seconds: list[float] = []
    score = TransferValidation.score

    def clocked(self, spaces, weights):
        t0 = time.perf_counter()
        try:
            return score(self, spaces, weights)
        finally:
            seconds.append(time.perf_counter() - t0)
    TransferValidation.score = clocked
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, default=2,
                        help="divide rows, widths, subset and anchors of the trainings by this")
    parser.add_argument("--rows", type=int, default=4000, help="fit rows (before --scale)")
    parser.add_argument("--eval-rows", type=int, default=1000, help="rows only the proxy reads (before --scale)")
    parser.add_argument("--similarities", nargs="+", default=["cosine", "wip"])
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    parser.add_argument("--rules", nargs="+", default=["loss", "validation"])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the runner's workers use one)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    s = args.scale
    for sim_name in args.similarities:
        print(step_costs(sim_name, args.rows), flush=True)
    rows, extra = args.rows // s, args.eval_rows // s
    widths = {k: w // s for k, w in (*VISIBLE.items(), HELD_OUT)}
    banks, labels = synthetic_banks(rows + extra, widths)
    ids = banks[HELD_OUT[0]].ids
    fit_ids, eval_ids = ids[:rows], ids[rows:]
    visible = {k: Bank(k, "train", b.X[:rows], fit_ids) for k, b in banks.items() if k != HELD_OUT[0]}
    proxy_fit = fit_ids[: 2000 // s]
    y = torch.as_tensor(labels)
    y_fit, y_eval = y[: len(proxy_fit)], y[rows:]
    anchors_n, subset_n = 768 // s, 1000 // s
    eval_seconds = timed_scores()
    print(f"banks: {rows:,} fit rows, visible widths {list(widths.values())[:-1]}, held-out width "
          f"{widths[HELD_OUT[0]]}; subset {subset_n:,}, {anchors_n} anchors; {args.threads} thread(s)")

    table = []
    for sim_name in args.similarities:
        sim = similarity_of(sim_name)
        g = seeded_generator(1)
        subset = [fit_ids[i] for i in torch.randperm(rows, generator=g)[:subset_n].tolist()]
        untrained = torch.softmax(torch.randn(anchors_n, subset_n, generator=g) / 0.2, dim=1)
        table.append([sim_name, "untrained", "-", "-", "-", "-", "-", "-",
                      f"{proxy(untrained, subset, banks, proxy_fit, eval_ids, y_fit, y_eval, sim):.3f}"])
        for rule in args.rules:
            for precision in args.precisions:
                selector = PARAMSelector(subset_size=subset_n, validation_fraction=0.0 if rule == "loss" else 0.2)
                ctx = AnchorContext(num_anchors=anchors_n, seed=0, ids=fit_ids, labels=labels[:rows],
                                    banks=visible, excluded=frozenset({HELD_OUT[0]}), device=torch.device("cpu"),
                                    views={}, pool_banks=lambda name: {}, similarity=sim)
                eval_seconds.clear()
                t0 = time.perf_counter()
                with relbench.precision.running_at(precision):
                    anchors = selector.select(ctx)
                seconds = time.perf_counter() - t0
                info = anchors.info
                per_step = (seconds - sum(eval_seconds)) / info["param_steps"]
                score = info["param_validation_score"]
                table.append([sim_name, rule, precision, f"{seconds:.0f}", info["param_epochs"],
                              f"{info['param_stop']} @ {info['param_chosen_epoch']}",
                              f"{per_step * 1e3:.0f} / {np.mean(eval_seconds) * 1e3:.0f}" if eval_seconds
                              else f"{per_step * 1e3:.0f} / -",
                              "-" if score is None else f"{score:.3f}",
                              f"{proxy(anchors.weights, anchors.ids, banks, proxy_fit, eval_ids, y_fit, y_eval, sim):.3f}"])
                print(tabulate(table[-1:], tablefmt="plain"), flush=True)
    print()
    print(tabulate(table, headers=["similarity", "P", "precision", "seconds", "epochs", "stop @ chosen epoch",
                                   "ms a step / an evaluation", "validation score", "held-out proxy"],
                   tablefmt="github", disable_numparse=True))


if __name__ == "__main__":
    main()
