"""The leaderboard index's ranking across tasks: combinations compared on a common set of
tasks by mean rank, with tests valid at the handful of tasks a suite has.

A ranking across tasks is only fair among combinations measured on the same tasks: a
combination measured on one easy task must not outrank one measured on seven. So the
comparison runs on a *common set*: the most tasks whose orderings all contain the same
(at least three) combinations, and of such sets of tasks the one sharing the most
combinations (:func:`common_set`); every other combination is listed apart with the
number of tasks it was measured on, and is not ranked against the others.

The data are each task's ordering of combinations (the pages hand over orderings, not
scores), so every test works on positions within a task, and with few tasks (blocks):

* **Do the ranks differ?** Friedman's statistic, its p-value from the permutation
  distribution (positions permuted within each task, :func:`scipy.stats.permutation_test`):
  exact over all ``(k!)^n`` orderings when they are at most :data:`RESAMPLES`, otherwise
  Monte Carlo over :data:`RESAMPLES` of them drawn with :data:`SEED` (its least p-value,
  1 / (:data:`RESAMPLES` + 1), is printed as a bound, ``p ≤``). The usual χ²
  approximation needs many tasks (with 2 tasks and 12 combinations it gives 0.075 where
  the permutation p is 0.011). Iman–Davenport's F, an approximation too, is reported
  beside it.
* **Which pairs differ?** Wilcoxon's signed-rank test of each pair's positions over the
  tasks (:func:`scipy.stats.wilcoxon`, exact where SciPy allows: without ties, or with
  ties up to 13 tasks), Holm-corrected over all pairs (statsmodels), as Benavoli, Corani
  & Mangili (JMLR 2016) recommend instead of a post-hoc test on mean ranks (Nemenyi's
  critical difference at 2 tasks exceeds any possible rank gap). When no pair could be
  separated at this number of tasks, even by one combination ahead of another on every
  task, the section says so and how many tasks it would take (:func:`tasks_needed`), and
  no critical-difference diagram is drawn.
* Groups are shown as a compact letter display (:func:`letters`): combinations sharing a
  letter are not separated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce
from itertools import combinations
from operator import and_
from string import ascii_lowercase

from relbench import deferred
import numpy as np

pd = deferred.load("pandas")

#: the significance level of every test, the letters and the diagram
ALPHA = 0.05
#: random orderings the Friedman permutation test draws when there are more than this many
RESAMPLES = 99_999
#: the seed of those draws (the p-value is the same on every run)
SEED = 0
#: names the common set and the statistics of :func:`rank`: part of the index's cache key,
#: so that a section computed by another common set or other statistics is computed again
STATISTICS = "exact-common-set+friedman-permutation+wilcoxon-holm"
#: the most ``min_combos``-subsets of combinations :func:`common_set` enumerates; beyond that, it searches greedily
MAX_SUBSETS = 2_000_000


def _greedy(orders: dict[str, list[str]], tasks: list[str], min_combos: int) -> list[str]:
    """What is left of ``tasks`` after dropping, one at a time until the rest share
    ``min_combos`` combinations or fewer than two remain, the task whose removal most
    enlarges what the others share (on ties, the one with the fewest combinations, then
    the last by name)."""
    tasks = list(tasks)

    def shared(names: list[str]) -> set[str]:
        return set.intersection(*(set(orders[t]) for t in names)) if names else set()

    while len(tasks) >= 2 and len(shared(tasks)) < min_combos:
        tasks.remove(max(tasks, key=lambda t: (len(shared([u for u in tasks if u != t])), -len(orders[t]), t)))
    return tasks


def common_set(orders: dict[str, list[str]], min_combos: int = 3) -> tuple[list[str], list[str]]:
    """``(tasks, combinations)``: the most tasks of ``orders`` (task → its ordering of
    combinations) whose orderings all contain the same ``min_combos`` or more combinations,
    sorted by name, and every combination they all contain, in the order of the first
    task's ordering. Among task sets of that size, the one sharing the most combinations;
    among those, the one whose sorted list of names comes first. Empty lists when no two
    tasks share ``min_combos`` combinations.

    The search is exact: a task set sharing ``min_combos`` combinations shares some
    ``min_combos``-subset S of them, and the most tasks sharing S are exactly those whose
    orderings contain S, so it enumerates the ``min_combos``-subsets of the combinations
    two or more tasks contain (tasks and combinations as bitsets). Where there are more
    than :data:`MAX_SUBSETS` such subsets, a greedy search stands in, which need not find
    the most tasks: starting from every task, drop, one at a time, the task whose removal
    most enlarges what the others share (on ties, the one with the fewest combinations,
    then the last by name)."""
    tasks, masks = _shared(orders, min_combos)
    if len(masks) < min_combos:
        return [], []
    if not searched_exactly(orders, min_combos):
        chosen = _greedy(orders, tasks, min_combos)
    else:
        everyone, most, largest = (1 << len(tasks)) - 1, 2, set()
        for subset in combinations(masks, min_combos):
            together = reduce(and_, subset, everyone)
            size = together.bit_count()
            if size > most:
                most, largest = size, {together}
            elif size == most:
                largest.add(together)
        if not largest:
            return [], []

        def members(mask: int) -> list[str]:
            return [t for i, t in enumerate(tasks) if mask >> i & 1]

        best = min(largest, key=lambda s: (-sum(m & s == s for m in masks), members(s)))
        chosen = members(best)
    if len(chosen) < 2:
        return [], []
    combos = set.intersection(*(set(orders[t]) for t in chosen))
    return chosen, [c for c in orders[chosen[0]] if c in combos]


def _shared(orders: dict[str, list[str]], min_combos: int) -> tuple[list[str], list[int]]:
    """The tasks with at least ``min_combos`` combinations, sorted by name, and per
    combination two or more of them contain, its tasks as a bitset (bit i: ``tasks[i]``)."""
    tasks = sorted(t for t, order in orders.items() if len(order) >= min_combos)
    holders: dict[str, int] = {}
    for i, t in enumerate(tasks):
        for c in set(orders[t]):
            holders[c] = holders.get(c, 0) | 1 << i
    return tasks, [m for m in holders.values() if m.bit_count() >= 2]


def searched_exactly(orders: dict[str, list[str]], min_combos: int = 3) -> bool:
    """Whether :func:`common_set` enumerates ``orders``' subsets of combinations (at most
    :data:`MAX_SUBSETS` of them), so that its common set has the most tasks; False: its
    greedy search stood in."""
    return math.comb(len(_shared(orders, min_combos)[1]), min_combos) <= MAX_SUBSETS


@dataclass
class Friedman:
    """Friedman's test of equal ranks over ``tasks`` blocks of ``combos`` combinations:
    the statistic and its permutation p-value (``exact``: over all ``permutations``
    within-task orderings; otherwise Monte Carlo over :data:`RESAMPLES`), and
    Iman–Davenport's F with its F-approximation p-value."""

    tasks: int
    combos: int
    statistic: float
    p: float
    permutations: int
    exact: bool
    iman_davenport: float
    iman_davenport_p: float


def friedman(positions: np.ndarray) -> Friedman:
    """Friedman's test of ``positions`` (tasks × combinations, 1 = best)."""
    from scipy.stats import f, friedmanchisquare, permutation_test

    n, k = positions.shape
    statistic = friedmanchisquare(*positions.T).statistic
    permutations = math.factorial(k) ** n
    p = permutation_test(tuple(positions.T), lambda *s, axis: friedmanchisquare(*s, axis=axis).statistic,
                         permutation_type="samples", vectorized=True, n_resamples=RESAMPLES, batch=1000,
                         alternative="greater", rng=np.random.default_rng(SEED)).pvalue
    # Iman & Davenport (1980); infinite when every task orders the combinations alike
    spread = n * (k - 1) - statistic
    f_statistic = (n - 1) * statistic / spread if spread > 0 else math.inf
    return Friedman(n, k, float(statistic), float(p), permutations, permutations <= RESAMPLES, float(f_statistic),
                    float(f.sf(f_statistic, k - 1, (k - 1) * (n - 1))))


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment of ``p_values`` (statsmodels), in their order."""
    from statsmodels.stats.multitest import multipletests

    return list(multipletests(p_values, alpha=ALPHA, method="holm")[1])


def wilcoxon_holm(positions: pd.DataFrame) -> pd.DataFrame:
    """Combinations × combinations: the Holm-adjusted p-value of Wilcoxon's two-sided
    signed-rank test of each pair's positions over the tasks (SciPy's default method:
    exact without ties, an exact permutation over signs with ties up to 13 tasks); 1 on
    the diagonal."""
    from scipy.stats import wilcoxon

    combos = list(positions.columns)
    pairs = list(combinations(combos, 2))
    adjusted = holm([float(wilcoxon(positions[a], positions[b]).pvalue) for a, b in pairs])
    table = pd.DataFrame(1.0, index=combos, columns=combos)
    for (a, b), p in zip(pairs, adjusted):
        table.loc[a, b] = table.loc[b, a] = p
    return table


def perfect_record_p(tasks: int) -> float:
    """The smallest p-value Wilcoxon's exact two-sided test can give over ``tasks``
    tasks: one combination ahead of another on every one of them."""
    from scipy.stats import wilcoxon

    return float(wilcoxon(np.arange(1, tasks + 1), method="exact").pvalue)


def separable(tasks: int, combos: int) -> bool:
    """Whether any pair of ``combos`` combinations can be separated at :data:`ALPHA` over
    ``tasks`` tasks: Holm's first step compares the smallest p with α / pairs."""
    return perfect_record_p(tasks) < ALPHA / math.comb(combos, 2)


def tasks_needed(combos: int) -> int:
    """The fewest tasks at which some pair of ``combos`` combinations can be separated at
    :data:`ALPHA` (:func:`separable`)."""
    tasks = 2
    while not separable(tasks, combos):
        tasks += 1
    return tasks


def letters(order: list[str], p_values: pd.DataFrame) -> dict[str, str]:
    """Compact letter display: each combination of ``order`` (best first) → its letters,
    two combinations sharing a letter exactly when ``p_values`` does not separate them
    (p ≥ :data:`ALPHA`). A letter is a maximal group of combinations no two of which are
    separated (networkx's maximal cliques), lettered from the group of the best one."""
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(order)
    graph.add_edges_from((a, b) for a, b in combinations(order, 2) if p_values.loc[a, b] >= ALPHA)
    groups = sorted((sorted(order.index(c) for c in clique) for clique in nx.find_cliques(graph)))
    names = [ascii_lowercase[i] if i < 26 else f"{ascii_lowercase[i // 26 - 1]}{ascii_lowercase[i % 26]}"
             for i in range(len(groups))]
    return {c: "".join(name for name, group in zip(names, groups) if i in group) for i, c in enumerate(order)}


@dataclass
class CrossTaskRanking:
    """The common-set comparison: mean ranks (1 = best), Friedman's test, the pairwise
    Holm-adjusted Wilcoxon p-values and their letter display, whether any pair can be
    separated with this many tasks (``separable``; otherwise ``tasks_needed`` says how
    many it would take), and the combinations left apart (label → number of tasks)."""

    tasks: list[str]
    mean_ranks: pd.Series
    friedman: Friedman
    pairwise: pd.DataFrame
    letters: dict[str, str]
    separable: bool
    tasks_needed: int
    apart: dict[str, int]
    exact: bool  #: the common set was found by enumeration (:func:`searched_exactly`), not the greedy search


def rank(orders: dict[str, list[str]]) -> CrossTaskRanking | None:
    """The comparison of the common set's combinations by their positions within each of
    its tasks (among those combinations only); None without a common set."""
    tasks, combos = common_set(orders)
    if not tasks:
        return None
    # blocks (tasks) × groups (combinations): the position within the task, 1 = best
    positions = pd.DataFrame([[orders[t].index(c) for c in combos] for t in tasks], index=tasks, columns=combos)
    positions = positions.rank(axis=1)
    mean_ranks = positions.mean().sort_values(kind="stable")
    pairwise = wilcoxon_holm(positions)
    counts: dict[str, int] = {}
    for order in orders.values():
        for c in order:
            counts[c] = counts.get(c, 0) + 1
    apart = {c: n for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if c not in combos}
    return CrossTaskRanking(tasks, mean_ranks, friedman(positions.to_numpy()), pairwise,
                            letters(list(mean_ranks.index), pairwise), separable(len(tasks), len(combos)),
                            tasks_needed(len(combos)), apart, searched_exactly(orders))


def marked(combination: str, marks: dict[str, list[str]] | None) -> str:
    """``combination``'s label with its mark after it (``marks``: label → ``[mark,
    meaning]``, the pages' :meth:`~relbench.interfaces.TaskKind.ranking_marks`), or the
    label alone."""
    mark = (marks or {}).get(combination)
    return f"{combination} {mark[0]}" if mark else combination


def legend(shown: list[str], marks: dict[str, list[str]] | None) -> str:
    """What each mark on the ``shown`` combinations means, one sentence per mark, in the
    order first shown; empty without marks."""
    meanings: dict[str, str] = {}
    for combination in shown:
        mark = (marks or {}).get(combination)
        if mark:
            meanings.setdefault(mark[0], mark[1])
    return " ".join(f"{mark}: {meaning}." for mark, meaning in meanings.items())


def diagram(result: CrossTaskRanking, marks: dict[str, list[str]] | None = None):
    """The critical-difference diagram of ``result`` (scikit-posthocs), as a figure:
    combinations by mean rank (labels with their ``marks``: :func:`marked`), joined by a
    bar where Wilcoxon's test (Holm) does not separate them at :data:`ALPHA`. Draw it only
    when ``result.separable``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scikit_posthocs import critical_difference_diagram

    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.28 * len(result.mean_ranks)))
    label = {c: marked(c, marks) for c in result.mean_ranks.index}
    critical_difference_diagram(result.mean_ranks.rename(label), result.pairwise.rename(index=label, columns=label),
                                ax=ax, alpha=ALPHA)
    ax.set_title(f"mean rank over {len(result.tasks)} tasks (1 = best); a bar joins combinations Wilcoxon's "
                 f"signed-rank test (Holm) does not separate at α = {ALPHA:g}", fontsize=8)
    fig.tight_layout()
    return fig


def omnibus_text(test: Friedman) -> str:
    """The section's paragraph on Friedman's test: which p-value, and why. A Monte Carlo
    p-value at its least, 1 / (:data:`RESAMPLES` + 1), is printed as ``p ≤``; every other
    p-value as ``p =``."""
    if test.exact:
        how = f"exact, over all ({test.combos}!)^{test.tasks} = {test.permutations:,} orderings"
    else:
        how = (f"Monte Carlo over {RESAMPLES:,} random orderings, seed {SEED}, as the ({test.combos}!)^{test.tasks} "
               f"≈ {test.permutations:.2g} orderings are too many to enumerate")
    # Monte Carlo's p is (drawn orderings as extreme + 1) / (RESAMPLES + 1); at its least none was as extreme as the
    # observed one, and the draws tell only that p is about that small or smaller
    relation = "≤" if not test.exact and test.p <= 1 / (RESAMPLES + 1) else "="
    verdict = (f"the ranks differ at α = {ALPHA:g}" if test.p < ALPHA else
               "the ranks are not shown to differ (every order below may be chance)")
    return (f"**Do the ranks differ?** Friedman's χ² = {test.statistic:.2f}, its p-value from the permutation "
            f"distribution (positions permuted within each task; {how}) rather than the χ² approximation, which "
            f"needs many more than {test.tasks} tasks: p {relation} {test.p:.2g}: {verdict}. Iman–Davenport's "
            f"F = {test.iman_davenport:.2f} (F({test.combos - 1}, {(test.combos - 1) * (test.tasks - 1)}) "
            f"approximation): p = {test.iman_davenport_p:.2g}.")


def pairwise_text(result: CrossTaskRanking) -> str:
    """The section's paragraph on the pairwise tests: which, and what they can tell."""
    n, k = len(result.tasks), len(result.mean_ranks)
    text = (f"**Which combinations differ?** Wilcoxon's signed-rank test of each pair's positions over the tasks "
            f"(exact where SciPy allows), Holm-corrected over the {math.comb(k, 2)} pairs, rather than a post-hoc "
            f"test of mean ranks (Benavoli, Corani & Mangili, JMLR 2016). *group*: combinations that share a "
            f"letter are not separated at α = {ALPHA:g}.")
    if result.separable:
        return text
    return (text + f" **With {n} tasks no pair can be separated at α = {ALPHA:g}; at least {result.tasks_needed} "
            f"tasks are needed**: a combination ahead of another on every task gets Wilcoxon's exact "
            f"p = {perfect_record_p(n):.2g}, and Holm's correction over {math.comb(k, 2)} pairs asks for "
            f"p < {ALPHA:g}/{math.comb(k, 2)} = {ALPHA / math.comb(k, 2):.2g}.")


def section(result: CrossTaskRanking | None, link: str | None, marks: dict[str, list[str]] | None = None) -> str:
    """The index's "Methods across tasks" section, each combination with its mark where
    ``marks`` gives one (:func:`marked`) and the marks' meanings under the table."""
    from tabulate import tabulate

    if result is None:
        return ("\n## Methods across tasks\n\nNo two tasks rank the same three or more combinations, so no "
                "combination is ranked across tasks.\n")
    rows = [[marked(c, marks), f"{r:.2f}", result.letters[c]] for c, r in result.mean_ranks.items()]
    text = (f"\n## Methods across tasks\n\nCompared on the **common set** of {len(result.tasks)} tasks where all "
            f"{len(result.mean_ranks)} combinations below were measured ({', '.join(result.tasks)}): mean rank "
            f"within each task (1 = best). The pages give each task's ordering of combinations, not their scores, "
            f"so every test works on positions within a task."
            + ("" if result.exact else f" The common set was found by a greedy search (more than {MAX_SUBSETS:,} "
               f"subsets of combinations to enumerate), so more tasks may share three combinations.")
            + f"\n\n{omnibus_text(result.friedman)}\n\n"
            f"{pairwise_text(result)}\n\n"
            + tabulate(rows, headers=["combination", "mean rank", "group"], tablefmt="pipe",
                       disable_numparse=True) + "\n")
    meanings = legend(list(result.mean_ranks.index) + list(result.apart), marks)
    if meanings:
        text += f"\n{meanings}\n"
    if link:
        text += f"\n![critical-difference diagram]({link})\n"
    if result.apart:
        text += ("\nMeasured on other tasks, not ranked against the common set (tasks measured on): "
                 + ", ".join(f"{marked(c, marks)} ({n})" for c, n in result.apart.items()) + ".\n")
    return text
