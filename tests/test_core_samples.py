"""Per-sample predictions stored with every stitching cell (relbench.samples)."""

from __future__ import annotations

import numpy as np
import pytest
import toy_plugins  # noqa: F401  (registers the toy plugins through the registry fixture)
from sklearn.metrics import accuracy_score, f1_score
from test_core_runner import TASKS, _run

from relbench.samples import ids_digest, predictions, read_predictions


@pytest.mark.parametrize("classes", [10, 300])
def test_predictions_round_trip(classes):
    rng = np.random.default_rng(0)
    y_true, y_pred = rng.integers(0, classes, 1000), rng.integers(0, classes, 1000)
    record = predictions([f"s{i}" for i in range(1000)], y_true, y_pred)
    assert record["dtype"] == ("<u1" if classes <= 256 else "<u2")
    back_true, back_pred = read_predictions(record)
    assert np.array_equal(back_true, y_true) and np.array_equal(back_pred, y_pred)
    assert len(record["y_true"]) + len(record["y_pred"]) <= 2 * 4 * (1000 * (1 if classes <= 256 else 2) + 2) / 3


def test_ids_digest_tells_samples_and_order_apart():
    ids = ["a", "b", "c"]
    assert ids_digest(ids) == ids_digest(list(ids))
    assert ids_digest(ids) != ids_digest(["a", "c", "b"]) != ids_digest(["a", "b"])
    assert ids_digest(["ab", "c"]) != ids_digest(["a", "bc"])


def test_bad_records_are_refused():
    with pytest.raises(ValueError, match="length"):
        predictions(["a", "b"], np.array([0, 1]), np.array([0]))
    with pytest.raises(ValueError, match="class indices"):
        predictions(["a"], np.array([-1]), np.array([0]))
    record = predictions(["a", "b"], np.array([0, 1]), np.array([1, 1]))
    with pytest.raises(ValueError, match="samples"):
        read_predictions({**record, "n": 3})
    with pytest.raises(ValueError, match="format"):
        read_predictions({**record, "format": "other"})


def test_every_stitching_cell_stores_predictions_that_recompute_its_scores(registry, write_yaml):
    runner, stats = _run(registry, write_yaml(TASKS))
    assert not stats.failures
    df = runner.store.load("blobs")
    ok = df[df["status"] == "ok"]
    carriers = ok[ok["per_sample"].map(lambda v: isinstance(v, dict))]
    cells = ok.drop_duplicates(["unit", "source"])
    assert len(carriers) == len(cells)  # exactly one row per cell carries them
    assert set(carriers["metric"]) == {"accuracy"}  # the task's first metric
    for _, row in carriers.iterrows():
        y_true, y_pred = read_predictions(row["per_sample"])
        same_cell = ok[(ok["unit"] == row["unit"]) & (ok["source"] == row["source"])].set_index("metric")["value"]
        assert same_cell["accuracy"] == accuracy_score(y_true, y_pred)
        assert same_cell["weighted_f1"] == pytest.approx(f1_score(y_true, y_pred, average="weighted"), abs=1e-12)
    # every cell of a seed scored the same test samples in the same order (any method, any
    # source encoder): their predictions pair sample by sample
    digests = carriers.groupby("seed")["per_sample"].agg(lambda s: {r["ids"] for r in s})
    assert len(digests) == 2 and all(len(d) == 1 for d in digests)
