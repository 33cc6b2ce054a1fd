"""What a page's intervals cost: the vectorised weighted scores against the interface's
one-resample-at-a-time default, and a whole hierarchical bootstrap at full scale.

The workload is the size of the full-scale Fashion-MNIST method comparison: 5 seeds,
each with 350 stitching cells (14 combinations × 25 encoder pairs, the diagonal
included) of 2,000 test samples and 10 classes; the score is weighted F1. Both paths
score the same cells under the same weights, side by side in one process (this machine
is noisy: compare the ratio, not the seconds), and must agree. The vectorised path
builds one-hot matrices per call, so it pays off on a block of resamples (the bootstrap
scores 250 at a time), not on a single one.

    python benchmarks/intervals.py [--resamples 1000] [--cells 350]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from relbench.interfaces import Metric
from relbench.uncertainty import CHUNK, SeedBlock, hierarchical_bootstrap
from relbench_metrics.classification import WeightedF1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--cells", type=int, default=350)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    metric = WeightedF1()
    y = rng.integers(0, 10, args.samples)
    preds = np.where(rng.random((args.cells, args.samples)) < 0.8, y, rng.integers(0, 10, (args.cells, args.samples)))
    # one block of resamples as the bootstrap scores them (CHUNK); the default path on a slice of it
    probe = rng.multinomial(args.samples, np.full(args.samples, 1 / args.samples), size=CHUNK)
    start = time.perf_counter()
    fast = metric.compute_weighted(y, preds, probe)
    vectorised = (time.perf_counter() - start) / len(probe)
    start = time.perf_counter()
    slow = Metric.compute_weighted(metric, y, preds, probe[:10])
    default = (time.perf_counter() - start) / 10
    assert np.allclose(fast[:10], slow), "the vectorised and default weighted F1 disagree"
    print(f"weighted F1 of {args.cells} cells × {args.samples} samples, per resample: vectorised {vectorised:.4f} s, "
          f"default (repeated samples) {default:.4f} s: {default / vectorised:.1f}× faster")

    blocks = []
    for _ in range(args.seeds):
        y_s = rng.integers(0, 10, args.samples)
        p_s = np.where(rng.random((args.cells, args.samples)) < 0.8, y_s, rng.integers(0, 10, (args.cells, args.samples)))
        blocks.append(SeedBlock(args.samples, lambda w, y_s=y_s, p_s=p_s: metric.compute_weighted(y_s, p_s, w),
                                np.eye(args.cells), np.ones(args.cells, bool)))
    start = time.perf_counter()
    hierarchical_bootstrap(blocks, args.resamples)
    total = time.perf_counter() - start
    print(f"hierarchical bootstrap, {args.seeds} seeds × {args.cells} cells, {args.resamples} resamples: {total:.1f} s "
          f"(the default path would take about {total * default / vectorised / 60:.0f} min)")


if __name__ == "__main__":
    main()
