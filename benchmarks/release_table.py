"""Peak memory of writing a release's ``results.parquet`` from a complete store, two ways
side by side, each in a fresh process: concatenating the tasks' flat frames as Python
objects first (how it was written until this benchmark), and stacking them a column at a
time (:func:`relbench.export.stack_flat`, how ``relbench publish`` writes it now). Both
files must be byte-identical.

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
from pathlib import Path
from types import SimpleNamespace


def _frames(tasks: Path, store: Path) -> list:
    """Every planned unit's rows of every task, flattened, a frame per task."""
    from relbench import cli
    from relbench.export import flatten
    from relbench.plugins import load_registry

    _, runner = cli._stored_suite(SimpleNamespace(tasks=tasks, output=store, command="publish", precision=None),
                                  load_registry())
    frames = [flatten(runner.store.load(tr.task.name, units=[u.id for u in tr.plan().units]))
              for tr in runner.plans()]
    return [frame for frame in frames if not frame.empty]


def _one(way: str, tasks: Path, store: Path, out: Path) -> None:
    """Write the table one way; print its figures as JSON."""
    import pandas as pd

    from relbench.export import stack_flat, write, write_parquet

    frames = _frames(tasks, store)
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    start = time.perf_counter()
    if way == "concatenated":
        write(pd.concat([f.astype(object) for f in frames], ignore_index=True), out, "parquet")
    else:
        write_parquet(stack_flat(frames), out)
    print(json.dumps({"way": way, "seconds": time.perf_counter() - start, "loaded_gb": loaded,
                      "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", type=Path)
    parser.add_argument("store", type=Path)
    parser.add_argument("--one", choices=["concatenated", "stacked"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        _one(args.one, args.tasks, args.store, args.out)
        return
    with tempfile.TemporaryDirectory() as folder:
        found = {}
        for way in ("concatenated", "stacked"):
            out = Path(folder) / f"{way}.parquet"
            done = subprocess.run([sys.executable, __file__, str(args.tasks), str(args.store), "--one", way,
                                   "--out", str(out)], capture_output=True, text=True, check=True)
            found[way] = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{way:13} {found[way]['seconds']:7.1f} s  peak {found[way]['peak_gb']:.2f} GB "
                  f"(the frames loaded: {found[way]['loaded_gb']:.2f} GB)", flush=True)
        same = (Path(folder) / "concatenated.parquet").read_bytes() == (Path(folder) / "stacked.parquet").read_bytes()
    print(f"stacked / concatenated: peak {found['stacked']['peak_gb'] / found['concatenated']['peak_gb']:.2f}, "
          f"time {found['stacked']['seconds'] / found['concatenated']['seconds']:.2f}; files byte-identical: {same}")


if __name__ == "__main__":
    main()
