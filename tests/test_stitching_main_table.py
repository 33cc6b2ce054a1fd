"""The stitching kind's main table in the leaderboard index: cells from the page's own
intervals, readable widths, and an aggregate over tasks whose interval, conditional on the
tasks, carries each task's own uncertainty through the draws its page keeps (checked
against SciPy's t-interval over seeds of the seeds' means over the tasks)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from relbench.pages import Page
from relbench_stitching import Stitching
from relbench_stitching import page as pages
from relbench_stitching.intervals import KEPT_DRAWS, pack_draws, unpack_draws
from relbench.uncertainty import t_draws
from relbench_stitching.main_table import (TIE, WIDTH, aggregate, cell_text, compact_seconds, ranks_of_draws, section,
                                           tasks_interval)

#: combination labels as long as the suite's
LABELS = ["parallel · robust-cosine · relative · topological", "random · robust-cosine · relative · topological",
          "stratified · robust-cosine · relative", "random · cosine-centred · relative", "random · procrustes",
          "random · wip · relative", "param · cosine · relative", "ood · irp", "random · affine",
          "random · vq-cosine · relative", "fps · cosine · relative", "random · l1 · relative"]


def _cells(scores: dict[str, float], views=("image",), metric="weighted_f1", tied=(), seconds=None) -> list[dict]:
    """A task's cells: ``scores`` by combination, ranked best first, interval ±0.01,
    the mean unit seconds of each combination from ``seconds`` (None where missing)."""
    ordered = sorted(scores, key=scores.get, reverse=True)
    return [{"method": m, "rank": i, "score": scores[m], "low": scores[m] - 0.01, "high": scores[m] + 0.012,
             "best": i == 1, "tie": i == 1 or m in tied, "metric": metric, "direction": "higher", "views": list(views),
             "seconds": (seconds or {}).get(m)}
            for i, m in enumerate(ordered, 1)]


def _row_of(text: str, method: str) -> list[str]:
    """The cells of ``method``'s row in the aggregate table of ``text``."""
    line = next(line for line in text.splitlines() if line.startswith(f"| {method} ") and "/" in line)
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_ten_tasks_of_twelve_combinations_fit_a_160_column_terminal():
    rng = np.random.default_rng(0)
    costs = dict(zip(LABELS, rng.uniform(1, 40_000, 12)))  # up to hours: the widest cost cells
    tasks = {f"dataset-{i}-cross-architecture-stitching": _cells(dict(zip(LABELS, rng.uniform(0.1, 0.99, 12))),
                                                                 seconds=costs)
             for i in range(10)}
    text = section(tasks)
    lines = text.splitlines()
    assert max(len(line) for line in lines if line.startswith("|")) < WIDTH
    assert sum(line.startswith("| combination") and line.rstrip("| ").endswith("cost") for line in lines) == 1
    # every task's column is there once, its header defined under the table and linked to its page
    headers = [cell.strip() for line in lines if line.startswith("| combination")
               for cell in line.strip("|").split("|")]
    assert sum(h.startswith("D") for h in headers) == 10
    assert all(f"({task}.md)" in text for task in tasks)
    assert sum(line.count("**.") for line in lines if line.startswith("|")) == 10  # one bold best per task


def test_a_cell_shows_the_larger_half_of_its_interval_and_marks_the_best_and_its_group():
    best, tie, other = _cells({"a": 0.8, "b": 0.795, "c": 0.6}, tied=("b",))
    assert cell_text(best) == "**.800**±.012"  # high - score is the larger side
    assert cell_text(tie) == f".795±.012{TIE}" and cell_text(other) == ".600±.012"
    assert cell_text({**other, "low": None, "high": None}) == ".600"  # no interval computed


def test_the_aggregate_interval_is_the_t_interval_over_seeds_of_the_seeds_means_over_the_tasks():
    # two tasks on the same five seeds, as their pages draw them (t_draws, same generator state):
    # the aggregate's interval is SciPy's t-interval over seeds of each seed's mean over the tasks,
    # not a bootstrap over two tasks (which drew one task twice half the time)
    rng = np.random.default_rng(3)
    per_seed = [rng.normal([0.7, 0.6], 0.02, size=(5, 2)) for _ in range(2)]  # per task: seeds × combinations
    draws = [t_draws(p, np.ones(5, bool), resamples=40 * KEPT_DRAWS) for p in per_seed]  # many: a tight check
    values = np.column_stack([p.mean(axis=0) for p in per_seed])  # combinations × tasks
    mean, low, high = tasks_interval(values, draws)
    across = (per_seed[0] + per_seed[1]) / 2  # each seed's mean over the tasks
    for column in range(2):
        expected = stats.ttest_1samp(across[:, column], 0).confidence_interval()
        half = (expected.high - expected.low) / 2
        assert mean[column] == pytest.approx(across[:, column].mean())
        assert (low[column], high[column]) == pytest.approx((expected.low, expected.high), abs=0.03 * half)
    # without draws no interval: the tasks alone are the design, not a sample to resample
    assert np.isnan(tasks_interval(values)[1]).all() and np.isnan(tasks_interval(values)[2]).all()


def test_the_aggregate_is_the_mean_score_and_rank_over_the_tasks_with_their_intervals():
    scores = [{"a": 0.9, "b": 0.7, "c": 0.5, "lucky": 0.95}, {"a": 0.6, "b": 0.8, "c": 0.4}, {"a": 0.7, "b": 0.5,
                                                                                            "c": 0.3}]
    tasks = {f"t{i}": _cells(s) for i, s in enumerate(scores)}
    found = aggregate(tasks)
    assert set(found) == {"a", "b", "c"}  # "lucky" was measured on one task of three: no aggregate
    ranks = {"a": [1, 2, 1], "b": [2, 1, 2], "c": [3, 3, 3]}  # among a, b, c only: "lucky" does not push a down
    for method in found:  # cells without draws: the means, no interval
        assert found[method]["score"][0] == pytest.approx(np.mean([s[method] for s in scores]))
        assert found[method]["rank"][0] == pytest.approx(np.mean(ranks[method]))
        assert np.isnan(found[method]["score"][1:]).all() and np.isnan(found[method]["rank"][1:]).all()
    assert _row_of(section(tasks), "lucky")[-4:] == ["1/3", "", "", ""]
    # different metrics: ranks are still averaged, scores are not
    mixed = {**tasks, "t2": _cells(scores[2], metric="accuracy")}
    assert aggregate(mixed)["a"]["score"] is None
    np.testing.assert_equal(aggregate(mixed)["a"]["rank"], found["a"]["rank"])
    assert aggregate({"t0": tasks["t0"]}) == {}  # one task: its cells are the aggregate
    alone = aggregate({"t0": _cells({"a": 0.9, "b": 0.8}), "t1": _cells({"a": 0.7, "c": 0.6})})
    assert list(alone) == ["a"] and alone["a"]["rank"] is None  # first among itself: no rank


def test_tasks_of_one_view_and_of_several_get_their_own_tables():
    tasks = {"images": _cells({"a": 0.9, "b": 0.8}), "more-images": _cells({"a": 0.7, "b": 0.6}),
             "languages": _cells({"a": 0.5, "c": 0.4}, views=("en", "es"))}
    text = section(tasks)
    one, several = text.index("### Encoders of the same inputs"), text.index("### Encoders of different views")
    assert one < text.index("[images](images.md)") < several < text.index("[languages](languages.md)")
    assert "mean rank" in text[one:several] and "mean rank" not in text[several:]  # one task: no aggregate
    assert section({"t": []}) is None


def _rows() -> pd.DataFrame:
    base = {"kind": "stitching", "metric": "accuracy", "direction": "higher", "status": "ok", "regularizer": "-",
            "extra": {}, "selector": "random"}
    rows = []
    # per seed: cosine and l1 swap places (indistinguishable), absolute is far behind
    for stitcher, similarity, levels in (("relative", "cosine", (0.8, 0.82)), ("relative", "l1", (0.81, 0.79)),
                                         ("absolute", "-", (0.3, 0.32))):
        for seed, level in enumerate(levels):
            for source, target in (("a", "b"), ("b", "a"), ("a", "a"), ("b", "b")):
                rows.append({**base, "stitcher": stitcher, "similarity": similarity, "seed": seed, "source": source,
                             "target": target, "value": level + 0.01 * (source == "a")})
    return pd.DataFrame(rows)


def test_the_kind_hands_over_the_page_s_scores_without_computing_them_again(tmp_path, monkeypatch):
    df = _rows()
    calls = []
    score = pages.score
    monkeypatch.setattr(pages, "score", lambda *a: calls.append(1) or score(*a))
    kind, page = Stitching(), Page(tmp_path, "t")
    body = kind.page(df, page)
    cells = kind.index_cells(df, page)
    assert len(calls) == 1  # the page's scores, not a second bootstrap
    assert [c["method"] for c in cells] == pages.ranking(df)  # the page's order
    top = page.headline
    assert (cells[0]["score"], cells[0]["low"], cells[0]["high"]) == (top["score"], *top["interval"])
    assert [c["tie"] for c in cells] == [True, True, False] and cells[0]["best"]  # the page's bold group
    assert body.count("| **") == 2  # the same two rows are bold on the page
    assert kind.index_cells(df.copy(), page) == cells and len(calls) == 2  # other rows: computed for them


def test_the_aggregate_is_over_the_tasks_that_share_the_grid_and_studies_drop_out():
    from relbench_stitching.main_table import common_tasks

    grid = {m: 0.5 + 0.01 * i for i, m in enumerate("abcdefgh")}
    tasks = {f"core-{i}": _cells(grid) for i in range(4)}
    tasks["study"] = _cells({"a": 0.9, "x": 0.8, "y": 0.7})  # a specialised study shares one combination
    assert common_tasks(tasks) == ["core-0", "core-1", "core-2", "core-3"]  # 4 × 8 cells beat 5 × 1
    assert set(aggregate(tasks)) == set("abcdefgh")
    text = section(tasks)
    assert "Aggregated over the 4 tasks that share the most combinations (C0, C1, C2, C3; the others measured " \
           "fewer of them)" in text


def test_references_are_shown_after_the_methods_unranked_and_outside_the_aggregate():
    cells = {t: _cells({"a": 0.8, "b": 0.7}) for t in ("t0", "t1")}
    for t in cells:
        cells[t].append({"method": "absolute (reference)", "reference": True, "rank": None, "score": 0.3,
                         "low": None, "high": None, "best": False, "tie": False, "metric": "weighted_f1",
                         "direction": "higher", "views": ["image"]})
    assert set(aggregate(cells)) == {"a", "b"}
    rows = [line.split("|")[1].strip() for line in section(cells).splitlines() if line.startswith("| ")]
    assert rows[-1] == "absolute (reference)" and rows.index("absolute (reference)") > rows.index("b")
    line = next(line for line in section(cells).splitlines() if line.startswith("| absolute (reference)"))
    assert ".300" in line and "**" not in line and TIE not in line


def test_durations_are_compact():
    assert [compact_seconds(s) for s in (0.42, 9.96, 12.4, 59.7, 204, 600, 7200, 36_000)] == \
        ["0.4 s", "10 s", "12 s", "60 s", "3.4 min", "10 min", "2.0 h", "10 h"]
    assert compact_seconds(None) == ""


def test_the_cost_is_the_median_over_the_common_tasks_of_each_combination_s_unit_seconds():
    scores = {"a": 0.9, "b": 0.7}
    tasks = {"t0": _cells(scores, seconds={"a": 10.0, "b": 100.0}), "t1": _cells(scores, seconds={"a": 30.0}),
             "t2": _cells(scores, seconds={"a": 14.0, "b": 300.0}),
             "study": _cells({"a": 0.5, "x": 0.4}, seconds={"a": 1e6})}  # outside the common set
    found = aggregate(tasks)
    assert found["a"]["seconds"] == 14.0 and found["b"]["seconds"] == 200.0  # b's unknown cost on t1 is left out
    text = section(tasks)
    assert _row_of(text, "a")[-2:] == ["1.0", "14 s"] and _row_of(text, "b")[-1] == "3.3 min"
    assert _row_of(text, "x")[-4:] == ["1/4", "", "", ""]  # not aggregated: no cost
    header = next(line for line in text.splitlines() if line.startswith("| combination"))
    headers = [cell.strip() for cell in header.strip("|").split("|")]
    assert headers[-4:] == ["tasks", "mean weighted_f1 ↑", "mean rank", "cost"]
    assert "*cost*: for the aggregated combinations, the median over the same tasks" in text


def test_rows_without_seconds_give_an_empty_cost():
    tasks = {f"t{i}": _cells({"a": 0.9, "b": 0.7}) for i in range(2)}
    assert aggregate(tasks)["a"]["seconds"] is None
    for cells in tasks.values():  # cells recorded before costs were: no key at all
        for cell in cells:
            del cell["seconds"]
    assert aggregate(tasks)["a"]["seconds"] is None and _row_of(section(tasks), "a")[-1] == ""


def test_a_combination_s_cost_is_the_mean_over_its_units_each_unit_counted_once(tmp_path):
    df = _rows()
    df["unit"] = [f"{r.stitcher}/{r.similarity}/{r.seed}/{r.target}" for r in df.itertuples()]
    units = list(pd.unique(df["unit"]))
    df["seconds"] = df["unit"].map({unit: 10.0 * (i + 1) for i, unit in enumerate(units)})
    df.loc[df["unit"] == units[4], "seconds"] = np.nan  # an l1 unit whose time is unknown: left out
    diagnostics = df[df["unit"] == units[0]].assign(metric="condition", direction="lower")
    df = pd.concat([df, diagnostics, diagnostics.assign(metric="residual")], ignore_index=True)  # more rows, one unit
    cells = Stitching().index_cells(df, Page(tmp_path, "t"))
    # cosine: units of 10, 20, 30, 40 s (per row, the first unit's extra rows would pull it to 20 s); l1: its
    # unit of unknown time left out; absolute: 90 to 120 s
    assert {c["method"]: c["seconds"] for c in cells} == pytest.approx(
        {"random · cosine · relative": 25.0, "random · l1 · relative": 70.0, "random · absolute": 105.0})
    assert all(c["seconds"] is None for c in Stitching().index_cells(_rows(), Page(tmp_path, "u")))  # old rows


def _with_draws(cells: list[dict], draws: dict[str, np.ndarray]) -> list[dict]:
    """``cells`` keeping ``draws`` (by combination) as a page keeps them."""
    return [{**c, "draws": pack_draws(draws[c["method"]])} for c in cells]


CONDITIONAL = "a 95 % interval conditional on these tasks"
NO_INTERVAL = "no interval: some of these tasks' cells keep no draws"


def test_draws_without_spread_give_no_spread_and_no_draws_give_no_interval():
    # scores a float32 holds exactly (draws are kept as float32)
    scores = [{"a": 0.875, "b": 0.625, "c": 0.5}, {"a": 0.5625, "b": 0.75, "c": 0.375},
              {"a": 0.6875, "b": 0.4375, "c": 0.25}]
    plain = {f"t{i}": _cells(s) for i, s in enumerate(scores)}
    flat = {t: _with_draws(cells, {m: np.full(KEPT_DRAWS, v) for m, v in scores[i].items()})
            for i, (t, cells) in enumerate(plain.items())}
    without, conditional = aggregate(plain), aggregate(flat)
    for method in "abc":
        mean = np.mean([s[method] for s in scores])
        assert conditional[method]["score"] == pytest.approx((mean, mean, mean))  # the tasks are fixed: no spread
        assert without[method]["score"][0] == pytest.approx(mean) and np.isnan(without[method]["score"][1:]).all()
        assert conditional[method]["intervals"] and not without[method]["intervals"]
    assert CONDITIONAL in section(flat) and NO_INTERVAL in section(plain)
    assert _row_of(section(plain), "a")[-3].count("±") == 0  # the mean alone


def test_spread_within_a_task_widens_the_interval_that_tasks_alone_give():
    rng = np.random.default_rng(1)
    values = np.array([[0.7], [0.5]])  # 2 combinations × 1 task
    draws = values[:, 0] + rng.normal(0, 0.05, size=(KEPT_DRAWS, 2))
    _, low, high = tasks_interval(values, [draws])
    assert np.all(high - low == pytest.approx(2 * 1.96 * 0.05, rel=0.15))  # the draws' own 95 % interval
    assert np.all(low < values[:, 0]) and np.all(values[:, 0] < high)
    # in the aggregate: two tasks of the same scores, each with spread of its own
    same = {"a": 0.7, "b": 0.5}
    tasks = {t: _with_draws(_cells(same), {m: v + rng.normal(0, 0.05, KEPT_DRAWS) for m, v in same.items()})
             for t in ("t0", "t1")}
    _, low, high = aggregate({t: _cells(same) for t in tasks})["a"]["score"]
    assert np.isnan([low, high]).all()
    mean, low, high = aggregate(tasks)["a"]["score"]
    assert mean == pytest.approx(0.7) and high - low == pytest.approx(2 * 1.96 * 0.05 / np.sqrt(2), rel=0.15)


def test_combinations_stay_paired_within_a_task_s_draws():
    rng = np.random.default_rng(2)
    scores = {"a": 0.62, "b": 0.6}
    noise = [rng.normal(0, 0.2, KEPT_DRAWS) for _ in range(3)]  # much wider than the gap
    paired = {f"t{i}": _with_draws(_cells(scores), {"a": e + 0.62, "b": e + 0.6}) for i, e in enumerate(noise)}
    found = aggregate(paired)
    assert found["a"]["rank"] == (1.0, 1.0, 1.0) and found["b"]["rank"] == (2.0, 2.0, 2.0)  # a ahead in every draw
    low, high = found["a"]["score"][1:]
    assert high - low > 0.2  # while each score alone varies widely
    # the same spread unpaired: the order changes from draw to draw
    unpaired = {t: _with_draws(_cells(scores), {"a": e + 0.62, "b": rng.permutation(e) + 0.6})
                for t, e in zip(paired, noise)}
    assert aggregate(unpaired)["a"]["rank"][2] > 1.0


def test_ranks_in_a_draw_follow_the_page_s_order_coverage_then_direction_then_position():
    cells = {"full": {"rank": 1, "coverage": 1.0, "direction": "lower"},
             "tied": {"rank": 2, "coverage": 1.0, "direction": "lower"},
             "half": {"rank": 3, "coverage": 0.5, "direction": "lower"}}
    draws = np.array([[0.3, 0.2, 0.1],  # lower is better: tied first; half last whatever it scores
                      [0.2, 0.2, 0.1]])  # equal scores: the page's order
    assert ranks_of_draws(draws, cells, ["full", "tied", "half"]).tolist() == [[2, 1, 3], [1, 2, 3]]


def test_tasks_whose_cells_keep_no_draws_give_no_interval_and_say_so():
    scores = {"a": 0.9, "b": 0.7}
    tasks = {"t0": _with_draws(_cells(scores), {m: np.full(KEPT_DRAWS, v) for m, v in scores.items()}),
             "t1": _cells(scores)}  # drawn before cells kept draws (an older manifest)
    assert not aggregate(tasks)["a"]["intervals"]
    text = section(tasks)
    assert NO_INTERVAL in text and CONDITIONAL not in text
    tasks["t1"] = _with_draws(tasks["t1"], {"a": np.full(KEPT_DRAWS, np.nan), "b": np.full(KEPT_DRAWS, 0.7)})
    assert not aggregate(tasks)["a"]["intervals"]  # no draw where every combination is finite
    # a draw not finite in one task is left out of every task's (draw b stays draw b)
    some = np.full(KEPT_DRAWS, 0.9)
    some[:10] = np.nan
    tasks["t1"] = _with_draws(_cells(scores), {"a": some, "b": np.full(KEPT_DRAWS, 0.7)})
    found = aggregate(tasks)["a"]
    assert found["intervals"] and found["score"] == pytest.approx((0.9, 0.9, 0.9)) and found["rank"][1] == 1.0


def test_a_page_s_cells_keep_its_paired_draws_of_the_stitched_score(tmp_path):
    df = _rows()
    kind, page = Stitching(), Page(tmp_path, "t")
    kind.page(df, page)
    cells = kind.index_cells(df, page)
    scored = kind._drawn[1]
    ranked = [c for c in cells if not c.get("reference")]
    assert len(ranked) == len(scored.methods) == 3
    for cell, combo in zip(ranked, scored.methods[pages.COMBO].itertuples(index=False)):
        kept = unpack_draws(cell["draws"])
        column = scored.draws.draws[:KEPT_DRAWS, scored.draws.column(" · ".join(map(str, combo)) + " | stitched")]
        assert np.array_equal(kept, column.astype(np.float32)) and cell["coverage"] == 1.0  # paired: resample b
        # no per-sample data: the cell's interval is the Student-t one, its draws paired t-draws that agree
        # with it up to their noise
        width = cell["high"] - cell["low"]
        assert np.percentile(kept, [2.5, 97.5]) == pytest.approx([cell["low"], cell["high"]], abs=0.1 * width)


def test_cells_with_draws_round_trip_through_the_manifest_and_an_unchanged_index_is_not_drawn_again(
        registry, write_yaml):
    import json

    from relbench.config import load_suite
    from relbench.leaderboard import MANIFEST, render
    from relbench.runner import Runner

    task = """\
  - name: {name}
    dataset: {{name: toy-blobs, params: {{classes: 4, train_size: 240}}}}
    encoders:
      - {{name: toy-rotated, label: a, params: {{seed: 1}}}}
      - {{name: toy-rotated, label: b, params: {{seed: {seed}, scale: 3.0}}}}
    grid:
      selectors: [random]
      similarities: [cosine]
      stitchers: [{{name: relative, label: rel, params: {{epochs: 2}}}}, {{name: absolute, label: abs, params: \
{{epochs: 2}}}}]
    metrics: [accuracy]
"""
    path = write_yaml("suite:\n  seeds: [0, 1]\n  num_anchors: 16\n  output: results\n  leaderboards: boards\n"
                      "tasks:\n" + task.format(name="blobs", seed=2) + task.format(name="more-blobs", seed=3))
    runner = Runner(load_suite(path, registry), registry, quiet=True)
    runner.run()
    boards = path.parent / "boards"

    def draw():
        plans = runner.plans()
        return render(runner.store, boards, [tr.task for tr in plans],
                      {tr.task.name: [u.id for u in tr.plan().units] for tr in plans})

    assert {p.name for p in draw()} == {"README.md", "blobs.md", "more-blobs.md"}
    index = (boards / "README.md").read_text()
    manifest = json.loads((boards / MANIFEST).read_text())
    cells = {name: manifest[name]["cells"] for name in ("blobs", "more-blobs")}
    assert all(len(unpack_draws(c["draws"])) == KEPT_DRAWS for task in cells.values() for c in task
               if not c.get("reference"))
    # the manifest's cells give the index
    assert CONDITIONAL in index and Stitching.cross_kind_section(cells, {}) in index
    assert draw() == [] and (boards / "README.md").read_text() == index  # nothing changed: nothing drawn


def test_a_combination_that_needs_both_spaces_is_marked_not_zero_shot(tmp_path):
    """Procrustes fits its map on both spaces' anchors: its page lists it as needing
    both spaces, its index cell says so, and the main table marks its row (on every
    table of its group) and says what the mark means; zero-shot rows stay unmarked."""
    from relbench_stitching.main_table import BOTH_SPACES

    df = _rows()
    both = df[df["stitcher"] == "absolute"].assign(stitcher="procrustes", value=lambda d: d["value"] + 0.55,
                                                   role="method", needs_both_spaces=True)  # as the kind writes them
    df = pd.concat([df, both], ignore_index=True)
    kind, page = Stitching(), Page(tmp_path, "t")
    body = kind.page(df, page)
    assert "need both spaces at fit time" in body and "random · procrustes" in body.split("need both spaces")[1]
    cells = {c["method"]: c for c in kind.index_cells(df, page) if not c.get("reference")}
    assert cells["random · procrustes"]["both_spaces"] and cells["random · procrustes"]["best"]
    assert not cells["random · cosine · relative"]["both_spaces"] and not cells["random · l1 · relative"]["both_spaces"]
    text = section({"first-task": list(cells.values()), "second-task": list(cells.values())})
    rows = [line for line in text.splitlines() if line.startswith("| random")]
    assert rows and all((f"procrustes {BOTH_SPACES} " in row) == ("procrustes" in row) for row in rows)
    assert all(BOTH_SPACES not in row for row in rows if "relative" in row)
    assert text.startswith("## Main table: stitching\n") and f"{BOTH_SPACES}: **not zero-shot**" in text
    # the index's ranking across tasks marks the same combinations, and says what the mark means
    assert {label: mark for label, (mark, _) in kind.ranking_marks(df).items()} == {"random · procrustes": BOTH_SPACES}
    assert "not zero-shot" in kind.ranking_marks(df)["random · procrustes"][1] and not kind.ranking_marks(_rows())
