"""``relbench run --executor ray``: a suite's units of work on a Ray cluster.

The driver (the ``relbench run`` process) plans every task as a local run does, then
hands the work still to do to Ray in two kinds of Ray task:

- **encodings**: one per bank the units read (an encoder's train or test pool, or an
  anchor pool a selector declares, :meth:`~relbench.task_run.TaskRun.bank_needs`) that the
  driver's embedding cache lacks, with the resources its task asks for (a GPU for
  ``device: cuda``, or ``auto`` on a cluster with GPUs). A bank the cache holds is put in
  Ray's object store by the driver instead. Either way the banks travel through the
  object store, so worker nodes need no shared file system; the driver writes what was
  encoded into its own cache as it arrives.
- **shards**: a few consecutive units of one task and one seed (plan order), each
  depending on the banks of its task. A worker computes its shard with the same runner
  code a local run uses, reading the banks it was given from memory, into a private
  temporary store, and returns the finished lines; the driver alone appends them to the
  results store, with the same identities and rows as a local run. Figures drawn during a
  unit come back the same way.

Why shards and not single units: the units of one seed share work that is computed once
per process (the head fits of :mod:`relbench.sharing`, relative features); a shard keeps
that sharing inside one worker while spreading a task over the whole cluster.
:data:`SHARDS_PER_CPU` sets how finely. Anchors learned from the banks (PARAM, fps),
which the shards of a seed all need, are learned once per cache folder instead
(:func:`relbench.sharing.learned_anchors`): the first worker learns a recipe under a lock
on its cache entry, the others wait and read it; on nodes without a shared file system,
once per node.

Faults: a Ray task whose worker process or node dies is retried by Ray (:data:`RETRIES`
times), then reported as lost; nothing of it is stored, so the next run computes it. An
encoding that fails (an encoder returning NaN …) fails its task as it does locally, with
the encoder's message. Ctrl-C cancels what is in flight; what the driver stored stays,
and the same command resumes. A plugin's failure inside a unit is data, stored as an
error row, as locally.

Agreement: a worker plans the task again with its own plugins, so every Ray task carries
the driver's :func:`registry_digest`, and a worker whose plugins differ (another version
of a method, another package version) fails it, naming them, before any work
(:class:`PluginMismatch`). The driver checks that every unit it sent came back stored or
failed, and reports the others by name; the run then exits 1 and the next run computes them.

Authentication: the local instance a run starts uses a token of the run's own
(:func:`_run_token`); a cluster that refuses the driver's token is a user error that says
what to set.

Counters: every Ray task returns a :class:`~relbench.run_summary.RunSummary` of what it
did (an encoding, its bank's; a shard, its units'), and :func:`run_on_ray` returns the
run's, which the command line renders as it renders a local run's. A bank counts once
per task that reads it, as in a local run: encoded, where an encoding computed it, else
reused from the cache; a worker's reads of the banks it was given are not counted again.
A unit the driver sent counts as ran once stored, as failed when its task failed as a
whole, and as missing when it came back neither stored nor failed.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import secrets
import socket
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from relbench.errors import UserError
from relbench.rows import TASK_ERROR
from relbench.run_summary import RunSummary, merged

if TYPE_CHECKING:
    import numpy as np

    from relbench.plugins import Registry
    from relbench.encoding import BankNeed
    from relbench.runner import Runner
    from relbench.run_summary import RunStats
    from relbench.task_run import TaskRun

#: shards per worker CPU: enough that a dying worker loses little and the last shards
#: finish together, few enough that the units of a seed mostly share one worker's work
SHARDS_PER_CPU = 4
#: times Ray reruns a Ray task whose worker process or node died
RETRIES = 3
#: environment variables a worker takes from the driver: plugin selection and caches
FORWARDED_ENV = ("RELBENCH_PLUGINS", "RELBENCH_DISABLE_PLUGINS", "RELBENCH_CACHE_DIR", "RELBENCH_PRECISION",
                 "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME")


@dataclass(frozen=True)
class Job:
    """What every Ray worker needs to rebuild the driver's runner."""

    tasks_file: str  #: absolute path of the tasks file (it must be readable there too)
    run_id: str
    command: str
    env: tuple[tuple[str, str], ...]  #: :data:`FORWARDED_ENV` as the driver has them
    sys_path: tuple[str, ...]  #: the driver's import path (local plugin modules)
    plugins: tuple[tuple[str, str, str], ...]  #: the driver's :func:`registry_digest`
    threads: int = 1


@dataclass(frozen=True)
class Encoding:
    """One bank of one task to encode on a worker."""

    job: Job
    task: str
    need: BankNeed


@dataclass(frozen=True)
class Shard:
    """Some units of one task, and the cache keys of the banks passed with them (in
    argument order)."""

    job: Job
    task: str
    units: tuple[str, ...]  #: unit ids, in plan order
    banks: tuple[str, ...] = ()


@dataclass
class ShardResult:
    """A shard's finished lines (``unit``, ``key``, ``inputs``, ``rows``), the figures
    its units drew (file name → bytes) and the worker's summary of its units."""

    lines: list[dict]
    figures: dict[str, bytes]
    summary: RunSummary


class PluginMismatch(UserError):
    """A Ray worker loads other plugin code than the driver."""


def registry_digest(registry: Registry) -> tuple[tuple[str, str, str], ...]:
    """Every plugin of ``registry`` as (``interface:name``, its ``version``, its package
    and that package's version), sorted: what a worker must load the same as the driver
    for its plan of a task to be the driver's."""
    return tuple(sorted((f"{interface}:{name}", str(reg.cls.version), reg.package)
                        for interface, table in registry.by_interface.items() for name, reg in table.items()))


def check_plugins(driver: tuple[tuple[str, str, str], ...], worker: tuple[tuple[str, str, str], ...]) -> None:
    """Raise :class:`PluginMismatch` naming the plugins whose version or package differs
    between the driver's digest and this worker's (or that one side lacks)."""
    if driver == worker:
        return
    ours, theirs = ({key: (version, package) for key, version, package in digest} for digest in (driver, worker))
    differ = [key for key in sorted(set(ours) | set(theirs)) if ours.get(key) != theirs.get(key)]

    def describe(entry: tuple[str, str] | None) -> str:
        return "none" if entry is None else f"version {entry[0]!r} ({entry[1]})"

    shown = "; ".join(f"{key.split(':', 1)[0]} {key.split(':', 1)[1]!r}: the driver has {describe(ours.get(key))}, "
                      f"this worker has {describe(theirs.get(key))}" for key in differ[:3])
    more = f"; and {len(differ) - 3} more" if len(differ) > 3 else ""
    raise PluginMismatch(f"the Ray worker on {socket.gethostname()} loads other plugin code than the driver "
                         f"({shown}{more}). Install the same relbench and plugin packages, and the same local "
                         f"plugin modules, on every node of the cluster, then run again.")


def shard_units(units: list[tuple[str, Any]], cpus: int) -> list[list[str]]:
    """``units`` (id, seed) cut into shards of consecutive units of one seed each, about
    :data:`SHARDS_PER_CPU` shards per CPU in all."""
    if not units:
        return []
    size = max(1, math.ceil(len(units) / max(1, cpus * SHARDS_PER_CPU)))
    shards = []
    for _, run in itertools.groupby(units, key=lambda unit: unit[1]):
        ids = [uid for uid, _ in run]
        shards += [ids[i:i + size] for i in range(0, len(ids), size)]
    return shards


# ----------------------------------------------------------------------------- worker side

_RUNNERS: dict[tuple, Runner] = {}


def encode_bank(encoding: Encoding) -> tuple[np.ndarray, dict, RunSummary]:
    """Encode one bank in this (worker) process (or read it from this node's embedding
    cache); return its rows, its cache metadata and the worker's summary (banks encoded
    and read). The encoder is released afterwards."""
    with _task_run(encoding.job, encoding.task) as (runner, task_run):
        try:
            X, meta = task_run.bank_entry(encoding.need)
        finally:
            task_run.release()
        return X.cpu().numpy(), meta, RunSummary(encoding.task, encoded=runner.stats.encoded,
                                                 cached=runner.stats.cached)


def compute_shard(shard: Shard, *banks: tuple[np.ndarray, dict, RunSummary]) -> ShardResult:
    """Compute ``shard`` in this (worker) process and return its lines. ``banks`` are
    the results of the shard's bank Ray tasks (Ray resolves them first), read from memory
    in place of the embedding cache."""
    import torch

    with _task_run(shard.job, shard.task) as (runner, task_run):
        for key, (X, meta, _) in zip(shard.banks, banks):
            runner.cache.hold(key, torch.tensor(X), meta)
        try:
            task_run.restrict(set(shard.units))
            runner.compute(task_run)
        finally:
            runner.cache.held.clear()
        store = runner.store
        lines = store.fetch(shard.task, list(store.read(shard.task).units.values()))
        folder = store.figure_path(shard.task, "x").parent
        figures = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} if folder.is_dir() else {}
        summary = replace(runner.summaries[shard.task], planned=len(shard.units),
                          reused=0).with_peak(f"a Ray worker of {shard.task}")  # the shard's units
        return ShardResult(lines=[{k: line.get(k) for k in ("unit", "key", "inputs", "rows")} for line in lines],
                           figures=figures, summary=summary)


@contextlib.contextmanager
def _task_run(job: Job, task: str):
    """This process's runner for ``job``, planned for ``task`` against a private
    temporary store with fresh counters, and the task's :class:`TaskRun`."""
    from relbench.results import ResultStore
    from relbench.run_summary import RunStats
    from relbench.threads import pin_threads

    for name, value in job.env:
        os.environ[name] = value
    for entry in reversed(job.sys_path):
        if entry not in sys.path and os.path.isdir(entry):
            sys.path.insert(0, entry)
    pin_threads(job.threads)  # torch and NumPy's BLAS alike, so that the rows' count is every pool's
    runner = _runner(job)
    check_plugins(job.plugins, registry_digest(runner.registry))  # before this worker's plan counts for anything
    runner.only = [task]
    with tempfile.TemporaryDirectory(prefix="relbench-shard-") as tmp:
        runner.store = ResultStore(Path(tmp))
        runner.stats, runner.summaries = RunStats(), {}
        runner.run_id = job.run_id
        (task_run,) = runner.plans()
        yield runner, task_run


def _runner(job: Job) -> Runner:
    """This process's runner for the job's tasks file: one per process, so the tasks
    that read one data set share it, and each task's identities are computed once."""
    from relbench.config import load_suite
    from relbench.plugins import load_registry
    from relbench.runner import Runner

    path = Path(job.tasks_file)
    stat = path.stat()
    key = (job.tasks_file, stat.st_mtime_ns, stat.st_size, job.env)
    if key not in _RUNNERS:
        _RUNNERS.clear()  # another tasks file, or the same one edited: a new suite
        registry = load_registry([], [])  # plugin selection comes through the forwarded environment
        _RUNNERS[key] = Runner(load_suite(path, registry), registry, quiet=True, command=job.command)
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


def run_on_ray(runner: Runner, address: str | None, quiet: bool) -> RunSummary:
    """Compute every selected task's units still to do on Ray (an instance of this run's
    own on this machine when ``address`` is None, else the cluster at ``address``, e.g.
    ``auto`` or ``HOST:PORT``); store them from this process; return the run's summary
    (its counters are also added to ``runner.stats``)."""
    ray = _import_ray()
    plans = runner.plans()  # user errors before anything is written or started
    runner.store.ensure_writable()
    runner.cache.ensure_writable()
    started = not ray.is_initialized()
    with contextlib.ExitStack() as session:
        if started:
            session.enter_context(_run_token() if address is None else contextlib.nullcontext())
            _connect(ray, address)
            session.callback(ray.shutdown)
        with contextlib.ExitStack() as locks:
            todo, left = [], []
            for task_run in plans:
                if locks.enter_context(runner.store.lock(task_run.task.name, wait=False)):
                    task_run.replan()
                    todo.append(task_run)
                else:
                    left.append(_left(task_run.task.name, task_run.plan()))
                    runner.say(f"task {task_run.task.name} is being computed by another relbench run on this "
                               f"store; left to it (run again afterwards for what it leaves)")
            units = _drive(ray, runner, todo, quiet)
    return merged([*units, *left, _counters(runner.stats)])


def _left(task: str, plan) -> RunSummary:
    """A task left to another run: its units to compute are missing from this one."""
    return RunSummary(task, planned=len(plan.units), reused=len(plan.units) - len(plan.todo), missing=len(plan.todo))


def _counters(stats: RunStats) -> RunSummary:
    """The driver's counters (banks, recomputed units, shared work, failures) as a
    summary of no task and no units."""
    return RunSummary("", encoded=stats.encoded, cached=stats.cached, not_achievable=stats.not_achievable,
                      recomputed=tuple(stats.recomputed.most_common()),
                      shared_computed=tuple(stats.shared_computed.most_common()),
                      shared_reused=tuple(stats.shared_reused.most_common()), failures=tuple(stats.failures))


@contextlib.contextmanager
def _run_token():
    """A token of this run's own for the local Ray instance it starts (``RAY_AUTH_TOKEN``
    in this process's environment, which the instance's processes inherit, until the
    block ends), unless ``RAY_AUTH_MODE`` or ``RAY_AUTH_TOKEN`` is set. Ray (2.5x and
    later) turns token authentication on for a local instance; without a token it writes
    one to ``~/.ray/auth_token``, and that file turns token authentication on for every
    cluster a later ``ray start --head`` starts on this machine, which then refuses the
    ``ray start --address`` and ``--address`` runs that lack the token."""
    names = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")  # Ray sets the mode to "token" when it is unset
    if any(name in os.environ for name in names):
        yield
        return
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    try:
        yield
    finally:
        for name in names:
            os.environ.pop(name, None)


def _connect(ray, address: str | None) -> None:
    """Start Ray on this machine (``address`` None) or join the cluster at ``address``;
    a cluster that cannot be reached, or that refuses this process's authentication,
    is a user error saying what to set."""
    try:
        ray.init(address=address or "local", log_to_driver=False, configure_logging=False, include_dashboard=False)
    except (ConnectionError, ray.exceptions.RayError) as exc:
        if _refused_token(exc):
            raise UserError(
                f"the Ray cluster at {address!r} refused this process: it uses token authentication, and this "
                f"process has no token or another one. Set RAY_AUTH_MODE=token here, and on every machine that runs "
                f"`ray start --address`, with the head machine's ~/.ray/auth_token copied to ~/.ray/auth_token (or "
                f"its content in RAY_AUTH_TOKEN); or, on a trusted network, start the cluster with "
                f"RAY_AUTH_MODE=disabled set for `ray start --head` and each `ray start --address`.") from None
        raise UserError(f"cannot reach a Ray cluster at {address!r} ({str(exc)[:200]}). Start one (`ray start "
                        f"--head`, then `ray start --address HEAD:PORT` on each worker machine) and pass "
                        f"`--address HEAD:PORT` or `--address auto` on a cluster node; leave `--address` out "
                        f"to start Ray on this machine.") from None


def _refused_token(exc: BaseException | None) -> bool:
    """Whether what ``ray.init`` raised comes from token authentication: Ray raises its
    ``AuthenticationError``, or, joining a cluster, a ``ConnectionError`` whose cause only
    quotes it."""
    while exc is not None:
        if type(exc).__name__ == "AuthenticationError" or "InvalidAuthToken" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _drive(ray, runner: Runner, task_runs: list[TaskRun], quiet: bool) -> list[RunSummary]:
    """Submit every encoding and shard, store results as they come back, and count them;
    return each task's summary of its units."""
    from relbench.console import progress_bar

    resources = ray.cluster_resources()
    cpus, gpus = int(resources.get("CPU", 1)), resources.get("GPU", 0)
    compute, encode = ray.remote(compute_shard), ray.remote(encode_bank)
    job = Job(tasks_file=str(Path(runner.suite.file).resolve()), run_id=runner.run_id, command=runner.command,
              env=tuple((name, os.environ[name]) for name in FORWARDED_ENV if name in os.environ),
              sys_path=tuple(sys.path), plugins=registry_digest(runner.registry))
    total = 0
    stale: dict[str, dict[str, list[str]]] = {}
    banks: dict[str, Any] = {}  # cache key → object ref of (rows, metadata, counters)
    encodings: dict[Any, BankNeed] = {}
    readers: dict[str, list[TaskRun]] = {}  # cache key → the tasks that read that bank
    reused: Counter = Counter()  # task → banks it reads that no encoding of its computes
    shards: dict[Any, Shard] = {}
    failed: set[str] = set()
    count = {task_run.task.name: Counter() for task_run in task_runs}  # task → planned, reused, ran, failed, missing
    peaks = {task_run.task.name: RunSummary(task_run.task.name) for task_run in task_runs}  # its workers' largest
    for task_run in task_runs:
        task, plan = task_run.task, task_run.plan()
        todo = runner.todo(task_run)
        count[task.name].update(planned=len(plan.units), reused=len(plan.units) - len(todo))
        if not todo:
            continue
        try:
            needs = task_run.bank_needs()
        except Exception as exc:  # noqa: BLE001 - as locally: the task fails, the run goes on
            runner.task_failed(task_run, exc)
            failed.add(task.name)
            count[task.name]["failed"] += len(todo)
            continue
        total += len(todo)
        stale[task.name] = dict(plan.stale)
        wants_gpu = task.device.startswith("cuda") or (task.device == "auto" and gpus > 0)
        options = {"num_cpus": 1, "num_gpus": 1 if wants_gpu else 0, "max_retries": RETRIES}
        for need in needs:
            readers.setdefault(need.key, []).append(task_run)
            if need.key not in banks:
                hit = task_run.cached_entry(need)
                if hit is None:
                    banks[need.key] = encode.options(**options).remote(Encoding(job, task.name, need))
                    encodings[banks[need.key]] = need
                    continue
                banks[need.key] = ray.put((hit[0].numpy(), hit[1], RunSummary(task.name)))
            reused[task.name] += 1
        for units in shard_units([(u.id, u.key.get("seed")) for u in todo], cpus):
            shard = Shard(job, task.name, tuple(units), tuple(need.key for need in needs))
            shards[compute.options(**options).remote(shard, *(banks[need.key] for need in needs))] = shard
    if encodings:
        runner.say(f"encoding {len(encodings)} banks on Ray ({len(banks) - len(encodings)} read from the cache)")
    banks.clear()  # the shards hold their banks now: Ray frees each once its last shard is done
    bar = progress_bar(total=total, desc="units (ray)", disable=quiet)
    errors: Counter = Counter({name: 1 for name in failed})
    lost: dict[tuple[str, str], list[str]] = {}  # (task, why) → the units not stored, for that reason
    pending = [*encodings, *shards]
    try:
        while pending:
            (ready,), pending = ray.wait(pending, num_returns=1)
            if ready in encodings:
                need = encodings.pop(ready)
                failed |= _encoded(ray, runner, ready, need, readers[need.key], errors)
                continue
            shard = shards[ready]
            bar.update(len(shard.units))
            try:
                result = ray.get(ready)
            except ray.exceptions.RayError as exc:
                errors[shard.task] += 1
                if shard.task in failed:  # a failed encoding has said why already
                    count[shard.task]["failed"] += len(shard.units)
                else:
                    lost.setdefault((shard.task, _why_lost(ray, exc)), []).extend(shard.units)
                continue
            errors[shard.task] += _store(runner, shard, result, stale[shard.task])
            count[shard.task].update(ran=sum(line["unit"] != TASK_ERROR for line in result.lines),
                                     failed=result.summary.failed)
            peaks[shard.task] = peaks[shard.task].merge(RunSummary("", peak_bytes=result.summary.peak_bytes,
                                                                   peak_process=result.summary.peak_process))
            returned = {line["unit"] for line in result.lines}
            missing = [] if TASK_ERROR in returned else [u for u in shard.units if u not in returned]
            if missing:  # neither stored nor failed: never counted as done
                errors[shard.task] += 1
                lost.setdefault((shard.task, "they came back from their Ray worker neither stored nor failed; "
                                             "the next run computes them"), []).extend(missing)
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    finally:
        bar.close()
    runner.stats.cached += sum(n for name, n in reused.items() if name not in failed)
    by_name = {task_run.task.name: task_run for task_run in task_runs}
    for (task, why), units in lost.items():
        count[task]["missing"] += len(units)
        runner.stats.failures.append(f"{task}: {len(units)} units not stored ({_named(by_name[task], units)}): {why}")
    for task_run in task_runs:
        if task_run.plan().todo and not errors[task_run.task.name]:
            runner.clear_task_error(task_run.task)
    return [peaks[name].merge(RunSummary("", **units)) for name, units in count.items()]


def _why_lost(ray, exc: Exception) -> str:
    """Why a shard's units are not stored: its worker raised (a user error, such as other
    plugin code, says how to fix it), or the worker or its node died."""
    cause = getattr(exc, "cause", None) if isinstance(exc, ray.exceptions.RayTaskError) else None
    if isinstance(cause, UserError):
        return str(cause).splitlines()[0]
    if isinstance(cause, Exception):
        return f"their Ray worker raised {type(cause).__name__}: {str(cause).splitlines()[0]}"
    return f"they were lost with their Ray worker ({type(exc).__name__}); the next run computes them"


def _named(task_run: TaskRun, units: list[str], most: int = 3) -> str:
    """The first ``most`` of ``units`` by their displayed keys, then how many more."""
    display = {u.id: u.display for u in task_run.plan().units}
    shown = ", ".join(str(display.get(uid, uid)) for uid in units[:most])
    return shown + (f" and {len(units) - most} more" if len(units) > most else "")


def _encoded(ray, runner: Runner, ref: Any, need: BankNeed, readers: list[TaskRun], errors: Counter) -> set[str]:
    """An encoding came back: cache its bank on the driver, or fail the tasks that read
    it (with the encoder's own message, as a local run does) and return their names."""
    import torch

    try:
        X, meta, summary = ray.get(ref)
    except ray.exceptions.RayTaskError as exc:  # the encoder raised (NaN embeddings, a missing asset …)
        cause = exc.cause if isinstance(exc.cause, Exception) else exc
        for task_run in readers:
            if not errors[task_run.task.name]:
                runner.task_failed(task_run, cause)
            errors[task_run.task.name] += 1
        return {task_run.task.name for task_run in readers}
    except ray.exceptions.RayError:  # the worker or its node died, retries spent: the shards say so
        return set()
    runner.stats.encoded += summary.encoded
    runner.stats.cached += summary.cached
    if meta.get("arithmetic") != need.identity.get("arithmetic"):
        # the worker encoded with other arithmetic than the driver planned (a bf16 task on
        # a GPU worker, planned where no GPU is): never cache it under the planned key;
        # the shards that read it encode their own, under the key that says how
        return set()
    if not runner.cache.has(need.key):
        runner.cache.put(need.key, torch.from_numpy(X.copy()), meta)
    return set()


def _store(runner: Runner, shard: Shard, result: ShardResult, stale: dict[str, list[str]]) -> int:
    """Append a shard's lines and figures to the store, add its counters (``stale``: the
    task's units that replace older ones, and why); return 1 when its task failed as a
    whole there (a task-level error line), else 0."""
    from relbench.cache import atomic_write_bytes
    from relbench.task_plan import shorten

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
                runner.stats.recomputed[", ".join(shorten(stale[line["unit"]]))] += 1
    summary = result.summary
    runner.stats.encoded += summary.encoded
    runner.stats.cached += summary.cached
    runner.stats.failures += summary.failures
    runner.stats.shared_computed.update(dict(summary.shared_computed))
    runner.stats.shared_reused.update(dict(summary.shared_reused))
    return failed
