"""``relbench run --executor ray``: a suite's units of work on a Ray cluster.

The driver (the ``relbench run`` process) plans every task as a local run does, then
hands the units still to compute to Ray as *shards*: a few consecutive units of one task
(plan order, so a shard mostly reads one seed's draw). A Ray worker computes its shard
with the same runner code a local run uses, into a private temporary store, and returns
the finished lines; the driver alone appends them to the results store, with the same
identities and rows as a local run. Figures drawn during a unit come back the same way.

Encoding: while a data set's pools are not all cached, the first shard of the first task
that reads it (its *leader*) runs before the other shards of that data set, which depend
on it, so the pools are encoded once on that node and read from its embedding cache
after; this is :mod:`relbench.parallel`'s rule, applied to shards. A node without the
driver's embedding cache (no shared file system) encodes the pools it needs once into
its own.

Faults: a shard whose worker process or node dies is retried by Ray (:data:`RETRIES`
times), then reported as lost; nothing of it is stored, so the next run computes it.
Ctrl-C cancels the shards in flight; what the driver stored stays, and the same command
resumes. A plugin's failure inside a unit is data, stored as an error row, as locally.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from relbench.errors import UserError
from relbench.rows import TASK_ERROR

if TYPE_CHECKING:
    from relbench.runner import Runner, RunStats, TaskRun

#: shards per worker CPU: enough that a dying worker loses little and the last shards
#: finish together, few enough that each shard's setup (loading its seed's banks) is small
SHARDS_PER_CPU = 4
#: times Ray reruns a shard whose worker process or node died
RETRIES = 3
#: environment variables a worker takes from the driver: plugin selection and caches
FORWARDED_ENV = ("RELBENCH_PLUGINS", "RELBENCH_DISABLE_PLUGINS", "RELBENCH_CACHE_DIR", "HF_HUB_OFFLINE",
                 "TRANSFORMERS_OFFLINE", "HF_HOME")


@dataclass(frozen=True)
class Shard:
    """What a Ray worker needs to compute some units of one task."""

    tasks_file: str  #: absolute path of the tasks file (it must be readable there too)
    task: str
    units: tuple[str, ...]  #: unit ids, in plan order
    run_id: str
    command: str
    env: tuple[tuple[str, str], ...]  #: :data:`FORWARDED_ENV` as the driver has them
    sys_path: tuple[str, ...]  #: the driver's import path (local plugin modules)
    threads: int = 1


@dataclass
class ShardResult:
    """A shard's finished lines (``unit``, ``key``, ``inputs``, ``rows``), the figures
    its units drew (file name → bytes) and the worker's counters."""

    lines: list[dict]
    figures: dict[str, bytes]
    stats: dict[str, Any] = field(default_factory=dict)


def shard_units(unit_ids: list[str], cpus: int) -> list[list[str]]:
    """``unit_ids`` cut into consecutive shards, about :data:`SHARDS_PER_CPU` per CPU."""
    if not unit_ids:
        return []
    size = max(1, math.ceil(len(unit_ids) / max(1, cpus * SHARDS_PER_CPU)))
    return [unit_ids[i:i + size] for i in range(0, len(unit_ids), size)]


# ----------------------------------------------------------------------------- worker side

_RUNNERS: dict[tuple, Runner] = {}


def compute_shard(shard: Shard, *after: Any) -> ShardResult:
    """Compute ``shard`` in this (worker) process and return its lines. ``after`` are the
    results of the shards it waits for (Ray resolves them first; unused here)."""
    import torch

    from relbench.results import ResultStore
    from relbench.runner import RunStats

    for name, value in shard.env:
        os.environ[name] = value
    for entry in reversed(shard.sys_path):
        if entry not in sys.path and os.path.isdir(entry):
            sys.path.insert(0, entry)
    torch.set_num_threads(shard.threads)
    runner = _runner(shard)
    runner.only = [shard.task]
    with tempfile.TemporaryDirectory(prefix="relbench-shard-") as tmp:
        runner.store = ResultStore(Path(tmp))
        runner.stats = RunStats()
        runner.run_id = shard.run_id
        (task_run,) = runner.plans()
        task_run.restrict(set(shard.units))
        runner.compute(task_run)
        store = runner.store
        lines = store.fetch(shard.task, list(store.read(shard.task).units.values()))
        folder = store.figure_path(shard.task, "x").parent
        figures = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} if folder.is_dir() else {}
    stats = runner.stats
    return ShardResult(lines=[{k: line.get(k) for k in ("unit", "key", "inputs", "rows")} for line in lines],
                       figures=figures,
                       stats={"encoded": stats.encoded, "cached": stats.cached, "failures": stats.failures,
                              "shared_computed": dict(stats.shared_computed),
                              "shared_reused": dict(stats.shared_reused)})


def _runner(shard: Shard) -> Runner:
    """This process's runner for the shard's tasks file: one per process, so the tasks
    that read one data set share it, and each task's identities are computed once."""
    from relbench.config import load_suite
    from relbench.plugins import load_registry
    from relbench.runner import Runner

    path = Path(shard.tasks_file)
    stat = path.stat()
    key = (shard.tasks_file, stat.st_mtime_ns, stat.st_size, shard.env)
    if key not in _RUNNERS:
        _RUNNERS.clear()  # another tasks file, or the same one edited: a new suite
        registry = load_registry([], [])  # plugin selection comes through the forwarded environment
        _RUNNERS[key] = Runner(load_suite(path, registry), registry, quiet=True, command=shard.command)
    return _RUNNERS[key]


# ----------------------------------------------------------------------------- driver side


def _import_ray():
    try:
        import ray
    except ImportError:
        raise UserError("`--executor ray` needs Ray, which is not installed. Install it with "
                        "`pip install 'relbench[ray]'`, or run without `--executor ray` (or with `-j N` for "
                        "local worker processes).") from None
    return ray


def run_on_ray(runner: Runner, address: str | None, quiet: bool) -> RunStats:
    """Compute every selected task's units still to do on Ray (a local instance when
    ``address`` is None, else the cluster at ``address``, e.g. ``auto`` or
    ``HOST:PORT``); store them from this process; return the run's counters."""
    ray = _import_ray()
    plans = runner.plans()  # user errors before anything is written or started
    runner.store.ensure_writable()
    runner.cache.ensure_writable()
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(address=address, log_to_driver=False, configure_logging=False, include_dashboard=False)
        except ConnectionError as exc:
            raise UserError(f"cannot reach a Ray cluster at {address!r} ({exc}). Start one (`ray start --head`, "
                            f"then `ray start --address HEAD:PORT` on each worker machine) and pass "
                            f"`--address HEAD:PORT` or `--address auto` on a cluster node; leave `--address` out "
                            f"to start Ray on this machine.") from None
    try:
        with contextlib.ExitStack() as locks:
            todo = []
            for task_run in plans:
                if locks.enter_context(runner.store.lock(task_run.task.name, wait=False)):
                    task_run.replan()
                    todo.append(task_run)
                else:
                    runner.say(f"task {task_run.task.name} is being computed by another relbench run on this "
                               f"store; left to it (run again afterwards for what it leaves)")
            _drive(ray, runner, todo, quiet)
    finally:
        if started:
            ray.shutdown()
    return runner.stats


def _drive(ray, runner: Runner, task_runs: list[TaskRun], quiet: bool) -> None:
    """Submit every shard, store results as they come back, and count them."""
    from relbench.runner import progress_bar

    resources = ray.cluster_resources()
    cpus, gpus = int(resources.get("CPU", 1)), resources.get("GPU", 0)
    remote = ray.remote(compute_shard)
    env = tuple((name, os.environ[name]) for name in FORWARDED_ENV if name in os.environ)
    total = 0
    stale: dict[str, dict[str, list[str]]] = {}
    pending: dict[Any, Shard] = {}
    leaders: dict[str, Any] = {}
    for task_run in task_runs:
        task, plan = task_run.task, task_run.plan()
        todo = [u.id for u in plan.todo]
        runner.stats.units_skipped += len(plan.units) - len(todo)
        if not todo:
            runner.clear_task_error(task)
            continue
        total += len(todo)
        stale[task.name] = dict(plan.stale)
        wants_gpu = task.device.startswith("cuda") or (task.device == "auto" and gpus > 0)
        options = {"num_cpus": 1, "num_gpus": 1 if wants_gpu else 0, "max_retries": RETRIES}
        data = repr(task.dataset.identity())
        cached = task_run.pools_cached()
        for units in shard_units(todo, cpus):
            shard = Shard(tasks_file=str(Path(runner.suite.file).resolve()), task=task.name, units=tuple(units),
                          run_id=runner.run_id, command=runner.command, env=env, sys_path=tuple(sys.path))
            after = [] if cached or data not in leaders else [leaders[data]]
            ref = remote.options(**options).remote(shard, *after)
            if not cached:
                leaders.setdefault(data, ref)
            pending[ref] = shard
    bar = progress_bar(total=total, desc="units (ray)", disable=quiet)
    errors: Counter = Counter()
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            shard = pending.pop(ready[0])
            try:
                result = ray.get(ready[0])
            except ray.exceptions.RayError as exc:  # the worker or its node died, retries spent
                errors[shard.task] += 1
                runner.stats.failures.append(
                    f"{shard.task}: {len(shard.units)} units lost with their Ray worker ({type(exc).__name__}); "
                    f"nothing of them is stored, so the next run computes them")
                bar.update(len(shard.units))
                continue
            errors[shard.task] += _store(runner, shard, result, stale[shard.task])
            bar.update(len(shard.units))
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    finally:
        bar.close()
    for task_run in task_runs:
        if task_run.plan().todo and not errors[task_run.task.name]:
            runner.clear_task_error(task_run.task)


def _store(runner: Runner, shard: Shard, result: ShardResult, stale: dict[str, list[str]]) -> int:
    """Append a shard's lines and figures to the store, add its counters (``stale``: the
    task's units that replace older ones, and why); return 1 when its task failed as a
    whole there (a task-level error line), else 0."""
    from relbench.cache import atomic_write_bytes
    from relbench.runner import _shorten

    for name, data in result.figures.items():
        atomic_write_bytes(runner.store.figure_path(shard.task, name), data)
    failed = 0
    for line in result.lines:
        runner.store.append(shard.task, line["unit"], line["rows"], runner.run_id, key=line["key"],
                            inputs=line["inputs"])
        if line["unit"] == TASK_ERROR:
            failed = 1
        else:
            runner.stats.units_done += 1
            runner.stats.not_achievable += sum(r.get("status") == "not_achievable" for r in line["rows"])
            if line["unit"] in stale:
                runner.stats.recomputed[", ".join(_shorten(stale[line["unit"]]))] += 1
    stats = result.stats
    runner.stats.encoded += stats.get("encoded", 0)
    runner.stats.cached += stats.get("cached", 0)
    runner.stats.failures += stats.get("failures", [])
    runner.stats.shared_computed.update(stats.get("shared_computed", {}))
    runner.stats.shared_reused.update(stats.get("shared_reused", {}))
    return failed
