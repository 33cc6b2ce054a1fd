"""The PARAM experiments of tasks.yaml read the banks of the default suite's
tasks they extend, and their grids are the ones their descriptions state."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: new task → the tasks.yaml task whose data set, encoders and anchor count it copies
COPIES = {"bible-param-cross-lingual": "bible-cross-lingual", "fashion-class-parallel": "fashion-anchor-selectors",
          "fashion-param-losses": "fashion-regularizers"}


@pytest.fixture(scope="module")
def tasks():
    from relbench.config import load_suite
    from relbench.plugins import load_registry

    registry = load_registry()
    default = {t.name: t for t in load_suite(ROOT / "tasks.yaml", registry).tasks}
    experiments = {t.name: t for t in load_suite(ROOT / "tasks.yaml", registry).tasks}
    return default, experiments


@pytest.mark.parametrize("name", COPIES)
def test_each_task_reads_the_banks_of_the_task_it_extends(tasks, name):
    default, experiments = tasks
    new, old = experiments[name], default[COPIES[name]]
    assert new.dataset.identity() == old.dataset.identity()
    assert [(e.label, e.view, e.identity()) for e in new.encoders] == \
        [(e.label, e.view, e.identity()) for e in old.encoders]
    assert new.num_anchors == old.num_anchors
    assert [s.identity() for s in new.grid["stitchers"]] == [s.identity() for s in old.grid["stitchers"][:1]]


def _labels(task, axis):
    return [s.label if s is not None else "none" for s in task.grid[axis]]


def test_the_grids_are_small_and_compare_what_the_descriptions_say(tasks):
    _, experiments = tasks
    bible, classes, losses = (experiments[n] for n in COPIES)
    assert _labels(bible, "selectors") == ["parallel", "param"] and len(bible.grid["similarities"]) == 1
    assert bible.kind.name == "stitching" and bible.kind.build().protocol == "held-out"
    assert _labels(classes, "selectors") == ["random", "parallel", "class-parallel"] and not classes.claims
    assert _labels(losses, "regularizers") == ["none", "adapter", "soft-jaccard", "barlow-twins", "align-uniform"]
    assert not losses.claims and len(losses.grid["similarities"]) == 1
