"""Chance-corrected stitching scores: how far a stitching score goes from chance to the
task's own head.

The chance level of a combination is the stitched score of its *null counterpart*: the
same similarity, stitcher and regularizer with a selector that declares itself a chance
null (:attr:`~relbench.interfaces.AnchorSelector.chance_null`, read from the rows'
stored classes: :func:`~relbench_stitching.declared.chance_nulls`), whose anchors
correspond to nothing across spaces. It has the method's head, anchor budget and tuning,
so the floor is the method's own. The top is the task's own head: the own-space score of
its first ``own-head`` combination (a decoder on its own encoder). Per seed,

    ``(stitched − null) / (own − null)``

(0: no better than chance, 1: as good as the own head, whichever the metric's
direction), then the mean over the seeds that have all three. Its interval: the 95 %
percentiles of the same ratio over the page's paired draws of the means
(:mod:`relbench.uncertainty`: multivariate-t over seeds, or a bootstrap of one seed's
test samples), each draw the ratio of that draw's means (where no draws exist: ± std
over seeds).

A task without a declared chance null takes the label-permutation null instead
(:mod:`relbench_stitching.permutation_null`: the same stitched predictions against the
labels in random order), per seed as above; its interval holds that null at its mean
over seeds and resamples the stitched and own scores through the page's draws.
"""

from __future__ import annotations

import math

import numpy as np

from relbench.api import arrow, deferred_import, Draws, fmt, fmt_interval, seed_interval, table
from relbench_stitching.intervals import COMBO, draw_label
from relbench_stitching.permutation_null import PERMUTATIONS, null_per_seed
from relbench_stitching.scores import Scored, combo_label, score_text

pd = deferred_import("pandas")


def chance_ratio(score: pd.Series, null: pd.Series, own: pd.Series) -> pd.Series:
    """``(score − null) / (own − null)`` per index entry (seed, or draw) present in all
    three; NaN where the own head is no better than chance (``own == null``)."""
    frame = pd.concat([score, null, own], axis=1, join="inner").astype(float)
    s, n, o = (frame.iloc[:, i].to_numpy() for i in range(3))
    span = o - n
    return pd.Series(np.divide(s - n, span, out=np.full_like(span, np.nan), where=span != 0), index=frame.index)


def per_seed(df: pd.DataFrame, combo: tuple, metric: str, own: bool) -> pd.Series:
    """Mean over ``combo``'s finished cells of ``metric`` per seed: its own-space cells
    (the diagonal) when ``own``, else its stitched ones (a prepared frame)."""
    rows = df[(df["metric"] == metric) & (df["status"] == "ok") & (df[COMBO] == list(combo)).all(axis=1)]
    rows = rows[(rows["source"] == rows["target"]) == own]
    return rows.groupby("seed")["value"].mean()


def null_counterparts(df: pd.DataFrame) -> dict[tuple, tuple]:
    """Each ranked-role combination of a prepared frame whose null counterpart is in it →
    that counterpart (the first, in row order, when several nulls are)."""
    combos = df.drop_duplicates(COMBO)
    nulls = [tuple(c) for c in combos.loc[combos["chance_null"], COMBO].itertuples(index=False)]
    methods = combos[~combos["chance_null"] & (combos["role"] == "method")]
    out = {}
    for combo in (tuple(c) for c in methods[COMBO].itertuples(index=False)):
        match = [n for n in nulls if n[1:] == combo[1:]]
        if match:
            out[combo] = match[0]
    return out


def own_head(df: pd.DataFrame) -> tuple | None:
    """The task's first ``own-head`` combination of a prepared frame, None without one."""
    heads = df.loc[df["role"] == "own-head", COMBO].drop_duplicates()
    return tuple(heads.iloc[0]) if len(heads) else None


def chance_corrected(scored: Scored, metric_plugin=None) -> pd.DataFrame:
    """Per ranked combination (in the page's order) with a null, for the first metric: the
    null counterpart (None for the permutation null), the own head, the ratio (``point``,
    per seed then the mean), ``low``/``high`` (from the page's draws; NaN without them),
    ``std`` over seeds and ``seeds``; for the permutation null also its per-seed mean
    ``null_score`` and ``null_low``/``null_high`` (its interval over seeds). The nulls are
    the declared chance nulls where the rows hold any, else (given ``metric_plugin``, the
    page's plugin of the first metric) the label-permutation null of every combination
    with stored predictions. Empty without a null or an own head."""
    df, metric = scored.df, scored.metrics[0]
    pairs, own = null_counterparts(df), own_head(df)
    if own is None or (not pairs and metric_plugin is None):
        return pd.DataFrame()
    own_scores = per_seed(df, own, metric, own=True)
    out = []
    for combo in (tuple(c) for c in scored.methods[COMBO].itertuples(index=False)):
        stitched = per_seed(df, combo, metric, own=False)
        if pairs:
            if combo not in pairs:
                continue
            null, extra = per_seed(df, pairs[combo], metric, own=False), {}
            low, high = _interval(scored.draws, combo, pairs[combo], own)
        else:
            null = null_per_seed(df, combo, metric, metric_plugin)
            if null.empty:
                continue
            level = float(null.mean())
            bounds = seed_interval(list(null))
            extra = {"null_score": level, "null_low": bounds[0], "null_high": bounds[1]}
            low, high = _interval_at(scored.draws, combo, level, own)
        ratio = chance_ratio(stitched, null, own_scores).dropna()
        out.append({"combo": combo, "null": pairs.get(combo), "own": own,
                    "point": ratio.mean() if len(ratio) else np.nan, "low": low, "high": high,
                    "std": ratio.std(ddof=0) if len(ratio) > 1 else np.nan, "seeds": len(ratio), **extra})
    return pd.DataFrame(out)


def _interval(draws: Draws | None, combo: tuple, null: tuple, own: tuple) -> tuple[float, float]:
    """The page's percentile interval of the ratio over its paired draws of the means."""
    labels = (draw_label(combo, "stitched"), draw_label(null, "stitched"), draw_label(own, "own"))
    if draws is None or not all(label in draws.labels for label in labels):
        return math.nan, math.nan
    ratio = chance_ratio(*(pd.Series(draws.draws[:, draws.column(label)]) for label in labels))
    return Draws(["ratio"], np.array([np.nan]), ratio.to_numpy()[:, None], draws.sample_level).interval("ratio")


def _interval_at(draws: Draws | None, combo: tuple, null: float, own: tuple) -> tuple[float, float]:
    """The percentile interval of the ratio over the page's paired draws of the stitched
    and own scores, with the null held at ``null``."""
    labels = (draw_label(combo, "stitched"), draw_label(own, "own"))
    if draws is None or not all(label in draws.labels for label in labels):
        return math.nan, math.nan
    stitched, top = (pd.Series(draws.draws[:, draws.column(label)]) for label in labels)
    ratio = chance_ratio(stitched, pd.Series(null, index=stitched.index), top)
    return Draws(["ratio"], np.array([np.nan]), ratio.to_numpy()[:, None], draws.sample_level).interval("ratio")


def chance_section(scored: Scored, metric_plugin=None) -> str:
    """The page's table *From chance to own head* (:func:`chance_corrected`) beside the raw
    scores; empty when the rows give no null (declared, or by permutation with
    ``metric_plugin``) and no own head."""
    found = chance_corrected(scored, metric_plugin)
    if not len(found):
        return ""
    metric = scored.metrics[0]
    base = scored.scores[metric]
    by_combo = {tuple(r[COMBO]): r for _, r in base.iterrows()}
    own = combo_label(dict(zip(COMBO, found["own"].iloc[0])))
    header = f"{arrow(metric, scored.direction[metric])} [95 % CI]"
    permuted = "null_score" in found
    rows = [[combo_label(dict(zip(COMBO, r["combo"]))),
             *([] if permuted else [combo_label(dict(zip(COMBO, r["null"])))]),
             score_text(by_combo.get(r["combo"]), "stitched"),
             f"{fmt(r['null_score'])} {fmt_interval(r['null_low'], r['null_high'])}" if permuted
             else score_text(by_combo.get(r["null"]), "stitched"),
             score_text(by_combo.get(r["own"]), "own"), _ratio(r)] for _, r in found.iterrows()]
    legend = PERMUTATION_LEGEND.format(own=own, permutations=PERMUTATIONS) if permuted \
        else CHANCE_LEGEND.format(own=own)
    null_header = f"null (labels permuted) {arrow(metric, scored.direction[metric])} [95 % CI over seeds]" \
        if permuted else f"null {header}"
    return (f"\n### From chance to own head ({metric})\n\n" + legend + "\n\n"
            + table(rows, headers=["combination", *([] if permuted else ["null"]), f"stitched {header}", null_header,
                                   f"own head {header}", "from chance to own [95 % CI]"],
                    keep=1 if permuted else 2) + "\n")


#: what the table *From chance to own head* shows, said once above it
CHANCE_LEGEND = (
    "Each stitching score as a fraction of the way from chance to the own head: (stitched − null) / (own − "
    "null), per seed, then the mean over seeds. *null*: the stitched score of the same similarity, stitcher and "
    "regularizer with anchors that correspond to nothing across spaces (a selector declared a chance null: every "
    "space its own order of the same real anchors), so with the method's head, budget and tuning; *own*: the own "
    "head ({own}) on its own encoder. 0: no better than chance; 1: as good as the own head. Interval: 95 % "
    "percentiles of the ratio over the page's paired draws of the means (each the ratio of one draw's means), or "
    "± std over seeds where no draws exist. Raw scores beside it, as in the ranking.")


#: the same table's legend where the null is the label-permutation one
PERMUTATION_LEGEND = (
    "Each stitching score as a fraction of the way from chance to the own head: (stitched − null) / (own − "
    "null), per seed, then the mean over seeds. *null*: the task declares no chance-null selector, so the "
    "label-permutation null: the same stitched predictions scored against the test labels in a random order "
    "({permutations} seeded permutations per stitched cell; the chance level given the predicted and true class "
    "frequencies, weaker than anchors that correspond to nothing); *own*: the own head ({own}) on its own "
    "encoder. 0: no better than chance; 1: as good as the own head. Interval: 95 % percentiles of the ratio over "
    "the page's paired draws of the stitched and own scores' means with the null at its mean, or ± std over "
    "seeds where no draws exist. Raw scores beside it, as in the ranking.")


def _ratio(r: pd.Series) -> str:
    if math.isnan(r["point"]):
        return "n/a"
    if not (math.isnan(r["low"]) or math.isnan(r["high"])):
        return f"{fmt(r['point'])} {fmt_interval(r['low'], r['high'])}"
    return fmt(r["point"], r["std"])
