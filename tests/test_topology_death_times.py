"""The death-times kind: scipy's minimum-spanning-tree death times against a slow
Kruskal and the regularizer's own (Prim) death times, the per-class grouping, and a unit
run showing densification narrowing the distribution its control leaves wide."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch

from relbench.interfaces import Bank, DatasetData
from relbench.pages import Page
from relbench.testing import TaskRunDouble, make_task, spec
from relbench_relreps import Cosine, RandomAnchors
from relbench_topology import AdapterControl, DeathTimes, Topological
from relbench_topology.death_times import grouped_death_times, mst_death_times, quantile_metric
from relbench_topology.persistence import death_times as prim_death_times

EXPERIMENTS = Path(__file__).resolve().parents[1] / "tasks.yaml"


def kruskal_death_times(X: np.ndarray) -> np.ndarray:
    """The slow reference: every pair's distance sorted, merged by union-find."""
    parent = list(range(len(X)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    edges = sorted((float(np.linalg.norm(X[i] - X[j])), i, j) for i, j in itertools.combinations(range(len(X)), 2))
    deaths = []
    for length, i, j in edges:
        a, b = root(i), root(j)
        if a != b:
            parent[a] = b
            deaths.append(length)
    return np.array(deaths)


@pytest.mark.parametrize("points", [
    np.random.default_rng(0).normal(size=(40, 5)),
    np.random.default_rng(1).normal(size=(2, 3)),
    np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [1.0, 0.0], [3.0, 0.0]]),  # duplicates merge at 0
    np.array([[x, y] for x in range(4) for y in range(3)], dtype=float),  # many tied edges
    np.zeros((4, 3)),  # every point the same
])
def test_mst_death_times_are_kruskals_and_the_regularizers(points):
    ours = mst_death_times(points)
    assert len(ours) == len(points) - 1 and np.all(np.diff(ours) >= 0)
    assert np.allclose(ours, kruskal_death_times(points), rtol=0, atol=1e-12)
    prim = np.sort(prim_death_times(torch.tensor(points, dtype=torch.float64)).numpy())
    assert np.allclose(ours, prim, atol=1e-6)  # the regularizer clamps at 1e-12 before its square root


def test_mst_death_times_of_too_few_points_are_empty():
    assert len(mst_death_times(np.zeros((1, 3)))) == 0 and len(mst_death_times(np.zeros((0, 3)))) == 0


def test_grouped_death_times_cut_each_class_into_groups_of_the_given_size():
    rng = np.random.default_rng(2)
    X, y = rng.normal(size=(70, 4)), np.repeat([0, 1, 2], [33, 32, 5])
    times = grouped_death_times(X, y, 16, seed=3)
    assert len(times) == (2 + 2) * 15  # classes 0 and 1 give two groups each, class 2 none
    assert np.array_equal(times, grouped_death_times(X, y, 16, seed=3))
    spread = grouped_death_times(10.0 * X, y, 16, seed=3)  # death times have the units of the space
    assert np.allclose(spread, 10.0 * times)
    with pytest.raises(ValueError, match="two points"):
        grouped_death_times(X, y, 1, seed=0)


def _blob_banks() -> dict[str, dict[str, Bank]]:
    """One 12-d encoder, 4 classes whose spread differs (0.2 to 2.0): class-wise death
    times vary widely, as densification is meant to correct."""
    g = torch.Generator().manual_seed(0)
    centres = 6.0 * torch.randn(4, 12, generator=g)
    scale = torch.tensor([0.2, 0.6, 1.2, 2.0])

    def bank(split: str, n: int) -> Bank:
        y = torch.arange(n) % 4
        X = centres[y] + scale[y, None] * torch.randn(n, 12, generator=g)
        return Bank("a", split, X, [f"{split}{i}" for i in range(n)], y)

    return {"train": {"a": bank("train", 256)}, "test": {"a": bank("test", 256)}}


class _Store:
    def __init__(self, folder: Path):
        self.folder = folder

    def figure_path(self, task: str, filename: str) -> Path:
        return self.folder / filename


def test_densification_narrows_the_death_times_its_control_leaves_wide(tmp_path):
    grid = {"selectors": [spec(RandomAnchors)], "similarities": [spec(Cosine)],
            "regularizers": [None, spec(AdapterControl), spec(Topological, lam=5.0)]}
    task = make_task(DeathTimes, encoders=["a"], grid=grid, num_anchors=32, seeds=[0], epochs=8, lr=0.01,
                     batch_size=64, quantiles=[0.1, 0.5, 0.9], bins=10)
    data = DatasetData("blobs", {}, [f"c{i}" for i in range(4)], {"x": "image"}, "blobs")
    run = TaskRunDouble(task, _blob_banks(), dataset=data, tmp=tmp_path)
    run.run()
    df = run.frame()
    assert (df["direction"] == "neutral").all() and set(df["space"]) == {"embedding", "relative"}
    assert set(df["metric"]) == {quantile_metric(q) for q in (0.1, 0.5, 0.9)} | {"death_time_mean", "death_time_std"}
    rel = df[df["space"] == "relative"].set_index(["regularizer", "metric"])["value"]
    spread = {reg: rel[reg, "death_time_q90"] / rel[reg, "death_time_q10"] for reg in ("none", "adapter",
                                                                                        "topological")}
    assert spread["topological"] < 0.9 * spread["adapter"]
    emb = df[(df["space"] == "embedding") & (df["regularizer"] == "none")].set_index("metric")["value"]
    test = _blob_banks()["test"]["a"]
    expected = grouped_death_times(test.X.double().numpy(), test.labels.numpy(), 16, seed=0)
    assert emb["death_time_q50"] == pytest.approx(np.quantile(expected, 0.5))  # `none`: the raw test embeddings
    figure = tmp_path / "figures" / "death_times.png"
    assert figure.stat().st_size > 1000 and figure.with_suffix(".svg").exists()
    page = run.kind.page(df, Page(tmp_path / "board", "t", store=_Store(figure.parent)))
    assert "| topological" in page and "q90" in page and "figures/t/death_times.png" in page
    assert run.kind.page(df.iloc[:0], Page(tmp_path, "t")) == "No results yet.\n"


def test_death_times_refuses_bad_parameters_and_grids():
    with pytest.raises(ValueError, match="quantiles"):
        DeathTimes(quantiles=[1.0])
    with pytest.raises(ValueError, match="group_size"):
        DeathTimes(group_size=1)
    with pytest.raises(ValueError, match="similarities"):
        DeathTimes().validate(make_task(DeathTimes, encoders=["a"], grid={"selectors": [spec(RandomAnchors)]}))


def test_the_experiments_task_trains_as_the_regularizer_tasks_do():
    """The death-times tasks read the banks and train the decoder of the regularizer
    tasks of tasks.yaml: same data set, encoders, anchors, head settings and regularizers."""
    from relbench.config import load_suite
    from relbench.plugins import load_registry

    registry = load_registry()
    ours = {t.name: t for t in load_suite(EXPERIMENTS, registry).tasks}
    theirs = {t.name: t for t in load_suite(EXPERIMENTS, registry).tasks}
    for name in ("fashion-regularizers", "bible-regularizers"):
        task, source = ours[name.replace("regularizers", "death-times")], theirs[name]
        assert task.kind.name == "death-times"
        assert [e.identity() for e in task.encoders] == [e.identity() for e in source.encoders]
        assert task.dataset.identity() == source.dataset.identity() and task.num_anchors == source.num_anchors
        assert [s.identity() for s in task.grid["selectors"]] == [s.identity() for s in source.grid["selectors"]]
        assert [r and r.identity() for r in task.grid["regularizers"]] == \
            [r and r.identity() for r in source.grid["regularizers"]]
        relative = source.grid["stitchers"][0].params
        kind = task.kind.build()
        assert (kind.epochs, kind.lr, kind.batch_size) == (relative["epochs"], relative["lr"], relative["batch_size"])


def _quantile_rows() -> "pd.DataFrame":
    """Two seeds of one encoder's relative space: ``topological`` with quantiles 1, 2, 3 and
    mean 2 (spread (3 − 1) / 2 = 1.0), ``adapter`` with 1, 3, 5 and mean 4 (1.0 as well)
    on seed 0, 1, 4, 7 and mean 4 (1.5) on seed 1."""
    import pandas as pd

    rows = []
    values = {("topological", 0): (1, 2, 3, 2), ("topological", 1): (1, 2, 3, 2),
              ("adapter", 0): (1, 3, 5, 4), ("adapter", 1): (1, 4, 7, 4)}
    for (regularizer, seed), (q10, q50, q90, mean) in values.items():
        cell = dict(unit=f"{regularizer}{seed}", seed=seed, encoder="a", selector="random", similarity="cosine",
                    regularizer=regularizer, space="relative", status="ok", direction="neutral")
        for metric, value in (("death_time_q10", q10), ("death_time_q50", q50), ("death_time_q90", q90),
                              ("death_time_mean", mean), ("death_time_std", 1.0)):
            rows.append({**cell, "metric": metric, "value": float(value)})
    return pd.DataFrame(rows)


def test_claim_rows_are_the_relative_spread_lower_is_better():
    claimed = DeathTimes().claim_rows(_quantile_rows()).set_index(["regularizer", "seed"])
    assert set(claimed["metric"]) == {"death_time_spread"} and set(claimed["direction"]) == {"lower"}
    assert claimed["value"].to_dict() == {("topological", 0): 1.0, ("topological", 1): 1.0, ("adapter", 0): 1.0,
                                          ("adapter", 1): 1.5}
    assert DeathTimes().claim_rows(_quantile_rows().query("metric != 'death_time_mean'")).empty


def test_a_narrower_distribution_wins_a_claim_in_the_lower_direction():
    from relbench.claims import claims_section

    claim = {"claim": "densification narrows", "metric": "death_time_spread",
             "better": {"regularizer": "topological"}, "worse": {"regularizer": "adapter"}, "margin": 0.0}
    line = claims_section(DeathTimes(), _quantile_rows(), [claim], {}).splitlines()[-1]
    assert "(death_time_spread ↓)" in line and "advantage +0.250" in line  # 1.25 − 1.0, lower is better


def test_the_page_says_its_beta_is_the_regularizer_s_untuned_default():
    from relbench_topology.kind import DeathTimes
    from relbench_topology.regularizer import Topological

    text = DeathTimes().meaning(None, "higher")
    default = Topological().beta_quantile
    assert f"(default {default:g}, the median)" in text and "not tuned" in text and "β = 3–4" in text
