"""The runner: tasks → cached banks → task kinds → results store.

:class:`Runner` walks the validated suite; for each task it builds a
:class:`~relbench.task_run.TaskRun`, the service object a
:class:`~relbench.interfaces.TaskKind` works through (cached embeddings per (encoder,
split), anchors per (seed, selector, held-out set), a results sink that skips finished
units, figure paths and progress bars), plans every task before any work, then computes
each task's missing units under the task's lock in the results store. A task that fails
on a user error (e.g. an encoder returning NaN) is recorded and the run goes on to the next.
"""

from __future__ import annotations

import copy
import fnmatch
import os
import sys
import time
import traceback
import uuid
from pathlib import Path

from relbench.cache import EmbeddingCache
from relbench.descriptions import DataSets, Descriptions
from relbench.encoding import check_device
from relbench.errors import ConfigError, OutputNotWritable, UserError
from relbench.interfaces import DatasetData, ResultRow
from relbench.plugins import Registry
from relbench.precision import running_at
from relbench.progress import SuiteBar
from relbench.protocol import Draw
from relbench.results import ResultStore
from relbench.rows import TASK_ERROR, flat_row
from relbench.run_summary import RunStats, RunSummary, merged, task_summary
from relbench.task_model import PluginSpec, Suite, Task
from relbench.task_plan import PlannedUnit
from relbench.task_run import TaskRun


class Runner:
    """Runs every task of a suite, resuming from the results store."""

    def __init__(self, suite: Suite, registry: Registry, *, force: bool = False, quiet: bool = False,
                 only: list[str] | None = None, output: Path | None = None, command: str = ""):
        self.suite = suite
        self.registry = registry
        self.force = force
        self.quiet = quiet
        self.only = only
        self.store = ResultStore(output or suite.output)
        if suite.cache_dir is not None:
            # data sets and word tables keep their extractions under the same folder; they
            # (and --jobs workers) read it from the environment, like the embedding cache
            os.environ["RELBENCH_CACHE_DIR"] = str(suite.cache_dir)
        self.cache = EmbeddingCache(suite.cache_dir)
        self.descriptions = Descriptions(self.cache.root / "descriptions")
        self.stats = RunStats()
        #: per task, what this run did to it (:meth:`summary`): tasks computed, or failed in planning
        self.summaries: dict[str, RunSummary] = {}
        self._scheduled: list[TaskRun] = []  # the tasks :meth:`run` planned, in order
        self.run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
        self.datasets = DataSets(self.descriptions)  #: every data set once per run, whatever reads it
        #: each seed's draw of a data set under a protocol (by data fingerprint, protocol, seed), shared by its tasks
        self.draws: dict[tuple[str, str, int], Draw] = {}
        self._task_runs: dict[str, TaskRun] = {}  # planned tasks, kept for the pages drawn after the run
        #: the suite-level bar (:class:`relbench.progress.SuiteBar`), made by :meth:`run`
        self.bar = SuiteBar(0, quiet=True)
        self.command = command or "relbench run " + str(suite.file)

    def say(self, message: str) -> None:
        """Print a progress message (to stderr, above the bars)."""
        if not self.quiet:
            from tqdm.auto import tqdm

            tqdm.write(message, file=sys.stderr)

    def tasks(self) -> list[Task]:
        """The tasks selected by ``only`` (names or glob patterns such as ``fashion-*``;
        all by default), in the tasks file's order."""
        if not self.only:
            return self.suite.tasks
        names = [t.name for t in self.suite.tasks]
        for pattern in self.only:
            if not fnmatch.filter(names, pattern):
                from relbench.plugins import did_you_mean

                raise ConfigError(f"--task {pattern!r} matches no task of {self.suite.file}; "
                                  f"{did_you_mean(pattern, names)}")
        return [t for t in self.suite.tasks if any(fnmatch.fnmatchcase(t.name, p) for p in self.only)]

    def dataset(self, spec: PluginSpec) -> DatasetData:
        """A data set, loaded (or described) once per run (:meth:`DataSets.get`)."""
        return self.datasets.get(spec)

    def plans(self, lenient: bool = False) -> list[TaskRun]:
        """A :class:`TaskRun` per selected task with its plan made: every identity is
        computed and every user error that the data reveal (a missing asset, too many
        anchors, a view the data set lacks) is raised here, before any work. A task
        whose planning fails on a bug (a plugin raising anything else) is recorded as a
        failed task and left out; the others go on. ``lenient`` (``--dry-run``) keeps a
        task whose user error stops its planning, with the message in ``unavailable``."""
        runs = []
        for task in self.tasks():
            check_device(task.device)  # `device: cuda` without a GPU stops the run before any work
            task_run = self._task_runs.get(task.name) or TaskRun(self, task)
            try:
                task_run.replan()  # identities are computed once per run; the store is read again if it changed
                self._task_runs[task.name] = task_run
            except UserError as exc:
                if not lenient:
                    raise
                task_run.unavailable = str(exc)
            except Exception as exc:  # noqa: BLE001 - a plugin's bug fails its task, not the run
                self.summaries[task.name] = RunSummary(task.name, failures=(self.task_failed(task_run, exc),))
                continue
            runs.append(task_run)
        return runs

    def clear_task_error(self, task: Task) -> None:
        """A task that now plans and finishes clears the error an earlier run recorded."""
        lines = self.store.read(task.name)
        if TASK_ERROR in lines.units and TASK_ERROR not in lines.done:
            self.store.append(task.name, TASK_ERROR, [], self.run_id)

    def task_failed(self, task_run: TaskRun, exc: Exception) -> str:
        """Record a whole task's failure (once per run): message, summary line, error row;
        return the summary line."""
        task = task_run.task
        message = f"{type(exc).__name__}: {exc}" if not isinstance(exc, UserError) else str(exc)
        if not isinstance(exc, UserError):
            message += "\n" + "".join(traceback.format_exception(exc)[-4:])
        line = f"{task.name}: {message.splitlines()[0]}"
        if line in self.stats.failures:
            return line
        self.stats.failures.append(line)
        self.say(f"task {task.name} failed: {message}")
        row = ResultRow(metric="error", value=None, direction="neutral", status="error", error=message)
        self.store.append(task.name, TASK_ERROR, [flat_row(task, task_run.kind, row, {}, {})], self.run_id)
        return line

    def run(self) -> RunStats:
        """Plan every selected task, then compute what is not done; return the counters.

        Units stored with their current identity are reused; a task with nothing to do
        loads no embeddings. A task that raises is recorded as a task-level error row
        and the run goes on to the next task; the units it finished before failing are
        kept. A user error (bad data, missing asset) is stored as its message; anything
        else also keeps the end of its traceback, since it points at a bug in a plugin
        or in relbench. The task-level error is cleared when a later run finishes the task.

        Runs sharing a results store share the work: a task is computed under a lock
        (:meth:`ResultStore.lock`, released by the system when its holder dies, so never
        stale); a task another run holds is taken up after the others, once that run is
        done with it, and only its units still missing are computed.
        """
        plans = self.plans()  # user errors before anything is written
        self._scheduled = plans
        self.store.ensure_writable()
        self.cache.ensure_writable()
        self.bar = SuiteBar(sum(len(tr.plan().todo) for tr in plans), self.quiet)
        try:
            self._run(plans)
        finally:
            self.bar.close()
        return self.stats

    def _run(self, plans: list[TaskRun]) -> None:
        waiting = []
        for task_run in plans:
            with self.store.lock(task_run.task.name, wait=False) as held:
                if held:
                    task_run.replan()  # another run may have finished units since we planned
                    self.compute(task_run)
                else:
                    waiting.append(task_run)
        for task_run in waiting:
            self.say(f"task {task_run.task.name} is being computed by another relbench run on this store; "
                     f"waiting for it, then computing what it left")
            with self.store.lock(task_run.task.name, wait=True):
                task_run.replan()
                self.compute(task_run)

    def todo(self, task_run: TaskRun) -> list[PlannedUnit]:
        """The task's units still to compute, counting the others as reused; a task with
        none left clears the error an earlier run recorded."""
        plan = task_run.plan()
        todo = plan.todo
        self.stats.units_skipped += len(plan.units) - len(todo)
        if not todo:
            self.clear_task_error(task_run.task)
        return todo

    def compute(self, task_run: TaskRun) -> None:
        """Compute the units of one task that are not done (the caller holds its lock),
        and record what this run did to it in :attr:`summaries`, interrupted or not."""
        before, t0, failed = copy.deepcopy(self.stats), time.perf_counter(), False
        todo = self.todo(task_run)
        try:
            if todo:
                failed = self._compute(task_run, len(todo))
        finally:
            plan = task_run.plan()
            left = sum(u.id not in plan.done for u in todo)  # units of ``todo`` left unstored
            self.summaries[task_run.task.name] = task_summary(task_run.task.name, len(plan.units), len(todo), left,
                                                              before, self.stats, time.perf_counter() - t0, failed)

    def _compute(self, task_run: TaskRun, todo: int) -> bool:
        """Run the task's kind over its ``todo`` units; whether the task failed as a whole."""
        task, plan = task_run.task, task_run.plan()
        t0, failed = time.perf_counter(), False
        self.say(f"== task {task.name} ({task.kind.label}): {todo} of {len(plan.units)} units to compute ==")
        self.bar.task(task.name)
        try:
            with running_at(task.precision):
                task_run.kind.run(task_run)
        except (KeyboardInterrupt, OutputNotWritable):  # a full disk ends the run: nothing more can be stored
            raise
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a failing task is data; the next task runs
            if isinstance(exc, SystemExit):
                exc = RuntimeError(f"a plugin called sys.exit({exc.code!r}) while task {task.name!r} ran")
            self.task_failed(task_run, exc)
            failed = True
        else:
            self.clear_task_error(task)
        finally:
            task_run.release()
        self.say(f"== task {task.name} finished in {time.perf_counter() - t0:.1f}s ==")
        return failed

    def summary(self) -> RunSummary:
        """What this run did, every task's :attr:`summaries` merged; a task :meth:`run`
        planned but never reached (the run was interrupted first) counts its units to
        compute as missing."""
        parts = dict(self.summaries)
        for task_run in self._scheduled:
            if task_run.task.name not in parts:
                plan = task_run.plan()
                parts[task_run.task.name] = RunSummary(task_run.task.name, planned=len(plan.units),
                                                       reused=len(plan.units) - len(plan.todo),
                                                       missing=len(plan.todo))
        return merged(list(parts.values()))
