"""The main table's *anchors needed*: a stitching task's anchor-budget companion
(``budget_task``, a presentation parameter that changes no unit) gives each combination
its 95 % budget under the group's tables, the index keeps the main table first, and a
misspelt companion is refused when the tasks file is read."""

from __future__ import annotations

import textwrap

import pytest

from relbench.config import load_suite
from relbench.errors import ConfigError
from relbench.leaderboard import kind_sections
from relbench.testing import make_task
from relbench_stitching import Stitching
from relbench_stitching.budget import AnchorBudget
from relbench_stitching.main_table import budget_table, budget_text, mean_share, section

RANDOM, PROCRUSTES, IRP = "random · cosine · relative", "random · procrustes", "random · irp"


def _main_cells(scores: dict[str, float]) -> list[dict]:
    ordered = sorted(scores, key=scores.get, reverse=True)
    return [{"method": m, "rank": i, "score": scores[m], "low": scores[m] - 0.01, "high": scores[m] + 0.01,
             "best": i == 1, "tie": i == 1, "metric": "weighted_f1", "direction": "higher", "views": ["image"]}
            for i, m in enumerate(ordered, 1)]


def _budget_cell(method: str, budget: int, low: int, high: int, largest: int) -> dict:
    return {"method": method, "budget": budget, "budget_low": low, "budget_high": high, "largest": largest,
            "metric": "weighted_f1", "direction": "higher"}


def _companion(*cells: dict) -> dict:
    return {"kind": AnchorBudget.name, "axes": [], "cells": list(cells), "matrix": None}


MAIN = {"a-cross-seed": _main_cells({PROCRUSTES: 0.9, RANDOM: 0.8, IRP: 0.7}),
        "b-cross-arch": _main_cells({PROCRUSTES: 0.85, RANDOM: 0.75, IRP: 0.6}),
        "c-cross-seed": _main_cells({PROCRUSTES: 0.8, RANDOM: 0.7})}
COMPANIONS = {"a-cross-seed": {"a-budget": _companion(_budget_cell(RANDOM, 32, 16, 64, 300),
                                                      _budget_cell(PROCRUSTES, 128, 64, 256, 300))},
              "b-cross-arch": {"b-budget": _companion(_budget_cell(RANDOM, 256, 128, 512, 1280))}}


def _row(text: str, method: str) -> list[str]:
    line = next(line for line in text.split("**Anchors needed**")[0].split("| combination")[-1].splitlines()
                if line.startswith(f"| {method} "))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_each_combination_gets_its_95_percent_budget_on_each_task_s_companion():
    text = section(MAIN, COMPANIONS, AnchorBudget.name)
    header = [c.strip() for c in text.split("**Anchors needed**")[0].split("| combination")[-1]
              .splitlines()[0].strip("|").split("|")]
    assert header == ["", "ACS", "BCA", "mean share"]  # only the tasks with a companion; C has none
    assert _row(text, RANDOM) == [RANDOM, "32 [16, 64]/300", "256 [128, 512]/1280", "15 %"]  # (32/300 + 256/1280)/2
    assert _row(text, PROCRUSTES) == [PROCRUSTES, "128 [64, 256]/300", "-", "43 %"]
    assert f"| {IRP} " not in text.split("Tasks: ")[-1]  # no companion measured it: no row
    assert "**ACS**: [a-budget](a-budget.md); **BCA**: [b-budget](b-budget.md)" in text


def test_the_rows_keep_the_main_table_s_order():
    text = section(MAIN, COMPANIONS, AnchorBudget.name)
    needed = text.split("| combination")[-1]
    assert needed.index(f"| {PROCRUSTES} ") < needed.index(f"| {RANDOM} ")  # best mean rank first, as above
    assert budget_table([RANDOM, PROCRUSTES], MAIN, {}, {}) == []


def test_without_companions_the_main_table_is_as_before():
    assert section(MAIN) == section(MAIN, {}, AnchorBudget.name)
    assert "Anchors needed" not in section(MAIN)
    other_kind = {"a-cross-seed": {"a-sim": {**COMPANIONS["a-cross-seed"]["a-budget"], "kind": "space-similarity"}}}
    assert section(MAIN, other_kind, AnchorBudget.name) == section(MAIN)


def test_the_mean_share_is_in_per_cent():
    assert mean_share([_budget_cell(RANDOM, 8, 8, 8, 32), _budget_cell(RANDOM, 64, 64, 64, 64)]) == "62 %"


def test_the_index_draws_the_main_table_first_with_its_companions():
    main = make_task(Stitching, name="a-cross-seed", encoders=["x", "y"], budget_task="a-budget")
    budget = make_task(AnchorBudget, name="a-budget", encoders=["x", "y"])
    cells = COMPANIONS["a-cross-seed"]["a-budget"]["cells"]
    sections = kind_sections([main, budget], {"a-cross-seed": {"cells": MAIN["a-cross-seed"]},
                                              "a-budget": {"cells": cells}})
    assert [s.splitlines()[0] for s in sections] == ["## Main table: stitching", "## Anchor budget"]
    assert "32 [16, 64]/300" in sections[0]


def test_the_budget_task_changes_no_unit_s_identity():
    plain = make_task(Stitching, name="t", encoders=["x", "y"])
    named = make_task(Stitching, name="t", encoders=["x", "y"], budget_task="t-budget")
    assert named.kind.params == {"budget_task": "t-budget"}
    assert named.kind.identity() == plain.kind.identity()
    assert "budget_task" not in plain.kind.identity()["params"] and "protocol" in plain.kind.identity()["params"]


def _suite(tmp_path, budget_task: str):
    path = tmp_path / "tasks.yaml"
    path.write_text(textwrap.dedent(f"""\
        tasks:
          - name: toy-stitching
            kind: {{name: stitching, params: {{budget_task: {budget_task}}}}}
            dataset: {{name: toy-blobs}}
            encoders: [{{name: toy-rotated, label: a}}, {{name: toy-rotated, label: b, params: {{seed: 1}}}}]
            grid: {{selectors: [random], similarities: [cosine], stitchers: [relative]}}
          - name: toy-budget
            kind: {{name: anchor-budget}}
            dataset: {{name: toy-blobs}}
            encoders: [{{name: toy-rotated, label: a}}, {{name: toy-rotated, label: b, params: {{seed: 1}}}}]
            grid: {{selectors: [random], similarities: [cosine], stitchers: [relative]}}
        """))
    return path


def test_a_misspelt_companion_is_refused_with_its_line_and_the_names_it_may_mean(tmp_path, registry):
    assert [t.name for t in load_suite(_suite(tmp_path, "toy-budget"), registry).tasks] == ["toy-stitching",
                                                                                             "toy-budget"]
    with pytest.raises(ConfigError) as error:
        load_suite(_suite(tmp_path, "toy-budgte"), registry)
    message = str(error.value)
    assert message.startswith(f"{tmp_path / 'tasks.yaml'}:3: at `tasks[0].kind`:")
    assert "'toy-budgte', which this suite does not have; did you mean 'toy-budget'?" in message


def test_naming_the_companion_recomputes_nothing_and_the_index_follows(registry, write_yaml):
    from relbench.leaderboard import render
    from relbench.runner import Runner

    body = """\
  - name: {name}
    kind: {kind}
    dataset: {{name: toy-blobs, params: {{classes: 4, train_size: 240}}}}
    encoders:
      - {{name: toy-rotated, label: a, params: {{seed: 1}}}}
      - {{name: toy-rotated, label: b, params: {{seed: 2, scale: 3.0}}}}
    grid:
      selectors: [random]
      similarities: [cosine]
      stitchers: [{{name: relative, params: {{epochs: 2}}}}]
    metrics: [accuracy]
"""
    head = "suite:\n  seeds: [0, 1]\n  num_anchors: 16\n  output: results\n  leaderboards: boards\ntasks:\n"

    def suite(stitching_kind: str):
        path = write_yaml(head + body.format(name="blobs", kind=stitching_kind)
                          + body.format(name="blobs-budget", kind="{name: anchor-budget}"))
        return Runner(load_suite(path, registry), registry, quiet=True), path.parent / "boards"

    def draw(runner, boards):
        plans = runner.plans()
        return render(runner.store, boards, [tr.task for tr in plans],
                      {tr.task.name: [u.id for u in tr.plan().units] for tr in plans})

    runner, boards = suite("{name: stitching}")
    runner.run()
    assert {p.name for p in draw(runner, boards)} == {"README.md", "blobs.md", "blobs-budget.md"}
    assert "Anchors needed" not in (boards / "README.md").read_text()
    runner, boards = suite("{name: stitching, params: {budget_task: blobs-budget}}")
    assert all(not tr.plan().todo for tr in runner.plans())  # the same units: nothing to compute
    drawn = [p.name for p in draw(runner, boards)]  # the companion's page once, to record what companions keep
    assert "README.md" in drawn and "blobs.md" not in drawn  # the stitching page is not drawn again, the index is
    index = (boards / "README.md").read_text()
    assert "**Anchors needed**" in index and "[blobs-budget](blobs-budget.md)" in index
    assert draw(runner, boards) == []  # and then it is unchanged
    runner, boards = suite("{name: stitching}")  # the companion named no more: no page changes, the index does
    assert [p.name for p in draw(runner, boards)] == ["README.md"]
    assert "Anchors needed" not in (boards / "README.md").read_text()


def test_a_budget_measured_against_a_curve_that_falls_at_the_full_budget_is_marked():
    fallen = {**_budget_cell(PROCRUSTES, 16, 16, 16, 1280), "score": 0.38, "curve": [[16, 0.44], [512, 0.77],
                                                                                     [1280, 0.38]]}
    rising = {**_budget_cell(RANDOM, 256, 128, 512, 1280), "score": 0.80, "curve": [[16, 0.4], [1280, 0.80]]}
    assert budget_text(fallen) == "16 [16, 16]/1280 †" and budget_text(rising) == "256 [128, 512]/1280"
    text = section(MAIN, {"b-cross-arch": {"b-budget": _companion(fallen, rising)}}, AnchorBudget.name)
    assert "16 [16, 16]/1280 †" in text and "†: the combination's curve peaks" in text
