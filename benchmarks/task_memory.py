"""Peak memory of one task: cold (its banks encoded) and warm (`--force`, banks cached).

With `-j N` each task runs in its own worker, so a suite's peak memory is the largest
task's. This script runs one task of a tasks file as whole `relbench` processes under
`/usr/bin/time` and prints wall time and peak resident memory of

* a **cold** run: an empty embedding cache (a temporary one, given the models, data and
  exported graphs of the real cache so that nothing is downloaded or exported again),
  so the task encodes every bank it reads, then computes its units;
* a **warm** run: `--force` on the banks the cold run cached (units only).

Results go to temporary folders; the store and cache you use are not touched.

    python benchmarks/task_memory.py [tasks.yaml] --task fashion-anchor-selectors
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from noop_run import timed

from relbench.cache import default_cache_root

#: cache folders that hold assets, not embeddings: copied so the cold run fetches nothing
ASSET_FOLDERS = ("datasets", "descriptions", "onnx", "weights", "words")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="?", default="tasks.yaml")
    parser.add_argument("--task", required=True)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="relbench-task-memory-"))
    cache = work / "cache"
    for folder in ASSET_FOLDERS:
        if (default_cache_root() / folder).is_dir():
            shutil.copytree(default_cache_root() / folder, cache / folder)
    os.environ["RELBENCH_CACHE_DIR"] = str(cache)
    base = ["run", args.tasks, "--task", args.task, "--output", str(work / "results"), "--no-leaderboard", "-q"]
    print(f"{args.task} ({args.tasks}), {os.cpu_count()} CPU cores")
    for name, extra in (("cold (encodes its banks)", []), ("warm --force (banks cached)", ["--force"])):
        wall, cpu, rss, code = timed([*base, *extra])
        if code != 0:
            sys.exit(f"`relbench {' '.join([*base, *extra])}` exited {code}")
        print(f"  {name:<28} wall {wall:6.1f} s  cpu {cpu:6.1f} s  peak RSS {rss:6.0f} MB")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
