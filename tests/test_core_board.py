"""The interactive board (``relbench leaderboard --html DIR``): its embedded data are the
rows of ``relbench export --summary``, its matrices the kind's, every label is text
(never markup), and a release ships it as ``site/``."""

from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest

from relbench import board
from relbench.board import TaskBoard

TASK = """\
suite:
  seeds: [0, 1]
  num_anchors: 3
  output: results
  leaderboards: boards
tasks:
  - name: blobs
    dataset: {name: toy-blobs, params: {classes: 6, train_size: 200}}
    encoders:
      - {name: toy-rotated, label: a, params: {seed: 1}}
      - {name: toy-rotated, label: b, params: {seed: 2, scale: 3.0}}
      - {name: toy-rotated, label: c, params: {seed: 3}}
    grid:
      selectors: [random]
      similarities: [cosine]
      stitchers: [{name: relative, label: rel, params: {epochs: 1}}, {name: absolute, label: abs, params: {epochs: 1}}]
    metrics: [accuracy, macro_f1]
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A toy stitching task run once, its summary exported and its board written:
    ``(tasks file, summary rows, board folder)``."""
    import toy_plugins

    from relbench import cli
    from relbench.plugins import Registry, _discover

    registry = Registry(_discover() + [("toy", toy_plugins, "tests 0")])
    folder = tmp_path_factory.mktemp("board")
    path = folder / "tasks.yaml"
    path.write_text(TASK)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("relbench.plugins.load_registry", lambda *args, **kwargs: registry)
        assert cli.main(["run", str(path), "-q"]) == 0
        assert cli.main(["export", str(path), "--summary", "--to", str(folder / "summary.parquet")]) == 0
        assert cli.main(["leaderboard", str(path), "--html", str(folder / "site")]) == 0
    return path, pd.read_parquet(folder / "summary.parquet"), folder / "site"


def embedded(page) -> dict:
    """The JSON a board page embeds."""
    found = re.search(r'<script type="application/json" id="board-data">(.*?)</script>', page.read_text(), re.S)
    return json.loads(found.group(1))


def same(a, b) -> bool:
    """Equal values, missing ones (None, NaN, pandas' NA) equal to each other."""
    missing = [x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA for x in (a, b)]
    return all(missing) if any(missing) else a == b


def test_the_main_table_embeds_exactly_the_summary_export_s_rows(site):
    _, summary, folder = site
    data = embedded(folder / "index.html")
    assert {"index.html", "blobs.html", "board.js", "board.css"} <= {p.name for p in folder.iterdir()}
    assert len(data["rows"]) == len(summary) > 0
    for row, expected in zip(data["rows"], summary.to_dict("records")):
        assert set(row) == {*expected, "modality"}
        assert all(same(row[key], value) for key, value in expected.items()), (row, expected)
        assert row["modality"] == "vector"  # toy-blobs declares one view, of modality "vector"
    assert data["filters"] == ["modality", "kind", "metric", "selector", "similarity", "stitcher", "regularizer"]
    assert "revision" not in data["columns"] and {"score", "low", "high", "n"} <= set(data["numeric"])


def test_a_task_page_holds_one_matrix_cell_per_combination_and_pair_with_interval_and_seeds(site):
    _, summary, folder = site
    data = embedded(folder / "blobs.html")
    assert data["matrix"]["axes"] == ["source", "target"] and data["views"] == list(board.TASK_VIEWS)
    assert data["matrix"]["labels"] == ["selector", "similarity", "stitcher", "regularizer", "metric"]
    cells = pd.DataFrame(data["matrix"]["cells"])
    assert set(cells["stitcher"]) == {"rel", "abs"} and set(cells["metric"]) == {"accuracy"}
    assert len(cells) == 2 * 3 * 3 and (cells["n"] == 2).all()
    assert ((cells["low"] <= cells["score"] + 1e-9) & (cells["score"] <= cells["high"] + 1e-9)).all()
    # the mean of a combination's off-diagonal cells is the page's stitched score (mean over pairs and seeds)
    stitched = summary[(summary["measure"] == "stitched") & (summary["metric"] == "accuracy")]
    for stitcher, score in zip(stitched["stitcher"], stitched["score"]):
        mine = cells[(cells["stitcher"] == stitcher) & (cells["source"] != cells["target"])]
        assert mine["score"].mean() == pytest.approx(score)


HOSTILE = '</script><script>window.hacked = 1</script><img src=x onerror="alert(1)">'


def _hostile_board() -> TaskBoard:
    summary = pd.DataFrame({"task": ["t"], "kind": ["k"], "stitcher": [HOSTILE], "metric": ["m & <b>"],
                            "score": [0.5], "low": [None], "high": [None], "n": [2], "tie_group": [None]})
    return TaskBoard("t", "k", "text", summary, ["stitcher"])


def test_hostile_labels_are_escaped_in_the_embedded_json_and_the_title(tmp_path):
    board.write(tmp_path, [_hostile_board()])
    for page in ("index.html", "t.html"):
        text = (tmp_path / page).read_text()
        assert HOSTILE not in text and "<script>window.hacked" not in text and "<b>" not in text
        assert text.count("</script>") == 2  # the data block's and board.js's: no label closes a block
        assert embedded(tmp_path / page)["rows"][0]["stitcher"] == HOSTILE  # the label itself is kept, as text
    title = board.document({"title": HOSTILE, "views": [], "rows": []}, home=True)
    assert "<title>&lt;/script&gt;&lt;script&gt;" in title and HOSTILE not in title


def test_the_script_draws_with_text_nodes_only():
    script = (board.Path(board.__file__).with_name("board.js")).read_text()
    assert "innerHTML" not in script and "outerHTML" not in script and "insertAdjacentHTML" not in script
    assert "eval(" not in script and "document.write" not in script


def test_a_stale_board_page_is_removed_and_a_foreign_file_kept(tmp_path):
    board.write(tmp_path, [_hostile_board(), TaskBoard("gone", "k", "text", None)])
    (tmp_path / "notes.html").write_text("<p>mine</p>")
    board.write(tmp_path, [_hostile_board()])
    assert not (tmp_path / "gone.html").exists() and (tmp_path / "notes.html").exists()


def test_the_modality_is_the_data_set_s_declared_view_modalities_or_said_unknown():
    from relbench.errors import MissingAsset

    class Data:
        view_modalities = {"image": "image", "en": "text", "fr": "text"}

    def missing():
        raise MissingAsset("pip install something")

    assert board.data_modality(lambda: Data()) == "image+text"
    assert board.data_modality(missing) == board.UNKNOWN


def _close(mine: list[dict], theirs: list[dict]) -> bool:
    """The same cells, numbers equal up to the last bits (a release's table sums in another order)."""
    def rounded(cells):
        return [{k: round(v, 9) if isinstance(v, float) else v for k, v in c.items()} for c in cells]
    return rounded(mine) == rounded(theirs)


def test_the_board_from_the_release_table_equals_the_board_from_the_store(site, cli_main, tmp_path):
    path, _, folder = site
    release = path.parent / "boards" / "results.parquet"
    assert cli_main(["leaderboard", str(path), "--html", str(tmp_path / "r"), "--release", str(release)]) == 0
    for page in ("index.html", "blobs.html"):
        assert _close(embedded(tmp_path / "r" / page)["rows"], embedded(folder / page)["rows"])
    mine, theirs = (embedded(f / "blobs.html")["matrix"]["cells"] for f in (tmp_path / "r", folder))
    assert _close(mine, theirs)


def test_release_without_html_is_refused(site, cli_main, capsys):
    path, _, _ = site
    assert cli_main(["leaderboard", str(path), "--release"]) == 2
    assert "--html DIR" in capsys.readouterr().err


def test_publish_ships_the_board_in_the_release_folder(cli_main, write_yaml, monkeypatch, tmp_path):
    from test_core_publish import TWO_TASKS, _git

    from relbench.publish import SITE

    monkeypatch.setattr("relbench.unit_store.git_revision", lambda: "abc1234")
    path = write_yaml(TWO_TASKS.format(output="results", boards="results/boards"))
    (tmp_path / ".gitignore").write_text("results/\ncache/\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "tasks.yaml", ".gitignore")
    _git(tmp_path, "commit", "-qm", "tasks")
    assert cli_main(["run", str(path), "-q"]) == 0
    assert cli_main(["publish", str(path)]) == 0
    site = tmp_path / "leaderboards" / SITE
    assert {"index.html", "blobs.html", "other-blobs.html", "board.js", "board.css"} == {p.name for p in site.iterdir()}
    assert cli_main(["export", str(path), "--summary", "--release", "--to", str(tmp_path / "s.jsonl"),
                     "--format", "jsonl"]) == 0
    expected = pd.read_json(tmp_path / "s.jsonl", lines=True, precise_float=True).to_dict("records")
    rows = embedded(site / "index.html")["rows"]
    assert [r["task"] for r in rows] == [e["task"] for e in expected]
    assert _close([{k: v for k, v in r.items() if k != "modality"} for r in rows],
                  [{k: None if v is None or v != v else v for k, v in e.items()} for e in expected])


def _cell(source, target, score, **names):
    return {**names, "source": source, "target": target, "score": score, "low": score - 0.1, "high": score + 0.1,
            "n": 3}


def test_a_task_page_shows_its_companion_s_matrix_beside_its_own_and_links_it(tmp_path):
    """A similarity task's page carries its stitching task's matrix (the companion its kind
    names), with that task's page linked; a companion not on the board is left out."""
    similarity = TaskBoard("sim", "space-similarity", "image", None, [], ("source", "target"),
                           [_cell("a", "b", 0.9, metric="cka"), _cell("b", "a", 0.9, metric="cka")],
                           companions=("st", "gone"))
    stitching = TaskBoard("st", "stitching", "image", None, ["stitcher"], ("source", "target"),
                          [_cell("a", "b", 0.5, stitcher="rel", metric="acc")])
    board.write(tmp_path, [similarity, stitching])
    data = embedded(tmp_path / "sim.html")
    assert data["matrix"]["labels"] == ["metric"] and len(data["matrix"]["cells"]) == 2
    (companion,) = data["companions"]
    assert companion["task"] == "st" and companion["labels"] == ["stitcher", "metric"]
    assert companion["cells"] == stitching.matrix and data["pages"]["st"] == "st.html"
    assert embedded(tmp_path / "st.html")["companions"] == []


def test_curves_carry_their_axis_and_the_keys_naming_each_series(tmp_path):
    points = [{"selector": "random", "metric": "acc", "measure": m, "num_anchors": k, "score": s, "low": s - 0.05,
               "high": s + 0.05, "n": 5} for m, k, s in (("stitched", 8, 0.4), ("stitched", 16, 0.6), ("own", 0, 0.9))]
    curved = TaskBoard("budget", "anchor-budget", "image", None, ["selector"], curve_axis="num_anchors",
                       curves=points)
    board.write(tmp_path, [curved])
    data = embedded(tmp_path / "budget.html")
    assert data["curves"] == {"axis": "num_anchors", "labels": ["selector", "metric", "measure"], "cells": points}
    assert data["matrix"]["cells"] == [] and "curves" in data["views"]
