"""Results are exactly what the tasks file says: a unit is identified by everything that
produced it, an edit recomputes exactly the units it changes (and says why), labels are
names only, pages show only the current tasks file's rows, and directions come from
where a number is produced."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest
import toy_plugins

from relbench import cli, hookimpl
from relbench.config import load_suite
from relbench.identity import SharedInputs, changed_fields, explain, fingerprint
from relbench.interfaces import Metric
from relbench.plugins import Registry, _discover
from relbench.runner import Runner

TASKS = """\
suite:
  seeds: [0, 1]
  num_anchors: 16
  output: results
  leaderboards: boards
tasks:
  - name: blobs
    dataset: {name: toy-blobs, params: {classes: 4, train_size: 240}}
    encoders:
      - {name: toy-rotated, label: a, params: {seed: 1}}
      - {name: toy-rotated, label: b, params: {seed: 2, scale: 3.0}}
    grid:
      selectors: [random]
      similarities: [cosine]
      stitchers: [{name: relative, label: rel, params: {epochs: 2}}, {name: absolute, label: abs, params: {epochs: 2}}]
    metrics: [accuracy]
"""
UNITS = 2 * 2 * 2  # seeds × stitchers × targets


def _run(registry, path, **kw):
    runner = Runner(load_suite(path, registry), registry, quiet=True, **kw)
    return runner, runner.run()


def _plan(registry, path) -> dict:
    runner = Runner(load_suite(path, registry), registry, quiet=True)
    return runner.plans()[0].plan().summary()


def test_fingerprint_ignores_labels_but_not_content():
    inputs = {"encoders": {"a": {"params": {"seed": 1}}, "b": {"params": {"seed": 2}}}, "unit": {"seed": 0}}
    renamed = {"encoders": {"x": {"params": {"seed": 1}}, "y": {"params": {"seed": 2}}}, "unit": {"seed": 0}}
    changed = {"encoders": {"a": {"params": {"seed": 1}}, "b": {"params": {"seed": 3}}}, "unit": {"seed": 0}}
    assert fingerprint(inputs) == fingerprint(renamed) != fingerprint(changed)
    assert changed_fields(inputs, changed) == ["encoders.b.params.seed"]
    derived = {"dataset": {"params": {"n": 2}, "fingerprint": "x"}}
    assert explain(derived, {"dataset": {"params": {"n": 3}, "fingerprint": "y"}}) == ["dataset.params.n"]
    assert explain(derived, {"dataset": {"params": {"n": 2}, "fingerprint": "y"}}) == ["dataset.fingerprint"]


@pytest.mark.parametrize("field", ["unit", "aaa", "encoders"])
def test_shared_inputs_fingerprint_each_unit_as_the_whole_inputs_would(field):
    base = {"protocol": "2", "encoders": {"a": {"params": {"seed": 1}}, "b": {"params": {"seed": 2, "w": "é\t"}}},
            "metrics": {"acc": {"class": "m:Acc"}}, "num_anchors": 16, "precision": None, "unit": {"stale": True}}
    units = [{"seed": 0, "stitcher": {"params": {"lr": 1e-3, "x": [1, 2.5]}}}, {"seed": 1, "held_out": []},
             {"z": {"b": 1, "a": "ü"}}, 3, {"b": {"params": {"seed": 2}}, "a": {"params": {"seed": 1}}}]
    shared = SharedInputs(base, field)
    for unit in units:
        assert shared.fingerprint(unit) == fingerprint({**base, field: unit})
    assert len({shared.fingerprint(unit) for unit in units}) == len(units)


def test_tasks_on_one_data_set_and_protocol_share_each_seed_s_draw(registry, write_yaml):
    two = TASKS + TASKS.split("tasks:\n", 1)[1].replace("name: blobs", "name: blobs-again")
    other = two.replace("seeds: [0, 1]", "seeds: [0, 1]\n  protocol: {validation: 0.25}")
    runner = Runner(load_suite(write_yaml(two), registry), registry, quiet=True)
    first, second = (run.bank_store.draw(0) for run in runner.plans())
    assert first is second and len(runner.draws) == 2  # a draw per seed, not per task and seed
    assert runner.plans()[0].bank_store.draw(1) is not first
    apart = Runner(load_suite(write_yaml(other), registry), registry, quiet=True)
    assert len(apart.plans()[0].bank_store.draw(0).validation) > len(first.validation) > 0  # 25 % against 20 %


def test_editing_a_data_set_parameter_recomputes_exactly_its_units_and_says_why(registry, write_yaml):
    path = write_yaml(TASKS)
    _, first = _run(registry, path)
    assert first.units_done == UNITS and not first.failures
    path.write_text(TASKS.replace("train_size: 240", "train_size: 200"))
    summary = _plan(registry, path)
    assert summary["to_compute"] == summary["stale"] == UNITS
    assert summary["stale_reasons"] == {"dataset.params.train_size": UNITS}
    runner, stats = _run(registry, path)
    assert stats.units_done == UNITS and stats.recomputed == {"dataset.params.train_size": UNITS}
    # the old rows stay as history, the new ones are current
    assert len(runner.store.load("blobs", all_runs=True)) == 2 * len(runner.store.load("blobs", units={
        u.id for u in runner.plans()[0].plan().units}))


def test_renaming_a_label_recomputes_nothing(registry, write_yaml):
    path = write_yaml(TASKS)
    _run(registry, path)
    path.write_text(TASKS.replace("label: rel,", "label: relative-decoder,").replace("label: a,", "label: enc-a,"))
    assert _plan(registry, path)["to_compute"] == 0
    _, stats = _run(registry, path)
    assert stats.units_done == 0 and stats.units_skipped == UNITS


def test_editing_one_stitcher_recomputes_only_its_units(registry, write_yaml):
    path = write_yaml(TASKS)
    _run(registry, path)
    path.write_text(TASKS.replace("label: rel, params: {epochs: 2}", "label: rel, params: {epochs: 3}"))
    _, stats = _run(registry, path)
    assert stats.units_done == UNITS // 2 and stats.units_skipped == UNITS // 2
    assert stats.recomputed == {"unit.stitcher.params.epochs": UNITS // 2}


def test_editing_an_encoder_or_the_metrics_recomputes_every_unit_reading_them(registry, write_yaml):
    path = write_yaml(TASKS)
    _run(registry, path)
    path.write_text(TASKS.replace("scale: 3.0", "scale: 2.0"))
    reasons = _plan(registry, path)["stale_reasons"]  # units whose target is b also name it there
    assert sum(reasons.values()) == UNITS and all(r.startswith("encoders.b.params.scale") for r in reasons)
    path.write_text(TASKS.replace("metrics: [accuracy]", "metrics: [accuracy, weighted_f1]"))
    assert _plan(registry, path)["stale_reasons"] == {"metrics.weighted_f1": UNITS}


def test_a_new_seed_adds_units_and_reuses_the_others(registry, write_yaml):
    path = write_yaml(TASKS)
    _run(registry, path)
    path.write_text(TASKS.replace("seeds: [0, 1]", "seeds: [0, 1, 2]"))
    summary = _plan(registry, path)
    assert summary["units"] == UNITS * 3 // 2 and summary["to_compute"] == UNITS // 2 and summary["stale"] == 0


def _registry_with(module, package: str) -> Registry:
    return Registry(_discover() + [("toy", toy_plugins, "tests 0"), ("third", module, package)])


@dataclass
class Loss(Metric):
    """Misclassification rate (a third-party metric where lower is better)."""

    name: ClassVar[str] = "error-rate"
    higher_is_better: ClassVar[bool] = False

    def compute(self, y_true, y_pred) -> float:
        return float(np.mean(np.asarray(y_true) != np.asarray(y_pred)))


THIRD = SimpleNamespace(relbench_metrics=hookimpl(lambda: [Loss]))
THIRD.relbench_metrics.__name__ = "relbench_metrics"


def test_a_plugin_version_or_package_bump_recomputes_its_units(write_yaml, monkeypatch):
    path = write_yaml(TASKS.replace("metrics: [accuracy]", "metrics: [error-rate]"))
    old = _registry_with(THIRD, "third-party 0.1.0")
    _, first = _run(old, path)
    assert first.units_done == UNITS
    new = _registry_with(THIRD, "third-party 0.2.0")
    assert _plan(new, path)["stale_reasons"] == {"metrics.error-rate.package": UNITS}
    runner, _ = _run(new, path)
    current = runner.store.load("blobs", units={u.id for u in runner.plans()[0].plan().units})
    # every row names every package involved
    assert all(list(p) == ["relbench 0.1.0", "tests 0", "third-party 0.2.0"] for p in current["packages"])
    monkeypatch.setattr(Loss, "version", "2")  # the author's own version of the method
    assert _plan(new, path)["stale_reasons"] == {"metrics.error-rate.version": UNITS}


def test_a_lower_is_better_third_party_metric_ranks_lowest_first_with_a_down_arrow(write_yaml, monkeypatch):
    registry = _registry_with(THIRD, "third-party 0.1.0")
    path = write_yaml(TASKS.replace("metrics: [accuracy]", "metrics: [error-rate]"))
    monkeypatch.setattr("relbench.plugins.load_registry", lambda *args, **kwargs: registry)
    assert cli.main(["run", str(path), "-q"]) == 0
    page = (path.parent / "boards" / "blobs.md").read_text()
    assert "| error-rate ↓ [95 % CI]" in page and "error-rate ↑" not in page
    ranking = page.split("### Ranking", 1)[1].split("###", 1)[0]
    first = [line for line in ranking.splitlines() if line.startswith("| 1 ")][0]
    assert "rel" in first and "**" in first  # relative stitches (low error) and is best, in bold
    rows = Runner(load_suite(path, registry), registry).store.load("blobs")
    assert set(rows["direction"]) == {"lower"}


def test_pages_show_only_rows_of_the_current_tasks_file(registry, write_yaml, monkeypatch, capsys):
    monkeypatch.setattr("relbench.plugins.load_registry", lambda *args, **kwargs: registry)
    path = write_yaml(TASKS)
    assert cli.main(["run", str(path), "-q"]) == 0
    page = path.parent / "boards" / "blobs.md"
    assert "| abs " in page.read_text()
    # the tasks file no longer has the absolute head: its stored rows are history, not shown
    path.write_text(TASKS.replace(", {name: absolute, label: abs, params: {epochs: 2}}", ""))
    assert cli.main(["leaderboard", str(path)]) == 0
    assert "| abs " not in page.read_text() and "| rel " in page.read_text()
    # an edited parameter that has not been run yet: nothing of the old identity reaches the page
    path.write_text(TASKS.replace("train_size: 240", "train_size: 200"))
    assert cli.main(["leaderboard", str(path)]) == 0
    assert "| rel " not in page.read_text() and "No results of the current tasks file" in page.read_text()
    # a task removed from the tasks file loses its generated page; a hand-written file stays
    (path.parent / "boards" / "notes.md").write_text("my own notes")
    path.write_text(TASKS.replace("name: blobs", "name: renamed"))
    assert cli.main(["leaderboard", str(path)]) == 0
    assert not page.exists() and (path.parent / "boards" / "notes.md").exists()


def test_dry_run_counts_equal_what_a_run_does_and_honour_task_globs(registry, write_yaml, monkeypatch, capsys):
    monkeypatch.setattr("relbench.plugins.load_registry", lambda *args, **kwargs: registry)
    two = TASKS + TASKS.split("tasks:\n", 1)[1].replace("name: blobs", "name: other-blobs")
    path = write_yaml(two)
    assert cli.main(["run", str(path), "--dry-run", "--json", "--task", "other-*"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [t["task"] for t in plan["tasks"]] == ["other-blobs"] and plan["to_compute"] == UNITS
    _, stats = _run(registry, path, only=["other-*"])
    assert stats.units_done == plan["to_compute"]
    assert cli.main(["run", str(path), "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert {t["task"]: t["to_compute"] for t in plan["tasks"]} == {"blobs": UNITS, "other-blobs": 0}


def test_export_writes_one_flat_row_per_unit_and_metric(registry, write_yaml, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr("relbench.plugins.load_registry", lambda *args, **kwargs: registry)
    path = write_yaml(TASKS)
    _run(registry, path)
    out = tmp_path / "r.parquet"
    assert cli.main(["export", str(path), "--to", str(out)]) == 0  # a parameterless plugin (cosine(center))…
    df = pd.read_parquet(out)
    assert len(df) == 2 * 2 * 2 * 2  # seeds × stitchers × targets × sources, one metric
    assert set(df["inputs.unit.stitcher.params.epochs"]) == {2}
    assert {"selector", "stitcher", "source", "target", "direction", "inputs.dataset.params.train_size"} <= set(df)


def _third_party_module(tmp_path) -> None:
    (tmp_path / "my_method.py").write_text(
        "from dataclasses import dataclass\n"
        "from typing import ClassVar\n"
        "from relbench import hookimpl\n"
        "from relbench.interfaces import Similarity\n\n"
        "@dataclass\n"
        "class Dot(Similarity):\n"
        '    """Plain dot products with the anchors.\n\n    Parameters\n    ----------\n'
        '    scale : float, default 1.0\n        Multiplies every product.\n    """\n'
        '    name: ClassVar[str] = "my-dot"\n'
        "    scale: float = 1.0\n\n"
        "    def project(self, X, A):\n"
        "        return self.scale * X @ A.T\n\n"
        "@hookimpl\n"
        "def relbench_similarities():\n"
        "    return [Dot]\n")


def _relbench(*args, cwd, env=None):
    import os

    return subprocess.run([sys.executable, "-m", "relbench.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def test_a_plugin_module_loads_without_installing_and_shows_in_full(tmp_path):
    _third_party_module(tmp_path)
    shown = _relbench("--plugin", "my_method", "plugins", "my-dot", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "my_method (not installed)" in shown.stdout and "scale: float; default 1.0" in shown.stdout
    listed = _relbench("plugins", "--json", "--interface", "similarity", cwd=tmp_path,
                       env={"RELBENCH_PLUGINS": "my_method"})
    described = {p["name"]: p for p in json.loads(listed.stdout)}
    assert described["my-dot"]["parameters"][0] == {**described["my-dot"]["parameters"][0], "name": "scale",
                                                    "default": 1.0, "doc": "Multiplies every product."}
    assert "cosine" in described
    missing = _relbench("--plugin", "no_such_module", "plugins", cwd=tmp_path)
    assert missing.returncode == 2 and "no_such_module" in missing.stderr and "Traceback" not in missing.stderr


def test_output_into_a_closed_pipe_ends_quietly(tmp_path):
    proc = subprocess.run(f"{sys.executable} -m relbench.cli plugins | head -n 3", shell=True, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() and "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_a_disable_that_matches_nothing_is_a_warning(tmp_path):
    proc = _relbench("--disable", "no-such-plugin", "plugins", "--interface", "metric", cwd=tmp_path)
    assert proc.returncode == 0 and "accuracy" in proc.stdout
    assert "--disable 'no-such-plugin' matches no plugin" in proc.stderr


@pytest.mark.parametrize("edit, message", [
    (("      - {name: toy-rotated, label: b, params: {seed: 2, scale: 3.0}}\n", ""), "at least two encoders"),
    (("label: a, params", "label: a, view: image, params"), "view 'image' is not a view"),
])
def test_user_errors_come_before_any_work(cli_main, write_yaml, capsys, edit, message):
    path = write_yaml(TASKS.replace(*edit))
    toy_plugins.Rotated.calls.clear()
    assert cli_main(["run", str(path), "-q"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not toy_plugins.Rotated.calls and not (path.parent / "results").exists()


def test_a_missing_asset_of_a_named_plugin_exits_2_before_any_work(cli_main, write_yaml, capsys, monkeypatch):
    from relbench.errors import MissingAsset

    def missing(self, ctx):
        raise MissingAsset("Python package 'toy-weights' is not installed: pip install toy-weights")

    monkeypatch.setattr(toy_plugins.Rotated, "fingerprint", missing)
    toy_plugins.Rotated.calls.clear()
    path = write_yaml(TASKS)
    assert cli_main(["run", str(path), "-q"]) == 2
    err = capsys.readouterr().err
    assert "pip install toy-weights" in err and "Traceback" not in err and not toy_plugins.Rotated.calls


def test_missing_tasks_file_and_negative_jobs_exit_2(cli_main, tmp_path, capsys):
    assert cli_main(["leaderboard", str(tmp_path / "missing.yaml")]) == 2
    assert "no such tasks file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        cli_main(["run", str(tmp_path / "t.yaml"), "-j", "-1"])
    assert exit_.value.code == 2 and "expected 0" in capsys.readouterr().err


def test_quiet_prints_nothing_but_errors(cli_main, write_yaml, capsys):
    assert cli_main(["run", str(write_yaml(TASKS)), "-q"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_an_unchanged_page_is_not_drawn_again_unless_a_file_of_it_is_missing(registry, write_yaml):
    from relbench.leaderboard import render

    path = write_yaml(TASKS)
    runner, _ = _run(registry, path)
    boards = path.parent / "boards"

    def draw():
        plans = runner.plans()
        return render(runner.store, boards, [tr.task for tr in plans], {tr.task.name: {u.id for u in tr.plan().units}
                                                                     for tr in plans})[1:]

    assert [p.name for p in draw()] == ["blobs.md"]
    assert draw() == []  # nothing changed
    next(boards.glob("figures/blobs/*.png")).unlink()
    assert [p.name for p in draw()] == ["blobs.md"]  # a missing figure redraws the page
    path.write_text(TASKS.replace("seeds: [0, 1]", "seeds: [0, 1, 2]"))
    runner, _ = _run(registry, path)
    assert [p.name for p in draw()] == ["blobs.md"]  # new rows redraw it


def test_a_claim_naming_an_empty_part_matches_rows_that_do_not_use_it():
    from relbench.claims import claims_section
    from relbench_stitching import Stitching

    rows = [{"selector": "random", "similarity": sim, "stitcher": "relative", "regularizer": reg, "source": "a",
             "target": "b", "seed": seed, "metric": "accuracy", "value": value, "direction": "higher", "status": "ok"}
            for sim, reg, value in (("robust", None, 0.8), ("robust", "topo", 0.7)) for seed in (0, 1)]
    claim = {"claim": "topo helps", "better": {"similarity": "robust", "regularizer": "topo"},
             "worse": {"similarity": "robust", "regularizer": "-"}}
    text = claims_section(Stitching(), pd.DataFrame(rows), [claim], {})
    assert "**does not hold** — similarity=robust, regularizer=topo: 0.700 [0.700, 0.700] vs similarity=robust, " \
           "regularizer=-: 0.800 [0.800, 0.800]" in text


def test_pages_read_rows_in_plan_order_whatever_order_they_were_stored_in(registry, write_yaml, tmp_path):
    """A Ray run stores units as they finish. The page reads them in plan order, so a
    mean's rounding (0.6075 → 0.607 or 0.608, seen on a real suite) cannot depend on it."""
    from relbench.leaderboard import render
    from relbench.results import ResultStore

    path = write_yaml(TASKS)
    runner, _ = _run(registry, path)
    (task_run,) = runner.plans()
    plan = [u.id for u in task_run.plan().units]
    shuffled = ResultStore(tmp_path / "shuffled")
    lines = runner.store.fetch("blobs", list(runner.store.read("blobs").units.values()))
    for line in reversed(lines):
        shuffled.append("blobs", line["unit"], line["rows"], line["run"], key=line["key"], inputs=line["inputs"])
    in_plan_order = runner.store.load("blobs", units=plan)
    assert in_plan_order.equals(shuffled.load("blobs", units=plan))
    assert list(dict.fromkeys(in_plan_order["unit"])) == plan
    assert list(dict.fromkeys(shuffled.load("blobs", units=set(plan))["unit"])) == plan[::-1]  # a set: store order
    pages = [render(store, tmp_path / name, [task_run.task], {"blobs": plan}, redraw=True) and
             (tmp_path / name / "blobs.md").read_text() for store, name in ((runner.store, "a"), (shuffled, "b"))]
    assert pages[0] == pages[1]
