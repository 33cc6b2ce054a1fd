"""A stitching page's numbers as cells: the index's main table (per ranked combination,
its score, interval, bold group, cost and paired draws) and ``relbench export
--summary`` (every score the page's tables show)."""

from __future__ import annotations

import math

import numpy as np

from relbench.api import deferred_import
from relbench_stitching.intervals import COMBO, stitched_draws
from relbench_stitching.scores import Scored, combo_label, prepared

pd = deferred_import("pandas")


def encoder_views(df: pd.DataFrame) -> list[str]:
    """The data-set views the task's encoders read, as its rows record them (``inputs``;
    empty when they do not)."""
    for inputs in df["inputs"].dropna() if "inputs" in df else ():
        if isinstance(inputs, dict) and inputs.get("encoders"):
            return sorted({str(e.get("view")) for e in inputs["encoders"].values() if e.get("view")})
    return []


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def unit_seconds(df: pd.DataFrame) -> dict[tuple, float]:
    """Per combination (its :data:`COMBO` values) of a prepared frame
    (:func:`~relbench_stitching.scores.prepared`), the mean over its units of the wall
    seconds each unit took (stored as ``seconds`` on every row of the unit), each unit
    counted once; rows without a unit id or a number of seconds (older stores) are left
    out, and a combination with none is missing."""
    units = df.assign(seconds=pd.to_numeric(df["seconds"], errors="coerce"))
    units = units.dropna(subset=["unit", "seconds"]).drop_duplicates("unit")
    return {tuple(combo): float(mean) for combo, mean in units.groupby(COMBO)["seconds"].mean().items()}


#: the mark of a combination that needs both encoders' spaces at fit time (not zero-shot),
#: in the main table and in the index's ranking across tasks
BOTH_SPACES = "‡"
#: what the mark means where the index ranks combinations across tasks
BOTH_SPACES_MEANING = ("**not zero-shot**: the combination needs both encoders' spaces at fit time (a map estimated "
                       "on parallel anchors of both, or a regularizer trained on the other encoders' banks); it is "
                       "ranked with the others, as on the tasks' pages, and its place is an upper reference for the "
                       "zero-shot ones")


def both_spaces(df: pd.DataFrame) -> set[tuple]:
    """The combinations (their :data:`COMBO` values) of a prepared frame with a row that
    needs both encoders' spaces at fit time (``needs_both_spaces``: a map fitted on both
    spaces' anchors, or a regularizer trained on the other encoders' banks)."""
    marked = df.loc[df["needs_both_spaces"].astype(bool), COMBO].drop_duplicates()
    return {tuple(combo) for combo in marked.itertuples(index=False)}


def ranking_marks(df: pd.DataFrame) -> dict[str, list[str]]:
    """The task's marks for the index's ranking across tasks
    (:meth:`~relbench.interfaces.TaskKind.ranking_marks`): :data:`BOTH_SPACES` on every
    combination of the rows ``df`` that needs both encoders' spaces at fit time."""
    df = prepared(df)
    marked = df[df["needs_both_spaces"].astype(bool)].drop_duplicates(COMBO)
    return {combo_label(r): [BOTH_SPACES, BOTH_SPACES_MEANING] for _, r in marked.iterrows()}


def index_cells(scored: Scored, views: list[str]) -> list[dict]:
    """The task's cells of the index's main table: per non-reference combination with a
    stitched score, in the page's ranking order (``rank``: its position, 1 = first), its
    score, the ends of its 95 % interval (None when none was computed), whether it is
    the page's best (``best``) or indistinguishable from it (``tie``, the page's bold
    group), the metric and its direction, the task's encoder ``views`` and ``seconds``,
    the mean wall seconds of the combination's units (:func:`unit_seconds`; None when
    the rows do not record them), its ``coverage`` (the share of the task's encoder pairs
    it reaches, which the page ranks by first), ``both_spaces`` (its rows need both
    encoders' spaces at fit time: not zero-shot) and its ``draws``: the first
    :data:`~relbench_stitching.intervals.KEPT_DRAWS` of the page's paired
    draws of its stitched score, packed (:func:`~relbench_stitching.intervals.pack_draws`;
    None where its interval was not drawn from them)."""
    metric = scored.metrics[0]
    cost = unit_seconds(scored.df)
    both = both_spaces(scored.df)
    methods = scored.methods.dropna(subset=["stitched"])
    cells = [{"method": combo_label(r), "rank": rank, "score": float(r["stitched"]),
              "low": _finite(r["stitched_lo"]), "high": _finite(r["stitched_hi"]),
              "best": rank == 1, "tie": bool(r["tie"]), "metric": metric, "direction": scored.direction[metric],
              "views": views, "seconds": cost.get(tuple(r[COMBO])), "coverage": float(r["coverage"]),
              "both_spaces": tuple(r[COMBO]) in both,
              # with an interval of the first metric, scored.draws are that metric's (else maybe another's)
              "draws": stitched_draws(scored.draws, tuple(r[COMBO])) if _finite(r["stitched_lo"]) is not None
              else None}
             for rank, (_, r) in enumerate(methods.iterrows(), 1)]
    base = scored.scores[metric]
    for _, r in base[base["reference"]].iterrows():  # unranked context: a reference's stitched score, an own head's
        stitched = _finite(r["stitched"])
        value, what = (stitched, "chance null" if r.get("chance_null") else "reference") if stitched is not None \
            else (_finite(r["own"]), "own head")
        if value is not None:
            cells.append({"method": f"{combo_label(r)} ({what})", "reference": True, "rank": None, "score": value,
                          "chance_null": what == "chance null",
                          "low": None, "high": None, "best": False, "tie": False, "metric": metric,
                          "direction": scored.direction[metric], "views": views,
                          "seconds": cost.get(tuple(r[COMBO]))})
    return cells


#: the measures of a combination a stitching page shows: stitched (off-diagonal) and own space (diagonal)
MEASURES = ("stitched", "own")


def summary_cells(scored: Scored) -> list[dict]:
    """Every score the page's ranking and reference tables show, as the cells of
    ``relbench export --summary`` (:meth:`~relbench.interfaces.TaskKind.summary_cells`):
    per metric, per combination in the page's order (ranked methods, then references)
    and per measure (``stitched`` or ``own``) with a score, the combination's plugin
    labels (None where it has none), ``score``, ``low``/``high`` (the page's 95 %
    interval, None where it shows ± std instead), ``n`` (seeds), ``tie_group`` (for the
    first metric's stitched scores of ranked methods: in the page's bold group; None
    elsewhere), ``rank`` (the page's row number, None where unranked) and ``reference``."""
    base = scored.scores[scored.metrics[0]]
    order = [tuple(c) for c in pd.concat([scored.methods, base[base["reference"]]])[COMBO].itertuples(index=False)]
    ranks = {tuple(c): rank for rank, c in enumerate(scored.methods[COMBO].itertuples(index=False), 1)}
    cells = []
    for metric in scored.metrics:
        rows = {tuple(r[COMBO]): r for _, r in scored.scores[metric].iterrows()}
        for combo in (c for c in order if c in rows):
            r = rows[combo]
            for measure in MEASURES:
                if math.isnan(r[measure]):
                    continue
                ranked = metric == scored.metrics[0] and measure == "stitched" and combo in ranks
                cells.append({**{c: None if v == "-" else v for c, v in zip(COMBO, combo)}, "metric": metric,
                              "measure": measure, "score": float(r[measure]), "low": _finite(r[f"{measure}_lo"]),
                              "high": _finite(r[f"{measure}_hi"]), "n": int(r["seeds"]),
                              "tie_group": bool(r["tie"]) if ranked else None,
                              "rank": ranks[combo] if ranked else None, "reference": bool(r["reference"])})
    return cells
