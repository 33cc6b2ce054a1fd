"""Peak memory and time of writing a release's ``results.parquet`` from a complete store,
side by side, each way in a fresh process:

- *concatenated*: every task's flat frame loaded, concatenated as Python objects, then
  written (how it was written until 2026-11-28);
- *streamed*: :func:`relbench.export.write_stacked_parquet`, one task's frame at a time
  (how ``relbench publish`` writes it now);
- *floor*: the largest task's frame alone, loaded and flattened: what any writer that
  holds one task at a time must hold.

Each figure covers loading the rows from the store and writing. Both tables must read back
equal (``pandas.testing.assert_frame_equal``; the files differ in their row groups).

    python benchmarks/release_table.py TASKS.yaml STORE
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace


def _frames(tasks: Path, store: Path, only_largest: bool = False) -> Iterator:
    """Every planned unit's rows of every task, flattened, a frame per task, as they are
    loaded (with ``only_largest``: the task whose store file is largest, alone)."""
    from relbench import cli
    from relbench.export import flatten
    from relbench.plugins import load_registry

    _, runner = cli._stored_suite(SimpleNamespace(tasks=tasks, output=store, command="publish", precision=None),
                                  load_registry())
    plans = runner.plans()
    if only_largest:
        size = lambda tr: (store / f"{tr.task.name}.jsonl").stat().st_size  # noqa: E731
        plans = [max(plans, key=size)]
    for tr in plans:
        yield flatten(runner.store.load(tr.task.name, units=[u.id for u in tr.plan().units]))


def _one(way: str, tasks: Path, store: Path, out: Path) -> None:
    """Write the table one way; print its figures as JSON."""
    import pandas as pd

    from relbench.export import write, write_stacked_parquet

    start = time.perf_counter()
    if way == "concatenated":
        frames = [f for f in _frames(tasks, store) if not f.empty]
        write(pd.concat([f.astype(object) for f in frames], ignore_index=True), out, "parquet")
    elif way == "streamed":
        write_stacked_parquet(_frames(tasks, store), out)
    else:
        for _ in _frames(tasks, store, only_largest=True):
            pass
    print(json.dumps({"way": way, "seconds": time.perf_counter() - start,
                      "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", type=Path)
    parser.add_argument("store", type=Path)
    parser.add_argument("--one", choices=["concatenated", "streamed", "floor"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        _one(args.one, args.tasks, args.store, args.out)
        return
    import pandas as pd

    with tempfile.TemporaryDirectory() as folder:
        found = {}
        for way in ("floor", "streamed", "concatenated"):
            out = Path(folder) / f"{way}.parquet"
            done = subprocess.run([sys.executable, __file__, str(args.tasks), str(args.store), "--one", way,
                                   "--out", str(out)], capture_output=True, text=True, check=True)
            found[way] = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{way:13} {found[way]['seconds']:7.1f} s  peak {found[way]['peak_gb']:.2f} GB", flush=True)
        pd.testing.assert_frame_equal(pd.read_parquet(Path(folder) / "streamed.parquet"),
                                      pd.read_parquet(Path(folder) / "concatenated.parquet"))
    print(f"streamed: peak {found['streamed']['peak_gb'] / found['floor']['peak_gb']:.2f}× the floor, "
          f"{found['streamed']['peak_gb'] / found['concatenated']['peak_gb']:.2f}× concatenated; time "
          f"{found['streamed']['seconds'] / found['concatenated']['seconds']:.2f}× concatenated; tables equal")


if __name__ == "__main__":
    main()
