"""``relbench run --jobs N``: a suite's tasks in N worker processes.

Most of an evaluation is many small decoder fits, bound by one core's Python overhead,
so N processes use N cores where one process with N threads cannot. Every task runs in
its own worker, heaviest first (:func:`estimated_seconds`: the task's units to compute
times the seconds its units took when last computed, so a long task starts early and
does not finish alone at the end). Tasks over the same data usually share encoders, so
while a data set's pools are not all cached, the first task of that data set (its
*leader*, in file order) runs before the others start: it encodes the pools once and
they read the cache. Every worker is a ``relbench run --task=…`` process with one torch
thread: results go to per-task files, so workers never write the same file, and the
embedding cache is written atomically. Workers record the user's own command line
(passed in :data:`COMMAND_ENV`) in their rows, not their internal one.

Workers never outlive the run: each starts through this module's ``__main__``, which
first arms a parent-death signal (:func:`_die_with_parent`), so killing the parent, even
with SIGKILL, ends them and a restarted run never works beside orphans. Workers stay in
the parent's process group, so a terminal's Ctrl-C (and Ctrl-Z) reaches every one of
them at once; a SIGINT sent to the parent alone is forwarded (:func:`_stop`).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only for annotations: a worker imports this module before anything heavy
    from relbench.config import Suite, Task

#: Environment variable through which a worker learns the command the user typed.
COMMAND_ENV = "RELBENCH_RUN_COMMAND"
#: Seconds interrupted workers get to stop on their own, then seconds terminated ones get to end:
#: Ctrl-C ends a run within 2 s. A unit cut short is not stored; one stored is whole (one write).
STOP_GRACE, KILL_GRACE = 0.75, 0.5
#: ``prctl`` option: the signal the kernel sends this process when its parent dies (linux/prctl.h).
PR_SET_PDEATHSIG = 1


def grid_weight(task: Task) -> int:
    """A rough cost of a task from its shape: encoders × seeds × grid points."""
    return (max(1, len(task.encoders)) * len(task.seeds) * max(1, len(task.similarities)) *
            max(1, len(task.stitchers)) * max(1, len(task.selectors)))


def estimated_seconds(tasks: list[Task], todo: dict[str, int], measured: dict[str, list[float]]) -> dict[str, float]:
    """How long each task should take: its ``todo`` units times the mean seconds of its
    ``measured`` units (the last time they were computed, whatever their protocol).
    Tasks never measured get the median measured seconds per unit of the others, scaled
    by their grid's weight relative to the measured ones' (or the grid weight alone
    when nothing was ever measured)."""
    per_unit = {name: sum(v) / len(v) for name, v in measured.items() if v}
    out = {}
    known = [t for t in tasks if t.name in per_unit]
    for task in tasks:
        units = max(1, todo.get(task.name, 1))
        if task.name in per_unit:
            out[task.name] = units * per_unit[task.name]
        elif known:
            ratio = sorted(per_unit[t.name] / grid_weight(t) for t in known)[len(known) // 2]
            out[task.name] = units * ratio * grid_weight(task)
        else:
            out[task.name] = float(grid_weight(task))
    return out


def next_ready(pending: list[Task], leaders: dict[str, str], done_leaders: set[str]) -> Task | None:
    """The first task of ``pending`` (heaviest first) that may start: a data set's
    leader, or a task whose leader has ended."""
    for task in pending:
        data = task.dataset.name
        if leaders[data] == task.name or data in done_leaders:
            return task
    return None


def run_parallel(suite: Suite, tasks: list[Task], jobs: int, extra_args: list[str], command: str,
                 quiet: bool = False, weights: dict[str, float] | None = None,
                 encoded: frozenset[str] = frozenset(), units: tuple[int, Callable[[], int]] | None = None) -> int:
    """Run ``tasks`` (in file order) in up to ``jobs`` worker processes, one task per
    worker, heaviest first by ``weights`` (seconds, :func:`estimated_seconds`; default:
    the grid's weight; a data set's leader counts with the tasks that wait for it), each
    data set's leader before the rest of its tasks, except for the data sets named in
    ``encoded`` (every pool their tasks read is cached already); return the worst exit
    code.

    ``extra_args`` are passed to every worker's ``relbench run`` (``--force``,
    ``--output``, ``-q``; switched-off and extra plugins travel in the environment);
    ``command`` is what the workers record as the command that produced their rows.
    Each worker's messages are kept in a log and shown when it ends (with ``quiet``,
    only failures are). ``units``: the units to compute and a function counting those
    stored so far, for the suite bar (:class:`relbench.progress.SuiteBar`), which also
    names the running tasks; without it the bar counts tasks.
    """
    from relbench.progress import SuiteBar

    weights = weights or {t.name: float(grid_weight(t)) for t in tasks}
    leaders: dict[str, str] = {}
    for task in tasks:
        leaders.setdefault(task.dataset.name, task.name)
    # a leader carries the weight of the tasks that wait for it (the path it starts)
    priority = {t.name: weights.get(t.name, 0.0) for t in tasks}
    for task in tasks:
        if leaders[task.dataset.name] != task.name and task.dataset.name not in encoded:
            priority[leaders[task.dataset.name]] += weights.get(task.name, 0.0)
    pending = sorted(tasks, key=lambda t: -priority[t.name])  # stable: file order among equals
    done_leaders: set[str] = set(encoded)  # nothing to encode: their tasks need not wait
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", COMMAND_ENV: command}
    running: list[tuple[subprocess.Popen, Task, Path]] = []
    worst = 0
    logdir = Path(tempfile.mkdtemp(prefix="relbench-jobs-"))
    total, stored = units or (len(tasks), None)
    suite_bar = SuiteBar(total, quiet, f"suite ({jobs} workers)")
    bar = suite_bar.bar
    ended = 0

    def say(message: str, failure: bool = False) -> None:
        if failure or not quiet:
            bar.write(message, file=sys.stderr)

    try:
        while pending or running:
            while pending and len(running) < jobs:
                task = next_ready(pending, leaders, done_leaders)
                if task is None:  # the rest wait for their data set's leader
                    break
                pending.remove(task)
                log = logdir / f"{task.name}.log"
                # one argv element per option, so no name or path is read as an option; an
                # absolute suite path cannot start with "-"; names are matched exactly, not as globs
                cmd = [sys.executable, "-m", "relbench.parallel", str(os.getpid()), "run", os.path.abspath(suite.file),
                       "--no-leaderboard", *extra_args, f"--task={_glob_escape(task.name)}"]
                with open(log, "w") as fh:
                    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
                running.append((proc, task, log))
                say(f"worker {proc.pid}: {task.name}")
            time.sleep(0.5)
            suite_bar.reach(stored() if stored else ended)
            suite_bar.task(", ".join(t.name for _, t, _ in running))
            for item in list(running):
                proc, task, log = item
                if proc.poll() is None:
                    continue
                running.remove(item)
                ended += 1
                if leaders[task.dataset.name] == task.name:
                    done_leaders.add(task.dataset.name)
                code = proc.returncode
                if code < 0:  # killed by a signal (e.g. out of memory): a failure, never success
                    say(f"  [{task.name}] worker {proc.pid} was killed by signal {-code}; "
                        f"its finished units are stored, run again to resume. Log: {log}", failure=True)
                    code = 1
                worst = max(worst, code)
                lines = [ln for ln in log.read_text(errors="replace").replace("\r", "\n").splitlines()
                         if ln.startswith(("== task", "encoded ", "ran ", "  - ", "relbench: error", "warning"))
                         or "failures" in ln or "not achievable" in ln]
                say("\n".join(f"  [{task.name}] {ln}" for ln in lines), failure=code != 0)
    except KeyboardInterrupt:
        _stop([proc for proc, _, _ in running])
        return 130
    finally:
        suite_bar.close()
    if worst == 0:
        shutil.rmtree(logdir, ignore_errors=True)  # kept when something failed, for its full log
    else:
        say(f"worker logs: {logdir}", failure=True)
    return worst


def _glob_escape(name: str) -> str:
    """``name`` as a ``--task`` pattern matching exactly itself: ``*``, ``?`` and ``[``
    each wrapped in brackets (task names are validated to never hold them: a safety net)."""
    return re.sub(r"([*?[])", r"[\1]", name)


def _stop(procs: list[subprocess.Popen], grace: float = STOP_GRACE) -> None:
    """Interrupt the workers as Ctrl-C does (SIGINT: each abandons the unit it is
    computing, finished ones are stored already), wait up to ``grace`` seconds (less on a
    second Ctrl-C), then terminate and at last kill the ones still running.

    After a terminal's Ctrl-C the workers get SIGINT twice (from the terminal and from
    here); a second KeyboardInterrupt only ends a worker sooner, which is harmless."""
    deadline = time.monotonic() + grace
    try:
        if os.name == "posix":  # on Windows a console's Ctrl-C reaches every worker, and nothing else can
            for proc in procs:
                proc.send_signal(signal.SIGINT)
        for proc in procs:
            proc.wait(max(0.0, deadline - time.monotonic()))
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        pass
    for proc in procs:
        proc.terminate()  # nothing for a worker that has ended
    for proc in procs:
        try:
            proc.wait(KILL_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _die_with_parent(parent: int) -> None:
    """Have this process sent SIGTERM when ``parent`` (the ``relbench run -j`` process
    that started it) dies, however it dies. Linux: ``prctl(PR_SET_PDEATHSIG)`` (strictly,
    the kernel signals when the thread that started this process ends; that thread waits
    in :func:`run_parallel` for its workers, so it ends only with its process); other
    POSIX systems: a thread polling for the parent every second. Where neither works
    (Windows) nothing is armed."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        armed = libc.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGTERM)) == 0
    else:
        armed = False
    if armed:
        if os.getppid() != parent:  # it died before prctl: the kernel will send nothing
            os.kill(os.getpid(), signal.SIGTERM)
    elif os.name == "posix":
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="relbench-parent").start()


def _watch_parent(parent: int) -> None:
    """SIGTERM this process once ``parent`` has ended (this process is then re-parented)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":  # a worker: python -m relbench.parallel PARENT_PID run …
    _die_with_parent(int(sys.argv[1]))
    from relbench.cli import main

    sys.exit(main(sys.argv[2:]))
