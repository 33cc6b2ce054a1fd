"""The leaderboard index: the ranking across tasks (a common set, Friedman's test,
Wilcoxon's with Holm's correction; :mod:`test_crosstask_stats` checks the numbers), the
claims and pages, and what the index says about citing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from scipy.stats import friedmanchisquare

from relbench.crosstask import common_set, rank


def test_a_combination_measured_on_fewer_tasks_is_never_ranked_against_the_common_set():
    # "lucky" wins the one task it was measured on; a, b, c are measured on all four
    orders = {"t1": ["lucky", "a", "b", "c"], "t2": ["b", "a", "c"], "t3": ["a", "c", "b"], "t4": ["a", "b", "c"]}
    assert common_set(orders) == (["t1", "t2", "t3", "t4"], ["a", "b", "c"])
    result = rank(orders)
    assert list(result.mean_ranks.index) == ["a", "b", "c"] and "lucky" not in result.mean_ranks
    assert result.apart == {"lucky": 1}
    assert result.mean_ranks["a"] == pytest.approx((1 + 2 + 1 + 1) / 4)  # ranks among a, b, c only


def test_the_common_set_drops_the_tasks_that_share_least():
    orders = {"wide": list("abcdef"), "also": list("fedcba"), "odd": list("axyz")}
    assert common_set(orders) == (["also", "wide"], list("fedcba"))
    assert common_set({"t1": list("abc"), "t2": list("xyz")}) == ([], [])
    assert rank({"t1": list("abc"), "t2": list("xyz")}) is None


def test_friedman_and_wilcoxon_tell_a_consistent_order_from_chance():
    rng = np.random.default_rng(1)
    combos = list("abcde")
    # 9 tasks: the fewest at which Holm over 10 pairs can separate a pair of 5 combinations
    consistent = {f"t{i}": combos for i in range(9)}
    noise = {f"t{i}": list(rng.permutation(combos)) for i in range(9)}
    strong, weak = rank(consistent), rank(noise)
    positions = [[noise[t].index(c) for t in sorted(noise)] for c in combos]
    assert weak.friedman.statistic == pytest.approx(friedmanchisquare(*positions).statistic)  # SciPy's statistic
    assert strong.friedman.p < 0.001 < 0.05 < weak.friedman.p
    assert strong.separable and weak.separable and strong.tasks_needed == weak.tasks_needed == 9
    assert strong.pairwise.loc["a", "e"] < 0.05  # best and worst of a consistent order are separated
    assert strong.letters == dict(zip(combos, "abcde"))  # every pair separated: a letter each
    assert (weak.pairwise.to_numpy()[~np.eye(5, dtype=bool)] > 0.05).all()  # chance separates nothing
    assert set(weak.letters.values()) == {"a"}


def _rows(representation, seeds, value, kind="word-neighbourhoods"):
    return [{"kind": kind, "metric": "jaccard@10", "representation": representation, "seed": seed, "source": s,
             "target": t, "value": value, "direction": "higher", "status": "ok"}
            for seed in seeds for s, t in (("a", "b"), ("b", "a"), ("a", "a"))]


def test_claims_count_seedless_rows_and_name_the_metric_outside_stitching():
    import pandas as pd

    from relbench.claims import claims_section
    from relbench_relreps import WordNeighbourhoods

    # deterministic baselines are stored without a seed; they still form a side of a claim
    df = pd.DataFrame(_rows("relative", [0, 1], 0.5) + _rows("absolute", [None], 0.1))
    claim = {"claim": "relative beats absolute", "metric": "jaccard@10",
             "better": {"representation": "relative"}, "worse": {"representation": "absolute"}}
    kind = WordNeighbourhoods()
    text = claims_section(kind, df, [claim], {})
    # the seedless side is a constant, said so, not given a zero-width interval as if measured precisely
    assert "**holds** — representation=relative: 0.500 [0.500, 0.500] vs representation=absolute: 0.100 " \
           "(stored without a seed: one value for every seed) (jaccard@10 ↑); advantage +0.400 [+0.400, +0.400], " \
           "superiority, margin 0.01, p = " in text
    assert "paired on the 2 source/target values both sides have; paired t-test over 2 seeds." in text
    worse = claims_section(kind, df, [{**claim, "better": claim["worse"], "worse": claim["better"]}], {})
    assert "**does not hold** —" in worse
    within = claims_section(kind, df, [{**claim, "margin": 0.5}], {})
    assert "**inconclusive** —" in within and "margin 0.5" in within


def test_held_out_section_averages_decoders_and_draws_the_own_head(tmp_path):
    import pandas as pd

    from relbench.pages import Page
    from relbench_stitching import Stitching
    from relbench_stitching.page import held_out_section

    base = {"kind": "stitching", "metric": "accuracy", "direction": "higher", "status": "ok", "held_out": "h",
            "regularizer": "-", "extra": {}, "role": "method", "needs_both_spaces": False}
    rows = [{**base, "selector": "random", "similarity": "cosine", "stitcher": "relative", "seed": seed,
             "source": "h", "target": t, "value": v}
            for seed, (v1, v2) in enumerate([(0.6, 0.8), (0.5, 0.7)]) for t, v in (("a", v1), ("b", v2))]
    rows.append({**base, "selector": "-", "similarity": "-", "stitcher": "non-stitched", "seed": 0,
                 "source": "h", "target": "h", "value": 0.9, "role": "own-head"})
    text = held_out_section(pd.DataFrame(rows), "accuracy", Page(tmp_path, "t"))
    # seed 0: mean(0.6, 0.8) = 0.7; seed 1: 0.6 → 0.650; no per-sample data: a Student-t interval
    # over the two seeds (0.65 ± 12.71 · 0.05), none for the own head's single seed
    low, high = stats.ttest_1samp([0.7, 0.6], 0).confidence_interval()
    assert f"| random · cosine · relative    | 0.650 [{low:.3f}, {high:.3f}]" in text
    assert "own absolute head (reference) | 0.900 n/a" in text
    assert "Student-t intervals of the mean over seeds" in text
    assert (tmp_path / "figures" / "t" / "held-out-accuracy.png").stat().st_size > 0
    # the section belongs to the held-out protocol's page only (the kind is built with the task's parameters)
    assert "Held-out encoders" in Stitching(protocol="held-out").page(pd.DataFrame(rows), Page(tmp_path, "t"))
    assert "Held-out encoders" not in Stitching().page(pd.DataFrame(rows), Page(tmp_path, "t"))
    # the own head is found by its rows' role column, not by the label a tasks file gives it
    relabelled = [{**r, "stitcher": "own-head"} if r["stitcher"] == "non-stitched" else r for r in rows]
    again = held_out_section(pd.DataFrame(relabelled), "accuracy", Page(tmp_path, "t"))
    assert "own absolute head (reference) | 0.900 n/a" in again


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


def test_index_says_how_to_cite_with_version_revision_and_results_date(registry, cli_main, write_yaml):
    import time as clock
    from pathlib import Path

    import yaml
    from test_core_runner import TASKS, _run

    from relbench import __version__

    from relbench.leaderboard import render

    path = write_yaml(TASKS)
    runner, _ = _run(registry, path)
    plans = runner.plans()
    release = {"revision": "abc1234", "tasks": "tasks.yaml", "tasks_sha256": "0" * 64, "row_revisions": ["abc1234"]}
    render(runner.store, path.parent / "boards", [tr.task for tr in plans],
           {tr.task.name: [u.id for u in tr.plan().units] for tr in plans}, release=release)
    index = (path.parent / "boards" / "README.md").read_text()
    newest = max(e.time for e in runner.store.read("blobs").units.values())
    day = clock.strftime('%Y-%m-%d', clock.gmtime(newest))
    # the revision tells releases of one version apart: their numbers differ
    assert f"*relbench {__version__}, the release drawn at git revision abc1234, results of {day}*" in index
    assert "the reference minus the best score where higher is better, the best score minus the reference where " \
        "lower is better" in index and "a negative gap is how far it beats it" in index
    # the citation file names the same version as the package
    cff = yaml.safe_load((Path(__file__).resolve().parents[1] / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["version"] == __version__
    assert cff["title"] and cff["message"] and cff["authors"]


#: a toy stitching task of two encoders, its grid left to fill in (for the index's ranking across tasks)
RANKED_TASK = """
  - name: {name}
    dataset: {{name: toy-blobs, params: {{classes: 3, seed: {seed}}}}}
    encoders:
      - {{name: toy-rotated, label: a, params: {{seed: 1}}}}
      - {{name: toy-rotated, label: b, params: {{seed: 2}}}}
    grid: {{selectors: [random], {grid}}}
    metrics: [accuracy]
"""


def _two_ranked_tasks(write_yaml, grid: str) -> Path:
    """A tasks file of two toy stitching tasks with the grid ``grid``."""
    return write_yaml("suite: {seeds: [0], num_anchors: 8, output: results, leaderboards: boards}\ntasks:"
                      + RANKED_TASK.format(name="first", seed=0, grid=grid)
                      + RANKED_TASK.format(name="second", seed=1, grid=grid))


def test_the_index_ranks_across_tasks_without_a_diagram_no_pair_can_reach(registry, cli_main, write_yaml):
    path = _two_ranked_tasks(write_yaml, "similarities: [cosine, euclidean, l1], stitchers: [relative]")
    boards = path.parent / "boards"
    stale = boards / "figures" / "index" / "critical-difference.png"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"drawn by an earlier version")
    assert cli_main(["run", str(path), "-q"]) == 0
    index = (boards / "README.md").read_text()
    assert "**common set** of 2 tasks" in index and "Friedman's χ²" in index and "| group" in index
    # two tasks: Wilcoxon's exact p is 0.5 at best, so no pair can be separated and no diagram is drawn
    assert "With 2 tasks no pair can be separated at α = 0.05; at least 7 tasks are needed" in index
    assert "critical-difference" not in index and not stale.exists()
    # a run that changes no ranking runs no test (the index is the same)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("relbench.crosstask.rank", lambda orders: pytest.fail("ranked again with nothing changed"))
        assert cli_main(["run", str(path), "-q"]) == 0
    assert (boards / "README.md").read_text() == index


def test_the_critical_difference_diagram_is_drawn_when_a_pair_can_be_separated(tmp_path):
    from relbench.leaderboard import _cross_task

    consistent = {f"t{i}": list("abc") for i in range(7)}  # 7 tasks: the fewest for 3 pairs (Holm)
    entry = _cross_task(tmp_path, consistent, {}, None, redraw=False)
    assert entry["link"] == "figures/index/critical-difference.png"
    assert f"]({entry['link']})" in entry["section"] and "no pair can be separated" not in entry["section"]
    diagram = tmp_path / "figures" / "index" / "critical-difference.svg"
    drawn = diagram.stat().st_mtime_ns
    with pytest.MonkeyPatch.context() as patch:  # nothing changed: no test, no drawing
        patch.setattr("relbench.crosstask.rank", lambda orders: pytest.fail("ranked again with nothing changed"))
        assert _cross_task(tmp_path, consistent, {}, entry, redraw=False) == entry
    assert diagram.stat().st_mtime_ns == drawn
    assert _cross_task(tmp_path, consistent, {}, entry, redraw=True)["link"] == entry["link"]
    assert diagram.stat().st_mtime_ns != drawn
    # one task fewer: no pair can be separated any more, and the figure goes
    fewer = _cross_task(tmp_path, {t: consistent[t] for t in list(consistent)[:6]}, {}, entry, redraw=False)
    assert fewer["link"] is None and not diagram.exists()
    assert "With 6 tasks no pair can be separated at α = 0.05; at least 7 tasks are needed" in fewer["section"]


def test_a_section_cached_by_other_statistics_is_computed_again(tmp_path):
    from relbench.identity import fingerprint
    from relbench.leaderboard import _cross_task

    orders = {"t1": list("abc"), "t2": list("bca")}
    # the manifest of an earlier version: keyed by the rankings alone, with its wording
    earlier = {"digest": fingerprint(orders), "link": None, "section": "Nemenyi's post-hoc test ..."}
    assert "Wilcoxon" in _cross_task(tmp_path, orders, {}, earlier, redraw=False)["section"]


def test_a_redrawn_page_leaves_no_figure_it_no_longer_draws(registry, cli_main, write_yaml):
    from test_core_runner import TASKS, _run

    path = write_yaml(TASKS)
    _run(registry, path)
    assert cli_main(["leaderboard", str(path)]) == 0
    figures = path.parent / "boards" / "figures" / "blobs"
    drawn = sorted(p.name for p in figures.iterdir())
    # a heatmap of a combination that used to be the best, left by an earlier drawing
    (figures / "heatmap-accuracy-former-best.png").write_bytes(b"old")
    (figures / "heatmap-accuracy-former-best.svg").write_bytes(b"old")
    assert cli_main(["leaderboard", str(path)]) == 0
    assert sorted(p.name for p in figures.iterdir()) == drawn
    page = (path.parent / "boards" / "blobs.md").read_text()
    assert all(name in page for name in drawn if name.endswith(".png"))


TALLIES = """\
suite: {seeds: [0, 1], output: results, leaderboards: boards}
tasks:
  - {name: first, kind: {name: toy-tally, params: {offset: 1}}, dataset: {name: toy-blobs}}
  - {name: other, kind: toy-other-tally, dataset: {name: toy-blobs}}
  - {name: second, kind: {name: toy-tally, params: {offset: 2}}, dataset: {name: toy-blobs}}
"""


def test_each_kind_adds_one_section_from_the_cells_its_pages_recorded(write_yaml, monkeypatch):
    import json

    import toy_plugins
    from toy_plugins import Tally

    from relbench import cli
    from relbench.plugins import Registry, _discover

    registry = Registry(_discover() + [("toy", toy_plugins, "tests 0"), ("tallies", toy_plugins.TALLIES, "tests 0")])
    monkeypatch.setattr("relbench.plugins.load_registry", lambda *args, **kwargs: registry)
    cli_main = cli.main

    path = write_yaml(TALLIES)
    Tally.cells_calls.clear()
    Tally.section_calls.clear()
    assert cli_main(["run", str(path), "-q"]) == 0
    boards = path.parent / "boards"
    cells = {task: [{"item": "x", "score": 0.5 + offset}, {"item": "y", "score": 0.5 + offset}]
             for task, offset in (("first", 1), ("other", 0), ("second", 2))}  # mean of seeds 0 and 1
    assert sorted(Tally.cells_calls) == ["first", "other", "second"]  # one call per page drawn
    # one call per kind, with the cells of its tasks in the tasks file's order
    assert Tally.section_calls == [("toy-tally", {"first": cells["first"], "second": cells["second"]}),
                                   ("toy-other-tally", {"other": cells["other"]})]
    manifest = json.loads((boards / ".pages.json").read_text())
    assert {task: manifest[task]["cells"] for task in cells} == cells  # kept with each page
    index = (boards / "README.md").read_text()
    sources, tally, other, tasks = (index.index(s) for s in ("sources.md)", "## Section of toy-tally",
                                                             "## Section of toy-other-tally", "## Tasks"))
    assert index.index("Not a release") < sources < tally < other < tasks  # after how to cite, before the tasks

    # nothing changed: no cells computed, no section, the index byte for byte the same
    Tally.cells_calls.clear()
    Tally.section_calls.clear()
    assert cli_main(["run", str(path), "-q"]) == 0
    assert Tally.cells_calls == [] and Tally.section_calls == [] and (boards / "README.md").read_text() == index

    # one page drawn again: only its cells are computed; the sections get every task's, the others from the manifest
    (boards / "second.md").unlink()
    assert cli_main(["run", str(path), "-q"]) == 0
    assert Tally.cells_calls == ["second"] and [name for name, _ in Tally.section_calls] == ["toy-tally",
                                                                                           "toy-other-tally"]
    assert Tally.section_calls[0][1] == {"first": cells["first"], "second": cells["second"]}

    # a page drawn before cells were recorded is drawn again, so that every section has all its tasks
    manifest = json.loads((boards / ".pages.json").read_text())
    del manifest["other"]["cells"]
    (boards / ".pages.json").write_text(json.dumps(manifest))
    Tally.cells_calls.clear()
    assert cli_main(["run", str(path), "-q"]) == 0
    assert Tally.cells_calls == ["other"]


def test_a_table_wider_than_a_screen_is_split_with_the_columns_naming_a_row_repeated():
    from tabulate import tabulate

    from relbench.pages import WIDTH, table

    headers = ["#", "combination", *[f"metric number {i} ↑ [95 % CI]" for i in range(10)]]
    rows = [[rank, f"combination {rank}", *[f"0.{rank}{i}0 [0.{rank}00, 0.{rank}99]" for i in range(10)]]
            for rank in range(1, 4)]
    assert max(map(len, tabulate(rows, headers=headers, tablefmt="pipe").splitlines())) > WIDTH  # the old page
    text = table(rows, headers, keep=2)
    assert max(map(len, text.splitlines())) <= WIDTH
    parts = text.split("\n\n")
    assert len(parts) > 1
    for part in parts:  # every part names its rows again, in order
        lines = part.splitlines()
        assert lines[0].startswith("| #   | combination ")
        assert [line.split("|")[2].strip() for line in lines[2:]] == ["combination 1", "combination 2",
                                                                    "combination 3"]
    shown = [h for part in parts for h in part.splitlines()[0].strip("|").split("|")[2:]]
    assert [h.strip() for h in shown] == headers[2:]  # every other column once, in order
    assert all(cell in text for row in rows for cell in row[2:])
    # a table that fits is one table, as before
    narrow = [row[:4] for row in rows]
    assert table(narrow, headers[:4]) == tabulate(narrow, headers=headers[:4], tablefmt="pipe", disable_numparse=True)


def test_a_long_list_folds_into_a_details_block():
    from relbench.pages import LISTED, WIDTH, listing

    assert listing("Pairs", ["a→b", "b→a"]) == "Pairs: a→b, b→a."
    many = [f"enc{i}→enc{i + 1}" for i in range(LISTED + 1)]
    folded = listing("Pairs", many)
    assert folded.startswith(f"<details><summary>Pairs ({LISTED + 1})</summary>\n\n")
    assert folded.endswith("\n\n</details>") and ", ".join(many) in folded
    long_names = [f"a-package-with-a-long-name-{i} 1.0.{i}" for i in range(5)]  # few, but past the width
    assert len("Plugins from: " + ", ".join(long_names)) > WIDTH
    assert listing("Plugins from", long_names).startswith("<details>")
    sentences = ["relative → b: failed, because of x", "absolute → c: failed"]  # commas of their own
    assert listing("Failures", sentences, lines=True) == ("Failures:\n\n- relative → b: failed, because of x\n"
                                                         "- absolute → c: failed")
    assert listing("Failures", sentences * LISTED, lines=True).startswith("<details>")


def _pairs_rows(observed: list[tuple[str, str]], encoders=("a", "b", "c", "d")):
    """Stitching rows of one relative combination over ``observed`` (source, target) pairs
    and an absolute reference over every pair, two seeds."""
    base = {"kind": "stitching", "metric": "accuracy", "direction": "higher", "status": "ok",
            "regularizer": "-", "extra": {}, "role": "method", "needs_both_spaces": False}
    rows = [{**base, "selector": "random", "similarity": "cosine", "stitcher": "relative", "seed": seed,
             "source": s, "target": t, "value": 0.7 + 0.01 * seed} for seed in (0, 1) for s, t in observed]
    rows += [{**base, "selector": "-", "similarity": "-", "stitcher": "absolute", "seed": seed, "source": s,
              "target": t, "value": 0.9 if s == t else 0.1, "role": "reference"}
             for seed in (0, 1) for s in encoders for t in encoders]
    return rows


def test_a_mostly_missing_heatmap_is_not_drawn_and_its_old_figure_is_removed(tmp_path):
    import pandas as pd

    from relbench.leaderboard import _remove_stale_figures
    from relbench.pages import Page, sparse_figure
    from relbench_stitching import Stitching

    old = tmp_path / "figures" / "t" / "heatmap-accuracy-random-cosine-relative.png"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"drawn when more pairs were measured")
    # held out: only sources c and d reach decoders, 6 of 16 cells
    sparse = [("c", "a"), ("c", "b"), ("c", "d"), ("d", "a"), ("d", "b"), ("d", "c")]
    page = Page(tmp_path, "t")
    text = Stitching().page(pd.DataFrame(_pairs_rows(sparse)), page)
    _remove_stale_figures(page)
    assert ("_No per-pair heatmap of random · cosine · relative: 10 of 16 cells have no score, and a figure more "
            "than half empty is not drawn._") in text
    assert not old.exists() and not old.with_suffix(".svg").exists()
    # the absolute reference reaches every pair: its heatmap is drawn
    assert (tmp_path / "figures" / "t" / "heatmap-accuracy-absolute.png").is_file()
    # half missing is still drawn; more than half is not
    assert sparse_figure("x", [[1.0, float("nan")], [None, 0.5]]) is None
    assert sparse_figure("x", [1.0, float("nan"), None]).startswith("_No x: 2 of 3 cells")


def test_every_page_opens_with_the_three_line_summary(registry, cli_main, write_yaml, tmp_path):
    from test_core_runner import TASKS, _run

    from relbench.config import load_suite
    from relbench.interfaces import TaskKind
    from relbench.leaderboard import render, summary
    from relbench.results import ResultStore
    from relbench_relreps import WordNeighbourhoods
    from relbench_stitching import Stitching

    path = write_yaml(TASKS)
    _run(registry, path)
    assert cli_main(["leaderboard", str(path)]) == 0
    page = (path.parent / "boards" / "blobs.md").read_text().splitlines()
    index = (path.parent / "boards" / "README.md").read_text()
    line = next(row for row in index.splitlines() if row.startswith("| [blobs]"))
    best, metric, score, reference = [cell.strip() for cell in line.split("|")[3:7]]
    assert page[0] == "# blobs" and page[1] == ""
    assert page[2] == "- **Measures:** Toy blobs behind random rotations."
    assert page[3] == f"- **Best:** {best}: {metric} ↑ {score} (reference {reference})"
    assert page[4].startswith("- **Means:** A decoder fitted on one encoder and used zero-shot on another reaches "
                              f"{metric} ")  # the kind's own sentence
    assert page[5] == "" and page[6] == "Toy blobs behind random rotations."  # the whole description follows
    assert "[" in score  # the headline's interval, as the index has it
    # a page with no results yet opens the same way
    task = load_suite(path, registry).tasks[0]
    render(ResultStore(tmp_path / "empty"), tmp_path / "empty-boards", [task], {task.name: []})
    empty = (tmp_path / "empty-boards" / "blobs.md").read_text().splitlines()
    assert [line.split("**")[1] for line in empty[2:5]] == ["Measures:", "Best:", "Means:"]
    assert empty[3:5] == ["- **Best:** no results yet.",
                          "- **Means:** Nothing is measured yet: run `relbench run` on the tasks file."]
    # the generic sentences of a kind that does not say its own, without and with a headline; one that does
    class Generic(WordNeighbourhoods):
        meaning = TaskKind.meaning

    assert summary(task, Generic(), None, "neutral").splitlines()[1:] == [
        "- **Best:** none named by this task's kind (see the tables below).",
        "- **Means:** No single score ranks this task's combinations; each table below says what it compares."]
    headline = {"best": "x", "metric": "accuracy", "score": 0.5, "std": 0.1, "reference": float("nan")}
    assert summary(task, Generic(), headline, "lower").splitlines()[1:] == [
        "- **Best:** x: accuracy ↓ 0.500 ± 0.100",
        "- **Means:** Of the combinations compared here, x ranks first on accuracy (lower is better); the tables "
        "below compare it with the others."]
    assert summary(task, WordNeighbourhoods(), None, "neutral").splitlines()[2].startswith(
        "- **Means:** Higher Jaccard and MRR mean")

    class Plain(Stitching):
        def meaning(self, headline, direction):
            return f"{headline['best']} is what to use."

    assert summary(task, Plain(), headline, "higher").splitlines() == [
        "- **Measures:** Toy blobs behind random rotations.", "- **Best:** x: accuracy ↑ 0.500 ± 0.100",
        "- **Means:** x is what to use."]


def test_the_summary_says_what_is_measured_with_the_first_sentence_of_the_description():
    from relbench.leaderboard import first_sentence

    text = "Stitching (Moschella et al. 2023 §5): MLPs on MNIST. Anchors are random! More? Yes."
    assert first_sentence(text) == "Stitching (Moschella et al. 2023 §5): MLPs on MNIST."
    assert first_sentence("One sentence only.") == "One sentence only."
    assert first_sentence("") == ""


def test_every_builtin_kind_without_a_headline_says_what_its_page_means():
    from relbench.interfaces import TaskKind
    from relbench_irp.quality import TranslationQuality
    from relbench_irp.scale import ScaleInvariance
    from relbench_relreps import WordNeighbourhoods
    from relbench_relreps.tasks.proxy import PerformanceProxy
    from relbench_relreps.tasks.conv_reconstruction import ConvReconstruction
    from relbench_relreps.tasks.reconstruction import Reconstruction

    generic = TaskKind.meaning(WordNeighbourhoods(), None, "neutral")
    for kind in (TranslationQuality, ScaleInvariance, WordNeighbourhoods, PerformanceProxy, Reconstruction,
                 ConvReconstruction):
        sentence = kind().meaning(None, "neutral")
        assert sentence != generic and sentence.endswith(".") and "\n" not in sentence, kind.name


def test_published_numbers_stand_in_a_paper_column_with_what_differs_as_notes():
    import pandas as pd

    from relbench.leaderboard import published_section
    from relbench_stitching import Stitching

    def row(stitcher, source, target, seed, value):
        return {"selector": "random", "similarity": None, "stitcher": stitcher, "regularizer": None,
                "source": source, "target": target, "held_out": None, "seed": seed, "metric": "accuracy",
                "value": value, "direction": "higher", "status": "ok"}

    rows = [row("irp", "a", "b", s, 0.6 + 0.1 * s) for s in range(2)] + [row("irp", "b", "a", 0, 0.9)]
    rows += [row("irp", "a", "a", 0, 0.99)]  # the diagonal is not a stitched pair
    published = [
        {"stitcher": "irp", "metric": "accuracy", "value": 0.88, "reference": "B 2024, Table 2",
         "differs": "encoders at 128 px"},
        {"stitcher": "irp", "source": "a", "target": "b", "metric": "accuracy", "value": 0.5,
         "differs": "encoders at 128 px"},
        {"stitcher": "procrustes", "metric": "accuracy", "value": 0.7, "differs": "5 head epochs"},
        {"stitcher": "irp", "metric": "weighted_f1", "value": 0.8},
    ]
    text = published_section(Stitching(), pd.DataFrame(rows), published)
    header = next(line for line in text.splitlines() if line.startswith("| cell"))
    assert [c.strip() for c in header.strip("|").split("|")] == ["cell", "metric", "paper", "relbench",
                                                                   "difference", "source"]
    lines = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| irp")
             or line.startswith("| procrustes")}
    # seed 0: mean of a→b 0.6 and b→a 0.9 = 0.75; seed 1: a→b 0.7 → 0.725 over seeds
    from scipy import stats

    low, high = stats.t.interval(0.95, 1, loc=0.725, scale=stats.sem([0.75, 0.7]))  # over the two seeds' means
    assert f"0.725 [{low:.3f}, {high:.3f}]" in lines["irp [1]"] and "-0.155" in lines["irp [1]"]
    assert "Student-t interval over seeds" in text and " ± " not in text
    assert "irp · a · b [1]" in lines and "not run" in lines["procrustes [2]"]
    assert "irp" in lines and "[" not in lines["irp"].split("|")[1]  # an entry without differs has no note
    assert text.rstrip().endswith("1. encoders at 128 px\n2. 5 head epochs")
    assert max(map(len, text.splitlines())) <= 160


def test_a_pair_heatmap_writes_each_cell_readably_on_its_colour():
    import numpy as np

    from relbench.pages import pair_heatmap

    M = np.array([[np.nan, 0.2], [0.9, np.nan]])
    fig = pair_heatmap(M, ["a", "b"], "t", scale=(0.0, 1.0))
    texts = {(t.get_position(), t.get_text()): t.get_color() for t in fig.axes[0].texts}
    assert texts == {((0, 0), "n/a"): "white", ((1, 0), "0.20"): "white", ((0, 1), "0.90"): "black",
                     ((1, 1), "n/a"): "white"}
    # a reversed scale is dark at its high end: the colours swap with it
    fig = pair_heatmap(M, ["a", "b"], "t", cmap="viridis_r", scale=(0.0, 1.0),
                       cell=lambda i, j, v: "—" if i == j else f"{v:.1f}")
    texts = {t.get_text(): t.get_color() for t in fig.axes[0].texts}
    assert texts == {"—": "white", "0.2": "black", "0.9": "white"}
    assert [fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel()] == ["target", "source"]


def test_pages_of_tasks_the_file_no_longer_has_are_removed_whichever_version_drew_them(tmp_path):
    from relbench.leaderboard import EARLIER_GENERATED, GENERATED, _remove_stale_pages

    pages = {"kept": GENERATED, "now": GENERATED, "before": EARLIER_GENERATED[0], "mine": "notes of the user's own"}
    for name, sentence in pages.items():
        (tmp_path / f"{name}.md").write_text(f"# {name}\n\n{sentence}\n")
    (tmp_path / "figures" / "before").mkdir(parents=True)
    _remove_stale_pages(tmp_path, {"kept"})
    assert sorted(p.stem for p in tmp_path.glob("*.md")) == ["kept", "mine"]
    assert not (tmp_path / "figures" / "before").exists()
    assert "relbench leaderboard" not in GENERATED  # the sentence names no command: run and publish draw pages too


def test_the_ranking_across_tasks_marks_what_its_pages_mark_and_is_computed_again_when_a_mark_changes(tmp_path):
    from relbench.leaderboard import _cross_task

    orders = {"t1": list("abc"), "t2": list("bca")}
    plain = _cross_task(tmp_path, orders, {}, None, redraw=False)
    marked = _cross_task(tmp_path, orders, {"b": ["‡", "reads both spaces"]}, plain, redraw=False)
    assert marked["digest"] != plain["digest"] and "| b ‡ " in marked["section"] and "| b " in plain["section"]
    assert "‡: reads both spaces." in marked["section"] and "‡" not in plain["section"]


def test_a_published_index_marks_in_its_ranking_across_tasks_what_the_pages_mark(registry, cli_main, write_yaml):
    path = _two_ranked_tasks(write_yaml, "similarities: [cosine, euclidean], stitchers: [relative, procrustes]")
    assert cli_main(["run", str(path), "-q"]) == 0
    across = (path.parent / "boards" / "README.md").read_text().split("## Methods across tasks")[1]
    rows = [line.split("|")[1].strip() for line in across.splitlines() if line.startswith("| random")]
    assert sorted(rows) == ["random · cosine · relative", "random · euclidean · relative", "random · procrustes ‡"]
    assert across.count("‡: **not zero-shot**") == 1
    # the tasks' lines mark a best combination the same way, and say once what the mark means
    index = (path.parent / "boards" / "README.md").read_text()
    lines = {line.split("|")[1].strip(): line.split("|")[3].strip() for line in index.splitlines()
             if line.startswith("| [")}
    assert set(lines) == {"[first](first.md)", "[second](second.md)"}
    assert set(lines.values()) == {"random · cosine · relative"}  # not marked: zero-shot
    assert "‡" not in index.split("## Tasks")[1].split("## Methods across tasks")[0]


def test_a_best_combination_the_kind_marks_is_marked_on_its_task_s_line(registry, cli_main, write_yaml):
    # the toy encoders are rotations of one space: the absolute stitcher fails, Procrustes undoes them
    path = _two_ranked_tasks(write_yaml, "similarities: [cosine], stitchers: [absolute, procrustes]")
    assert cli_main(["run", str(path), "-q"]) == 0
    index = (path.parent / "boards" / "README.md").read_text()
    lines = [line.split("|")[3].strip() for line in index.splitlines() if line.startswith("| [")]
    assert lines == ["random · procrustes ‡", "random · procrustes ‡"]
    tasks_part = index.split("## Tasks")[1]
    assert tasks_part.count("‡: **not zero-shot**") == 1  # its meaning, once under the tasks' lines
