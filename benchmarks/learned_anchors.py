"""Learned anchors under `--executor ray`: how many times PARAM and fps anchors are
learned, and the run's wall seconds, for this checkout against an earlier revision, on
`quick-param-held-out` of tasks/quick.yaml (2 seeds; fps and PARAM held out of
open-nsfw, each for the 5 candidate λ of WIP tuned on validation data: 20 recipes a run
needs, each serving 2 units) on the local Ray instance each run starts, offering
``--cpus`` worker CPUs (``RAY_OVERRIDE_RESOURCES``): the driver cuts a task into about 4
shards a CPU, so 8 CPUs (the default, more than this machine may have) shard it as a
cluster of 8 would.

    python benchmarks/learned_anchors.py --before REV [--repeats 2] [--cpus 8]

Every run starts from an empty results store with the embedding cache warm (a copy of
``$RELBENCH_CACHE_DIR``, or ``~/.cache/relbench``, in a temporary folder: nothing is
written to the real one) and no learned anchors cached; the two revisions alternate, so
that a noisy machine slows both alike. A last run of this checkout keeps the anchors the
one before it learned (a later run of the same task). Calls are counted by a plugin
module that wraps the selectors' ``select`` in every process, Ray workers included.
Needs `pip install 'relbench[ray]'` and the quick suite's assets.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASK = "quick-param-held-out"
#: a plugin module without plugins: importing it (in the driver and every worker) counts selections
COUNTER = '''\
import functools
from relbench_irp.fps import FPSSelector
from relbench_param.selector import PARAMSelector

def _counted(select):
    @functools.wraps(select)
    def wrapper(self, ctx):
        with open({log!r}, "a") as fh:
            fh.write(self.name + "\\n")
        return select(self, ctx)
    return wrapper

for _cls in (FPSSelector, PARAMSelector):
    if not getattr(_cls.select, "_counted", False):
        _cls.select = _counted(_cls.select)
        _cls.select._counted = True
'''


def prepare_cache(folder: Path) -> Path:
    """A cache folder for the runs: the user's embeddings and extracted data sets copied,
    the read-only assets (weights, ONNX models, word tables) linked."""
    source = Path(os.environ.get("RELBENCH_CACHE_DIR") or Path.home() / ".cache" / "relbench")
    cache = folder / "cache"
    cache.mkdir()
    for name in ("embeddings", "descriptions", "datasets"):
        if (source / name).is_dir():
            shutil.copytree(source / name, cache / name, symlinks=True)
    for name in ("weights", "onnx", "words"):
        if (source / name).is_dir():
            (cache / name).symlink_to(source / name)
    return cache


def run(code: Path, folder: Path, env: dict, log: Path, keep_anchors: bool = False) -> tuple[float, int, str]:
    """Seconds, learned-anchor computations and the summary of one Ray run of the task
    with the code of ``code``, from an empty store."""
    shutil.rmtree(folder / "results", ignore_errors=True)
    if not keep_anchors:
        shutil.rmtree(Path(env["RELBENCH_CACHE_DIR"]) / "anchors", ignore_errors=True)
    log.write_text("")
    paths = [str(folder), str(code), str(code / "plugins")]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "relbench.cli", "run", str(code / "tasks" / "quick.yaml"),
                           f"--task={TASK}", "--output", str(folder / "results"), "--no-leaderboard",
                           "--executor", "ray"], cwd=folder, env={**env, "PYTHONPATH": os.pathsep.join(paths)},
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"the run with {code} failed:\n{done.stderr[-3000:]}")
    summary = next((ln for ln in done.stderr.splitlines()[::-1] if "Shared work" in ln), "")
    return seconds, len(log.read_text().splitlines()), summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the revision to compare with (e.g. main)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cpus", type=int, default=8, help="worker CPUs the Ray head offers (default 8)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="rb-anchors-"))
    try:
        before = folder / "before"
        before.mkdir()
        archive = subprocess.run(["git", "archive", args.before], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
        log = folder / "calls.txt"
        (folder / "rb_count_anchors.py").write_text(COUNTER.format(log=str(log)))
        env = {**os.environ, "RELBENCH_CACHE_DIR": str(prepare_cache(folder)), "RELBENCH_PLUGINS": "rb_count_anchors",
               "RAY_OVERRIDE_RESOURCES": json.dumps({"CPU": args.cpus}), "RAY_USAGE_STATS_ENABLED": "0",
               "HF_HUB_OFFLINE": "1"}
        run(ROOT, folder, env, log)  # encodes what the copied cache lacks
        figures: dict[str, list[tuple[float, int, str]]] = {"before": [], "after": []}
        for _ in range(args.repeats):
            figures["before"].append(run(before, folder, env, log))
            figures["after"].append(run(ROOT, folder, env, log))
        warm = run(ROOT, folder, env, log, keep_anchors=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"{TASK} (tasks/quick.yaml), --executor ray on a local instance of {args.cpus} worker CPUs "
          f"({os.cpu_count()} cores), warm embedding cache")
    for name, label in (("before", args.before), ("after", "this checkout")):
        runs = figures[name]
        shown = ", ".join(f"{s:.1f} s / {n} learned" for s, n, _ in runs)
        print(f"  {name:<6} ({label}): {shown}")
    ratio = statistics.median(s for s, _, _ in figures["before"]) / statistics.median(s for s, _, _ in figures["after"])
    print(f"  median wall seconds, before / after: {ratio:.2f}×")
    print(f"  after, anchors kept from the run before: {warm[0]:.1f} s / {warm[1]} learned")
    for name in ("after",):
        print(f"  summary ({name}): {figures[name][-1][2].strip()}")


if __name__ == "__main__":
    main()
