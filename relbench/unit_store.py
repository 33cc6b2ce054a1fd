"""A task's units as they are computed: each unit's rows, collected while the kind
computes it and stored atomically with its identity, its seconds and where it came from.

:class:`TaskUnits` says whether a unit is stored with its current identity, turns a
failing unit into an error row (the run goes on), and counts what it stored in the
run's statistics.
"""

from __future__ import annotations

import contextlib
import math
import time
import traceback
from collections.abc import Iterator
from typing import TYPE_CHECKING

from relbench import __version__
from relbench.errors import BadEmbeddings, UserError
from relbench.interfaces import ResultRow, UnitKey
from relbench.results import environment, git_revision
from relbench.rows import flat_row
from relbench.task_plan import PlannedUnit, shorten
from relbench.training import NonFinite

if TYPE_CHECKING:
    from relbench.task_run import TaskRun


class TaskUnits:
    """Stores the units of one task run in the results store."""

    def __init__(self, run: TaskRun):
        self.run = run
        self.runner = run.runner
        self.task = run.task
        self.kind = run.kind

    def is_done(self, key: UnitKey) -> bool:
        """Whether this unit is stored with its current identity (and not forced)."""
        return self.run.planner.planned(key).id in self.run.plan().done

    @contextlib.contextmanager
    def unit(self, key: UnitKey) -> Iterator[list[ResultRow]]:
        """Collect a unit's rows; store them atomically when the block succeeds, or
        store an error row (and go on) when it raises."""
        planned = self.run.planner.planned(key)
        rows: list[ResultRow] = []
        t0 = time.perf_counter()
        try:
            yield rows
            bad = next((r for r in rows if r.status == "ok" and (r.value is None or not math.isfinite(r.value))), None)
            if bad is not None:
                raise NonFinite(f"task kind {self.kind.name!r} produced {bad.value} for {bad.metric!r} "
                                f"(cell {bad.cell or planned.display}); a non-finite number is never scored")
            self.runner.stats.failures += [  # rows the kind failed alone (a faulty metric, one pair)
                f"{self.task.name} {planned.display} {r.cell}: {(r.error or 'error').splitlines()[0]}"
                for r in rows if r.status == "error"]
        except KeyboardInterrupt:
            raise
        except BadEmbeddings:
            raise
        except (Exception, SystemExit) as exc:  # a failing combination (even one calling sys.exit) is data
            if isinstance(exc, SystemExit):
                exc = RuntimeError(f"a plugin called sys.exit({exc.code!r}) while computing this unit")
            message = f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, UserError):
                message += "\n" + "".join(traceback.format_exception(exc)[-3:])
            rows[:] = [ResultRow(metric="error", value=None, direction="neutral", status="error", error=message)]
            self.runner.stats.failures.append(f"{self.task.name} {planned.display}: {type(exc).__name__}: {exc}")
        seconds = time.perf_counter() - t0
        stored = [self.row(r, planned, seconds) for r in rows]
        self.runner.store.append(self.task.name, planned.id, stored, self.runner.run_id,
                                 key=planned.display, inputs=planned.inputs)
        plan = self.run.plan()
        plan.done.add(planned.id)
        self.runner.stats.units_done += 1
        self.runner.stats.units_failed += any(r.status == "error" for r in rows)
        self.runner.bar.advance()
        if planned.id in plan.stale:
            self.runner.stats.recomputed[", ".join(shorten(plan.stale[planned.id]))] += 1
        self.runner.stats.not_achievable += sum(r.status == "not_achievable" for r in rows)

    def row(self, r: ResultRow, unit: PlannedUnit, seconds: float) -> dict:
        """A stored result row: the unit's columns and the row's cell flat, its number
        with its direction, and where it came from."""
        return flat_row(self.task, self.kind, r, unit.display, unit.inputs) | {
            "relbench": __version__, "git": git_revision(), "device": str(self.run.device),
            "precision": self.task.precision,
            "environment": environment(), "seconds": seconds, "command": self.runner.command}

