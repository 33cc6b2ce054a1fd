"""The summary cells every kind gets unless it computes its own: per cell of the kind's
columns and metric, the mean over seeds of each seed's mean, with the interval over
seeds the experiment pages print (SciPy's bootstrap), and only finished, finite rows."""

import math

import numpy as np
import pandas as pd
import pytest

from relbench.cell_means import MEASURE, seed_mean_cells
from relbench.uncertainty import seed_interval


def _rows() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = [{"source": s, "target": t, "omega": w, "seed": seed, "metric": m, "value": float(rng.normal()),
             "direction": "higher", "status": "ok"}
            for s in ("a", "b") for t in ("a", "b") for w in (1, 2) for seed in range(5) for m in ("cos", "kept")
            for _ in range(2)]  # two rows per seed and cell: a seed's mean enters once
    return pd.DataFrame(rows)


def test_each_cell_is_the_mean_of_its_seeds_means_with_the_interval_over_seeds():
    rows = _rows()
    cells = seed_mean_cells(rows, ("source", "target", "omega"))
    assert len(cells) == 2 * 2 * 2 * 2
    for cell in cells:
        mine = rows[(rows["source"] == cell["source"]) & (rows["target"] == cell["target"])
                    & (rows["omega"] == cell["omega"]) & (rows["metric"] == cell["metric"])]
        per_seed = mine.groupby("seed")["value"].mean()
        assert cell["score"] == pytest.approx(per_seed.mean(), abs=1e-12)
        assert (cell["low"], cell["high"]) == pytest.approx(seed_interval(list(per_seed)))
        assert cell["low"] <= cell["score"] <= cell["high"]
        assert cell["n"] == 5 and cell["tie_group"] is None and cell["measure"] == MEASURE


def test_failed_and_non_finite_rows_are_left_out_and_a_seedless_row_counts_once():
    rows = pd.DataFrame({"source": ["a"] * 5, "seed": [0, 1, 2, 3, None], "metric": ["m"] * 5,
                         "value": [1.0, 3.0, math.inf, 100.0, 5.0], "direction": ["lower"] * 5,
                         "status": ["ok", "ok", "ok", "failed", "ok"]})
    (cell,) = seed_mean_cells(rows, ("source", "missing-column"))
    assert cell["score"] == pytest.approx(3.0) and cell["n"] == 3 and cell["direction"] == "lower"
    assert "missing-column" not in cell
    assert seed_mean_cells(rows[rows["status"] == "failed"], ("source",)) is None


def test_an_empty_mark_or_missing_column_value_is_none():
    rows = pd.DataFrame({"source": ["-", None], "seed": [0, 0], "metric": ["m", "m"], "value": [1.0, 2.0],
                         "direction": ["higher"] * 2, "status": ["ok"] * 2})
    cells = seed_mean_cells(rows, ("source",))
    assert {c["source"] for c in cells} == {None}


def test_a_kind_column_named_measure_keeps_its_values_and_matrix_cells_carry_no_summary_marks():
    rows = pd.DataFrame({"measure": ["cka", "svcca"], "seed": [0, 0], "metric": ["cka", "svcca"],
                         "value": [0.5, 0.7], "direction": ["higher"] * 2, "status": ["ok"] * 2})
    assert [c["measure"] for c in seed_mean_cells(rows, ("measure",))] == ["cka", "svcca"]
    assert all("tie_group" not in c and c["measure"] in ("cka", "svcca")
               for c in seed_mean_cells(rows, ("measure",), summary=False))
    assert "measure" not in seed_mean_cells(rows.drop(columns="measure"), (), summary=False)[0]
