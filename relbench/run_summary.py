"""What a run did, as data: one :class:`RunSummary` per task, merged for a suite.

Every executor reports through it: the local runner makes one per task
(:meth:`relbench.runner.Runner.summary`), a ``-j`` worker writes its task's as JSON for
the parent (:mod:`relbench.worker`), a Ray shard returns its own
(:mod:`relbench.ray_executor`). :func:`accounting` and :func:`failure_list` render the
end of a run the same way whichever executor ran it.

A task's units fall in four parts: ``reused`` (stored with the same identity before
this run; ``from_release`` says how many of them ``relbench run --reuse`` took from a
published release just before, :mod:`relbench.reuse`), ``ran`` (computed in this run
and stored, ``failed`` ones included as their error rows), ``missing`` (neither
stored nor failed: interrupted, or lost with a worker) and the units a task that
failed as a whole left uncomputed, which count as ``failed`` too.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

#: exit codes of ``relbench run`` (and of its ``-j`` workers): everything finished, some units
#: or tasks failed, bad input, interrupted (finished work is stored; the same command resumes)
EXIT_OK, EXIT_FAILURES, EXIT_USER, EXIT_INTERRUPTED = 0, 1, 2, 130


@dataclass(frozen=True)
class RunSummary:
    """What one run did to one task (or, merged, to several; ``task`` then lists them)."""

    task: str
    planned: int = 0  #: units of the task's plan
    ran: int = 0  #: units computed and stored in this run (failed ones included)
    reused: int = 0  #: units stored with the same identity before this run
    failed: int = 0  #: units that failed: stored as error rows, or left by a task that failed as a whole
    missing: int = 0  #: planned units neither stored nor failed (interrupted, lost with their worker)
    seconds: float = 0.0  #: wall-clock seconds the task took
    error: str | None = None  #: a user error that stopped the task before any work (its message)
    encoded: int = 0  #: (encoder, split) banks encoded
    cached: int = 0  #: banks read from the embedding cache
    not_achievable: int = 0  #: cells not achievable by design
    recomputed: tuple[tuple[str, int], ...] = ()  #: units that replaced older ones, by the fields that changed
    shared_computed: tuple[tuple[str, int], ...] = ()  #: shared work computed, by what it is
    shared_reused: tuple[tuple[str, int], ...] = ()  #: shared work reused, by what it is
    #: units taken into the store from a published release before the run (counted in ``reused``), by release
    from_release: tuple[tuple[str, int], ...] = ()
    failures: tuple[str, ...] = ()  #: one line per failure (unit, cell or task)
    #: the highest peak resident memory of one process of the run, in bytes (0: not measured), and which process
    #: it was (``the -j worker of TASK``, ``a Ray worker``, ``the run's own process``); merged, the largest
    peak_bytes: int = 0
    peak_process: str = ""

    def to_json(self) -> str:
        """This summary as a JSON object (:meth:`from_json` reads it back equal)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> RunSummary:
        """The summary :meth:`to_json` wrote (keys it does not know are ignored)."""
        data = json.loads(text)
        pairs = {"recomputed", "shared_computed", "shared_reused", "from_release"}
        return cls(**{f.name: tuple(map(tuple, data[f.name])) if f.name in pairs else
                      tuple(data[f.name]) if f.name == "failures" else data[f.name]
                      for f in fields(cls) if f.name in data})

    def merge(self, other: RunSummary) -> RunSummary:
        """Both summaries as one: counts and seconds added, counters added by key,
        failures and errors one after the other, task names joined."""
        names = list(dict.fromkeys(n for s in (self, other) for n in s.task.split(", ") if n))
        errors = [e for e in (self.error, other.error) if e]
        peak = max((self, other), key=lambda s: s.peak_bytes)
        return RunSummary(
            task=", ".join(names), planned=self.planned + other.planned, ran=self.ran + other.ran,
            reused=self.reused + other.reused, failed=self.failed + other.failed,
            missing=self.missing + other.missing, seconds=self.seconds + other.seconds,
            error="\n".join(errors) or None, encoded=self.encoded + other.encoded,
            cached=self.cached + other.cached, not_achievable=self.not_achievable + other.not_achievable,
            recomputed=_add(self.recomputed, other.recomputed),
            shared_computed=_add(self.shared_computed, other.shared_computed),
            shared_reused=_add(self.shared_reused, other.shared_reused),
            from_release=_add(self.from_release, other.from_release), failures=self.failures + other.failures,
            peak_bytes=peak.peak_bytes, peak_process=peak.peak_process)

    def with_peak(self, process: str) -> RunSummary:
        """This summary with this process's peak memory (:func:`process_peak_bytes`)
        merged in under the name ``process``: the largest of the two is kept."""
        return self.merge(RunSummary("", peak_bytes=process_peak_bytes(), peak_process=process))


@dataclass
class RunStats:
    """Counters the runner reports at the end."""

    encoded: int = 0
    cached: int = 0
    units_done: int = 0
    #: units of ``units_done`` stored with an error row (the whole unit or one of its cells failed)
    units_failed: int = 0
    units_skipped: int = 0
    recomputed: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    not_achievable: int = 0
    #: shared work (:mod:`relbench.sharing`) by what it is: computed once, reused after
    shared_computed: Counter = field(default_factory=Counter)
    shared_reused: Counter = field(default_factory=Counter)


def process_peak_bytes() -> int:
    """The peak resident memory of this process so far, in bytes; 0 where the platform
    reports none. Its children are not counted: each process reports its own.

    On Linux, ``VmHWM`` of ``/proc/self/status``: the peak of this program's memory since
    it was executed. ``getrusage``'s ``ru_maxrss`` (used elsewhere: kilobytes, bytes on
    macOS) carries a forked child's peak across ``execve``, and a child forked from a
    large process starts with that process's resident pages, so a ``-j`` worker would
    report at least the run's size when it started the worker."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # kB
    try:
        import resource
    except ImportError:  # Windows
        return 0
    return (1 if sys.platform == "darwin" else 1024) * resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def task_summary(task: str, planned: int, todo: int, left: int, before: RunStats, now: RunStats, seconds: float,
                 failed: bool) -> RunSummary:
    """What computing ``todo`` of a task's ``planned`` units did, from the run's counters
    ``before`` it and ``now``: the ``left`` units of ``todo`` left unstored are failed when
    the task failed as a whole, else missing."""
    return RunSummary(
        task=task, planned=planned, ran=now.units_done - before.units_done, reused=planned - todo,
        failed=now.units_failed - before.units_failed + failed * left, missing=0 if failed else left,
        seconds=seconds, encoded=now.encoded - before.encoded, cached=now.cached - before.cached,
        not_achievable=now.not_achievable - before.not_achievable,
        recomputed=tuple((now.recomputed - before.recomputed).most_common()),
        shared_computed=tuple((now.shared_computed - before.shared_computed).most_common()),
        shared_reused=tuple((now.shared_reused - before.shared_reused).most_common()),
        failures=tuple(now.failures[len(before.failures):]))


def _add(a: tuple[tuple[str, int], ...], b: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """Two counters as (key, count) pairs, added, most common first."""
    return tuple((Counter(dict(a)) + Counter(dict(b))).most_common())


def merged(summaries: list[RunSummary]) -> RunSummary:
    """All ``summaries`` as one (:meth:`RunSummary.merge`); an empty one for none."""
    total = RunSummary(task="")
    for summary in summaries:
        total = total.merge(summary)
    return total


def accounting(summary: RunSummary) -> str:
    """The end-of-run paragraph: banks encoded and reused, units ran (recomputed, and
    why), reused (and how many of them came from a release) and shared, then cells not
    achievable and units failed or missing when there are any."""
    recomputed = sum(n for _, n in summary.recomputed)
    why = "; ".join(f"{n}: {changed} changed" for changed, n in summary.recomputed)
    lines = [f"encoded {summary.encoded} (encoder, split) banks, reused {summary.cached} from the cache; "
             f"ran {summary.ran} units ({recomputed} recomputed{f' — {why}' if why else ''}; "
             f"{summary.ran - recomputed} new, retried or forced), reused {summary.reused} already "
             f"finished with the same identity." + _from_release(summary) + _shared(summary)]
    if summary.peak_bytes:
        lines.append(f"peak memory of one process: {summary.peak_bytes / 1e9:.2f} GB ({summary.peak_process}).")
    if summary.not_achievable:
        lines.append(f"{summary.not_achievable} cells are not achievable by design (recorded as such).")
    if summary.failed or summary.missing:
        lines.append(f"{summary.failed} units failed, {summary.missing} were not stored (the next run computes "
                     f"them).")
    return "\n".join(lines)


def _from_release(summary: RunSummary) -> str:
    """`` Of those, reused 3,100 units from leaderboards/results.parquet (revision abc1234).``
    (empty when the run took nothing from a release)."""
    if not summary.from_release:
        return ""
    return " Of those, reused " + "; ".join(f"{n:,} units from {release}" for release, n in summary.from_release) + "."


def _shared(summary: RunSummary) -> str:
    """`` Shared work: head 120 computed, 294 reused.`` (empty when nothing was shared)."""
    computed, reused = dict(summary.shared_computed), dict(summary.shared_reused)
    names = sorted(set(computed) | set(reused))
    if not names:
        return ""
    return " Shared work: " + "; ".join(f"{name} {computed.get(name, 0)} computed, {reused.get(name, 0)} reused"
                                         for name in names) + "."


def failure_list(summary: RunSummary) -> str:
    """``N failures:`` and each failure's first line (empty when nothing failed)."""
    if not summary.failures:
        return ""
    return f"\n{len(summary.failures)} failures:\n" + "\n".join(f"  - {failure.splitlines()[0]}"
                                                                 for failure in summary.failures)


def interrupted(summary: RunSummary, store: object) -> str:
    """What an interrupted run says: how many units it stored where, and how to resume."""
    return (f"\ninterrupted: {summary.ran} units finished in this run are stored in {store}; run the same command "
            f"again to resume (`relbench leaderboard` draws pages from what is stored).")
