"""Intervals, paired differences, tie groups and claims (relbench.uncertainty): agreement
with SciPy on one level, coverage at the nominal rate, ties and clear differences."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from relbench.samples import predictions
from relbench.testing import check_metric
from relbench.uncertainty import (FAILS, HOLDS, INCONCLUSIVE, SeedBlock, bootstrap_columns,
                                  hierarchical_bootstrap, indistinguishable, method_note, seed_interval, t_interval,
                                  t_draws, t_p_value, verdict, with_samples)
from relbench_metrics.classification import MAE, MSE, Accuracy, MacroF1, WeightedF1


@pytest.mark.parametrize("metric", [Accuracy(), WeightedF1(), MacroF1(), MAE(), MSE()], ids=lambda m: m.name)
def test_vectorised_weighted_scores_agree_with_repeated_samples(metric):
    check_metric(metric)
    check_metric(metric, classes=12, samples=300, cells=40, resamples=3, seed=1)  # more than one block of cells


def _mean_block(values: np.ndarray) -> SeedBlock:
    """One seed whose single column is the mean of ``values`` (one value per sample)."""
    return SeedBlock(len(values), lambda w: (w @ values / w.sum(axis=1))[:, None], np.ones((1, 1)), np.ones(1, bool))


def test_one_level_agrees_with_scipy_bootstrap():
    values = np.random.default_rng(3).normal(0.7, 0.2, 400)
    point, draws = hierarchical_bootstrap([_mean_block(values)], resamples=4000)
    ours = np.percentile(draws[:, 0], [2.5, 97.5])
    scipy = stats.bootstrap((values,), np.mean, n_resamples=4000, method="percentile",
                            random_state=np.random.default_rng(1)).confidence_interval
    assert point[0] == pytest.approx(values.mean())
    assert ours == pytest.approx([scipy.low, scipy.high], abs=0.004)
    assert draws[:, 0].std() == pytest.approx(values.std() / np.sqrt(len(values)), rel=0.08)


def _coverage(seeds: int, seed_sd: float, trials: int = 200) -> float:
    rng = np.random.default_rng(7)
    covered = 0
    for trial in range(trials):
        means = 0.6 + rng.normal(0, seed_sd, seeds)
        blocks = [_mean_block((rng.random(300) < m).astype(float)) for m in means]
        _, draws = hierarchical_bootstrap(blocks, resamples=300, seed=trial)
        low, high = np.percentile(draws[:, 0], [2.5, 97.5])
        covered += low <= 0.6 <= high
    return covered / trials


def test_intervals_cover_the_true_mean_at_the_nominal_rate():
    # samples only (the seed level does not vary), then seeds that vary as much as the samples
    assert 0.92 <= _coverage(seeds=1, seed_sd=0.0) <= 0.985
    assert 0.92 <= _coverage(seeds=20, seed_sd=0.03) <= 0.985


def _store(scores: dict[str, list[float]], seeds=(0, 1, 2), n=600, pairs=2, rng_seed=0) -> pd.DataFrame:
    """Rows of a stitching-like store: per method, seed and pair a cell whose predictions are
    right with the method's probability (same test samples for every cell of a seed)."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    for seed in seeds:
        ids = [f"s{seed}-{i}" for i in range(n)]
        y = rng.integers(0, 4, n)
        shared = rng.random((pairs, n))  # methods with equal accuracy make the same mistakes
        for method, accuracy in scores.items():
            for pair in range(pairs):
                right = shared[pair] < accuracy[pair % len(accuracy)]
                pred = np.where(right, y, (y + 1) % 4)
                rows.append({"seed": seed, "method": method, "pair": pair, "metric": "accuracy",
                             "value": float(right.mean()), "unit": f"{method}-{seed}",
                             "per_sample": predictions(ids, y, pred)})
    return pd.DataFrame(rows)


def _draws(df: pd.DataFrame):
    return bootstrap_columns(df, {m: df["method"] == m for m in pd.unique(df["method"])}, Accuracy(), resamples=500)


def test_point_estimate_is_the_mean_over_seeds_of_the_mean_over_cells():
    df = _store({"a": [0.8, 0.6], "b": [0.5]})
    draws = _draws(df)
    expected = df[df["method"] == "a"].groupby("seed")["value"].mean().mean()
    assert draws.point[draws.column("a")] == pytest.approx(expected)
    low, high = draws.interval("a")
    assert low < expected < high


def test_identical_methods_are_a_tie_and_a_claim_between_them_is_inconclusive():
    draws = _draws(_store({"a": [0.7], "twin": [0.7]}))
    diff, low, high = draws.difference("a", "twin")
    assert diff == 0 and indistinguishable(low, high)
    assert verdict(low, high) == INCONCLUSIVE


def test_a_clearly_better_method_is_separated_and_its_claim_holds():
    draws = _draws(_store({"good": [0.85], "bad": [0.55]}))
    diff, low, high = draws.difference("good", "bad")
    assert diff == pytest.approx(0.30, abs=0.05) and not indistinguishable(low, high)
    assert verdict(low, high) == HOLDS
    assert verdict(*draws.difference("bad", "good")[1:]) == FAILS


def test_a_small_real_difference_inside_the_margin_is_inconclusive_and_a_margin_can_be_set():
    draws = _draws(_store({"a": [0.705], "b": [0.7]}, n=3000))
    _, low, high = draws.difference("a", "b")
    assert verdict(low, high, margin=0.01) == INCONCLUSIVE
    assert verdict(low, high, margin=-0.1) == HOLDS


def test_cells_without_per_sample_data_enter_as_constants_and_are_flagged():
    df = _store({"a": [0.7], "b": [0.6]}).assign(per_sample=None)
    draws = _draws(df)
    assert not draws.sample_level
    assert draws.point[draws.column("a")] == pytest.approx(df[df["method"] == "a"]["value"].mean())


def test_records_are_found_on_another_metric_row_of_the_same_cell():
    df = _store({"a": [0.7]})
    other = df.assign(metric="weighted_f1", per_sample=None)
    found = with_samples(other, pd.concat([df, other]), ["method", "pair"])
    assert [r["ids"] for r in found["per_sample"]] == [r["ids"] for r in df["per_sample"]]


def _stitching_rows(accuracy: dict[str, float], n=800, seeds=(0, 1)) -> pd.DataFrame:
    """Stitching rows over encoders a, b, c: per similarity, cells right with its probability."""
    rng = np.random.default_rng(5)
    rows = []
    for seed in seeds:
        ids = [f"{seed}-{i}" for i in range(n)]
        y = rng.integers(0, 3, n)
        noise = rng.random(n)
        for sim, p in accuracy.items():
            for target in "abc":
                for source in "abc":
                    pred = np.where(noise < p, y, (y + 1) % 3)
                    rows.append({"selector": "random", "similarity": sim, "stitcher": "relative", "regularizer": None,
                                 "source": source, "target": target, "seed": seed, "metric": "accuracy",
                                 "value": float((pred == y).mean()), "direction": "higher", "status": "ok",
                                 "error": None, "extra": {}, "unit": f"{sim}-{target}-{seed}",
                                 "per_sample": predictions(ids, y, pred)})
    return pd.DataFrame(rows)


def test_the_stitching_page_groups_ties_with_the_best_and_shows_intervals(tmp_path):
    from relbench.pages import Page
    from relbench_stitching.page import stitching_page

    df = _stitching_rows({"cosine": 0.8, "twin": 0.8, "worse": 0.6})
    text = stitching_page(df, Page(tmp_path, "t", metrics={"accuracy": Accuracy()}))
    rows: dict[str, str] = {}  # a wide ranking is split into parts: a row's parts joined
    for line in text.splitlines():
        if "| random" in line:
            rows[line.split("|")[3].strip()] = rows.get(line.split("|")[3].strip(), "") + line
    assert rows["cosine"].count("**") == 2 and rows["twin"].count("**") == 2  # one group, not an order
    # the difference to the best: the t-interval of its two seeds' paired differences (0.618 - 0.807)
    stitched = df[df["source"] != df["target"]].groupby(["similarity", "seed"])["value"].mean()
    paired = stats.ttest_1samp(stitched["worse"] - stitched["cosine"], 0).confidence_interval()
    assert "**" not in rows["worse"] and f"| -0.190 [{paired.low:.3f}, {paired.high:.3f}] |" in rows["worse"]
    assert "Student-t intervals of the mean over seeds" in text


def _seed_store(seed_sd: float, seeds: int, rng: np.random.Generator, n: int = 300) -> pd.DataFrame:
    """One column's rows: per seed a cell whose per-sample values are hits of a rate drawn
    around 0.6 with ``seed_sd`` (the seeds vary that much more than the samples)."""
    from relbench.samples import values

    return pd.DataFrame([{"seed": seed, "method": "a", "value": float(hits.mean()), "per_sample": values(
        [f"{seed}-{i}" for i in range(n)], hits)} for seed, hits in enumerate(
        (rng.random(n) < rate).astype(float) for rate in 0.6 + rng.normal(0, seed_sd, seeds))])


def test_with_per_sample_data_and_several_seeds_intervals_are_t_intervals_over_seed_scores():
    df = _store({"a": [0.8, 0.6], "b": [0.65]}, seeds=(0, 1, 2, 3, 4))
    draws = _draws(df)
    assert draws.over_seeds and draws.sample_level
    per_seed = {m: df[df["method"] == m].groupby("seed")["value"].mean().to_numpy() for m in ("a", "b")}
    expected = stats.ttest_1samp(per_seed["a"], 0).confidence_interval()
    assert draws.interval("a") == pytest.approx((expected.low, expected.high))
    paired = stats.ttest_1samp(per_seed["a"] - per_seed["b"], 0).confidence_interval()
    assert draws.difference("a", "b")[1:] == pytest.approx((paired.low, paired.high))


def test_the_pages_intervals_cover_when_seeds_vary_more_than_samples():
    # between-/within-seed variance 10 with five seeds: the hierarchical bootstrap the pages
    # used covered about 0.86 (benchmarks/interval_coverage.py); now t over the seeds' scores
    rng = np.random.default_rng(7)
    within = np.sqrt(0.6 * 0.4 / 300)
    covered = []
    for _ in range(300):
        df = _seed_store(np.sqrt(10) * within, 5, rng)
        low, high = bootstrap_columns(df, {"a": df["method"] == "a"}, None, resamples=50).interval("a")
        covered.append(low <= 0.6 <= high)
    assert 0.92 <= np.mean(covered) <= 0.98


def test_one_seed_is_a_bootstrap_over_its_test_samples_and_says_so():
    df = _seed_store(0.0, 1, np.random.default_rng(3), n=900)
    draws = bootstrap_columns(df, {"a": df["method"] == "a"}, None, resamples=4000)
    assert not draws.over_seeds and "conditional on it" in method_note(draws)
    hits = df["per_sample"].iloc[0]
    from relbench.samples import read_values
    v = read_values(hits)
    low, high = draws.interval("a")
    assert high - low == pytest.approx(2 * 1.96 * v.std() / np.sqrt(len(v)), rel=0.08)
    # a seedless row beside the one seed stays its own group: never drawn in the seed's place
    base = pd.DataFrame([{"seed": None, "method": "base", "value": 0.2, "per_sample": None}])
    both = pd.concat([df, base], ignore_index=True)
    paired = bootstrap_columns(both, {m: both["method"] == m for m in ("a", "base")}, None, resamples=500)
    assert (paired.draws[:, paired.column("base")] == 0.2).all()
    assert np.isfinite(paired.draws[:, paired.column("a")]).all()


def test_per_sample_values_give_a_sample_level_interval_in_summary_tables():
    from relbench.samples import values
    from relbench_relreps.tasks.common import summary_table

    v = np.random.default_rng(2).random(900)  # one seedless cell, e.g. a per-word Jaccard
    df = pd.DataFrame([{"representation": "absolute", "metric": "jaccard@10", "seed": None, "status": "ok",
                        "value": float(v.mean()), "per_sample": values([f"w{i}" for i in range(900)], v)}])
    table = summary_table(df, ["representation"], "metric")
    low, high = map(float, table.split("[")[1].split("]")[0].split(", "))
    assert f"{v.mean():.3f} [" in table
    assert high - low == pytest.approx(2 * 1.96 * v.std() / np.sqrt(900), abs=0.004)


def test_a_correlation_s_interval_is_cut_at_its_range():
    from relbench_relreps.tasks.common import summary_table

    r = [0.95, 0.2, 0.99, 0.6, 0.98]  # five seeds: the t-interval of the mean reaches past 1
    assert t_interval(r)[1] > 1
    df = pd.DataFrame([{"bottleneck": "relative", "metric": "pearson_r", "seed": s, "status": "ok", "value": v}
                       for s, v in enumerate(r)])
    low = t_interval(r)[0]
    assert f"{np.mean(r):.3f} [{low:.3f}, 1.000]" in summary_table(df, ["bottleneck"], "metric", bounds=(-1.0, 1.0))
    assert f"{t_interval(r)[1]:.3f}]" in summary_table(df, ["bottleneck"], "metric")  # unbounded: as computed


def test_intervals_do_not_depend_on_the_order_rows_were_stored_in():
    # a run on Ray stores units as they finish, a local run in plan order: same rows, same page
    df = _store({"a": [0.8, 0.6], "b": [0.7]})
    df.loc[df["method"] == "b", "seed"] = np.nan  # rows without a seed form a group of their own
    shuffled = df.sample(frac=1, random_state=3)
    first, second = _draws(df), _draws(shuffled)
    # equal but for the order of a sum inside a seed's cells (round-off)
    assert np.allclose(first.draws, second.draws, rtol=0, atol=1e-12, equal_nan=True)
    for column in ("a", "b"):
        assert first.interval(column) == pytest.approx(second.interval(column), abs=1e-12)


def test_seed_intervals_are_student_t_intervals_as_scipy_computes_them():
    values = [0.71, 0.69, 0.74, 0.66, 0.70]
    expected = stats.ttest_1samp(values, 0).confidence_interval(0.95)
    assert seed_interval(values) == pytest.approx((expected.low, expected.high))
    assert t_interval(values) == seed_interval(values)
    assert seed_interval([0.7, 0.7, 0.7]) == (0.7, 0.7)  # no spread: the mean is exact
    assert all(np.isnan(seed_interval([0.7])))  # one seed says nothing of the spread
    assert all(np.isnan(seed_interval([])))


@pytest.mark.parametrize("bar", [-0.02, 0.0, 0.01, 0.05])
def test_seeds_only_p_values_are_one_sample_t_tests(bar):
    differences = np.array([0.03, 0.01, 0.04, -0.005, 0.02])
    for above, alternative in ((True, "greater"), (False, "less")):
        expected = stats.ttest_1samp(differences, bar, alternative=alternative).pvalue
        assert t_p_value(differences, bar, above) == pytest.approx(expected)
    assert t_p_value([0.02, 0.02], 0.01, above=True) == 0.0 and t_p_value([0.02, 0.02], 0.01, above=False) == 1.0
    assert t_p_value([0.5], 0.0, above=True) == 1.0  # one seed: not tested


def test_seed_intervals_cover_the_true_mean_with_five_seeds():
    # the percentile bootstrap used before covered about 83 % with five normal seeds
    rng = np.random.default_rng(11)
    covered = [low <= 0 <= high for low, high in (seed_interval(rng.normal(0, 1, 5)) for _ in range(2000))]
    assert 0.935 <= np.mean(covered) <= 0.965


def test_without_per_sample_data_draws_give_t_intervals_over_seeds():
    df = _store({"a": [0.7], "b": [0.6]}, seeds=(0, 1, 2, 3, 4)).assign(per_sample=None)
    df["value"] += df["seed"] * 0.01 * (df["method"] == "a")  # a's advantage grows over the seeds
    draws = _draws(df)
    assert draws.over_seeds and "Student-t" in method_note(draws)
    per_seed = {m: df[df["method"] == m].groupby("seed")["value"].mean().to_numpy() for m in ("a", "b")}
    expected = stats.ttest_1samp(per_seed["a"], 0).confidence_interval()
    assert draws.interval("a") == pytest.approx((expected.low, expected.high))
    diff, low, high = draws.difference("a", "b")
    paired = stats.ttest_1samp(per_seed["a"] - per_seed["b"], 0).confidence_interval()
    assert diff == pytest.approx((per_seed["a"] - per_seed["b"]).mean())
    assert (low, high) == pytest.approx((paired.low, paired.high))
    # with per-sample data and one seed: a bootstrap over its test samples
    assert not _draws(_store({"a": [0.7], "b": [0.6]}, seeds=(0,))).over_seeds


def test_a_seedless_column_is_a_constant_in_seed_differences():
    df = pd.DataFrame([{"seed": s, "method": "a", "value": v, "per_sample": None}
                       for s, v in enumerate([0.5, 0.6, 0.7])]
                      + [{"seed": None, "method": "base", "value": 0.4, "per_sample": None}])
    draws = bootstrap_columns(df, {m: df["method"] == m for m in ("a", "base")}, None)
    assert draws.interval("base") == (0.4, 0.4)  # deterministic: no spread
    differences, _ = draws.seed_differences("a", "base")
    assert differences == pytest.approx([0.1, 0.2, 0.3])
    expected = stats.ttest_1samp([0.1, 0.2, 0.3], 0).confidence_interval()
    assert draws.difference("a", "base")[1:] == pytest.approx((expected.low, expected.high))


def test_seeds_only_draws_are_paired_student_t_draws():
    # what is built on the draws (tie groups, the main table) agrees with the t-intervals
    rng = np.random.default_rng(4)
    per_seed = np.column_stack([rng.normal(0.7, 0.02, 5), rng.normal(0.65, 0.03, 5)])
    per_seed[:, 1] += 0.5 * (per_seed[:, 0] - 0.7)  # correlated over seeds, as paired columns are
    draws = t_draws(per_seed, np.ones(5, bool), resamples=40000)
    for column in range(2):
        assert np.percentile(draws[:, column], [2.5, 97.5]) == pytest.approx(t_interval(per_seed[:, column]), abs=2e-3)
    assert np.percentile(draws[:, 0] - draws[:, 1], [2.5, 97.5]) == \
        pytest.approx(t_interval(per_seed[:, 0] - per_seed[:, 1]), abs=2e-3)
    constant = t_draws(np.array([[0.4, np.nan], [np.nan, 0.3]]), np.array([False, True]))
    assert (constant[:, 0] == 0.4).all() and (constant[:, 1] == 0.3).all()  # one value: no spread drawn


def test_a_signed_interval_shows_the_first_digit_of_an_end_that_rounds_to_zero():
    from relbench.uncertainty import fmt_interval

    assert fmt_interval(-0.013, -0.0004, signed=True) == "[-0.013, -0.0004]"  # was "[-0.013, -0.000]"
    assert fmt_interval(-0.0000004, 0.02, signed=True) == "[-0.000000, +0.020]"  # beyond six places: zeros
    assert fmt_interval(0.0, 0.5, signed=True) == "[+0.000, +0.500]"
    assert fmt_interval(-0.0, 0.5, signed=True) == "[+0.000, +0.500]"  # a negated 0 is not below 0
    assert fmt_interval(-0.0004, 0.5) == "[-0.000, 0.500]"  # unsigned intervals keep three decimals
