"""Precision as part of a result's identity: the tasks file's `precision:`, `--precision`,
the runner's context, the unit's fingerprint, the row and the page."""

from __future__ import annotations

import pytest
import torch

from relbench import precision
from relbench.config import load_suite
from relbench.errors import ConfigError
from relbench.leaderboard import render
from relbench.runner import Runner

TASKS = """\
suite:
  seeds: [0]
  num_anchors: 8
  output: results
  leaderboards: boards
  {suite_precision}
tasks:
  - name: blobs
    dataset: {{name: toy-blobs, params: {{classes: 3}}}}
    encoders:
      - {{name: toy-rotated, label: a, params: {{seed: 1}}}}
      - {{name: toy-rotated, label: b, params: {{seed: 2}}}}
    grid: {{selectors: [random], similarities: [cosine], stitchers: [relative]}}
    metrics: [accuracy]
    {task_precision}
"""


def _suite(registry, write_yaml, suite_precision="", task_precision=""):
    return load_suite(write_yaml(TASKS.format(suite_precision=suite_precision, task_precision=task_precision)),
                      registry)


def test_default_is_fp32_and_the_task_key_overrides_the_suite(registry, write_yaml):
    assert _suite(registry, write_yaml).tasks[0].precision == "fp32"
    assert _suite(registry, write_yaml, "precision: bf16").tasks[0].precision == "bf16"
    assert _suite(registry, write_yaml, "precision: bf16", "precision: fp32").tasks[0].precision == "fp32"


def test_an_unknown_precision_names_the_line_and_the_choices(registry, write_yaml):
    with pytest.raises(ConfigError, match=r"tasks.yaml:\d+.*precision.*fp32, bf16.*'fp16'"):
        _suite(registry, write_yaml, "precision: fp16")


def test_the_command_line_override_sets_every_task(registry, write_yaml, monkeypatch):
    monkeypatch.setenv(precision.PRECISION_ENV, "bf16")
    assert _suite(registry, write_yaml, "", "precision: fp32").tasks[0].precision == "bf16"
    monkeypatch.setenv(precision.PRECISION_ENV, "half")
    with pytest.raises(ConfigError, match="RELBENCH_PRECISION='half'"):
        _suite(registry, write_yaml)


def test_autocast_follows_the_running_precision():
    a = torch.randn(4, 4)
    with precision.autocast("cpu"):
        assert (a @ a).dtype == torch.float32
    with precision.running_at("bf16"):
        assert precision.current() == "bf16"
        with precision.autocast("cpu"):
            assert (a @ a).dtype == torch.bfloat16
    assert precision.current() == "fp32"
    with pytest.raises(ValueError, match="unknown precision"):
        with precision.running_at("fp8"):
            pass


def test_units_run_at_their_task_precision_and_record_it(registry, write_yaml, monkeypatch, tmp_path):
    from relbench_relreps.similarities import Cosine

    seen = []
    project = Cosine.project
    monkeypatch.setattr(Cosine, "project", lambda self, X, A: seen.append(precision.current()) or project(self, X, A))
    fingerprints = {}
    for p in ("fp32", "bf16"):
        seen.clear()
        runner = Runner(_suite(registry, write_yaml, f"precision: {p}"), registry, quiet=True,
                        output=tmp_path / p)
        runner.run()
        assert seen and set(seen) == {p}
        df = runner.store.load("blobs")
        assert set(df["precision"]) == {p}
        plans = runner.plans()
        render(runner.store, runner.suite.leaderboards, [tr.task for tr in plans],
               {tr.task.name: [u.id for u in tr.plan().units] for tr in plans})
        assert f" at {p} " in (runner.suite.leaderboards / "blobs.md").read_text()
        fingerprints[p] = set(df["unit"])
    assert not fingerprints["fp32"] & fingerprints["bf16"]  # a bf16 unit is never resumed as an fp32 one


def test_run_precision_flag_sets_every_row(cli_main, write_yaml, monkeypatch, tmp_path):
    monkeypatch.setenv(precision.PRECISION_ENV, "")  # restored after the test: the flag sets it for workers
    path = write_yaml(TASKS.format(suite_precision="precision: fp32", task_precision=""))
    assert cli_main(["run", str(path), "--precision", "bf16", "-q", "--no-leaderboard"]) == 0
    from relbench.results import ResultStore

    assert set(ResultStore(tmp_path / "results").load("blobs")["precision"]) == {"bf16"}


def test_the_bf16_probe_measures_a_positive_speed_ratio_once():
    precision.bf16_speed.cache_clear()
    speed = precision.bf16_speed()
    assert speed is None if torch.cuda.is_available() else speed > 0
    assert precision.bf16_speed() == speed  # measured once per process
    assert torch.get_num_threads() >= 1


def test_a_run_says_when_its_bf16_tasks_are_slow_on_this_cpu(monkeypatch):
    monkeypatch.setattr(precision, "bf16_speed", lambda: 0.5)
    note = precision.slow_bf16_note(["a", "b", "c", "d", "e"])
    assert note.startswith("relbench: note:") and "0.50× fp32" in note and "(a, b, c, d …)" in note
    assert "--precision fp32" in note and "identity" in note
    monkeypatch.setattr(precision, "bf16_speed", lambda: 2.0)
    assert precision.slow_bf16_note(["a"]) is None
    monkeypatch.setattr(precision, "bf16_speed", lambda: None)  # a GPU: not measured
    assert precision.slow_bf16_note(["a"]) is None

    def never():
        raise AssertionError("nothing at bf16 to compute: the probe must not run")

    monkeypatch.setattr(precision, "bf16_speed", never)
    assert precision.slow_bf16_note([]) is None


@pytest.mark.parametrize("task_precision, said", [("precision: bf16", True), ("precision: fp32", False)])
def test_the_run_prints_the_note_for_bf16_tasks_only(cli_main, write_yaml, monkeypatch, capsys, task_precision,
                                                     said):
    monkeypatch.setenv(precision.PRECISION_ENV, "")
    monkeypatch.setattr(precision, "bf16_speed", lambda: 0.5)
    path = write_yaml(TASKS.format(suite_precision="", task_precision=task_precision))
    assert cli_main(["run", str(path), "--no-leaderboard"]) == 0
    assert ("bf16 matrix products run at 0.50× fp32" in capsys.readouterr().err) == said
