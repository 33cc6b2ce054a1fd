"""How uncertain a page's scores are: 95 % intervals from a hierarchical bootstrap over
seeds and test samples, paired differences, groups of results indistinguishable from the
best, and three-valued claims.

A score on a page is a mean over seeds of a mean over *cells* (e.g. the encoder pairs a
combination is stitched on) of a metric computed on that seed's test samples. Its
uncertainty has two sources: the seeds (each draws its training and test subsamples,
anchors and initialisations) and the test samples. The bootstrap resamples both levels
as the data were generated: seeds with replacement, then, for every seed drawn, that
seed's test samples with replacement, afresh for each draw. Every column is scored on
each resample from the stored per-sample predictions (:mod:`relbench.samples`) by the
metric's own :meth:`~relbench.interfaces.Metric.compute_weighted`, so a column's
draws carry both sources, and within one resample all columns see the same seeds and
the same samples: the difference of two columns' draws is the *paired* bootstrap
distribution of their difference.

Choices, stated on the pages that use them: percentile intervals of
:data:`RESAMPLES` draws from a generator with a fixed seed (a page is reproducible);
level 95 %; a cell stored without per-sample data enters as its stored value (its
interval then reflects seeds only, and the page says so). With few seeds the seed level
is coarse: five seeds give intervals that are, if anything, narrow.

Why written here: SciPy's ``scipy.stats.bootstrap`` resamples independent observations
of one level; it has no nested resampling. On one level this module agrees with it
(tests/test_uncertainty.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from relbench import deferred
from relbench.samples import FORMAT, VALUES_FORMAT, read_predictions, read_values

pd = deferred.load("pandas")

#: bootstrap resamples per interval, and the generator seed (pages must be reproducible)
RESAMPLES = 1000
SEED = 0
#: the intervals' coverage
LEVEL = 0.95
#: a claim's default margin: the smallest difference, in the metric's units, that counts
MARGIN = 0.01
#: resamples scored at once (bounds the memory of one block of weights)
CHUNK = 250

HOLDS, FAILS, INCONCLUSIVE = "holds", "does not hold", "inconclusive"


@dataclass
class SeedBlock:
    """One seed's cells: how to score them under weightings of the seed's test samples,
    and which columns they feed."""

    #: test samples of the seed (0: every cell is a stored constant)
    n: int
    #: ``R × n`` integer weights → ``R × cells`` scores
    score: Callable[[np.ndarray], np.ndarray]
    #: ``cells × columns``: column ``j``'s score is the mean of the cells it weights
    average: np.ndarray
    #: the columns with at least one cell in this seed
    present: np.ndarray


@dataclass
class Draws:
    """Point estimates and bootstrap draws of several columns, paired."""

    labels: list[str]
    point: np.ndarray  #: one per column
    draws: np.ndarray  #: ``resamples × columns``
    #: whether every cell had per-sample data (False: some intervals reflect seeds only)
    sample_level: bool

    def column(self, label: str) -> int:
        """The index of a column."""
        return self.labels.index(label)

    def interval(self, label: str, level: float = LEVEL) -> tuple[float, float]:
        """The percentile interval of a column's score."""
        return _percentiles(self.draws[:, self.column(label)], level)

    def difference(self, a: str, b: str, level: float = LEVEL) -> tuple[float, float, float]:
        """``(a − b, low, high)``: the paired difference of two columns and its interval."""
        i, j = self.column(a), self.column(b)
        low, high = _percentiles(self.draws[:, i] - self.draws[:, j], level)
        return float(self.point[i] - self.point[j]), low, high


def _percentiles(values: np.ndarray, level: float) -> tuple[float, float]:
    values = values[np.isfinite(values)]
    if not len(values):
        return float("nan"), float("nan")
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def hierarchical_bootstrap(blocks: Sequence[SeedBlock], resamples: int = RESAMPLES,
                           seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """``(point, draws)`` of every column: the mean over seeds (those where the column has
    cells) of its score, and ``resamples`` draws of it, each from seeds drawn with
    replacement and, for every seed drawn, its samples drawn with replacement."""
    if not blocks:
        raise ValueError("no seeds to resample")
    rng = np.random.default_rng(seed)
    columns = blocks[0].average.shape[1]
    picks = rng.integers(len(blocks), size=(resamples, len(blocks)))
    total = np.zeros((resamples, columns))
    count = np.zeros((resamples, columns))
    point_total, point_count = np.zeros(columns), np.zeros(columns)
    for s, block in enumerate(blocks):
        present = block.present.astype(float)
        point_total += (block.score(np.ones((1, block.n), dtype=np.int64)) @ block.average)[0] * present
        point_count += present
        drawn = np.nonzero(picks == s)[0]  # one entry per (resample, position) that drew seed s
        for start in range(0, len(drawn), CHUNK):
            rows = drawn[start:start + CHUNK]
            weights = (rng.multinomial(block.n, np.full(block.n, 1 / block.n), size=len(rows)) if block.n
                       else np.ones((len(rows), 0), dtype=np.int64))
            np.add.at(total, rows, (block.score(weights) @ block.average) * present)
            np.add.at(count, rows, np.broadcast_to(present, (len(rows), columns)))
    with np.errstate(invalid="ignore", divide="ignore"):
        return point_total / point_count, total / count


def verdict(low: float, high: float, margin: float = MARGIN) -> str:
    """A claim's outcome from the interval of its advantage (claimed-better minus
    claimed-worse, oriented so that positive favours the claim): *holds* when the whole
    interval lies above ``margin``, *does not hold* when it lies below ``-margin`` (the
    other side is better by more than the margin), *inconclusive* otherwise (a tie
    included)."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return INCONCLUSIVE
    if low > margin:
        return HOLDS
    if high < -margin:
        return FAILS
    return INCONCLUSIVE


def indistinguishable(low: float, high: float) -> bool:
    """Whether a paired difference's interval contains 0 (no difference shown)."""
    return bool(np.isfinite(low) and np.isfinite(high) and low <= 0 <= high)


def with_samples(rows: pd.DataFrame, results: pd.DataFrame, cell_columns: Sequence[str]) -> pd.DataFrame:
    """``rows`` with each row's ``per_sample`` record: its own, or else the predictions
    record of any row of ``results`` of the same unit and cell (a classification cell
    stores its predictions on one metric's row only; they score its other metrics too)."""
    if "per_sample" not in results or "unit" not in results:
        return rows.assign(per_sample=None)
    keys = ["unit", *[c for c in cell_columns if c in results]]
    carriers = results[results["per_sample"].map(lambda r: isinstance(r, dict) and r.get("format") == FORMAT)]
    found = {tuple(k): record for k, record in zip(carriers[keys].astype(str).itertuples(index=False),
                                                    carriers["per_sample"])}
    own = rows["per_sample"] if "per_sample" in rows else pd.Series(None, index=rows.index, dtype=object)
    return rows.assign(per_sample=[mine if isinstance(mine, dict) else found.get(tuple(k))
                                   for mine, k in zip(own, rows[keys].astype(str).itertuples(index=False))])


def seed_blocks(rows: pd.DataFrame, columns: dict[str, pd.Series], metric: Any) -> tuple[list[SeedBlock], bool]:
    """The :class:`SeedBlock` of every seed of ``rows`` (one metric's finished rows, with
    ``seed``, ``value`` and ``per_sample``), and whether every cell could be resampled.
    ``columns`` maps a column's label to a boolean mask over ``rows`` (its cells); a
    cell whose record is missing, or whose test samples differ from the seed's others,
    or with no ``metric`` to rescore it, enters as its stored value."""
    blocks, complete = [], True
    labels = list(columns)
    masks = np.column_stack([columns[c].reindex(rows.index, fill_value=False).to_numpy(bool) for c in labels]) \
        if labels else np.zeros((len(rows), 0), bool)
    used = masks.any(axis=1)
    seeds, values = pd.factorize(rows["seed"], use_na_sentinel=False)  # rows without a seed form one group
    # a fixed order (the seedless group, then seeds ascending), not the rows' order: the
    # generator draws per block, and the same rows stored in another order (units that
    # finished in another order) must give the same intervals
    order = sorted(pd.unique(seeds[used]), key=lambda code: (pd.notna(values[code]), _sortable(values[code])))
    for seed in order:
        at = np.nonzero(used & (seeds == seed))[0]
        cells = rows.iloc[at]
        member = masks[at].astype(float)
        average = np.divide(member, member.sum(axis=0), out=np.zeros_like(member), where=member.sum(axis=0) > 0)
        records = list(cells["per_sample"]) if "per_sample" in cells else [None] * len(cells)
        block, resampled = _block(records, cells["value"].to_numpy(float), metric)
        complete &= resampled
        blocks.append(SeedBlock(block[0], block[1], average, member.sum(axis=0) > 0))
    return blocks, complete


def _sortable(seed: Any) -> tuple:
    """A seed value as a sort key (numbers by value, anything else by its text)."""
    return (0, float(seed), "") if isinstance(seed, (int, float, np.integer, np.floating)) and pd.notna(seed) \
        else (1, 0.0, str(seed))


def _block(records: list, values: np.ndarray, metric: Any) -> tuple[tuple[int, Callable], bool]:
    """``((n, score), all resampled)`` for one seed's cells: cells whose record has the
    seed's most common sample digest are rescored on each resample (a predictions record
    by ``metric``, a values record by the mean of its values); the others are constants."""
    digests = [r.get("ids") for r in records if isinstance(r, dict)]
    if not digests:
        return (0, lambda w: np.broadcast_to(values, (len(w), len(values)))), False
    common = max(sorted(set(digests)), key=digests.count)  # a tie goes to the first digest in sorted order
    usable = {VALUES_FORMAT} | ({FORMAT} if metric is not None else set())
    rescored = {fmt: [i for i, r in enumerate(records) if isinstance(r, dict) and r.get("ids") == common
                      and r.get("format") == fmt] for fmt in usable}
    scorers = []
    if rescored.get(FORMAT):
        decoded = [read_predictions(records[i]) for i in rescored[FORMAT]]
        y_true = decoded[0][0]
        if any(len(t) != len(y_true) or (t != y_true).any() for t, _ in decoded):
            raise ValueError("cells with the same test sample ids store different true labels; the results store "
                             "is inconsistent: rerun the task with --force")
        y_preds = np.stack([p for _, p in decoded])
        scorers.append((rescored[FORMAT], lambda w: metric.compute_weighted(y_true, y_preds, w)))
    if rescored.get(VALUES_FORMAT):
        per_sample = np.stack([read_values(records[i]) for i in rescored[VALUES_FORMAT]])
        scorers.append((rescored[VALUES_FORMAT], lambda w: (w @ per_sample.T) / w.sum(axis=1, keepdims=True)))
    n = next((int(records[i]["n"]) for cells, _ in scorers for i in cells), 0)

    def score(weights: np.ndarray) -> np.ndarray:
        out = np.broadcast_to(values, (len(weights), len(values))).copy()
        for cells, scorer in scorers:
            out[:, cells] = scorer(weights.astype(float))
        return out

    return (n, score), sum(len(c) for c, _ in scorers) == len(records)


def bootstrap_columns(rows: pd.DataFrame, columns: dict[str, pd.Series], metric: Any,
                      resamples: int = RESAMPLES) -> Draws | None:
    """:class:`Draws` of each column of ``rows`` (see :func:`seed_blocks`); None when no
    column has a cell."""
    blocks, complete = seed_blocks(rows, columns, metric)
    if not blocks:
        return None
    point, draws = hierarchical_bootstrap(blocks, resamples)
    return Draws(list(columns), point, draws, complete)


def seed_interval(per_seed: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """The percentile interval of the mean of per-seed values, by SciPy's
    ``scipy.stats.bootstrap`` over seeds (for scores stored without per-sample data);
    ``(v, v)`` for a single seed, NaNs for none."""
    from scipy.stats import bootstrap

    values = np.asarray([v for v in per_seed if v is not None and np.isfinite(v)], dtype=float)
    if not len(values):
        return float("nan"), float("nan")
    if len(values) == 1 or np.ptp(values) == 0:
        return float(values[0]), float(values[0])
    ci = bootstrap((values,), np.mean, n_resamples=RESAMPLES, confidence_level=level, method="percentile",
                   random_state=np.random.default_rng(SEED)).confidence_interval
    return float(ci.low), float(ci.high)


def fmt_interval(low: float, high: float, signed: bool = False) -> str:
    """``[low, high]`` with three decimals (``+``/``−`` signs when ``signed``); ``n/a`` when unknown."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return "n/a"
    spec = "+.3f" if signed else ".3f"
    return f"[{low:{spec}}, {high:{spec}}]"


def method_note(draws: Draws | None) -> str:
    """The sentence a page prints under a table of intervals: how they were computed."""
    seeds_only = "" if draws is None or draws.sample_level else (
        " Some cells were stored without per-sample predictions; their intervals reflect seeds only.")
    return (f"Intervals: {int(LEVEL * 100)} % percentile intervals of a hierarchical bootstrap ({RESAMPLES} "
            f"resamples: seeds with replacement, then each drawn seed's test samples with replacement), "
            f"recomputed from the stored per-sample predictions; differences are paired (same seeds, same "
            f"samples).{seeds_only}")
