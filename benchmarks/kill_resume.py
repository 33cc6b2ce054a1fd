"""Kill-and-resume: SIGKILL `relbench run` at random moments until it finishes, then check
the store lost nothing and holds nothing twice.

Each round starts `relbench run TASKS --output DIR --no-leaderboard -q` and kills it
after a random delay (seeded); a round that ends by itself ends the loop. Then, against
the tasks file's plan: every unit is done, no unit id has two successful lines, no line
was set aside as damaged (the one line a kill cuts short is skipped, not damaged), and
`relbench run --dry-run` has nothing left to compute. Prints the figures.

    python benchmarks/kill_resume.py [tasks/quick.yaml] [--seed 0] [--max-delay 20]
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="?", default="tasks/quick.yaml")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-delay", type=float, default=20.0, help="longest wait before a kill (seconds)")
    parser.add_argument("--rounds", type=int, default=50, help="at most this many killed rounds")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    out = Path(tempfile.mkdtemp(prefix="relbench-kill-"))
    run = [sys.executable, "-m", "relbench.cli", "run", args.tasks, "--output", str(out), "--no-leaderboard", "-q"]
    kills, t0 = 0, time.perf_counter()
    for _ in range(args.rounds):
        proc = subprocess.Popen(run)
        try:
            code = proc.wait(timeout=rng.uniform(1.0, args.max_delay))
            print(f"finished by itself after {kills} kills (exit {code})")
            break
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
    else:
        code = subprocess.run(run).returncode
        print(f"finished after {kills} kills and one uninterrupted run (exit {code})")
    lines = bad = 0
    successes: Counter = Counter()
    for path in sorted(out.glob("*.jsonl")):
        for raw in path.read_bytes().splitlines():
            lines += 1
            try:
                unit = json.loads(raw)
            except ValueError:
                bad += 1
                continue
            if unit.get("rows") and not all(r.get("status") == "error" for r in unit["rows"]):
                successes[(path.stem, unit["unit"])] += 1
    twice = sum(1 for n in successes.values() if n > 1)
    quarantined = sum(1 for _ in (out / "quarantine").glob("*.jsonl")) if (out / "quarantine").exists() else 0
    plan = json.loads(subprocess.run([*run[:5], "--output", str(out), "--dry-run", "--json"], capture_output=True,
                                     text=True).stdout)
    print(f"{args.tasks}: {kills} SIGKILLs in {time.perf_counter() - t0:.0f} s; {lines} stored lines, {bad} cut short "
          f"by a kill, {quarantined} quarantine files, {len(successes)} units done, {twice} stored twice; "
          f"plan: {plan['units']} units, {plan['to_compute']} left to compute")


if __name__ == "__main__":
    main()
