"""The stitching kind's page: ranking by stitched score, reference rows, achievable
pairs, diagnostics, heatmaps and PARAM's held-out view, from stored rows alone.
Directions come from the rows (``direction`` column), never from metric names; what a
stitcher is (ranked method, reference, own head; whether it needs both spaces) from the
rows' typed columns (:mod:`relbench_stitching.declared`), never from its label or
``extra``."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import lazy_loader
import numpy as np

from relbench.api import (ORIGIN, Draws, Page, arrow, bootstrap_columns, directions, fmt, fmt_interval, listing,
                          lower_is_better, method_note, origin_marks, slug, sparse_figure, table, with_samples)
from relbench_stitching.declared import DECLARED, REFERENCE_ROLES, declared_columns
from relbench_stitching.intervals import CELL, COMBO, add_intervals, combination_draws, stitched_draws

pd = lazy_loader.load("pandas")


def combo_label(row) -> str:
    """A readable combination label from the four grid columns."""
    return " · ".join(str(row[c]) for c in COMBO if row[c] not in (None, "-"))


def is_reference(df: pd.DataFrame) -> pd.Series:
    """Rows of a prepared frame (:func:`_prepared`) whose stitcher is shown beside the
    ranking (``role``: a reference or an own head, e.g. absolute heads, non-stitched)."""
    return df["role"].isin(REFERENCE_ROLES)


# ----------------------------------------------------------------------------- stitching pages


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
                    "reference": bool(is_reference(g).any()), "seeds": len(per_seed) or len(own)})
    return pd.DataFrame(out)


def ranked(scores: pd.DataFrame, direction: str) -> pd.DataFrame:
    """Combinations best first: those reaching more encoder pairs come first (a method
    that stitches one pair of twelve does not outrank one that stitches all twelve),
    then by stitched score in the metric's declared direction."""
    return scores.sort_values(["coverage", "stitched"], ascending=[False, lower_is_better(direction)],
                              na_position="last")


def colour_scale(df: pd.DataFrame, metric: str) -> tuple[float, float]:
    """One colour scale for every heatmap of a page: the range of ``metric`` over all
    of the page's cells (stitched and own space, every combination and seed)."""
    values = df[(df["metric"] == metric) & (df["status"] == "ok")]["value"].astype(float)
    values = values[np.isfinite(values)]
    return (float(values.min()), float(values.max())) if len(values) else (0.0, 1.0)


def pair_matrix(df: pd.DataFrame, metric: str, combo: dict) -> tuple[list[str], np.ndarray]:
    """The encoders of a combination's rows and its source × target matrix of ``metric``
    (mean over seeds; NaN where a pair has no score)."""
    d = df[(df["metric"] == metric)]
    for c in COMBO:
        d = d[d[c] == combo[c]]
    encoders = list(pd.unique(pd.concat([d["target"], d["source"]])))
    M = np.full((len(encoders), len(encoders)), np.nan)
    for (src, tgt), g in d.groupby(["source", "target"]):
        ok = g[g["status"] == "ok"]["value"]
        if len(ok):
            M[encoders.index(src), encoders.index(tgt)] = ok.mean()
    return encoders, M


def heatmap_section(df: pd.DataFrame, metric: str, combo: dict, page: Page, scale: tuple[float, float]) -> str:
    """A combination's per-pair heatmap as a markdown image, or the line saying why it is
    not drawn (more than half of its pairs have no score, :func:`sparse_figure`)."""
    label = combo_label(combo)
    encoders, M = pair_matrix(df, metric, combo)
    note = sparse_figure(f"per-pair heatmap of {label}", M)
    if note:
        return note
    return f"![heatmap]({_heatmap(encoders, M, page, f'{metric} {label}', scale)})\n"


def _heatmap(encoders: list[str], M: np.ndarray, page: Page, title: str, scale: tuple[float, float]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(encoders), 1.0 + 0.8 * len(encoders)))
    vmin, vmax = scale
    im = ax.imshow(np.ma.masked_invalid(M), cmap="viridis", vmin=vmin, vmax=vmax)
    ax.set_facecolor("#cccccc")
    middle = (vmin + vmax) / 2
    for i in range(len(encoders)):
        for j in range(len(encoders)):
            ax.text(j, i, "n/a" if np.isnan(M[i, j]) else f"{M[i, j]:.2f}", ha="center", va="center",
                    color="white" if np.isnan(M[i, j]) or M[i, j] < middle else "black", fontsize=8)
    ax.set_xticks(range(len(encoders)), encoders, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(encoders)), encoders, fontsize=8)
    ax.set_xlabel("decoder (target)")
    ax.set_ylabel("encoder (source)")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    return page.save(fig, f"heatmap-{slug(title)}.png")


def held_out_section(df: pd.DataFrame, metric: str, page: Page) -> str:
    """PARAM's Figure 1 view of a held-out protocol: per held-out encoder, each combination's
    zero-shot score (mean over seeds of the mean over the decoders trained without it, with
    its 95 % bootstrap interval) as bars with interval whiskers, and that encoder's own
    absolute head (the rows of an ``own-head`` stitcher on its own encoder, such as
    non-stitched, whatever its label) as a dotted line. ``df``: prepared rows
    (:func:`_prepared`). Empty when the task has no held-out rows."""
    d = df[(df["metric"] == metric) & (df["status"] == "ok")]
    if d.empty:
        return ""
    d = with_samples(d, df, CELL)
    encoders = list(pd.unique(d["source"]))
    stitched = (d["source"] != d["target"]) & ~is_reference(d)
    combo = pd.Series([combo_label(r) for _, r in d.iterrows()], index=d.index)
    combos = list(pd.unique(combo[stitched]))
    own = (d["role"] == "own-head") & (d["source"] == d["target"])
    columns = {f"{c} | {e}": stitched & (combo == c) & (d["source"] == e) for c in combos for e in encoders}
    columns.update({f"own | {e}": own & (d["source"] == e) for e in encoders})
    draws = bootstrap_columns(d, columns, page.metrics.get(metric))
    mean, interval = {}, {}
    for label in columns:
        i = draws.column(label)
        mean[label] = float(draws.point[i])
        interval[label] = draws.interval(label) if np.isfinite(draws.point[i]) else (np.nan, np.nan)

    def shown(label: str) -> str:
        return "n/a" if np.isnan(mean[label]) else f"{fmt(mean[label])} {fmt_interval(*interval[label])}"

    rows = [[c, *[shown(f"{c} | {e}") for e in encoders]] for c in combos]
    rows.append(["own absolute head (reference)", *[shown(f"own | {e}") for e in encoders]])
    link = _held_out_figure(encoders, combos, mean, interval, metric, page)
    return ("\n### Held-out encoders (PARAM, Figure 1)\n\n"
            f"Zero-shot {metric} of each held-out encoder through decoders trained on the other encoders "
            "(anchors chosen without it): mean over seeds of the mean over those decoders, with its 95 % "
            "interval (whiskers in the figure); the dotted line is the held-out encoder's own absolute head. "
            + method_note(draws) + "\n\n"
            + table(rows, headers=["combination", *[f"held out: {e}" for e in encoders]])
            + f"\n\n![held-out encoders]({link})\n")


def _held_out_figure(encoders, combos, mean, interval, metric, page: Page) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 0.8 / max(1, len(combos))
    fig, ax = plt.subplots(figsize=(1.5 + 1.6 * len(encoders), 4.2))
    for i, c in enumerate(combos):
        xs = [j - 0.4 + width * (i + 0.5) for j in range(len(encoders))]
        values = [mean[f"{c} | {e}"] for e in encoders]
        whiskers = np.nan_to_num([[m - interval[f"{c} | {e}"][0] for m, e in zip(values, encoders)],
                                  [interval[f"{c} | {e}"][1] - m for m, e in zip(values, encoders)]])
        ax.bar(xs, values, width, yerr=whiskers, label=c, capsize=2)
    for j, e in enumerate(encoders):
        ax.hlines(mean[f"own | {e}"], j - 0.45, j + 0.45, colors="black", linestyles="dotted",
                  label="own absolute head (reference)" if j == 0 else None)
    ax.set_xticks(range(len(encoders)), [f"held out: {e}" for e in encoders], fontsize=8)
    ax.set_ylabel(f"zero-shot {metric} (whiskers: 95 % interval)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)
    fig.tight_layout()
    return page.save(fig, f"held-out-{slug(metric)}.png")


def common_metrics(df: pd.DataFrame) -> list[str]:
    """Metrics every combination reports (the task's metrics), in task order; per-cell
    diagnostics that only some stitchers emit (e.g. IRP's reconstruction cosine) are not."""
    per_combo = df[df["metric"] != "error"].groupby(COMBO, dropna=False)["metric"].agg(set)
    shared = set.intersection(*per_combo) if len(per_combo) else set()
    return [m for m in metric_order(df) if m in shared]


#: the columns a stitching page reads (the rest of a stored row is provenance)
PAGE_COLUMNS = [*COMBO, "source", "target", "seed", "metric", "value", "direction", "status", "error", "extra",
                "unit", "seconds", "per_sample", ORIGIN, *DECLARED]


def _prepared(df: pd.DataFrame) -> pd.DataFrame:
    """The columns the page reads, with the combination's unused parts shown as ``-``
    and every row's declared columns (derived where the stored row lacks them:
    :func:`~relbench_stitching.declared.declared_columns`), as a narrow frame: filtering
    the full rows, provenance included, costs most of a page."""
    out = df.reindex(columns=PAGE_COLUMNS).copy()
    out[list(DECLARED)] = declared_columns(df)
    for col in COMBO + ["source", "target"]:
        out[col] = out[col].fillna("-")
    return out


def metric_order(df: pd.DataFrame) -> list[str]:
    """Metrics in the order they were emitted (the task's order), errors excluded."""
    return [m for m in pd.unique(df["metric"]) if m != "error"]


def pair_kinds(df: pd.DataFrame) -> dict[tuple[str, str], str]:
    """``(source, target)`` → ``cross-seed`` when the two encoders are the same plugin
    with the same parameters but their ``seed``, else ``cross-architecture`` (from the
    encoder identities stored with the rows; empty when they are not there)."""
    if "inputs" not in df:
        return {}
    encoders: dict[str, dict] = {}
    for inputs in df["inputs"].dropna():
        if isinstance(inputs, dict):
            encoders.update(inputs.get("encoders", {}))
            break

    def recipe(label: str):
        e = encoders.get(label, {})
        params = {k: v for k, v in (e.get("params") or {}).items() if k != "seed"}
        return e.get("class"), json.dumps(params, sort_keys=True, default=str), e.get("view")

    out = {}
    for a in encoders:
        for b in encoders:
            if a != b:
                same = recipe(a) == recipe(b) and "seed" in (encoders[a].get("params") or {})
                out[(a, b)] = "cross-seed" if same else "cross-architecture"
    return out


def pair_kind_section(df: pd.DataFrame, kinds: dict[tuple[str, str], str], metric: str, direction: str) -> str:
    """Stitched means over cross-seed pairs apart from cross-architecture pairs
    (``kinds``: :func:`pair_kinds`), when a task has both (same architecture, different
    training seed vs different networks)."""
    if len(set(kinds.values())) < 2:
        return ""
    d = df[(df["metric"] == metric) & (df["status"] == "ok") & (df["source"] != df["target"])].copy()
    d["pairs"] = [kinds.get((s, t), "?") for s, t in zip(d["source"], d["target"])]
    rows = []
    for combo, g in d.groupby(COMBO, sort=False, dropna=False):
        cells = []
        for kind in ("cross-seed", "cross-architecture"):
            per_seed = g[g["pairs"] == kind].groupby("seed")["value"].mean()
            cells.append(fmt(per_seed.mean(), per_seed.std(ddof=0) if len(per_seed) > 1 else np.nan)
                         if len(per_seed) else "-")
        rows.append([combo_label(dict(zip(COMBO, combo))), *cells])
    seed_pairs = sorted(f"{a}→{b}" for (a, b), k in kinds.items() if k == "cross-seed")
    return (f"\n### Cross-seed and cross-architecture pairs ({arrow(metric, direction)})\n\n"
            f"Cross-seed pairs differ only in the encoder's training seed; every other pair is cross-architecture. "
            f"Mean over the pairs of each kind, mean ± std over seeds.\n\n{listing('Cross-seed pairs', seed_pairs)}"
            f"\n\n" + table(rows, headers=["combination", "cross-seed", "cross-architecture"]) + "\n")


def encoder_report_section(df: pd.DataFrame) -> str:
    """What encoders reported about themselves (:meth:`Encoder.report`, e.g. the own
    accuracy of networks trained here), one line per encoder; empty when none did."""
    reports: dict[str, dict] = {}
    for extra in df["extra"]:
        if isinstance(extra, dict):
            for label, report in (extra.get("encoder_reports") or {}).items():
                reports.setdefault(label, report)
    if not reports:
        return ""
    keys = list(dict.fromkeys(k for r in reports.values() for k in r))
    rows = [[label, *(fmt(r[k]) if isinstance(r.get(k), float) else r.get(k, "-") for k in keys)]
            for label, r in sorted(reports.items())]
    return ("\n### Encoders trained here\n\nWhat each encoder reported after training (accuracy of its own "
            "classifier on the data set's training and test pools).\n\n"
            + table(rows, headers=["encoder", *(k.replace("_", " ") for k in keys)]) + "\n")


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
    df = _prepared(df)
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
        page.headline = {**_headline(base, primary, top), "interval": (top["stitched_lo"], top["stitched_hi"])}
    lines = []

    def rows_for(frame: pd.DataFrame, numbered: bool) -> list[list[str]]:
        out = []
        for rank, (_, r) in enumerate(frame.iterrows(), 1):
            stitched = _scored(r, "stitched")
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
                row.append(_scored(match.iloc[0], "stitched") if len(match) else "n/a")
            row.append(_scored(r, "own"))
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
    both = df[df["needs_both_spaces"]]
    if len(both):
        lines.append("\n" + listing("Stitchers that need both spaces at fit time (a map estimated on parallel "
                                     "anchors; the others fit on the decoder side alone)",
                                     sorted(pd.unique(both["stitcher"]))) + "\n")
    lines.append(_diagnostics_section(df, methods, [m for m in metric_order(df) if m not in metrics], direction))
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
    lines.append(_failures_section(df))
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
                 "--reuse`), or partly both. ")


def _diagnostics_section(df: pd.DataFrame, methods: pd.DataFrame, extras: list[str], direction: dict) -> str:
    """Per-cell diagnostics that only some stitchers emit (e.g. IRP's condition number),
    mean over stitched pairs and seeds per combination; empty when none has any."""
    rows = []
    for _, r in methods.iterrows():
        vals = []
        for m in extras:
            d = df[(df["metric"] == m) & (df["status"] == "ok") & (df["source"] != df["target"])]
            for c in COMBO:
                d = d[d[c] == r[c]]
            vals.append(fmt(d["value"].mean()) if len(d) else "-")
        if any(v != "-" for v in vals):
            rows.append([combo_label(r), *vals])
    if not rows:
        return ""
    return ("\n### Translation diagnostics (mean over stitched pairs and seeds)\n\n"
            + table(rows, headers=["combination"] + [arrow(m, direction[m]) for m in extras]))


def _failures_section(df: pd.DataFrame) -> str:
    """The failed combinations, one line each with the first line of its error (free
    text: a list, not a table column), folded when there are many; empty when none failed."""
    errors = df[df["status"] == "error"]
    if not len(errors):
        return ""
    failed = [f"{combo_label(r)} → {r['target']}: {str(r['error']).splitlines()[0][:160]}"
              for _, r in errors.drop_duplicates(COMBO + ["target"]).iterrows()]
    return (f"\n### Failed combinations ({len(errors)})\n\n"
            + listing("Combination → target: error", failed, lines=True) + "\n")


def _scored(r: pd.Series, part: str) -> str:
    """``mean [low, high]`` of a score, or ``mean ± std`` over seeds where no interval exists."""
    if math.isnan(r[part]):
        return "n/a"
    if not (math.isnan(r[f"{part}_lo"]) or math.isnan(r[f"{part}_hi"])):
        return f"{fmt(r[part])} {fmt_interval(r[f'{part}_lo'], r[f'{part}_hi'])}"
    return fmt(r[part], r[f"{part}_std"])


def _spread(r: pd.Series) -> str:
    return "n/a" if math.isnan(r["pairs_min"]) else f"{r['pairs_min']:.3f}–{r['pairs_max']:.3f}"


def _delta(r: pd.Series) -> str:
    if math.isnan(r["delta"]):
        return "n/a"
    if r["delta"] == 0 and r["delta_lo"] == 0 and r["delta_hi"] == 0:
        return "best"
    return f"{r['delta']:+.3f} {fmt_interval(r['delta_lo'], r['delta_hi'], signed=True)}"


def headline(df: pd.DataFrame) -> dict | None:
    """Best non-reference combination, its score and the non-stitched reference."""
    df = _prepared(df)
    metrics = common_metrics(df)
    if not metrics:
        return None
    primary = metrics[0]
    s = stitching_scores(df, primary)
    methods = s[~s["reference"]].dropna(subset=["stitched"])
    if not len(methods):
        return None
    return _headline(s, primary, ranked(methods, directions(df)[primary]).iloc[0])


def _headline(scores: pd.DataFrame, metric: str, best: pd.Series) -> dict:
    ref = scores[scores["reference"]]["own"].max() if scores["reference"].any() else np.nan
    return {"metric": metric, "best": combo_label(best), "score": best["stitched"], "std": best["stitched_std"],
            "reference": ref}


def meaning(headline: dict | None, direction: str) -> str | None:
    """The summary's sentence for a stitching headline: the best zero-shot score beside
    the reference, when both are there and the metric has a better direction (None
    otherwise: the generic sentence is used)."""
    if headline is None or direction not in ("higher", "lower") or math.isnan(headline.get("reference", np.nan)):
        return None
    return (f"A decoder fitted on one encoder and used zero-shot on another reaches {headline['metric']} "
            f"{fmt(headline['score'])} at best (with {headline['best']}), against {fmt(headline['reference'])} for "
            f"the reference, a decoder on its own encoder ({direction} is better).")


def ranking(df: pd.DataFrame) -> list[str]:
    """Non-reference combinations with a stitched score, best first."""
    df = _prepared(df)
    metric = next(iter(common_metrics(df)), None)
    if metric is None:
        return []
    s = stitching_scores(df, metric)
    s = ranked(s[~s["reference"]].dropna(subset=["stitched"]), directions(df)[metric])
    return [combo_label(r) for _, r in s.iterrows()]


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
    """Per combination (its :data:`COMBO` values) of a prepared frame (:func:`_prepared`),
    the mean over its units of the wall seconds each unit took (stored as ``seconds`` on
    every row of the unit), each unit counted once; rows without a unit id or a number
    of seconds (older stores) are left out, and a combination with none is missing."""
    units = df.assign(seconds=pd.to_numeric(df["seconds"], errors="coerce"))
    units = units.dropna(subset=["unit", "seconds"]).drop_duplicates("unit")
    return {tuple(combo): float(mean) for combo, mean in units.groupby(COMBO)["seconds"].mean().items()}


def index_cells(scored: Scored, views: list[str]) -> list[dict]:
    """The task's cells of the index's main table: per non-reference combination with a
    stitched score, in the page's ranking order (``rank``: its position, 1 = first), its
    score, the ends of its 95 % interval (None when none was computed), whether it is
    the page's best (``best``) or indistinguishable from it (``tie``, the page's bold
    group), the metric and its direction, the task's encoder ``views`` and ``seconds``,
    the mean wall seconds of the combination's units (:func:`unit_seconds`; None when
    the rows do not record them), its ``coverage`` (the share of the task's encoder pairs
    it reaches, which the page ranks by first) and its ``draws``: the first
    :data:`~relbench_stitching.intervals.KEPT_DRAWS` of the page's paired bootstrap
    draws of its stitched score, packed (:func:`~relbench_stitching.intervals.pack_draws`;
    None where its interval was not drawn from them)."""
    metric = scored.metrics[0]
    cost = unit_seconds(scored.df)
    methods = scored.methods.dropna(subset=["stitched"])
    cells = [{"method": combo_label(r), "rank": rank, "score": float(r["stitched"]),
              "low": _finite(r["stitched_lo"]), "high": _finite(r["stitched_hi"]),
              "best": rank == 1, "tie": bool(r["tie"]), "metric": metric, "direction": scored.direction[metric],
              "views": views, "seconds": cost.get(tuple(r[COMBO])), "coverage": float(r["coverage"]),
              # with an interval of the first metric, scored.draws are that metric's (else maybe another's)
              "draws": stitched_draws(scored.draws, tuple(r[COMBO])) if _finite(r["stitched_lo"]) is not None
              else None}
             for rank, (_, r) in enumerate(methods.iterrows(), 1)]
    base = scored.scores[metric]
    for _, r in base[base["reference"]].iterrows():  # unranked context: a reference's stitched score, an own head's
        stitched = _finite(r["stitched"])
        value, what = (stitched, "reference") if stitched is not None else (_finite(r["own"]), "own head")
        if value is not None:
            cells.append({"method": f"{combo_label(r)} ({what})", "reference": True, "rank": None, "score": value,
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
