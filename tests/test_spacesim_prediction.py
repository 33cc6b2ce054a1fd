"""Which similarity measure predicts stitching: Spearman's ρ over encoder pairs between the
space-similarity task's measures (and two controls) and its companion stitching task's
per-pair scores, per method and pooled over tasks; the index's section across kinds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from relbench.leaderboard import companion_names, kind_sections
from relbench.pages import Page
from relbench.testing import make_task
from relbench_spacesim.kind import SpaceSimilarity
from relbench_spacesim.prediction import (OWN, SAME, family, measure_cells, pair_frame, pooled_spearman,
                                          section)
from relbench_stitching import Stitching

ENCODERS = ["a0", "a1", "b0", "b1"]
FAMILIES = {"a0": "A", "a1": "A", "b0": "B", "b1": "B"}


def own_cells(seed: int) -> list[dict]:
    """A space-similarity task's cells: a similarity ``cka`` and a distance ``dist`` (its
    negation plus noise) on every ordered pair, and each encoder's architecture."""
    rng = np.random.default_rng(seed)
    cells = []
    for s in ENCODERS:
        for t in (t for t in ENCODERS if t != s):
            v = float(rng.random())
            cells += [{"measure": "cka", "direction": "higher", "source": s, "target": t, "value": v, "n": 2},
                      {"measure": "dist", "direction": "lower", "source": s, "target": t,
                       "value": -v + 0.3 * float(rng.random()), "n": 2}]
    return cells + [{"encoder": e, "family": FAMILIES[e]} for e in ENCODERS]


def companion(seed: int, methods=("relative", "absolute")) -> dict:
    """A stitching task's record: per method, a noisy increasing function of ``cka`` off the
    diagonal and an own score per encoder on it."""
    rng = np.random.default_rng(100 + seed)
    cka = {(c["source"], c["target"]): c["value"] for c in own_cells(seed) if c.get("measure") == "cka"}
    matrix = []
    for method in methods:
        for s in ENCODERS:
            for t in ENCODERS:
                score = 0.9 - 0.1 * ENCODERS.index(s) if s == t else cka[(s, t)] + 0.2 * float(rng.random())
                matrix.append({"selector": "random", "stitcher": method, "regularizer": None, "metric": "accuracy",
                               "source": s, "target": t, "score": score, "low": None, "high": None, "n": 2})
    return {"kind": "stitching", "axes": ["source", "target"], "matrix": matrix,
            "cells": [{"method": "x", "metric": "accuracy", "direction": "higher"}]}


def pairs_of(seed: int) -> pd.DataFrame:
    return pair_frame(f"task{seed}", own_cells(seed), companion(seed))


def test_per_task_rho_is_scipys_spearman_and_a_distance_is_negated():
    pairs = pairs_of(0)
    one = pairs[(pairs["method"] == "random · relative") & (pairs["predictor"] == "dist")]
    assert len(one) == 12  # every ordered pair of distinct encoders
    cells = {(c["source"], c["target"]): c for c in own_cells(0) if c.get("measure") == "dist"}
    score = {(c["source"], c["target"]): c["score"] for c in companion(0)["matrix"] if c["stitcher"] == "relative"}
    x = [cells[(s, t)]["value"] for s, t in zip(one["source"], one["target"])]
    y = [score[(s, t)] for s, t in zip(one["source"], one["target"])]
    got = pooled_spearman([(one["x"].to_numpy(), one["y"].to_numpy())], resamples=999)
    assert got["rho"] == pytest.approx(-spearmanr(x, y).statistic)  # aligned: a distance counts negated
    assert got["rho"] > 0.5 and got["low"] <= got["rho"] <= got["high"] and got["pairs"] == 12


def test_pooled_rho_is_the_pair_weighted_mean_of_the_tasks_rho():
    rng = np.random.default_rng(3)
    strata = [(rng.random(n), rng.random(n)) for n in (5, 12, 8)]
    expected = sum(len(x) * spearmanr(x, y).statistic for x, y in strata) / 25
    got = pooled_spearman(strata, resamples=999)
    assert got["rho"] == pytest.approx(expected) and got["strata"] == 3 and got["pairs"] == 25
    assert got["low"] < got["rho"] < got["high"]
    same = pooled_spearman(strata, resamples=999)
    assert (same["low"], same["high"]) == (got["low"], got["high"])  # seeded
    assert pooled_spearman([(rng.random(2), rng.random(2))])["strata"] == 0  # fewer than 3 pairs: no stratum


def test_the_controls_are_the_worse_own_score_and_a_shared_architecture():
    pairs = pairs_of(0).set_index(["method", "predictor", "source", "target"])["x"]
    own = {e: 0.9 - 0.1 * i for i, e in enumerate(ENCODERS)}
    assert pairs[("random · relative", OWN, "a0", "b1")] == pytest.approx(min(own["a0"], own["b1"]))
    assert pairs[("random · relative", SAME, "a0", "a1")] == 1.0
    assert pairs[("random · absolute", SAME, "a0", "b0")] == 0.0
    # no architecture recorded: no same-architecture control
    bare = [c for c in own_cells(0) if "measure" in c]
    assert SAME not in set(pair_frame("t", bare, companion(0))["predictor"])


def test_family_is_the_class_and_parameters_but_the_seed():
    mlp = lambda seed: {"class": "m:Trained", "params": {"arch": "mlp", "seed": seed}}  # noqa: E731
    assert family(mlp(0)) == family(mlp(1)) != family({"class": "m:Trained", "params": {"arch": "cnn", "seed": 0}})
    assert family(None) is None


def test_measure_cells_average_seeds_and_read_the_encoders_architecture():
    inputs = {"encoders": {"a": {"class": "m:T", "params": {"seed": 0}}, "b": {"class": "m:T", "params": {"seed": 1}}}}
    rows = pd.DataFrame({"status": "ok", "metric": "cka", "direction": "higher", "seed": [0, 1, 0, 1],
                         "source": ["a", "a", "b", "b"], "target": ["b", "b", "a", "a"], "value": [0.2, 0.4, 0.2, 0.4],
                         "inputs": [inputs] * 4})
    cells = measure_cells(rows)
    assert {"measure": "cka", "direction": "higher", "source": "a", "target": "b", "value": pytest.approx(0.3),
            "n": 2} in cells
    families = {c["encoder"]: c["family"] for c in cells if "encoder" in c}
    assert families["a"] == families["b"] is not None


def test_the_section_ranks_the_measures_per_method_and_pooled():
    text = section({"task0": own_cells(0), "task1": own_cells(1)},
                   {"task0": {"st0": companion(0)}, "task1": {"st1": companion(1, methods=("relative",))}})
    assert text.startswith("## Which similarity measure predicts stitching?")
    assert "- **Best measure:** " in text and "- **Controls:** " in text and "- **Means:** " in text
    assert "random · relative" in text and "random · absolute" in text and "*same architecture*" in text
    assert "[task0](task0.md) ↔ [st0](st0.md)" in text
    ranking = text.split("| predictor")[1]
    assert ranking.index("| cka") < ranking.index("*same architecture*")  # cka predicts these scores best
    assert section({"task0": own_cells(0)}, {}) is None


def _tasks():
    sim = make_task(SpaceSimilarity, name="sim", encoders=ENCODERS, stitching_task="st")
    return [make_task(Stitching, name="st", encoders=ENCODERS), sim]


def test_the_index_has_the_section_when_both_tasks_have_cells_and_not_otherwise():
    tasks = _tasks()
    assert companion_names(tasks) == {"st"}
    record = companion(0)
    both = {"st": {"cells": None, "matrix": record["matrix"]}, "sim": {"cells": own_cells(0)}}
    sections = kind_sections(tasks, both)
    assert len(sections) == 1 and sections[0].startswith("## Which similarity measure predicts stitching?")
    assert "[sim](sim.md) ↔ [st](st.md)" in sections[0]
    assert kind_sections(tasks, {"st": {"cells": None}, "sim": {"cells": own_cells(0)}}) == []  # no matrix
    assert kind_sections(tasks, {"st": {"cells": None, "matrix": record["matrix"]}, "sim": {"cells": None}}) == []
    assert kind_sections(tasks[1:], {"sim": {"cells": own_cells(0)}}) == []  # the companion is not in the file
    assert companion_names([make_task(SpaceSimilarity, name="x", encoders=ENCODERS)]) == set()


def test_the_page_draws_a_heatmap_per_measure_beside_the_stitching_page(tmp_path):
    rows = pd.DataFrame({"status": "ok", "metric": ["cka"] * 2 + ["dist"] * 2, "seed": 0,
                         "direction": ["higher"] * 2 + ["lower"] * 2, "source": ["a", "b"] * 2,
                         "target": ["b", "a"] * 2, "value": [0.5, 0.5, 0.1, 0.1]})
    page = Page(tmp_path, "sim")
    body = SpaceSimilarity(stitching_task="st").page(rows, page)
    assert "[st](st.md)" in body and body.count("![") == 2
    assert sorted(p.name for p in page.written if p.suffix == ".png") == ["measure-cka.png", "measure-dist.png"]
