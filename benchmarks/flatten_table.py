"""The flat results table: what :func:`relbench.export.flatten` costs on a results store.

Every page rendering writes ``results.parquet`` beside the pages, `relbench publish`
writes the release's, and `relbench export` writes the user's: each flattens the store's
rows (nested records as dotted columns of one type). This script loads each task of a
store (``--task`` to choose) and prints, per task and in total, the rows, the columns
made, the seconds :func:`flatten` took and the cells it made per second, beside the
floor of a flat table of the same shape: the seconds pandas takes to build one from
ready columns (``DataFrame`` of the output's columns), measured in the same run.

    python benchmarks/flatten_table.py STORE [--task NAME]...
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from relbench.export import flatten
from relbench.results import ResultStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", type=Path, help="a results store (e.g. results-release/REVISION)")
    parser.add_argument("--task", action="append", default=[], help="a task of the store (repeatable; default all)")
    args = parser.parse_args()
    store = ResultStore(args.store)
    names = args.task or sorted(p.stem for p in args.store.glob("*.jsonl"))
    total = floor_total = cells_total = 0.0
    for name in names:
        rows = store.load(name)
        start = time.perf_counter()
        flat = flatten(rows)
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        pd.DataFrame({c: flat[c].to_numpy() for c in flat.columns})
        floor = time.perf_counter() - start
        cells = flat.shape[0] * flat.shape[1]
        total, floor_total, cells_total = total + seconds, floor_total + floor, cells_total + cells
        print(f"{name:40s} {len(rows):7d} rows {flat.shape[1]:4d} columns  {seconds:6.2f} s  "
              f"{cells / seconds / 1e6:6.2f} M cells/s  floor {floor:5.2f} s")
    print(f"total: {total:.1f} s for {cells_total / 1e6:.1f} M cells ({cells_total / total / 1e6:.2f} M cells/s); "
          f"floor {floor_total:.2f} s; ratio to floor {total / floor_total:.1f}")


if __name__ == "__main__":
    main()
