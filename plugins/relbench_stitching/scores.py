"""The stitching page's scores: the rows a page reads, each combination's stitched and
own-space scores with their intervals, the ranking, and the headline drawn from them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from relbench.api import deferred_import, directions, Draws, fmt, fmt_interval, lower_is_better, ORIGIN, Page
from relbench_stitching.declared import DECLARED, REFERENCE_ROLES, chance_nulls, declared_columns
from relbench_stitching.intervals import COMBO, add_intervals, combination_draws

pd = deferred_import("pandas")


def combo_label(row) -> str:
    """A readable combination label from the four grid columns."""
    return " · ".join(str(row[c]) for c in COMBO if row[c] not in (None, "-"))


def score_text(r: pd.Series, part: str) -> str:
    """``mean [low, high]`` of a combination's score ``part`` (``stitched`` or ``own``: a
    row of :func:`stitching_scores` with intervals), or ``mean ± std`` over seeds where no
    interval exists; ``n/a`` without a score (``r`` None: no such combination)."""
    if r is None or math.isnan(r[part]):
        return "n/a"
    if not (math.isnan(r[f"{part}_lo"]) or math.isnan(r[f"{part}_hi"])):
        return f"{fmt(r[part])} {fmt_interval(r[f'{part}_lo'], r[f'{part}_hi'])}"
    return fmt(r[part], r[f"{part}_std"])


def is_reference(df: pd.DataFrame) -> pd.Series:
    """Rows of a prepared frame (:func:`prepared`) shown beside the ranking, not in it:
    their stitcher's ``role`` is a reference or an own head (absolute heads,
    non-stitched), or their anchors are a chance null (``chance_null``: a control of how
    far a method is from chance, not a method)."""
    null = df["chance_null"] if "chance_null" in df else False
    return df["role"].isin(REFERENCE_ROLES) | null


def stitching_scores(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per combination: stitched (off-diagonal) and own-space (diagonal) means ± std over seeds,
    the lowest and highest stitched pair (mean over seeds), and achievable pairs."""
    d = df[df["metric"] == metric].copy()
    d["diag"] = d["source"] == d["target"]
    out = []
    for combo, g in d.groupby(COMBO, sort=False, dropna=False):
        off, diag = g[~g["diag"]], g[g["diag"]]
        ok_off = off[off["status"] == "ok"]
        per_seed = ok_off.groupby("seed")["value"].mean()
        own = diag[diag["status"] == "ok"].groupby("seed")["value"].mean()
        pairs = off.drop_duplicates(["source", "target"])
        achievable = ok_off.drop_duplicates(["source", "target"])
        per_pair = ok_off.groupby(["source", "target"])["value"].mean()
        out.append({**dict(zip(COMBO, combo)), "stitched": per_seed.mean() if len(per_seed) else np.nan,
                    "stitched_std": per_seed.std(ddof=0) if len(per_seed) > 1 else np.nan,
                    "pairs_min": per_pair.min() if len(per_pair) else np.nan,
                    "pairs_max": per_pair.max() if len(per_pair) else np.nan,
                    "own": own.mean() if len(own) else np.nan,
                    "own_std": own.std(ddof=0) if len(own) > 1 else np.nan,
                    "achievable": f"{len(achievable)}/{len(pairs)}" if len(pairs) else "-",
                    "coverage": len(achievable) / len(pairs) if len(pairs) else 1.0,
                    "reference": bool(is_reference(g).any()), "seeds": len(per_seed) or len(own),
                    "chance_null": bool(g["chance_null"].any()) if "chance_null" in g else False})
    return pd.DataFrame(out)


def ranked(scores: pd.DataFrame, direction: str) -> pd.DataFrame:
    """Combinations best first: those reaching more encoder pairs come first (a method
    that stitches one pair of twelve does not outrank one that stitches all twelve),
    then by stitched score in the metric's declared direction."""
    return scores.sort_values(["coverage", "stitched"], ascending=[False, lower_is_better(direction)],
                              na_position="last")


def common_metrics(df: pd.DataFrame) -> list[str]:
    """Metrics every combination reports (the task's metrics), in task order; per-cell
    diagnostics that only some stitchers emit (e.g. IRP's reconstruction cosine) are not."""
    per_combo = df[df["metric"] != "error"].groupby(COMBO, dropna=False)["metric"].agg(set)
    shared = set.intersection(*per_combo) if len(per_combo) else set()
    return [m for m in metric_order(df) if m in shared]


#: the columns a stitching page reads (the rest of a stored row is provenance)
PAGE_COLUMNS = [*COMBO, "source", "target", "seed", "metric", "value", "direction", "status", "error", "extra",
                "unit", "seconds", "per_sample", ORIGIN, *DECLARED]


def prepared(df: pd.DataFrame) -> pd.DataFrame:
    """The columns the page reads, with the combination's unused parts shown as ``-``
    and every row's declared columns (derived where the stored row lacks them:
    :func:`~relbench_stitching.declared.declared_columns`) and ``chance_null`` (its
    selector is a chance null: :func:`~relbench_stitching.declared.chance_nulls`), as a
    narrow frame: filtering the full rows, provenance included, costs most of a page."""
    out = df.reindex(columns=PAGE_COLUMNS).copy()
    out[list(DECLARED)] = declared_columns(df)
    out["chance_null"] = chance_nulls(df)
    for col in COMBO + ["source", "target"]:
        out[col] = out[col].fillna("-")
    return out


def metric_order(df: pd.DataFrame) -> list[str]:
    """Metrics in the order they were emitted (the task's order), errors excluded."""
    return [m for m in pd.unique(df["metric"]) if m != "error"]


@dataclass(frozen=True)
class Scored:
    """What a stitching page's tables are drawn from, computed once per drawing: the
    prepared rows, the metrics every combination reports (the first ranks), their
    directions, per metric the combinations' scores with intervals and tie flags
    (:func:`~relbench_stitching.intervals.add_intervals`), the first metric's draws and
    the best combination (None when none has a stitched score)."""

    df: pd.DataFrame
    metrics: list[str]
    direction: dict[str, str]
    scores: dict[str, pd.DataFrame]
    draws: Draws | None
    best: tuple | None

    @property
    def methods(self) -> pd.DataFrame:
        """Non-reference combinations of the first metric, best first (:func:`ranked`)."""
        base = self.scores[self.metrics[0]]
        return ranked(base[~base["reference"]], self.direction[self.metrics[0]])


def score(df: pd.DataFrame, page: Page) -> Scored | None:
    """Every combination's scores and intervals of ``df`` (a task's stored rows), with
    ``page``'s metric plugins to rescore per-sample predictions; None without results."""
    df = prepared(df)
    metrics = common_metrics(df)
    if not metrics:
        return None
    direction = directions(df)
    primary = metrics[0]
    base = stitching_scores(df, primary)
    methods = ranked(base[~base["reference"]], direction[primary])
    best = tuple(methods[COMBO].iloc[0]) if len(methods) and not math.isnan(methods["stitched"].iloc[0]) else None
    scores, draws = {}, None
    for m in metrics:
        found = combination_draws(df, m, page.metrics.get(m), best if m == primary else None)
        scores[m] = add_intervals(stitching_scores(df, m), found, best, not lower_is_better(direction[m]))
        draws = draws or found
    return Scored(df, metrics, direction, scores, draws, best)


def headline(df: pd.DataFrame) -> dict | None:
    """Best non-reference combination, its score and the non-stitched reference."""
    df = prepared(df)
    metrics = common_metrics(df)
    if not metrics:
        return None
    primary = metrics[0]
    s = stitching_scores(df, primary)
    methods = s[~s["reference"]].dropna(subset=["stitched"])
    if not len(methods):
        return None
    return headline_of(s, primary, ranked(methods, directions(df)[primary]).iloc[0], df)


def headline_of(scores: pd.DataFrame, metric: str, best: pd.Series, df: pd.DataFrame | None = None) -> dict:
    """The headline of combination ``best`` (a row of ``scores``, the combinations'
    scores of ``metric``): its stitched score and the best reference's own score; with
    the :func:`prepared` rows ``df``, ``both_spaces``: whether the combination's fit reads
    both encoders' spaces (its rows' ``needs_both_spaces``)."""
    ref = scores[scores["reference"]]["own"].max() if scores["reference"].any() else np.nan
    both = df is not None and bool(df.loc[(df[COMBO] == best[COMBO].to_numpy()).all(axis=1), "needs_both_spaces"].any())
    return {"metric": metric, "best": combo_label(best), "score": best["stitched"], "std": best["stitched_std"],
            "reference": ref, "both_spaces": both}


def meaning(headline: dict | None, direction: str) -> str | None:
    """The summary's sentence for a stitching headline: the best zero-shot score beside
    the reference, when both are there and the metric has a better direction (None
    otherwise: the generic sentence is used)."""
    if headline is None or direction not in ("higher", "lower") or math.isnan(headline.get("reference", np.nan)):
        return None
    fitted = ("A decoder fitted with both encoders' spaces (the best combination's fit reads the other encoder's "
              "embeddings: see the page's note on it) and used on the other encoder" if headline.get("both_spaces")
              else "A decoder fitted on one encoder and used zero-shot on another")
    return (f"{fitted} reaches {headline['metric']} {fmt(headline['score'])} at best (with {headline['best']}), "
            f"against {fmt(headline['reference'])} for the reference, a decoder on its own encoder ({direction} is "
            f"better).")


def ranking(df: pd.DataFrame) -> list[str]:
    """Non-reference combinations with a stitched score, best first."""
    df = prepared(df)
    metric = next(iter(common_metrics(df)), None)
    if metric is None:
        return []
    s = stitching_scores(df, metric)
    s = ranked(s[~s["reference"]].dropna(subset=["stitched"]), directions(df)[metric])
    return [combo_label(r) for _, r in s.iterrows()]
