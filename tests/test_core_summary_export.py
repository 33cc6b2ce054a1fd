"""``relbench export --summary``: one row per page cell with the page's own numbers, in
typed columns that the kinds declare; and ``--release``, the shipped release's rows."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from typing import ClassVar

import pandas as pd
import pytest

from relbench.interfaces import Axis, TaskKind
from relbench.summary import CELL_COLUMNS, method_columns, revisions

TASK = """\
suite:
  seeds: [0, 1]
  num_anchors: 3
  output: results
  leaderboards: boards
tasks:
  - name: blobs
    dataset: {name: toy-blobs, params: {classes: 8, train_size: 240}}
    encoders:
      - {name: toy-rotated, label: a, params: {seed: 1}}
      - {name: toy-rotated, label: b, params: {seed: 2, scale: 3.0}}
    grid:
      selectors: [random]
      similarities: [cosine, euclidean]
      stitchers: [{name: relative, label: rel, params: {epochs: 1}}, {name: absolute, label: abs, params: {epochs: 1}},
                  non-stitched]
    metrics: [accuracy, macro_f1]
"""


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """A toy stitching task run once, its pages drawn: the tasks file's path."""
    import toy_plugins

    from relbench import cli
    from relbench.plugins import Registry, _discover

    registry = Registry(_discover() + [("toy", toy_plugins, "tests 0")])
    folder = tmp_path_factory.mktemp("summary")
    path = folder / "tasks.yaml"
    path.write_text(TASK)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("relbench.plugins.load_registry", lambda *args, **kwargs: registry)
        assert cli.main(["run", str(path), "-q"]) == 0
    return path


def _export(cli_main, path, *args: str, fmt: str = "parquet", name: str = "summary") -> pd.DataFrame:
    out = path.parent / f"{name}.{fmt}"
    assert cli_main(["export", str(path), "--format", fmt, "--to", str(out), *args]) == 0
    return {"parquet": pd.read_parquet, "csv": pd.read_csv,
            "jsonl": lambda p: pd.read_json(p, lines=True, precise_float=True)}[fmt](out)


def _page_cells(path) -> list[dict]:
    """The index cells the page drawing recorded (the page's own numbers, unrounded)."""
    manifest = json.loads((path.parent / "boards" / ".pages.json").read_text())
    return manifest["blobs"]["cells"]


def test_the_summary_has_the_kind_s_method_columns_typed_and_one_row_per_page_cell(cli_main, suite):
    df = _export(cli_main, suite, "--summary")
    assert list(df.columns[:2 + 4 + len(CELL_COLUMNS)]) == ["task", "kind", "selector", "similarity", "stitcher",
                                                            "regularizer", *CELL_COLUMNS]
    assert df.columns[-1] == "revision" and "method" not in df
    assert set(df["task"]) == {"blobs"} and set(df["kind"]) == {"stitching"}
    assert set(df["stitcher"]) == {"rel", "abs", "non-stitched"} and df["regularizer"].isna().all()
    assert df["n"].dtype == "Int64" and (df["n"] == 2).all() and df["rank"].dtype == "Int64"
    assert df["tie_group"].dtype == "boolean" and df["score"].dtype == "Float64"
    assert set(df["metric"]) == {"accuracy", "macro_f1"}
    # per metric: the two rel combinations and abs have a stitched and an own score, non-stitched an own one only
    assert len(df) == 2 * 7 and set(df[df["stitcher"] == "non-stitched"]["measure"]) == {"own"}
    assert df[df["stitcher"] == "abs"][["selector", "similarity"]].isna().all().all()  # not part of it: missing
    ranked = df[df["tie_group"].notna()]
    assert set(ranked["metric"]) == {"accuracy"} and set(ranked["measure"]) == {"stitched"}
    assert ranked["rank"].tolist() == [1, 2] and ranked["tie_group"].iloc[0]
    assert not ranked["reference"].any() and df[df["stitcher"] != "rel"]["reference"].all()


def test_the_summary_s_numbers_are_the_page_s(cli_main, suite):
    df = _export(cli_main, suite, "--summary")
    assert cli_main(["leaderboard", str(suite)]) == 0
    cells = {c["method"]: c for c in _page_cells(suite) if not c.get("reference")}
    ranked = df[df["rank"].notna()]
    assert len(ranked) == len(cells) == 2
    page = (suite.parent / "boards" / "blobs.md").read_text()
    for _, row in ranked.iterrows():
        cell = cells[f"random · {row['similarity']} · rel"]
        assert (row["score"], row["low"], row["high"]) == (cell["score"], cell["low"], cell["high"])  # exactly
        assert bool(row["tie_group"]) == (cell["tie"] or cell["best"])
        shown = f"{row['score']:.3f} [{row['low']:.3f}, {row['high']:.3f}]"
        line = next(line for line in page.splitlines() if line.startswith(f"| {row['rank']} "))
        assert (f"**{shown}**" if row["tie_group"] else shown) in line
    own = df[(df["measure"] == "own") & (df["metric"] == "accuracy") & (df["stitcher"] == "rel")].iloc[0]
    assert f"{own['score']:.3f} [{own['low']:.3f}, {own['high']:.3f}]" in page


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_the_summary_in_other_formats_holds_the_same_cells(cli_main, suite, fmt):
    base = _export(cli_main, suite, "--summary")
    other = _export(cli_main, suite, "--summary", fmt=fmt, name=f"summary-{fmt}")
    assert list(other.columns) == list(base.columns) and len(other) == len(base)
    exact = 1e-12 if fmt == "csv" else 0  # JSON lines hold every float exactly
    assert other["score"].tolist() == pytest.approx(base["score"].astype(float).tolist(), abs=exact)


def test_the_release_s_summary_is_the_store_s_and_its_rows_export_without_a_store(cli_main, suite, tmp_path):
    assert cli_main(["leaderboard", str(suite)]) == 0
    release = suite.parent / "boards" / "results.parquet"
    from_store = _export(cli_main, suite, "--summary")
    from_release = _export(cli_main, suite, "--summary", "--release", str(release), "--output", str(tmp_path))
    assert from_release.drop(columns="revision").equals(from_store.drop(columns="revision"))
    rows = _export(cli_main, suite, "--release", str(release), name="rows")
    assert len(rows) == len(pd.read_parquet(release))
    assert set(rows["task"]) == {"blobs"}


def test_an_empty_store_names_the_shipped_release(cli_main, suite, tmp_path, capsys):
    tasks = tmp_path / "tasks.yaml"  # outside a checkout: its release is leaderboards/ beside it
    shutil.copy(suite, tasks)
    assert cli_main(["export", str(tasks)]) == 2
    assert "--release" not in capsys.readouterr().err  # no release there to offer
    assert cli_main(["leaderboard", str(suite)]) == 0
    (tmp_path / "leaderboards").mkdir()
    shutil.copy(suite.parent / "boards" / "results.parquet", tmp_path / "leaderboards" / "results.parquet")
    assert cli_main(["export", str(tasks)]) == 2
    err = capsys.readouterr().err
    assert "No stored results" in err and f"relbench export {tasks} --release" in err
    assert cli_main(["export", str(tasks), "--release", "--summary"]) == 0
    assert (tmp_path / "results" / "summary.parquet").is_file()


def test_all_does_not_go_with_the_summary_or_a_release(cli_main, suite, capsys):
    assert cli_main(["export", str(suite), "--summary", "--all"]) == 2
    assert cli_main(["export", str(suite), "--release", "--all"]) == 2
    assert "--all" in capsys.readouterr().err


@dataclass
class _Declared(TaskKind):
    """A kind with a grid of selectors and regularizers, one of them a column."""

    name: ClassVar[str] = "toy-declared-axes"
    columns: ClassVar[tuple[str, ...]] = ("selector", "source")
    axes: ClassVar[dict[str, Axis]] = {"selectors": Axis("selector"), "regularizers": Axis("regularizer")}

    def plan(self, task):
        return []

    def run(self, run):
        return None

    def page(self, results, page):
        return ""


def test_method_columns_are_the_axes_that_are_columns_and_kinds_give_seed_means_by_default():
    assert method_columns(_Declared) == ["selector"]
    assert _Declared().summary_cells(pd.DataFrame(), None) is None  # no rows, no cells
    rows = pd.DataFrame({"selector": ["r", "r", "r", "r", "f", "f"], "source": ["a"] * 6,
                         "seed": [0, 0, 1, 2, 0, 1], "metric": ["acc"] * 6, "value": [0.2, 0.4, 0.5, float("nan"), 1, 2],
                         "direction": ["higher"] * 6, "status": ["ok"] * 5 + ["failed"]})
    cells = _Declared().summary_cells(rows, None)
    assert [(c["selector"], c["score"], c["n"]) for c in cells] == [("r", pytest.approx(0.4), 2), ("f", 1.0, 1)]
    assert cells[0]["measure"] == "mean over seeds" and cells[0]["direction"] == "higher"


def test_a_cell_s_revisions_are_those_of_its_combination_and_metric():
    rows = pd.DataFrame({"selector": ["r", "r", "f", "r"], "regularizer": [None, None, None, "x"],
                         "metric": ["acc", "acc", "acc", "acc"], "git": ["b", "a", "c", "d"]})
    assert revisions(rows, {"selector": "r", "regularizer": None, "metric": "acc"}, ["selector", "regularizer"]) \
        == "a, b"
    assert revisions(rows, {"selector": "r", "regularizer": None, "metric": "f1"}, ["selector"]) is None
