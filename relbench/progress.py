"""What a run tells its user while it works: a first line before anything slow, the
plan with an estimate from recorded unit costs, and one suite-level bar.

The first line (:func:`opening`) needs only the tasks file and the kinds' plans, so it
comes before the store and the embedding cache are checked (on a cold cache that check
loads every data set once, minutes on the full suite). The estimate (:func:`estimate`)
multiplies each task's units to compute by the mean seconds of its units as last
recorded: in this store, else in the release's ``results.parquet`` (the machine that
made the release may differ, and the text says which source it used). The suite bar
(:class:`SuiteBar`) counts units stored (computed or failed) against the units to
compute, names the task being computed and gives tqdm's ETA; task kinds' own bars go
below it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from relbench import deferred
from relbench.console import progress_bar

pd = deferred.load("pandas")


#: what a smoke suite's first line and index say (lm-eval says as much of ``--limit``)
SMOKE = ("SMOKE SUITE (`smoke: true` in the tasks file): a check that every part runs, on small samples; its "
         "numbers are not the benchmark's and are never for citation.")


def opening(tasks: Iterable, file: Path, smoke: bool = False) -> str:
    """``relbench: 15 tasks, 1,921 units in tasks.yaml; …``: what the run will look at,
    from the kinds' plans alone (no data, model or store is read); a smoke suite's line
    first says it is one."""
    tasks, units, unplanned = list(tasks), 0, 0
    for task in tasks:
        try:
            units += len(task.kind.build().plan(task))
        except Exception:  # noqa: BLE001 - a kind's bug fails its task when the run plans it, with its message
            unplanned += 1
    uncounted = f" ({unplanned} not counted: their kind failed to plan)" if unplanned else ""
    return ((f"relbench: {SMOKE}\n" if smoke else "") +
            f"relbench: {len(tasks)} tasks, {units:,} units{uncounted} in {file.name}; checking the results store "
            f"and the embedding cache (a cold cache describes each data set once) …")


def recorded_seconds(release: Path | None) -> dict[str, float]:
    """Mean recorded seconds per unit of each task in the release table at ``release``
    (nothing when it is missing or unreadable)."""
    if release is None or not release.is_file():
        return {}
    try:
        rows = pd.read_parquet(release, columns=["task", "unit", "seconds"])
    except (OSError, ValueError, KeyError, ImportError):
        return {}
    per_unit = rows.dropna(subset=["seconds"]).drop_duplicates("unit")
    return {str(task): float(s) for task, s in per_unit.groupby("task")["seconds"].mean().items()}


def unit_costs(store, tasks: list[str], release: Path | None) -> dict[str, list[float]]:
    """Recorded seconds per unit of each task, for ordering a run's tasks: the store's
    own, else the release's mean at ``release`` (one value), else none."""
    released = recorded_seconds(release)
    return {name: store.unit_seconds(name) or ([released[name]] if name in released else []) for name in tasks}


def estimate(store, todo: dict[str, int], encodings: int, jobs: int, release: Path | None) -> str:
    """The plan's line: units and encodings to compute, and the time the units should
    take on ``jobs`` workers from recorded unit costs (``store``'s own, else the
    release's); tasks never recorded anywhere are named as not estimated."""
    units = sum(todo.values())
    if not units:
        return "relbench: nothing to compute: every unit is stored with its current identity."
    released = recorded_seconds(release)
    seconds, sources, unknown = 0.0, set(), []
    for task, n in todo.items():
        mine = store.unit_seconds(task)
        if mine:
            seconds += n * sum(mine) / len(mine)
            sources.add("this store")
        elif task in released:
            seconds += n * released[task]
            sources.add(f"the release ({release})")
        elif n:
            unknown.append(task)
    wall = seconds / max(1, min(jobs, len([n for n in todo.values() if n])))
    said = (f"about {_duration(wall)} of unit work on {jobs} worker{'s' * (jobs > 1)} (from the unit costs recorded "
            f"in {' and '.join(sorted(sources))}; a different machine takes a different time)") if sources else \
        "no recorded unit costs to estimate from"
    rest = f"; not estimated: {', '.join(unknown[:5])}{' …' if len(unknown) > 5 else ''}" if unknown and sources else ""
    return (f"relbench: to compute: {units:,} units of {len([n for n in todo.values() if n])} tasks and {encodings} "
            f"encodings (the rest is stored or cached); {said}{rest}, plus the encodings.")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, math.ceil(seconds))} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


class SuiteBar:
    """One bar for the whole run: units stored out of the units to compute, the task
    being computed, and an ETA (silent when ``quiet``)."""

    def __init__(self, total: int, quiet: bool, desc: str = "suite"):
        self.bar = progress_bar(total=total, desc=desc, unit="unit", leave=True, position=0,
                                disable=quiet or not total)

    def task(self, name: str) -> None:
        """Name the task (or tasks) being computed."""
        self.bar.set_postfix_str(name, refresh=True)

    def advance(self, units: int = 1) -> None:
        """Count ``units`` more stored."""
        self.bar.update(units)

    def reach(self, done: int) -> None:
        """Set the count of units stored (workers report by storing, not by calling)."""
        if done > self.bar.n:
            self.bar.update(done - self.bar.n)

    def close(self) -> None:
        """Leave the bar where it stopped."""
        self.bar.close()
