"""``relbench run --jobs N``: a suite's tasks in N worker processes.

Most of an evaluation is many small decoder fits, bound by one core's Python overhead,
so N processes use N cores where one process with N threads cannot. Tasks are grouped
into *chains* by data set (tasks over the same data usually share encoders, so a chain
computes each embedding once and the rest of its tasks read the cache); chains are
handed to workers longest first. Every worker is a plain ``relbench run --task …``
process with one torch thread: results go to per-task files, so workers never write the
same file, and the embedding cache is written atomically. Workers record the user's own
command line (passed in :data:`COMMAND_ENV`) in their rows, not their internal one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from relbench.config import Suite, Task
from relbench.interfaces import progress_bar

#: Environment variable through which a worker learns the command the user typed.
COMMAND_ENV = "RELBENCH_RUN_COMMAND"


def chains(tasks: list[Task]) -> list[list[Task]]:
    """Tasks grouped by data set, in file order within a group, heaviest group first
    (weight: the number of encoders × seeds × grid points, a rough cost)."""
    groups: dict[str, list[Task]] = {}
    for task in tasks:
        groups.setdefault(task.dataset.name, []).append(task)

    def weight(chain: list[Task]) -> int:
        return sum(max(1, len(t.encoders)) * len(t.seeds) * max(1, len(t.similarities)) *
                   max(1, len(t.stitchers)) * max(1, len(t.selectors)) for t in chain)

    return sorted(groups.values(), key=weight, reverse=True)


def run_parallel(suite: Suite, tasks: list[Task], jobs: int, extra_args: list[str], command: str,
                 quiet: bool = False) -> int:
    """Run ``tasks`` in up to ``jobs`` worker processes; return the worst exit code.

    ``extra_args`` are passed to every worker's ``relbench run`` (``--force``,
    ``--output``, ``--disable`` …); ``command`` is what the workers record as the
    command that produced their rows. Each worker's messages are kept in a log and
    shown when it ends (with ``quiet``, only failures are); a bar counts finished tasks
    meanwhile.
    """
    queue = chains(tasks)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", COMMAND_ENV: command}
    running: list[tuple[subprocess.Popen, list[Task], Path]] = []
    worst = 0
    logdir = Path(tempfile.mkdtemp(prefix="relbench-jobs-"))
    bar = progress_bar(total=len(tasks), desc=f"tasks ({jobs} workers)", leave=True)

    def say(message: str, failure: bool = False) -> None:
        if failure or not quiet:
            bar.write(message, file=sys.stderr)

    try:
        while queue or running:
            while queue and len(running) < jobs:
                chain = queue.pop(0)
                log = logdir / f"{chain[0].name}.log"
                cmd = [sys.executable, "-m", "relbench.cli", "run", str(suite.file), "--no-leaderboard",
                       *extra_args, *[arg for t in chain for arg in ("--task", t.name)]]
                with open(log, "w") as fh:
                    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
                running.append((proc, chain, log))
                say(f"worker {proc.pid}: {', '.join(t.name for t in chain)}")
            time.sleep(0.5)
            for item in list(running):
                proc, chain, log = item
                if proc.poll() is None:
                    continue
                running.remove(item)
                bar.update(len(chain))
                code = proc.returncode
                if code < 0:  # killed by a signal (e.g. out of memory): a failure, never success
                    say(f"  [{chain[0].dataset.name}] worker {proc.pid} was killed by signal {-code}; "
                        f"its finished units are stored, run again to resume. Log: {log}", failure=True)
                    code = 1
                worst = max(worst, code)
                lines = [ln for ln in log.read_text(errors="replace").replace("\r", "\n").splitlines()
                         if ln.startswith(("== task", "encoded ", "ran ", "  - ", "relbench: error", "warning"))
                         or "failures" in ln or "not achievable" in ln]
                say("\n".join(f"  [{chain[0].dataset.name}] {ln}" for ln in lines), failure=code != 0)
    except KeyboardInterrupt:
        for proc, _, _ in running:
            proc.wait()
        return 130
    finally:
        bar.close()
    if worst == 0:
        shutil.rmtree(logdir, ignore_errors=True)  # kept when something failed, for its full log
    else:
        say(f"worker logs: {logdir}", failure=True)
    return worst
