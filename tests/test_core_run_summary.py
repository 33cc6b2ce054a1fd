"""Run summaries (relbench.run_summary): a task's accounting as data, read back equal
from JSON, merged by adding up, and rendered the same whichever executor ran the suite:
a `-j` run, whose workers run their task without the command line and report a summary,
prints what a serial run of the same suite prints, failed units included."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from relbench.run_summary import RunSummary, accounting, failure_list, merged

TESTS = Path(__file__).resolve().parent

A = RunSummary("a", planned=4, ran=3, reused=1, failed=1, seconds=1.5, encoded=2, cached=1, not_achievable=1,
               recomputed=(("unit.x", 2),), shared_computed=(("head", 1),), failures=("a {'item': 'y'}: boom",))
B = RunSummary("b", planned=2, ran=0, reused=1, missing=1, seconds=0.5, error="no such file",
               recomputed=(("unit.x", 1), ("dataset", 3)), shared_reused=(("head", 4),),
               peak_bytes=1_830_000_000, peak_process="the -j worker of b")


def test_a_summary_reads_back_equal_from_json():
    for summary in (A, B, RunSummary("empty")):
        text = summary.to_json()
        assert RunSummary.from_json(text) == summary and isinstance(text, str)


def test_merging_adds_counts_and_counters_and_keeps_failures_in_order():
    both = A.merge(B)
    assert (both.task, both.planned, both.ran, both.reused, both.failed, both.missing) == ("a, b", 6, 3, 2, 1, 1)
    assert both.seconds == 2.0 and both.encoded == 2 and both.cached == 1 and both.error == "no such file"
    assert dict(both.recomputed) == {"unit.x": 3, "dataset": 3}
    assert dict(both.shared_computed) == {"head": 1} and dict(both.shared_reused) == {"head": 4}
    assert both.failures == A.failures
    assert merged([A, B]) == both and merged([]) == RunSummary("")
    assert merged([A, A]).task == "a" and merged([A, A]).ran == 6


def test_merging_keeps_the_largest_process_peak_and_names_it():
    small = RunSummary("c", peak_bytes=500_000_000, peak_process="the -j worker of c")
    assert (A.merge(B).peak_bytes, A.merge(B).peak_process) == (1_830_000_000, "the -j worker of b")
    assert B.merge(small).peak_process == small.merge(B).peak_process == "the -j worker of b"
    assert A.merge(small).peak_bytes == 500_000_000 and A.peak_bytes == 0


def test_with_peak_adds_this_process_peak_as_the_system_reports_it():
    held = bytearray(64 * 2**20)
    held[::4096] = b"\1" * len(range(0, len(held), 4096))  # every page touched: resident
    status = Path("/proc/self/status")
    if status.is_file():  # Linux: the peak since this program was executed
        own = next(int(line.split()[1]) * 1024 for line in status.read_text().splitlines()
                   if line.startswith("VmHWM:"))
    else:
        import resource

        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    summary = A.with_peak("this test")
    assert summary.peak_process == "this test" and summary.peak_bytes >= own >= len(held)
    assert summary.ran == A.ran and summary.task == "a"  # nothing else changes
    assert B.with_peak("this test").peak_bytes >= own  # the larger of the two, whichever it is


def test_the_accounting_says_what_ran_was_reused_failed_and_missing():
    text = accounting(merged([A, B]))
    assert text.splitlines()[0] == (
        "encoded 2 (encoder, split) banks, reused 1 from the cache; ran 3 units (6 recomputed — 3: unit.x changed; "
        "3: dataset changed; -3 new, retried or forced), reused 2 already finished with the same identity. "
        "Shared work: head 1 computed, 4 reused.")
    assert "1 cells are not achievable by design" in text
    assert "1 units failed, 1 were not stored (the next run computes them)." in text
    assert "failed" not in accounting(RunSummary("ok", planned=2, ran=2))
    assert "peak memory of one process: 1.83 GB (the -j worker of b)." in text
    assert "peak memory" not in accounting(A)  # not measured: not said
    assert failure_list(A) == "\n1 failures:\n  - a {'item': 'y'}: boom" and failure_list(B) == ""


#: a toy kind whose unit (seed 1, item y) fails, and which records, per process that runs
#: it, whether that process imported the command line
FLAKY_PLUGIN = """\
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from relbench import hookimpl
from relbench.interfaces import ResultRow
from toy_plugins import Blobs, Tally


class FlakyBlobs(Blobs):
    name: ClassVar[str] = "flaky-blobs"


@dataclass
class Flaky(Tally):
    name: ClassVar[str] = "toy-flaky"

    def run(self, run):
        held = bytearray(2**30 if self.offset == 2 else 0)  # the task "second" holds 1 GiB, every page touched
        held[::4096] = b"\\1" * len(range(0, len(held), 4096))
        main = getattr(sys.modules["__main__"], "__spec__", None)  # `python -m relbench.cli` runs it as __main__
        cli = "relbench.cli" in sys.modules or getattr(main, "name", "") == "relbench.cli"
        Path(os.environ["CLI_PROBE"], str(os.getpid())).write_text(str(cli))
        for key in self.plan(run.task):
            if not run.is_done(key):
                with run.unit(key) as rows:
                    if (key["seed"], key["item"]) == (1, "y"):
                        raise RuntimeError("a flaky unit")
                    rows.append(ResultRow("score", key["seed"] + self.offset, "higher"))


@hookimpl
def relbench_datasets():
    return [FlakyBlobs]


@hookimpl
def relbench_task_kinds():
    return [Flaky]
"""
FLAKY_TASKS = """\
suite: {seeds: [0, 1], output: results, leaderboards: boards}
tasks:
  - {name: first, kind: {name: toy-flaky, params: {offset: 1}}, dataset: {name: flaky-blobs}}
  - {name: second, kind: {name: toy-flaky, params: {offset: 2}}, dataset: {name: flaky-blobs}}
  - {name: third, kind: toy-flaky, dataset: {name: flaky-blobs}}
"""


def _run(folder: Path, *args: str) -> tuple[int, str, dict[str, str]]:
    """`relbench run` of the flaky suite into ``folder`` (its own store): exit code, the
    end of its stderr from the accounting on, and what each process that ran a task
    recorded (pid → whether it had imported relbench.cli)."""
    folder.mkdir()
    (folder / "flaky_plugin.py").write_text(FLAKY_PLUGIN)
    (folder / "tasks.yaml").write_text(FLAKY_TASKS)
    probe = folder / "probe"
    probe.mkdir()
    env = {**os.environ, "RELBENCH_PLUGINS": "flaky_plugin", "CLI_PROBE": str(probe), "TMPDIR": str(folder),
           "RELBENCH_CACHE_DIR": str(folder / "cache"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), str(TESTS), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "relbench.cli", "run", "tasks.yaml", "--no-leaderboard", *args],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    err = done.stderr.replace("\r", "\n")
    end = err[err.index("\nencoded "):] if "\nencoded " in err else err
    return done.returncode, re.sub(r"\n(worker logs: .*)?\n*$", "", end), \
        {p.name: p.read_text() for p in probe.iterdir()}


#: the accounting's line on the largest process's peak memory
PEAK_LINE = r"\npeak memory of one process: ([0-9.]+) GB \((.*)\)\."


def _peak(end: str) -> tuple[float, str]:
    """The accounting's peak-memory line of ``end``: (GB, process)."""
    found = re.search(PEAK_LINE, end)
    assert found, end
    return float(found[1]), found[2]


@pytest.mark.skipif(os.name != "posix", reason="-j workers follow posix signals")
def test_a_parallel_run_reports_the_accounting_of_a_serial_run(tmp_path):
    serial_code, serial, serial_probe = _run(tmp_path / "serial")
    jobs_code, jobs, jobs_probe = _run(tmp_path / "jobs", "-j", "2")
    assert serial_code == jobs_code == 1  # one unit of each task failed
    serial_peak, jobs_peak = _peak(serial), _peak(jobs)
    assert re.sub(PEAK_LINE, "", jobs) == re.sub(PEAK_LINE, "", serial), (jobs, serial)  # but for the peak
    # the task "second" holds 1 GiB: the largest process is the one that ran it
    assert serial_peak[1] == "the run's own process" and jobs_peak[1] == "the -j worker of second"
    assert min(serial_peak[0], jobs_peak[0]) >= 1.07, (serial_peak, jobs_peak)
    assert "ran 12 units" in serial and "reused 0 already finished" in serial
    assert "3 units failed, 0 were not stored" in serial
    assert "3 failures:" in serial and serial.count("RuntimeError: a flaky unit") == 3
    assert list(serial_probe.values()) == ["True"]  # one process ran every task: the command line's
    assert len(jobs_probe) == 3 and set(jobs_probe.values()) == {"False"}  # workers never import it


def test_a_worker_says_a_user_error_in_one_line_exits_2_and_reports_it(tmp_path, capsys):
    from relbench import worker

    job = worker.WorkerJob(suite=str(tmp_path / "no-such-tasks.yaml"), command="relbench run", task="t",
                           summary=str(tmp_path / "t.summary.json"))
    (tmp_path / "t.job.json").write_text(job.to_json())
    assert worker.main(str(tmp_path / "t.job.json")) == 2
    err = capsys.readouterr().err
    assert err.startswith("relbench: error: ") and "no-such-tasks.yaml" in err and "Traceback" not in err
    summary = RunSummary.from_json((tmp_path / "t.summary.json").read_text())
    assert summary.task == "t" and "no-such-tasks.yaml" in summary.error and summary.ran == 0


def test_a_worker_that_ends_without_a_summary_is_a_failure_of_its_task(monkeypatch, tmp_path):
    import relbench.parallel as parallel
    from relbench.worker import WorkerJob
    from test_core_parallel import _task

    class Killed:  # a worker that died before reporting (out of memory …)
        pid, returncode = 4321, 1

        def __init__(self, cmd, **kwargs):
            pass

        def poll(self):
            return 1

        def send_signal(self, sig):
            pass

    monkeypatch.setattr(parallel.subprocess, "Popen", Killed)
    monkeypatch.setattr(parallel.time, "sleep", lambda s: None)
    job = WorkerJob(suite=str(tmp_path / "tasks.yaml"), command="relbench run")
    code, summary = parallel.run_parallel([_task("lost", "a")], 1, job, quiet=True)
    assert code == 1 and summary.task == "lost"
    [failure] = summary.failures
    assert failure.startswith("lost: its worker ended (exit 1) without a summary") and "lost.log" in failure


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="platform guard: Linux's /proc")
def test_a_worker_forked_from_a_large_process_reports_its_own_peak_not_its_parents():
    """``-j`` workers are forked (a pre-exec hook) and executed: ``getrusage``'s peak
    carries the parent's resident pages across ``execve``, the peak of the executed
    program does not."""
    held = bytearray(768 * 2**20)
    held[::4096] = b"\1" * len(range(0, len(held), 4096))
    probe = ("import resource, sys; from relbench.run_summary import process_peak_bytes; "
             "print(process_peak_bytes(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)")
    out = subprocess.run([sys.executable, "-c", probe], preexec_fn=lambda: None, capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    own, inherited = map(int, out)
    assert inherited >= len(held) > 3 * own, (own, inherited)  # the child itself holds a few tens of MB
    del held
