"""Helpers the task kinds share: default grid entries, anchor contexts without
encoders, tables of means with intervals for their pages, headlines naming the best
cell of such a table, and figures of image rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from relbench.api import deferred_import
from relbench.api import (AnchorContext, Anchors, ConfigError, PluginSpec, arrow, bootstrap_columns, directions,
                          save_figure, table)

pd = deferred_import("pandas")
torch = deferred_import("torch")


def specs_or_default(specs: Sequence[PluginSpec], interface: str, cls: type) -> list[PluginSpec]:
    """The grid's specs, or one spec of ``cls`` with default parameters when empty."""
    return list(specs) if specs else [PluginSpec(interface, cls.name, {}, cls.name, cls)]


def image_view(kind: str, view: str | None, data) -> str:
    """The image view a kind that trains on pixels reads: ``view`` (checked), or the data
    set's first image view when None; a :class:`ConfigError` naming ``kind`` otherwise."""
    if view is not None:
        if view not in data.view_modalities:
            raise ConfigError(f"{kind}: data set {data.name!r} has no view {view!r}; views: {', '.join(data.views)}.")
        return view
    for name, modality in data.view_modalities.items():
        if modality == "image":
            return name
    raise ConfigError(f"{kind} needs an image data set; {data.name!r} has views {data.views}.")


def select_without_banks(spec: PluginSpec, ids: list[str], labels: np.ndarray | None, seed: int,
                         num_anchors: int, device: torch.device) -> Anchors:
    """Run a selector that needs no embeddings (random, stratified) on raw sample ids."""
    def no_pool(name: str):
        raise ValueError(f"this task kind trains its own models; out-of-domain pools ({name!r}) are not available")

    ctx = AnchorContext(num_anchors=num_anchors, seed=seed, ids=list(ids), labels=labels, banks={},
                        excluded=frozenset(), device=device, views={}, pool_banks=no_pool)
    return spec.build().select(ctx)


def without_failures(df: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The rows that are not failures, and a note counting the failed units (empty if
    none; a failed unit is stored as a single ``error`` row)."""
    failed = df["status"] == "error"
    note = f"\n\n{int(failed.sum())} unit(s) failed; see the results store.\n" if failed.any() else ""
    return df[~failed], note


def with_arrows(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with each metric name followed by its declared direction's arrow (for headers)."""
    dirs = directions(df)
    return df.assign(metric=df["metric"].map(lambda m: arrow(m, dirs.get(m, "neutral"))))


def summary_table(df: pd.DataFrame, index: list[str], column: str, digits: int = 3,
                  bounds: tuple[float, float] | None = None) -> str:
    """A pipe table with one row per ``index`` combination and one column per value of
    ``column``; a cell is the mean over seeds of the mean of ``value`` over its other
    rows, with its 95 % interval (:mod:`relbench.uncertainty`: Student-t over seeds; with
    one seed, a bootstrap over its per-sample values where stored), cut at ``bounds``
    where the score has a range (a correlation's [−1, 1]: the mean lies inside it, so the
    cut interval covers as often). Cells whose rows are all not achievable show ``n/a``.
    Wider than a screen, the table is split, the ``index`` columns repeated
    (:func:`relbench.api.table`)."""
    if df.empty:
        return "_no results yet_"
    cols = sorted(df[column].dropna().unique().tolist(), key=str)
    rows = []
    for keys, group in df.groupby(index, sort=True, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        cells = []
        for col in cols:
            sub = group[group[column] == col]
            ok = sub[(sub["status"] == "ok") & sub["value"].notna()]
            cells.append(_with_interval(ok, digits, bounds) if len(ok) else ("n/a" if len(sub) else ""))
        rows.append([*keys, *cells])
    return table(rows, headers=[*index, *cols], keep=len(index))


def _with_interval(rows: pd.DataFrame, digits: int, bounds: tuple[float, float] | None) -> str:
    point, low, high = cell_estimate(rows)
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    mean = f"{point:.{digits}f}"
    return mean if not np.isfinite(low) or low == high else f"{mean} [{low:.{digits}f}, {high:.{digits}f}]"


def cell_estimate(rows: pd.DataFrame) -> tuple[float, float, float]:
    """``(score, low, high)`` of one cell of a :func:`summary_table`, as the table shows
    it: the mean over seeds of the mean of ``value`` over the cell's ok rows with a value,
    and its 95 % interval (:func:`relbench.uncertainty.bootstrap_columns`); NaNs when no such row exists (a cell
    the table shows as ``n/a``)."""
    ok = rows[(rows["status"] == "ok") & rows["value"].notna()]
    if ok.empty:
        return np.nan, np.nan, np.nan
    draws = bootstrap_columns(ok, {"cell": pd.Series(True, index=ok.index)}, None)
    low, high = draws.interval("cell")
    return float(draws.point[0]), low, high


def best_cell(cells: Mapping[str, pd.DataFrame], direction: str) -> tuple[str, tuple[float, float, float]] | None:
    """The label of the best of ``cells`` (label → the cell's rows of one metric) by its
    :func:`cell_estimate` score in the metric's ``direction``, with that estimate (the
    first in the mapping's order on ties); None when no cell has a score or the direction
    is neither ``higher`` nor ``lower``."""
    if direction not in ("higher", "lower"):
        return None
    scored = {label: cell_estimate(rows) for label, rows in cells.items()}
    scored = {label: estimate for label, estimate in scored.items() if np.isfinite(estimate[0])}
    if not scored:
        return None
    pick = max if direction == "higher" else min
    label = pick(scored, key=lambda name: scored[name][0])
    return label, scored[label]


def cell_headline(metric: str, best: str, estimate: tuple[float, float, float], reference: float = np.nan) -> dict:
    """A :meth:`TaskKind.headline <relbench.api.TaskKind.headline>` for the table cell
    ``best`` of ``metric``: its :func:`cell_estimate` as score and interval (no std: the
    interval stands for it), beside ``reference`` (NaN: none)."""
    score, low, high = estimate
    return {"metric": metric, "best": best, "score": score, "std": np.nan, "interval": (low, high),
            "reference": reference}


def image_rows(path, panels: list[tuple[str, torch.Tensor]], shape: tuple[int, ...]) -> None:
    """Save a figure (PNG at ``path``, its SVG twin beside it) with one row of grey images
    in [0, 1] per ``(title, images)`` panel, each image reshaped to ``shape``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(panels[0][1])
    fig, axes = plt.subplots(len(panels), n, figsize=(1.2 * n, 1.3 * len(panels)), squeeze=False)
    for r, (title, imgs) in enumerate(panels):
        for c in range(n):
            ax = axes[r][c]
            ax.imshow(imgs[c].detach().cpu().numpy().reshape(shape), cmap="gray", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[r][0].set_title(title, fontsize=7, loc="left")
    fig.tight_layout()
    save_figure(fig, path, dpi=100)


#: the two bottlenecks the kinds that train their own nets compare
BOTTLENECKS = ("absolute", "relative")


def check_training_settings(kind, positive: tuple[str, ...]) -> None:
    """A ``ValueError`` naming the first bad setting of a kind that trains its own nets:
    each of ``positive`` at least 1, ``lr`` above 0, ``model_seeds`` at least two distinct
    seeds (stitched pairs need two nets)."""
    for key in positive:
        if getattr(kind, key) < 1:
            raise ValueError(f"{key} must be positive, got {getattr(kind, key)}")
    if kind.lr <= 0:
        raise ValueError(f"lr must be positive, got {kind.lr}")
    seeds = kind.model_seeds
    if len(set(seeds)) < 2 or len(set(seeds)) != len(seeds):
        raise ValueError(f"model_seeds must hold at least two distinct seeds (stitched pairs need two models), "
                         f"got {seeds}")


def bottleneck_plan(task) -> list[dict]:
    """One unit per task seed × selector of the grid (default random) × bottleneck."""
    from relbench_relreps.selectors import RandomAnchors

    selectors = specs_or_default(task.grid["selectors"], "selector", RandomAnchors)
    return [{"seed": seed, "selector": sel, "bottleneck": bottleneck}
            for seed in task.seeds for sel in selectors for bottleneck in BOTTLENECKS]

