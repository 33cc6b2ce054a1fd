"""Input relbench does not expect gets a clear answer: names that cannot escape their
folder, labels that cannot mean "empty", no duplicate YAML keys, no NaN parameter, no NaN
ever scored, and a plugin's sys.exit isolated like any other failure."""

from __future__ import annotations

import pytest
import toy_plugins

from relbench.config import load_suite
from relbench.errors import ConfigError
from relbench.runner import Runner

TASKS = """\
suite: {seeds: [0], num_anchors: 16, output: results, leaderboards: boards}
tasks:
  - name: blobs
    dataset: {name: toy-blobs, params: {classes: 4}}
    encoders:
      - {name: toy-rotated, label: a, params: {seed: 1}}
      - {name: toy-rotated, label: b, params: {seed: 2, scale: 3.0}}
    grid:
      selectors: [random]
      similarities: [cosine]
      stitchers: [{name: relative, params: {epochs: 2}}]
    metrics: [accuracy]
"""


@pytest.mark.parametrize("name", ["../README", "../../x", "/abs/path", "a/b", "README", "readme", "figures",
                                  "-starts-with-dash", ".hidden", "x" * 65, "tab\there", "ünïcode"])
def test_task_names_that_could_escape_or_collide_are_refused(registry, write_yaml, name):
    path = write_yaml(TASKS.replace("name: blobs", f"name: {name!r}"))
    with pytest.raises(ConfigError, match="task name .* is not allowed"):
        load_suite(path, registry)


def test_task_names_differing_only_in_case_are_refused(registry, write_yaml):
    second = TASKS.split("tasks:\n", 1)[1].replace("name: blobs", "name: Blobs")
    with pytest.raises(ConfigError, match="compared without case"):
        load_suite(write_yaml(TASKS + second), registry)


@pytest.mark.parametrize("label", ["'-'", "none", "None", "[a, b]", "{x: 1}", "' padded '", "'" + "l" * 101 + "'"])
def test_labels_that_mean_empty_or_are_not_text_are_refused(registry, write_yaml, label):
    path = write_yaml(TASKS.replace("{name: relative, params:", f"{{name: relative, label: {label}, params:"))
    with pytest.raises(ConfigError, match="label"):
        load_suite(path, registry)


def test_duplicate_yaml_keys_are_refused_but_anchor_overrides_are_not(registry, write_yaml):
    with pytest.raises(ConfigError, match="duplicate key 'suite'"):
        load_suite(write_yaml(TASKS + "suite: {seeds: [1]}\n"), registry)
    text = "x-head: &head {epochs: 2, lr: 0.01}\n" + TASKS.replace(
        "{name: relative, params: {epochs: 2}}", "{name: relative, params: {<<: *head, epochs: 3}}")
    task = load_suite(write_yaml(text), registry).tasks[0]
    assert task.grid["stitchers"][0].params == {"epochs": 3, "lr": 0.01}


@pytest.mark.parametrize("edit, message", [
    (("epochs: 2}", "epochs: 2, lr: .inf}"), "expects"),
    (("epochs: 2}", "epochs: 2, lr: .nan}"), "expects"),
    (("seeds: [0]", "seeds: [-1]"), "seeds between 0"),
    (("seeds: [0]", "seeds: [4294967296]"), "seeds between 0"),
    (("num_anchors: 16", "num_anchors: 16, device: 'cuda:-1'"), "cuda:N"),
])
def test_non_finite_parameters_out_of_range_seeds_and_bad_devices_are_refused(registry, write_yaml, edit, message):
    with pytest.raises(ConfigError, match=message):
        load_suite(write_yaml(TASKS.replace(*edit)), registry)


def test_a_tasks_file_that_is_not_utf8_is_a_clear_error(registry, tmp_path):
    path = tmp_path / "tasks.yaml"
    path.write_bytes(TASKS.replace("Toy", "T").encode() + b"# caf\xe9\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_suite(path, registry)


def _run(registry, path):
    runner = Runner(load_suite(path, registry), registry, quiet=True)
    stats = runner.run()
    return runner, stats


def test_nan_features_are_an_error_row_never_a_score(registry, write_yaml, monkeypatch):
    from relbench_relreps.similarities import Cosine

    real = Cosine.project

    def poisoned(self, X, A):
        rel = real(self, X, A)
        rel[0, 0] = float("nan")
        return rel

    monkeypatch.setattr(Cosine, "project", poisoned)
    runner, stats = _run(registry, write_yaml(TASKS))
    df = runner.store.load("blobs")
    assert (df["status"] == "error").all() and len(stats.failures) == 2
    assert df["error"].str.contains("non-finite").all()


def test_a_nan_metric_is_an_error_row_never_a_score(registry, write_yaml, monkeypatch):
    from relbench_metrics.classification import Accuracy

    monkeypatch.setattr(Accuracy, "compute", lambda self, y, p: float("nan"))
    runner, stats = _run(registry, write_yaml(TASKS))
    df = runner.store.load("blobs")
    assert set(df["status"]) == {"error"} and df["error"].str.contains("'accuracy' .* returned nan").all()


def test_a_plugin_calling_sys_exit_fails_its_unit_and_the_run_goes_on(registry, write_yaml, monkeypatch):
    def exits(self, items, ctx):
        raise SystemExit(3)

    monkeypatch.setattr(toy_plugins.Rotated, "encode", exits)
    runner, stats = _run(registry, write_yaml(TASKS))
    assert stats.failures and "sys.exit(3)" in stats.failures[0]


# ----------------------------------------------------------------------------- the results store


def _store_with_units(tmp_path):
    from relbench.results import ResultStore

    store = ResultStore(tmp_path)
    for i in range(3):
        store.append("t", f"u{i}", [{"task": "t", "metric": "m", "value": float(i), "status": "ok"}], "run")
    return store


@pytest.mark.parametrize("damage", [b"[]", b"123", b'{"no": "unit"}', b'{"unit": "u9", "rows": 5}', b"\xff\xfe{"])
def test_damaged_result_lines_are_set_aside_and_their_units_recomputed(tmp_path, damage):
    from relbench.results import ResultStore

    _store_with_units(tmp_path)
    path = tmp_path / "t.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines.insert(1, damage)
    path.write_bytes(b"\n".join(lines))
    store = ResultStore(tmp_path)
    assert store.read("t").done == {"u0", "u1", "u2"}
    assert "damaged line(s) (line 2)" in store.warnings[0]
    kept = (tmp_path / "quarantine" / "t.jsonl").read_text()
    assert '"line": 2' in kept
    # the damaged line is gone (compared as a line: "123" may well occur inside a timestamp)
    assert damage not in path.read_bytes().split(b"\n") and not ResultStore(tmp_path).warnings  # reported once


def test_a_results_file_replaced_by_a_folder_or_a_link_is_set_aside(tmp_path):
    from relbench.errors import OutputNotWritable
    from relbench.results import ResultStore

    (tmp_path / "t.jsonl").mkdir()
    store = ResultStore(tmp_path)
    assert store.read("t").done == set() and "not a results file" in store.warnings[0]
    victim = tmp_path / "elsewhere.txt"
    victim.write_text("keep me")
    (tmp_path / "u.jsonl").symlink_to(victim)
    with pytest.raises(OutputNotWritable, match="never a link"):
        ResultStore(tmp_path).append("u", "u0", [], "run")
    assert victim.read_text() == "keep me"


def test_a_full_disk_leaves_the_results_file_as_it_was(tmp_path, monkeypatch):
    import errno
    import os

    from relbench.errors import OutputNotWritable

    store = _store_with_units(tmp_path)
    before = (tmp_path / "t.jsonl").read_bytes()
    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OutputNotWritable, match="No space left"):
        store.append("t", "u3", [{"task": "t", "metric": "m", "value": 3.0, "status": "ok"}], "run")
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert (tmp_path / "t.jsonl").read_bytes() == before


def test_a_store_sees_units_another_process_wrote(tmp_path):
    from relbench.results import ResultStore

    mine, theirs = ResultStore(tmp_path), ResultStore(tmp_path)
    assert mine.read("t").done == set()
    theirs.append("t", "u0", [{"task": "t", "metric": "m", "value": 1.0, "status": "ok"}], "run")
    assert mine.read("t").done == {"u0"}  # e.g. the parent of -j workers, rendering pages


def test_two_runs_on_one_store_share_the_work(registry, write_yaml):
    import threading

    from relbench.results import ResultStore

    two = TASKS + TASKS.split("tasks:\n", 1)[1].replace("name: blobs", "name: blobs-2")
    path = write_yaml(two)
    runners = [Runner(load_suite(path, registry), registry, quiet=True) for _ in range(2)]
    errors = []

    def run(runner):
        try:
            runner.run()
        except Exception as exc:  # noqa: BLE001 - both runs must succeed, reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(r,)) for r in runners]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []  # before: one run's probe of the store was deleted by the other's
    units = 2  # per task: one seed × one stitcher × two targets
    assert sum(r.stats.units_done for r in runners) == 2 * units  # every unit computed once, by one of them
    stored = ResultStore(path.parent / "results")
    assert all(len(stored.load(t, all_runs=True)) == units * 2 for t in ("blobs", "blobs-2"))  # × two sources


def test_a_lock_is_released_when_its_holder_dies(tmp_path):
    import subprocess
    import sys

    from relbench.results import ResultStore

    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from relbench.results import ResultStore\n"
        f"with ResultStore({str(tmp_path)!r}).lock('t', wait=True):\n"
        "    print('held', flush=True); time.sleep(60)")], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with ResultStore(tmp_path).lock("t", wait=False) as held:
        assert not held
    holder.kill()
    holder.wait()
    with ResultStore(tmp_path).lock("t", wait=False) as held:
        assert held  # a killed run never leaves a stale lock


def test_a_full_disk_while_drawing_pages_is_exit_2_and_leaves_no_partial_figure(cli_main, registry, write_yaml,
                                                                                 monkeypatch, capsys):
    import errno

    import matplotlib.figure

    path = write_yaml(TASKS)
    _run(registry, path)
    real = matplotlib.figure.Figure.savefig

    def full(self, fname, *args, **kwargs):
        with open(fname, "wb") as fh:
            fh.write(b"\x89PNG half")  # a partial file, as a full disk leaves it
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", full)
    assert cli_main(["leaderboard", str(path)]) == 2
    err = capsys.readouterr().err
    assert "cannot write the leaderboards folder" in err and "No space left" in err and "Traceback" not in err
    assert not list((path.parent / "boards").glob("figures/**/*.png"))
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", real)
    assert cli_main(["leaderboard", str(path)]) == 0 and list((path.parent / "boards").glob("figures/**/*.png"))
