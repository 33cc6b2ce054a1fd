"""The space-similarity kind: every measure on every encoder pair of the seed's test draw,
rows in both orders for a symmetric measure, a matrix per measure on the page; and the
rank correlation over pairs between a measure and a stitching score."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from relbench.interfaces import Bank
from relbench.pages import Page
from relbench.testing import TaskRunDouble, make_task, spec
from relbench_spacesim import spearman_over_pairs
from relbench_spacesim.kind import SpaceSimilarity, encoder_pairs, sample_positions
from relbench_spacesim.measures import CKNNA, LinearCKA, ProcrustesDistance


def three_banks() -> dict[str, dict[str, Bank]]:
    """Encoders ``a``, ``b`` (a rotation of ``a``) and ``c`` (unrelated), on 50 test samples;
    ``c`` lists the samples in reverse order (pairs are matched by id)."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(50, 6, generator=g)
    Q = torch.linalg.qr(torch.randn(6, 6, generator=g))[0]
    ids = [f"s{i}" for i in range(50)]
    banks = {"a": Bank("a", "test", X, ids), "b": Bank("b", "test", X @ Q, ids),
             "c": Bank("c", "test", torch.randn(50, 9, generator=g).flip(0), ids[::-1])}
    return {"train": banks, "test": banks}


def run_task(tmp_path, measures, **params) -> pd.DataFrame:
    task = make_task(SpaceSimilarity, encoders=["a", "b", "c"], seeds=[0, 1],
                     grid={"measures": [spec(m) for m in measures]}, **params)
    run = TaskRunDouble(task, three_banks(), tmp=tmp_path)
    run.run()
    return run.frame()


def test_rows_are_the_measures_of_every_ordered_pair(tmp_path):
    df = run_task(tmp_path, [LinearCKA, CKNNA, ProcrustesDistance])
    assert set(df["status"]) == {"ok"} and len(df) == 2 * 3 * 6  # seeds × measures × ordered pairs
    cka = df[df["metric"] == "linear-cka"].set_index(["seed", "source", "target"])["value"]
    assert cka[(0, "a", "b")] == pytest.approx(1.0) and cka[(0, "b", "a")] == cka[(0, "a", "b")]
    assert cka[(0, "a", "c")] < 0.5
    banks = three_banks()["test"]
    c_by_id = banks["c"].rows(banks["a"].ids).double().numpy()
    assert cka[(0, "a", "c")] == pytest.approx(LinearCKA().measure(banks["a"].X.double().numpy(), c_by_id))
    assert set(df.loc[df["metric"] == "procrustes-distance", "direction"]) == {"lower"}
    assert set(df.loc[df["metric"] == "cknna", "direction"]) == {"higher"}
    knn = df[df["metric"] == "cknna"].set_index(["seed", "source", "target"])["value"]
    assert knn[(0, "a", "c")] != knn[(0, "c", "a")]  # an asymmetric measure: each order computed


def test_max_samples_bounds_the_compared_samples(tmp_path):
    full = run_task(tmp_path / "full", [LinearCKA])
    part = run_task(tmp_path / "part", [LinearCKA], max_samples=20)
    pick = lambda df: df.set_index(["seed", "source", "target"])["value"][(0, "a", "c")]  # noqa: E731
    assert pick(full) != pytest.approx(pick(part))
    kept = list(sample_positions(10, 4, 0))
    assert kept == sorted(kept) and len(set(kept)) == 4
    assert list(sample_positions(10, 0, 0)) == list(range(10))


def test_pairs_are_unordered_only_for_symmetric_measures():
    assert encoder_pairs(["a", "b", "c"], True) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert len(encoder_pairs(["a", "b", "c"], False)) == 6


def test_the_page_draws_a_matrix_per_measure(tmp_path):
    df = run_task(tmp_path, [LinearCKA, ProcrustesDistance])
    body = SpaceSimilarity().page(df, Page(tmp_path / "pages", "t"))
    assert "### linear-cka ↑" in body and "### procrustes-distance ↓" in body
    assert "lower is more similar" in body and body.count("source \\ target") == 2


def test_validation_wants_two_encoders_and_a_measure():
    with pytest.raises(ValueError, match="at least two encoders"):
        SpaceSimilarity().validate(make_task(SpaceSimilarity, encoders=["a"], grid={"measures": [spec(LinearCKA)]}))
    with pytest.raises(ValueError, match="needs measures"):
        SpaceSimilarity().validate(make_task(SpaceSimilarity, encoders=["a", "b"]))


def pair_frame(values: dict[tuple[str, str], float], column: str, seeds=(0, 1)) -> pd.DataFrame:
    return pd.DataFrame([{"source": s, "target": t, "seed": seed, column: v + 0.01 * seed}
                         for (s, t), v in values.items() for seed in seeds])


def test_spearman_over_pairs_on_a_toy_frame():
    pairs = [(a, b) for a in "abcd" for b in "abcd" if a != b]
    measure = {p: float(i) for i, p in enumerate(pairs)}
    score = {p: 2.0 * i + 1 for i, p in enumerate(pairs)}
    measure_rows = pd.concat([pair_frame(measure, "value"), pair_frame({("a", "a"): 99.0}, "value")])
    out = spearman_over_pairs(measure_rows, pair_frame(score, "score"))
    assert out["pairs"] == 12 and out["rho"] == pytest.approx(1.0) and out["high"] == pytest.approx(1.0)
    reverse = spearman_over_pairs(pair_frame({p: -v for p, v in measure.items()}, "value"), pair_frame(score, "score"))
    assert reverse["rho"] == pytest.approx(-1.0)
    rng = np.random.default_rng(0)
    noisy = spearman_over_pairs(pair_frame({p: float(rng.normal()) for p in pairs}, "value"),
                                pair_frame(score, "score"), resamples=999)
    assert noisy["low"] < noisy["rho"] < noisy["high"] and noisy["low"] < 0 < noisy["high"]


def test_spearman_over_pairs_uses_only_shared_pairs():
    out = spearman_over_pairs(pair_frame({("a", "b"): 1.0, ("b", "a"): 2.0}, "value"),
                              pair_frame({("a", "b"): 1.0, ("c", "a"): 5.0}, "score"))
    assert out["pairs"] == 1 and np.isnan(out["low"])


def test_the_board_draws_each_measure_s_matrix_of_seed_means(tmp_path):
    df = run_task(tmp_path, [LinearCKA, ProcrustesDistance])
    kind = SpaceSimilarity()
    assert kind.matrix_axes == ("source", "target")
    cells = kind.matrix_cells(df, Page(tmp_path, "t"))
    assert len(cells) == 2 * 6  # two measures × six ordered pairs, no diagonal
    for cell in cells:
        mine = df[(df["metric"] == cell["metric"]) & (df["source"] == cell["source"])
                  & (df["target"] == cell["target"])]
        assert cell["measure"] == cell["metric"] and cell["n"] == 2
        assert cell["score"] == pytest.approx(mine.groupby("seed")["value"].mean().mean())
        assert cell["low"] <= cell["score"] <= cell["high"]
    ab = next(c for c in cells if (c["metric"], c["source"], c["target"]) == ("linear-cka", "a", "b"))
    assert ab["score"] == pytest.approx(1.0)  # a rotation


def test_the_page_says_which_samples_every_measure_compares_and_each_measure_s_parameters(tmp_path):
    """The samples (at most max_samples of each seed's test draw) and a measure's own
    parameters (k of the k-NN measures) are on the page, from the rows' inputs, whether
    a store loaded them (nested) or a release holds them (flat columns)."""
    df = run_task(tmp_path, [LinearCKA, CKNNA], max_samples=20)
    recorded = {"cknna": {"unit": {"measure": {"class": "relbench_spacesim.measures:CKNNA",
                                               "params": {"topk": 10, "normalize": True}}}},
                "linear-cka": {"unit": {"measure": {"class": "relbench_spacesim.measures:LinearCKA", "params": {}}}}}
    df["inputs"] = df["metric"].map(recorded)  # as a loaded store gives every row its unit's inputs
    body = SpaceSimilarity(max_samples=20).page(df, Page(tmp_path / "pages", "t"))
    assert "the same samples: at most 20 of each seed's test draw (a seeded subset)" in body
    cknna = body.split("### cknna")[1]
    assert "Parameters: normalize = True, topk = 10." in cknna
    assert "Parameters" not in body.split("### linear-cka")[1].split("### cknna")[0]  # it has none
    flat = df.drop(columns=["inputs"]).assign(**{"inputs.unit.measure.params.topk": df["metric"].map(
        {"cknna": 10}), "inputs.unit.measure.params.normalize": df["metric"].map({"cknna": True})})
    assert "Parameters: normalize = True, topk = 10." in SpaceSimilarity().page(flat, Page(tmp_path / "p2", "t"))
    assert "each seed's whole test draw" in SpaceSimilarity(max_samples=0).page(df, Page(tmp_path / "p3", "t"))
