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
percentiles of the same ratio over the page's paired bootstrap draws, each draw the
ratio of that resample's means (where no draws exist: ± std over seeds).
"""

from __future__ import annotations

import math

import numpy as np

from relbench.api import arrow, deferred_import, Draws, fmt, fmt_interval, table
from relbench_stitching.intervals import COMBO, draw_label
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


def chance_corrected(scored: Scored) -> pd.DataFrame:
    """Per ranked combination (in the page's order) with a null counterpart, for the first
    metric: the counterpart, the own head, the ratio (``point``, per seed then the mean),
    ``low``/``high`` (from the page's draws; NaN without them), ``std`` over seeds and
    ``seeds``. Empty when the rows hold no chance null or no own head."""
    df, metric = scored.df, scored.metrics[0]
    pairs, own = null_counterparts(df), own_head(df)
    if not pairs or own is None:
        return pd.DataFrame()
    own_scores = per_seed(df, own, metric, own=True)
    out = []
    for combo in (tuple(c) for c in scored.methods[COMBO].itertuples(index=False)):
        if combo not in pairs:
            continue
        ratio = chance_ratio(per_seed(df, combo, metric, own=False), per_seed(df, pairs[combo], metric, own=False),
                             own_scores).dropna()
        low, high = _interval(scored.draws, combo, pairs[combo], own)
        out.append({"combo": combo, "null": pairs[combo], "own": own, "point": ratio.mean() if len(ratio) else np.nan,
                    "low": low, "high": high, "std": ratio.std(ddof=0) if len(ratio) > 1 else np.nan,
                    "seeds": len(ratio)})
    return pd.DataFrame(out)


def _interval(draws: Draws | None, combo: tuple, null: tuple, own: tuple) -> tuple[float, float]:
    """The page's percentile interval of the ratio over its paired bootstrap draws."""
    labels = (draw_label(combo, "stitched"), draw_label(null, "stitched"), draw_label(own, "own"))
    if draws is None or not all(label in draws.labels for label in labels):
        return math.nan, math.nan
    ratio = chance_ratio(*(pd.Series(draws.draws[:, draws.column(label)]) for label in labels))
    return Draws(["ratio"], np.array([np.nan]), ratio.to_numpy()[:, None], draws.sample_level).interval("ratio")


def chance_section(scored: Scored) -> str:
    """The page's table *From chance to own head* (:func:`chance_corrected`) beside the raw
    scores; empty when the rows hold no chance null with a counterpart and an own head."""
    found = chance_corrected(scored)
    if not len(found):
        return ""
    metric = scored.metrics[0]
    base = scored.scores[metric]
    by_combo = {tuple(r[COMBO]): r for _, r in base.iterrows()}
    rows = [[combo_label(dict(zip(COMBO, r["combo"]))), combo_label(dict(zip(COMBO, r["null"]))),
             score_text(by_combo.get(r["combo"]), "stitched"), score_text(by_combo.get(r["null"]), "stitched"),
             score_text(by_combo.get(r["own"]), "own"), _ratio(r)] for _, r in found.iterrows()]
    own = combo_label(dict(zip(COMBO, found["own"].iloc[0])))
    header = f"{arrow(metric, scored.direction[metric])} [95 % CI]"
    return (f"\n### From chance to own head ({metric})\n\n" + CHANCE_LEGEND.format(own=own) + "\n\n"
            + table(rows, headers=["combination", "null", f"stitched {header}", f"null {header}",
                                   f"own head {header}", "from chance to own [95 % CI]"], keep=2) + "\n")


#: what the table *From chance to own head* shows, said once above it
CHANCE_LEGEND = (
    "Each stitching score as a fraction of the way from chance to the own head: (stitched − null) / (own − "
    "null), per seed, then the mean over seeds. *null*: the stitched score of the same similarity, stitcher and "
    "regularizer with anchors that correspond to nothing across spaces (a selector declared a chance null: every "
    "space its own order of the same real anchors), so with the method's head, budget and tuning; *own*: the own "
    "head ({own}) on its own encoder. 0: no better than chance; 1: as good as the own head. Interval: 95 % "
    "percentiles of the ratio over the page's paired bootstrap draws (each the ratio of a resample's means), or "
    "± std over seeds where no draws exist. Raw scores beside it, as in the ranking.")


def _ratio(r: pd.Series) -> str:
    if math.isnan(r["point"]):
        return "n/a"
    if not (math.isnan(r["low"]) or math.isnan(r["high"])):
        return f"{fmt(r['point'])} {fmt_interval(r['low'], r['high'])}"
    return fmt(r["point"], r["std"])
