"""Markdown leaderboards, rendered from the results store alone.

One page per task (``<task>.md``; its task kind renders the body) and an index
(``README.md``) with each task's best combination and a cross-task ranking of methods.
Figures go to ``figures/<task>/``. Nothing here recomputes a result: delete the
leaderboards folder and ``relbench leaderboard`` writes the same pages again.
"""

from __future__ import annotations

import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from tabulate import tabulate

from relbench.cache import atomic_write_bytes
from relbench.plugins import Registry
from relbench.results import ResultStore

COMBO = ["selector", "similarity", "stitcher", "regularizer"]
LOWER_IS_BETTER = {"mae", "mse", "condition_number", "irp_singular_anchor_sets"}
#: per-cell diagnostics that describe a method rather than score it (no arrow)
NEUTRAL = {"anchors_kept", "irp_initial_anchors", "procrustes_rank", "procrustes_width"}


@dataclass
class Page:
    """Where one task's page and figures go, and where the figures its run drew are stored."""

    root: Path
    task: str
    store: ResultStore | None = None

    def figure(self, filename: str) -> tuple[Path, str]:
        """``(path to write, markdown-relative link)`` of a figure of this page."""
        folder = self.root / "figures" / self.task
        folder.mkdir(parents=True, exist_ok=True)
        return folder / filename, f"figures/{self.task}/{filename}"

    def stored_figure(self, filename: str) -> str | None:
        """Link to a figure drawn during the run (kept in the results store, see
        :meth:`ResultStore.figure_path`), copied next to the page; None if there is none."""
        source = self.store.figure_path(self.task, filename) if self.store else None
        if source is None or not source.exists():
            return None
        path, link = self.figure(filename)
        if path.resolve() != source.resolve():
            shutil.copyfile(source, path)
        return link


def slug(text: str) -> str:
    """A file-name-safe form of a label: runs of other characters become ``-``."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:60]


def fmt(mean: float, std: float | None = None, scale: float = 1.0) -> str:
    """``mean ± std`` with sensible digits; ``n/a`` for missing values."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "n/a"
    if std is None or (isinstance(std, float) and math.isnan(std)):
        return f"{mean * scale:.3f}"
    return f"{mean * scale:.3f} ± {std * scale:.3f}"


def arrow(metric: str) -> str:
    """↑ or ↓ after a metric name, by its direction (none for a neutral diagnostic)."""
    if metric in NEUTRAL:
        return metric
    return f"{metric} {'↓' if metric in LOWER_IS_BETTER else '↑'}"


def metric_order(df: pd.DataFrame) -> list[str]:
    """Metrics in the order they were emitted (the task's order), errors excluded."""
    return [m for m in pd.unique(df["metric"]) if m != "error"]


def combo_label(row) -> str:
    """A readable combination label from the four grid columns."""
    return " · ".join(str(row[c]) for c in COMBO if row[c] not in (None, "-"))


def is_reference(df: pd.DataFrame) -> pd.Series:
    """Rows produced by reference stitchers (absolute heads, non-stitched)."""
    return df["extra"].map(lambda e: isinstance(e, dict) and e.get("role") == "reference")


# ----------------------------------------------------------------------------- stitching pages


def stitching_scores(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per combination: stitched (off-diagonal) and own-space (diagonal) means ± std over seeds,
    and achievable pairs."""
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
        out.append({**dict(zip(COMBO, combo)), "stitched": per_seed.mean() if len(per_seed) else np.nan,
                    "stitched_std": per_seed.std(ddof=0) if len(per_seed) > 1 else np.nan,
                    "own": own.mean() if len(own) else np.nan,
                    "own_std": own.std(ddof=0) if len(own) > 1 else np.nan,
                    "achievable": f"{len(achievable)}/{len(pairs)}" if len(pairs) else "-",
                    "coverage": len(achievable) / len(pairs) if len(pairs) else 1.0,
                    "reference": bool(is_reference(g).any()), "seeds": len(per_seed) or len(own)})
    return pd.DataFrame(out)


def ranked(scores: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Combinations best first: those reaching more encoder pairs come first (a method
    that stitches one pair of twelve does not outrank one that stitches all twelve),
    then by stitched score in the metric's direction."""
    return scores.sort_values(["coverage", "stitched"], ascending=[False, metric in LOWER_IS_BETTER],
                              na_position="last")


def _heatmap(df: pd.DataFrame, metric: str, combo: dict, page: Page, title: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = df[(df["metric"] == metric)]
    for c in COMBO:
        d = d[d[c] == combo[c]]
    encoders = list(pd.unique(pd.concat([d["target"], d["source"]])))
    M = np.full((len(encoders), len(encoders)), np.nan)
    for (src, tgt), g in d.groupby(["source", "target"]):
        ok = g[g["status"] == "ok"]["value"]
        if len(ok):
            M[encoders.index(src), encoders.index(tgt)] = ok.mean()
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(encoders), 1.0 + 0.8 * len(encoders)))
    im = ax.imshow(np.ma.masked_invalid(M), cmap="viridis", vmin=np.nanmin(M) if np.isfinite(M).any() else 0,
                   vmax=np.nanmax(M) if np.isfinite(M).any() else 1)
    ax.set_facecolor("#cccccc")
    for i in range(len(encoders)):
        for j in range(len(encoders)):
            ax.text(j, i, "n/a" if np.isnan(M[i, j]) else f"{M[i, j]:.2f}", ha="center", va="center",
                    color="white" if np.isnan(M[i, j]) or M[i, j] < np.nanmean(M) else "black", fontsize=8)
    ax.set_xticks(range(len(encoders)), encoders, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(encoders)), encoders, fontsize=8)
    ax.set_xlabel("decoder (target)")
    ax.set_ylabel("encoder (source)")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    path, link = page.figure(f"heatmap-{slug(title)}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return link


def _held_out_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of a task run with ``protocol: held-out`` (not the all-pairs protocol, where a
    learning selector also leaves the encoder side out, but no reference is measured)."""
    if "kind_params" not in df:
        return df.iloc[0:0]
    return df[df["kind_params"].map(lambda p: isinstance(p, dict) and p.get("protocol") == "held-out")]


def held_out_section(df: pd.DataFrame, metric: str, page: Page) -> str:
    """PARAM's Figure 1 view of a held-out protocol: per held-out encoder, each combination's
    zero-shot score (mean over the decoders trained without it, ± std over seeds) as bars, and
    that encoder's own absolute head (the non-stitched reference) as a dotted line. Empty
    when the task has no held-out rows."""
    scored = df[(df["metric"] == metric) & (df["status"] == "ok")]
    d = _held_out_rows(scored)
    if d.empty:
        return ""
    encoders = list(pd.unique(d["source"]))
    stitched = d[(d["source"] != d["target"]) & ~is_reference(d)]
    stitched = stitched.assign(combo=[combo_label(r) for _, r in stitched.iterrows()])
    combos = list(pd.unique(stitched["combo"]))
    own = scored[scored["stitcher"] == "non-stitched"]
    mean = {(c, e): np.nan for c in combos for e in encoders}
    std = dict(mean)
    for (c, e), g in stitched.groupby(["combo", "source"]):
        per_seed = g.groupby("seed")["value"].mean()
        mean[c, e], std[c, e] = per_seed.mean(), (per_seed.std(ddof=0) if len(per_seed) > 1 else np.nan)
    reference = {e: own[own["source"] == e]["value"].mean() for e in encoders}
    rows = [[c, *[fmt(mean[c, e], std[c, e]) for e in encoders]] for c in combos]
    rows.append(["own absolute head (reference)", *[fmt(reference[e]) for e in encoders]])
    link = _held_out_figure(encoders, combos, mean, std, reference, metric, page)
    return ("\n### Held-out encoders (PARAM, Figure 1)\n\n"
            f"Zero-shot {metric} of each held-out encoder through decoders trained on the other encoders "
            "(anchors chosen without it), mean over those decoders, ± std over seeds; the dotted line "
            "is the held-out encoder's own absolute head.\n\n"
            + tabulate(rows, headers=["combination", *[f"held out: {e}" for e in encoders]], tablefmt="pipe",
                       disable_numparse=True)
            + f"\n\n![held-out encoders]({link})\n")


def _held_out_figure(encoders, combos, mean, std, reference, metric, page: Page) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 0.8 / max(1, len(combos))
    fig, ax = plt.subplots(figsize=(1.5 + 1.6 * len(encoders), 4.2))
    for i, c in enumerate(combos):
        xs = [j - 0.4 + width * (i + 0.5) for j in range(len(encoders))]
        ax.bar(xs, [mean[c, e] for e in encoders], width,
               yerr=[0 if np.isnan(std[c, e]) else std[c, e] for e in encoders], label=c, capsize=2)
    for j, e in enumerate(encoders):
        ax.hlines(reference[e], j - 0.45, j + 0.45, colors="black", linestyles="dotted")
    ax.set_xticks(range(len(encoders)), [f"held out: {e}" for e in encoders], fontsize=8)
    ax.set_ylabel(f"zero-shot {metric}")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)
    fig.tight_layout()
    path, link = page.figure(f"held-out-{slug(metric)}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return link


def common_metrics(df: pd.DataFrame) -> list[str]:
    """Metrics every combination reports (the task's metrics), in task order; per-cell
    diagnostics that only some stitchers emit (e.g. IRP's reconstruction cosine) are not."""
    per_combo = df[df["metric"] != "error"].groupby(COMBO, dropna=False)["metric"].agg(set)
    shared = set.intersection(*per_combo) if len(per_combo) else set()
    return [m for m in metric_order(df) if m in shared]


def stitching_page(df: pd.DataFrame, page: Page) -> str:
    """Body of a stitching task's page."""
    metrics = common_metrics(df)
    if not metrics:
        return "_No finished results yet._\n"
    primary = metrics[0]
    scores = {m: stitching_scores(df, m) for m in metrics}
    base = scores[primary]
    reverse = primary not in LOWER_IS_BETTER
    methods = ranked(base[~base["reference"]], primary)
    refs = base[base["reference"]]
    lines = []

    def rows_for(table: pd.DataFrame, numbered: bool) -> list[list[str]]:
        out = []
        best = table["stitched"].max() if reverse else table["stitched"].min()
        for rank, (_, r) in enumerate(table.iterrows(), 1):
            stitched = fmt(r["stitched"], r["stitched_std"])
            if numbered and r["stitched"] == best and not math.isnan(best):
                stitched = f"**{stitched}**"
            row = ([rank] if numbered else []) + [r[c] for c in COMBO] + [stitched]
            for m in metrics[1:]:
                other = scores[m]
                match = other[(other[COMBO] == r[COMBO]).all(axis=1)]
                row.append(fmt(match["stitched"].iloc[0], match["stitched_std"].iloc[0]) if len(match) else "n/a")
            row += [fmt(r["own"], r["own_std"]), r["achievable"]]
            out.append(row)
        return out

    headers = ["selector", "similarity", "stitcher", "regularizer", f"stitched {arrow(primary)}"] + \
        [f"stitched {arrow(m)}" for m in metrics[1:]] + [f"own space {arrow(primary)}", "achievable pairs"]
    extras_cols = [m for m in metric_order(df) if m not in metrics]
    lines.append(f"### Ranking by stitched {primary} (mean over encoder pairs; mean ± std over seeds)\n")
    lines.append("*stitched*: decoder fitted on one encoder, evaluated zero-shot on another (off-diagonal "
                 "pairs); *own space*: the same decoder on its own encoder (diagonal); *achievable pairs*: "
                 "off-diagonal pairs the method can evaluate at all.\n")
    lines.append(tabulate(rows_for(methods, True), headers=["#"] + headers, tablefmt="pipe", disable_numparse=True))
    if len(refs):
        lines.append("\n### Reference rows\n")
        lines.append("Absolute heads (no translation) and the non-stitched upper bound (each decoder on its own "
                     "encoder).\n")
        lines.append(tabulate(rows_for(refs, False), headers=headers, tablefmt="pipe", disable_numparse=True))
    both = df[df["extra"].map(lambda e: isinstance(e, dict) and e.get("needs_both_spaces", False))]
    if len(both):
        names = sorted(pd.unique(both["stitcher"]))
        lines.append(f"\nStitchers that need **both spaces at fit time** (a map estimated on parallel anchors): "
                     f"{', '.join(names)}. The others fit on the decoder side alone.\n")
    if extras_cols:
        lines.append("\n### Translation diagnostics (mean over stitched pairs and seeds)\n")
        diag_rows = []
        for _, r in methods.iterrows():
            vals = []
            for m in extras_cols:
                d = df[(df["metric"] == m) & (df["status"] == "ok") & (df["source"] != df["target"])]
                for c in COMBO:
                    d = d[d[c] == r[c]]
                vals.append(fmt(d["value"].mean()) if len(d) else "-")
            if any(v != "-" for v in vals):
                diag_rows.append([combo_label(r), *vals])
        if diag_rows:
            lines.append(tabulate(diag_rows, headers=["combination"] + [arrow(m) for m in extras_cols],
                                  tablefmt="pipe", disable_numparse=True))
    if len(methods) and not math.isnan(methods["stitched"].iloc[0]):
        top = methods.iloc[0]
        link = _heatmap(df, primary, dict(top[COMBO]), page, f"{primary} {combo_label(top)}")
        lines.append(f"\n### Per-pair {primary} of the best combination ({combo_label(top)})\n")
        lines.append(f"![heatmap]({link})\n")
        absolute = refs[refs["achievable"] != "-"]
        for _, r in absolute.iterrows():
            link = _heatmap(df, primary, dict(r[COMBO]), page, f"{primary} {combo_label(r)}")
            lines.append(f"Reference for comparison ({combo_label(r)}):\n\n![heatmap]({link})\n")
    lines.append(held_out_section(df, primary, page))
    errors = df[df["status"] == "error"]
    if len(errors):
        lines.append(f"\n### Failed combinations ({len(errors)})\n")
        err_rows = [[combo_label(r), r["target"], str(r["error"]).splitlines()[0][:160]]
                    for _, r in errors.drop_duplicates(COMBO + ["target"]).iterrows()]
        lines.append(tabulate(err_rows, headers=["combination", "target", "error"], tablefmt="pipe"))
    return "\n".join(lines) + "\n"


def stitching_headline(df: pd.DataFrame) -> dict | None:
    """Best non-reference combination, its score and the non-stitched reference."""
    metrics = common_metrics(df)
    if not metrics:
        return None
    primary = metrics[0]
    s = stitching_scores(df, primary)
    methods = s[~s["reference"]].dropna(subset=["stitched"])
    if not len(methods):
        return None
    best = ranked(methods, primary).iloc[0]
    ref = s[s["reference"]]["own"].max() if s["reference"].any() else np.nan
    return {"metric": primary, "best": combo_label(best), "score": best["stitched"],
            "std": best["stitched_std"], "reference": ref}


def published_section(df: pd.DataFrame, published: list[dict]) -> str:
    """A table of published numbers next to ours for the same cell (or pair mean)."""
    rows = []
    for entry in published:
        d = df[(df["metric"] == entry["metric"]) & (df["status"] == "ok")]
        for col in (*COMBO, "source", "target"):
            if col in entry:
                d = d[d[col] == entry[col]]
        if "source" not in entry and "target" not in entry:
            d = d[d["source"] != d["target"]]
        per_seed = d.groupby("seed")["value"].mean()
        ours = per_seed.mean() if len(per_seed) else np.nan
        cell = " · ".join(str(entry[c]) for c in (*COMBO, "source", "target") if c in entry)
        rows.append([cell or "all", entry["metric"], fmt(entry["value"]),
                     fmt(ours, per_seed.std(ddof=0) if len(per_seed) > 1 else None),
                     fmt(ours - entry["value"]) if not math.isnan(ours) else "not run",
                     entry.get("reference", "")])
    return ("\n### Published numbers next to ours\n\n" +
            tabulate(rows, headers=["cell", "metric", "published", "relbench", "difference", "source"],
                     tablefmt="pipe", disable_numparse=True) + "\n")


def _side(df: pd.DataFrame, filters: dict) -> pd.DataFrame:
    for col, value in filters.items():
        df = df[df[col] == value]
    return df[df["source"] != df["target"]]


def claims_section(df: pd.DataFrame, claims: list[dict]) -> str:
    """Each claimed ordering, checked on the stored rows: holds or not, with the numbers."""
    metrics = metric_order(df)
    stitching = "kind" in df and (df["kind"] == "stitching").all()
    lines = ["\n### Orderings reported by the papers, checked here\n"]
    for claim in claims:
        metric = claim.get("metric") or (metrics[0] if metrics else "")
        sides = [_side(df[df["metric"] == metric], claim[k]) for k in ("better", "worse")]
        if claim.get("measure", "score") == "achievable":
            values = [len(d[d["status"] == "ok"].drop_duplicates(["source", "target"])) for d in sides]
            totals = [len(d.drop_duplicates(["source", "target"])) for d in sides]
            shown = [f"{v}/{t} pairs" for v, t in zip(values, totals)]
        else:
            values = [d[d["status"] == "ok"].groupby("seed", dropna=False)["value"].mean().mean() for d in sides]
            shown = [fmt(v) for v in values]
        if any(isinstance(v, float) and math.isnan(v) for v in values):
            verdict = "**not measured** (no stitched results for one side)"
        else:
            lower = metric in LOWER_IS_BETTER and claim.get("measure", "score") == "score"
            holds = values[0] < values[1] if lower else values[0] > values[1]
            verdict = "**holds**" if holds else "**does not hold on this data**"
        names = [", ".join(f"{k}={v}" for k, v in claim[s].items()) for s in ("better", "worse")]
        what = ("achievable pairs" if claim.get("measure") == "achievable"
                else f"stitched {metric}" if stitching else metric)
        lines.append(f"- {claim['claim']}: {verdict} — {names[0]}: {shown[0]} vs {names[1]}: {shown[1]} ({what}).")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- pages and index


def _header(df: pd.DataFrame, task: str, description: str = "") -> str:
    runs = sorted(pd.unique(df["run"])) if "run" in df else []
    date = runs[-1][:8] if runs else "?"
    date = f"{date[:4]}-{date[4:6]}-{date[6:8]}" if len(date) == 8 else date
    version = ", ".join(sorted({str(v) for v in pd.unique(df["relbench"])})) if "relbench" in df else "?"
    git = ", ".join(sorted({str(v) for v in pd.unique(df["git"]) if v})) if "git" in df else ""
    device = ", ".join(sorted({str(v) for v in pd.unique(df["device"])})) if "device" in df else "?"
    seeds = sorted(int(s) for s in pd.unique(df["seed"].dropna()))
    commands = sorted({str(v) for v in pd.unique(df["command"])}) if "command" in df else []
    envs = sorted({str(v) for v in pd.unique(df["environment"].dropna())}) if "environment" in df else []
    env = f" ({'; '.join(envs)})" if envs else ""
    lines = [f"# {task}\n"]
    if description:
        lines.append(description + "\n")
    lines.append(f"Produced by `{'`, `'.join(commands)}` with relbench {version}"
                 f"{f' (git {git})' if git else ''} on {device}{env}, "
                 f"last run {date}; seeds {seeds}. "
                 f"Generated from the results store by `relbench leaderboard`; do not edit by hand.\n")
    return "\n".join(lines)


def cross_task_ranking(orders: dict[str, list[str]]) -> list[tuple[str, float, float, int]]:
    """Combine per-task orderings (task → combination labels, best first) into one ranking.

    Returns ``(combination, mean normalised rank, mean rank, number of tasks)`` rows,
    best first. Rank *r* of *n* in a task is normalised to ``(r - 1) / (n - 1)`` (0 when a
    task has one combination), so a combination is not favoured by appearing only in
    tasks with small grids; ties are broken by more tasks, then by name.
    """
    normalised: dict[str, list[float]] = {}
    ordinal: dict[str, list[int]] = {}
    for order in orders.values():
        for rank, label in enumerate(order, 1):
            normalised.setdefault(label, []).append((rank - 1) / (len(order) - 1) if len(order) > 1 else 0.0)
            ordinal.setdefault(label, []).append(rank)
    rows = [(k, float(np.mean(v)), float(np.mean(ordinal[k])), len(v)) for k, v in normalised.items()]
    return sorted(rows, key=lambda row: (row[1], -row[3], row[0]))


def render(store: ResultStore, out: Path, registry: Registry, descriptions: dict[str, str] | None = None,
           tasks: list[str] | None = None, published: dict[str, list[dict]] | None = None,
           claims: dict[str, list[dict]] | None = None) -> list[Path]:
    """Write one page per stored task and the index; return the written paths.

    ``descriptions``, ``published`` and ``claims`` (per task) come from the tasks file;
    everything else from the store."""
    out.mkdir(parents=True, exist_ok=True)
    descriptions, published, claims = descriptions or {}, published or {}, claims or {}
    written, index_rows, ranks = [], [], {}
    for task in tasks or store.tasks():
        df = store.load(task)
        if df.empty:
            continue
        kind_name = str(df["kind"].dropna().iloc[0])
        page = Page(out, task, store)
        kind_cls = registry.by_interface["task_kind"].get(kind_name)
        kind = kind_cls.cls() if kind_cls else None
        body = kind.leaderboard(df, page) if kind is not None and hasattr(kind, "leaderboard") \
            else stitching_page(df, page)
        if claims.get(task):
            body = claims_section(df, claims[task]) + "\n" + body
        if published.get(task):
            body += published_section(df, published[task])
        path = out / f"{task}.md"
        atomic_write_bytes(path, (_header(df, task, descriptions.get(task, "")) + "\n" + body).encode())
        written.append(path)
        headline = (kind.headline(df) if kind is not None and hasattr(kind, "headline")
                    else stitching_headline(df) if kind_name == "stitching" else None)
        if headline:
            gap = headline["reference"] - headline["score"] if not math.isnan(headline.get("reference", np.nan)) \
                else np.nan
            index_rows.append([f"[{task}]({task}.md)", kind_name, headline["best"], headline["metric"],
                               fmt(headline["score"], headline.get("std")), fmt(headline.get("reference", np.nan)),
                               fmt(gap)])
        else:
            index_rows.append([f"[{task}]({task}.md)", kind_name, "see page", "", "", "", ""])
        if kind_name == "stitching":
            metric = next(iter(common_metrics(df)), None)
            if metric:
                s = stitching_scores(df, metric)
                s = ranked(s[~s["reference"]].dropna(subset=["stitched"]), metric)
                ranks[task] = [combo_label(r) for _, r in s.iterrows()]
    lines = ["# relbench leaderboards\n",
             "Generated by `relbench leaderboard` from the results store; do not edit by hand. Scores are "
             "means over encoder pairs (stitched, off-diagonal) and ± std over seeds.\n",
             "## Tasks\n",
             tabulate(index_rows, headers=["task", "kind", "best combination", "metric", "best stitched",
                                           "non-stitched", "gap"], tablefmt="pipe", disable_numparse=True)]
    if ranks:
        lines += ["\n## Methods across stitching tasks\n",
                  "Each task ranks its combinations best first; a rank is normalised to 0 (best) … 1 (worst) "
                  "within its task so that tasks with small and large grids weigh alike. Sorted by mean "
                  "normalised rank; *tasks* says on how many tasks a combination was measured.\n",
                  tabulate([[k, f"{norm:.2f}", f"{rank:.2f}", n] for k, norm, rank, n in cross_task_ranking(ranks)],
                           headers=["combination", "mean normalised rank", "mean rank", "tasks"],
                           tablefmt="pipe", disable_numparse=True)]
    index = out / "README.md"
    atomic_write_bytes(index, ("\n".join(lines) + "\n").encode())
    return [index, *written]
