"""The anchor budget as an axis: zero-shot stitching swept over the number of anchors.

The ``anchor-budget`` kind runs the stitching protocol (:mod:`relbench_stitching.kind`:
the same grid, units and fits) at several anchor budgets ``k``, on a log scale by
default: 8, 16, 32, … up to the task's ``num_anchors``. Its rows are stitching's rows
with two more typed columns: ``num_anchors`` (the budget asked, a column identifying the
cell; 0 for a stitcher that uses no anchors, whose rows are the budget-free reference)
and ``anchors_used`` (the anchors the decoder was fitted with: fewer than asked where a
selector stops early by design, e.g. FPS with δ > 0).

**Nesting.** Anchors are selected once per (seed, combination, target[, held-out
encoder]), at the task's ``num_anchors``; budget ``k`` uses the first ``k`` anchors of
that ordered selection, so the budgets' anchor sets are nested and a seed's curve is
paired across budgets. This is the selector's choice at ``k`` only when its order means
that (:attr:`~relbench.api.AnchorSelector.prefix_nested`: a random draw's prefix is a
random draw, a farthest-point order's prefix is FPS stopped at ``k``). A selector whose
choice is made for one count as a whole (a k-means-like clustering, PARAM's learned
mixtures) is refused when the task is validated: its prefix is not its choice at ``k``,
and selecting again at each budget would give unpaired curves.

**Units.** One unit per (seed, combination, target[, held-out]), as stitching plans
them (:func:`relbench_stitching.grid.plan_units`), computing every budget: the
selection, the encodings and the similarities' fits are shared by the budgets, which
cost one head fit (and its tuning) each. A unit's key carries no budget (the unit/row
model keys units by plugins, seed and encoders; the budget is a column its rows set),
so changing ``budgets`` changes the kind's parameters and with them every unit's
identity, as any kind parameter does.

The page is :mod:`relbench_stitching.budget_page`; the index's section *Anchor budget*
and the rows of ``relbench export --summary`` are :mod:`relbench_stitching.budget_index`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from relbench.api import deferred_import
from relbench.api import Anchors, Axis, Page, PluginSpec, ResultRow, Task, TaskKind, TaskRunAPI, UnitKey
from relbench_stitching import budget_index, budget_page
from relbench_stitching.cells import ranking_marks
from relbench_stitching.grid import COMBO, Unit, plan_units, unit_key
from relbench_stitching.kind import Stitching
from relbench_stitching.running import EncoderWidths, UnitRun
from relbench_stitching.sides import SeedSides

pd = deferred_import("pandas")

#: the smallest budget of the default scale
SMALLEST_BUDGET = 8


def log_budgets(most: int, least: int = SMALLEST_BUDGET) -> list[int]:
    """``least``, ``2·least``, ``4·least`` … below ``most``, then ``most`` itself (just
    ``[most]`` when ``most ≤ least``)."""
    out = []
    k = least
    while k < most:
        out.append(k)
        k *= 2
    return [*out, most]


@dataclass
class AnchorBudget(TaskKind):
    """Zero-shot stitching at several anchor budgets, on nested anchor sets.

    Parameters:
        budgets: the numbers of anchors to evaluate, each at most the task's
            ``num_anchors`` (the size of the one selection each budget is a prefix of).
            Default empty: 8, 16, 32, … up to ``num_anchors``, which is always included.
        protocol: as stitching's: ``all-pairs`` or ``held-out``. Default ``all-pairs``.
        held_out: as stitching's: with ``held-out``, the encoders to hold out (default:
            each in turn).

    It declares no :attr:`matrix_axes` (so no :meth:`matrix_cells`): the board's matrix
    is one per combination over two of its cell columns, and a budget × method table is
    not that (source × target would hold one cell per budget). It declares
    :attr:`curve_axis` instead: the board draws each method's score over the budgets.
    """

    name: ClassVar[str] = "anchor-budget"
    version: ClassVar[str] = "1"
    columns: ClassVar[tuple[str, ...]] = (*COMBO, "source", "target", "held_out", "num_anchors")
    #: claims compare two methods on the same pairs at the same budget
    paired_on: ClassVar[tuple[str, ...]] = ("source", "target", "held_out", "num_anchors")
    row_fields: ClassVar[dict[str, type]] = {**Stitching.row_fields, "anchors_used": int}
    holds_out_sources: ClassVar[bool] = True
    axes: ClassVar[dict[str, Axis]] = Stitching.axes
    curve_axis: ClassVar[str] = "num_anchors"
    budgets: list[int] = field(default_factory=list)
    protocol: Literal["all-pairs", "held-out"] = "all-pairs"
    held_out: list[str] = field(default_factory=list)

    def budgets_of(self, task: Task) -> list[int]:
        """The task's budgets, smallest first: ``budgets`` or the default log-2 scale."""
        return sorted(set(self.budgets)) if self.budgets else log_budgets(task.num_anchors)

    def validate(self, task: Task) -> None:
        """Stitching's checks, budgets between 1 and ``num_anchors``, and selectors
        whose prefixes are their smaller selections."""
        Stitching(protocol=self.protocol, held_out=list(self.held_out)).validate(task)
        wrong = [b for b in self.budgets if not isinstance(b, int) or isinstance(b, bool)
                 or not 1 <= b <= task.num_anchors]
        if wrong:
            raise ValueError(f"budgets {wrong} are not whole numbers from 1 to the task's num_anchors "
                             f"({task.num_anchors}): each budget is a prefix of one selection of num_anchors anchors. "
                             f"Raise num_anchors or drop those budgets.")
        unordered = sorted({s.label for s in task.grid["selectors"] if s is not None and not s.cls.prefix_nested})
        if unordered:
            raise ValueError(f"selectors {unordered} choose their anchors for one count as a whole, so the first k of "
                             f"a selection are not their choice of k and the budgets' anchor sets could not be "
                             f"nested; use selectors that declare prefix_nested (random, stratified, fps, …).")

    def check_data(self, task: Task, data: Any) -> None:
        """As stitching: at least two classes in the training split."""
        Stitching().check_data(task, data)

    def units(self, task: Task) -> list[Unit]:
        """Stitching's units (:func:`relbench_stitching.grid.plan_units`); each computes every budget."""
        return plan_units(task, self.protocol, self.held_out)

    def plan(self, task: Task) -> list[UnitKey]:
        """One unit per (seed, combination, target[, held-out encoder])."""
        return [unit_key(seed, combo, target, held) for seed, combo, target, _, held in self.units(task)]

    def run(self, run: TaskRunAPI) -> None:
        """Every unit not yet stored, at every budget (:func:`run_budget_units`)."""
        todo = [u for u in self.units(run.task) if not run.is_done(unit_key(u[0], u[1], u[2], u[4]))]
        if todo:
            run_budget_units(run, todo, self.budgets_of(run.task))

    def page(self, results: pd.DataFrame, page: Page) -> str:
        """Curves of score against budget, their table, and each method's smallest
        budget reaching 95 % of its full-budget score (:mod:`relbench_stitching.budget_page`).
        The numbers it draws from are kept for :meth:`index_cells` of the same rows."""
        self._drawn = (results, budget_page.measure(results))
        return budget_page.budget_page(results, page, self._drawn[1])

    def index_cells(self, results: pd.DataFrame, page: Page) -> list[dict] | None:
        """Per method with anchors, its full-budget score and 95 % budget, each with its
        interval, and its score at each budget (:func:`relbench_stitching.budget_index.index_cells`),
        from the numbers :meth:`page` computed for these rows (computed here when it drew others)."""
        measured = self._measured(results)
        return budget_index.index_cells(measured) if measured else None

    def summary_cells(self, results: pd.DataFrame, page: Page) -> list[dict] | None:
        """Every score of the page's curve table, per combination and budget, and each
        method's 95 % budget with its interval (:func:`relbench_stitching.budget_index.summary_cells`)."""
        measured = self._measured(results)
        return budget_index.summary_cells(measured) if measured else None

    def curve_cells(self, results: pd.DataFrame, page: Page) -> list[dict] | None:
        """The page's curve table as the board's curves: the summary's scores per
        combination and budget (a reference without anchors at 0), not the 95 % budgets."""
        measured = self._measured(results)
        if not measured:
            return None
        return [{k: v for k, v in cell.items() if k not in ("tie_group", "anchors_used")}
                for cell in budget_index.summary_cells(measured)
                if cell["measure"] != budget_index.BUDGET_MEASURE] or None

    def _measured(self, results: pd.DataFrame) -> budget_page.Measured | None:
        """The numbers :meth:`page` computed for ``results``, or computed now for other rows."""
        drawn, measured = getattr(self, "_drawn", (None, None))
        return measured if drawn is results else budget_page.measure(results)

    @classmethod
    def index_section(cls, cells_by_task: dict[str, list[dict]]) -> str | None:
        """The index's section *Anchor budget*: per method and task, the smallest budget
        reaching 95 % of its full-budget score, with its interval
        (:func:`relbench_stitching.budget_index.section`)."""
        return budget_index.section(cells_by_task)

    def meaning(self, headline: dict | None, direction: str) -> str:
        """How few anchors the best method needs for 95 % of its full-budget score."""
        return budget_page.meaning(headline) or super().meaning(headline, direction)

    def ranking_marks(self, results: pd.DataFrame) -> dict[str, list[str]]:
        """The combinations that need both encoders' spaces at fit time, marked as the
        stitching kind marks them (not zero-shot)."""
        return ranking_marks(results)

    def claim_rows(self, results: pd.DataFrame) -> pd.DataFrame:
        """Stitched cells only: a decoder evaluated on another encoder than its own."""
        return results[results["source"] != results["target"]]


class AnchorPrefixes:
    """The first ``k`` anchors of a selection, one object per (selection, k) kept for the
    whole run: stitch sides are cached by the identity of their anchors
    (:class:`~relbench_stitching.sides.SeedSides`), so a prefix is never rebuilt."""

    def __init__(self) -> None:
        self._made: dict[tuple[int, int], tuple[Anchors, Anchors]] = {}

    def prefix(self, anchors: Anchors, k: int) -> Anchors:
        """The first ``k`` anchors of ``anchors`` (all of them when it holds no more)."""
        if k >= len(anchors):
            return anchors
        if anchors.weights is not None:
            raise ValueError("anchors mixed by weights have no order whose prefix is a smaller selection")
        key = (id(anchors), k)
        if key not in self._made:  # the full selection is kept with it, so its id is never reused
            cut = Anchors(ids=anchors.ids[:k], pool=anchors.pool, info={**anchors.info, "prefix_of": len(anchors)},
                          encoder_ids={e: ids[:k] for e, ids in anchors.encoder_ids.items()})
            self._made[key] = (anchors, cut)
        return self._made[key][1]


class BudgetRun:
    """The task run as one budget's fits see it: its anchors are the first ``budget`` of
    the run's selection; everything else is the run's. ``used``: how many anchors the
    last fit was given (0 before any)."""

    def __init__(self, run: TaskRunAPI, budget: int, prefixes: AnchorPrefixes) -> None:
        self._run, self.budget, self._prefixes = run, budget, prefixes
        self.used = 0

    def anchors(self, seed: int, selector: PluginSpec, excluded: frozenset[str] = frozenset(),
                similarity: PluginSpec | None = None) -> Anchors:
        """The first ``budget`` anchors of the run's selection (made at ``num_anchors``)."""
        cut = self._prefixes.prefix(self._run.anchors(seed, selector, excluded, similarity), self.budget)
        self.used = len(cut)
        return cut

    def __getattr__(self, name: str) -> Any:
        return getattr(self._run, name)


def run_budget_units(run: TaskRunAPI, todo: list[Unit], budgets: list[int]) -> None:
    """Fit and evaluate every unit of ``todo`` at every budget (a stitcher without
    anchors once, as budget 0), storing each unit's rows for all its budgets together."""
    task = run.task
    labels = [e.label for e in task.encoders]
    classes = len(run.dataset().class_names)
    metrics = [(m.label, m.build()) for m in task.metrics]
    sides, prefixes = SeedSides(run), AnchorPrefixes()
    for seed, combo, target_spec, source_specs, held in run.progress(todo, desc="fit+evaluate", total=len(todo)):
        held_out = frozenset(h.label for h in held)
        sides.enter(seed, combo, held_out)
        target = target_spec.label
        with run.unit(unit_key(seed, combo, target_spec, held)) as rows:
            if target in sides.mismatched:
                raise EncoderWidths(sides.mismatched[target])
            for budget in budgets if combo.selector is not None else [0]:
                view = BudgetRun(run, budget, prefixes)
                unit = UnitRun(view, sides, seed, combo, target, held_out,
                               [p for p in labels if p != target], classes, metrics)
                start = len(rows)
                unit.evaluate([s.label for s in source_specs], rows)
                rows[start:] = [_at_budget(r, budget, view.used) for r in rows[start:]]


def _at_budget(row: ResultRow, budget: int, used: int) -> ResultRow:
    """``row`` with its cell's budget and the anchors it used."""
    row.cell = {**row.cell, "num_anchors": budget, "anchors_used": used}
    return row
