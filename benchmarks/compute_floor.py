"""A floor under the full-scale suite's wall time on this machine, from counted FLOPs.

The performance targets ask for the default suite in 20 minutes cold and 8 minutes warm
(`--force -j 2`) on two cores. Whether that is possible without shrinking the protocol
is a question of arithmetic, not of tuning: this script counts the floating-point
operations of the one piece of the suite whose amount of work the stored results fix
exactly — the learned anchors' training (PARAM: one Adam step per minibatch, until its
loss converges) — and divides them by the best this machine's cores can do.

* **Peak**: the fp32 and bf16 matrix-multiply throughput of this machine (2048²
  ``torch.matmul``, the best of several, ``benchmarks/gemm_peaks.py``), on one thread and
  on every core, printed first with the CPU's model, its cores and the load average
  beside each figure. No real workload goes faster.
* **Work per step**: one training step of the selector exactly as the task configures
  it (its grid entry's parameters, similarity, anchors and banks of the real encoders'
  widths), its loss and gradient counted by ``torch.utils.flop_counter.FlopCounterMode``
  (matrix products, and the decompositions' lower bounds of :mod:`decomposition_flops`:
  element-wise work and Adam's update are left out, so the count is a lower bound).
* **Steps**: every training the results release records (``param_steps`` per seed,
  held-out encoder and similarity; the steps convergence took).

The floor is then (FLOPs of every step) / (peak of every core): the wall time PARAM's
trainings need even if nothing else ran, every core stayed busy and every operation ran
at matrix-multiply peak. It is printed at both precisions: the fp32 floor holds for the
protocol as it is (it trains in float32); the bf16 floor is the one even a switch to
bfloat16 arithmetic could not go under. Since both targets' runs include these trainings
(a cold run and a `--force` run recompute every unit), an fp32 floor above a target
shows the target cannot be met on this machine at this protocol. It also prints the
measured time of one step beside its count (the share of one core's peak the training
reaches today), and the measured/floor ratio at fp32 of the recorded training time (the
trainings ran one thread each, so against the one-thread floor).

    python benchmarks/compute_floor.py [tasks.yaml] [--release leaderboards/results.parquet]
                                       [--task fashion-param-held-out] [--selector param]
                                       [--rounds 3]

(``python benchmarks/gemm_peaks.py`` prints the peaks alone.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import pandas as pd
import torch

from relbench.config import load_suite
from relbench.descriptions import loaded
from relbench.interfaces import Bank
from relbench.plugins import load_registry
from relbench.runner import Runner
from relbench_param.selector import BankSpace

from decomposition_flops import counter as flop_counter
from gemm_peaks import describe, measure_peaks

TARGETS = {"warm --force -j 2": 8 * 60, "cold": 20 * 60}


def _seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def encoder_widths(task_run) -> dict[str, int]:
    """The embedding width of every encoder of the task: two real items encoded."""
    data = loaded(task_run.dataset())
    split = data.splits["train"]
    widths = {}
    for spec in task_run.task.encoders:
        view = task_run.encoder_view(spec.label)
        ctx = task_run.encodings.context(spec, data, view)
        encoder = spec.build()
        encoder.setup(ctx)
        widths[spec.label] = int(encoder.encode(list(split.views[view][:2]), ctx).shape[1])
        release = getattr(encoder, "release", None)
        if release:
            release()
    return widths


def training_setup(selector, similarity, widths: dict[str, int], train_rows: int, num_anchors: int):
    """The selector's training spaces for random rows of the given widths (a step's work
    depends on shapes only), its mixture logits and a minibatch of row positions."""
    gen = torch.Generator().manual_seed(0)
    ids = [str(i) for i in range(train_rows)]
    subset = ids[: min(selector.subset_size, train_rows)]
    spaces = {}
    for label, width in widths.items():
        bank = Bank(encoder=label, split="train", X=torch.randn(train_rows, width, generator=gen), ids=ids)
        spaces[label] = BankSpace.build(bank, ids, subset, similarity, torch.device("cpu"))
    P = torch.randn(num_anchors, len(subset), generator=gen).requires_grad_(True)
    idx = torch.randperm(train_rows, generator=gen)[: selector.batch_size]
    return spaces, P, idx


def step(selector, spaces, P, idx) -> None:
    """One training step's loss and gradient (Adam's element-wise update left out)."""
    P.grad = None
    selector.loss(spaces, idx, P).backward()


def count_trainings(selector, similarities: dict, num_anchors: int, widths: dict[str, int],
                    trainings: pd.DataFrame) -> tuple[dict[tuple, tuple[float, float]], float, int]:
    """Every recorded training's matrix-product FLOPs (per-step count × its steps).

    ``trainings`` has one row per training with columns ``similarity``, ``banks`` (the
    encoder labels it learned from, a list or its JSON), ``rows`` (training rows) and
    ``steps``; ``similarities`` maps a similarity label to its spec. A step is counted and
    timed once per (similarity, banks, rows), on one thread. Returns those per-step
    (FLOPs, median seconds), the FLOPs of every training and their steps."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    per_step: dict[tuple, tuple[float, float]] = {}
    flops_total, steps_total = 0.0, 0
    try:
        for t in trainings.itertuples(index=False):
            banks = tuple(json.loads(t.banks) if isinstance(t.banks, str) else t.banks)
            key = (t.similarity, banks, int(t.rows))
            if key not in per_step:
                spaces, P, idx = training_setup(selector, similarities[t.similarity].build(),
                                                {b: widths[b] for b in banks}, int(t.rows), num_anchors)
                with flop_counter() as counter:
                    step(selector, spaces, P, idx)
                step(selector, spaces, P, idx)  # warm-up
                seconds = statistics.median(_seconds(lambda: step(selector, spaces, P, idx)) for _ in range(5))
                per_step[key] = (counter.get_total_flops(), seconds)
            flops_total += per_step[key][0] * int(t.steps)
            steps_total += int(t.steps)
    finally:
        torch.set_num_threads(threads)
    return per_step, flops_total, steps_total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="?", default="tasks.yaml")
    parser.add_argument("--release", default="leaderboards/results.parquet",
                        help="the results release whose recorded trainings are counted")
    parser.add_argument("--task", default="fashion-param-held-out")
    parser.add_argument("--selector", default="param", help="label of the learned selector in the task's grid")
    parser.add_argument("--rounds", type=int, default=3, help="times the peak measurement is repeated (default 3)")
    args = parser.parse_args()

    registry = load_registry()
    suite = load_suite(Path(args.tasks), registry)
    runner = Runner(suite, registry, quiet=True)
    task_run = next(r for r in runner.plans() if r.task.name == args.task)
    task = task_run.task
    selector = next(s for s in task.grid["selectors"] if s.label == args.selector).build()
    similarities = {s.label: s for s in task.grid["similarities"]}
    widths = encoder_widths(task_run)

    recorded = {"extra.param_steps": "steps", "extra.param_banks": "banks", "extra.param_train_samples": "rows",
                "extra.param_seconds": "seconds"}
    rows = pd.read_parquet(args.release, columns=["task", "selector", "seed", "similarity", "held_out", *recorded])
    trainings = (rows[(rows.task == task.name) & (rows.selector == args.selector)].rename(columns=recorded)
                 .dropna(subset=["steps"]).drop_duplicates(["seed", "similarity", "held_out"]))

    per_step, flops_total, steps_total = count_trainings(selector, similarities, task.num_anchors, widths, trainings)

    cores = torch.get_num_threads()
    peaks = measure_peaks(rounds=args.rounds)
    print(describe(peaks, args.rounds))
    peak_one, peak_all = peaks["fp32", 1].flops, peaks["fp32", cores].flops
    bf16_all = max(peaks["bf16", cores].flops, peaks["bf16-autocast", cores].flops)
    print(f"{task.name}: {args.selector} trainings recorded in {args.release}: {len(trainings)}, "
          f"{steps_total:,} Adam steps; encoder widths {widths}")
    for (similarity, banks, n), (flops, seconds) in per_step.items():
        print(f"  {similarity:<8} banks {', '.join(banks)} ({n:,} training rows, {task.num_anchors} anchors, "
              f"subset {min(selector.subset_size, n):,}): {flops / 1e9:.2f} GFLOP a step, measured "
              f"{seconds * 1e3:.0f} ms on one thread = {flops / seconds / peak_one:.0%} of one thread's fp32 peak "
              f"(measured/floor {seconds * peak_one / flops:.1f}×)")
    floor, floor_bf16 = flops_total / peak_all, flops_total / bf16_all
    recorded = trainings["seconds"].sum()
    print(f"all trainings: {flops_total / 1e12:.0f} TFLOP; floor at the {cores}-thread peak: fp32 {floor / 60:.1f} min, "
          f"bf16 {floor_bf16 / 60:.1f} min")
    print(f"  recorded training time, one worker each: {recorded / 60:.0f} min; measured/floor at fp32 "
          f"{recorded * peak_one / flops_total:.1f}× the one-thread floor ({flops_total / peak_one / 60:.0f} min)")
    for name, target in TARGETS.items():
        verdict = "cannot be met" if floor > target else "not excluded by this floor"
        print(f"  target {name} ≤ {target // 60} min: fp32 floor {floor / target:.1f}× the target — {verdict} "
              f"(bf16 floor {floor_bf16 / target:.1f}×)")


if __name__ == "__main__":
    main()
