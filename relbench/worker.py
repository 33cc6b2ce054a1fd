"""One ``relbench run -j`` worker: one task through the runner, its summary for the parent.

The parent (:func:`relbench.parallel.run_parallel`) writes a :class:`WorkerJob` as JSON
and starts ``python -m relbench.parallel PARENT_PID JOB_FILE``; the worker runs the task
with :class:`relbench.runner.Runner` directly (never through the command line) and
writes its :class:`~relbench.run_summary.RunSummary` as JSON to the file the job names,
interrupted or not. Its exit code says the same as ``relbench run``'s: 0, 1 (units or
the task failed), 2 (a user error, said as one ``relbench: error: …`` line) or 130
(interrupted; the units it finished are stored).
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from relbench.errors import UserError
from relbench.run_summary import EXIT_FAILURES, EXIT_INTERRUPTED, EXIT_OK, RunSummary, interrupted


@dataclass(frozen=True)
class WorkerJob:
    """What a worker runs and where it reports."""

    suite: str  #: absolute path of the tasks file
    command: str  #: the command the user typed, recorded in the rows
    task: str = ""  #: the name of the task to run
    summary: str = ""  #: the file the worker writes its summary to
    output: str | None = None  #: the results directory, when not the suite's
    force: bool = False  #: recompute every unit
    quiet: bool = False  #: print nothing but errors

    def to_json(self) -> str:
        """This job as JSON (:meth:`from_json` reads it back)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerJob:
        """The job :meth:`to_json` wrote."""
        return cls(**json.loads(text))


def exact_pattern(name: str) -> str:
    """``name`` as a task pattern matching exactly itself: ``*``, ``?`` and ``[`` each
    wrapped in brackets (task names are validated to never hold them: a safety net)."""
    return re.sub(r"([*?[])", r"[\1]", name)


def main(job_file: str) -> int:
    """Run the job written in ``job_file``, write its summary, return the exit code."""
    job = WorkerJob.from_json(Path(job_file).read_text())
    summary, code = run_task(job)
    summary = summary.with_peak(f"the -j worker of {job.task}")
    partial = Path(job.summary + ".partial")
    partial.write_text(summary.to_json())
    os.replace(partial, job.summary)
    return code


def run_task(job: WorkerJob) -> tuple[RunSummary, int]:
    """Run ``job``'s task; its summary and the exit code. A user error is said as
    ``relbench: error: …`` and summarised by its message; an interrupted run says how
    many units it stored."""
    from relbench.console import set_quiet

    set_quiet(job.quiet)
    runner = None
    try:
        runner = _runner(job)
        runner.run()
    except UserError as exc:
        print(f"relbench: error: {exc}", file=sys.stderr)
        return RunSummary(job.task, error=str(exc)), exc.exit_code
    except KeyboardInterrupt:
        summary = runner.summary() if runner else RunSummary(job.task)
        print(interrupted(summary, runner.store.root if runner else job.output or "the results store"),
              file=sys.stderr)
        return summary, EXIT_INTERRUPTED
    summary = runner.summary()
    return summary, EXIT_FAILURES if summary.failures else EXIT_OK


def _runner(job: WorkerJob):
    """A runner over ``job``'s task alone; plugins are switched on and off through the
    environment the parent passed on."""
    from relbench.config import load_suite
    from relbench.plugins import load_registry
    from relbench.runner import Runner

    registry = load_registry([], [])
    return Runner(load_suite(Path(job.suite), registry), registry, force=job.force, quiet=job.quiet,
                  only=[exact_pattern(job.task)], output=Path(job.output) if job.output else None,
                  command=job.command)
