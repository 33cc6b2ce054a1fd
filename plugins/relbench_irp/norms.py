"""Distributions of embedding norms (IRP §4.2 "Scale distributions", Figure 5)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from relbench.api import deferred_import
from relbench.api import (Page, ResultRow, Task, TaskKind, TaskRunAPI, UnitKey, fmt, fmt_interval, save_figure,
                          seed_interval, table)

pd = deferred_import("pandas")
torch = deferred_import("torch")

FIGURE = "embedding_norms.png"
#: the summary statistics of a norm distribution, as metric names (every one neutral)
STATISTICS = ("norm_mean", "norm_std", "norm_cv")
QUANTILE = "norm_quantile"


def norm_histogram(norms: torch.Tensor, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Counts and edges of ``bins`` equal-width bins over ``[min, max]`` of ``norms``,
    binned as :func:`numpy.histogram` bins them (the last bin closed on the right); a
    constant sample gets the range ``[v − 0.5, v + 0.5]``, as numpy gives it."""
    x = norms.detach().to("cpu", torch.float64).flatten()
    low, high = float(x.min()), float(x.max())
    if low == high:
        low, high = low - 0.5, high + 0.5
    edges = np.linspace(low, high, bins + 1)
    # bin i holds edges[i] ≤ x < edges[i + 1]; the maximum falls in the last bin
    index = (torch.searchsorted(torch.from_numpy(edges), x, right=True) - 1).clamp_(0, bins - 1)
    return torch.bincount(index, minlength=bins).numpy(), edges


def norm_rows(norms: torch.Tensor, quantiles: list[float], encoder: str) -> list[ResultRow]:
    """``norm_mean``, ``norm_std`` (ddof 1), ``norm_cv`` (std / mean) and one
    ``norm_quantile`` per quantile (linear interpolation) of ``norms``, in ``encoder``'s cell."""
    x = norms.detach().to("cpu", torch.float64)
    mean, std = float(x.mean()), float(x.std())
    values = {"norm_mean": mean, "norm_std": std, "norm_cv": std / mean if mean else float("nan")}
    rows = [ResultRow(metric=m, value=v, direction="neutral", cell={"encoder": encoder}) for m, v in values.items()]
    levels = torch.tensor(quantiles, dtype=torch.float64)
    rows += [ResultRow(metric=QUANTILE, value=float(v), direction="neutral", cell={"encoder": encoder, "quantile": q})
             for q, v in zip(quantiles, torch.quantile(x, levels).tolist())]
    return rows


@dataclass
class EmbeddingNorms(TaskKind):
    """Distributions of embedding norms (Maiorca et al. 2024, §4.2, Figure 5): how the L2
    norms of each encoder's embeddings spread around their mean.

    IRP decodes every translated row to one norm (the target's mean scale), which is
    harmless when an encoder's norms have a single mode and a well-defined mean, as the
    paper's Figure 5 shows for its encoders. One unit per seed: each encoder's test
    embeddings of the seed's draw give rows (all neutral: they describe, not rank)
    ``norm_mean``, ``norm_std``, ``norm_cv`` (std / mean) and ``norm_quantile`` per
    quantile. Columns: ``encoder`` and ``quantile``. The first seed's unit also draws a
    histogram per encoder (counts on a log axis, as the paper's figure), shown on the page.

    Parameters:
        quantiles: quantile levels reported, each in [0, 1]. Default
            [0, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1] (our choice).
        bins: histogram bins per encoder. Default 50 (our choice).
    """

    name: ClassVar[str] = "embedding-norms"
    columns: ClassVar[tuple[str, ...]] = ("encoder", "quantile")
    paired_on: ClassVar[tuple[str, ...]] = ("encoder",)
    quantiles: list[float] = field(default_factory=lambda: [0.0, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0])
    bins: int = 50

    def __post_init__(self) -> None:
        if not self.quantiles or any(not 0.0 <= q <= 1.0 for q in self.quantiles):
            raise ValueError(f"embedding-norms: quantiles must be a non-empty list in [0, 1], got {self.quantiles}")
        if self.bins < 1:
            raise ValueError(f"embedding-norms: bins must be ≥ 1, got {self.bins}")

    def plan(self, task: Task) -> list[UnitKey]:
        """One unit per seed: every encoder's test norms."""
        return [{"seed": seed} for seed in task.seeds]

    def run(self, run: TaskRunAPI) -> None:
        """Compute the planned units not yet stored, each on its seed's test draw; the
        first seed's unit draws the histograms."""
        todo = [key for key in self.plan(run.task) if not run.is_done(key)]
        for key in run.progress(todo, desc="embedding norms", total=len(todo)):
            seed = key["seed"]
            norms = {label: bank.X.norm(dim=1) for label, bank in run.banks("test", seed).items()}
            with run.unit(key) as rows:
                for label, values in norms.items():
                    rows += norm_rows(values, self.quantiles, label)
                if seed == run.task.seeds[0]:
                    self._figure(run.figure_path(FIGURE), norms)

    def _figure(self, path, norms: dict[str, torch.Tensor]) -> None:
        """One panel per encoder: the histogram of its norms (log counts) and its mean."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(norms), figsize=(3.6 * len(norms), 3.0), squeeze=False)
        for ax, (label, values) in zip(axes[0], norms.items()):
            counts, edges = norm_histogram(values, self.bins)
            ax.stairs(counts, edges, fill=True, alpha=0.7)
            ax.axvline(float(values.mean()), color="red", lw=1, label="mean")
            ax.set_yscale("log")
            ax.set_xlabel("L2 norm (scale)")
            ax.set_ylabel("number of samples (log)")
            ax.set_title(f"{label} (n = {len(values)})", fontsize=9)
            ax.legend(fontsize=7)
        fig.tight_layout()
        save_figure(fig, path)

    def meaning(self, headline: dict | None, direction: str) -> str:
        """How to read the page: a small coefficient of variation and close quantiles mean
        one well-defined scale, which IRP's rescaling to the mean norm assumes."""
        return ("Each encoder's embedding norms are described, not ranked: a small coefficient of variation (std / "
                "mean) and quantiles close to the mean mean one well-defined scale, which IRP's decoding to the "
                "target's mean norm assumes (Maiorca et al. 2024, Figure 5).")

    def page(self, results: pd.DataFrame, page: Page) -> str:
        """The per-encoder table (mean over seeds [95 % t-interval over seeds]) and the
        first seed's histograms."""
        ok = results[(results["status"] == "ok") & results["metric"].isin(STATISTICS + (QUANTILE,))]
        if ok.empty:
            return "No results yet.\n"
        link = page.stored_figure(FIGURE)
        figure = (f"\n![embedding norm histograms]({link})\n\nHistograms of the first seed's test embeddings' L2 "
                  f"norms (counts on a log axis); red: the mean.\n") if link else ""
        return _summary(ok) + figure


def _summary(ok: pd.DataFrame) -> str:
    """Per encoder: each statistic and quantile as the mean over seeds with its 95 %
    interval over seeds."""
    quantiles = sorted(ok.loc[ok["metric"] == QUANTILE, "quantile"].dropna().unique())
    columns = [(m, None) for m in STATISTICS] + [(QUANTILE, q) for q in quantiles]
    body = []
    for encoder, g in ok.groupby("encoder", sort=False):
        cells = []
        for metric, q in columns:
            rows = g[g["metric"] == metric]
            rows = rows[rows["quantile"] == q] if q is not None else rows
            per_seed = rows.groupby("seed")["value"].mean()
            cells.append(f"{fmt(per_seed.mean())} {fmt_interval(*seed_interval(per_seed))}" if len(rows) else "n/a")
        body.append([encoder] + cells)
    headers = ["encoder", "mean", "std", "std / mean"] + [f"q{q:g}" for q in quantiles]
    return ("L2 norms of the test embeddings (mean over seeds [95 % t-interval over seeds]; a table too wide for a "
            "screen continues below, its rows named again):\n\n" + table(body, headers=headers, keep=1) + "\n")
