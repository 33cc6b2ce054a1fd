"""`relbench run -j N` workers: they die with their parent however it dies, a SIGINT to
the parent alone stops them in bounded time, task names reach them exactly through
their job files, and they report a typed summary, not log lines."""

from __future__ import annotations

import fnmatch
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import relbench.parallel as parallel
import toy_plugins
from relbench.testing import make_task
from relbench.worker import WorkerJob, exact_pattern

TESTS = Path(__file__).resolve().parent

#: Two tasks over two data sets (so two workers) whose encoder sleeps
#: SLEEPY_SECONDS (default: minutes).
SLOW_TASKS = """\
suite: {seeds: [0], num_anchors: 8, output: results, leaderboards: boards}
tasks:
"""
SLOW_TASK = """\
  - name: slow-{x}
    dataset: {{name: slow-blobs-{x}, params: {{seed: {seed}}}}}  # other data: other banks, none shared
    encoders:
      - {{name: sleepy, label: a, params: {{seed: 1}}}}
      - {{name: sleepy, label: b, params: {{seed: 2}}}}
    grid: {{selectors: [random], similarities: [cosine], stitchers: [relative]}}
    metrics: [accuracy]
"""
SLOW_PLUGIN = """\
import os
import time
from pathlib import Path
from typing import ClassVar

from relbench import hookimpl
from toy_plugins import Blobs, Rotated


class BlobsA(Blobs):
    name: ClassVar[str] = "slow-blobs-a"


class BlobsB(Blobs):
    name: ClassVar[str] = "slow-blobs-b"


class Sleepy(Rotated):
    name: ClassVar[str] = "sleepy"

    def encode(self, items, ctx):
        Path(f"encoding-{os.getpid()}").touch()  # in the run's folder: the test waits for these
        time.sleep(float(os.environ.get("SLEEPY_SECONDS", 120)))
        return super().encode(items, ctx)


@hookimpl
def relbench_datasets():
    return [BlobsA, BlobsB]


@hookimpl
def relbench_encoders():
    return [Sleepy]
"""


def _children(pid: int) -> set[int]:
    """Live (not zombie) processes whose parent is ``pid``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            state, ppid = stat.rpartition(")")[2].split()[:2]
            if int(ppid) == pid and state != "Z":
                found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def _default_sigint() -> None:
    """In the child: SIGINT back to its default action. A test run started in the
    background by a shell without job control inherits SIGINT ignored, and these tests
    are about what SIGINT does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_run(folder: Path, *args: str, sleep: float = 900) -> subprocess.Popen:
    """`relbench run -j 2` on the two slow tasks, in ``folder`` (its worker logs too)."""
    (folder / "slow_plugin.py").write_text(SLOW_PLUGIN)
    (folder / "tasks.yaml").write_text(SLOW_TASKS + SLOW_TASK.format(x="a", seed=0) + SLOW_TASK.format(x="b", seed=1))
    env = {**os.environ, "RELBENCH_PLUGINS": "slow_plugin", "SLEEPY_SECONDS": str(sleep), "TMPDIR": str(folder),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-m", "relbench.cli", "run", "tasks.yaml", "-j", "2", *args],
                            cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)


def test_workers_run_every_task_to_the_end(tmp_path):
    run = _start_run(tmp_path, "--no-leaderboard", sleep=0)
    try:
        _, err = run.communicate(timeout=120)
    finally:
        run.kill()  # nothing once it has ended; its workers die with it
        run.wait()
    assert "2 workers" in err and "ran 4 units" in err, err  # both tasks, added up
    assert {p.name for p in (tmp_path / "results").glob("slow-*")} == {"slow-a.jsonl", "slow-b.jsonl"}
    assert not list(tmp_path.glob("relbench-jobs-*"))  # logs of a run without failures are removed


@pytest.fixture
def slow_run(tmp_path):
    """Start `relbench run -j 2` on two slow tasks; yield (parent, worker pids) once both
    workers are encoding (sleeping for minutes); kill whatever is left afterwards."""
    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc")
    parent = _start_run(tmp_path)
    deadline = time.monotonic() + 120  # for start-up, torch imports included, on a busy 2-core machine
    workers: set[int] = set()
    try:
        started = _wait_for(lambda: len(_children(parent.pid)) >= 2, deadline - time.monotonic())
        assert started, parent.stderr.read() if parent.poll() is not None else "no workers yet"
        workers = _children(parent.pid)
        encoding = {tmp_path / f"encoding-{pid}" for pid in workers}
        assert _wait_for(lambda: all(f.exists() for f in encoding), deadline - time.monotonic())
        yield parent, workers
    finally:
        for pid in [parent.pid, *workers]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        parent.wait()


def test_workers_die_when_the_parent_is_killed(slow_run):
    parent, workers = slow_run
    parent.kill()
    parent.wait()
    assert _wait_for(lambda: not any(map(_alive, workers)), 30), "workers outlived their killed parent"


def test_sigint_to_the_parent_alone_stops_the_workers(slow_run, tmp_path):
    parent, workers = slow_run
    parent.send_signal(signal.SIGINT)
    try:
        code = parent.wait(timeout=60)  # not the workers' 900 s of work: they stop on SIGINT
    except subprocess.TimeoutExpired:
        pytest.fail("the interrupted parent waited for its workers' work")
    assert code == 130
    assert not any(map(_alive, workers))
    assert "interrupted" in parent.stderr.read()
    logs = list(tmp_path.glob("relbench-jobs-*/*.log"))
    assert len(logs) == 2 and all("\ninterrupted: " in log.read_text() for log in logs)  # stopped by SIGINT


def _spawn(script: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *args], stdout=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)


def test_stop_interrupts_then_terminates_then_kills():
    polite = _spawn("import time; print('up', flush=True); time.sleep(60)")
    deaf = _spawn("""
        import signal, time
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print('up', flush=True); time.sleep(60)""")
    stubborn = _spawn("""
        import signal, time
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)
        print('up', flush=True); time.sleep(60)""")
    procs = [polite, deaf, stubborn]
    try:
        for proc in procs:
            assert proc.stdout.readline() == "up\n"
        t0 = time.monotonic()
        parallel._stop(procs, grace=5.0)  # time enough for a polite process to stop on a busy machine
        assert time.monotonic() - t0 < 5.0 + parallel.KILL_GRACE + 10  # bounded
        assert polite.returncode == -signal.SIGINT  # an uncaught KeyboardInterrupt: it stopped on its own
        assert deaf.returncode == -signal.SIGTERM and stubborn.returncode == -signal.SIGKILL
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


#: A worker: arms the death signal (with sys.platform as given), then sleeps.
WORKER = """
    import os, sys, time
    sys.platform = sys.argv[1]
    from relbench.parallel import _die_with_parent
    _die_with_parent(os.getppid())
    print("armed", flush=True)
    time.sleep(60)"""
#: Its parent: starts it and prints its pid once armed, then sleeps.
PARENT = """
    import subprocess, sys, time
    worker = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], stdout=subprocess.PIPE, text=True)
    assert worker.stdout.readline() == "armed\\n"
    print(worker.pid, flush=True)
    time.sleep(60)"""


@pytest.mark.parametrize("platform", ["linux", "darwin"])
def test_die_with_parent_by_prctl_and_by_the_fallback(platform):
    """Killing the parent ends the worker: through prctl on Linux, through the polling
    thread elsewhere (here: sys.platform set to "darwin")."""
    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc")
    middle = _spawn(PARENT, textwrap.dedent(WORKER), platform)
    worker = None
    try:
        worker = int(middle.stdout.readline())
        middle.kill()
        middle.wait()
        assert _wait_for(lambda: not _alive(worker), 5), f"the worker outlived its parent ({platform})"
    finally:
        middle.kill()
        middle.wait()
        if worker and _alive(worker):
            os.kill(worker, signal.SIGKILL)


def _job_task(cmd) -> str:
    """The task a worker's command line runs: the one its job file names."""
    return WorkerJob.from_json(Path(cmd[-1]).read_text()).task


def _job(tmp_path, **settings) -> WorkerJob:
    return WorkerJob(suite=str(tmp_path / "tasks.yaml"), command="relbench run", **settings)


def test_task_names_reach_workers_exactly_through_their_job_files(monkeypatch, tmp_path):
    """Names that an option parser or a glob would misread (impossible for validated
    names, which is why this builds tasks by hand): each worker's command line is its
    parent's pid and its job file, whose task the worker selects as exactly one pattern
    that matches its own task and no other; the job's settings reach every worker."""
    names = ["-x", "--force", "a*", "b?", "c[1]", "d]", "run"]
    others = ["ab", "bb", "c1", "-xx", "a"]
    started = []

    class Worker:
        pid, returncode = 4242, 0

        def __init__(self, cmd, **kwargs):
            started.append((cmd, WorkerJob.from_json(Path(cmd[-1]).read_text())))  # the folder goes with the run

        def poll(self):
            return 0

        def send_signal(self, sig):  # a thread share for a worker that has ended already
            pass

    monkeypatch.setattr(parallel.subprocess, "Popen", Worker)
    tasks = [_task(n, n) for n in names]
    assert parallel.run_parallel(tasks, 2, _job(tmp_path, force=True), quiet=True)[0] == 0
    assert len(started) == len(names)
    for cmd, job in started:
        assert cmd[1:4] == ["-m", "relbench.parallel", str(os.getpid())] and len(cmd) == 5
        assert job.force and job.suite == str(tmp_path / "tasks.yaml") and job.summary.endswith(".summary.json")
        pattern = exact_pattern(job.task)
        assert [n for n in names + others if fnmatch.fnmatchcase(n, pattern)] == [job.task]
    assert sorted(job.task for _, job in started) == sorted(names)


def _task(name, data, seeds=1):
    """A task of the toy tally kind, which plans two units per seed."""
    return make_task(toy_plugins.Tally, name=name, dataset=data, seeds=list(range(seeds)))


def test_estimated_seconds_use_what_the_store_measured():
    light, heavy, new = _task("light", "a"), _task("heavy", "a"), _task("new", "b", seeds=2)
    est = parallel.estimated_seconds([light, heavy, new], {"light": 10, "heavy": 5, "new": 3},
                                     {"light": [1.0, 3.0], "heavy": [40.0], "new": []})
    assert est["light"] == 10 * 2.0 and est["heavy"] == 5 * 40.0
    # never measured: the median seconds per unit and grid weight of the measured ones (2 planned
    # units → 1.0 or 20.0 per weight unit; median of two is the upper), scaled by its own weight (4)
    assert est["new"] == 3 * 20.0 * 4
    assert parallel.estimated_seconds([new], {"new": 3}, {}) == {"new": 4.0}  # nothing measured: the grid


@pytest.fixture
def started(monkeypatch):
    """Stand-in workers that end at once: the task names, in the order they started."""
    names = []

    class Worker:
        returncode = 0

        def __init__(self, cmd, **kwargs):
            self.pid = 4000 + len(names)
            names.append(_job_task(cmd))

        def poll(self):
            return 0

        def send_signal(self, sig):  # a thread share for a worker that has ended already
            pass

    monkeypatch.setattr(parallel.subprocess, "Popen", Worker)
    monkeypatch.setattr(parallel.time, "sleep", lambda s: None)
    return names


THREE = [_task("a-lead", "a"), _task("b-only", "b"), _task("a-heavy", "a")]
WEIGHTS = {"a-lead": 1.0, "b-only": 50.0, "a-heavy": 100.0}


def test_tasks_start_heaviest_first(started, tmp_path):
    assert parallel.run_parallel(THREE, 1, _job(tmp_path), quiet=True, weights=WEIGHTS)[0] == 0
    assert started == ["a-heavy", "b-only", "a-lead"]


def test_store_reads_each_units_seconds_without_parsing_lines(registry, write_yaml):
    from test_core_runner import TASKS, _run

    runner, stats = _run(registry, write_yaml(TASKS))
    df = runner.store.load("blobs")
    expected = sorted(df.drop_duplicates("unit")["seconds"])
    assert sorted(runner.store.unit_seconds("blobs")) == expected and len(expected) == stats.units_done
    assert runner.store.unit_seconds("no-such-task") == []


def _scheduled(monkeypatch, tmp_path, lives: dict[str, int], needs: dict[str, frozenset[str]],
               cached_after: dict[str, tuple[str, int]], weights: dict[str, float]) -> list[tuple[str, str]]:
    """Run stand-in workers on two slots: each task ``name`` ends after ``lives[name]``
    polls; bank ``key`` of ``cached_after`` is cached once task ``name`` was polled ``n``
    times. The events, in order: ("start" | "end", task)."""
    events, polls = [], dict.fromkeys(lives, 0)

    class Worker:
        returncode = 0

        def __init__(self, cmd, **kwargs):
            self.name, self.pid = _job_task(cmd), 6000 + len(events)
            events.append(("start", self.name))

        def poll(self):
            polls[self.name] += 1
            if polls[self.name] >= lives[self.name]:
                events.append(("end", self.name))
                return 0
            return None

        def send_signal(self, sig):
            pass

    monkeypatch.setattr(parallel.subprocess, "Popen", Worker)
    monkeypatch.setattr(parallel.time, "sleep", lambda s: None)
    cached = lambda key: key in cached_after and polls[cached_after[key][0]] >= cached_after[key][1]  # noqa: E731
    tasks = [_task(name, "d") for name in lives]
    assert parallel.run_parallel(tasks, 2, _job(tmp_path), quiet=True, weights=weights, needs=needs,
                                 cached=cached)[0] == 0
    return events


def test_a_task_waits_while_a_running_task_encodes_a_bank_it_reads(monkeypatch, tmp_path):
    # heavy and second read bank x, free reads y: heavy starts and encodes x; second, next by
    # weight, waits for x, so free takes the other slot; second starts once x is cached,
    # while heavy still runs, and never encodes x itself
    events = _scheduled(monkeypatch, tmp_path, lives={"heavy": 20, "second": 3, "free": 2},
                        needs={"heavy": frozenset("x"), "second": frozenset("xz"), "free": frozenset("y")},
                        cached_after={"x": ("heavy", 5)}, weights={"heavy": 100.0, "second": 50.0, "free": 1.0})
    starts = [name for what, name in events if what == "start"]
    assert starts == ["heavy", "free", "second"]
    assert events.index(("start", "second")) < events.index(("end", "heavy"))


def test_a_bank_left_uncached_by_a_task_that_ended_no_longer_holds_others(monkeypatch, tmp_path):
    events = _scheduled(monkeypatch, tmp_path, lives={"first": 4, "second": 2},
                        needs={"first": frozenset("x"), "second": frozenset("x")}, cached_after={},
                        weights={"first": 2.0, "second": 1.0})
    assert events == [("start", "first"), ("end", "first"), ("start", "second"), ("end", "second")]


def test_bank_needs_name_the_cache_entries_a_run_encodes(registry, write_yaml):
    from test_core_runner import TASKS, _run

    from relbench.config import load_suite
    from relbench.runner import Runner

    path = write_yaml(TASKS)
    before = Runner(load_suite(path, registry), registry, quiet=True)
    [run] = before.plans()
    keys = [need.key for need in run.bank_needs()]
    assert keys and not any(before.cache.has(key) for key in keys)
    _run(registry, path)
    after = Runner(load_suite(path, registry), registry, quiet=True)
    [run] = after.plans()
    assert [need.key for need in run.bank_needs()] == keys and all(after.cache.has(key) for key in keys)
    assert after.stats.encoded == 0 and after.stats.cached == 0  # asking read and encoded nothing


def test_thread_shares_split_every_thread_among_the_running_workers():
    assert parallel.thread_shares(["a", "b"], 2) == {"a": 1, "b": 1}
    assert parallel.thread_shares(["a"], 2) == {"a": 2}
    assert parallel.thread_shares(["a", "b"], 5) == {"a": 3, "b": 2}  # the earlier started gets the spare
    assert parallel.thread_shares(["a", "b", "c"], 2) == {"a": 1, "b": 1, "c": 1}  # never fewer than one


def test_idle_cores_go_to_the_workers_still_running(monkeypatch, tmp_path):
    # two tasks of two data sets on two workers: while both run each has one thread; once
    # the short one ends, the long one is told (file, then SIGUSR1) to use both threads
    signals, lives = [], {"short": 2, "long": 6}

    class Worker:
        returncode = 0

        def __init__(self, cmd, env, preexec_fn, **kwargs):
            assert preexec_fn is parallel._ignore_share_signal  # an early SIGUSR1 cannot kill it
            self.name, self.pid, self.file = _job_task(cmd), 5000 + len(signals), \
                Path(env[parallel.THREADS_ENV])

        def poll(self):
            lives[self.name] -= 1
            return 0 if lives[self.name] <= 0 else None

        def send_signal(self, sig):
            signals.append((self.name, sig, int(self.file.read_text())))

    monkeypatch.setattr(parallel.subprocess, "Popen", Worker)
    monkeypatch.setattr(parallel.time, "sleep", lambda s: None)
    tasks = [_task("long", "a"), _task("short", "b")]
    assert parallel.run_parallel(tasks, 2, _job(tmp_path), quiet=True, weights={"long": 10.0, "short": 1.0})[0] == 0
    assert signals == [("long", signal.SIGUSR1, 2)]


def test_a_worker_takes_its_thread_share_from_the_file_and_the_signal(monkeypatch, tmp_path):
    import torch

    share = tmp_path / "task.threads"
    monkeypatch.setenv(parallel.THREADS_ENV, str(share))
    before, handler = torch.get_num_threads(), signal.getsignal(signal.SIGUSR1)
    try:
        parallel._follow_thread_share()  # no file yet: nothing changes
        assert torch.get_num_threads() == before
        share.write_text("2")
        os.kill(os.getpid(), signal.SIGUSR1)
        assert torch.get_num_threads() == 2 and os.environ["OMP_NUM_THREADS"] == "2"
        share.write_text("1")
        parallel._follow_thread_share()  # a share written before the handler existed is read at once
        assert torch.get_num_threads() == 1
    finally:
        signal.signal(signal.SIGUSR1, handler)
        torch.set_num_threads(before)


def test_a_worker_ignores_thread_shares_once_its_command_ended(monkeypatch):
    """Python's shutdown gives a handled signal its default action back, and SIGUSR1's
    ends the process: a share sent to a worker that had finished its task (the other
    worker ending at that moment) made it exit by signal 10, a failure. Once its command
    has returned, or raised, a worker ignores SIGUSR1."""
    import relbench.worker

    handler = signal.getsignal(signal.SIGUSR1)
    try:
        signal.signal(signal.SIGUSR1, lambda *_: None)
        monkeypatch.setattr(relbench.worker, "main", lambda job_file: 0)
        assert parallel._work("job.json") == 0
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN
        signal.signal(signal.SIGUSR1, lambda *_: None)
        monkeypatch.setattr(relbench.worker, "main", lambda job_file: (_ for _ in ()).throw(KeyboardInterrupt))
        with pytest.raises(KeyboardInterrupt):
            parallel._work("job.json")
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGUSR1, handler)


def test_fixed_threads_are_never_shared_out(monkeypatch, tmp_path):
    # as the release runs: every worker starts at the fixed count, and when one ends the
    # other keeps its count (no share file, no signal), so every row's count is exact
    started, signals, lives = [], [], {"short": 2, "long": 6}

    class Worker:
        returncode = 0

        def __init__(self, cmd, env, preexec_fn, **kwargs):
            self.name, self.pid = _job_task(cmd), 6000 + len(started)
            started.append((self.name, env["OMP_NUM_THREADS"], env["OPENBLAS_NUM_THREADS"],
                            parallel.THREADS_ENV in env))

        def poll(self):
            lives[self.name] -= 1
            return 0 if lives[self.name] <= 0 else None

        def send_signal(self, sig):
            signals.append(self.name)

    monkeypatch.delenv(parallel.THREADS_ENV, raising=False)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")  # a user's own count would outrank OMP_NUM_THREADS
    monkeypatch.setattr(parallel.subprocess, "Popen", Worker)
    monkeypatch.setattr(parallel.time, "sleep", lambda s: None)
    tasks = [_task("long", "a"), _task("short", "b")]
    assert parallel.run_parallel(tasks, 2, _job(tmp_path), quiet=True, weights={"long": 10.0, "short": 1.0},
                                 threads=1)[0] == 0
    assert started == [("long", "1", "1", False), ("short", "1", "1", False)] and signals == []


def test_threads_is_a_positive_count_for_local_runs_and_is_restored_after_a_run(cli_main, write_yaml, capsys):
    import torch

    from test_core_runner import TASKS

    path = write_yaml(TASKS)
    with pytest.raises(SystemExit) as exit_:
        cli_main(["run", str(path), "--threads", "0"])
    assert exit_.value.code == 2 and "positive whole number" in capsys.readouterr().err
    assert cli_main(["run", str(path), "--threads", "1", "--executor", "ray"]) == 2
    assert "Ray's workers choose their own" in capsys.readouterr().err
    before, omp = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    assert cli_main(["run", str(path), "--threads", "1", "-q", "--no-leaderboard"]) == 0
    assert torch.get_num_threads() == before and os.environ.get("OMP_NUM_THREADS") == omp


def test_a_share_that_arrives_during_the_import_of_torch_waits_for_the_import(monkeypatch, tmp_path):
    # a SIGUSR1 handled while the worker's main thread is inside ``import torch`` must not
    # call into the half-made module (that aborted the import: "module 'torch' has no
    # attribute 'device'"); it is sent again shortly and applied once the import finished
    import importlib.machinery
    import types

    share = tmp_path / "task.threads"
    share.write_text("2")
    calls, retries = [], []
    half = types.ModuleType("torch")
    half.__spec__ = importlib.machinery.ModuleSpec("torch", None)
    half.__spec__._initializing = True
    half.set_num_threads = calls.append

    class Timer:
        def __init__(self, delay, function, args):
            retries.append((delay, function, args))

        def start(self):
            pass

    monkeypatch.setitem(sys.modules, "torch", half)
    monkeypatch.setattr(parallel.threading, "Timer", Timer)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MKL_NUM_THREADS", "1")
    parallel.apply_thread_share(share)
    assert calls == [] and os.environ["OMP_NUM_THREADS"] == "2"  # a later import reads the share
    assert retries == [(parallel.SHARE_RETRY_S, os.kill, (os.getpid(), signal.SIGUSR1))]
    half.__spec__._initializing = False  # the import finished: the retry applies it
    parallel.apply_thread_share(share)
    assert calls == [2] and len(retries) == 1
