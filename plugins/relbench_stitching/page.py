"""The stitching kind's page: ranking by stitched score, reference rows, achievable
pairs, diagnostics, heatmaps and PARAM's held-out view, from stored rows alone.
Directions come from the rows (``direction`` column), never from metric names; what a
stitcher is (ranked method, reference, own head; whether it needs both spaces) from the
rows' typed columns (:mod:`relbench_stitching.declared`), never from its label or
``extra``.

The page's parts live beside it: scores and ranking in :mod:`relbench_stitching.scores`,
figures in :mod:`relbench_stitching.figures`, the smaller tables in
:mod:`relbench_stitching.sections`, the scores from chance to the own head (where the rows
hold a chance null) in :mod:`relbench_stitching.chance` and the index's and summary's cells in
:mod:`relbench_stitching.cells`; this module assembles the page and is the kind's one
entry to all of them."""

from __future__ import annotations

import math

from relbench.api import arrow, deferred_import, fmt_interval, listing, method_note, origin_marks, Page, table
from relbench_stitching.cells import encoder_views, index_cells, ranking_marks, summary_cells
from relbench_stitching.chance import chance_section
from relbench_stitching.figures import colour_scale, heatmap_section, held_out_section
from relbench_stitching.intervals import COMBO
from relbench_stitching.scores import (Scored, combo_label, headline, headline_of, meaning, metric_order, ranking,
                                       score, score_text)
from relbench_stitching.sections import (diagnostics_section, encoder_report_section, failures_section,
                                         pair_kind_section, pair_kinds)

pd = deferred_import("pandas")

__all__ = ["COMBO", "Scored", "colour_scale", "encoder_views", "headline", "held_out_section", "index_cells",
           "meaning", "pair_kind_section", "pair_kinds", "ranking", "ranking_marks", "score", "stitching_page",
           "summary_cells"]


def stitching_page(df: pd.DataFrame, page: Page, held_out: bool = False, scored: Scored | None = None) -> str:
    """Body of a stitching task's page (``held_out``: the task uses the held-out
    protocol; ``scored``: :func:`score` of ``df``, computed here when not given)."""
    kinds = pair_kinds(df)
    scored = scored or score(df, page)
    if scored is None:
        return "_No finished results yet._\n"
    df, metrics, direction, scores, draws, best = (scored.df, scored.metrics, scored.direction, scored.scores,
                                                   scored.draws, scored.best)
    primary = metrics[0]
    base = scores[primary]
    methods = scored.methods
    refs = base[base["reference"]]
    marks = origin_marks(df, COMBO)  # which combinations were computed here, beside a release's
    if best is not None:
        top = methods.iloc[0]
        page.headline = {**headline_of(base, primary, top, df), "interval": (top["stitched_lo"], top["stitched_hi"])}
    lines = []

    def rows_for(frame: pd.DataFrame, numbered: bool) -> list[list[str]]:
        out = []
        for rank, (_, r) in enumerate(frame.iterrows(), 1):
            stitched = score_text(r, "stitched")
            if numbered and r["tie"]:
                stitched = f"**{stitched}**"
            origin = [marks.get(tuple(r[COMBO]), "")] if marks else []
            row = ([rank] if numbered else []) + [r[c] for c in COMBO] + origin + [stitched]
            if numbered:
                row.append(_delta(r))
            row += [r["achievable"], _spread(r)]
            for m in metrics[1:]:
                other = scores[m]
                match = other[(other[COMBO] == r[COMBO]).all(axis=1)]
                row.append(score_text(match.iloc[0], "stitched") if len(match) else "n/a")
            row.append(score_text(r, "own"))
            out.append(row)
        return out

    score_header = f"{arrow(primary, direction[primary])} [95 % CI]"
    rest = ["pairs", "min–max"] + [f"{arrow(m, direction[m])} [95 % CI]" for m in metrics[1:]] + \
        [f"own {arrow(primary, direction[primary])} [95 % CI]"]
    name = [*COMBO, "origin"] if marks else COMBO  # the columns naming a row (repeated where a table is split)
    lines.append(f"### Ranking by stitched {primary} (mean over seeds of the mean over encoder pairs)\n")
    lines.append(RANKING_LEGEND + (ORIGIN_LEGEND if marks else "") + method_note(draws) + "\n")
    lines.append(table(rows_for(methods, True), headers=["#", *name, score_header, "Δ to best [95 % CI]", *rest],
                       keep=1 + len(name)))
    if len(refs):
        lines.append("\n### Reference rows\n")
        lines.append("Absolute heads (no translation) and the non-stitched upper bound (each decoder on its own "
                     "encoder); columns as in the ranking.\n")
        lines.append(table(rows_for(refs, False), headers=[*name, score_header, *rest], keep=len(name)))
    chance = chance_section(scored, page.metrics.get(primary))  # a declared null, else labels permuted
    if chance:
        lines.append(chance)
    both = df[df["needs_both_spaces"]]
    if len(both):
        lines.append("\n" + listing("Combinations that need both spaces at fit time (a map estimated on parallel "
                                     "anchors of both, or a regularizer trained on the other encoders' banks; the "
                                     "others fit on the decoder side alone, zero-shot)",
                                     sorted({combo_label(r) for _, r in both.drop_duplicates(COMBO).iterrows()}))
                     + "\n")
    lines.append(diagnostics_section(df, methods, [m for m in metric_order(df) if m not in metrics], direction))
    if len(methods) and not math.isnan(methods["stitched"].iloc[0]):
        top = methods.iloc[0]
        scale = colour_scale(df, primary)
        lines.append(f"\n### Per-pair {primary} of the best combination ({combo_label(top)})\n")
        lines.append(heatmap_section(df, primary, dict(top[COMBO]), page, scale))
        for _, r in refs[refs["achievable"] != "-"].iterrows():
            lines.append(f"Reference for comparison ({combo_label(r)}):\n\n"
                         + heatmap_section(df, primary, dict(r[COMBO]), page, scale))
    lines.append(pair_kind_section(df, kinds, primary, direction[primary]))
    lines.append(encoder_report_section(df))
    if held_out:
        lines.append(held_out_section(df, primary, page))
    lines.append(failures_section(df))
    return "\n".join(lines) + "\n"


#: what the ranking's columns mean, said once above it (the headers stay short)
RANKING_LEGEND = (
    "Every score is *stitched* (a decoder fitted on one encoder, evaluated zero-shot on another: the off-diagonal "
    "pairs) unless its column says *own* (the same decoder on its own encoder, the diagonal). *Δ to best*: the "
    "paired difference to the first row on the pairs both reach (negative: worse); **bold**: indistinguishable "
    "from the first row (the interval of Δ contains 0) while reaching as many pairs: a group, not an order; "
    "*pairs*: the off-diagonal pairs the method can evaluate at all, of all; *min–max*: the lowest and highest "
    "stitched pair (mean over seeds). Combinations reaching more pairs rank first. A table too wide for a screen "
    "continues below, its rows named again. ")
#: what the ranking's *origin* column means, said where some units were taken from a release
ORIGIN_LEGEND = ("*origin*: whether a combination was computed locally, taken from the release (`relbench run "
                 "--reuse`), submitted in a verified bundle (`relbench leaderboard --include`), or partly one of "
                 "them. ")


def _spread(r: pd.Series) -> str:
    return "n/a" if math.isnan(r["pairs_min"]) else f"{r['pairs_min']:.3f}–{r['pairs_max']:.3f}"


def _delta(r: pd.Series) -> str:
    if math.isnan(r["delta"]):
        return "n/a"
    if r["delta"] == 0 and r["delta_lo"] == 0 and r["delta_hi"] == 0:
        return "best"
    return f"{r['delta']:+.3f} {fmt_interval(r['delta_lo'], r['delta_hi'], signed=True)}"
