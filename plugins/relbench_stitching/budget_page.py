"""The anchor-budget kind's page: per method, its score against the number of anchors
(a curve with 95 % intervals over seeds), the table of those scores, and the smallest
budget reaching 95 % of its full-budget score, with an interval.

A method's score at a budget, for one seed, is the mean of the task's first metric over
its stitched pairs (a decoder evaluated on another encoder than its own); a combination
that has no stitched pair (the non-stitched reference: each decoder on its own encoder)
is scored on its own pairs instead and drawn as a line across every budget.

**The 95 % budget.** With ``s(k)`` a method's mean over seeds at budget ``k`` and ``K``
its largest budget, it is the smallest budget ``k`` with ``s(k) ≥ 0.95 · s(K)`` (a
metric where lower is better: ``s(k) ≤ s(K) / 0.95``); ``K`` always qualifies. Its
interval comes from paired draws of the mean curve from the multivariate Student-t its
seeds imply (:func:`relbench.uncertainty.t_draws`: the budgets' anchor sets are nested,
so a seed's scores at different budgets are paired, and each budget's draws have the
spread of its t-interval over seeds), the 95 % budget of each drawn curve; the interval
runs from the 2.5th to the 97.5th percentile of those budgets, each end a budget of the
sweep. Only seeds measured at every budget enter it. (A percentile bootstrap over five
seeds, used before, is narrower than the t-interval and under-covers.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from relbench.api import deferred_import
from relbench.api import (Page, arrow, directions, fmt, fmt_interval, lower_is_better, seed_interval, slug, t_draws,
                          table)
from relbench_stitching.intervals import COMBO
from relbench_stitching.scores import combo_label

pd = deferred_import("pandas")

#: the share of the full-budget score a budget must reach
FRACTION = 0.95
#: that share as the page writes it
SHARE = f"{round(FRACTION * 100)} %"
#: the diagnostic a stitcher that prunes the anchors it is given reports (IRP's farthest-point pruning):
#: the anchors its fit kept, shown beside *used* where any combination reports it
KEPT = "anchors_kept"
#: draws of the mean curve behind the 95 % budget's interval, and the seed of their generator
RESAMPLES = 2000
DRAWS_SEED = 0


def seed_scores(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One row per (combination, budget, seed): ``value``, the mean of ``metric`` over the
    combination's stitched pairs (its own pairs where it has no stitched one), ``used``,
    the mean anchors fitted with, ``kept``, the mean anchors its fit kept of those on its
    stitched pairs (its :data:`KEPT` diagnostic; NaN where it reports none), and
    ``stitched``, whether the value is over stitched pairs."""
    d = df[(df["metric"] == metric) & (df["status"] == "ok")].copy()
    for col in COMBO:
        d[col] = d[col].fillna("-")
    d["off"] = d["source"] != d["target"]
    has_off = d.groupby(COMBO, dropna=False)["off"].transform("any")
    d = d[d["off"] == has_off]
    keys = [*COMBO, "num_anchors", "seed"]
    out = d.groupby(keys, dropna=False).agg(value=("value", "mean"), used=("anchors_used", "mean"),
                                            stitched=("off", "any")).reset_index()
    kept = df[(df["metric"] == KEPT) & (df["status"] == "ok")].copy()
    for col in COMBO:
        kept[col] = kept[col].fillna("-")
    kept = kept[kept["source"] != kept["target"]].groupby(keys, dropna=False)["value"].mean().rename("kept")
    return out.merge(kept.reset_index(), on=keys, how="left") if len(kept) else out.assign(kept=np.nan)


def smallest_budget(curve: np.ndarray, budgets: np.ndarray, higher: bool, fraction: float = FRACTION) -> int:
    """The smallest of ``budgets`` (ascending) whose score in ``curve`` reaches ``fraction``
    of the score at the largest budget (``higher``: the metric's better direction)."""
    full = curve[-1]
    reached = curve >= fraction * full if higher else curve <= full / fraction
    return int(budgets[int(np.argmax(reached))])


def budget_interval(values: np.ndarray, budgets: np.ndarray, higher: bool, fraction: float = FRACTION,
                    resamples: int = RESAMPLES) -> tuple[int, int, int]:
    """The 95 % budget of the mean curve of ``values`` (seeds × budgets, ascending
    budgets) and the ends of its 95 % interval from paired Student-t draws of the mean
    curve (the module says how); one seed gives an interval of that one budget."""
    point = smallest_budget(values.mean(axis=0), budgets, higher, fraction)
    if len(values) < 2:
        return point, point, point
    curves = t_draws(values, np.ones(len(values), bool), resamples, seed=DRAWS_SEED)
    full = curves[:, -1:]
    reached = curves >= fraction * full if higher else curves <= full / fraction
    found = budgets[np.argmax(reached, axis=1)]
    return point, int(np.quantile(found, 0.025, method="lower")), int(np.quantile(found, 0.975, method="higher"))


def method_summary(scores: pd.DataFrame, higher: bool) -> pd.DataFrame:
    """Per combination with anchors: its full-budget score with its interval over seeds,
    and its 95 % budget with its interval (:func:`budget_interval`), best full score first."""
    out = []
    swept = scores[scores["num_anchors"] > 0]
    for combo, g in swept.groupby(COMBO, sort=False):
        wide = g.pivot_table(index="seed", columns="num_anchors", values="value").dropna()
        budgets = np.asarray(wide.columns, dtype=int)
        if not len(wide):
            continue
        k, lo, hi = budget_interval(wide.to_numpy(), budgets, higher)
        full = wide[budgets[-1]]
        at = g[g["num_anchors"] == k]
        out.append({**dict(zip(COMBO, combo)), "full": full.mean(), "full_ci": seed_interval(full.tolist()),
                    "largest": int(budgets[-1]), "budget": k, "budget_lo": lo, "budget_hi": hi,
                    "used": at["used"].mean(), "kept": at["kept"].mean(), "seeds": len(wide)})
    frame = pd.DataFrame(out)
    return frame.sort_values("full", ascending=not higher, kind="stable") if len(frame) else frame


def curve_table(scores: pd.DataFrame) -> pd.DataFrame:
    """Per combination and budget: mean over seeds, its 95 % interval and the anchors used."""
    rows = []
    for (*combo, budget), g in scores.groupby([*COMBO, "num_anchors"], sort=False):
        lo, hi = seed_interval(g["value"].tolist())
        rows.append({**dict(zip(COMBO, combo)), "num_anchors": int(budget), "mean": g["value"].mean(),
                     "lo": lo, "hi": hi, "used": g["used"].mean(), "kept": g["kept"].mean(), "seeds": len(g),
                     "stitched": bool(g["stitched"].all())})
    return pd.DataFrame(rows).sort_values([*COMBO, "num_anchors"], kind="stable")


@dataclass
class Measured:
    """What an anchor-budget page shows, computed once from its rows: the task's first
    ``metric`` and its ``direction``, the per-method ``summary``
    (:func:`method_summary`) and the ``curves`` (:func:`curve_table`)."""

    metric: str
    direction: str
    summary: pd.DataFrame
    curves: pd.DataFrame


def measure(df: pd.DataFrame) -> Measured | None:
    """The page's numbers for the rows ``df`` (:class:`Measured`), or None when no
    finished row has a metric."""
    metrics = [m for m in pd.unique(df["metric"]) if m != "error"] if len(df) else []
    if not metrics:
        return None
    metric = metrics[0]
    direction = directions(df).get(metric, "neutral")
    scores = seed_scores(df, metric)
    if not len(scores):
        return None
    return Measured(metric, direction, method_summary(scores, not lower_is_better(direction)), curve_table(scores))


def budget_page(df: pd.DataFrame, page: Page, measured: Measured | None) -> str:
    """Body of an anchor-budget task's page from the rows ``df`` and their numbers
    (:func:`measure`), setting its headline (:func:`headline_of`)."""
    if measured is None:
        return "_No finished results yet._\n"
    metric, direction, summary, curves = measured.metric, measured.direction, measured.summary, measured.curves
    page.headline = headline_of(summary, curves, metric)
    references = curves[curves["num_anchors"] == 0]
    lines = [f"### Anchors needed for {SHARE} of the full-budget {metric}\n",
             SUMMARY_LEGEND + (KEPT_LEGEND if _pruned(summary) else ""),
             _summary_table(summary, metric, direction),
             f"\n### {arrow(metric, direction)} by anchor budget (mean over seeds [95 % interval])\n",
             CURVE_LEGEND, _curve_table(curves)]
    for _, method in summary.iterrows():
        lines.append(f"\n#### {combo_label(method)}\n")
        lines.append(f"![curve]({_figure(curves, method, references, metric, page)})\n")
    errors = df[df["status"] == "error"]
    if len(errors):
        lines.append(f"\n_{len(errors)} rows failed; the scores above leave them out._\n")
    return "\n".join(lines) + "\n"


#: what the 95 % budget table says, once above it
SUMMARY_LEGEND = (
    f"Per method, the smallest budget whose mean score over seeds reaches {SHARE} of the score at the largest "
    "budget (lower is better: within that share above it). Its interval: the 95 % budgets of "
    f"{RESAMPLES} draws of the mean curve from the multivariate Student-t its seeds imply (paired across budgets: "
    "the budgets' anchor sets are nested, each a prefix of one selection per seed; at each budget the spread of "
    "its t-interval over seeds), from the 2.5th to the 97.5th percentile, each end a budget of the sweep. *used*: "
    "the anchors the decoder was given at that budget (fewer than asked where the selector stops early by "
    "design).\n")
#: what the *kept* column says, where a combination reports its pruned anchors
KEPT_LEGEND = (
    "*kept*: the mean anchors the fit kept of those it was given, where a method prunes them (IRP's farthest-point "
    "pruning to δ: its decoder inverts only the kept ones, so its budget is what pruning starts from); - where a "
    "method keeps every anchor it is given.\n")
#: what the curve table says, once above it
CURVE_LEGEND = (
    "*pairs*: *stitched* (a decoder evaluated on another encoder than its own) or, for a reference without "
    "stitched pairs, *own* (each decoder on its own encoder); a budget of *none*: the stitcher uses no anchors. "
    "Intervals: 95 % Student-t intervals of the mean over seeds.\n")


def _summary_table(summary: pd.DataFrame, metric: str, direction: str) -> str:
    pruned = _pruned(summary)
    rows = [[*(r[c] for c in COMBO), f"{fmt(r['full'])} {fmt_interval(*r['full_ci'])}", r["largest"],
             f"{r['budget']} [{r['budget_lo']}, {r['budget_hi']}]", _used(r["used"]),
             *([_kept(r["kept"])] if pruned else []), r["seeds"]]
            for _, r in summary.iterrows()]
    return table(rows, headers=[*COMBO, f"full-budget {arrow(metric, direction)} [95 % CI]", "largest budget",
                                f"{SHARE} budget [95 % CI]", "used", *(["kept"] if pruned else []), "seeds"])


def _curve_table(curves: pd.DataFrame) -> str:
    pruned = _pruned(curves)
    rows = [[*(r[c] for c in COMBO), r["num_anchors"] or "none", "stitched" if r["stitched"] else "own",
             _used(r["used"]), *([_kept(r["kept"])] if pruned else []),
             f"{fmt(r['mean'])} {fmt_interval(r['lo'], r['hi'])}", r["seeds"]]
            for _, r in curves.iterrows()]
    return table(rows, headers=[*COMBO, "budget", "pairs", "used", *(["kept"] if pruned else []), "score [95 % CI]",
                                "seeds"])


def _pruned(frame: pd.DataFrame) -> bool:
    """Whether any combination of ``frame`` reports the anchors it kept (:data:`KEPT`)."""
    return "kept" in frame and bool(frame["kept"].notna().any())


def _kept(value: float) -> str:
    return "-" if value is None or pd.isna(value) else f"{value:.1f}"


def _used(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:g}"


def _figure(curves: pd.DataFrame, method: pd.Series, references: pd.DataFrame, metric: str, page: Page) -> str:
    """One method's curve on a log-2 budget axis with its intervals, the references as
    dashed lines and its 95 % budget as a dotted one; the PNG's link."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mine = curves[(curves[COMBO] == method[COMBO]).all(axis=1)]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.plot(mine["num_anchors"], mine["mean"], marker="o", label=combo_label(method))
    ax.fill_between(mine["num_anchors"], mine["lo"], mine["hi"], alpha=0.25)
    for _, ref in references.iterrows():
        ax.axhline(ref["mean"], linestyle="--", color="grey", label=f"{combo_label(ref)} (no anchors)")
    ax.axvline(method["budget"], linestyle=":", color="black", label=f"{SHARE} of full: {method['budget']}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(mine["num_anchors"], labels=[str(k) for k in mine["num_anchors"]])
    ax.minorticks_off()
    ax.set_xlabel("anchors (budget)")
    ax.set_ylabel(metric)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return page.save(fig, f"budget-{slug(combo_label(method))}.png")


def headline_of(summary: pd.DataFrame, curves: pd.DataFrame, metric: str) -> dict | None:
    """The index's line: the best method at its full budget, with its 95 % budget and
    the mean of the references without anchors (NaN when none)."""
    if not len(summary):
        return None
    top = summary.iloc[0]
    refs = curves[curves["num_anchors"] == 0]["mean"]
    return {"metric": metric, "best": combo_label(top), "score": float(top["full"]),
            "interval": tuple(float(v) for v in top["full_ci"]),
            "reference": float(refs.max()) if len(refs) else float("nan"),
            "budget": int(top["budget"]), "budget_interval": (int(top["budget_lo"]), int(top["budget_hi"])),
            "largest": int(top["largest"])}


def meaning(headline: dict | None) -> str | None:
    """The sentence ending the page's summary: how few anchors the best method needs."""
    if not headline or "budget" not in headline:
        return None
    lo, hi = headline["budget_interval"]
    return (f"{headline['best']} needs {headline['budget']} of its {headline['largest']} anchors (95 % interval "
            f"{lo}–{hi} over seeds) to reach {SHARE} of its full-budget {headline['metric']}; the curves below show "
            f"each method's score as the budget grows.")
