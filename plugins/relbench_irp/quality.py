"""Latent translation quality (IRP §4.1): how well IRP reconstructs a space, over ω × δ."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np

from relbench.api import deferred_import
from relbench.api import (Axis, Page, ResultRow, Task, TaskKind, TaskRunAPI, UnitKey, arrow, directions,
                          fit_reference_head, fmt, fmt_interval, head_key, head_settings, listing, lower_is_better,
                          predict_logits, seed_interval, seeded_generator, table, validate_head_params)
from relbench_irp.translate import PinvKind, TargetDecoder, centre_normalise

pd = deferred_import("pandas")
torch = deferred_import("torch")

#: the metrics drawn as ω × δ heatmaps
METRICS = ("reconstruction_cosine", "condition_number", "anchors_kept")
#: the accuracy of the target's own head on the translated test embeddings (Figure 6, right)
ACCURACY = "translated_accuracy"
SINGULAR = "irp_singular_anchor_sets"
#: the column a claim names to compare IRP's translation with none (:meth:`TranslationQuality.claim_rows`)
TRANSLATION, TRANSLATED, UNTRANSLATED = "translation", "irp", "none"
#: the prefix of metrics measured on the validation part (where the best (ω, δ) is chosen)
VALIDATION = "validation_"
SETTINGS = ("intra", "inter")


def sample_ids(ids: list[str], max_samples: int, seed: int) -> list[str]:
    """At most ``max_samples`` ids, a seeded random subset kept in split order."""
    if max_samples <= 0 or len(ids) <= max_samples:
        return list(ids)
    keep = torch.randperm(len(ids), generator=seeded_generator(seed))[:max_samples].sort().values
    return [ids[i] for i in keep.tolist()]


@dataclass
class TranslationQuality(TaskKind):
    """Latent translation quality of IRP (Maiorca et al. 2024, §4.1): reconstruction cosine over an ω × δ grid.

    Columns: ``selector`` and ``target`` (the unit: one per seed, selector and target
    encoder), ``source`` (the encoder translated into the target; the target itself is
    the *intra-space* setting, any other *inter-space*), ``omega`` and ``delta`` (the
    number of subspaces ω and the pruning threshold δ).

    In every unit the target's anchors are pruned with FPS at each δ into max(ω)
    subspaces; every encoder's test embeddings are translated into the target and
    compared with the target's true embeddings of the same samples. Rows per (source,
    ω, δ): ``reconstruction_cosine`` ↑, ``condition_number`` ↓ (mean over the ω
    pruned anchor matrices that are not numerically singular),
    ``irp_singular_anchor_sets`` ↓ (how many were singular; the page reports them)
    and ``anchors_kept`` (mean over the ω subspaces; neutral). Rows per source (no ω,
    δ): ``absolute_cosine`` ↑ (untranslated source vs target, when widths agree: the
    paper's Table 1 "absolute" column). With ``accuracy`` and a labelled data set, also
    ``translated_accuracy`` ↑ per (source, ω, δ): the target's reference head (trained on
    the target's fit part, as the ``absolute`` stitcher trains it) applied to the
    translated test embeddings, the paper's Figure 6 (right). The page shows
    Figure-3-style heatmaps and tables, and the correlations of Figure 6 over the (ω, δ)
    cells: reconstruction ↔ accuracy and condition number ↔ anchors kept.

    Parameters:
        omegas: numbers of subspaces ω to evaluate. Default [1, 2, 4, 8, 16] (our grid
            around the paper's ω = 8).
        deltas: pruning thresholds δ. Default [0.5, 0.6, 0.65, 0.7, 0.75, 0.8] (covers
            the paper's 0.65–0.8).
        pinv: ``plain`` (paper) or ``ridge`` pseudo-inverse. Default plain.
        ridge_alpha: Tikhonov α for ``ridge``. Default 0.01 (our choice).
        mean_norm: norm of decoded rows: mean norm of the centred target ``anchors``
            (paper) or ``train`` embeddings. Default anchors.
        completion: apply anchor completion (§3.3). Default False.
        max_samples: test samples evaluated per cell (seeded subset; 0 = all). Default
            1000 (our choice, for CPU time).
        accuracy: also score the target's head on the translated embeddings (needs
            labels). Default True.
        epochs, lr: that head's training epochs and Adam learning rate; None = the
            modality's reference default. Default None.
        hidden, batch_size: its hidden width and batch size. Default 256 and 32 (the
            ``absolute`` stitcher's).
    """

    name: ClassVar[str] = "translation-quality"
    columns: ClassVar[tuple[str, ...]] = ("selector", "target", "source", "omega", "delta")
    #: the board draws each (ω, δ) and metric's source × target matrix
    matrix_axes: ClassVar[tuple[str, ...]] = ("source", "target")
    paired_on: ClassVar[tuple[str, ...]] = ("target", "source")  # claims pair their sides on these
    claim_columns: ClassVar[tuple[str, ...]] = (TRANSLATION,)  # irp or none (claim_rows)
    axes: ClassVar[dict[str, Axis]] = {"selectors": Axis("selector")}
    omegas: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16])
    deltas: list[float] = field(default_factory=lambda: [0.5, 0.6, 0.65, 0.7, 0.75, 0.8])
    pinv: PinvKind = "plain"
    ridge_alpha: float = 0.01
    mean_norm: Literal["anchors", "train"] = "anchors"
    completion: bool = False
    max_samples: int = 1000
    accuracy: bool = True
    epochs: int | None = None
    lr: float | None = None
    hidden: int = 256
    batch_size: int = 32

    def __post_init__(self) -> None:
        if not self.omegas or any(o < 1 for o in self.omegas):
            raise ValueError(f"translation-quality: omegas must be a non-empty list of integers ≥ 1, got {self.omegas}")
        if not self.deltas or any(not 0.0 <= d <= 1.0 for d in self.deltas):
            raise ValueError(f"translation-quality: deltas must be a non-empty list in [0, 1], got {self.deltas}")
        if self.ridge_alpha <= 0 or self.max_samples < 0:
            raise ValueError("translation-quality: ridge_alpha must be positive and max_samples ≥ 0")
        validate_head_params(self.epochs, self.lr, self.hidden, self.batch_size)

    def validate(self, task: Task) -> None:
        """The grid names at least one anchor selector (every unit is one selector's)."""
        if not task.grid["selectors"]:
            raise ValueError("translation-quality needs at least one anchor selector in grid.selectors, "
                             "e.g. `selectors: [random]`.")

    def plan(self, task: Task) -> list[UnitKey]:
        """One unit per (seed, selector, target): every source × ω × δ."""
        return [{"seed": seed, "selector": sel, "target": target}
                for seed in task.seeds for sel in task.grid["selectors"] for target in task.encoders]

    def run(self, run: TaskRunAPI) -> None:
        """Compute the planned units not yet stored, each on its seed's draw: anchors
        from the fit part, cells on the test draw, and the reconstruction cosine once
        more on the validation part (``validation_reconstruction_cosine``), on which the
        page picks its best (ω, δ): nothing is chosen on the samples it reports."""
        todo = [key for key in self.plan(run.task) if not run.is_done(key)]
        if not todo:
            return
        labels = [e.label for e in run.task.encoders]
        with_validation = run.task.protocol.validation > 0
        for key in run.progress(todo, desc="translation quality", total=len(todo)):
            seed = key["seed"]
            train, test = run.banks("train", seed), run.banks("test", seed)
            with run.unit(key) as rows:
                anchors = run.anchors(seed, key["selector"])
                rows += self._cell(run, anchors, train, test, labels, key["target"].label, seed)
                if with_validation:
                    rows += self._cell(run, anchors, train, run.banks("validation", seed), labels,
                                       key["target"].label, seed, prefix=VALIDATION)

    def _cell(self, run, anchors, train, test, labels, target, seed, prefix: str = "") -> list[ResultRow]:
        """Every (source, ω, δ) cell on the evaluated bank ``test``; with ``prefix`` only
        the reconstruction cosine, under the prefixed metric name."""
        ids = sample_ids(test[target].ids, self.max_samples, seed)
        truth = test[target].rows(ids)
        head = None if prefix else self._head(run, train[target], target, seed)
        classes = None  # the test subset's labels, where the target's head is scored
        if head is not None and test[target].labels is not None:
            position = {sid: i for i, sid in enumerate(test[target].ids)}
            classes = test[target].labels[torch.tensor([position[i] for i in ids])].to(truth.device)
        else:
            head = None
        At = run.realise(anchors, target)
        scale = None
        if self.mean_norm == "train":
            scale = float((train[target].X - At.mean(dim=0)).norm(dim=1).mean())
        sources = {s: (run.realise(anchors, s), test[s].rows(ids)) for s in labels}
        rows = [] if prefix else [
            ResultRow(metric="absolute_cosine", direction="higher", cell={"source": s},
                      value=float(torch.nn.functional.cosine_similarity(X, truth, dim=1).mean()))
            for s, (_, X) in sources.items() if X.shape[1] == truth.shape[1]]
        for delta in self.deltas:
            dec = TargetDecoder.build(At, omega=max(self.omegas), delta=delta, seed=seed, pinv=self.pinv,
                                      ridge_alpha=self.ridge_alpha, scale=scale)
            for source, (As, Xs) in sources.items():
                centre, maps = dec.maps(As)
                Xs_hat = centre_normalise(Xs, centre)
                cumulative = torch.stack(maps).cumsum(dim=0)
                for omega in self.omegas:
                    Y = dec.decode(Xs_hat, cumulative[omega - 1] / omega, self.completion)
                    cell = {"source": source, "omega": omega, "delta": delta}
                    rows.append(ResultRow(metric=prefix + "reconstruction_cosine", direction="higher", cell=cell,
                                          value=float(torch.nn.functional.cosine_similarity(Y, truth, dim=1).mean())))
                    if head is not None:
                        predicted = predict_logits(head, Y).argmax(dim=1)
                        rows.append(ResultRow(metric=ACCURACY, direction="higher", cell=cell,
                                              value=float((predicted == classes).float().mean())))
                    if not prefix:
                        rows += [ResultRow(metric=name, value=d.value, direction=d.direction, cell=cell)
                                 for name, d in dec.diagnostics(omega).items()]
        return rows

    def _head(self, run: TaskRunAPI, bank, target: str, seed: int):
        """The target's reference head on its fit part (None without ``accuracy`` or
        labels), once per (seed, target) through the seed's shared memo."""
        if not self.accuracy or bank.labels is None:
            return None
        settings = head_settings(run.modality(target), self.epochs, self.lr, self.hidden, self.batch_size)
        num_classes, evaluation = len(run.dataset().class_names), run.task.protocol.evaluation
        key = head_key(target, "reference", settings, num_classes=num_classes, seed=seed, evaluation=evaluation)
        return run.shared(seed).get(key, lambda: fit_reference_head(
            bank.X, bank.labels, settings, num_classes=num_classes, seed=seed, evaluation=evaluation))

    def headline(self, results: pd.DataFrame) -> dict | None:
        """The anchors and (ω, δ) the page's per-pair table is drawn at (chosen on the
        validation part: the selector whose chosen cell has the best inter-space validation
        mean), its test reconstruction cosine in the inter-space setting as the ω × δ table
        shows it (mean over seeds, 95 % t-interval over seeds), and as reference the
        intra-space cosine at the same cell: a space translated into itself. A task with one
        encoder has no inter-space setting: its score is the intra-space one, without
        reference; ``edges``: the parameters (ω, δ) whose chosen value is an end of the
        grid swept, where a better cell may lie beyond it. None without validation rows (the
        page then chooses no cell either)."""
        d = _prepared(results)
        marks = directions(d)
        choices = [(selector, cell) for selector, g in d.groupby("selector", sort=False)
                   if (cell := _chosen(g, marks)) is not None]
        if not choices:
            return None
        sign = -1 if lower_is_better(marks[VALIDATION + METRICS[0]]) else 1
        selector, cell = max(choices, key=lambda choice: sign * choice[1]["mean"])
        at = d[(d["selector"] == selector) & (d["metric"] == METRICS[0]) & (d["omega"] == cell["omega"])
               & (d["delta"] == cell["delta"])]
        stats = _seed_stats(at, ["setting"]).set_index("setting")
        score = stats.loc["inter"] if "inter" in stats.index else stats.loc["intra"]
        reference = stats.loc["intra", "mean"] if "inter" in stats.index and "intra" in stats.index else np.nan
        grid = d[d["selector"] == selector]
        edges = [name for name, column in (("ω", "omega"), ("δ", "delta"))
                 if cell[column] in (grid[column].min(), grid[column].max())]
        return {"metric": METRICS[0], "best": f"{selector} · ω = {int(cell['omega'])} · δ = {cell['delta']:g}",
                "score": float(score["mean"]), "std": float(score["std"]),
                "interval": (float(score["low"]), float(score["high"])), "reference": float(reference),
                "edges": edges}

    def claim_rows(self, results: pd.DataFrame) -> pd.DataFrame:
        """What a claim compares (Maiorca et al. Table 1: a translated space against the
        untranslated one): per selector, the test ``reconstruction_cosine`` of every
        inter-space pair (source ≠ target) at the (ω, δ) chosen on the validation part
        (the page's per-pair table), with ``translation = irp``, and the untranslated
        cosine of the same pairs where widths agree (``absolute_cosine``), under the same
        metric name with ``translation = none``. A claim ``better: {translation: irp}``,
        ``worse: {translation: none}`` is then paired on (target, source) and seed. No
        rows without a validation part (nothing is chosen on test data)."""
        d = _prepared(results)
        d = d[d["setting"] == "inter"]
        marks = directions(d)
        sides = []
        for _, g in d.groupby("selector", sort=False):
            best = _chosen(g, marks)
            if best is None:
                continue
            irp = g[(g["metric"] == METRICS[0]) & (g["omega"] == best["omega"]) & (g["delta"] == best["delta"])]
            none = g[g["metric"] == "absolute_cosine"].assign(metric=METRICS[0], direction=marks[METRICS[0]])
            sides += [irp.assign(**{TRANSLATION: TRANSLATED}), none.assign(**{TRANSLATION: UNTRANSLATED})]
        return pd.concat(sides) if sides else results.iloc[:0].assign(**{TRANSLATION: None})

    def meaning(self, headline: dict | None, direction: str) -> str:
        """The headline in translation terms: the cosine IRP reaches into another space
        beside the reference, a space translated into itself; without a reference, how to
        read the cosine."""
        if headline is None or not np.isfinite(headline["reference"]):
            return ("A reconstruction cosine near 1 means IRP translates one space into another almost exactly at "
                    "that ω and δ; the condition number says how stable the translation is (lower: more stable).")
        edges = headline.get("edges") or []
        beyond = (f" The chosen {' and '.join(edges)} {'is an end' if len(edges) == 1 else 'are ends'} of the grid "
                  f"swept, so a better cell may lie beyond it.") if edges else ""
        return (f"Translated by IRP into another encoder's space ({headline['best']}, chosen on the validation "
                f"part), test embeddings reach a mean cosine of {fmt(headline['score'])} with the target's own "
                f"embeddings of the same samples, against {fmt(headline['reference'])} for a space translated into "
                f"itself, the reference ({direction} is better).{beyond}")

    def page(self, results: pd.DataFrame, page: Page) -> str:
        """Heatmaps (Figure 3 style) and ω × δ tables per selector, from the rows alone."""
        d = _prepared(results)
        if d.empty:
            return "No results yet.\n"
        marks = directions(d)
        parts = []
        for selector, g in d.groupby("selector", sort=False):
            parts.append(f"### Anchors: {selector}\n")
            grid = g[g["metric"].isin(METRICS + (SINGULAR, ACCURACY))]
            if not grid.empty:
                parts.append(_heatmaps(grid, page, selector, marks))
                parts.append(_singular_note(grid))
                parts.append(_diagnostics_correlation(grid))
                parts.append(_tables(grid, marks))
                parts.append(_pairs(g, marks))
        return "\n".join(parts)


def _prepared(results: pd.DataFrame) -> pd.DataFrame:
    """The stored rows the page reads (those of its metrics that ran), each with its
    ``setting``: ``intra`` when a space is translated into itself, ``inter`` otherwise."""
    d = results[(results["status"] == "ok")
                & results["metric"].isin(METRICS + (SINGULAR, ACCURACY, "absolute_cosine",
                                                    VALIDATION + METRICS[0]))].copy()
    d["setting"] = np.where(d["source"] == d["target"], "intra", "inter")
    return d


def _singular_note(g: pd.DataFrame) -> str:
    """How many pruned anchor matrices were singular (left out of the condition-number
    means), per (ω, δ), counted once per target and seed."""
    cells = g[g["metric"] == SINGULAR].drop_duplicates(["seed", "target", "omega", "delta"])
    if not (cells["value"] > 0).any():
        return "Every pruned anchor matrix was invertible (no singular anchor set).\n"
    per = cells.groupby(["omega", "delta"])["value"].agg(["sum", "size"])
    listed = [f"ω = {int(o)}, δ = {d:g}: {int(r['sum'])} of {int(r['size'] * o)}"
              for (o, d), r in per.iterrows() if r["sum"] > 0]
    return listing("Singular pruned anchor matrices (numerically rank-deficient; left out of the condition-number "
                   "means, which average the others)", listed, lines=True) + "\n"


def pearson_over_cells(g: pd.DataFrame, x: str, y: str) -> float:
    """Pearson correlation of metrics ``x`` and ``y`` over the (ω, δ) cells of ``g``, each
    cell the mean of its rows (targets, sources); cells where either is not finite are
    left out. NaN with fewer than three cells or a constant metric."""
    cells = g[g["metric"].isin([x, y])].pivot_table(index=["omega", "delta"], columns="metric", values="value",
                                                    aggfunc="mean")
    if x not in cells or y not in cells:
        return float("nan")
    cells = cells[np.isfinite(cells[x]) & np.isfinite(cells[y])]
    if len(cells) < 3 or cells[x].std() == 0 or cells[y].std() == 0:
        return float("nan")
    return float(np.corrcoef(cells[x], cells[y])[0, 1])


#: the Pearson correlations of Maiorca et al. 2024, §5 (Figure 6, TREC): condition number ↔ anchors kept,
#: and reconstruction similarity ↔ classification accuracy (stitching between every pair of encoders)
PAPER_CONDITION_ANCHORS = 0.93
PAPER_RECONSTRUCTION_ACCURACY = 0.7


def _diagnostics_correlation(g: pd.DataFrame) -> str:
    """Figure 6's two correlations over the (ω, δ) cells, each seed's Pearson correlation
    then their mean over seeds with its 95 % t-interval over seeds, beside the paper's:
    condition number ↔ anchors kept (every pair), and reconstruction cosine ↔ the target
    head's accuracy on the translated embeddings (inter-space pairs, as the paper's
    stitching between encoders; only where the rows have that accuracy)."""
    inter = g[g["setting"] == "inter"]
    found = [
        ("the condition number and the anchors kept", g, "condition_number", "anchors_kept",
         "each cell the mean over targets and sources within a seed; a cell without a finite condition number left "
         "out", PAPER_CONDITION_ANCHORS),
        ("the reconstruction cosine and the accuracy of the target's head on the translated embeddings", inter,
         "reconstruction_cosine", ACCURACY, "each cell the mean over the pairs of distinct encoders within a seed",
         PAPER_RECONSTRUCTION_ACCURACY),
    ]
    lines = []
    for what, rows, x, y, cells_are, paper in found:
        per_seed = [pearson_over_cells(seed_rows, x, y) for _, seed_rows in rows.groupby("seed")]
        per_seed = [r for r in per_seed if np.isfinite(r)]
        if not per_seed:
            continue
        cells = len(rows[rows["metric"] == x].drop_duplicates(["omega", "delta"]))
        low, high = seed_interval(per_seed)
        lines.append(f"Pearson correlation between {what} over the {cells} (ω, δ) cells ({cells_are}): "
                     f"{fmt(float(np.mean(per_seed)))} {fmt_interval(max(low, -1.0), min(high, 1.0))} (mean over "
                     f"{len(per_seed)} seed(s) of each seed's correlation [95 % t-interval over seeds, cut at r's "
                     f"range [−1, 1]]); "
                     f"Maiorca et al. 2024 (§5, Figure 6, TREC) report {paper:g}.\n")
    return "\n".join(lines)


def _seed_stats(g: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean over cells within a seed, then the mean over seeds (``mean``, ``std``) with its
    95 % t-interval over seeds (``low``, ``high``; no per-sample data is stored for these scores)."""
    per_seed = g.groupby(by + ["seed"], dropna=False)["value"].mean().reset_index()
    out = per_seed.groupby(by, dropna=False)["value"].agg(["mean", "std", list]).reset_index()
    bounds = [seed_interval(v) for v in out.pop("list")]
    return out.assign(low=[b[0] for b in bounds], high=[b[1] for b in bounds])


def _shown(r: pd.Series) -> str:
    return f"{fmt(r['mean'])} {fmt_interval(r['low'], r['high'])}"


def _grid(g: pd.DataFrame, metric: str, setting: str) -> tuple[list, list, np.ndarray]:
    sub = g[(g["metric"] == metric) & (g["setting"] == setting)]
    stats = _seed_stats(sub, ["omega", "delta"])
    omegas, deltas = sorted(stats["omega"].unique()), sorted(stats["delta"].unique())
    Z = np.full((len(omegas), len(deltas)), np.nan)
    for _, r in stats.iterrows():
        Z[omegas.index(r["omega"]), deltas.index(r["delta"])] = r["mean"]
    return omegas, deltas, Z


def _heatmaps(g: pd.DataFrame, page: Page, selector: str, marks: dict[str, str]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = [s for s in SETTINGS if (g["setting"] == s).any()]
    titles = {"reconstruction_cosine": "reconstruction similarity", "condition_number": "condition number (log10)",
              "anchors_kept": "anchors kept", ACCURACY: "accuracy of the target's head"}
    metrics = [m for m in (*METRICS, ACCURACY) if (g["metric"] == m).any()]
    fig, axes = plt.subplots(len(metrics), len(settings), figsize=(4.2 * len(settings), 3.2 * len(metrics)),
                             squeeze=False)
    grids = {(metric, setting): _grid(g, metric, setting) for metric in metrics for setting in settings}
    shown_grids = {k: (np.log10(Z) if k[0] == "condition_number" else Z) for k, (_, _, Z) in grids.items()}
    # one colour scale per metric across the settings: equal colours mean equal values
    scales = {}
    for metric in metrics:
        values = np.concatenate([shown_grids[metric, s].ravel() for s in settings])
        values = values[np.isfinite(values)]
        scales[metric] = (values.min(), values.max()) if len(values) else (0.0, 1.0)
    for j, setting in enumerate(settings):
        for i, metric in enumerate(metrics):
            omegas, deltas, _ = grids[metric, setting]
            shown = shown_grids[metric, setting]
            ax = axes[i, j]
            im = ax.imshow(shown, aspect="auto", origin="lower", cmap="viridis", vmin=scales[metric][0],
                           vmax=scales[metric][1])
            ax.set_xticks(range(len(deltas)), [f"{x:g}" for x in deltas])
            ax.set_yticks(range(len(omegas)), [str(int(o)) for o in omegas])
            ax.set_xlabel("pruning threshold δ")
            ax.set_ylabel("# subspaces ω")
            ax.set_title(f"{setting} space: {arrow(titles[metric], marks.get(metric, 'neutral'))}", fontsize=9)
            for (r, c), v in np.ndenumerate(shown):
                if np.isfinite(v):
                    ax.text(c, r, f"{v:.2f}" if metric != "anchors_kept" else f"{v:.0f}", ha="center",
                            va="center", fontsize=7, color="white")
            fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in selector)
    link = page.save(fig, f"omega_delta_{safe}.png")
    return f"![ω × δ sensitivity, {selector}]({link})\n"


def _tables(g: pd.DataFrame, marks: dict[str, str]) -> str:
    out = []
    for setting in SETTINGS:
        sub = g[(g["setting"] == setting) & (g["metric"] == "reconstruction_cosine")]
        if sub.empty:
            continue
        stats = _seed_stats(sub, ["omega", "delta"])
        deltas = sorted(stats["delta"].unique())
        body = []
        for omega, row in stats.groupby("omega"):
            cells = {r["delta"]: _shown(r) for _, r in row.iterrows()}
            body.append([int(omega)] + [cells.get(x, "n/a") for x in deltas])
        title = arrow("Reconstruction cosine", marks["reconstruction_cosine"])
        out.append(f"{title}, {setting}-space (mean over seeds [95 % t-interval over seeds]):\n\n"
                   + table(body, headers=["ω \\ δ"] + [f"{x:g}" for x in deltas]) + "\n")
    return "\n".join(out)


def _chosen(g: pd.DataFrame, marks: dict[str, str]) -> pd.Series | None:
    """The (ω, δ) whose mean validation reconstruction cosine over inter-space pairs
    (over every pair when there is none) is best, as a row of :func:`_seed_stats` whose
    ``mean`` is that validation score; None when the rows have no validation part."""
    chosen_on = g[(g["metric"] == VALIDATION + METRICS[0])]
    if chosen_on.empty:
        return None
    inter = chosen_on[chosen_on["setting"] == "inter"]
    stats = _seed_stats(inter if len(inter) else chosen_on, ["omega", "delta"])
    return stats.sort_values("mean", ascending=lower_is_better(marks[VALIDATION + METRICS[0]])).iloc[0]


def _pairs(g: pd.DataFrame, marks: dict[str, str]) -> str:
    """Per (source, target) at the best inter-space (ω, δ), beside the untranslated cosine."""
    cos = g[(g["metric"] == "reconstruction_cosine")]
    best = _chosen(g, marks)
    if best is None:  # rows of a run without a validation part
        return "The best (ω, δ) is chosen on validation data, and these results have none.\n"
    at = cos[(cos["omega"] == best["omega"]) & (cos["delta"] == best["delta"])]
    irp = _seed_stats(at, ["source", "target"])
    absolute = _seed_stats(g[g["metric"] == "absolute_cosine"], ["source", "target"])
    body = []
    for _, r in irp.iterrows():
        a = absolute[(absolute["source"] == r["source"]) & (absolute["target"] == r["target"])]
        body.append([r["source"], r["target"], _shown(a.iloc[0]) if len(a) else "n/a (widths differ)", _shown(r)])
    headers = ["source (encoder)", "target (decoder)",
               arrow("absolute cosine", marks.get("absolute_cosine", "neutral")),
               arrow("IRP cosine", marks["reconstruction_cosine"])]
    return (f"Per pair at ω = {int(best['omega'])}, δ = {best['delta']:g} (the best inter-space mean on the "
            f"validation part; the cosines below are on the test draw; mean over seeds [95 % interval over "
            f"seeds]):\n\n"
            + table(body, headers=headers, keep=2) + "\n")
