"""Which symmetry group relates two encoders: the ``symmetry`` task kind.

The relative representation assumes two encoders' spaces differ by an isometry up to
scale; García-Castellanos et al. point to the intertwiner groups of activations (a
permutation times a diagonal); the most general linear answer is an affine map. For every
ordered encoder pair the kind fits a map of each group (:mod:`relbench_stitching.groups`: (a),
(b) and (d) in closed form; (c), which has none, by majorisation steps from the best of
three starts, up to ``iterations`` of them, keeping the step with the lowest residual on
the seed's validation part) on the seed's anchors and measures it on the seed's test
samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from relbench.api import deferred_import
from relbench.api import (Axis, Page, ResultRow, Task, TaskKind, TaskRunAPI, UnitKey, arrow, directions,
                          fit_reference_head, fmt, fmt_interval, head_key, head_settings, seed_interval, table,
                          validate_head_params)
from relbench_irp.quality import sample_ids
from relbench_irp.scale import accuracy, labels_of
from relbench_stitching.groups import GROUPS, fit_groups, relative_residual

pd = deferred_import("pandas")
torch = deferred_import("torch")

#: the page's letters for the groups (the issue's order a < b < c < d)
LETTERS = dict(zip(GROUPS, "abcd"))
METRICS = ("residual", "accuracy", "anchor_residual", "own_accuracy")
#: residuals closer than this to the best group's count as within its interval: float32
#: embeddings (about 7 digits) resolve no smaller difference of relative residuals
RESOLUTION = 1e-6


def _on_cpu(X: torch.Tensor) -> torch.Tensor:
    """``X`` in float64 on the CPU, where every group's map is fitted and applied whatever
    the task's device, so that a residual does not depend on the machine: fitted on an
    H200 in float64, ``mnist-symmetry``'s residuals differed from the CPU's by up to 0.0013
    on the same banks (group (c)'s validation-chosen step and (b)'s assignment follow
    last-bit differences of the solvers), while its unit work took the same time either
    way (18.3 s on the GPU, 18.9 s on that machine's CPU; README, *On a GPU*). Only the
    target's head and its predictions use the task's device."""
    return X.to("cpu", torch.float64)


@dataclass
class Symmetry(TaskKind):
    """Which symmetry group relates two encoders: held-out residual and stitching accuracy of a map fitted per group.

    Columns: ``selector``, ``source`` and ``target`` (the unit: one per seed, selector and
    ordered encoder pair) and ``group``. Groups, smallest first: ``scaled-orthogonal`` (a,
    scaled Procrustes: the relative representation's isometry up to scale),
    ``permutation-diagonal`` (b, a signed permutation with a scale per dimension: the
    intertwiner groups of García-Castellanos et al.; its least-squares fit: dimensions
    matched by ``linear_sum_assignment`` on the residual energy each match removes, each
    with its least-squares scale), ``orthogonal-diagonal`` (c, ``Q·D``: an
    orthogonal map with a free scale per target dimension, fitted by alternating the exact
    scales with a majorisation step on ``Q`` from the best of (a), (b) and the factors of
    the least-squares linear map, up to ``iterations`` steps, the step kept the one with the
    lowest residual on the seed's validation part) and ``affine`` (d, least squares with bias). Every group
    includes the translation that matches the anchors' means. (a) and (b) are both inside
    (c) ⊂ (d), neither inside the other. Different widths: the narrower space is
    zero-padded (see :mod:`relbench_stitching.groups` for each group).

    Every map is fitted (in float64, on the CPU whatever the task's device: see
    :func:`_on_cpu`) on the seed's anchors (the grid's selector; ``num_anchors`` rows of
    the fit part, the same samples in both spaces) and applied to the source's test
    embeddings. Rows per group: ``residual`` ↓ (``‖f(X) − Y‖_F / ‖Y‖_F`` on the test
    samples), ``anchor_residual`` ↓ (the same on the anchors it was fitted on: ordered as
    the groups are nested) and ``accuracy`` ↑ (the target's own absolute head, the
    reference head the ``absolute`` stitcher trains on the target's training embeddings,
    applied to the mapped source test embeddings); per unit ``own_accuracy`` ↑ (that head
    on the target's own test embeddings, the ceiling). The page gives, per pair, each
    group's residual and accuracy (mean over seeds [95 % t-interval over seeds]) and the
    smallest group that explains the pair: the first of a, b, c, d not shown to fit worse
    than the best group (the lowest mean residual, usually affine's): the 95 % t-interval of
    their paired per-seed residual differences reaches down to 1e-6, the resolution of
    float32 embeddings (:func:`smallest_group`); and how many pairs each group explains.
    Group (c)'s rows say in ``extra`` how it was fitted: ``steps`` taken, ``chosen_step``
    and its ``validation_residual``.

    **Group (c)'s steps are chosen on validation data.** Its majorisation does not reach
    the group's least-squares fit in any fixed number of steps on real embeddings (the
    anchor residual still falls after hundreds, and the held-out one rises again:
    ``benchmarks/symmetry_fit.py``), so the map kept is the one whose residual on the
    seed's validation part (the same samples in both spaces, none of them anchors or test
    samples) is lowest, the steps stopping ``patience`` steps after that or at
    ``iterations`` (:func:`relbench_stitching.groups.orthogonal_diagonal_fit`). Version 2:
    the step that shifts the scales, chosen on validation; version 1 took 25 steps of the
    step that shifts the anchors' Gram matrix by its largest eigenvalue, far slower to
    descend.

    Parameters:
        iterations: the most majorisation steps of group (c) after its start. Default 25
            (our choice: version 1's fixed count, so no fit costs more than it did; let
            run to 100 on fashion-symmetry's seed 0, eight pairs chose steps 12 to 49 or
            were still improving at 100, those with the padded 1,024-d source).
        patience: steps without a lower validation residual after which (c)'s fit stops.
            Default 5 (our choice).
        max_samples: test samples evaluated per pair (seeded subset; 0 = all). Default 2000
            (the suite's test draw).
        epochs: head training epochs; None = the modality's reference default. Default None.
        lr: head Adam learning rate; None = the modality's reference default. Default None.
        hidden: hidden width of the head. Default 256 (the absolute stitcher's).
        batch_size: head training batch size. Default 32 (the absolute stitcher's).
    """

    name: ClassVar[str] = "symmetry"
    columns: ClassVar[tuple[str, ...]] = ("selector", "source", "target", "group")
    #: the board draws each group's and metric's source × target matrix
    matrix_axes: ClassVar[tuple[str, ...]] = ("source", "target")
    paired_on: ClassVar[tuple[str, ...]] = ("source", "target")  # claims pair their sides on these
    axes: ClassVar[dict[str, Axis]] = {"selectors": Axis("selector")}
    #: 2: group (c) steps on the scales' side, as many as validation data choose; 3: group (b) matches dimensions
    #: by least squares (the summed explained energy), not by the largest absolute correlations
    version: ClassVar[str] = "3"
    iterations: int = 25
    patience: int = 5
    max_samples: int = 2000
    epochs: int | None = None
    lr: float | None = None
    hidden: int = 256
    batch_size: int = 32

    def __post_init__(self) -> None:
        if self.iterations < 0 or self.max_samples < 0:
            raise ValueError(f"symmetry: iterations and max_samples must be ≥ 0, got {self.iterations}, "
                             f"{self.max_samples}")
        if self.patience < 1:
            raise ValueError(f"symmetry: patience must be ≥ 1 (steps without a lower validation residual before "
                             f"group (c)'s fit stops), got {self.patience}")
        validate_head_params(self.epochs, self.lr, self.hidden, self.batch_size)

    def validate(self, task: Task) -> None:
        """The grid names an anchor selector, the task at least two encoders, and its
        protocol a validation part (group (c)'s steps are chosen on it)."""
        if not task.grid["selectors"]:
            raise ValueError("symmetry needs at least one anchor selector in grid.selectors, e.g. "
                             "`selectors: [random]`.")
        if len(task.encoders) < 2:
            raise ValueError(f"symmetry relates encoder pairs: give at least two encoders, got "
                             f"{len(task.encoders)}.")
        if task.protocol.validation <= 0:
            raise ValueError("symmetry chooses group (c)'s majorisation steps on the validation part: give the task "
                             "a protocol with one, e.g. `protocol: {validation: 0.2}`.")

    def plan(self, task: Task) -> list[UnitKey]:
        """One unit per (seed, selector, source, target), source ≠ target: every group."""
        return [{"seed": seed, "selector": sel, "source": source, "target": target}
                for seed in task.seeds for sel in task.grid["selectors"]
                for target in task.encoders for source in task.encoders if source.label != target.label]

    def run(self, run: TaskRunAPI) -> None:
        """Compute the planned units not yet stored, each on its seed's draw: maps fitted
        on the anchors (rows of the fit part), the head on the target's fit part, both
        measured on the test draw."""
        todo = [key for key in self.plan(run.task) if not run.is_done(key)]
        for key in run.progress(todo, desc="symmetry", total=len(todo)):
            with run.unit(key) as rows:
                rows += self._pair(run, key["seed"], key["selector"], key["source"].label, key["target"].label)

    def _pair(self, run: TaskRunAPI, seed: int, selector, source: str, target: str) -> list[ResultRow]:
        """Every group's rows for one pair, and the target head's own accuracy."""
        anchors = run.anchors(seed, selector)
        As, At = (_on_cpu(run.realise(anchors, label)) for label in (source, target))
        validation = run.banks("validation", seed)
        maps = fit_groups(As, At, self.iterations, patience=self.patience,
                          validation=(_on_cpu(validation[source].X), _on_cpu(validation[target].X)))
        test = run.banks("test", seed)
        ids = sample_ids(test[source].ids, self.max_samples, seed)
        X, Y, y = _on_cpu(test[source].rows(ids)), test[target].rows(ids), labels_of(test[target], ids)
        head = self._head(run, seed, target)
        rows = [ResultRow(metric="own_accuracy", value=accuracy(head, Y, y), direction="higher")]
        for group, translate in maps.items():
            Y_hat = translate(X)
            cell, extra = {"group": group}, dict(getattr(translate, "report", {}))
            rows += [ResultRow(metric="residual", value=relative_residual(Y_hat, _on_cpu(Y)), direction="lower",
                               cell=cell, extra=extra),
                     ResultRow(metric="anchor_residual", value=relative_residual(translate(As), At), direction="lower",
                               cell=cell, extra=extra),
                     ResultRow(metric="accuracy", value=accuracy(head, Y_hat.to(Y), y), direction="higher",
                               cell=cell, extra=extra)]
        return rows

    def _head(self, run: TaskRunAPI, seed: int, target: str):
        """The reference head on the target's training embeddings (the fit part), as the
        ``absolute`` stitcher trains it; once per (seed, target) through the seed's shared memo."""
        bank = run.banks("train", seed)[target]
        if bank.labels is None:
            raise ValueError(f"encoder {target!r}: the training bank has no labels to fit a head on")
        settings = head_settings(run.modality(target), self.epochs, self.lr, self.hidden, self.batch_size)
        num_classes, evaluation = len(run.dataset().class_names), run.task.protocol.evaluation
        key = head_key(target, "reference", settings, num_classes=num_classes, seed=seed, evaluation=evaluation)
        return run.shared(seed).get(key, lambda: fit_reference_head(
            bank.X, bank.labels, settings, num_classes=num_classes, seed=seed, evaluation=evaluation))

    def meaning(self, headline: dict | None, direction: str) -> str:
        """How to read the page: the smallest group not shown to fit worse than the best
        group is the symmetry that relates a pair."""
        return ("For each encoder pair, the smallest group (a: scaled orthogonal, b: permutation × diagonal, c: "
                "orthogonal × diagonal, d: affine) whose held-out residual is not shown to exceed the best group's "
                "(paired over seeds) is the symmetry that explains how the two spaces relate; the accuracy says what "
                "that map is worth to the target's own head.")

    def page(self, results: pd.DataFrame, page: Page) -> str:
        """Per selector: how many pairs each group explains, then per pair each group's
        residual and accuracy, from the rows alone."""
        ok = results[(results["status"] == "ok") & results["metric"].isin(METRICS)]
        if ok.empty:
            return "No results yet.\n"
        marks = directions(ok)
        parts = [groups_note(self.iterations, self.patience)]
        for selector, rows in ok.groupby("selector", sort=False):
            stats = pair_stats(rows)
            smallest = {pair: group for pair, (group, _) in _explained(rows).items()}
            parts += [f"### Anchors: {selector}\n", _summary(smallest), _residual_table(stats, smallest, marks),
                      _accuracy_table(stats, marks)]
        return "\n".join(parts)

    def index_cells(self, results: pd.DataFrame, page: Page) -> list[dict] | None:
        """One cell per selector and ordered pair: ``selector``, ``source``, ``target``,
        the smallest explaining ``group`` (None where no residual is finite) and its mean
        held-out ``residual``, as the page computes them; None without results."""
        ok = results[(results["status"] == "ok") & (results["metric"] == "residual")]
        if ok.empty:
            return None
        return [{"selector": selector, "source": source, "target": target, "group": group, "residual": residual}
                for selector, rows in ok.groupby("selector", sort=False)
                for (source, target), (group, residual) in _explained(rows).items()]

    @classmethod
    def index_section(cls, cells_by_task: dict[str, list[dict]]) -> str | None:
        """The index's section *Symmetry between encoders*: per task, how many of its
        ordered pairs each group is the smallest explaining group of, and over all tasks,
        under three lines on what that says of the relative representation's assumption
        (an isometry up to scale)."""
        return symmetry_section(cells_by_task)


def symmetry_section(cells_by_task: dict[str, list[dict]]) -> str | None:
    """The section of :meth:`Symmetry.index_section` from the tasks' :meth:`Symmetry.index_cells`."""
    rows, totals = [], dict.fromkeys(GROUPS, 0)
    for task, cells in cells_by_task.items():
        explained = [c["group"] for c in cells if c.get("group") in totals]
        if not explained:
            continue
        counts = {g: explained.count(g) for g in GROUPS}
        for g in GROUPS:
            totals[g] += counts[g]
        rows.append([f"[{task}]({task}.md)", len(explained)] + [counts[g] for g in GROUPS])
    pairs = sum(totals.values())
    if not pairs:
        return None
    rows.append(["**all tasks**", pairs] + [totals[g] for g in GROUPS])
    first = max(GROUPS, key=lambda g: (totals[g], -GROUPS.index(g)))
    isometry, beyond = totals[GROUPS[0]], totals[GROUPS[-1]]
    lines = [f"- Over {len(rows) - 1} tasks and {pairs} ordered encoder pairs (a pair once per selector), the "
             f"smallest group that explains a pair is most often {_named(first)} ({totals[first]} of {pairs}).",
             f"- An isometry up to scale, what the relative representation assumes, explains {isometry} of {pairs} "
             f"pairs; {beyond} need a general affine map.",
             "- Explains: its held-out residual is within the 95 % t-interval over seeds of the best group's "
             "(each task's page has the residuals and the stitching accuracy of every group's map)."]
    return ("## Symmetry between encoders\n\n" + "\n".join(lines) + "\n\n"
            + table(rows, headers=["task", "pairs"] + [_named(g) for g in GROUPS]) + "\n")


def groups_note(iterations: int, patience: int) -> str:
    """The page's paragraph on the groups, how each is fitted and what *explains* means;
    ``iterations`` and ``patience``: the limits of group (c)'s majorisation steps."""
    return (
        "Groups, smallest first: (a) scaled orthogonal (isometry up to scale), (b) signed permutation × diagonal, "
        "(c) orthogonal × diagonal, (d) affine; each with the translation matching the anchors' means. (a) and (b) "
        "both lie inside (c) ⊂ (d), neither inside the other. Between different widths the narrower space is "
        "zero-padded. Every map is fitted on the anchors and measured on the test samples; the residual is "
        "‖f(X) − Y‖_F / ‖Y‖_F. (a), (b) and (d) are fitted in closed form (see the symmetry kind's "
        "documentation: (a), (b) and (d) are their groups' least-squares fits between equal widths); (c) has no "
        "closed form: from the best of three starts, majorisation steps lower its anchor residual without reaching "
        "the group's least-squares fit, and closer fits to the anchors can generalise worse "
        "(`benchmarks/symmetry_fit.py`), so the steps are chosen on the seed's validation samples (neither anchors "
        f"nor test samples): the map kept is the step with the lowest validation residual, stopping {patience} "
        f"steps after it (at most {iterations}); its rows give the steps taken and chosen. Its row is one member of "
        "the group, not its least-squares fit. The smallest group that explains a pair is the first of a, b, c, d "
        "not shown to fit worse than the group with the lowest mean residual: the groups share each seed's anchors "
        "and test samples, so they are compared paired, and a group explains the pair when the 95 % t-interval of "
        "its per-seed residual less the best group's reaches down to 1e-6 (what float32 embeddings resolve; one "
        "seed: its difference is at most that). The best group is picked on these test residuals, which no "
        "interval accounts for; for (c) a verdict says the member found explains the pair.\n")


def pair_stats(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (source, target, group, metric): the mean over seeds of each seed's value
    (``mean``) and its 95 % t-interval over seeds (``low``, ``high``)."""
    by = ["source", "target", "group", "metric"]
    per_seed = rows.groupby(by + ["seed"], dropna=False, sort=False)["value"].mean().reset_index()
    out = per_seed.groupby(by, dropna=False, sort=False)["value"].agg(["mean", list]).reset_index()
    bounds = [seed_interval(v) for v in out.pop("list")]
    return out.assign(low=[b[0] for b in bounds], high=[b[1] for b in bounds])


def _explained(rows: pd.DataFrame) -> dict[tuple, tuple[str | None, float | None]]:
    """Per (source, target) of the kind's rows: the smallest explaining group
    (:func:`smallest_group`, on each seed's held-out residual) and its mean held-out
    residual over seeds (None, None where no residual is finite)."""
    residual = rows[rows["metric"] == "residual"]
    per_seed = residual.groupby(["source", "target", "group", "seed"], sort=False)["value"].mean()
    out = {}
    for pair, g in per_seed.groupby(level=["source", "target"], sort=False):
        seeds = {group: {seed: float(v) for (_, _, _, seed), v in values.items()}
                 for group, values in g.groupby(level="group", sort=False)}
        group = smallest_group(seeds)
        out[pair] = (group, float(np.mean(list(seeds[group].values()))) if group else None)
    return out


def smallest_group(residuals: dict[str, dict[int, float]]) -> str | None:
    """The first group of :data:`GROUPS` not shown to fit worse than the group with the
    lowest mean residual: the 95 % t-interval of their paired per-seed differences (the
    group's residual less the best's, on the seeds both have: the groups share each
    seed's anchors and test samples) reaches down to :data:`RESOLUTION`; with fewer than
    two such seeds, their mean difference is at most :data:`RESOLUTION`. ``residuals``:
    group → seed → held-out residual. None without a finite residual."""
    finite = {g: {s: v for s, v in seeds.items() if np.isfinite(v)} for g, seeds in residuals.items()}
    finite = {g: seeds for g, seeds in finite.items() if seeds}
    if not finite:
        return None
    best = min(finite, key=lambda g: float(np.mean(list(finite[g].values()))))

    def explains(group: str) -> bool:
        shared = sorted(set(finite[group]) & set(finite[best]))
        differences = [finite[group][s] - finite[best][s] for s in shared]
        if not differences:
            return False
        low = seed_interval(differences)[0] if len(differences) > 1 else float("nan")
        return (low if np.isfinite(low) else float(np.mean(differences))) <= RESOLUTION

    return next(g for g in GROUPS if g in finite and (g == best or explains(g)))


def _named(group: str) -> str:
    return f"({LETTERS[group]}) {group}"


def _summary(smallest: dict[tuple, str | None]) -> str:
    """How many pairs each group is the smallest explaining group of."""
    counts = pd.Series([g for g in smallest.values() if g is not None]).value_counts()
    body = [[_named(g), int(counts.get(g, 0))] for g in GROUPS]
    return (f"Smallest group that explains each of the {len(smallest)} ordered pairs:\n\n"
            + table(body, headers=["group", "pairs"]) + "\n")


def _shown(stats: pd.DataFrame, source: str, target: str, group: str | None, metric: str) -> str:
    at = stats[(stats["source"] == source) & (stats["target"] == target) & (stats["metric"] == metric)]
    at = at[at["group"].isna()] if group is None else at[at["group"] == group]
    if at.empty:
        return "n/a"
    r = at.iloc[0]
    return f"{fmt(r['mean'])} {fmt_interval(r['low'], r['high'])}"


def _residual_table(stats: pd.DataFrame, smallest: dict[tuple, str | None], marks: dict[str, str]) -> str:
    """Per pair: each group's held-out residual and the smallest explaining group."""
    body = [[source, target] + [_shown(stats, source, target, g, "residual") for g in GROUPS]
            + [_named(group) if group else "n/a"] for (source, target), group in smallest.items()]
    headers = ["source", "target"] + [_named(g) for g in GROUPS] + ["smallest group"]
    return (arrow("Held-out residual", marks.get("residual", "lower")) + " per pair (mean over seeds [95 % interval "
            "over seeds]):\n\n" + table(body, headers=headers, keep=2) + "\n")


def _accuracy_table(stats: pd.DataFrame, marks: dict[str, str]) -> str:
    """Per pair: the target head's accuracy on each group's mapped source, and on its own space."""
    pairs = stats[["source", "target"]].drop_duplicates().itertuples(index=False)
    body = [[source, target] + [_shown(stats, source, target, g, "accuracy") for g in GROUPS]
            + [_shown(stats, source, target, None, "own_accuracy")] for source, target in pairs]
    headers = ["source", "target"] + [_named(g) for g in GROUPS] + ["target's own space"]
    return (arrow("Stitching accuracy", marks.get("accuracy", "higher")) + " of the target's absolute head on the "
            "mapped source test embeddings (mean over seeds [95 % t-interval over seeds]):\n\n"
            + table(body, headers=headers, keep=2) + "\n")
