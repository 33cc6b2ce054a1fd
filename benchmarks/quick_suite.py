"""The smoke suite's wall time, cold, as `make quick` runs it: whole processes.

Runs ``relbench run tasks/quick.yaml`` from an empty embedding cache and an empty store
(each run its own, in a temporary folder; nothing is written to the user's cache), once
per ``-j`` setting, and prints for each its wall time, peak memory (the largest process,
from ``getrusage``) and its ratio to the target (2 minutes on an idle 2-core machine),
with the CPU model and the load average before each run: the target assumes an idle
machine, and a busy one shows in the load average.

    python benchmarks/quick_suite.py [--jobs 1 auto] [--target 120]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from interrupt_run import cpu

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", nargs="+", default=["1", "auto"], help="-j settings to time (default: 1 auto)")
    p.add_argument("--target", type=float, default=120.0, help="seconds the smoke suite should take (default 120)")
    a = p.parse_args()
    print(f"CPU: {cpu()}, {os.cpu_count()} cores")
    for jobs in a.jobs:
        with tempfile.TemporaryDirectory(prefix="relbench-quick-") as tmp:
            env = {**os.environ, "RELBENCH_CACHE_DIR": str(Path(tmp) / "cache")}
            cmd = [sys.executable, "-m", "relbench.cli", "run", str(ROOT / "tasks" / "quick.yaml"), "-q", "-j", jobs,
                   "--output", str(Path(tmp) / "results"), "--leaderboards", str(Path(tmp) / "boards")]
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            done = subprocess.run(cmd, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6  # GB (ru_maxrss is in KB)
            print(f"-j {jobs:>4}: {wall:6.1f} s wall, exit {done.returncode}, peak ≤ {peak:.2f} GB (largest process "
                  f"so far), {wall / a.target:.2f}× the {a.target:.0f} s target; load average before {load:.1f}")
            if done.returncode:
                print(done.stderr[-2000:])


if __name__ == "__main__":
    main()
