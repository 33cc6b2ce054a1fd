"""Units per second of `relbench run` on this machine: local (`-j 1`, `-j 2`) against a
Ray cluster of 1 and 2 worker CPUs (`ray start --head --num-cpus N`, then `--executor ray
--address`), on the same suite of toy tasks, every run from an empty store with the
embedding cache warm. The difference between Ray on one CPU and `-j 1` is Ray's cost:
printed per unit as the scheduling overhead.

    python benchmarks/ray_throughput.py [--tasks 2] [--seeds 6]

Needs `pip install 'relbench[ray]'`. The toy plugins come from tests/toy_plugins.py.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASK = """\
  - name: blobs-{i}
    dataset: {{name: toy-blobs, params: {{classes: 4, seed: {i}}}}}
    encoders:
      - {{name: toy-rotated, label: a, params: {{seed: 1}}}}
      - {{name: toy-rotated, label: b, params: {{seed: 2, scale: 3.0}}}}
      - {{name: toy-rotated, label: c, params: {{seed: 3, scale: 0.5}}}}
    grid: {{selectors: [random], similarities: [cosine, euclidean], stitchers: [{{name: relative, params: {{epochs: 60}}}}, {{name: absolute, params: {{epochs: 60}}}}]}}
"""


def run(folder: Path, env: dict, *args: str) -> float:
    """Seconds of one `relbench run` from an empty store."""
    shutil.rmtree(folder / "results", ignore_errors=True)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "relbench.cli", "run", "tasks.yaml", "-q", "--no-leaderboard", *args],
                   cwd=folder, env=env, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=6)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="rb-bench-"))
    seeds = list(range(args.seeds))
    (folder / "tasks.yaml").write_text(f"suite:\n  seeds: {seeds}\n  num_anchors: 16\n  output: results\ntasks:\n" +
                                       "".join(TASK.format(i=i) for i in range(args.tasks)))
    env = {**os.environ, "RELBENCH_PLUGINS": "toy_plugins", "RELBENCH_CACHE_DIR": str(folder / "cache"),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT), str(ROOT / "plugins")]),
           "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    units = args.tasks * args.seeds * 3 * 4
    ray_bin = str(Path(sys.executable).with_name("ray"))
    run(folder, env)  # fills the embedding cache: every run below reads it
    figures = {"-j 1": run(folder, env), "-j 2": run(folder, env, "-j", "2")}
    for cpus in (1, 2):
        subprocess.run([ray_bin, "start", "--head", f"--num-cpus={cpus}", "--include-dashboard=false",
                        "--disable-usage-stats", "--node-ip-address=127.0.0.1", "--port=6390"], env=env,
                       check=True, capture_output=True)
        try:
            figures[f"ray, {cpus} CPU"] = run(folder, env, "--executor", "ray", "--address", "127.0.0.1:6390")
        finally:
            subprocess.run([ray_bin, "stop", "--force"], env=env, capture_output=True)
    print(f"{units} units ({args.tasks} tasks × {args.seeds} seeds × 3 targets × 4 combinations), warm cache")
    for name, seconds in figures.items():
        print(f"  {name:<12} {seconds:6.1f} s  {units / seconds:5.2f} units/s  ({figures['-j 1'] / seconds:.2f}× -j 1)")
    overhead = (figures["ray, 1 CPU"] - figures["-j 1"]) / units
    print(f"  Ray's cost per unit on one CPU (connect, ship, store): {overhead * 1000:.0f} ms")
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
