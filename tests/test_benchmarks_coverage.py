"""The interval-coverage benchmark: its simulation tells the intervals apart where they
differ most, and its reading of a release computes the variance ratio it prints."""

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import interval_coverage as ic  # noqa: E402


def test_with_two_seeds_the_t_interval_covers_and_the_percentile_bootstrap_does_not():
    found = ic.coverage(seeds=2, seed_sd=0.05, samples=200, trials=60, resamples=200)
    # over two seeds a percentile bootstrap spans at most the two means (covers about half the time);
    # t with one degree of freedom covers at its nominal rate
    assert found["seeds only: Student-t"] >= 0.85 > 0.75 >= found["seeds only: percentile bootstrap"]
    assert found["per-sample: Student-t over seed means"] == found["seeds only: Student-t"]


def test_the_release_reading_divides_between_seed_by_within_seed_variance(tmp_path, capsys):
    cell = {"task": "t", "kind": "stitching", "status": "ok", "selector": "random", "similarity": "cosine",
            "stitcher": "relative", "regularizer": None, "source": "a", "target": "b", "held_out": None}
    rows = [{**cell, "seed": float(s), "metric": "accuracy", "value": p, "per_sample.n": None}
            for s, p in enumerate([0.5, 0.6, 0.7])]
    rows += [{**cell, "seed": float(s), "metric": "weighted_f1", "value": 0.5, "per_sample.n": 100} for s in range(3)]
    path = tmp_path / "results.parquet"
    pd.DataFrame(rows).astype({"per_sample.n": "Int64"}).to_parquet(path)
    ic.release_ratios(str(path))
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("t "))
    # between: var(0.5, 0.6, 0.7) = 0.01; within: mean p(1 − p)/100 = 0.00233…; ratio 4.29
    assert float(line.split()[3]) == pytest.approx(0.01 / ((0.25 + 0.24 + 0.21) / 3 / 100), abs=0.01)
