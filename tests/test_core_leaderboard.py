"""The index's cross-task ranking: per-task orders combined by normalised rank."""

from __future__ import annotations

import pytest

from relbench.leaderboard import cross_task_ranking


def test_ranks_are_normalised_within_each_task():
    # "a" wins a two-way task and is 8th of 10 in another; "b" is 2nd in both. Being last of
    # two weighs as much as being last of ten, so "a" ranks above "b" although its mean
    # ordinal rank is worse.
    orders = {"small": ["a", "b"], "large": ["c", "b", *"defgh", "a", "i", "j"]}
    rows = {k: (norm, rank, n) for k, norm, rank, n in cross_task_ranking(orders)}
    assert rows["a"] == (pytest.approx((0 + 7 / 9) / 2), 4.5, 2)
    assert rows["b"] == (pytest.approx((1 + 1 / 9) / 2), 2.0, 2)
    assert rows["c"] == (0.0, 1.0, 1)
    order = [k for k, *_ in cross_task_ranking(orders)]
    assert order[0] == "c" and order.index("a") < order.index("b")


def test_ties_prefer_more_tasks_and_single_entry_tasks_count_as_best():
    rows = cross_task_ranking({"t1": ["x"], "t2": ["y", "z"], "t3": ["y"]})
    assert [(k, n) for k, _, _, n in rows] == [("y", 2), ("x", 1), ("z", 1)]


def _rows(representation, seeds, value, kind="word-neighbourhoods"):
    return [{"kind": kind, "metric": "jaccard@10", "representation": representation, "seed": seed, "source": s,
             "target": t, "value": value, "direction": "higher", "status": "ok"}
            for seed in seeds for s, t in (("a", "b"), ("b", "a"), ("a", "a"))]


def test_claims_count_seedless_rows_and_name_the_metric_outside_stitching():
    import pandas as pd

    from relbench.leaderboard import claims_section
    from relbench_relreps import WordNeighbourhoods

    # deterministic baselines are stored without a seed; they still form a side of a claim
    df = pd.DataFrame(_rows("relative", [0, 1], 0.5) + _rows("absolute", [None], 0.1))
    claim = {"claim": "relative beats absolute", "metric": "jaccard@10",
             "better": {"representation": "relative"}, "worse": {"representation": "absolute"}}
    kind = WordNeighbourhoods()
    text = claims_section(kind, df, [claim])
    assert "**holds** — representation=relative: 0.500 vs representation=absolute: 0.100 (jaccard@10 ↑)" in text
    worse = claims_section(kind, df, [{**claim, "better": claim["worse"], "worse": claim["better"]}])
    assert "**does not hold on this data**" in worse


def test_held_out_section_averages_decoders_and_draws_the_own_head(tmp_path):
    import pandas as pd

    from relbench.pages import Page
    from relbench_stitching import Stitching
    from relbench_stitching.page import held_out_section

    base = {"kind": "stitching", "metric": "accuracy", "direction": "higher", "status": "ok", "held_out": "h",
            "regularizer": "-", "extra": {}}
    rows = [{**base, "selector": "random", "similarity": "cosine", "stitcher": "relative", "seed": seed,
             "source": "h", "target": t, "value": v}
            for seed, (v1, v2) in enumerate([(0.6, 0.8), (0.5, 0.7)]) for t, v in (("a", v1), ("b", v2))]
    rows.append({**base, "selector": "-", "similarity": "-", "stitcher": "non-stitched", "seed": 0,
                 "source": "h", "target": "h", "value": 0.9, "extra": {"role": "reference"}})
    text = held_out_section(pd.DataFrame(rows), "accuracy", Page(tmp_path, "t"))
    # seed 0: mean(0.6, 0.8) = 0.7; seed 1: 0.6 → 0.650 ± 0.050
    assert "| random · cosine · relative    | 0.650 ± 0.050" in text
    assert "own absolute head (reference) | 0.900" in text
    assert (tmp_path / "figures" / "t" / "held-out-accuracy.png").stat().st_size > 0
    # the section belongs to the held-out protocol's page only (the kind is built with the task's parameters)
    assert "Held-out encoders" in Stitching(protocol="held-out").page(pd.DataFrame(rows), Page(tmp_path, "t"))
    assert "Held-out encoders" not in Stitching().page(pd.DataFrame(rows), Page(tmp_path, "t"))


def test_every_figure_has_a_vector_twin_and_heatmaps_share_one_scale(registry, cli_main, write_yaml, monkeypatch):
    import matplotlib.axes
    from test_core_runner import TASKS, _run

    from relbench_stitching.page import colour_scale

    path = write_yaml(TASKS)
    runner, _ = _run(registry, path)
    scales = []
    original = matplotlib.axes.Axes.imshow

    def imshow(self, X, *args, **kwargs):
        scales.append((kwargs.get("vmin"), kwargs.get("vmax")))
        return original(self, X, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "imshow", imshow)
    assert cli_main(["leaderboard", str(path)]) == 0
    figures = path.parent / "boards" / "figures" / "blobs"
    pngs = sorted(figures.glob("*.png"))
    assert len(pngs) >= 2 and all(p.with_suffix(".svg").is_file() for p in pngs)
    df = runner.store.load("blobs")
    ok = df[(df["metric"] == "accuracy") & (df["status"] == "ok")]["value"]
    assert colour_scale(df, "accuracy") == (ok.min(), ok.max())
    assert len(scales) == len(pngs) and set(scales) == {colour_scale(df, "accuracy")}  # one scale, every heatmap


def test_index_says_how_to_cite_with_version_and_results_date(registry, cli_main, write_yaml):
    import time as clock
    from pathlib import Path

    import yaml
    from test_core_runner import TASKS, _run

    from relbench import __version__

    path = write_yaml(TASKS)
    runner, _ = _run(registry, path)
    assert cli_main(["leaderboard", str(path)]) == 0
    index = (path.parent / "boards" / "README.md").read_text()
    newest = max(e.time for e in runner.store.read("blobs").units.values())
    assert f"*relbench {__version__}, results of {clock.strftime('%Y-%m-%d', clock.gmtime(newest))}*" in index
    # the citation file names the same version as the package
    cff = yaml.safe_load((Path(__file__).resolve().parents[1] / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["version"] == __version__
    assert cff["title"] and cff["message"] and cff["authors"]
