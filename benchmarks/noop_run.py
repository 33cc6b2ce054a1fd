"""The warm no-op: `relbench run TASKS` when every unit is already stored.

Identities make a no-op cheap by design: the runner plans every task (data sets and
encoder fingerprints, no embeddings), finds every unit stored with its current identity,
loads no bank and computes nothing; then it renders the pages. This script times, as
whole processes side by side (the machine is noisy: compare figures of one run), the
plan alone (`--dry-run`), the no-op without pages (`--no-leaderboard`) and the full
no-op (pages included, into a folder drawn once before the timed runs, so no page has
changed), and prints wall and CPU seconds and the peak resident memory of each. Run the
suite once first (`relbench run tasks.yaml`).

    python benchmarks/noop_run.py [tasks.yaml] [--repeat 3]
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


def timed(args: list[str]) -> tuple[float, float, float, int]:
    """Wall seconds, CPU seconds, peak RSS (MB) and exit code of one `relbench` process."""
    t0 = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", sys.executable, "-m", "relbench.cli", *args],
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    user, system, rss_kb = proc.stderr.strip().splitlines()[-1].split()
    return wall, float(user) + float(system), int(rss_kb) / 1024, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="?", default="tasks.yaml")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    pages = Path(tempfile.mkdtemp(prefix="relbench-noop-pages-"))  # the published pages stay untouched
    wall, cpu, rss, code = timed(["run", args.tasks, "--leaderboards", str(pages), "-q"])  # draws every page once
    if code != 0:
        sys.exit(f"`relbench run {args.tasks}` exited {code}: run the suite to completion first")
    print(f"drawing every page into an empty folder: wall {wall:.1f} s, cpu {cpu:.1f} s, peak RSS {rss:.0f} MB")
    variants = {
        "plan only (--dry-run)": ["run", args.tasks, "--dry-run", "-q"],
        "no-op, no pages": ["run", args.tasks, "--no-leaderboard", "-q"],
        "no-op with pages": ["run", args.tasks, "--leaderboards", str(pages), "-q"],  # unchanged: none redrawn
    }
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
