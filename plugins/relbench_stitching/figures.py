"""The stitching page's figures: per-pair heatmaps on one colour scale, and PARAM's
Figure 1 view of the held-out protocol (with its table)."""

from __future__ import annotations

import numpy as np

from relbench.api import deferred_import
from relbench.api import (Page, bootstrap_columns, fmt, fmt_interval, method_note, pair_heatmap, slug, sparse_figure,
                          table, with_samples)
from relbench_stitching.intervals import CELL, COMBO
from relbench_stitching.scores import combo_label, is_reference

pd = deferred_import("pandas")


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
    fig = pair_heatmap(M, encoders, title, axes=("decoder (target)", "encoder (source)"), scale=scale)
    return page.save(fig, f"heatmap-{slug(title)}.png")


def held_out_section(df: pd.DataFrame, metric: str, page: Page) -> str:
    """PARAM's Figure 1 view of a held-out protocol: per held-out encoder, each combination's
    zero-shot score (mean over seeds of the mean over the decoders trained without it, with
    its 95 % interval, :mod:`relbench.uncertainty`) as bars with interval whiskers, and that encoder's own
    absolute head (the rows of an ``own-head`` stitcher on its own encoder, such as
    non-stitched, whatever its label) as a dotted line. ``df``: prepared rows
    (:func:`~relbench_stitching.scores.prepared`). Empty when the task has no held-out rows."""
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
