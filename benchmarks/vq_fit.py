"""vq-cosine's fits over one bank, as validation tuning makes them, side by side.

A unit tunes ``threshold_quantile`` over its candidates (0.1, 0.05, 0.2) and then fits
the chosen one: four fits per bank. Before version 3 each fit computed the pairwise
distances and ran scikit-learn's ``AgglomerativeClustering`` at its threshold; now one
SciPy tree per bank is cut at each threshold (:class:`relbench_relreps.vq.Dendrogram`).
Prints seconds per bank both ways on random unit rows of the suite's shape (2,000
clustered rows of width 1,280) and whether the clusters agree (adjusted Rand index 1).

    python benchmarks/vq_fit.py [--rows 2000] [--dim 1280] [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from scipy.spatial.distance import pdist
from sklearn.cluster import AgglomerativeClustering
from sklearn.metrics import adjusted_rand_score

from relbench_relreps import VQCosine
from relbench_relreps import vq


def clustered_before(rows: np.ndarray, q: float) -> np.ndarray:
    """Version 2's fit: distances, threshold, scikit-learn clustering."""
    threshold = float(np.quantile(pdist(rows), q))
    return AgglomerativeClustering(n_clusters=None, distance_threshold=threshold, linkage="average").fit_predict(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--dim", type=int, default=1280)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    X = torch.nn.functional.normalize(torch.randn(args.rows, args.dim, generator=torch.Generator().manual_seed(0)))
    rows = X.double().numpy()
    fits = [*VQCosine.tunable["threshold_quantile"].values, VQCosine().threshold_quantile]
    t0 = time.perf_counter()
    before = [clustered_before(rows, q) for q in fits]
    t1 = time.perf_counter()
    vq._TREES.clear()
    after = []
    for q in fits:
        sim = VQCosine(threshold_quantile=q)
        sim.fit(X)
        after.append(sim.num_centroids)
    t2 = time.perf_counter()
    tree = vq.dendrogram(rows, "average")
    agree = all(adjusted_rand_score(b, tree.cut(float(np.quantile(tree.distances, q)))) == 1.0
                for b, q in zip(before, fits))
    print(f"{len(fits)} fits of one bank ({args.rows} × {args.dim}, {args.threads} thread(s)): "
          f"before {t1 - t0:.2f} s, after {t2 - t1:.2f} s ({(t2 - t1) / (t1 - t0):.2f}×); clusters "
          f"{'identical' if agree else 'DIFFER'} ({', '.join(str(n) for n in after)} centroids)")


if __name__ == "__main__":
    main()
