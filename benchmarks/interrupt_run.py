"""A new user's first minutes, measured: `relbench run` in a fresh clone, interrupted.

Clones the checkout that holds this script (its committed state) into a temporary
folder, starts ``relbench run TASKS [ARGS]`` there with an empty results store, and
prints:

- the seconds from start to the first line on stderr, and to the suite bar;
- the seconds from a Ctrl-C (SIGINT to the run's process group, as a terminal sends it)
  sent after ``--after`` seconds to the run's exit, and its exit code;
- ``git status --porcelain leaderboards/`` of the clone afterwards (empty: the release
  is untouched) and what the store holds.

    python benchmarks/interrupt_run.py [--tasks tasks.yaml] [--after 60] [-- -j auto]

The clone uses this checkout's Python environment (``sys.executable``) with the clone's
own code first on ``PYTHONPATH``; the embedding cache is the user's, as in a real run.
"""

from __future__ import annotations

import argparse
import os
import platform
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu() -> str:
    """The CPU model, from ``lscpu`` (or the platform)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except (OSError, StopIteration, subprocess.SubprocessError):
        return platform.processor() or "?"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default="tasks.yaml", help="tasks file of the clone (default tasks.yaml)")
    p.add_argument("--after", type=float, default=60.0, help="seconds before the Ctrl-C (default 60)")
    p.add_argument("args", nargs="*", help="more arguments of `relbench run` (after --)")
    a = p.parse_args()
    print(f"CPU: {cpu()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="relbench-clone-") as tmp:
        clone = Path(tmp) / "relbench"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(clone), str(clone / "plugins")])}
        cmd = [sys.executable, "-m", "relbench.cli", "run", a.tasks, *a.args]
        t0 = time.monotonic()
        run = subprocess.Popen(cmd, cwd=clone, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        first = bar = stopped = None
        tail = b""
        while run.poll() is None:
            ready, _, _ = select.select([run.stderr], [], [], 0.1)
            if ready:
                chunk = os.read(run.stderr.fileno(), 65536)
                tail = (tail + chunk)[-4000:]
                now = time.monotonic() - t0
                first = first if first is not None or not chunk.strip() else now
                bar = bar if bar is not None or b"suite" not in chunk else now
            if stopped is None and time.monotonic() - t0 >= a.after:
                stopped = time.monotonic()
                os.killpg(run.pid, signal.SIGINT)
        tail += run.stderr.read() or b""
        ended = time.monotonic()
        print(f"command: {' '.join(cmd[2:])}")
        print(f"first line after {first:.2f} s" if first is not None else "no line at all")
        print(f"suite bar after {bar:.2f} s" if bar is not None else "no suite bar")
        if stopped is not None:
            print(f"Ctrl-C after {stopped - t0:.1f} s: exit {run.returncode} {ended - stopped:.2f} s later")
        else:
            print(f"ended by itself after {ended - t0:.1f} s: exit {run.returncode}")
        status = subprocess.run(["git", "status", "--porcelain", "leaderboards"], cwd=clone, capture_output=True,
                                text=True).stdout
        print(f"git status of leaderboards/: {'clean' if not status.strip() else status.strip()}")
        stored = sorted(p.name for p in (clone / "results").glob("*.jsonl"))
        print(f"store: {len(stored)} task files {stored}")
        print("last lines:\n" + "\n".join(tail.decode(errors="replace").replace("\r", "\n").splitlines()[-6:]))


if __name__ == "__main__":
    main()
