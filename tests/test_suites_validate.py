"""The shipped task files validate: the default suite, the smoke suite, the
paper-reproduction suite (which needs a model hub to run, not to validate) and the GPU
check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relbench import cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path, units", [("tasks.yaml", 7142), ("tasks/quick.yaml", None), ("tasks/paper.yaml", None),
                                         ("tasks/gpu-check.yaml", None)])
def test_task_file_dry_runs(path, units, capsys, tmp_path):
    assert cli.main(["run", str(ROOT / path), "--dry-run", "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "units" in out and "to compute" in out
    if units:  # the default suite's exact plan, every unit to compute in an empty store
        assert f"50 tasks, {units} units, {units} to compute." in out


def test_a_suite_whose_assets_are_not_here_still_dry_runs_with_its_unit_counts(capsys, tmp_path):
    # tasks/paper.yaml names hub models and data sets: the plan counts its units and says
    # what is missing instead of failing
    assert cli.main(["run", str(ROOT / "tasks" / "paper.yaml"), "--dry-run", "--json", "--output", str(tmp_path)]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["units"] > 0 and all(t["units"] > 0 for t in plan["tasks"])
    assert any(t.get("unavailable") for t in plan["tasks"])


def test_default_suite_has_three_seeds_and_every_task_kind():
    """Every task kind, selector, similarity and stitcher runs in the default suite."""
    from relbench.config import load_suite
    from relbench.plugins import load_registry

    registry = load_registry()
    suite = load_suite(ROOT / "tasks.yaml", registry)
    assert all(len(t.seeds) >= 3 for t in suite.tasks)
    assert {t.kind.name for t in suite.tasks} == set(registry.names("task_kind"))
    used = {(s.interface, s.name) for t in suite.tasks
            for axis in t.grid.values() for s in axis if s is not None}
    for interface in ("selector", "similarity", "stitcher"):
        assert {n for i, n in used if i == interface} == set(registry.names(interface)), interface


#: paper-suite tasks whose paper prints no number for their setting; each carries a comment in
#: tasks/paper.yaml, right above it, that starts "# No published number" and says why
PAPER_TASKS_WITHOUT_PUBLISHED = {
    "paper-param-held-out": "PARAM shows its experiment only as a plot (Figure 1)",
    "paper-cora-gcn-10-anchors": "Moschella et al. 2023, Figure 6 (left): a plot, no values",
    "paper-cora-gcn-1000-anchors": "Moschella et al. 2023, Figure 6 (left): a plot, no values",
}


def test_paper_suite_carries_published_numbers():
    from relbench.config import load_suite
    from relbench.plugins import load_registry

    path = ROOT / "tasks" / "paper.yaml"
    suite = load_suite(path, load_registry())
    published = [p for t in suite.tasks for p in t.published]
    assert any(p["value"] == 0.7681 for p in published)  # Moschella Table 6, rexnet_100
    assert any(p["value"] == 0.72 for p in published)  # IRP Table 2, CIFAR-100 coarse
    # every published number says how relbench's setting differs from the paper's
    undescribed = [(t.name, p.get("reference")) for t in suite.tasks for p in t.published
                   if not isinstance(p.get("differs"), str) or not p["differs"].strip()]
    assert undescribed == []
    # a task without published numbers is one of the named ones, and the file says why above it
    assert {t.name for t in suite.tasks if not t.published} == set(PAPER_TASKS_WITHOUT_PUBLISHED)
    lines = path.read_text(encoding="utf-8").splitlines()
    for name in PAPER_TASKS_WITHOUT_PUBLISHED:
        at = lines.index(f"  - name: {name}")
        assert lines[at - 1].strip().startswith("# No published number"), name


def test_every_core_grid_stitching_task_has_its_anchor_budget_curve(registry):
    """Every stitching task of the main table's grid (all encoder pairs, the translation
    stitchers beside the relative decoder) has an anchor-budget task over the same data set,
    encoders and largest budget, so the release shows its curve (the budgets reuse its banks)."""
    from relbench.config import load_suite

    default = load_suite(ROOT / "tasks.yaml", registry)

    def same_inputs(task):
        return repr((task.dataset, task.encoders, task.num_anchors, task.protocol))

    core = [t for t in default.tasks if t.kind.name == "stitching" and t.kind.params.get("protocol", "all-pairs") ==
            "all-pairs" and {"irp", "relative"} <= {s.name for s in t.grid.get("stitchers", []) if s is not None}]
    budgets = {same_inputs(t): t.name for t in default.tasks if t.kind.name == "anchor-budget"}
    assert len(core) == 8
    assert {t.name: budgets.get(same_inputs(t)) is not None for t in core} == {t.name: True for t in core}


@pytest.mark.parametrize("path", ["tasks.yaml", "tasks/paper.yaml"])
def test_a_claim_on_a_task_of_several_selectors_names_the_one_it_stands_for(path):
    """A claim side that names an anchored stitcher on a task whose grid has several
    selectors would pool them, while its ``paper`` text names one anchor draw: it must
    name its selector."""
    from relbench.config import load_suite
    from relbench.plugins import load_registry

    unanchored = {"absolute", "non-stitched"}
    pooled = []
    for task in load_suite(ROOT / path, load_registry()).tasks:
        if len(task.grid.get("selectors") or []) < 2:
            continue
        for claim in task.claims:
            for side in ("better", "worse"):
                named = claim.get(side) or {}
                if named.get("stitcher") not in unanchored and "selector" not in named:
                    pooled.append((task.name, claim["claim"], side))
    assert not pooled
