"""How uncertain a page's scores are: 95 % intervals, paired differences, groups of
results indistinguishable from the best, and three-valued claims.

A score on a page is a mean over seeds of a mean over *cells* (e.g. the encoder pairs a
combination is stitched on) of a metric computed on that seed's test samples. Its
uncertainty has two sources: the seeds (each draws its training and test subsamples,
anchors and initialisations) and the test samples.

**Two seeds or more: Student-t over seeds.** Each seed's score, computed on that seed's
own test samples, is one independent draw of everything that varies, so the seeds'
scores carry both sources, and the Student-t interval of their mean (:func:`t_interval`,
``n − 1`` degrees of freedom for ``n`` seeds) covers at its nominal rate whichever source
dominates. Paired differences are the t-interval of the per-seed differences (same seeds,
same test samples), claims take a paired t-test (:func:`t_p_value`), and what is built on
draws (tie groups, chance ratios, the main table's aggregate) takes paired multivariate-t
draws (:func:`t_draws`) whose percentiles are those intervals. A seedless row (a
deterministic baseline) is a constant. Why not a bootstrap: over five seeds a percentile
bootstrap is narrower than the t-interval (its spread is ``sqrt((n−1)/n)`` of the
standard error, its ends 1.96 rather than t₄ = 2.78 of them) and under-covers; the
hierarchical bootstrap (seeds, then each drawn seed's samples) under-covers as soon as the
seeds vary more than the samples: measured by ``benchmarks/interval_coverage.py``, 0.86 at
a between-/within-seed variance ratio of 10 against 0.93–0.955 for the t-interval.

**One seed: a bootstrap over its test samples.** With one seed nothing measures the
variation between seeds; the intervals are percentile intervals of a bootstrap over that
seed's test samples (:func:`hierarchical_bootstrap` with the seed level held), rescored
from the stored per-sample predictions (:mod:`relbench.samples`) by the metric's own
:meth:`~relbench.interfaces.Metric.compute_weighted`, all columns on the same resampled
samples (paired), and the page says they are conditional on that seed
(:func:`method_note`). A cell stored without per-sample data enters as its stored value.

Choices, stated on the pages: level 95 %; :data:`RESAMPLES` draws from a generator with
a fixed seed (a page is reproducible). SciPy's ``scipy.stats.bootstrap`` and
``ttest_1samp`` are what this module agrees with on one level (tests/test_uncertainty.py);
neither pairs many columns' draws or nests resampling.
"""

from __future__ import annotations

import math
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
    #: False for the group of rows stored without a seed (deterministic baselines)
    seeded: bool = True


@dataclass
class Draws:
    """Point estimates and bootstrap draws of several columns, paired."""

    labels: list[str]
    point: np.ndarray  #: one per column
    draws: np.ndarray  #: ``resamples × columns``
    #: whether every cell had per-sample data (False: with one seed, some cells are constants)
    sample_level: bool
    #: with two seeds or more: each column's score per seed (``seeds × columns``, NaN where
    #: the column has no cell), and which rows are seeds (False: the seedless group, a
    #: constant); None otherwise. Intervals are then Student-t intervals over seeds.
    per_seed: np.ndarray | None = None
    seeded: np.ndarray | None = None

    @property
    def over_seeds(self) -> bool:
        """Whether the intervals are Student-t intervals over seeds (else a bootstrap over
        one seed's test samples)."""
        return self.per_seed is not None

    def column(self, label: str) -> int:
        """The index of a column."""
        return self.labels.index(label)

    def interval(self, label: str, level: float = LEVEL) -> tuple[float, float]:
        """The interval of a column's score: Student-t over seeds when :attr:`over_seeds`,
        else percentile over the draws."""
        if self.over_seeds:
            values, constant = self._seed_values(self.column(label))
            return t_interval(values, level) if len(values) else (constant, constant)
        return _percentiles(self.draws[:, self.column(label)], level)

    def seedless(self, label: str) -> bool:
        """Whether a column's score is a constant stored without a seed (a deterministic
        baseline): over seeds, with no seed's score of its own, so its interval is that
        constant at both ends, a degenerate interval and not a measured one."""
        if not self.over_seeds:
            return False
        values, constant = self._seed_values(self.column(label))
        return not len(values) and np.isfinite(constant)

    def difference(self, a: str, b: str, level: float = LEVEL) -> tuple[float, float, float]:
        """``(a − b, low, high)``: the paired difference of two columns and its interval
        (Student-t over the per-seed differences when :attr:`over_seeds`)."""
        i, j = self.column(a), self.column(b)
        diff = float(self.point[i] - self.point[j])
        if self.over_seeds:
            values, constant = self.seed_differences(a, b)
            return (diff, *(t_interval(values, level) if len(values) else (constant, constant)))
        low, high = _percentiles(self.draws[:, i] - self.draws[:, j], level)
        return diff, low, high

    def seed_differences(self, a: str, b: str) -> tuple[np.ndarray, float]:
        """Over seeds: ``(per-seed a − b on the seeds both have, the constant difference
        when neither has a seed)``; a side stored only without a seed (a deterministic
        baseline) enters every seed as its constant."""
        (va, ca), (vb, cb) = self._seed_values(self.column(a), paired=True), \
            self._seed_values(self.column(b), paired=True)
        if not (np.isfinite(va).any() or np.isfinite(vb).any()):
            return np.empty(0), ca - cb
        va, vb = np.where(np.isfinite(va), va, ca), np.where(np.isfinite(vb), vb, cb)
        both = np.isfinite(va) & np.isfinite(vb)
        return va[both] - vb[both], float("nan")

    def _seed_values(self, column: int, paired: bool = False) -> tuple[np.ndarray, float]:
        """A column's per-seed scores (finite ones; with ``paired``, one per seed, NaN where
        absent) and its seedless constant (NaN if none)."""
        values = self.per_seed[:, column]
        constant = values[~self.seeded]
        constant = float(constant[np.isfinite(constant)][0]) if np.isfinite(constant).any() else float("nan")
        seeded = values[self.seeded]
        return (seeded if paired else seeded[np.isfinite(seeded)]), constant


def _percentiles(values: np.ndarray, level: float) -> tuple[float, float]:
    values = values[np.isfinite(values)]
    if not len(values):
        return float("nan"), float("nan")
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def hierarchical_bootstrap(blocks: Sequence[SeedBlock], resamples: int = RESAMPLES,
                           seed: int = SEED, resample_seeds: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``(point, draws)`` of every column: the mean over seeds (those where the column has
    cells) of its score, and ``resamples`` draws of it, each from seeds drawn with
    replacement (every seed once, when not ``resample_seeds``) and, for every seed drawn,
    its samples drawn with replacement."""
    if not blocks:
        raise ValueError("no seeds to resample")
    rng = np.random.default_rng(seed)
    columns = blocks[0].average.shape[1]
    picks = rng.integers(len(blocks), size=(resamples, len(blocks))) if resample_seeds \
        else np.broadcast_to(np.arange(len(blocks)), (resamples, len(blocks)))
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
    ``seed``, ``value`` and ``per_sample``), and whether every cell has per-sample data
    that could be resampled. ``columns`` maps a column's label to a boolean mask over
    ``rows`` (its cells); a cell whose record is missing, or whose test samples differ
    from the seed's others, or with no ``metric`` to rescore it, enters as its stored
    value. With two seeds or more every cell enters as its stored value (its score on all
    the seed's test samples, all an interval over seeds needs): no record is decoded."""
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
    rescore = sum(pd.notna(values[code]) for code in order) < 2
    for seed in order:
        at = np.nonzero(used & (seeds == seed))[0]
        cells = rows.iloc[at]
        member = masks[at].astype(float)
        average = np.divide(member, member.sum(axis=0), out=np.zeros_like(member), where=member.sum(axis=0) > 0)
        records = list(cells["per_sample"]) if "per_sample" in cells else [None] * len(cells)
        stored = cells["value"].to_numpy(float)
        block, resampled = _block(records, stored, metric) if rescore else \
            (_constants(stored), _resamplable(records, metric))
        complete &= resampled
        blocks.append(SeedBlock(block[0], block[1], average, member.sum(axis=0) > 0, bool(pd.notna(values[seed]))))
    return blocks, complete


def _resamplable(records: list, metric: Any) -> bool:
    """Whether every cell's record is per-sample data that could be rescored (values, or
    predictions with a ``metric``), read from the records' formats alone."""
    usable = _usable(metric)
    return all(isinstance(r, dict) and r.get("format") in usable for r in records)


def _usable(metric: Any) -> set[str]:
    """The per-sample record formats a cell can be rescored from: values, and predictions
    when there is a ``metric`` to score them."""
    return {VALUES_FORMAT} | ({FORMAT} if metric is not None else set())


def _constants(values: np.ndarray) -> tuple[int, Callable]:
    """``(0, score)`` for cells that enter as their stored ``values`` under any weighting."""
    return 0, lambda w: np.broadcast_to(values, (len(w), len(values)))


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
        return _constants(values), False
    common = max(sorted(set(digests)), key=digests.count)  # a tie goes to the first digest in sorted order
    usable = _usable(metric)
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
    column has a cell. Two seeds or more: Student-t over seeds, each seed scored on all its
    test samples; one seed with per-sample data: a bootstrap over its test samples (the
    module docstring says why)."""
    blocks, complete = seed_blocks(rows, columns, metric)
    if not blocks:
        return None
    if sum(block.seeded for block in blocks) < 2 and any(block.n for block in blocks):
        point, draws = hierarchical_bootstrap(blocks, resamples, resample_seeds=False)
        return Draws(list(columns), point, draws, complete)
    per_seed = np.vstack([_seed_scores(block) for block in blocks])
    seeded = np.array([block.seeded for block in blocks])
    with np.errstate(invalid="ignore", divide="ignore"):
        point = np.nansum(per_seed, axis=0) / np.isfinite(per_seed).sum(axis=0)
    return Draws(list(columns), point, t_draws(per_seed, seeded, resamples), complete, per_seed, seeded)


def _seed_scores(block: SeedBlock) -> np.ndarray:
    """Each column's score in one seed (NaN where it has no cell): the mean of its cells'
    scores on all the seed's test samples (their stored values), summed exactly
    (``math.fsum``), so that two
    columns of equal cells score equal to the last bit whatever the cells' order (a
    difference of equal columns is then exactly 0, not round-off)."""
    scores = block.score(np.ones((1, block.n), dtype=np.int64))[0]
    members = block.average > 0
    return np.array([math.fsum(scores[members[:, j]]) / members[:, j].sum() if block.present[j] else np.nan
                     for j in range(members.shape[1])])


def t_draws(per_seed: np.ndarray, seeded: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """``resamples × columns`` paired draws of the columns' means over seeds from the
    multivariate Student-t their seeds imply (``per_seed``: ``seeds × columns``, NaN where
    a column has no cell): ``mean + g · Vᵀz / √(n(n−1))`` with ``V`` a column's centred
    per-seed values, ``z`` standard normal per seed and ``g = √(ν/χ²_ν)`` shared by all
    columns (ν: the seeds less one). Each column's draws are its mean plus its standard
    error times a t(ν) variate, and a difference of two columns' draws is the t-variate
    of their per-seed differences: percentiles of the draws are the Student-t intervals
    (up to the draws' noise), so what is built on draws (tie groups, the main table's
    aggregate) agrees with :func:`t_interval`. A column with fewer than two seeds, or
    stored only without a seed, is drawn as its constant."""
    rng = np.random.default_rng(seed)
    present = np.isfinite(per_seed)
    counts = present.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nansum(per_seed, axis=0) / counts
        scale = np.where(counts >= 2, 1 / np.sqrt(counts * (counts - 1.0)), 0.0)
    centred = np.where(present & (counts >= 2) & seeded[:, None], per_seed - mean, 0.0)
    freedom = max(int(seeded.sum()) - 1, 1)
    shared = np.sqrt(freedom / rng.chisquare(freedom, size=resamples))
    normal = rng.standard_normal((resamples, len(per_seed)))
    return mean + shared[:, None] * (normal @ centred) * scale


def t_interval(values: Sequence[float] | np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The Student-t interval of the mean of independent values (one per seed), as SciPy's
    ``scipy.stats.ttest_1samp(...).confidence_interval``: ``mean ± t(n−1) · s/√n``.
    NaNs with fewer than two values (one seed says nothing of the spread); ``(v, v)``
    when all values are equal."""
    from scipy.stats import t

    n, mean, sem = _mean_and_error(values)
    if n < 2:
        return float("nan"), float("nan")
    if sem == 0:
        return mean, mean
    low, high = t.interval(level, n - 1, loc=mean, scale=sem)
    return float(low), float(high)


def _mean_and_error(values: Sequence[float] | np.ndarray) -> tuple[int, float, float]:
    """``(n, mean, standard error)`` of the finite ``values``; with all of them equal the
    mean is that value exactly and the error 0 (NaNs for none, error NaN for one)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if len(values) < 2 or np.ptp(values) == 0:
        return len(values), (float(values[0]) if len(values) else float("nan")), \
            (0.0 if len(values) > 1 else float("nan"))
    return len(values), float(values.mean()), float(values.std(ddof=1) / np.sqrt(len(values)))


def t_p_value(values: Sequence[float] | np.ndarray, bar: float, above: bool) -> float:
    """One-sided p-value of the one-sample t-test that the mean of ``values`` (per-seed
    paired differences) lies above ``bar`` (``above``) or below it, as SciPy's
    ``ttest_1samp(values, bar, alternative="greater" | "less")``. With all values equal
    the mean is exact: 0 when it lies strictly on the tested side, else 1; 1 with fewer
    than two values."""
    from scipy.stats import t

    n, mean, sem = _mean_and_error(values)
    if n < 2:
        return 1.0
    if sem == 0:
        return 0.0 if (mean > bar if above else mean < bar) else 1.0
    stat = (mean - bar) / sem
    return float(t.sf(stat, n - 1) if above else t.cdf(stat, n - 1))


def seed_interval(per_seed: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """The 95 % interval of the mean of per-seed values: the Student-t interval over seeds
    (:func:`t_interval`; five seeds are too few for a bootstrap, see the module
    docstring). NaNs for fewer than two seeds."""
    return t_interval([v for v in per_seed if v is not None], level)


def fmt_interval(low: float, high: float, signed: bool = False) -> str:
    """``[low, high]`` with three decimals (``+``/``−`` signs when ``signed``); ``n/a`` when unknown.
    Signed, an end that is not 0 but rounds to it gets the decimals (up to six) that show its
    first digit, so that which side of 0 it lies on, the point of a signed interval, is read
    in digits, not only in a sign on zeros."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return "n/a"
    if not signed:
        return f"[{low:.3f}, {high:.3f}]"
    return f"[{_signed(low)}, {_signed(high)}]"


def _signed(value: float) -> str:
    value += 0.0  # -0.0 (a negated 0) is 0, not below it
    places = 3
    while places < 6 and value != 0 and round(value, places) == 0:
        places += 1
    return f"{value:+.{places}f}"


#: how a page states Student-t intervals over seeds (:attr:`Draws.over_seeds`)
T_NOTE = (f"Intervals: {int(LEVEL * 100)} % Student-t intervals of the mean over seeds (t with n − 1 degrees of "
          f"freedom for n seeds): each seed's score, on its test samples, anchors and initialisations, is one "
          f"independent draw, so the interval carries the variation of whatever the seeds draw (the protocol "
          f"paragraph says what: where every seed tests on the same samples, it is conditional on them); "
          f"differences are the t-interval of the per-seed paired differences (same seeds, same test samples). "
          f"A bootstrap over five seeds under-covers.")


def method_note(draws: Draws | None) -> str:
    """The sentence a page prints under a table of intervals: how they were computed
    (None: the general rule, for a preamble)."""
    if draws is None:
        return (f"Intervals: {int(LEVEL * 100)} % Student-t intervals of the mean over seeds (t with n − 1 degrees "
                f"of freedom for n seeds; each seed's score is one independent draw of what the seeds vary, as "
                f"the page's protocol paragraph says), "
                f"differences the t-interval of the per-seed paired differences; with one seed, percentile "
                f"intervals of a bootstrap over its test samples ({RESAMPLES} resamples, paired), conditional on "
                f"that seed.")
    if draws.over_seeds:
        return T_NOTE
    constants = "" if draws.sample_level else (
        " Some cells were stored without per-sample predictions: they enter as constants.")
    return (f"Intervals: {int(LEVEL * 100)} % percentile intervals of a bootstrap over the one seed's test samples "
            f"({RESAMPLES} resamples, recomputed from the stored per-sample predictions; differences paired on the "
            f"same samples): with one seed they are conditional on it and do not carry the variation between "
            f"seeds.{constants}")
