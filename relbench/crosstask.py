"""The leaderboard index's ranking across tasks: combinations compared on a common set of
tasks by mean rank, with a Friedman test, a Nemenyi post-hoc test and a
critical-difference diagram (SciPy and scikit-posthocs do the statistics).

A ranking across tasks is only fair among combinations measured on the same tasks: a
combination measured on one easy task must not outrank one measured on seven. So the
comparison runs on a *common set*: the most tasks whose orderings all contain the same
(at least three) combinations (:func:`common_set`); every other combination is listed
apart with the number of tasks it was measured on, and is not ranked against the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import lazy_loader

pd = lazy_loader.load("pandas")

#: the significance level of the post-hoc test and the diagram
ALPHA = 0.05


def common_set(orders: dict[str, list[str]], min_combos: int = 3) -> tuple[list[str], list[str]]:
    """``(tasks, combinations)``: tasks whose orderings all contain every one of the
    combinations, at least ``min_combos`` of them, with as many tasks as a greedy search
    finds (drop, one at a time, the task whose removal most enlarges what the others
    share; fewest combinations first on ties). Empty lists when no two tasks share
    ``min_combos`` combinations."""
    tasks = sorted(t for t, order in orders.items() if len(order) >= min_combos)

    def shared(names: list[str]) -> set[str]:
        return set.intersection(*(set(orders[t]) for t in names)) if names else set()

    while len(tasks) >= 2 and len(shared(tasks)) < min_combos:
        tasks.remove(max(tasks, key=lambda t: (len(shared([u for u in tasks if u != t])), -len(orders[t]), t)))
    if len(tasks) < 2:
        return [], []
    combos = shared(tasks)
    return tasks, [c for c in orders[tasks[0]] if c in combos]


@dataclass
class CrossTaskRanking:
    """The common-set comparison: mean ranks (1 = best), the Friedman test, the
    post-hoc p-values, and the combinations left apart (label → number of tasks)."""

    tasks: list[str]
    mean_ranks: pd.Series
    friedman_statistic: float
    friedman_p: float
    posthoc: pd.DataFrame
    apart: dict[str, int]


def rank(orders: dict[str, list[str]]) -> CrossTaskRanking | None:
    """Mean rank of the common set's combinations within each of its tasks (ranks among
    those combinations only), Friedman's test of equal ranks (SciPy) and Nemenyi's
    post-hoc test (scikit-posthocs); None without a common set."""
    from scikit_posthocs import posthoc_nemenyi_friedman
    from scipy.stats import friedmanchisquare

    tasks, combos = common_set(orders)
    if not tasks:
        return None
    # blocks (tasks) × groups (combinations): the position within the task, 1 = best
    positions = pd.DataFrame([[orders[t].index(c) for c in combos] for t in tasks], index=tasks, columns=combos)
    ranks = positions.rank(axis=1)
    statistic, p = friedmanchisquare(*(positions[c].to_numpy() for c in combos))
    # scikit-posthocs ranks each block itself, higher values first: give it scores
    posthoc = posthoc_nemenyi_friedman(-positions.to_numpy(dtype=float))
    posthoc.index = posthoc.columns = combos
    counts: dict[str, int] = {}
    for order in orders.values():
        for c in order:
            counts[c] = counts.get(c, 0) + 1
    apart = {c: n for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if c not in combos}
    return CrossTaskRanking(tasks, ranks.mean().sort_values(), float(statistic), float(p), posthoc, apart)


def diagram(result: CrossTaskRanking):
    """The critical-difference diagram of ``result`` (scikit-posthocs), as a figure:
    combinations by mean rank, joined by a bar where Nemenyi's test does not tell them
    apart at :data:`ALPHA`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scikit_posthocs import critical_difference_diagram

    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.28 * len(result.mean_ranks)))
    critical_difference_diagram(result.mean_ranks, result.posthoc, ax=ax, alpha=ALPHA)
    ax.set_title(f"mean rank over {len(result.tasks)} tasks (1 = best); a bar joins combinations Nemenyi's "
                 f"test does not separate at α = {ALPHA:g}", fontsize=8)
    fig.tight_layout()
    return fig


def section(result: CrossTaskRanking | None, link: str | None) -> str:
    """The index's "Methods across tasks" section."""
    from tabulate import tabulate

    if result is None:
        return ("\n## Methods across tasks\n\nNo two tasks rank the same three or more combinations, so no "
                "combination is ranked across tasks.\n")
    verdict = ("the ranks differ" if result.friedman_p < ALPHA else
               "the ranks are not shown to differ (every order below may be chance)")
    rows = [[c, f"{r:.2f}", ", ".join(o for o in result.mean_ranks.index
                                       if o != c and result.posthoc.loc[c, o] >= ALPHA) or "-"]
            for c, r in result.mean_ranks.items()]
    text = (f"\n## Methods across tasks\n\nCompared on the **common set** of {len(result.tasks)} tasks where all "
            f"{len(result.mean_ranks)} combinations below were measured ({', '.join(result.tasks)}): mean rank "
            f"within each task (1 = best). Friedman test: χ² = {result.friedman_statistic:.2f}, "
            f"p = {result.friedman_p:.3g}: {verdict}. *Not separated from*: the combinations Nemenyi's post-hoc "
            f"test does not tell apart from it at α = {ALPHA:g}.\n\n"
            + tabulate(rows, headers=["combination", "mean rank", "not separated from"], tablefmt="pipe",
                       disable_numparse=True) + "\n")
    if link:
        text += f"\n![critical-difference diagram]({link})\n"
    if result.apart:
        text += ("\nMeasured on other tasks, not ranked against the common set (tasks measured on): "
                 + ", ".join(f"{c} ({n})" for c, n in result.apart.items()) + ".\n")
    return text
