"""`relbench run --executor ray`: the same store and pages as a local run, on a local Ray
instance and on a two-node cluster that loses a node half-way. Skipped where Ray is not
installed (`pip install 'relbench[ray]'`); the rest of the suite never needs it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

from test_core_runner import TASKS as RUNNER_TASKS

from relbench import ray_executor
from relbench.ray_executor import SHARDS_PER_CPU, shard_units

TESTS = Path(__file__).parent
TASKS = RUNNER_TASKS.replace("seeds: [0, 1]", "seeds: [0, 1, 2, 3]")
UNITS = 4 * 3 * 2  # seeds × targets × stitchers


def test_shards_cut_a_task_into_consecutive_runs_of_units_of_one_seed():
    ids = [f"u{i}" for i in range(10)]
    shards = shard_units([(u, 0) for u in ids], cpus=1)
    assert [u for s in shards for u in s] == ids and len(shards) == SHARDS_PER_CPU
    assert shard_units([(u, 0) for u in ids], cpus=8) == [[u] for u in ids] and shard_units([], cpus=2) == []
    two_seeds = shard_units([(u, i // 5) for i, u in enumerate(ids)], cpus=1)  # a shard never mixes seeds
    assert two_seeds == [ids[0:3], ids[3:5], ids[5:8], ids[8:10]]


def _env(tmp_path: Path) -> dict[str, str]:
    """The toy plugins reach every Ray worker through the environment, as a user's own
    plugin module would (`--plugin` / RELBENCH_PLUGINS)."""
    return {**os.environ, "RELBENCH_PLUGINS": "toy_plugins", "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path]),
            "RELBENCH_CACHE_DIR": str(tmp_path / "cache"), "RAY_AUTH_MODE": "disabled",
            "RAY_USAGE_STATS_ENABLED": "0"}


def _own_instance_env(tmp_path: Path) -> dict[str, str]:
    """:func:`_env` as a user has it who sets nothing about Ray's authentication, with a
    home folder of the test's own (where Ray would write a token)."""
    env = {**_env(tmp_path), "HOME": str(tmp_path / "home")}
    del env["RAY_AUTH_MODE"]
    return env


def _relbench(tmp_path: Path, *args: str, timeout: float = 240, env: dict[str, str] | None = None
              ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "relbench.cli", "run", "tasks.yaml", "-q", *args], cwd=tmp_path,
                          env=env or _env(tmp_path), capture_output=True, text=True, timeout=timeout)


def _rows(store: Path):
    from relbench.results import ResultStore

    df = ResultStore(store).load("blobs")
    keys = ["unit", "metric", "source"]
    return df.sort_values(keys)[keys + ["value", "status", "inputs", "per_sample"]].astype(str).values.tolist()


#: a second task whose encoder returns NaN for two rows: it fails with the encoder's message
NAN_TASK = RUNNER_TASKS[RUNNER_TASKS.index("  - name: blobs"):].replace("name: blobs", "name: nan-blobs").replace(
    "params: {seed: 1}", "params: {seed: 1, nan_rows: [3, 7]}")


def test_a_local_ray_instance_stores_what_a_local_run_stores(tmp_path):
    pytest.importorskip("ray")
    (tmp_path / "tasks.yaml").write_text(TASKS + NAN_TASK)
    ray_run = _relbench(tmp_path, "--executor", "ray", env=_own_instance_env(tmp_path))
    assert ray_run.returncode == 1, ray_run.stderr  # the NaN task fails, as locally, with the encoder's message
    # the instance it started used a token of its own: none is left for a later `ray start --head` to turn on
    assert not (tmp_path / "home" / ".ray" / "auth_token").exists()
    assert "encoder 'a'" in ray_run.stderr and "rows 3, 7" in ray_run.stderr and "Traceback" not in ray_run.stderr
    cached = sorted(p.name for p in (tmp_path / "cache" / "embeddings").glob("*.json"))
    assert len(cached) == 3 * 2  # 3 encoders × 2 splits: nan-blobs shares b's and c's; its a's NaN is never cached
    local = _relbench(tmp_path, "--output", "local", "--leaderboards", "local-boards")
    assert local.returncode == 1, local.stderr
    rows = _rows(tmp_path / "results")
    assert len(rows) == UNITS * 3 * 2 and rows == _rows(tmp_path / "local")  # × sources × metrics
    page, local_page = ((tmp_path / d / "blobs.md").read_text().splitlines() for d in ("boards", "local-boards"))
    assert [a for a, b in zip(page, local_page) if a != b and "Produced by" not in a] == []
    again = _relbench(tmp_path, "--executor", "ray", "--no-leaderboard", "--task", "blobs")  # resumes: nothing to do
    assert again.returncode == 0 and len(_rows(tmp_path / "results")) == len(rows)


def test_a_worker_reads_the_banks_it_is_given_and_encodes_nothing(tmp_path, monkeypatch):
    """A worker node without the driver's file system: its embedding cache is empty, the
    banks come with the shard, and its lines equal a local run's. Runs without Ray (the
    worker functions are plain Python)."""
    from relbench.config import load_suite
    from relbench.plugins import load_registry
    from relbench.results import ResultStore
    from relbench.runner import Runner

    (tmp_path / "tasks.yaml").write_text(TASKS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RELBENCH_CACHE_DIR", str(tmp_path / "driver-cache"))
    monkeypatch.setenv("RELBENCH_PLUGINS", "toy_plugins")
    registry = load_registry([], [])  # as a worker loads it, so that identities agree
    local = Runner(load_suite(tmp_path / "tasks.yaml", registry), registry, quiet=True)
    local.run()
    (task_run,) = local.plans()
    needs = task_run.bank_needs()
    assert [(n.label, n.split) for n in needs] == [(e, s) for s in ("train", "test") for e in "abc"]
    banks = [(X.numpy(), meta, {}) for X, meta in map(task_run.cached_entry, needs)]
    node_cache = tmp_path / "node-cache"
    job = ray_executor.Job(tasks_file=str(tmp_path / "tasks.yaml"), run_id="r", command="c",
                           env=(("RELBENCH_CACHE_DIR", str(node_cache)), ("RELBENCH_PLUGINS", "toy_plugins")),
                           sys_path=(), plugins=ray_executor.registry_digest(registry))
    units = tuple(u.id for u in task_run.plan().units)
    try:
        result = ray_executor.compute_shard(ray_executor.Shard(job, "blobs", units, tuple(n.key for n in needs)),
                                            *banks)
        assert not list(node_cache.glob("embeddings/*"))  # the node encoded and cached nothing
        X, meta, stats = ray_executor.encode_bank(ray_executor.Encoding(job, "blobs", needs[0]))
    finally:
        ray_executor._RUNNERS.clear()
    # the banks it was given were counted by the driver: the shard counts none of them
    assert result.summary.encoded == 0 and result.summary.cached == 0 and result.summary.failures == ()
    assert (result.summary.planned, result.summary.ran, result.summary.reused) == (len(units), len(units), 0)
    assert result.summary.peak_process == "a Ray worker of blobs" and result.summary.peak_bytes > 10**7  # its peak
    stored = {line["unit"]: line["rows"] for line in ResultStore(tmp_path / "results").fetch(
        "blobs", list(ResultStore(tmp_path / "results").read("blobs").units.values()))}
    values = lambda rows: [(r["metric"], r.get("source"), r["value"]) for r in rows]  # noqa: E731
    assert {line["unit"]: values(line["rows"]) for line in result.lines} == {u: values(r) for u, r in stored.items()}
    assert (stats.encoded, stats.cached) == (1, 0) and (X == banks[0][0]).all() and meta["n"] == needs[0].n


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stored(results: Path) -> int:
    return results.read_bytes().count(b"\n") if results.is_file() else 0


def _raylet_of(node_manager_port: int) -> list[int]:
    """Process ids of the raylet started with this node-manager port (one node's)."""
    out = subprocess.run(["pgrep", "-f", f"raylet.*--node_manager_port={node_manager_port}"], capture_output=True,
                         text=True)
    return [int(p) for p in out.stdout.split()]


def test_a_two_node_cluster_that_loses_a_node_ends_with_the_local_store(tmp_path):
    pytest.importorskip("ray")
    ray_bin = str(Path(sys.executable).with_name("ray"))
    (tmp_path / "tasks.yaml").write_text(TASKS)
    env, port, worker_port = _env(tmp_path), _free_port(), _free_port()
    address = f"127.0.0.1:{port}"
    start = [ray_bin, "start", "--num-cpus=1", "--disable-usage-stats", "--node-ip-address=127.0.0.1"]
    sessions = tempfile.mkdtemp(prefix="rb-ray-")  # short: Ray's socket paths must fit 107 bytes
    try:
        subprocess.run([*start, "--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={sessions}"],
                       env=env, check=True, capture_output=True, timeout=120)
        subprocess.run([*start, f"--address={address}", f"--node-manager-port={worker_port}"], env=env, check=True,
                       capture_output=True, timeout=120)
        driver = subprocess.Popen([sys.executable, "-m", "relbench.cli", "run", "tasks.yaml", "-q", "--executor",
                                   "ray", "--address", address], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        results = tmp_path / "results" / "blobs.jsonl"
        deadline = time.monotonic() + 180
        while driver.poll() is None and time.monotonic() < deadline and not (
                _stored(results) >= 2):
            time.sleep(0.05)
        raylets = _raylet_of(worker_port)
        assert raylets and driver.poll() is None, "the worker node must die while the run is under way"
        for pid in raylets:  # the worker node dies half-way
            os.kill(pid, signal.SIGKILL)
        _, err = driver.communicate(timeout=240)
        print(f"first run: {_stored(results)} of {UNITS} units stored; {err}")
        assert driver.returncode in (0, 1), err  # 1: some units lost, reported, left to the next run
        again = subprocess.run([sys.executable, "-m", "relbench.cli", "run", "tasks.yaml", "-q", "--executor", "ray",
                                "--address", address], cwd=tmp_path, env=env, capture_output=True, text=True,
                               timeout=240)
        assert again.returncode == 0, again.stderr
    finally:
        subprocess.run([ray_bin, "stop", "--force"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(sessions, ignore_errors=True)
    local = _relbench(tmp_path, "--output", "local", "--no-leaderboard")
    assert local.returncode == 0, local.stderr
    assert _rows(tmp_path / "results") == _rows(tmp_path / "local")


def test_a_bank_encoded_with_other_arithmetic_than_planned_is_not_cached_under_the_planned_key(tmp_path):
    """A bf16 task planned on a driver without a GPU plans fp32 banks; a GPU worker encodes
    under bf16 autocast and says so in the metadata. Cached under the planned key, that
    bank would feed fp32 tasks later: the driver keeps it out of its cache."""
    from collections import Counter
    from types import SimpleNamespace

    from relbench.cache import EmbeddingCache
    from relbench.encoding import BankNeed
    from relbench.run_summary import RunStats

    runner = SimpleNamespace(stats=RunStats(), cache=EmbeddingCache(tmp_path))
    identity = {"encoder": "timm", "split": "train"}
    planned = BankNeed("cnn", "train", None, "k" * 40, identity, 3)
    X = torch.ones(3, 2).numpy()

    def answer(meta):
        return SimpleNamespace(get=lambda ref: (X, meta, ray_executor.RunSummary("t", encoded=1)))

    assert ray_executor._encoded(answer({**identity, "arithmetic": "bf16", "n": 3}), runner, None, planned, [],
                                 Counter()) == set()
    assert not runner.cache.has(planned.key) and runner.stats.encoded == 1
    ray_executor._encoded(answer({**identity, "n": 3}), runner, None, planned, [], Counter())
    assert runner.cache.has(planned.key)


def test_executor_mistakes_are_user_errors(cli_main, write_yaml, monkeypatch, capsys):
    path = write_yaml(TASKS)
    assert cli_main(["run", str(path), "--address", "auto"]) == 2
    assert "--executor ray" in capsys.readouterr().err
    assert cli_main(["run", str(path), "--executor", "ray", "-j", "2"]) == 2
    bad = write_yaml(TASKS.replace("suite:\n", "suite:\n  executor: rays\n"), "bad.yaml")
    assert cli_main(["run", str(bad)]) == 2
    assert "did you mean 'ray'" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "ray", None)  # Ray not installed
    assert cli_main(["run", str(path), "--executor", "ray"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'relbench[ray]'" in err and "Traceback" not in err
    assert not (path.parent / "results").exists()  # nothing written


def test_bank_needs_list_the_anchor_pools_selectors_declare(registry, write_yaml):
    """An executor encodes ahead what a unit reads: the task's pools, then the training
    banks of a declared anchor pool (here the out-of-domain selector's), equal to what
    the selector reads through ``pool_banks``."""
    from relbench.config import load_suite
    from relbench.runner import Runner

    path = write_yaml(TASKS.replace("selectors: [random]",
                                    "selectors: [random, {name: ood, params: {dataset: toy-blobs}}]"))
    runner = Runner(load_suite(path, registry), registry, quiet=True)
    (task_run,) = runner.plans()
    needs = task_run.bank_needs()
    assert [(n.label, n.split, n.pool) for n in needs] == [
        *((e, s, None) for s in ("train", "test") for e in "abc"), *((e, "train", "toy-blobs") for e in "abc")]
    # the pool is the task's own data set here, so its banks are the train banks (encoded once)
    assert [n.key for n in needs[6:]] == [n.key for n in needs[:3]] and len({n.key for n in needs[:6]}) == 6
    X, meta = task_run.bank_entry(needs[-1])
    assert torch.equal(X, task_run.pool_banks("toy-blobs")["c"].X) and meta["n"] == needs[-1].n == 240


class _Ref:
    """An object reference of :class:`_InlineRay`: the task's value, or what it raised."""

    def __init__(self, value=None, error: Exception | None = None):
        self.value, self.error = value, error


class _InlineRay:
    """Ray's API as the driver uses it, each Ray task computed in this process when it is
    submitted: the driver's bookkeeping in well under a second, with the worker functions
    a test may replace."""

    class exceptions:
        class RayError(Exception):
            pass

        class RayTaskError(RayError):
            def __init__(self, cause: Exception):
                super().__init__(f"{type(cause).__name__}: {cause}")
                self.cause = cause

    def __init__(self):
        self.init_error: Exception | None = None

    def is_initialized(self) -> bool:
        return False

    def init(self, **kwargs) -> None:
        if self.init_error is not None:
            raise self.init_error

    def shutdown(self) -> None:
        pass

    def cluster_resources(self) -> dict[str, float]:
        return {"CPU": 1.0}

    def put(self, value) -> _Ref:
        return _Ref(value)

    def get(self, ref: _Ref):
        if ref.error is not None:
            raise ref.error
        return ref.value

    def wait(self, refs: list, num_returns: int):
        return refs[:num_returns], refs[num_returns:]

    def cancel(self, ref: _Ref, force: bool = False) -> None:
        pass

    def remote(self, fn):
        ray = self

        class Remote:
            def options(self, **_):
                return self

            def remote(self, *args):
                try:
                    return _Ref(fn(*(ray.get(a) if isinstance(a, _Ref) else a for a in args)))
                except ray.exceptions.RayTaskError as exc:  # a task it depends on failed
                    return _Ref(error=exc)
                except Exception as exc:  # noqa: BLE001 - as Ray: the caller's get raises it
                    return _Ref(error=ray.exceptions.RayTaskError(exc))

        return Remote()


def _quick_tasks(*names: str, seeds: int = 2) -> str:
    """A tasks file of quick tasks (the absolute baseline, trained one epoch, from three
    encoders: 3 units a seed), one per name, all reading the same banks."""
    task = """
  - name: {}
    dataset: {{name: toy-blobs}}
    encoders:
      - {{name: toy-rotated, label: a, params: {{seed: 1}}}}
      - {{name: toy-rotated, label: b, params: {{seed: 2}}}}
      - {{name: toy-rotated, label: c, params: {{seed: 3}}}}
    grid: {{selectors: [random], similarities: [cosine], stitchers: [{{name: absolute, params: {{epochs: 1}}}}]}}
    metrics: [accuracy]"""
    return f"suite: {{seeds: {list(range(seeds))}, num_anchors: 16}}\ntasks:" + "".join(map(task.format, names)) + "\n"


@pytest.fixture
def inline_ray(tmp_path, monkeypatch):
    """:class:`_InlineRay` in place of Ray, the toy plugins selected as a user's own
    plugin module would be (so the "workers" load the driver's plugins)."""
    ray = _InlineRay()
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setenv("RELBENCH_PLUGINS", "toy_plugins")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tasks.yaml").write_text(_quick_tasks("blobs"))
    yield ray
    ray_executor._RUNNERS.clear()


def _run_ray(*args: str) -> int:
    """``relbench run tasks.yaml --executor ray`` in this process."""
    from relbench import cli

    return cli.main(["run", "tasks.yaml", "-q", "--executor", "ray", "--no-leaderboard", *args])


def _job(plugins: tuple) -> ray_executor.Job:
    """A job for the tasks file of the current folder, sent with driver digest ``plugins``."""
    return ray_executor.Job(tasks_file=str(Path("tasks.yaml").resolve()), run_id="r", command="c",
                            env=(("RELBENCH_PLUGINS", "toy_plugins"),), sys_path=(), plugins=plugins)


def test_a_worker_with_other_plugin_code_fails_naming_the_plugin_and_both_versions(inline_ray, monkeypatch):
    """A worker whose copy of a method is another version would plan other unit ids; it
    fails before planning instead, whatever it is asked (a shard or an encoding)."""
    from relbench.plugins import load_registry
    from relbench.encoding import BankNeed

    registry = load_registry([], [])
    job = _job(ray_executor.registry_digest(registry))
    monkeypatch.setattr(registry.get("stitcher", "relative"), "version", "3")  # the worker's copy changed
    with pytest.raises(ray_executor.PluginMismatch) as failure:
        ray_executor.compute_shard(ray_executor.Shard(job, "blobs", ("u",)))
    message = str(failure.value)
    assert "stitcher 'relative': the driver has version '2' (relbench" in message
    assert "this worker has version '3'" in message and "Install the same" in message
    assert "dataset" not in message  # only what differs
    with pytest.raises(ray_executor.PluginMismatch):
        ray_executor.encode_bank(ray_executor.Encoding(job, "blobs", BankNeed("a", "train", None, "k", {}, 1)))


def test_restrict_never_counts_a_unit_it_does_not_know_as_done(registry, write_yaml):
    from relbench.config import load_suite
    from relbench.errors import UserError
    from relbench.runner import Runner

    runner = Runner(load_suite(write_yaml(RUNNER_TASKS), registry), registry, quiet=True)
    (task_run,) = runner.plans()
    units = task_run.plan().units
    with pytest.raises(UserError, match=r"1 of the 2 units to compute here are not in this process's plan .*f{40}"):
        task_run.restrict({units[0].id, "f" * 40})
    assert task_run.restrict({units[0].id}).todo == units[:1]


def test_units_a_shard_does_not_return_fail_the_run_by_name(inline_ray, monkeypatch, capsys):
    """Before, a run stored what came back and exited 0, and every later run did the same."""
    from relbench.results import ResultStore

    compute = ray_executor.compute_shard

    def short(shard, *banks):  # a worker that returns all but its shard's first unit
        result = compute(shard, *banks)
        result.lines = [line for line in result.lines if line["unit"] != shard.units[0]]
        return result

    monkeypatch.setattr(ray_executor, "compute_shard", short)
    assert _run_ray() == 1
    err = capsys.readouterr().err
    # 2 seeds × 3 targets cut into shards of 2 and 1 units a seed
    assert "blobs: 4 units not stored ({'seed': 0, 'stitcher': 'absolute(epochs=1)', 'target': 'a'}, " in err
    assert "and 1 more): they came back from their Ray worker neither stored nor failed" in err
    assert len(ResultStore(Path("results")).read("blobs").done) == 2
    monkeypatch.setattr(ray_executor, "compute_shard", compute)
    assert _run_ray() == 0  # the next run computes them
    assert len(ResultStore(Path("results")).read("blobs").done) == 6


def test_ray_counts_banks_as_a_local_run_does(inline_ray, tmp_path, monkeypatch):
    """Each bank once per task that reads it, encoded or reused from the cache; before,
    the driver's cache hits were not counted and every shard counted its banks again."""
    from relbench.config import load_suite
    from relbench.plugins import load_registry
    from relbench.ray_executor import run_on_ray
    from relbench.runner import Runner

    (tmp_path / "tasks.yaml").write_text(_quick_tasks("blobs", "blobs-2", seeds=1))  # both read the same 6 banks
    registry = load_registry([], [])

    def counts(executor: str, cache: str, **kw) -> tuple[int, int]:
        monkeypatch.setenv("RELBENCH_CACHE_DIR", str(tmp_path / cache))
        runner = Runner(load_suite(tmp_path / "tasks.yaml", registry), registry, quiet=True,
                        output=tmp_path / executor, **kw)
        if executor == "ray":
            summary = run_on_ray(runner, None, quiet=True)
            assert summary.peak_process.startswith("a Ray worker of blobs") and summary.peak_bytes > 10**7
        else:
            runner.run()
            summary = runner.summary()
        assert summary.failures == () and summary.ran == 6 and summary.planned == 6 + summary.reused
        return summary.encoded, summary.cached

    assert counts("ray", "ray-cache") == counts("local", "local-cache") == (6, 6)  # an empty cache
    assert counts("ray", "ray-cache", force=True) == counts("local", "local-cache", force=True) == (0, 12)


def test_a_cluster_that_refuses_the_token_is_a_user_error_saying_what_to_set(inline_ray, capsys):
    """What Ray 2.5x raises joining a cluster with token authentication without its token."""
    refused = RuntimeError("Failed to connect to GCS. Last connection error: ray.exceptions.AuthenticationError: "
                           "RPC error: InvalidAuthToken: Authentication token is missing or incorrect.")
    inline_ray.init_error = ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379")
    inline_ray.init_error.__cause__ = refused
    assert _run_ray("--address", "10.0.0.1:6379") == 2
    err = capsys.readouterr().err
    assert "refused this process: it uses token authentication" in err and "Traceback" not in err
    assert "RAY_AUTH_MODE=token" in err and "RAY_AUTH_MODE=disabled" in err


def _spy_tasks(log: Path, sleep: float = 0.0) -> str:
    """The learned-anchors toy task, its selector logging every call to ``log``, with two
    relative stitchers: each recipe serves units of both, far apart in the plan, which
    shards separate whatever the number of CPUs."""
    from test_core_learned_anchors import learned_tasks

    relative = "{name: relative, params: {epochs: 2}}"
    return learned_tasks(f"[{{name: toy-spy, params: {{log: '{log}', sleep: {sleep}}}}}]").replace(
        f"[{relative}]", f"[{relative}, {{name: relative, label: relative-3, params: {{epochs: 3}}}}]")


def _calls(log: Path) -> list[tuple]:
    return sorted((seed, *held) for seed, held in map(json.loads, log.read_text().splitlines()))


#: every (seed, held-out encoder) recipe of :func:`_spy_tasks`, once
RECIPES = [(seed, h) for seed in (0, 1) for h in "abc"]


def test_shards_of_one_seed_learn_its_anchors_once(inline_ray, tmp_path, monkeypatch):
    """A seed's units cut into shards: each shard's worker asked for the seed's learned
    anchors again (12 recipes learned where a local run learns 6, on one CPU); now the first learns
    them, the others read them, and the rows are a local run's."""
    from test_core_learned_anchors import rows

    log = tmp_path / "calls.txt"
    (tmp_path / "tasks.yaml").write_text(_spy_tasks(log))
    assert _run_ray() == 0
    assert _calls(log) == RECIPES
    log.unlink()
    monkeypatch.setenv("RELBENCH_CACHE_DIR", str(tmp_path / "local-cache"))
    from relbench import cli

    assert cli.main(["run", "tasks.yaml", "-q", "--no-leaderboard", "--output", "local"]) == 0
    assert _calls(log) == RECIPES
    assert rows(tmp_path / "results") == rows(tmp_path / "local")


def test_ray_workers_learn_each_recipe_once(tmp_path):
    """Ray workers on a local Ray instance (one a CPU), each asking for the recipes of
    the seed it computes: each is learned once in the cluster, and the rows are a local
    run's."""
    pytest.importorskip("ray")
    from test_core_learned_anchors import rows

    log = tmp_path / "calls.txt"
    (tmp_path / "tasks.yaml").write_text(_spy_tasks(log, sleep=0.3))
    env = _env(tmp_path)
    ray_run = _relbench(tmp_path, "--executor", "ray", "--no-leaderboard", env=env)
    assert ray_run.returncode == 0, ray_run.stderr
    assert _calls(log) == RECIPES
    log.unlink()
    local = _relbench(tmp_path, "--output", "local", "--no-leaderboard",
                      env={**env, "RELBENCH_CACHE_DIR": str(tmp_path / "local-cache")})
    assert local.returncode == 0, local.stderr
    assert _calls(log) == RECIPES and rows(tmp_path / "results") == rows(tmp_path / "local")
