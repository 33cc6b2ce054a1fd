"""Where a forced run spends its CPU: seconds per unit by stage, and the fits shared.

Runs the chosen tasks as `relbench run --force` would (into a temporary results folder,
so the real store is not touched; banks come from the embedding cache as usual, so run
the suite once first or the encoders' time shows up under "banks"), with the runner's
stages wrapped in CPU timers (``time.process_time``: every thread of the process, so on
2 cores a second of wall can be up to 2 CPU-s). Stages are exclusive: a stage entered
inside another (a decoder fit inside a translation stitcher's fit) is charged to the
inner one only. Per task it prints units, wall, CPU-s per unit, the share of each stage
and the decoder-head fits computed and reused through the shared work
(:mod:`relbench.sharing`).

Stages: *banks* (reading the embedding cache, encoding what is missing, the seed's
draw), *anchors* (selection, PARAM's training included), *decoder training* (every
Adam loop of relbench.training: heads, adapters, candidates of tuned constants),
*relative features* (similarity projections of a side), *stitcher fit* (what a
stitcher's ``fit`` does besides training: maps, decompositions), *prediction*,
*metrics*, *store* (appending result lines); *other* is the rest (grid walking,
tuning bookkeeping, Python).

    python benchmarks/stage_costs.py [tasks.yaml] [--task NAME]... [--seeds 0 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tabulate import tabulate

from relbench import interfaces, results, runner, task_run, training
from relbench.config import load_suite
from relbench.plugins import load_registry


class StageClock:
    """Exclusive CPU seconds per stage: entering a stage pauses the one it is inside."""

    def __init__(self) -> None:
        self.seconds: Counter = Counter()
        self._stack: list[tuple[str, float]] = []

    def wrap(self, stage: str, fn):
        """``fn`` with its CPU time (less nested stages') charged to ``stage``."""
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            now = time.process_time()
            if self._stack:
                outer, since = self._stack[-1]
                self.seconds[outer] += now - since
            self._stack.append((stage, now))
            try:
                return fn(*args, **kwargs)
            finally:
                end = time.process_time()
                _, since = self._stack.pop()
                self.seconds[stage] += end - since
                if self._stack:
                    self._stack[-1] = (self._stack[-1][0], end)
        timed.__wrapped_stage__ = True
        return timed


def instrument(clock: StageClock, registry) -> list[tuple[object, str, object]]:
    """Wrap the runner's stages and every registered stitcher's and metric's methods;
    returns what was replaced, for :func:`restore`."""
    replaced: list[tuple[object, str, object]] = []

    def patch(owner, attr: str, stage: str, fn=None) -> None:
        fn = fn if fn is not None else owner.__dict__.get(attr)
        if fn is not None and not getattr(fn, "__wrapped_stage__", False):
            replaced.append((owner, attr, fn))
            setattr(owner, attr, clock.wrap(stage, fn))

    patch(task_run.TaskRun, "banks", "banks")
    patch(task_run.TaskRun, "anchors", "anchors")
    patch(interfaces.StitchSide, "relative", "relative features")
    patch(results.ResultStore, "append", "store")
    loop = training.train_loop  # imported by name where heads train: patch every module that holds it
    for module in [m for m in list(sys.modules.values()) if getattr(m, "train_loop", None) is loop]:
        patch(module, "train_loop", "decoder training", loop)
    for interface, methods in (("stitcher", {"fit": "stitcher fit", "predict": "prediction"}),
                               ("regularizer", {"loss": "regularizer loss", "prepared": "regularizer loss"}),
                               ("metric", {"compute": "metrics"})):
        for name in registry.names(interface):
            for klass in registry.get(interface, name).__mro__:
                for attr, stage in methods.items():
                    patch(klass, attr, stage)
    return replaced


def restore(replaced: list[tuple[object, str, object]]) -> None:
    """Put back what :func:`instrument` replaced."""
    for owner, attr, fn in reversed(replaced):
        setattr(owner, attr, fn)


STAGES = ["banks", "anchors", "decoder training", "regularizer loss", "relative features", "stitcher fit",
          "prediction", "metrics", "store"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="?", default="tasks.yaml")
    parser.add_argument("--task", action="append", default=[], help="task name (repeatable; default: all)")
    parser.add_argument("--seeds", type=int, nargs="+", help="run only these seeds (default: the task's)")
    args = parser.parse_args()

    registry = load_registry()
    suite = load_suite(Path(args.tasks), registry)
    chosen = [t for t in suite.tasks if not args.task or t.name in args.task]
    rows, totals = [], Counter()
    for task in chosen:
        if args.seeds:
            task = dataclasses.replace(task, seeds=list(args.seeds))
        clock = StageClock()
        replaced = instrument(clock, registry)
        one = dataclasses.replace(suite, tasks=[task])
        with tempfile.TemporaryDirectory() as out:
            run = runner.Runner(one, registry, force=True, quiet=True, output=Path(out))
            wall0, cpu0 = time.perf_counter(), time.process_time()
            stats = run.run()
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        units = max(stats.units_done, 1)
        staged = sum(clock.seconds.values())
        shares = [f"{100 * clock.seconds[s] / cpu:.0f}%" if cpu else "-" for s in STAGES]
        fits = (f"{sum(stats.shared_computed.values())} / {sum(stats.shared_reused.values())}"
                if stats.shared_computed else "-")
        rows.append([task.name, stats.units_done, f"{wall:.1f}", f"{cpu:.1f}", f"{cpu / units:.2f}", *shares,
                     f"{100 * (cpu - staged) / cpu:.0f}%" if cpu else "-", fits])
        totals.update(clock.seconds)
        totals["cpu"] += cpu
        totals["wall"] += wall
        restore(replaced)
    headers = ["task", "units", "wall s", "CPU-s", "CPU-s/unit", *STAGES, "other", "head fits computed / reused"]
    print(tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True))
    if totals["cpu"]:
        print(f"\nall: {totals['wall']:.0f} s wall, {totals['cpu']:.0f} CPU-s; "
              + ", ".join(f"{s} {100 * totals[s] / totals['cpu']:.0f}%" for s in STAGES))


if __name__ == "__main__":
    main()
