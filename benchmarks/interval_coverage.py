"""How often the pages' 95 % intervals cover the true mean with the seeds a release has.

Two parts, printed side by side:

1. **Coverage by simulation** at the release's seed count (default 5): per trial, each
   seed's true score is ``0.6 + N(0, seed_sd)`` and its test samples are ``n`` Bernoulli
   draws of it (an accuracy). For scores stored *without* per-sample data (the seed's
   mean only), the percentile bootstrap over seeds used until 962b24a against the
   Student-t interval used since (:func:`relbench.uncertainty.t_interval`); for scores
   *with* per-sample data, the hierarchical bootstrap (seeds, then each seed's samples)
   the stitching pages used until the seed-level change against the t-interval over the
   per-seed means they use since (:func:`relbench.uncertainty.bootstrap_columns`). The ratio
   ``seed_sd / sampling sd`` decides which regime a page is in.
2. **Where the release sits** (``--release``): for each stitching task's accuracy cells
   (one combination on one encoder pair, over its seeds), the between-seed variance of the
   cell's score over the within-seed sampling variance ``p(1 − p)/n`` of one seed's score.
   A ratio near 1: the seeds differ by sampling noise alone; well above 1: the seeds
   themselves (training, anchors, the test draw) dominate, the regime where a bootstrap
   over five seeds under-covers. Part 1's *variance ratio* column, ``1 + (seed sd /
   sampling sd)²``, is the same quantity, so the two parts read together.

    python benchmarks/interval_coverage.py [--seeds 5] [--trials 200] [--release leaderboards/results.parquet]
"""

from __future__ import annotations

import argparse

import numpy as np

from relbench.uncertainty import SeedBlock, hierarchical_bootstrap, t_interval


def _mean_block(values: np.ndarray) -> SeedBlock:
    """One seed whose single column is the mean of ``values`` (one value per sample)."""
    return SeedBlock(len(values), lambda w: (w @ values / w.sum(axis=1))[:, None], np.ones((1, 1)), np.ones(1, bool))


def _percentile_over_seeds(means: np.ndarray, rng: np.random.Generator, resamples: int) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean over seeds (the seeds-only interval before 962b24a)."""
    drawn = means[rng.integers(len(means), size=(resamples, len(means)))].mean(axis=1)
    low, high = np.percentile(drawn, [2.5, 97.5])
    return float(low), float(high)


def coverage(seeds: int, seed_sd: float, samples: int, trials: int, resamples: int) -> dict[str, float]:
    """Share of ``trials`` whose interval covers the true mean 0.6, per method."""
    rng = np.random.default_rng(7)
    hits = {"seeds only: percentile bootstrap": 0, "seeds only: Student-t": 0,
            "per-sample: hierarchical bootstrap": 0, "per-sample: Student-t over seed means": 0}
    for trial in range(trials):
        data = [(rng.random(samples) < m).astype(float) for m in 0.6 + rng.normal(0, seed_sd, seeds)]
        means = np.array([d.mean() for d in data])
        _, draws = hierarchical_bootstrap([_mean_block(d) for d in data], resamples=resamples, seed=trial)
        for name, (low, high) in zip(hits, (_percentile_over_seeds(means, rng, resamples), t_interval(means),
                                            np.percentile(draws[:, 0], [2.5, 97.5]), t_interval(means))):
            hits[name] += bool(low <= 0.6 <= high)
    return {name: hit / trials for name, hit in hits.items()}


def release_ratios(path: str) -> None:
    """Per stitching task, quantiles of the cells' between-seed / within-seed variance ratio."""
    import pandas as pd

    rows = pd.read_parquet(path, columns=["task", "kind", "metric", "status", "seed", "value", "selector",
                                          "similarity", "stitcher", "regularizer", "source", "target", "held_out",
                                          "per_sample.n"])
    rows = rows[(rows["kind"] == "stitching") & (rows["status"] == "ok")]
    cell = ["task", "selector", "similarity", "stitcher", "regularizer", "source", "target", "held_out"]
    rows = rows.assign(**{c: rows[c].astype(object).where(rows[c].notna(), "-") for c in cell})
    sizes = rows.dropna(subset=["per_sample.n"]).groupby([*cell, "seed"])["per_sample.n"].first()
    accuracy = rows[rows["metric"] == "accuracy"].set_index([*cell, "seed"])["value"]
    frame = pd.DataFrame({"p": accuracy, "n": sizes.reindex(accuracy.index)}).dropna()
    frame["within"] = frame["p"] * (1 - frame["p"]) / frame["n"]
    grouped = frame.groupby(level=cell)
    stats = pd.DataFrame({"between": grouped["p"].var(ddof=1), "within": grouped["within"].mean(),
                          "seeds": grouped["p"].size()})
    stats = stats[(stats["seeds"] >= 3) & (stats["within"] > 0)]
    stats["ratio"] = stats["between"] / stats["within"]
    print("\nbetween-seed / within-seed variance of a stitching cell's accuracy (1: sampling noise alone)")
    print(f"{'task':36} {'cells':>6} {'q25':>7} {'median':>7} {'q75':>7} {'q90':>7}")
    for task, group in stats.groupby(level="task"):
        q = group["ratio"].quantile([0.25, 0.5, 0.75, 0.9]).to_numpy()
        print(f"{task:36} {len(group):6d} " + " ".join(f"{v:7.2f}" for v in q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--samples", type=int, default=2000, help="test samples per seed")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--release", help="a release's results.parquet: where its stitching cells sit")
    args = parser.parse_args()
    sampling_sd = np.sqrt(0.6 * 0.4 / args.samples)
    print(f"coverage of 95 % intervals of the mean over {args.seeds} seeds ({args.samples} samples each, "
          f"{args.trials} trials; sampling sd of one seed's score {sampling_sd:.4f})")
    header = None
    for ratio in (0.0, 1.0, 3.0, 10.0):
        found = coverage(args.seeds, ratio * sampling_sd, args.samples, args.trials, args.resamples)
        if header is None:
            header = list(found)
            print(f"{'seed sd / sampling sd':>22}  {'variance ratio':>14}  " + "  ".join(f"{h:>38}" for h in header))
        print(f"{ratio:>22.1f}  {1 + ratio ** 2:>14.0f}  " + "  ".join(f"{found[h]:>38.3f}" for h in header))
    if args.release:
        release_ratios(args.release)


if __name__ == "__main__":
    main()
