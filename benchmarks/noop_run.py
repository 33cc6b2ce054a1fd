"""The warm no-op: `relbench run TASKS` when every unit is already stored.

Identities make a no-op cheap by design: the runner plans every task (data sets and
encoder fingerprints, no embeddings), finds every unit stored with its current identity,
loads no bank and computes nothing; then it renders the pages. This script times, as
whole processes side by side (the machine is noisy: compare figures of one run), the
plan alone (`--dry-run`), the no-op without pages (`--no-leaderboard`) and the full
no-op (pages included, into a folder drawn once before the timed runs, so no page has
changed), and prints wall and CPU seconds and the peak resident memory of each. Run the
suite once first (`relbench run tasks.yaml`).

``--from-release leaderboards/results.parquet`` measures the no-op on a store of the
published results instead, without computing them: a temporary store gets one line per
planned unit, holding that unit's rows of the release (nested back as a store holds them,
:func:`relbench.reuse.nested`) with the plan's identity, key and inputs, so that the
store's size and the plan are the full suite's. The no-op with pages runs on a copy of the
committed leaderboards folder whose manifest is restamped as drawn from this store (each
page's digest of its lines), which is what a folder looks like when nothing changed since
its pages were drawn.

    python benchmarks/noop_run.py [tasks.yaml] [--repeat 3] [--from-release PARQUET]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd


def timed(args: list[str]) -> tuple[float, float, float, int]:
    """Wall seconds, CPU seconds, peak RSS (MB) and exit code of one `relbench` process."""
    t0 = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", sys.executable, "-m", "relbench.cli", *args],
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    user, system, rss_kb = proc.stderr.strip().splitlines()[-1].split()
    return wall, float(user) + float(system), int(rss_kb) / 1024, proc.returncode


def store_from_release(tasks: str, release: str, output: Path, boards: Path, pages: Path) -> int:
    """Write a store at ``output`` holding, for every unit the tasks file plans, that
    unit's rows of the release, and a copy of the leaderboards folder ``boards`` at
    ``pages`` whose manifest says its pages were drawn from that store; returns the
    store's size in bytes. Exits when the release lacks a planned unit (it is not this
    tasks file's release)."""
    import json
    import shutil

    from relbench.config import load_suite
    from relbench.leaderboard import MANIFEST, RELEASE_ENTRY, _digest
    from relbench.plugins import load_registry
    from relbench.results import ResultStore
    from relbench.rows import TASK_ERROR
    from relbench.runner import Runner
    from relbench.verify import store_release

    registry = load_registry()
    suite = load_suite(Path(tasks), registry)
    task_runs = Runner(suite, registry, quiet=True, output=output).plans()
    store = ResultStore(output)
    lacking = store_release(task_runs, pd.read_parquet(release), store)
    if lacking:
        task, unit = lacking[0]
        sys.exit(f"{release} has no rows of unit {unit.id} of task {task} (and {len(lacking) - 1} more): it is not "
                 f"the release of {tasks}")
    shutil.copytree(boards, pages)
    manifest = json.loads((pages / MANIFEST).read_text(encoding="utf-8"))
    for task_run in task_runs:
        units = [*(u.id for u in task_run.plan().units), TASK_ERROR]
        manifest[task_run.task.name]["digest"] = _digest(store, task_run.task, units)
    manifest[RELEASE_ENTRY] = {t.task.name: manifest[t.task.name]["digest"] for t in task_runs}
    (pages / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return sum(f.stat().st_size for f in output.glob("*.jsonl"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="?", default="tasks.yaml")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--from-release", metavar="PARQUET",
                        help="time the no-op on a temporary store of this release's rows (see above)")
    args = parser.parse_args()
    variants = {
        "plan only (--dry-run)": ["run", args.tasks, "--dry-run", "-q"],
        "no-op, no pages": ["run", args.tasks, "--no-leaderboard", "-q"],
    }
    if args.from_release:
        output = Path(tempfile.mkdtemp(prefix="relbench-noop-store-"))
        pages = output / "leaderboards"
        size = store_from_release(args.tasks, args.from_release, output, Path(args.from_release).parent, pages)
        print(f"a store of {args.from_release}'s rows: {size / 1e6:.0f} MB in {output}")
        variants["no-op with pages"] = ["run", args.tasks, "--leaderboards", str(pages), "-q"]  # none redrawn
        variants = {name: [*cmd, "--output", str(output)] for name, cmd in variants.items()}
    else:
        pages = Path(tempfile.mkdtemp(prefix="relbench-noop-pages-"))  # the published pages stay untouched
        wall, cpu, rss, code = timed(["run", args.tasks, "--leaderboards", str(pages), "-q"])  # draws every page
        if code != 0:
            sys.exit(f"`relbench run {args.tasks}` exited {code}: run the suite to completion first")
        print(f"drawing every page into an empty folder: wall {wall:.1f} s, cpu {cpu:.1f} s, peak RSS {rss:.0f} MB")
        variants["no-op with pages"] = ["run", args.tasks, "--leaderboards", str(pages), "-q"]  # none redrawn
    figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in variants}
    for _ in range(args.repeat):  # interleaved, so drift hits every variant alike
        for name, cmd in variants.items():
            wall, cpu, rss, code = timed(cmd)
            if code != 0:
                sys.exit(f"`relbench {' '.join(cmd)}` exited {code}: run the suite to completion first")
            figures[name].append((wall, cpu, rss))
    print(f"{args.tasks}, {args.repeat} runs each, {os.cpu_count()} CPU cores (median [min–max])")
    for name, runs in figures.items():
        walls, cpus, rsss = zip(*runs)
        print(f"  {name:<24} wall {statistics.median(walls):5.1f} s [{min(walls):.1f}–{max(walls):.1f}]  "
              f"cpu {statistics.median(cpus):5.1f} s  peak RSS {statistics.median(rsss):6.0f} MB")


if __name__ == "__main__":
    main()
