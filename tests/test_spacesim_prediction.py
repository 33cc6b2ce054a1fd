"""Which similarity measure predicts stitching: Spearman's ρ over encoder pairs between the
space-similarity task's measures (and two controls) and its companion stitching task's
per-pair scores, per method and pooled over tasks, with a cluster bootstrap over a task's
encoder pairs shared by its methods, and the best measure compared with each control
paired; the index's section across kinds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from relbench.leaderboard import companion_names, kind_sections
from relbench.pages import Page
from relbench.testing import make_task
from relbench_spacesim.kind import SpaceSimilarity
from relbench_spacesim.prediction import (OWN, SAME, centred_ranks, cluster_draws, family, family_level,
                                          measure_cells, paired_difference, pair_frame, pooled, rank_correlation,
                                          section, stratum_rhos, summary_lines)
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


def frame(task: str, x, y, method: str = "m", predictor: str = "p", control: bool = False) -> pd.DataFrame:
    """One predictor's rows of a task and method: pair ``i`` is the ordered pair (``e{i}``, ``z``)."""
    return pd.DataFrame({"task": task, "method": method, "predictor": predictor, "control": control,
                         "source": [f"e{i}" for i in range(len(x))], "target": "z", "x": x, "y": y})


def pooled_of(pairs: pd.DataFrame, resamples: int = 999) -> dict:
    """One predictor's pooled ρ with its cluster-bootstrap interval."""
    return pooled(stratum_rhos(pairs, cluster_draws(pairs, resamples)))


def test_per_task_rho_is_scipys_spearman_and_a_distance_is_negated():
    pairs = pairs_of(0)
    one = pairs[(pairs["method"] == "random · relative") & (pairs["predictor"] == "dist")]
    assert len(one) == 12  # every ordered pair of distinct encoders
    cells = {(c["source"], c["target"]): c for c in own_cells(0) if c.get("measure") == "dist"}
    score = {(c["source"], c["target"]): c["score"] for c in companion(0)["matrix"] if c["stitcher"] == "relative"}
    x = [cells[(s, t)]["value"] for s, t in zip(one["source"], one["target"])]
    y = [score[(s, t)] for s, t in zip(one["source"], one["target"])]
    got = pooled_of(one)
    assert got["rho"] == pytest.approx(-spearmanr(x, y).statistic)  # aligned: a distance counts negated
    assert got["rho"] > 0.5 and got["low"] <= got["rho"] <= got["high"]
    assert (got["encoder_pairs"], got["tasks"], got["scores"]) == (12, 1, 12)


def test_pooled_rho_is_the_pair_weighted_mean_of_the_tasks_rho():
    rng = np.random.default_rng(3)
    strata = [(rng.random(n), rng.random(n)) for n in (5, 12, 8)]
    expected = sum(len(x) * spearmanr(x, y).statistic for x, y in strata) / 25
    pairs = pd.concat([frame(f"t{i}", x, y) for i, (x, y) in enumerate(strata)], ignore_index=True)
    got = pooled_of(pairs)
    assert got["rho"] == pytest.approx(expected) and got["strata"] == 3 and got["scores"] == 25
    assert got["low"] < got["rho"] < got["high"]
    same = pooled_of(pairs)
    assert (same["low"], same["high"]) == (got["low"], got["high"])  # seeded
    assert pooled_of(frame("t", rng.random(2), rng.random(2)))["strata"] == 0  # fewer than 3 pairs: no stratum


def test_a_resample_is_spearmans_rho_of_the_pairs_as_often_as_drawn():
    rng = np.random.default_rng(5)
    x, y = rng.integers(0, 4, 9).astype(float), rng.random(9)  # ties in x
    weights = np.vstack([np.ones(9), rng.multinomial(9, np.full(9, 1 / 9), size=20)])
    got = rank_correlation(centred_ranks(x, weights), centred_ranks(y, weights), weights)
    for w, rho in zip(weights.astype(int), got):
        xs, ys = np.repeat(x, w), np.repeat(y, w)
        if len(set(xs)) > 1 and len(set(ys)) > 1:
            assert rho == pytest.approx(spearmanr(xs, ys).statistic)
        else:
            assert np.isnan(rho)  # a variable constant in the resample: no ρ
    draws = cluster_draws(frame("t", x, y), resamples=50)["t"][1]
    assert draws.shape == (51, 9) and (draws[0] == 1).all() and (draws.sum(axis=1) == 9).all()


def test_a_tasks_methods_share_one_draw_of_its_encoder_pairs():
    rng = np.random.default_rng(7)
    x, y = rng.random(12), rng.random(12)
    alone = pooled_of(frame("t", x, y))
    twice = pooled_of(pd.concat([frame("t", x, y), frame("t", x, y, method="copy")], ignore_index=True))
    # a method that repeats another's scores on the same encoder pairs adds no information
    assert (twice["rho"], twice["low"], twice["high"]) == pytest.approx((alone["rho"], alone["low"], alone["high"]))
    assert (twice["encoder_pairs"], twice["tasks"], twice["scores"]) == (12, 1, 24)
    # another task's pairs are drawn on their own: the same data twice as two tasks narrows the interval
    tasks = pooled_of(pd.concat([frame("t", x, y), frame("u", x, y)], ignore_index=True))
    assert tasks["high"] - tasks["low"] < 0.9 * (alone["high"] - alone["low"])
    # a method lacking a drawn pair lacks it: its stratum is the draw restricted to its pairs
    short = frame("t", x, y, method="short").iloc[:8]
    both = pd.concat([frame("t", x, y), short], ignore_index=True)
    draws = cluster_draws(both, resamples=999)
    rho = {s["method"]: s for s in stratum_rhos(both, draws)}
    assert rho["short"]["rho"][0] == pytest.approx(spearmanr(x[:8], y[:8]).statistic)
    assert (rho["short"]["n"] == draws["t"][1][:, :8].sum(axis=1)).all()


def test_the_paired_difference_is_better_worse_or_inconclusive():
    rng = np.random.default_rng(11)
    parts = []
    for task in ("t", "u", "v"):
        for method in ("m1", "m2"):
            y = rng.random(30)
            parts += [frame(task, y, y, method, "measure"), frame(task, y, y, method, "copy", True),
                      frame(task, rng.random(30), y, method, "noise", True)]
    pairs = pd.concat(parts, ignore_index=True)
    draws = cluster_draws(pairs, resamples=999)
    same = paired_difference(pairs, draws, "measure", "copy")
    assert (same["delta"], same["low"], same["high"], same["verdict"]) == (0, 0, 0, "inconclusive")
    better = paired_difference(pairs, draws, "measure", "noise")
    assert better["verdict"] == "better" and 0 < better["low"] <= better["delta"] <= better["high"]
    assert (better["encoder_pairs"], better["tasks"], better["scores"]) == (90, 3, 180)
    assert paired_difference(pairs, draws, "noise", "measure")["verdict"] == "worse"
    assert paired_difference(pairs, draws, "measure", "absent")["verdict"] is None


def cka_only(seed: int, families: bool = True) -> list[dict]:
    """``own_cells`` with the measure ``cka`` alone, with or without the encoders' architectures."""
    return [c for c in own_cells(seed) if c.get("measure") == "cka" or (families and "encoder" in c)]


def exact_companion(seed: int, sign: float) -> dict:
    """A stitching task whose one method scores each pair ``sign`` × its ``cka`` (no own scores)."""
    record = companion(seed, methods=("relative",))
    cka = {(c["source"], c["target"]): c["value"] for c in cka_only(seed, families=False)}
    record["matrix"] = [{**c, "score": sign * cka[(c["source"], c["target"])]} for c in record["matrix"]
                        if c["source"] != c["target"]]
    return record


def test_a_control_is_compared_only_where_it_has_a_value():
    # cka ranks task0's pairs perfectly and task1's exactly backwards (pooled: 0); the architecture is
    # recorded on task0 alone, so the paired comparison is on task0's pairs, where cka is perfect
    cells = {"task0": cka_only(0), "task1": cka_only(1, families=False)}
    companions = {"task0": {"st0": exact_companion(0, 1.0)}, "task1": {"st1": exact_companion(1, -1.0)}}
    pairs = pd.concat([pair_frame(t, cells[t], c) for t, named in companions.items() for c in named.values()],
                      ignore_index=True)
    assert set(pairs.loc[pairs["predictor"] == SAME, "task"]) == {"task0"}
    got = paired_difference(pairs, cluster_draws(pairs), "cka", SAME)
    task0 = pairs[(pairs["task"] == "task0")].pivot(index=["source", "target"], columns="predictor", values="x")
    assert got["delta"] == pytest.approx(1 - spearmanr(task0[SAME], task0["cka"]).statistic)
    assert got["verdict"] == "better" and (got["encoder_pairs"], got["tasks"], got["scores"]) == (12, 1, 12)
    text = section(cells, companions)
    assert "over 24 encoder pairs of 2 tasks (24 pair-method scores)" in text.split("- **Controls:**")[0]
    means = text.split("- **Means:** ")[1].split("\n")[0]
    assert f"{SAME} Δρ = " in means
    assert "over 12 encoder pairs of 1 task (12 pair-method scores): cka predicts stitching better" in means
    assert "overlap" not in text


def test_the_summary_counts_encoder_pairs_tasks_and_pair_method_scores():
    text = section({"task0": own_cells(0), "task1": own_cells(1)},
                   {"task0": {"st0": companion(0)}, "task1": {"st1": companion(1, methods=("relative",))}})
    best = text.split("- **Best measure:** ")[1].split("\n")[0]
    assert best.endswith("over 24 encoder pairs of 2 tasks (36 pair-method scores).")  # 12 ordered pairs a task
    controls = text.split("- **Controls:** ")[1].split("\n")[0]
    assert controls.count("over 24 encoder pairs of 2 tasks (36 pair-method scores)") == 2


def test_measures_equal_at_the_shown_precision_are_named_tied():
    def row(rho, control=False):
        return {"control": control, "rho": rho, "low": rho - 0.05, "high": rho + 0.05, "encoder_pairs": 12,
                "tasks": 1, "scores": 24, "strata": 2}

    overall = pd.DataFrame.from_records([row(0.481), row(0.479), row(0.474), row(0.2, True)],
                                        index=["cka", "mknn", "svcca", OWN])
    lines = summary_lines(overall, {})
    assert lines.startswith("- **Best measure:** cka (tied with mknn at +0.48), pooled ρ = +0.48 [+0.43, +0.53]")
    alone = summary_lines(overall.drop(index="mknn"), {})
    assert alone.startswith("- **Best measure:** cka, pooled ρ = +0.48")


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


def test_the_paired_comparisons_with_the_controls_are_one_family_at_bonferroni_s_level():
    assert family_level(1) == pytest.approx(0.95) and family_level(2) == pytest.approx(0.975)
    rng = np.random.default_rng(3)
    x = rng.normal(size=12)
    rows = [{"task": "t", "method": "m", "predictor": p, "control": p != "cka", "source": f"s{i}",
             "target": f"t{i}", "x": v, "y": x[i]} for i in range(12)
            for p, v in (("cka", x[i] + rng.normal()), (OWN, rng.normal()))]
    pairs = pd.DataFrame(rows)
    draws = cluster_draws(pairs, resamples=999)
    wide, narrow = (paired_difference(pairs, draws, "cka", OWN, level) for level in (0.975, 0.95))
    assert wide["low"] < narrow["low"] and wide["high"] > narrow["high"]  # the family's intervals are wider
    text = section({"task0": own_cells(0), "task1": own_cells(1)},
                   {"task0": {"st0": companion(0)}, "task1": {"st1": companion(1, methods=("relative",))}})
    assert "with its 97.5 % interval (the family: the best measure against each of the 2 controls" in text


def test_both_directions_of_an_encoder_pair_are_drawn_together():
    rows = [{"task": "t", "method": "m", "predictor": "cka", "control": False, "source": s, "target": t, "x": 0.0,
             "y": 0.0} for s in "abc" for t in "abc" if s != t]
    columns, weights = cluster_draws(pd.DataFrame(rows), resamples=50)["t"]
    assert weights.shape == (51, 3)  # three unordered pairs, not six ordered ones
    assert all(columns[(s, t)] == columns[(t, s)] for s, t in columns)
