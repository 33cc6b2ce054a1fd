"""relbench.export: nested result rows flatten to plain columns, and the files it writes
load in pandas and DuckDB without relbench."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from relbench.export import FORMATS, flatten, write, write_stacked_parquet


def _rows() -> pd.DataFrame:
    """Rows shaped like ``ResultStore.load()``: nested parameter dicts, a plugin with no
    parameters (``euclidean``: an empty dict), lists, missing values and a parameter
    that is an int in one row and a string in another."""
    common = {"task": "digits", "kind": "stitching", "dataset": "digits", "seed": 0, "selector": "random",
              "regularizer": "none", "status": "ok", "error": "", "held_out": [], "num_anchors": 300,
              "kind_params": {"protocol": "all-pairs", "held_out": []},
              "dataset_params": {"train_size": 1200, "sizes": [0.5, 0.5]}}
    return pd.DataFrame([
        {**common, "similarity": "cosine", "stitcher": "relative", "source": "a", "target": "b",
         "metric": "accuracy", "value": 0.91, "extra": {},
         "params": {"random": {}, "cosine": {"center": False},
                    "relative": {"epochs": 5, "lr": 0.001, "hidden": [64, 32], "width": 128}},
         "encoder_params": {"a": {"arch": "mlp", "seed": 0}, "b": {"arch": "mlp", "seed": 1}}},
        {**common, "similarity": "euclidean", "stitcher": "relative", "source": "b", "target": "b",
         "metric": "accuracy", "value": 0.97, "extra": {"alpha": 0.3},
         "params": {"random": {}, "euclidean": {},
                    "relative": {"epochs": 7, "lr": 0.01, "hidden": [64], "width": "auto"}},
         "encoder_params": {"b": {"arch": "mlp", "seed": 1}}},
        {**common, "similarity": "-", "stitcher": "absolute", "source": "a", "target": "b", "held_out": ["a"],
         "metric": "accuracy", "value": None, "status": "not_achievable", "error": None, "extra": {},
         "params": {"random": {}}, "encoder_params": {"a": {"arch": "mlp", "seed": 0}}, "dataset_params": None},
    ])


def test_flatten_expands_dicts_into_dotted_typed_columns():
    flat = flatten(_rows())
    assert len(flat) == 3
    assert not any(c in flat for c in ("params", "extra", "encoder_params", "params.random", "params.euclidean"))
    assert list(flat.columns[:4]) == ["task", "kind", "dataset", "seed"]
    expanded = [c for c in flat.columns if "." in c]
    assert expanded == sorted(expanded) and flat.columns[-len(expanded):].tolist() == expanded
    assert flat["params.relative.epochs"].tolist()[:2] == [5, 7] and pd.isna(flat.loc[2, "params.relative.epochs"])
    assert flat["params.relative.epochs"].dtype == "Int64"
    assert flat["params.relative.lr"].dtype == "Float64"
    assert flat["params.cosine.center"].dtype == "boolean"
    assert flat["params.cosine.center"].isna().tolist() == [False, True, True]
    assert flat["params.relative.width"].tolist()[:2] == ["128", "auto"]  # mixed int/str: text
    assert json.loads(flat.loc[0, "params.relative.hidden"]) == [64, 32]
    assert json.loads(flat.loc[2, "held_out"]) == ["a"]
    assert pd.isna(flat.loc[2, "value"]) and pd.isna(flat.loc[2, "dataset_params.train_size"])
    assert flat.loc[1, "extra.alpha"] == 0.3


def test_unknown_format_is_refused(tmp_path):
    with pytest.raises(ValueError, match="parquet"):
        write(_rows(), tmp_path / "out.xlsx", "xlsx")


@pytest.mark.parametrize("fmt", FORMATS)
def test_written_files_read_back_in_pandas(tmp_path, fmt):
    path = write(_rows(), tmp_path / "sub" / f"results.{fmt}", fmt)
    back = {"parquet": pd.read_parquet, "csv": pd.read_csv,
            "jsonl": lambda p: pd.read_json(p, lines=True)}[fmt](path)
    assert len(back) == 3
    assert back.loc[0, "params.relative.epochs"] == 5 and pd.isna(back.loc[2, "params.relative.epochs"])
    assert back["params.relative.lr"].tolist()[:2] == [0.001, 0.01]
    assert not back.loc[0, "params.cosine.center"]
    assert "params.euclidean" not in back and "params" not in back
    assert [str(w) for w in back["params.relative.width"]][:2] == ["128", "auto"]


# Runs in an isolated interpreter where importing relbench fails: the files stand alone.
_DUCKDB_CHECK = textwrap.dedent("""
    import json, sys
    sys.modules["relbench"] = None  # any import of relbench now raises ImportError
    import duckdb
    files = json.loads(sys.argv[1])
    readers = {"parquet": "read_parquet", "csv": "read_csv_auto", "jsonl": "read_json_auto"}
    out = {}
    for fmt, path in files.items():
        rel = duckdb.sql(f"select * from {readers[fmt]}('{path}')")
        rows = rel.fetchall()
        cell = duckdb.sql(f'select "params.relative.epochs", "params.relative.width", "dataset_params.train_size" '
                          f"from {readers[fmt]}('{path}') where source = 'b'").fetchall()
        types = dict(zip(rel.columns, map(str, rel.types)))
        out[fmt] = {"rows": len(rows), "types": types, "cell": [list(map(str, r)) for r in cell]}
    print(json.dumps(out))
""")


def test_written_files_load_in_duckdb_without_relbench(tmp_path):
    files = {fmt: str(write(_rows(), tmp_path / f"results.{fmt}", fmt)) for fmt in FORMATS}
    proc = subprocess.run([sys.executable, "-I", "-c", _DUCKDB_CHECK, json.dumps(files)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for fmt, got in json.loads(proc.stdout).items():
        assert got["rows"] == 3, fmt
        assert "params.euclidean" not in got["types"] and "params" not in got["types"], fmt
        assert got["types"]["params.relative.epochs"] == "BIGINT", fmt
        assert got["types"]["params.relative.lr"] == "DOUBLE", fmt
        assert got["types"]["params.cosine.center"] == "BOOLEAN", fmt
        assert got["types"]["params.relative.width"] == "VARCHAR", fmt
        assert got["cell"] == [["7", "auto", "1200"]], fmt


def test_the_release_table_written_a_frame_at_a_time_reads_back_as_the_concatenated_table(tmp_path):
    # the release table is written a task at a time (never the whole table in memory); it
    # must read back as the table concatenating the frames first gave
    first = flatten(pd.DataFrame({"task": ["a", "a"], "value": [0.5, 0.25], "extra": [{"k": 1}, {"k": 2}],
                                  "note": [None, None]}))
    second = flatten(pd.DataFrame({"task": ["b"], "value": [1.0], "seed": [3], "extra": [{"k": "x", "j": True}],
                                   "note": ["kept"]}))
    third = flatten(pd.DataFrame({"task": ["c", "c"], "seed": [None, 4]}))
    frames = [first, second, pd.DataFrame(), third]
    consumed = []

    def one_at_a_time():
        for frame in frames:
            consumed.append(len(frame))
            yield frame

    path = write_stacked_parquet(one_at_a_time(), tmp_path / "stacked.parquet")
    expected = flatten(pd.concat([f.astype(object) for f in frames if not f.empty], ignore_index=True))
    write(pd.concat([f.astype(object) for f in frames if not f.empty], ignore_index=True),
          tmp_path / "concat.parquet", "parquet")
    stacked = pd.read_parquet(path)
    pd.testing.assert_frame_equal(stacked, pd.read_parquet(tmp_path / "concat.parquet"))
    assert list(stacked.columns) == list(expected.columns) == ["task", "value", "note", "extra.k", "seed", "extra.j"]
    # an int in one frame, a string in another: text, as flatten makes it; missing where a frame lacks it
    assert list(stacked["extra.k"][:3]) == ["1", "2", "x"] and stacked["extra.k"][3:].isna().all()
    # ints in one frame, floats (a missing value) in another: float, as flatten makes it
    assert str(stacked["seed"].dtype) == "Float64"
    assert stacked["seed"].isna().tolist() == [True, True, False, True, False]
    # nothing in one frame, text in another
    assert stacked["note"].isna().tolist() == [True, True, False, True, True] and stacked["note"][2] == "kept"
    assert consumed == [2, 1, 0, 2]
    import pyarrow.parquet as pq
    assert pq.ParquetFile(path).metadata.num_row_groups == 3  # one per non-empty frame
    assert sorted(p.name for p in tmp_path.iterdir()) == ["concat.parquet", "stacked.parquet"]  # nothing left over
