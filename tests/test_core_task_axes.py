"""Grid axes are the task kind's declaration (``TaskKind.axes``): a kind of another
package declares axes of its own (here ``anchorings`` and ``probes``, in
tests/axis_plugins.py) and the tasks file, the unit bounds, ``--dry-run`` and a run
serve them with no change to relbench."""

from __future__ import annotations

import json
from pathlib import Path

import axis_plugins
import pytest
import toy_plugins

from relbench.config import load_suite, unit_bound
from relbench.errors import ConfigError
from relbench.interfaces import Axis
from relbench.parallel import grid_weight
from relbench.plugins import Registry, _discover
from relbench.runner import Runner
from relbench.testing import make_task, spec
from test_public_api import core_imports

TASKS = """\
suite: {seeds: [0, 1], num_anchors: 8, output: results, leaderboards: boards}
tasks:
  - name: probes
    kind: toy-probing
    dataset: {name: toy-blobs, params: {classes: 4}}
    encoders:
      - {name: toy-rotated, label: a, params: {seed: 1}}
      - {name: toy-rotated, label: b, params: {seed: 2, scale: 3.0}}
    grid:
      anchorings: [random, stratified]
      probes: [cosine, none]
"""
#: seeds × anchorings × probes × encoders
UNITS = 2 * 2 * 2 * 2


@pytest.fixture
def axes_registry():
    """The built-in and toy plugins plus the probing kind, as an installed package's."""
    return Registry(_discover() + [("toy", toy_plugins, "tests 0"), ("probing", axis_plugins, "tests 0")])


def _error(registry, path) -> str:
    with pytest.raises(ConfigError) as err:
        load_suite(path, registry)
    return str(err.value)


def test_the_probing_kind_imports_relbench_only_through_the_api():
    assert core_imports(Path(axis_plugins.__file__).read_text()) == []


def test_the_grid_holds_the_axes_the_kind_declares(axes_registry, write_yaml):
    (task,) = load_suite(write_yaml(TASKS), axes_registry).tasks
    assert list(task.grid) == ["anchorings", "probes"]
    assert [s.label for s in task.grid["anchorings"]] == ["random", "stratified"]
    assert [s and s.label for s in task.grid["probes"]] == ["cosine", None]
    assert [s.label for s in task.specs("selector")] == ["random", "stratified"]
    assert unit_bound(task) == UNITS and grid_weight(task) == UNITS


def test_an_omitted_axis_holds_none_only_where_the_kind_allows_it(axes_registry, write_yaml):
    (task,) = load_suite(write_yaml(TASKS.replace("      probes: [cosine, none]\n", "")), axes_registry).tasks
    assert task.grid["probes"] == [None]
    message = _error(axes_registry, write_yaml(TASKS.replace("      anchorings: [random, stratified]\n", "")))
    assert "tasks.yaml:3" in message and "needs `grid.anchorings`" in message


@pytest.mark.parametrize("edit, at, said", [
    (("probes:", "probe:"), "tasks.yaml:11: at `tasks[0].grid.probe`", "did you mean 'probes'?"),
    (("probes:", "stitchers:"), "tasks.yaml:11: at `tasks[0].grid.stitchers`", "unknown grid key 'stitchers'"),
    (("[random, stratified]", "[none]"), "tasks.yaml:10: at `tasks[0].grid.anchorings[0].name`",
     "unknown selector 'none'"),
    (("[cosine, none]", "[random]"), "tasks.yaml:11: at `tasks[0].grid.probes[0].name`", "unknown similarity 'random'"),
    (("[random, stratified]", "[toy-spy]"), "tasks.yaml:10: at `tasks[0].grid.anchorings[0]`", "learns from"),
])
def test_the_loader_checks_each_axis_against_the_declaration(axes_registry, write_yaml, edit, at, said):
    message = _error(axes_registry, write_yaml(TASKS.replace(*edit)))
    assert at in message and said in message


def test_a_kind_without_axes_refuses_a_grid(axes_registry, write_yaml):
    registry = Registry(_discover() + [("toy", toy_plugins, "tests 0"), ("tallies", toy_plugins.TALLIES, "tests 0")])
    text = TASKS.replace("kind: toy-probing", "kind: toy-tally").replace("anchorings:", "selectors:")
    message = _error(registry, write_yaml(text))
    assert "tasks.yaml:10: at `tasks[0].grid.selectors`" in message and "declares no grid axes" in message


def test_the_unit_bound_multiplies_the_declared_axes(axes_registry, write_yaml):
    many = "[" + ", ".join(f"{{name: random, label: r{i}}}" for i in range(3_000)) + "]"
    message = _error(axes_registry, write_yaml(TASKS.replace("[random, stratified]", many)))
    assert "asks for up to 24,000 units of work" in message  # 2 seeds × 2 encoders × 3,000 × 2 probes


def test_a_dry_run_plans_and_a_run_computes_the_units_of_the_new_axes(axes_registry, write_yaml, monkeypatch,
                                                                        capsys):
    from relbench import cli

    monkeypatch.setattr("relbench.plugins.load_registry", lambda *args, **kwargs: axes_registry)
    path = write_yaml(TASKS)
    assert cli.main(["run", str(path), "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["to_compute"] == UNITS

    runner = Runner(load_suite(path, axes_registry), axes_registry, quiet=True)
    stats = runner.run()
    assert not stats.failures and stats.units_done == UNITS
    df = runner.store.load("probes")
    assert len(df) == UNITS and (df["status"] == "ok").all()
    assert set(zip(df["anchoring"], df["probe"].fillna("-"))) == {
        ("random", "cosine"), ("stratified", "cosine"), ("random", "-"), ("stratified", "-")}
    absolute = df[df["probe"].isna()].groupby(["seed", "encoder"])["value"].nunique()
    assert (absolute == 1).all()  # without a probe the anchors play no role

    again = Runner(load_suite(path, axes_registry), axes_registry, quiet=True).run()
    assert again.units_done == 0 and again.units_skipped == UNITS


def test_make_task_fills_the_declared_axes_and_refuses_others():
    random = spec(toy_plugins.SpySelector)
    task = make_task(axis_plugins.Probing, encoders=["a"], grid={"anchorings": [random]})
    assert task.grid == {"anchorings": [random], "probes": [None]}
    with pytest.raises(TypeError, match=r"declares no grid axis \['selectors'\]; its axes are \['anchorings', "):
        make_task(axis_plugins.Probing, grid={"selectors": [random]})


def test_an_axis_names_a_plugin_interface():
    with pytest.raises(ValueError, match="'selecter' is none of dataset, encoder, selector"):
        Axis("selecter")
    with pytest.raises(ValueError, match="'task_kind' is none of"):
        Axis("task_kind")
