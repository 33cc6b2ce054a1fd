"""The stitching kind's matrices on the interactive board: per combination, the
source × target cells of the page's first metric, each the mean over seeds that the
page's per-pair heatmap shows (:func:`relbench_stitching.page.pair_matrix`), with the
95 % interval the page's ranking uses (:func:`relbench.uncertainty.bootstrap_columns`:
Student-t over seeds; with one seed, a bootstrap over its test samples) and the number
of seeds."""

from __future__ import annotations

import math

from relbench.api import bootstrap_columns, deferred_import, Page, with_samples
from relbench_stitching.intervals import CELL, COMBO
from relbench_stitching.scores import common_metrics, prepared

pd = deferred_import("pandas")

#: the columns spanning a matrix: the decoder's encoder (rows) and the evaluated one (columns)
AXES = ("source", "target")


def matrix_cells(results: pd.DataFrame, page: Page) -> list[dict] | None:
    """Every (combination, source, target) cell of the first metric every combination
    reports: ``score`` (mean over seeds of the pair's finished rows), ``low``/``high`` (95 %
    interval, None where it cannot be drawn) and ``n`` (seeds); None without results."""
    df = prepared(results)
    metrics = common_metrics(df)
    if not metrics:
        return None
    metric = metrics[0]
    rows = df[(df["metric"] == metric) & (df["status"] == "ok")]
    cells = []
    for combo, group in rows.groupby(COMBO, sort=False, dropna=False):
        pairs = group.groupby(list(AXES), sort=False)
        masks = {f"{s}\0{t}": pd.Series(group.index.isin(index), index=group.index)
                 for (s, t), index in pairs.groups.items()}
        draws = bootstrap_columns(with_samples(group, df, CELL), masks, page.metrics.get(metric))
        for (source, target), pair in pairs:
            low, high = draws.interval(f"{source}\0{target}") if draws is not None else (math.nan, math.nan)
            cells.append({**{c: None if v == "-" else v for c, v in zip(COMBO, combo)}, "metric": metric,
                          "source": source, "target": target, "score": float(pair["value"].astype(float).mean()),
                          "low": low if math.isfinite(low) else None, "high": high if math.isfinite(high) else None,
                          "n": int(pair["seed"].nunique())})
    return cells
