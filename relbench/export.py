"""Flat, portable export of results: Parquet, CSV or JSON lines that load without relbench.

The results store (:meth:`relbench.results.ResultStore.load`) gives one row per (unit,
metric) whose columns may hold nested dicts (``params`` = {label: {param: value}},
``extra`` …) and lists (``held_out``). :func:`flatten` turns that into plain columns
(``params.relative.epochs``) of one type each; :func:`write` saves the result, so that
pandas, DuckDB or a spreadsheet can read it directly.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from relbench import deferred
import numpy as np

pd = deferred.load("pandas")

#: the file formats :func:`write` knows
FORMATS = ("parquet", "csv", "jsonl")

# the pandas type of a column whose values are all of one kind (missing values allowed)
_NULLABLE = {"bool": "boolean", "int": "Int64", "float": "Float64"}


def flatten(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` with only flat, single-typed columns.

    Every column holding dicts is replaced by one column per leaf, named by its dotted
    path (``params.relative.epochs``); an empty dict gives no column. Lists and other
    non-scalar values become JSON text. Columns of integers, floats or booleans (missing
    values allowed) get pandas' nullable ``Int64``, ``Float64`` or ``boolean`` type; a
    column whose values mix types (an int in one row, a string in another) becomes text.
    Columns that are not expanded keep their order; the expanded ones follow, sorted.
    """
    is_scalar, isna = pd.api.types.is_scalar, pd.isna  # bound once: called per value below
    dict_cols = [c for c in df.columns if any(isinstance(v, dict) for v in df[c].to_numpy())]
    leaves: dict[str, list[Any]] = {}
    for col in dict_cols:
        for i, value in enumerate(df[col].to_numpy()):
            if value is None or (not isinstance(value, dict) and is_scalar(value) and isna(value)):
                continue  # this row has nothing under that column
            for name, leaf in _leaves(str(col), value):
                column = leaves.get(name)
                if column is None:  # a column's list is made once (not once per leaf: rows × leaves lists)
                    column = leaves[name] = [None] * len(df)
                column[i] = leaf
    columns = {name: df[name] for name in df.columns if name not in dict_cols}
    columns.update((name, pd.Series(leaves[name], index=df.index, dtype=object)) for name in sorted(leaves))
    return pd.DataFrame({name: _uniform(col) for name, col in columns.items()}, index=df.index)


def write(df: pd.DataFrame, path: Path, fmt: str) -> Path:
    """Flatten ``df`` (see :func:`flatten`) and write it to ``path`` as ``fmt``.

    ``fmt`` is one of :data:`FORMATS`: ``parquet`` (through pyarrow, zstd-compressed), ``csv`` (with a
    header line) or ``jsonl`` (one JSON object per row, floats exact). Missing parent folders are
    created. Returns ``path``; raises ``ValueError`` for another format.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}.")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flat = flatten(df)
    if fmt == "parquet":
        write_parquet(flat, path)
    elif fmt == "csv":
        flat.to_csv(path, index=False)
    else:
        _write_jsonl(flat, path)
    return path


def write_parquet(flat: pd.DataFrame, path: Path) -> Path:
    """Write an already flat frame (:func:`flatten`'s) to ``path``
    as parquet (pyarrow, zstd-compressed: 2.4× smaller than snappy here); returns ``path``."""
    flat.to_parquet(path, engine="pyarrow", index=False, compression="zstd")
    return path


def write_stacked_parquet(frames: Iterable[pd.DataFrame], path: Path) -> Path:
    """Stack flat frames (:func:`flatten`'s, one per task, consumed one at a time) into one
    parquet file at ``path``, holding one frame at a time: the table read back is what
    ``flatten(pd.concat([f.astype(object) for f in frames], ignore_index=True))`` gives
    (columns in their order of first appearance; a column a frame lacks is missing in its
    rows; a column typed differently in two frames unified as :func:`flatten` does), one
    row group per frame. Three passes over the frames parked in a hidden folder beside
    ``path`` (removed after): each as it comes, noting every column's kinds of value; each
    typed to the whole table's types; each cast to the unified schema and appended. Holding
    the whole table instead took 7.2 GB for a release of 353,000 rows and 636 columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parked = path.with_name(f".{path.name}.frames")
    shutil.rmtree(parked, ignore_errors=True)
    parked.mkdir(parents=True)
    try:
        kinds: dict[str, set[str]] = {}
        files = []
        for frame in frames:
            if frame.empty:
                continue
            for name in frame.columns:
                kinds.setdefault(name, set()).update(_kinds(frame[name].to_numpy(dtype=object)))
            files.append(parked / f"{len(files):05d}.parquet")
            frame.to_parquet(files[-1], engine="pyarrow", index=False, compression=None)
            del frame
        schemas = []
        for file in files:
            frame = pd.read_parquet(file)
            typed = pd.DataFrame({name: _typed(frame[name].to_numpy(dtype=object) if name in frame
                                               else np.full(len(frame), np.nan, dtype=object), found)
                                  for name, found in kinds.items()}, index=frame.index)
            typed.to_parquet(file, engine="pyarrow", index=False, compression=None)
            schemas.append(pq.read_schema(file))
        if not files:
            pd.DataFrame().to_parquet(path, engine="pyarrow", index=False, compression="zstd")
            return path
        schema = pa.unify_schemas(schemas).with_metadata(schemas[0].metadata)
        with pq.ParquetWriter(path, schema, compression="zstd") as writer:
            for file in files:
                writer.write_table(pq.read_table(file).cast(schema))
                file.unlink()
    finally:
        shutil.rmtree(parked, ignore_errors=True)
    return path


def _write_jsonl(flat: pd.DataFrame, path: Path) -> None:
    """One JSON object per row, every float written exactly (as Python's ``repr`` does;
    pandas' own writer keeps 10 digits) and missing values as null."""
    rows = flat.astype(object).where(flat.notna(), None).to_dict("records")
    with open(path, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False, default=_json_default) + "\n")


def gathered(rows: pd.DataFrame, column: str) -> list[dict | None]:
    """Per row of a flat table (:func:`flatten`'s, e.g. a release's ``results.parquet``),
    the nested record that ``column`` held before it was flattened: its dotted columns
    (``per_sample.n``, ``extra.samples.train``) gathered back into a dict, missing
    leaves left out; None for a row with none."""
    fields = [c for c in rows.columns if str(c).startswith(f"{column}.")]
    records: list[dict | None] = []
    for values in rows[fields].itertuples(index=False):
        record: dict = {}
        for name, value in zip(fields, values):
            if pd.api.types.is_scalar(value) and pd.isna(value):
                continue
            *path, leaf = name.split(".")[1:]
            inner = record
            for key in path:
                inner = inner.setdefault(key, {})
            inner[leaf] = value
        records.append(record or None)
    return records


def _leaves(prefix: str, value: Any) -> Iterator[tuple[str, Any]]:
    """(dotted name, value) of every leaf under ``value``; nothing for an empty dict."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _leaves(f"{prefix}.{key}", inner)
    else:
        yield prefix, value


def _uniform(col: pd.Series) -> pd.Series:
    """One column with a single type: non-scalars as JSON text, then a nullable numeric or
    boolean type when every value allows it, text when the values mix types."""
    if col.dtype != object:
        return col
    is_scalar = pd.api.types.is_scalar  # bound once: called per value below
    values = [v if v is None or is_scalar(v) else json.dumps(v, default=_json_default) for v in col.to_numpy()]
    typed = _typed(np.array(values, dtype=object), _kinds(values))
    return pd.Series(typed.array, index=col.index, name=col.name, dtype=typed.dtype)


def _kinds(values: Any) -> set[str]:
    """The kinds (:func:`_kind`) of the scalar values present (not missing) in ``values``."""
    isna = pd.isna
    return {_kind(v) for v in values if v is not None and not isna(v)}


def _typed(values: np.ndarray, kinds: set[str]) -> pd.Series:
    """Scalar ``values`` (objects) as one column of the type their ``kinds`` allow: a
    nullable numeric or boolean type for one kind (ints with floats: float), text when the
    kinds mix (each value's ``str``), objects otherwise (text, or nothing but missing values)."""
    kinds = {"float"} if kinds == {"int", "float"} else set(kinds)
    if len(kinds) > 1:
        isna = pd.isna
        values, kinds = np.array([v if v is None or isna(v) else str(v) for v in values], dtype=object), {"str"}
    return pd.Series(values, dtype=_NULLABLE.get(kinds.pop() if kinds else "none", object))


def _kind(value: Any) -> str:
    """The kind of a scalar, with numpy scalars counted as their Python counterparts."""
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    return type(value).__name__


def _json_default(value: Any) -> Any:
    """What ``json.dumps`` writes for objects it does not know: numpy arrays and scalars
    as lists and numbers, anything else as its ``str``."""
    return value.tolist() if hasattr(value, "tolist") else str(value)
