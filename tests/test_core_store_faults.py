"""Faults of the store and of plugins stay local: a stored value that is not a number is
set aside like a damaged line, a full disk stops the run cleanly with nothing half
written, a faulty metric fails only its own rows, an encoder whose splits differ in
width fails only its pairs, an edited grid parameter is reported as such, and a cache
entry with thin metadata is listed."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import pytest
import toy_plugins

from relbench import hookimpl
from relbench.config import load_suite
from relbench.errors import OutputNotWritable
from relbench.interfaces import Metric
from relbench.plugins import Registry, _discover
from relbench.results import ResultStore
from relbench.runner import Runner
from test_core_hardening import TASKS as HARDENING_TASKS

#: the hardening tests' toy task, scored by two metrics
TASKS = HARDENING_TASKS.replace("metrics: [accuracy]", "metrics: [accuracy, weighted_f1]")


def _run(registry, path):
    runner = Runner(load_suite(path, registry), registry, quiet=True)
    return runner, runner.run()


# ----------------------------------------------------------------------------- values that are not numbers


def _store_with_units(tmp_path, value=0.25):
    store = ResultStore(tmp_path)
    for i in range(3):
        store.append("t", f"u{i}", [{"task": "t", "metric": "m", "value": value, "status": "ok"}], "run")
    store.read("t")  # and its index
    return store


def _set_value(path, number: int, value) -> None:
    """Give the rows of line ``number`` (from 1) of a results file ``value``."""
    lines = path.read_text().split("\n")
    unit = json.loads(lines[number - 1])
    for row in unit["rows"]:
        row["value"] = value
    lines[number - 1] = json.dumps(unit)
    path.write_text("\n".join(lines))


@pytest.mark.parametrize("value, shown", [("abc", "'abc'"), ([0.5, 0.7], "[0.5, 0.7]"), (float("inf"), "inf"),
                                          (float("-inf"), "-inf"), (True, "True"), (None, "ok row without")])
def test_a_stored_value_that_is_not_a_number_is_set_aside_and_its_unit_recomputed(tmp_path, value, shown):
    _store_with_units(tmp_path, 0.5)  # the index no longer agrees (the value's length changes)
    _set_value(tmp_path / "t.jsonl", 2, value)
    store = ResultStore(tmp_path)
    assert store.read("t").done == {"u0", "u2"}
    warning = store.warnings[0]
    assert str(tmp_path / "t.jsonl") in warning and "(line 2)" in warning and "unit 'u1'" in warning
    assert shown in warning
    assert '"line": 2' in (tmp_path / "quarantine" / "t.jsonl").read_text()
    assert list(store.load("t")["value"]) == [0.5, 0.5]
    assert not ResultStore(tmp_path).warnings  # set aside once


def _edit_first_value_in_place(tmp_path) -> None:
    """Give the first line's value a string of the same length (its index entry still agrees)."""
    path = tmp_path / "t.jsonl"
    path.write_text(path.read_text().replace('"value": 0.25', '"value": "ab"', 1))


def test_a_value_edited_in_place_behind_the_index_never_reaches_a_frame(tmp_path):
    _store_with_units(tmp_path)
    _edit_first_value_in_place(tmp_path)
    store = ResultStore(tmp_path)
    frame = store.load("t")
    assert list(frame["unit"]) == ["u1", "u2"] and list(frame["value"]) == [0.25, 0.25]
    assert "unit 'u0'" in store.warnings[0] and "'ab' is not a finite number" in store.warnings[0]
    assert ResultStore(tmp_path).read("t").done == {"u1", "u2"}


def test_an_index_written_before_values_were_checked_is_rebuilt(tmp_path):
    from relbench.result_index import INDEX_HEADER

    _store_with_units(tmp_path)
    _edit_first_value_in_place(tmp_path)
    index = tmp_path / ".index" / "t.tsv"  # as version 1 wrote it, taking in any value
    index.write_text(index.read_text().replace(INDEX_HEADER, "relbench-results-index\t1"))
    store = ResultStore(tmp_path)
    assert store.read("t").done == {"u1", "u2"} and "unit 'u0'" in store.warnings[0]


def test_an_index_entry_lost_to_a_concurrent_rebuild_does_not_hide_its_unit(tmp_path):
    """A reader that rebuilds the index (replacing the file whole) while a worker appends
    a unit loses that unit's entry; the worker's next entry then follows a gap. The gap
    is seen, and the file indexed anew (before, the unit read as not done: a resumed run
    computed it again, and a complete store read as incomplete)."""
    writer = ResultStore(tmp_path)
    writer.append("t", "u0", [{"task": "t", "metric": "m", "value": 0.25, "status": "ok"}], "run")
    writer.read("t")
    reader = ResultStore(tmp_path)
    scanned = reader.index.scan("t")  # the reader rebuilds from what the file holds now …
    writer.append("t", "u1", [{"task": "t", "metric": "m", "value": 0.25, "status": "ok"}], "run")
    reader.index._write_index("t", scanned)  # … and replaces the index, the worker's entry for u1 with it
    writer.append("t", "u2", [{"task": "t", "metric": "m", "value": 0.25, "status": "ok"}], "run")
    index = (tmp_path / ".index" / "t.tsv").read_text()
    assert '"u1"' not in index and '"u2"' in index  # the gap, as the race leaves it
    assert ResultStore(tmp_path).read("t").done == {"u0", "u1", "u2"}
    assert '"u1"' in (tmp_path / ".index" / "t.tsv").read_text()  # indexed anew


@pytest.mark.parametrize("value", ["abc", [0.5], float("inf")])
def test_a_run_reports_and_recomputes_a_unit_whose_stored_value_is_not_a_number(cli_main, write_yaml, capsys,
                                                                                value):
    import pandas as pd

    path = write_yaml(TASKS)
    assert cli_main(["run", str(path), "-q"]) == 0
    results = path.parent / "results" / "blobs.jsonl"
    _set_value(results, 1, value)
    capsys.readouterr()
    assert cli_main(["run", str(path), "--no-leaderboard"]) == 0
    err = capsys.readouterr().err
    assert f"warning: {results}: 1 damaged line(s) (line 1)" in err and "is not a finite number" in err
    assert "ran 1 units" in err and "Traceback" not in err
    _set_value(results, 1, value)
    assert cli_main(["leaderboard", str(path)]) == 0  # no traceback, and the line never reaches the page
    released = pd.read_parquet(path.parent / "boards" / "results.parquet")
    # the store lacks the unit again, so the complete page of the first run is kept, with its rows
    assert len(released) == 8 and all(isinstance(v, float) and np.isfinite(v) for v in released["value"])


# ----------------------------------------------------------------------------- a full disk


def _fill_after(monkeypatch, lines_ok: int) -> None:
    """Have ``os.write`` of result lines fail with a full disk once ``lines_ok`` lines
    were written, after writing half of the line (as a disk that fills up does)."""
    real = os.write
    written = []

    def write(fd, data):
        if b'{"unit": ' not in bytes(data[:20]):
            return real(fd, data)
        if len(written) >= lines_ok:
            real(fd, bytes(data[:len(data) // 2]))
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(1)
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)


@pytest.mark.parametrize("cut", [False, True])
def test_a_write_cut_short_by_a_full_disk_leaves_no_partial_line(tmp_path, monkeypatch, cut):
    store = _store_with_units(tmp_path)
    path = tmp_path / "t.jsonl"
    if cut:  # a line cut short by a kill, which the append closes first
        with open(path, "ab") as fh:
            fh.write(b'{"unit": "u9", "rows": [{"ta')
    before = path.read_bytes()
    _fill_after(monkeypatch, 0)
    with pytest.raises(OutputNotWritable, match=f"results folder {tmp_path} .No space left"):
        store.append("t", "u3", [{"task": "t", "metric": "m", "value": 3.0, "status": "ok"}], "run")
    assert path.read_bytes() == before


def test_a_write_past_the_file_size_limit_leaves_the_file_as_it_was(tmp_path):
    _store_with_units(tmp_path)
    path = tmp_path / "t.jsonl"
    before = path.read_bytes()
    script = (
        "import resource, signal, sys\n"
        "from relbench.errors import OutputNotWritable\n"
        "from relbench.results import ResultStore\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"limit = {len(before) + 100}\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))\n"
        "try:\n"
        f"    ResultStore({str(tmp_path)!r}).append('t', 'u3', [{{'metric': 'm', 'value': 1.0, 'x': 'y' * 500}}], 'r')\n"
        "except OutputNotWritable as exc:\n"
        "    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert "cannot write to the results folder" in out.stdout and "Traceback" not in out.stderr, out.stderr
    assert path.read_bytes() == before


def test_a_full_disk_during_a_run_exits_2_with_a_short_message_and_the_next_run_resumes(cli_main, registry,
                                                                                        write_yaml, capsys,
                                                                                        monkeypatch):
    path = write_yaml(TASKS)
    real_write = os.write
    _fill_after(monkeypatch, 1)
    assert cli_main(["run", str(path), "-q", "--no-leaderboard"]) == 2
    err = capsys.readouterr().err
    results = path.parent / "results"
    assert f"cannot write to the results folder {results} (No space left on device)" in err
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert (results / "blobs.jsonl").read_bytes().endswith(b"\n")
    store = ResultStore(results)
    assert len(store.read("blobs").done) == 1 and not store.warnings  # one whole unit, nothing half written
    monkeypatch.setattr(os, "write", real_write)
    _, stats = _run(registry, path)
    assert stats.units_done == 1 and stats.units_skipped == 1 and not stats.failures


def test_a_cache_entry_the_disk_has_no_room_for_stays_uncached(tmp_path, monkeypatch):
    import torch

    import relbench.cache
    from relbench.cache import EmbeddingCache

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(relbench.cache, "atomic_write_bytes", full)
    cache = EmbeddingCache(tmp_path)
    cache.put("k" * 40, torch.randn(3, 2), {})
    assert "was not stored (No space left on device" in cache.warnings[0] and cache.get("k" * 40) is None


# ----------------------------------------------------------------------------- a faulty metric


@dataclass
class Faulty(Metric):
    """A metric returning what it is told to (a test fixture)."""

    name: ClassVar[str] = "toy-faulty"
    returns: str = "nan"

    def compute(self, y_true, y_pred):
        if self.returns == "raise":
            raise ValueError("broken metric")
        return {"nan": float("nan"), "inf": float("inf"), "text": "0.5", "none": None,
                "array": np.array([0.5, 0.25])}[self.returns]


FAULTY = SimpleNamespace(relbench_metrics=hookimpl(lambda: [Faulty]))
FAULTY.relbench_metrics.__name__ = "relbench_metrics"


@pytest.mark.parametrize("returns, said", [("nan", "returned nan"), ("inf", "returned inf"),
                                           ("text", "returned '0.5'"), ("none", "returned None"),
                                           ("array", "returned array([0.5 , 0.25])"),
                                           ("raise", "raised ValueError: broken metric")])
def test_a_faulty_metric_fails_only_its_own_rows(write_yaml, monkeypatch, returns, said):
    from relbench import cli

    registry = Registry(_discover() + [("toy", toy_plugins, "tests 0"), ("faulty", FAULTY, "faulty 0")])
    path = write_yaml(TASKS.replace("metrics: [accuracy, weighted_f1]",
                                    f"metrics: [accuracy, {{name: toy-faulty, label: faulty, params: {{returns: {returns}}}}}]"))
    runner, stats = _run(registry, path)
    df = runner.store.load("blobs")
    accuracy, faulty = df[df["metric"] == "accuracy"], df[df["metric"] == "faulty"]
    assert len(accuracy) == len(faulty) == 4  # two targets × two sources
    assert (accuracy["status"] == "ok").all() and accuracy["value"].between(0, 1).all()
    assert (faulty["status"] == "error").all() and faulty["value"].isna().all()
    assert faulty["error"].str.contains("metric 'faulty' (plugin 'toy-faulty')", regex=False).all()
    assert faulty["error"].str.contains(
        said, regex=False).all()
    assert len(stats.failures) == 4 and said in stats.failures[0]
    monkeypatch.setattr("relbench.plugins.load_registry", lambda *args, **kwargs: registry)
    assert cli.main(["leaderboard", str(path)]) == 0


# ----------------------------------------------------------------------------- an encoder of two widths


@dataclass
class TwoWidths(toy_plugins.Rotated):
    """The rotated blobs cut to 8 columns on the training split and 6 on the test split
    (a test fixture)."""

    name: ClassVar[str] = "toy-two-widths"

    def encode(self, items, ctx):
        X = super().encode(items, ctx)
        return X[:, :8] if len(items) == len(ctx.train) else X[:, :6]


TWO_WIDTHS = SimpleNamespace(relbench_encoders=hookimpl(lambda: [TwoWidths]))
TWO_WIDTHS.relbench_encoders.__name__ = "relbench_encoders"


def test_an_encoder_whose_splits_differ_in_width_fails_only_its_pairs(write_yaml):
    registry = Registry(_discover() + [("toy", toy_plugins, "tests 0"), ("widths", TWO_WIDTHS, "widths 0")])
    path = write_yaml(TASKS.replace("    grid:", "      - {name: toy-two-widths, label: w, params: {seed: 3}}\n"
                                                "    grid:"))
    runner, stats = _run(registry, path)
    df = runner.store.load("blobs")
    involved = (df["source"] == "w") | (df["target"] == "w")
    assert len(df[~involved]) == 8 and (df[~involved]["status"] == "ok").all()  # a, b: 2 × 2 pairs × 2 metrics
    failed = df[involved]
    assert (failed["status"] == "error").all() and len(failed) == 3  # w's own unit; w as the source of a and b
    assert failed["error"].str.contains("encoder 'w' embeds split 'train' in 8 dimensions but split 'test' in 6",
                                        regex=False).all()
    assert len(stats.failures) == 3


# ----------------------------------------------------------------------------- an edited grid parameter


def test_an_edited_parameter_of_a_grid_plugin_with_a_default_label_is_stale_not_new(registry, write_yaml):
    tasks = TASKS.replace("stitchers: [{name: relative, params: {epochs: 2}}]",
                          "stitchers: [{name: relative, params: {epochs: 2}}, {name: absolute, params: {epochs: 2}}]")
    path = write_yaml(tasks)
    _run(registry, path)
    path.write_text(tasks.replace("{name: relative, params: {epochs: 2}}", "{name: relative, params: {epochs: 3}}"))
    runner = Runner(load_suite(path, registry), registry, quiet=True)
    summary = runner.plans()[0].plan().summary()
    assert summary["to_compute"] == summary["stale"] == 2  # relative(epochs=3) for targets a and b
    assert summary["stale_reasons"] == {"unit.stitcher.params.epochs": 2}
    stats = runner.run()
    assert stats.units_done == 2 and stats.recomputed == {"unit.stitcher.params.epochs": 2}
    # a plugin replaced by one of another class is new, not an edit of the one it replaces
    path.write_text(tasks.replace("similarities: [cosine]", "similarities: [euclidean]"))
    summary = Runner(load_suite(path, registry), registry, quiet=True).plans()[0].plan().summary()
    assert summary["to_compute"] == 2 and summary["stale"] == 0


# ----------------------------------------------------------------------------- cache listing


def test_cache_ls_shows_a_question_mark_for_metadata_an_entry_lacks(cli_main, capsys, tmp_path):
    import torch

    from relbench.cache import EmbeddingCache

    cache = EmbeddingCache(tmp_path / "cache")
    cache.put("k" * 40, torch.randn(5, 3), {"label": "enc", "dataset": "d", "split": "train", "view": "v"})
    cache.put("j" * 40, torch.randn(5, 3), {})
    meta_path = cache.dir / f"{'k' * 40}.json"
    meta = json.loads(meta_path.read_text())
    for field in ("shape", "label", "view"):
        del meta[field]
    meta_path.write_text(json.dumps(meta))
    assert cli_main(["cache", "ls"]) == 0
    out = capsys.readouterr().out
    assert f"{'k' * 40}  ?" in out and "d/train/?  ?  " in out and "?/?/?  5×3" in out and "2 entries" in out
