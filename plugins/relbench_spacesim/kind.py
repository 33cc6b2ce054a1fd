"""The ``space-similarity`` task kind: representational-similarity measures between every
pair of a task's encoders, on each seed's test draw."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from relbench.api import deferred_import
from relbench.api import (Axis, Page, PluginSpec, ResultRow, Task, TaskKind, TaskRunAPI, UnitKey, arrow, fmt,
                          fmt_interval, pair_heatmap, seed_interval, slug, sparse_figure, table)
from relbench_spacesim import prediction

pd = deferred_import("pandas")


def sample_positions(n: int, max_samples: int, seed: int) -> np.ndarray:
    """At most ``max_samples`` of ``n`` positions, a seeded random subset in order (all
    of them when ``max_samples`` is 0 or at least ``n``)."""
    if max_samples <= 0 or n <= max_samples:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).permutation(n)[:max_samples])


def encoder_pairs(labels: list[str], symmetric: bool) -> list[tuple[str, str]]:
    """The (source, target) pairs a measure is computed on: each unordered pair once for
    a symmetric measure, every ordered pair of distinct encoders otherwise."""
    return list(itertools.combinations(labels, 2) if symmetric else itertools.permutations(labels, 2))


def measure_rows(measure: PluginSpec, spaces: dict[str, np.ndarray]) -> list[ResultRow]:
    """One row per ordered pair of distinct encoders: the measure's value of (source,
    target), its direction the measure's; a symmetric measure's value is computed once per
    unordered pair and given to both orders."""
    plugin = measure.build()
    rows = []
    for source, target in encoder_pairs(list(spaces), plugin.symmetric):
        value = plugin.measure(spaces[source], spaces[target])
        orders = [(source, target), (target, source)] if plugin.symmetric else [(source, target)]
        rows += [ResultRow(metric=measure.label, value=value, direction=plugin.direction(),
                           cell={"source": a, "target": b}) for a, b in orders]
    return rows


@dataclass
class SpaceSimilarity(TaskKind):
    """Representational similarity between every pair of the task's encoders: each space
    measure of the grid (``grid: {measures: [...]}``: linear and debiased CKA, mutual
    k-NN, CKNNA, SVCCA, the Procrustes distance …) on the test embeddings of each seed's
    draw, for the question which measure predicts whether stitching works.

    One unit per (seed, measure): rows per ordered (source, target) pair of distinct
    encoders, the metric named by the measure's label, the direction its own (higher or
    lower is more similar). Encoders are compared on the same samples (by id): a seeded
    subset of at most ``max_samples`` of the seed's test draw, so that the ``n × n``
    kernels of CKA stay small.

    The index's section *Which similarity measure predicts stitching?*
    (:mod:`relbench_spacesim.prediction`) sets each task beside its ``stitching_task``
    when the tasks file has both: Spearman's ρ over pairs between each measure (and two
    controls) and each method's stitched score, per method and pooled over tasks.

    Parameters:
        max_samples: test samples compared per seed (seeded subset; 0 = all). Default
            2000 (our choice: the default protocol's whole test draw).
        stitching_task: the stitching task of the same tasks file with this task's data
            set and encoders, whose per-pair stitched scores the measures are compared
            with ("": none). Default "".
    """

    name: ClassVar[str] = "space-similarity"
    columns: ClassVar[tuple[str, ...]] = ("measure", "source", "target")
    paired_on: ClassVar[tuple[str, ...]] = ("source", "target")
    #: the board draws each measure's source × target matrix, beside the stitching task's
    matrix_axes: ClassVar[tuple[str, ...]] = ("source", "target")
    axes: ClassVar[dict[str, Axis]] = {"measures": Axis("space_measure")}
    max_samples: int = 2000
    stitching_task: str = ""

    def __post_init__(self) -> None:
        if self.max_samples < 0:
            raise ValueError(f"space-similarity: max_samples must be ≥ 0, got {self.max_samples}")

    def validate(self, task: Task) -> None:
        """At least two encoders and one measure."""
        if len(task.encoders) < 2:
            raise ValueError("space-similarity compares pairs of encoders: give the task at least two encoders.")
        if not task.grid.get("measures"):
            raise ValueError("space-similarity needs measures: set `grid: {measures: [linear-cka, ...]}`.")

    def plan(self, task: Task) -> list[UnitKey]:
        """One unit per (seed, measure)."""
        return [{"seed": seed, "measure": measure} for seed in task.seeds for measure in task.grid["measures"]]

    def run(self, run: TaskRunAPI) -> None:
        """Compute the planned units not yet stored, a seed's measures on its test draw."""
        todo = [key for key in self.plan(run.task) if not run.is_done(key)]
        for seed in dict.fromkeys(key["seed"] for key in todo):
            spaces = self._spaces(run, seed)
            for key in run.progress([k for k in todo if k["seed"] == seed], desc=f"space measures, seed {seed}"):
                with run.unit(key) as rows:
                    rows += measure_rows(key["measure"], spaces)

    def _spaces(self, run: TaskRunAPI, seed: int) -> dict[str, np.ndarray]:
        """Every encoder's float64 test embeddings of the seed's draw, on the same samples
        (a seeded subset of the first encoder's ids), in the tasks file's order."""
        banks = run.banks("test", seed)
        labels = [e.label for e in run.task.encoders]
        ids = banks[labels[0]].ids
        keep = [ids[i] for i in sample_positions(len(ids), self.max_samples, seed)]
        return {label: banks[label].rows(keep).double().cpu().numpy() for label in labels}

    def meaning(self, headline: dict | None, direction: str) -> str:
        """How to read the page: matrices of similarity, not a ranking."""
        return ("Each table is one measure's matrix of similarity between the encoders' spaces (mean over seeds with "
                "its 95 % interval); the index's section *Which similarity measure predicts stitching?* ranks the "
                "measures by their rank correlation over these pairs with the stitching scores of the same pairs.")

    def page(self, results: pd.DataFrame, page: Page) -> str:
        """Per measure, its source × target heatmap (mean over seeds, oriented as the
        stitching page's per-pair heatmaps) and table (the mean over seeds [95 % interval
        over seeds])."""
        ok = results[results["status"] == "ok"]
        if ok.empty:
            return "No results yet.\n"
        beside = (f"Each measure's matrix is drawn as [{self.stitching_task}]({self.stitching_task}.md)'s per-pair "
                  f"heatmaps are (rows: source, columns: target), to be read beside them.\n\n"
                  if self.stitching_task else "")
        subset = (f"at most {self.max_samples:,} of each seed's test draw (a seeded subset)" if self.max_samples
                  else "each seed's whole test draw")
        samples = (f"Every measure compares the encoders on the same samples: {subset}, their test embeddings as "
                   f"the encoders give them; each measure's own parameters are under its table.\n\n")
        return beside + samples + "\n".join(_heatmap_section(metric, g, page) + _matrix(metric, g)
                                             for metric, g in ok.groupby("metric", sort=False))

    def companion_tasks(self) -> tuple[str, ...]:
        """The ``stitching_task``, when set."""
        return (self.stitching_task,) if self.stitching_task else ()

    def index_cells(self, results: pd.DataFrame, page: Page) -> list[dict] | None:
        """Per measure and ordered pair its mean over seeds, and per encoder its
        architecture (:func:`relbench_spacesim.prediction.measure_cells`)."""
        cells = prediction.measure_cells(results)
        return cells or None

    @classmethod
    def cross_kind_section(cls, cells_by_task: dict[str, list[dict]],
                           companions: dict[str, dict[str, dict]]) -> str | None:
        """*Which similarity measure predicts stitching?* (:func:`relbench_spacesim.prediction.section`)."""
        return prediction.section(cells_by_task, companions)


def pair_means(g: pd.DataFrame) -> tuple[list[str], np.ndarray]:
    """A measure's encoders (in the rows' order) and its source × target matrix of means over
    seeds (NaN on the diagonal and where a pair has no row)."""
    encoders = list(dict.fromkeys(list(g["source"]) + list(g["target"])))
    means = g.groupby(["source", "target"])["value"].mean()
    M = np.array([[means.get((s, t), np.nan) if s != t else np.nan for t in encoders] for s in encoders], float)
    return encoders, M


def _heatmap_section(metric: str, g: pd.DataFrame, page: Page) -> str:
    """A measure's heatmap as a markdown image (brighter: more similar, whatever its
    direction), or the line saying why it is not drawn."""
    encoders, M = pair_means(g)
    off = M[~np.eye(len(encoders), dtype=bool)]
    note = sparse_figure(f"heatmap of {metric}", off)
    if note:
        return note
    cmap = "viridis_r" if g["direction"].iloc[0] == "lower" else "viridis"
    fig = pair_heatmap(M, encoders, metric, cmap=cmap, cell=lambda i, j, value: "—" if i == j else fmt(value))
    return f"![{metric}]({page.save(fig, f'measure-{slug(metric)}.png')})\n\n"


def _matrix(metric: str, g: pd.DataFrame) -> str:
    """A measure's source × target table of means over seeds with their intervals."""
    encoders = list(dict.fromkeys(list(g["source"]) + list(g["target"])))
    direction = g["direction"].iloc[0]
    body = []
    for source in encoders:
        cells = []
        for target in encoders:
            per_seed = g[(g["source"] == source) & (g["target"] == target)].groupby("seed")["value"].mean()
            cells.append("—" if source == target else (
                f"{fmt(per_seed.mean())} {fmt_interval(*seed_interval(per_seed))}" if len(per_seed) else "n/a"))
        body.append([source] + cells)
    better = {"higher": "higher is more similar", "lower": "lower is more similar"}.get(direction, "")
    params = measure_params(g)
    given = ("Parameters: " + ", ".join(f"{k} = {v}" for k, v in params.items()) + ".\n\n") if params else ""
    return (f"### {arrow(metric, direction)}\n\n{better}; rows: source, columns: target.\n\n"
            + table(body, headers=["source \\ target"] + encoders, keep=1) + "\n\n" + given)


def measure_params(g: pd.DataFrame) -> dict[str, object]:
    """The parameters a measure's units record for it (``topk``, ``dims``, ``normalize`` …,
    sorted; none where it has none), from the flat columns of a release or the nested
    ``inputs`` of a loaded store."""
    prefix = "inputs.unit.measure.params."
    flat = {c[len(prefix):]: g[c].dropna() for c in g.columns if c.startswith(prefix)}
    if flat:
        return {k: v.iloc[0] for k, v in sorted(flat.items()) if len(v)}
    for inputs in g["inputs"] if "inputs" in g else ():
        measure = inputs.get("unit", {}).get("measure") if isinstance(inputs, dict) else None
        if isinstance(measure, dict):
            return {k: v for k, v in sorted((measure.get("params") or {}).items()) if v is not None}
    return {}
