"""The poster's figure of death-time distributions without and with topological
densification (García-Castellanos et al.), as a task kind."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from relbench.api import deferred_import
from relbench.api import (Axis, Page, ResultRow, Task, TaskKind, TaskRunAPI, UnitKey, fmt, fmt_interval, head_settings,
                          save_figure, seed_interval, table, validate_head_params)
from relbench_topology.death_times import grouped_death_times, quantile_metric

pd = deferred_import("pandas")
#: the metric of :meth:`DeathTimes.claim_rows`: a distribution's relative spread
SPREAD = "death_time_spread"
torch = deferred_import("torch")

FIGURE = "death_times.png"
#: the spaces whose death times a unit reports: the (adapted) embeddings the term before
#: the projection acts on, and the relative features the term after it acts on
SPACES = ("embedding", "relative")
NO_REGULARIZER = "none"


@dataclass
class DeathTimes(TaskKind):
    """Distributions of 0-dim death times without and with topological densification
    (García-Castellanos et al., the poster's figure: top without, bottom with).

    One unit per (seed, encoder, selector, similarity, regularizer): the relative decoder
    is trained on the encoder's fit part exactly as the stitching kind's ``relative``
    stitcher trains it with that regularizer (``none``: no adapter; ``adapter``: the
    same-budget control; ``topological``: densification), then the seed's test rows are
    sent through what it trained (the adapter, when there is one, and the refitted
    similarity) and cut, per class, into groups of ``group_size`` rows (the size a class
    has in the regularizer's class-balanced batches). Each group's death times (its
    minimum-spanning-tree edge lengths) are pooled per space, ``embedding`` (the adapted
    embeddings) and ``relative`` (the relative features), and reported as rows (all
    neutral: they describe, not rank): ``death_time_qNN`` per quantile, ``death_time_mean``
    and ``death_time_std``. Columns: ``encoder``, ``selector``, ``similarity``,
    ``regularizer`` and ``space``. The first seed's units also draw, per encoder and
    similarity, the histograms of the relative space's death times of every regularizer
    (those computed in the run that draws the figure).

    Densification pulls each class's death times towards β, so its distribution is
    narrower than the control's (a smaller spread between the low and high quantiles).

    Parameters:
        quantiles: quantile levels reported, each in (0, 1). Default [0.1, 0.25, 0.5, 0.75,
            0.9] (our choice).
        group_size: rows per same-class group whose death times are measured. Default 16
            (the regularizer's ``samples_per_class``).
        bins: histogram bins. Default 40 (our choice).
        epochs, lr, hidden, batch_size, adapter_decay: the relative decoder's training,
            as the ``relative`` stitcher's parameters (defaults: the modality's reference
            epochs and lr, 256, 32, 0.1); set them as the task whose units are compared.
    """

    name: ClassVar[str] = "death-times"
    columns: ClassVar[tuple[str, ...]] = ("encoder", "selector", "similarity", "regularizer", "space")
    paired_on: ClassVar[tuple[str, ...]] = ("encoder", "selector", "similarity", "space")
    axes: ClassVar[dict[str, Axis]] = {"selectors": Axis("selector"), "similarities": Axis("similarity"),
                                       "regularizers": Axis("regularizer", allows_none=True)}
    quantiles: list[float] = field(default_factory=lambda: [0.1, 0.25, 0.5, 0.75, 0.9])
    group_size: int = 16
    bins: int = 40
    epochs: int | None = None
    lr: float | None = None
    hidden: int = 256
    batch_size: int = 32
    adapter_decay: float = 0.1

    def __post_init__(self) -> None:
        if not self.quantiles or any(not 0.0 < q < 1.0 for q in self.quantiles):
            raise ValueError(f"death-times: quantiles must be a non-empty list in (0, 1), got {self.quantiles}")
        if self.group_size < 2 or self.bins < 1 or not self.adapter_decay > 0:
            raise ValueError("death-times: group_size ≥ 2, bins ≥ 1 and adapter_decay > 0 are required")
        validate_head_params(self.epochs, self.lr, self.hidden, self.batch_size)

    def validate(self, task: Task) -> None:
        """The grid needs a selector and a similarity (the relative decoder's)."""
        if not task.grid["selectors"] or not task.grid["similarities"]:
            raise ValueError("death-times: set grid.selectors and grid.similarities (the relative decoder's anchors "
                             "and similarity)")

    def plan(self, task: Task) -> list[UnitKey]:
        """One unit per (seed, encoder, selector, similarity, regularizer), seed first."""
        return [{"seed": seed, "encoder": enc, "selector": sel, "similarity": sim,
                 "regularizer": reg if reg is not None else NO_REGULARIZER}
                for seed in task.seeds for enc in task.encoders for sel in task.grid["selectors"]
                for sim in task.grid["similarities"] for reg in task.grid["regularizers"]]

    def run(self, run: TaskRunAPI) -> None:
        """Train and measure every unit not yet stored; the first seed's relative death
        times computed here are drawn as histograms."""
        todo = [key for key in self.plan(run.task) if not run.is_done(key)]
        drawn: dict[tuple[str, str], dict[str, np.ndarray]] = {}
        for key in run.progress(todo, desc="death times", total=len(todo)):
            with run.unit(key) as rows:
                times = self._unit_times(run, key)
                names = {name: str(key[name] if isinstance(key[name], str) else key[name].label)
                         for name in ("encoder", "selector", "similarity", "regularizer")}
                for space, values in times.items():
                    rows += death_time_rows(values, self.quantiles, {"space": space})
                if key["seed"] == run.task.seeds[0]:
                    panel = drawn.setdefault((names["encoder"], names["similarity"]), {})
                    panel[names["regularizer"]] = times["relative"]
        if drawn:
            self._figure(run.figure_path(FIGURE), drawn)

    def _unit_times(self, run: TaskRunAPI, key: UnitKey) -> dict[str, np.ndarray]:
        """The death times of the seed's test rows in each space, after training the
        relative decoder with the unit's regularizer."""
        from relbench_relreps.heads import train_relative_with_regularizers

        seed, label = key["seed"], key["encoder"].label
        train, test = run.banks("train", seed)[label], run.banks("test", seed)[label]
        if train.labels is None or test.labels is None:
            raise ValueError(f"death-times: encoder {label!r} has unlabelled rows; death times are taken per class")
        A = run.realise(run.anchors(seed, key["selector"]), label)
        similarity = key["similarity"].build()
        similarity.fit(train.X)
        regularizers = [] if key["regularizer"] == NO_REGULARIZER else [key["regularizer"].build()]
        settings = head_settings(run.modality(label), self.epochs, self.lr, self.hidden, self.batch_size)
        fitted = train_relative_with_regularizers(
            label, train.X, train.labels.long(), A, similarity, regularizers, settings,
            len(run.dataset().class_names), seed,
            adapter_decay=self.adapter_decay, evaluation=run.task.protocol.evaluation)
        with torch.no_grad():
            embedded = fitted.adapter(test.X) if fitted.adapter is not None else test.X
            spaces = {"embedding": embedded, "relative": fitted.relative(test.X, A)}
        y = test.labels.cpu().numpy()
        return {space: grouped_death_times(Z.detach().cpu().double().numpy(), y, self.group_size, seed)
                for space, Z in spaces.items()}

    def _figure(self, path, drawn: dict[tuple[str, str], dict[str, np.ndarray]]) -> None:
        """One panel per (encoder, similarity): the relative death times' histogram of
        every regularizer, as densities on shared bins."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(drawn), figsize=(3.8 * len(drawn), 3.0), squeeze=False)
        for ax, ((encoder, similarity), arms) in zip(axes[0], drawn.items()):
            pooled = np.concatenate(list(arms.values()))
            edges = np.linspace(pooled.min(), pooled.max() if pooled.max() > pooled.min() else pooled.min() + 1,
                                self.bins + 1)
            for regularizer, values in arms.items():
                ax.hist(values, bins=edges, density=True, histtype="step", lw=1.4,
                        label=f"{regularizer} (n = {len(values)})")
            ax.set_xlabel("0-dim death time (relative space)")
            ax.set_ylabel("density")
            ax.set_title(f"{encoder} · {similarity}", fontsize=9)
            ax.legend(fontsize=7)
        fig.tight_layout()
        save_figure(fig, path)

    def claim_rows(self, results: pd.DataFrame) -> pd.DataFrame:
        """What a claim compares: per stored cell (unit, seed and columns), the relative
        spread of its death times, ``death_time_spread`` ↓ = (highest reported quantile −
        lowest) / mean: a narrower distribution (the poster's figure) without the scale,
        which an adapter changes. No rows for cells without two quantiles and a mean."""
        ok = results[(results["status"] == "ok") & results["metric"].str.startswith("death_time_")]
        keys = ["unit", "seed", *self.columns]
        quantiles = sorted(m for m in set(ok["metric"]) if m.startswith("death_time_q"))
        if len(quantiles) < 2 or "death_time_mean" not in set(ok["metric"]):
            return results.iloc[:0]
        wide = ok.pivot_table(index=keys, columns="metric", values="value", aggfunc="first")
        spread = (wide[quantiles[-1]] - wide[quantiles[0]]) / wide["death_time_mean"]
        first = ok.drop_duplicates(keys).set_index(keys)
        rows = first.loc[spread.index].assign(metric=SPREAD, direction="lower", value=spread.to_numpy()).reset_index()
        return rows[[c for c in results.columns if c in rows.columns]]

    def meaning(self, headline: dict | None, direction: str) -> str:
        """How to read the page: densification narrows the distribution around β."""
        return ("Death times are described, not ranked: topological densification pulls each class's death times "
                "towards its scale β, so the rows with `topological` should show quantiles closer together than "
                "the same-budget `adapter` control and `none` (García-Castellanos et al., the poster's figure). "
                "β here is not tuned: the `beta_quantile` quantile of the death times measured in each space before "
                "training, as the tasks file sets it (default 0.5, the median), where the stitching tasks' "
                "`topological` rows choose the quantile on validation data (so their units differ from these); a "
                "quantile stands for the "
                "authors' absolute β = 3–4 because death times carry each space's own units.")

    def page(self, results: pd.DataFrame, page: Page) -> str:
        """The quantiles per (encoder, selector, similarity, space, regularizer) as the
        mean over seeds [95 % t-interval over seeds], and the first seed's histograms."""
        ok = results[(results["status"] == "ok") & results["metric"].str.startswith("death_time_")]
        if ok.empty:
            return "No results yet.\n"
        link = page.stored_figure(FIGURE)
        figure = (f"\n![death time histograms]({link})\n\nDeath times of the first seed's test rows in the relative "
                  f"space, groups of one class, one histogram per regularizer.\n") if link else ""
        return _summary(ok) + figure


def death_time_rows(values: np.ndarray, quantiles: list[float], cell: dict) -> list[ResultRow]:
    """``death_time_qNN`` per quantile (linear interpolation), ``death_time_mean`` and
    ``death_time_std`` (ddof 1) of ``values``, in ``cell``; no rows for no values."""
    if len(values) == 0:
        return []
    stats = {quantile_metric(q): float(v) for q, v in zip(quantiles, np.quantile(values, quantiles))}
    stats.update(death_time_mean=float(values.mean()), death_time_std=float(values.std(ddof=1)) if len(values) > 1
                 else 0.0)
    return [ResultRow(metric=m, value=v, direction="neutral", cell=dict(cell)) for m, v in stats.items()]


def _summary(ok: pd.DataFrame) -> str:
    """One row per (encoder, selector, similarity, space, regularizer), one column per
    death-time statistic: the mean over seeds with its 95 % t-interval over seeds."""
    metrics = sorted(m for m in ok["metric"].unique() if m.startswith("death_time_q"))
    metrics += [m for m in ("death_time_mean", "death_time_std") if m in set(ok["metric"])]
    index = ["encoder", "selector", "similarity", "space", "regularizer"]
    body = []
    for keys, g in ok.groupby(index, sort=False):
        cells = []
        for metric in metrics:
            per_seed = g[g["metric"] == metric].groupby("seed")["value"].mean()
            cells.append(f"{fmt(per_seed.mean())} {fmt_interval(*seed_interval(per_seed))}" if len(per_seed) else "n/a")
        body.append([*keys, *cells])
    headers = index + [m.removeprefix("death_time_") for m in metrics]
    return ("0-dim death times of same-class groups of test rows (mean over seeds [95 % t-interval over seeds]; a "
            "table too wide for a screen continues below, its rows named again):\n\n"
            + table(body, headers=headers, keep=len(index)) + "\n")
