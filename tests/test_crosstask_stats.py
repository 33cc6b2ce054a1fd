"""The numbers of the index's "Methods across tasks" section (:mod:`relbench.crosstask`),
each checked against SciPy, statsmodels, a brute-force enumeration or a textbook example:
the common set of tasks, Friedman's permutation p-value and how it is printed,
Iman–Davenport's F, Wilcoxon's test with Holm's correction, how many tasks a separation
needs, and the letter display."""

from __future__ import annotations

import math
import random
from itertools import chain, combinations, permutations, product

import numpy as np
import pandas as pd
import pytest
from scipy.stats import f, friedmanchisquare, rankdata, wilcoxon
from statsmodels.stats.multitest import multipletests

from relbench.crosstask import (ALPHA, RESAMPLES, common_set, friedman, holm, letters, omnibus_text,
                                perfect_record_p, rank, section, separable, tasks_needed)

# the release's two tasks that rank the same twelve combinations (positions 1 = best)
FASHION = ["wip", "procrustes", "robust-cosine", "angular", "cosine", "cosine-centred", "concat", "irp",
           "vq-cosine", "euclidean", "l1", "affine"]
ROTTEN = ["robust-cosine", "procrustes", "wip", "cosine-centred", "affine", "angular", "cosine", "irp",
          "euclidean", "l1", "concat", "vq-cosine"]
RELEASE = {"fashion": FASHION, "rotten": ROTTEN}


def _positions(orders: dict[str, list[str]]) -> np.ndarray:
    combos = orders[next(iter(orders))]
    return np.array([[order.index(c) + 1 for c in combos] for order in orders.values()], dtype=float)


def _exact_two_task_p(first: np.ndarray, second: np.ndarray) -> float:
    """Friedman's exact p over the k! orderings of the second task (fixing the first loses
    nothing): with two tasks the statistic grows with the sum of products of positions, whose
    distribution over all permutations is counted by dynamic programming over subsets."""
    k = len(first)
    observed, largest = int(first @ second), k * (k + 1) * (2 * k + 1) // 6
    counts = np.zeros((1 << k, largest + 1), dtype=np.int64)
    counts[0, 0] = 1
    for mask in range(1 << k):
        slot = bin(mask).count("1") + 1  # the next position of the first task to fill
        for value in range(k):
            if not mask >> value & 1:
                step = slot * (value + 1)
                counts[mask | 1 << value, step:] += counts[mask, :largest + 1 - step]
    full = counts[-1]
    assert full.sum() == math.factorial(k)
    return full[observed:].sum() / full.sum()


def _brute_force_common_set(orders: dict[str, list[str]], min_combos: int) -> tuple[list[str], list[str]]:
    """The common set by trying every set of two or more tasks: the most tasks sharing
    ``min_combos`` combinations, then the most combinations, then the first sorted names."""
    names = sorted(orders)
    subsets = chain.from_iterable(combinations(names, n) for n in range(2, len(names) + 1))
    valid = [(list(s), set.intersection(*(set(orders[t]) for t in s))) for s in subsets]
    valid = [(s, shared) for s, shared in valid if len(shared) >= min_combos]
    if not valid:
        return [], []
    tasks, shared = min(valid, key=lambda v: (-len(v[0]), -len(v[1]), v[0]))
    return tasks, [c for c in orders[tasks[0]] if c in shared]


def test_the_common_set_keeps_five_tasks_sharing_three_combinations_over_two_sharing_twelve():
    # the release's situation: two tasks rank the same twelve combinations, five smaller grids share three
    orders = {"bible": [f"x{i}" for i in range(12)], "emoji": [f"x{i}" for i in range(11, -1, -1)]}
    orders.update({f"small{i}": ["a", "b", "c", f"own{i}"] for i in range(5)})
    assert common_set(orders) == ([f"small{i}" for i in range(5)], ["a", "b", "c"])
    assert rank(orders).tasks == [f"small{i}" for i in range(5)]


def test_the_common_set_breaks_ties_by_sorted_task_names_whatever_the_order_of_orders():
    # two pairs of tasks, each sharing three combinations: the pair whose names come first
    orders = {"p1": list("abc"), "p2": list("cba"), "q1": list("xyzuvw"), "q2": list("zyxstr")}
    for seed in range(4):
        shuffled = list(orders.items())
        random.Random(seed).shuffle(shuffled)
        assert common_set(dict(shuffled)) == (["p1", "p2"], list("abc"))
    # of two pairs of the same size, the one sharing more combinations, whatever their names
    assert common_set({**orders, "z1": list("ghij"), "z2": list("jihg")}) == (["z1", "z2"], list("ghij"))


def test_beyond_its_enumeration_bound_the_greedy_search_stands_in_and_the_section_says_so(monkeypatch):
    from relbench import crosstask

    orders = {"bible": [f"x{i}" for i in range(12)], "emoji": [f"x{i}" for i in range(11, -1, -1)]}
    orders.update({f"small{i}": ["a", "b", "c", f"own{i}"] for i in range(5)})
    assert crosstask.searched_exactly(orders) and "greedy" not in section(rank(orders), None)
    monkeypatch.setattr(crosstask, "MAX_SUBSETS", 0)
    assert not crosstask.searched_exactly(orders)
    assert common_set(orders) == (["bible", "emoji"], [f"x{i}" for i in range(12)])  # the greedy's weaker set
    assert "found by a greedy search" in section(rank(orders), None)

def test_the_common_set_is_the_best_of_every_set_of_tasks():
    rng = random.Random(7)
    for _ in range(300):
        pool = list("abcdefgh")[:rng.randint(3, 8)]
        orders = {f"t{i}": rng.sample(pool, rng.randint(0, len(pool))) for i in range(rng.randint(2, 7))}
        min_combos = rng.randint(1, 4)
        assert common_set(orders, min_combos) == _brute_force_common_set(orders, min_combos), (orders, min_combos)


def test_friedman_is_exact_over_every_within_task_ordering_when_they_are_few():
    positions = np.array([[1, 2, 3], [1, 3, 2], [2, 1, 3]], dtype=float)
    result = friedman(positions)
    assert result.exact and result.permutations == math.factorial(3) ** 3 <= RESAMPLES
    observed = friedmanchisquare(*positions.T).statistic
    null = [friedmanchisquare(*np.array([row[list(p)] for row, p in zip(positions, perm)]).T).statistic
            for perm in product(permutations(range(3)), repeat=3)]
    assert result.statistic == pytest.approx(observed)
    assert result.p == pytest.approx(np.mean(np.array(null) >= observed - 1e-9))


def test_friedman_at_two_tasks_and_twelve_combinations_is_close_to_the_exact_p():
    positions = _positions(RELEASE)
    result = friedman(positions)
    assert not result.exact and result.permutations == math.factorial(12) ** 2
    exact = _exact_two_task_p(positions[0], positions[1])
    assert exact == pytest.approx(0.01095, abs=5e-5)
    assert abs(result.p - exact) < 4 * math.sqrt(exact * (1 - exact) / RESAMPLES)
    # the χ² approximation the section used to print is far off at this n
    assert friedmanchisquare(*positions.T).pvalue == pytest.approx(0.0747, abs=5e-5)


def test_a_monte_carlo_p_at_its_least_is_printed_as_a_bound():
    agreeing = friedman(np.tile(np.arange(1.0, 9.0), (5, 1)))  # (8!)^5 orderings: Monte Carlo
    assert not agreeing.exact and agreeing.p == 1 / (RESAMPLES + 1)
    assert "p ≤ 1e-05: the ranks differ" in omnibus_text(agreeing) and "p = 1e-05" not in omnibus_text(agreeing)
    exact = friedman(np.tile(np.arange(1.0, 4.0), (3, 1)))  # an exact p at its least is exact: 6 of 6^3 orderings
    assert exact.exact and exact.p == pytest.approx(1 / 36)
    assert "p = 0.028: the ranks differ" in omnibus_text(exact) and "≤" not in omnibus_text(exact)


def test_iman_davenport_follows_its_formula_from_scipys_friedman_statistic():
    positions = _positions(RELEASE)
    n, k = positions.shape
    chi2 = friedmanchisquare(*positions.T).statistic
    expected = (n - 1) * chi2 / (n * (k - 1) - chi2)
    result = friedman(positions)
    assert result.iman_davenport == pytest.approx(expected)
    assert result.iman_davenport_p == pytest.approx(f.sf(expected, k - 1, (k - 1) * (n - 1)))
    assert result.iman_davenport_p == pytest.approx(0.0066, abs=5e-5)
    agreeing = friedman(np.tile(np.arange(1.0, 5.0), (3, 1)))  # every task orders alike: F is infinite
    assert agreeing.iman_davenport == math.inf and agreeing.iman_davenport_p == 0


def test_holm_matches_statsmodels_and_the_textbook_example():
    # Holm (1979): sort, multiply the i-th smallest by m - i + 1, keep the running maximum
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    p = list(np.random.default_rng(0).uniform(0, 0.2, 15))
    assert holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]))


def test_pairwise_p_values_are_scipys_wilcoxon_with_holms_correction():
    rng = np.random.default_rng(3)
    combos = list("abcd")
    orders = {f"t{i}": list(rng.permutation(combos)) for i in range(6)}
    orders.update({f"u{i}": combos for i in range(3)})  # some agreement, with ties in the differences
    result = rank(orders)
    pairs = list(combinations(result.pairwise.index, 2))
    position = {c: [orders[t].index(c) + 1 for t in result.tasks] for c in combos}
    raw = [wilcoxon(position[a], position[b]).pvalue for a, b in pairs]
    expected = multipletests(raw, method="holm")[1]
    assert [result.pairwise.loc[a, b] for a, b in pairs] == pytest.approx(list(expected))
    assert (np.diag(result.pairwise) == 1).all() and (result.pairwise == result.pairwise.T).all().all()


def _sign_flip_p(x: list[int], y: list[int]) -> float:
    """Wilcoxon's two-sided p by enumerating every sign pattern of the differences (exact,
    with average ranks for tied magnitudes)."""
    d = np.subtract(x, y)
    ranks = rankdata(np.abs(d))
    centre = ranks.sum() / 2
    observed = abs(ranks[d > 0].sum() - centre)
    return float(np.mean([abs(ranks[np.array(s) > 0].sum() - centre) >= observed - 1e-9
                          for s in product([-1, 1], repeat=len(d))]))


def test_wilcoxon_with_tied_differences_is_the_exact_sign_flip_distribution():
    # positions of a: 1 3 2 1 3, of b: 3 1 1 3 2 (differences -2 2 1 -2 1: tied magnitudes)
    orders = {"t1": list("acb"), "t2": list("bca"), "t3": list("bac"), "t4": list("acb"), "t5": list("cba")}
    position = {c: [order.index(c) + 1 for order in orders.values()] for c in "abc"}
    pairs = [("a", "b"), ("a", "c"), ("b", "c")]
    expected = multipletests([_sign_flip_p(position[x], position[y]) for x, y in pairs], method="holm")[1]
    result = rank(orders)
    assert [result.pairwise.loc[x, y] for x, y in pairs] == pytest.approx(list(expected))
    assert rank({"t1": list("abc"), "t2": list("cba")}).pairwise.loc["a", "c"] == pytest.approx(1.0)  # +2, -2


@pytest.mark.parametrize(("combos", "needed"), [(2, 6), (3, 7), (5, 9), (12, 12)])
def test_tasks_needed_is_the_first_n_where_a_perfect_record_survives_holm(combos, needed):
    pairs = math.comb(combos, 2)

    def reachable(n: int) -> bool:  # the best case: one pair with a perfect record, nothing elsewhere
        best = wilcoxon(np.arange(1, n + 1), np.zeros(n), method="exact").pvalue
        return multipletests([best] + [1.0] * (pairs - 1), method="holm")[1][0] < ALPHA

    assert tasks_needed(combos) == needed
    assert reachable(needed) and not reachable(needed - 1)
    assert separable(needed, combos) and not separable(needed - 1, combos)
    assert perfect_record_p(2) == pytest.approx(0.5)


def test_the_release_section_says_no_pair_can_be_separated_and_how_many_tasks_it_takes():
    result = rank(RELEASE)
    assert not result.separable and result.tasks_needed == 12
    text = section(result, None)
    assert "With 2 tasks no pair can be separated at α = 0.05; at least 12 tasks are needed" in text
    assert "Monte Carlo over 99,999" in text and "p = 0.011" in text and "Iman–Davenport's F = 4.96" in text
    assert "p = 0.0066" in text and "Nemenyi" not in text and "critical" not in text
    assert set(result.letters.values()) == {"a"}  # one group, not eleven names a row


def test_the_letter_display_on_a_chain_of_overlapping_groups():
    order = list("abcd")
    p = pd.DataFrame(1.0, index=order, columns=order)
    for x, y in [("a", "c"), ("a", "d"), ("b", "d")]:  # separated; a–b, b–c, c–d are not
        p.loc[x, y] = p.loc[y, x] = 0.01
    assert letters(order, p) == {"a": "a", "b": "ab", "c": "bc", "d": "c"}
    p.loc["c", "d"] = p.loc["d", "c"] = 0.01  # d now separated from every other: a letter of its own
    assert letters(order, p) == {"a": "a", "b": "ab", "c": "b", "d": "c"}


def test_a_marked_combination_carries_its_mark_in_the_table_and_the_apart_list_with_one_meaning():
    orders = {**RELEASE, "third": ["procrustes", "cosine", "wip", "extra"]}
    marks = {"procrustes": ["‡", "needs both spaces"], "extra": ["‡", "needs both spaces"],
             "not-ranked-anywhere": ["†", "never shown"]}
    result = rank(orders)
    text = section(result, None, marks)
    rows = {line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ")}
    assert "procrustes ‡" in rows and "procrustes" not in rows and "cosine" in rows  # unmarked: as before
    assert "extra ‡ (1)" in text  # measured elsewhere: marked in the list of the others
    assert text.count("‡: needs both spaces.") == 1 and "†" not in text  # one meaning, only for marks shown
    assert section(result, None) == section(result, None, {}) and "‡" not in section(result, None)
