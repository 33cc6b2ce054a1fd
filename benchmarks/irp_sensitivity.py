"""How far each stitcher's cells move when nothing changes but the order of floating-point
sums: one task, one seed, computed twice from scratch (own embedding caches and stores,
so the trained encoders are trained again), once with one torch thread and once with
two. A matrix product's summation order depends on the thread count, as it does on the
CPU, so the spread between the two runs stands for the spread between two machines.

Prints, per stitcher (and similarity), the stitched cells' mean and largest |Δ| of the
accuracy between the runs, then, for IRP, its diagnostics: how many anchors its pruning
keeps and the condition number of the matrix it inverts, with how many cells differ.

    python benchmarks/irp_sensitivity.py [--task mnist-cross-seed] [--seed 0] [--tasks tasks.yaml]

The run writes only under a temporary folder (removed afterwards); the data sets are read
from the real cache (`$RELBENCH_CACHE_DIR` or ~/.cache/relbench).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from relbench.cache import default_cache_root
from relbench.results import ResultStore
from relbench.threads import thread_variables

SHARED = ("datasets", "descriptions")  # read-only inputs both runs may share


def one_seed(tasks: Path, seed: int, folder: Path) -> Path:
    """A copy of ``tasks`` whose suite runs only ``seed``."""
    text = tasks.read_text()
    copy, n = re.subn(r"(?m)^  seeds: \[[^\]]*\]", f"  seeds: [{seed}]", text, count=1)
    if not n:
        sys.exit(f"{tasks}: no `  seeds: [...]` line under suite: to replace")
    path = folder / "tasks.yaml"
    path.write_text(copy)
    return path


def compute(tasks: Path, task: str, threads: int, folder: Path) -> tuple[pd.DataFrame, float]:
    """The task's rows computed from scratch with ``threads`` torch threads, and the seconds it took."""
    cache, store = folder / f"cache{threads}", folder / f"store{threads}"
    cache.mkdir()
    for name in SHARED:
        if (default_cache_root() / name).exists():
            (cache / name).symlink_to(default_cache_root() / name)
    env = {**os.environ, **thread_variables(threads), "RELBENCH_CACHE_DIR": str(cache)}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "relbench.cli", "run", str(tasks), "--task", task, "-j", "1", "-q",
                    "--no-leaderboard", "--output", str(store)], env=env, check=True)
    return ResultStore(store).load(task), time.perf_counter() - t0


def spread(a: pd.DataFrame, b: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per cell of ``metric`` in both runs: its two values and |Δ|."""
    keys = ["unit", "source", "metric"]
    both = a[a["metric"] == metric].merge(b[b["metric"] == metric], on=keys, suffixes=("", "_2"))
    return both.assign(delta=(both["value"] - both["value_2"]).abs())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=Path, default=Path("tasks.yaml"))
    parser.add_argument("--task", default="mnist-cross-seed")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="relbench-irp-sensitivity-") as tmp:
        folder = Path(tmp)
        tasks = one_seed(args.tasks.resolve(), args.seed, folder)
        (a, ta), (b, tb) = (compute(tasks, args.task, t, folder) for t in (1, 2))
    print(f"{args.task}, seed {args.seed}: computed with 1 thread ({ta:.0f} s) and with 2 ({tb:.0f} s)\n")
    cells = spread(a, b, "accuracy")
    stitched = cells[cells["source"] != cells["target"]]
    table = stitched.groupby(["stitcher", "similarity"], dropna=False)["delta"].agg(["count", "mean", "max"])
    print("accuracy of stitched cells, |Δ| between the runs:")
    print(table.round(4).to_string(), "\n")
    for metric in ("anchors_kept", "condition_number"):
        d = spread(a, b, metric)
        d = d[d["stitcher"] == "irp"]
        if len(d):
            print(f"irp {metric}: mean {d['value'].mean():.3f} (run 1), largest |Δ| {d['delta'].max():.4f}, "
                  f"{int((d['delta'] > 0).sum())} of {len(d)} cells differ")


if __name__ == "__main__":
    main()
