"""Planning without loading data (relbench.descriptions): a data set that declares its
sources is described once; later runs plan from the description while the sources are
unchanged, load the data only when a view is read, and never mix identities."""

from __future__ import annotations

import os

import numpy as np
import pytest
import toy_plugins

from relbench.config import load_suite
from relbench.errors import ConfigError
from relbench.runner import Runner

TASKS = """\
suite:
  seeds: [0, 1]
  num_anchors: 16
  output: results
  leaderboards: boards
  cache_dir: cache
tasks:
  - name: blobs
    dataset: {{name: toy-file-blobs, params: {{path: {path}}}}}
    encoders:
      - {{name: toy-rotated, label: a, params: {{seed: 1}}}}
      - {{name: toy-rotated, label: b, params: {{seed: 2}}}}
    grid: {{selectors: [random], similarities: [cosine], stitchers: [relative]}}
    metrics: [accuracy]
"""


@pytest.fixture
def suite(tmp_path, write_yaml, registry):
    centres = tmp_path / "centres.npy"
    np.save(centres, np.random.default_rng(0).normal(size=(4, 16)) * 3)
    path = write_yaml(TASKS.format(path=centres))
    toy_plugins.FileBlobs.loads.clear()
    return lambda: Runner(load_suite(path, registry), registry, quiet=True), centres


def test_a_described_data_set_is_planned_without_loading_it(suite):
    make, _ = suite
    first = make()
    assert not first.run().failures
    assert len(toy_plugins.FileBlobs.loads) == 1
    ids = [u.id for u in first.plans()[0].plan().units]
    again = make()
    plan = again.plans()[0].plan()
    assert [u.id for u in plan.units] == ids and not plan.todo
    assert len(toy_plugins.FileBlobs.loads) == 1  # the no-op read no data
    again.run()
    assert len(toy_plugins.FileBlobs.loads) == 1


def test_a_view_read_from_a_description_loads_the_data_once_with_identical_items(suite):
    make, _ = suite
    loaded = make().dataset(make().suite.tasks[0].dataset)  # loads and describes
    described = make().dataset(make().suite.tasks[0].dataset)
    assert len(toy_plugins.FileBlobs.loads) == 1
    items = described.splits["train"].views["vec"]
    assert len(items) == len(loaded.splits["train"].ids) and len(toy_plugins.FileBlobs.loads) == 1
    assert all(np.array_equal(a, b) for a, b in zip(items, loaded.splits["train"].views["vec"]))
    assert np.array_equal(described.splits["test"].labels, loaded.splits["test"].labels)
    assert len(toy_plugins.FileBlobs.loads) == 2  # loaded once for every item read


def test_a_changed_source_is_loaded_again(suite):
    make, centres = suite
    make().run()
    np.save(centres, np.load(centres) + 1)
    runner = make()
    runner.plans()
    assert len(toy_plugins.FileBlobs.loads) == 2
    assert runner.plans()[0].plan().todo  # new data: new identities, everything to compute


def test_data_that_changed_behind_an_unchanged_stamp_stop_the_run(suite):
    make, centres = suite
    make().run()
    st = os.stat(centres)
    arr = np.load(centres)
    arr[0, 0] += 1
    np.save(centres, arr)  # same size; put the old modification time back
    os.utime(centres, ns=(st.st_atime_ns, st.st_mtime_ns))
    runner = make()
    data = runner.dataset(runner.suite.tasks[0].dataset)
    with pytest.raises(ConfigError, match="changed while this run used it"):
        data.splits["train"].views["vec"][0]
