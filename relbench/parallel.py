"""``relbench run --jobs N``: a suite's tasks in N worker processes.

Most of an evaluation is many small decoder fits, bound by one core's Python overhead,
so N processes use N cores where one process with N threads cannot. Every task runs in
its own worker, heaviest first (:func:`estimated_seconds`: the task's units to compute
times the seconds its units took when last computed, so a long task starts early and
does not finish alone at the end). Tasks often read the same embedding banks (one
encoder's pool of one data set), and a worker encodes every bank its task reads before
its first unit: so a task waits while a bank it reads is neither cached nor finished by
a running task that reads it too (:func:`next_ready`), and then reads what that task
encoded instead of encoding it a second time. Every worker runs its task through the
runner (:mod:`relbench.worker`, never the command line again) with one torch thread:
results go to per-task files, so workers never write the same file, and the embedding
cache is written atomically. A worker's job (a :class:`~relbench.worker.WorkerJob`)
carries the user's own command line, which its rows record, and names the file it
writes its :class:`~relbench.run_summary.RunSummary` to; the parent adds the summaries
up (:func:`~relbench.run_summary.merged`) into the same accounting a serial run prints.

Cores no worker uses go to the running ones (:func:`thread_shares`): when fewer tasks
run than there are workers (the tail of a suite, or while the others wait for banks),
the ``jobs`` threads are shared out among the running workers, and taken back when a
new task starts. A worker learns its share from a file (:data:`THREADS_ENV`) and a
SIGUSR1 (:func:`_follow_thread_share`). The share changes how fast a unit runs and, through
the summation order of matrix products, the last bits of what it computes
(``benchmarks/irp_sensitivity.py`` measures how far that moves each stitcher's cells).

Workers never outlive the run: each starts through this module's ``__main__``, which
first arms a parent-death signal (:func:`_die_with_parent`), so killing the parent, even
with SIGKILL, ends them and a restarted run never works beside orphans. Workers stay in
the parent's process group, so a terminal's Ctrl-C (and Ctrl-Z) reaches every one of
them at once; a SIGINT sent to the parent alone is forwarded (:func:`_stop`).
"""

from __future__ import annotations

import os
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

from relbench.threads import thread_variables

if TYPE_CHECKING:  # only for annotations: a worker imports this module before anything heavy
    from relbench.run_summary import RunSummary
    from relbench.task_model import Task
    from relbench.worker import WorkerJob

#: Seconds interrupted workers get to stop on their own, then seconds terminated ones get to end:
#: Ctrl-C ends a run within 2 s. A unit cut short is not stored; one stored is whole (one write).
STOP_GRACE, KILL_GRACE = 0.75, 0.5
#: Environment variable naming the file through which a worker learns its share of threads.
THREADS_ENV = "RELBENCH_THREADS_FILE"
#: ``prctl`` option: the signal the kernel sends this process when its parent dies (linux/prctl.h).
PR_SET_PDEATHSIG = 1


def grid_weight(task: Task) -> int:
    """A rough cost of a task from its shape: the number of units its kind plans
    (:meth:`~relbench.interfaces.TaskKind.plan`, from the task alone), at least 1."""
    return max(1, len(task.kind.build().plan(task)))


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


def thread_shares(running: list[str], threads: int) -> dict[str, int]:
    """``threads`` shared out among the ``running`` workers (in the order they started):
    ``threads // n`` each, one more for the first ``threads % n``, never fewer than one."""
    n = len(running)
    return {name: max(1, threads // n + (i < threads % n)) for i, name in enumerate(running)}


def next_ready(pending: list[Task], needs: dict[str, frozenset[str]], running: list[str],
               cached: Callable[[str], bool]) -> Task | None:
    """The first task of ``pending`` (heaviest first) that may start: none of the banks it
    reads (``needs``: bank keys per task) is both missing from the cache and read by a
    ``running`` task, which encodes it first. A task whose banks are unknown waits for
    nothing."""
    encoding = set().union(*(needs.get(name, frozenset()) for name in running))
    for task in pending:
        if not any(key in encoding and not cached(key) for key in needs.get(task.name, ())):
            return task
    return None


def run_parallel(tasks: list[Task], jobs: int, job: WorkerJob, quiet: bool = False,
                 weights: dict[str, float] | None = None, needs: dict[str, frozenset[str]] | None = None,
                 cached: Callable[[str], bool] | None = None,
                 units: tuple[int, Callable[[], int]] | None = None,
                 threads: int | None = None) -> tuple[int, RunSummary]:
    """Run ``tasks`` (in file order) in up to ``jobs`` worker processes, one task per
    worker, heaviest first by ``weights`` (seconds, :func:`estimated_seconds`; default:
    the grid's weight), a task waiting while a running one encodes a bank it reads
    (:func:`next_ready`; ``needs``: the bank keys each task reads, ``cached``: whether a
    key is in the embedding cache; without them no task waits); return the worst exit
    code and the workers' summaries merged in the order of ``tasks``.

    ``job`` is every worker's job but for its task and summary file (switched-off and
    extra plugins travel in the environment). Each worker's messages are kept in a log,
    and its progress and errors shown when it ends (with ``quiet``, only failures are).
    ``units``: the units to compute and a function counting those stored so far, for
    the suite bar (:class:`relbench.progress.SuiteBar`), which also names the running
    tasks; without it the bar counts tasks. ``threads``: every worker computes with
    exactly this many torch threads and idle cores are never shared out, so that each
    unit's thread count is known and its sums can be repeated bit for bit (None: one
    thread each, idle cores shared out, :func:`thread_shares`).
    """
    from relbench.progress import SuiteBar
    from relbench.run_summary import merged

    weights = weights or {t.name: float(grid_weight(t)) for t in tasks}
    needs, cached = needs or {}, cached or (lambda key: True)
    pending = sorted(tasks, key=lambda t: -weights.get(t.name, 0.0))  # stable: file order among equals
    env = {**os.environ, **thread_variables(threads or 1)}
    running: list[tuple[subprocess.Popen, Task, Path]] = []
    told: dict[str, int] = {}  # the thread share each running worker was last given
    worst, summaries = 0, []
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
                task = next_ready(pending, needs, [t.name for _, t, _ in running], cached)
                if task is None:  # the rest wait for banks a running task encodes
                    break
                pending.remove(task)
                log = logdir / f"{task.name}.log"
                cmd = [sys.executable, "-m", "relbench.parallel", str(os.getpid()), str(_job_file(logdir, task, job))]
                share = {} if threads else {THREADS_ENV: str(_share_file(logdir, task))}
                with open(log, "w") as fh:
                    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, preexec_fn=PREEXEC,
                                            env={**env, **share})
                running.append((proc, task, log))
                told[task.name] = threads or 1
                say(f"worker {proc.pid}: {task.name}")
            if not threads:
                _share_threads(running, jobs, told, logdir)
            time.sleep(0.5)
            suite_bar.reach(stored() if stored else ended)
            suite_bar.task(", ".join(t.name for _, t, _ in running))
            for item in list(running):
                proc, task, log = item
                if proc.poll() is None:
                    continue
                running.remove(item)
                told.pop(task.name, None)
                ended += 1
                code = proc.returncode
                if code < 0:  # killed by a signal (e.g. out of memory): a failure, never success
                    say(f"  [{task.name}] worker {proc.pid} was killed by signal {-code}; "
                        f"its finished units are stored, run again to resume. Log: {log}", failure=True)
                    code = 1
                worst = max(worst, code)
                summaries.append(_summary(logdir, task, code, log))
                lines = [ln for ln in log.read_text(errors="replace").replace("\r", "\n").splitlines()
                         if ln.startswith(("== task", "relbench: error", "warning"))]
                say("\n".join(f"  [{task.name}] {ln}" for ln in lines), failure=code != 0)
    except KeyboardInterrupt:
        _stop([proc for proc, _, _ in running])
        summaries += [_summary(logdir, task, 130, log) for _, task, log in running]
        return 130, merged(_in_order(summaries, tasks))
    finally:
        suite_bar.close()
    if worst == 0:
        shutil.rmtree(logdir, ignore_errors=True)  # kept when something failed, for its full log
    else:
        say(f"worker logs: {logdir}", failure=True)
    return worst, merged(_in_order(summaries, tasks))


def _in_order(summaries: list[RunSummary], tasks: list[Task]) -> list[RunSummary]:
    """``summaries`` in the order of their ``tasks`` (the tasks file's), as a serial run
    lists them, whatever order the workers ended in."""
    order = {task.name: i for i, task in enumerate(tasks)}
    return sorted(summaries, key=lambda summary: order.get(summary.task, len(order)))


def _job_file(logdir: Path, task: Task, job: WorkerJob) -> Path:
    """Write ``task``'s worker job (``job`` for that task, reporting to its
    :func:`_summary_file`) into ``logdir``; its path."""
    from dataclasses import replace

    path = logdir / f"{task.name}.job.json"
    path.write_text(replace(job, task=task.name, summary=str(_summary_file(logdir, task))).to_json())
    return path


def _summary_file(logdir: Path, task: Task) -> Path:
    """The file ``task``'s worker writes its summary to."""
    return logdir / f"{task.name}.summary.json"


def _summary(logdir: Path, task: Task, code: int, log: Path) -> RunSummary:
    """What ``task``'s worker, which ended with ``code``, reported; a worker that
    failed without reporting (killed) is a failure of its task naming its log."""
    from relbench.run_summary import RunSummary

    path = _summary_file(logdir, task)
    if path.is_file():
        return RunSummary.from_json(path.read_text())
    if code in (0, 130):
        return RunSummary(task.name)
    return RunSummary(task.name, failures=(f"{task.name}: its worker ended (exit {code}) without a summary; its "
                                           f"finished units are stored, run again to resume. Log: {log}",))


def _share_file(logdir: Path, task: Task) -> Path:
    """The file that holds ``task``'s worker's thread share."""
    return logdir / f"{task.name}.threads"


def _share_threads(running: list[tuple[subprocess.Popen, Task, Path]], jobs: int, told: dict[str, int],
                   logdir: Path) -> None:
    """Give each running worker its :func:`thread_shares` of the ``jobs`` threads, telling
    only those whose share changed: the share is written to the worker's file, then the
    worker is sent SIGUSR1 (posix only; elsewhere workers keep one thread)."""
    if os.name != "posix" or not running:
        return
    shares = thread_shares([task.name for _, task, _ in running], jobs)
    for proc, task, _ in running:
        if told.get(task.name) == shares[task.name]:
            continue
        path = _share_file(logdir, task)
        partial = path.with_suffix(".partial")
        partial.write_text(str(shares[task.name]))
        os.replace(partial, path)
        told[task.name] = shares[task.name]
        try:
            proc.send_signal(signal.SIGUSR1)
        except OSError:  # it has just ended: the loop will see it
            pass


def _ignore_share_signal() -> None:
    """In a new worker, before it runs Python: SIGUSR1 ignored until
    :func:`_follow_thread_share` handles it (a share sent that early is read from the
    file instead, never fatal)."""
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)


#: What a new worker runs before Python starts (posix: SIGUSR1 ignored; Windows has no
#: ``preexec_fn`` and no SIGUSR1, and its workers keep one thread).
PREEXEC = _ignore_share_signal if os.name == "posix" else None


def _follow_thread_share() -> None:
    """In a worker: follow the thread share the parent sends (SIGUSR1 after writing the
    file named by :data:`THREADS_ENV`), and read it once now for one sent before this
    handler existed. The share becomes torch's thread count (on the main thread, where
    the handler runs, between two Python instructions) and the OpenMP/MKL settings a
    later import of torch reads."""
    path = os.environ.get(THREADS_ENV)
    if not path or os.name != "posix":
        return
    signal.signal(signal.SIGUSR1, lambda *_: apply_thread_share(Path(path)))
    apply_thread_share(Path(path))


#: Seconds after which a share that arrived while torch was being imported is applied again.
SHARE_RETRY_S = 0.2


def apply_thread_share(path: Path) -> None:
    """Make the share written in ``path`` torch's thread count and the OpenMP/MKL
    settings a later import reads. A signal handler runs between two instructions of
    whatever the main thread is doing, an ``import torch`` included: a module still
    being imported is left alone (calling into it, or an exception raised here, would
    abort that import and leave a torch without ``device``), and SIGUSR1 is sent again
    :data:`SHARE_RETRY_S` later, when the import has finished."""
    try:
        threads = max(1, int(path.read_text()))
    except (OSError, ValueError):
        return
    os.environ.update(thread_variables(threads))
    torch = sys.modules.get("torch")
    if torch is None:
        return
    if getattr(getattr(torch, "__spec__", None), "_initializing", False) or not hasattr(torch, "set_num_threads"):
        retry = threading.Timer(SHARE_RETRY_S, os.kill, (os.getpid(), signal.SIGUSR1))
        retry.daemon = True
        retry.start()
        return
    torch.set_num_threads(threads)


def _work(job_file: str) -> int:
    """A worker's task (:func:`relbench.worker.main`); its exit code. Thread shares are
    ignored once it ends: Python's shutdown gives a handled signal its default action
    back, and SIGUSR1's ends the process, so a share sent as the worker exits (another
    worker ending at that moment) would turn its success into death by signal."""
    from relbench.worker import main

    try:
        return main(job_file)
    finally:
        if os.name == "posix":
            signal.signal(signal.SIGUSR1, signal.SIG_IGN)


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


if __name__ == "__main__":  # a worker: python -m relbench.parallel PARENT_PID JOB_FILE
    _die_with_parent(int(sys.argv[1]))
    _follow_thread_share()
    sys.exit(_work(sys.argv[2]))
