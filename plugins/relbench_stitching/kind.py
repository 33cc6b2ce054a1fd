"""The zero-shot stitching protocol: the task kind most relbench tasks use.

Columns: ``selector``, ``similarity``, ``stitcher``, ``regularizer`` (the grid's
combination; a part the stitcher does not use is empty), ``target`` (the decoder's
encoder), ``source`` (the encoder evaluated through it) and ``held_out`` (encoders kept
out of anchor selection and fitting).

For every seed and every combination of the grid, a decoder is fitted on each target
(decoder-side) encoder's training bank and evaluated on every source (encoder-side)
encoder's test bank. With a selector that does not learn from the banks this costs E
fits and E² evaluations. With one that does (fps, PARAM), or with ``protocol:
held-out``, the anchors are chosen again for every source with that source excluded, so
the source is never seen before it is evaluated (E fits per source).

A regularizer that compares banks (``needs_partner_banks``: PARAM's losses) is given the
training-split relative features of every other encoder the unit does not hold out; its
rows say so (the ``needs_both_spaces`` column, as Procrustes' rows do, and, for display,
``partner_banks`` in ``extra``). Under ``protocol: held-out`` the evaluated encoder is
never among them.

Every row also carries, as typed columns (:attr:`Stitching.row_fields`), what the unit's
stitcher declares: its ``role`` (:attr:`~relbench.interfaces.Stitcher.role`: ``method``,
``reference`` or ``own-head``) and ``needs_both_spaces`` (the stitcher's flag, or the
unit fitted on partner banks). Pages read those columns, never the stitcher's label nor
``extra``, which holds detail for display only. Rows stored before these columns existed
get them when read (:mod:`relbench_stitching.declared`).

Rows also record the protocol's ``evaluation`` and, as a boolean, whether the unit's
similarity is transductive (``transductive_similarity``: a prediction depends on the
other test samples; only a transductive protocol accepts one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np

from relbench.api import Axis, DatasetData, deferred_import, Page, Task, TaskKind, TaskRunAPI, UnitKey
from relbench_stitching import main_table, matrix
from relbench_stitching import page as pages
from relbench_stitching.grid import COMBO, Combination, Unit, expand_grid, plan_units, unit_key
from relbench_stitching.running import run_units

pd = deferred_import("pandas")

__all__ = ["Combination", "Stitching", "expand_grid"]


@dataclass
class Stitching(TaskKind):
    """Zero-shot stitching: fit a decoder on one encoder's space, evaluate it on every other's.

    Parameters:
        protocol: ``all-pairs`` (every source × target) or ``held-out`` (the PARAM
            protocol: for each source, anchors are chosen with that source excluded and
            decoders fitted on every other encoder). Default ``all-pairs``.
        held_out: with ``held-out``, the encoders to hold out (default: each in turn).
        budget_task: the anchor-budget task of the same tasks file with this task's data
            set and encoders, whose 95 % budgets the index's main table shows under the
            task's scores ("": none). Presentation only: it changes no unit. Default "".

    Every evaluated cell also stores its test samples' true and predicted labels
    (:func:`relbench.samples.predictions`, on the row of the task's first metric), from
    which intervals and paired comparisons are computed later; version 2 added them.
    """

    name: ClassVar[str] = "stitching"
    version: ClassVar[str] = "2"
    columns: ClassVar[tuple[str, ...]] = (*COMBO, "source", "target", "held_out")
    paired_on: ClassVar[tuple[str, ...]] = ("source", "target", "held_out")  # claims pair their sides on these
    #: typed columns of every row, fixed per unit (:func:`relbench.rows.row_fields`)
    row_fields: ClassVar[dict[str, type]] = {"role": str, "needs_both_spaces": bool}
    holds_out_sources: ClassVar[bool] = True
    is_default: ClassVar[bool] = True
    presentation_params: ClassVar[tuple[str, ...]] = ("budget_task",)
    axes: ClassVar[dict[str, Axis]] = {"selectors": Axis("selector"), "similarities": Axis("similarity"),
                                       "stitchers": Axis("stitcher"),
                                       "regularizers": Axis("regularizer", allows_none=True)}
    #: the interactive board's matrix of a combination: decoder's encoder × evaluated encoder
    matrix_axes: ClassVar[tuple[str, ...]] = matrix.AXES
    protocol: Literal["all-pairs", "held-out"] = "all-pairs"
    held_out: list[str] = field(default_factory=list)
    budget_task: str = ""

    def validate(self, task: Task) -> None:
        """The grid expands (stitchers have the selectors and similarities they need)
        and ``held_out`` names encoder labels."""
        if not task.grid["stitchers"]:
            raise ValueError("a stitching task needs `grid.stitchers`, e.g. [relative, absolute, non-stitched].")
        expand_grid(task)
        labels = [e.label for e in task.encoders]
        unknown = [h for h in self.held_out if h not in labels]
        if unknown:
            raise ValueError(f"held_out names {unknown}, which are not encoder labels of this task ({labels}).")
        if self.held_out and self.protocol != "held-out":
            raise ValueError("held_out is used only with `protocol: held-out`; add it or remove held_out.")
        if len(labels) < 2:
            raise ValueError(f"a stitching task needs at least two encoders (a decoder fitted on one, evaluated on "
                             f"another); it has {len(labels)}. Add an encoder, or use another task kind.")

    def check_data(self, task: Task, data: DatasetData) -> None:
        """Classification stitching needs at least two classes in the training split."""
        labels = data.splits["train"].labels
        if labels is not None and len(np.unique(labels)) < 2:
            raise ValueError("the training split has a single class; classification stitching needs at least two.")

    def units(self, task: Task) -> list[Unit]:
        """Every unit of work: (seed, combination, target, sources, held-out encoders)
        (:func:`relbench_stitching.grid.plan_units`).

        One decoder is fitted per unit. Selectors that learn from the banks, and the
        held-out protocol, get one unit per (source, target) with the source held out.
        """
        return plan_units(task, self.protocol, self.held_out)

    def plan(self, task: Task) -> list[UnitKey]:
        """One unit per (seed, combination, target[, held-out encoder])."""
        return [unit_key(seed, combo, target, held) for seed, combo, target, _, held in self.units(task)]

    def run(self, run: TaskRunAPI) -> None:
        """Evaluate every (seed, combination, target) unit not yet stored.

        Each seed reads its own draw (:mod:`relbench.protocol`): decoders fit on the fit
        part, open tunable constants are chosen on the target's own validation part
        (:mod:`relbench.tuning`; never on another encoder's data, never on test data),
        and every source is scored on the seed's test draw.
        """
        todo = [u for u in self.units(run.task) if not run.is_done(unit_key(u[0], u[1], u[2], u[4]))]
        if todo:
            run_units(run, todo)

    def page(self, results: pd.DataFrame, page: Page) -> str:
        """Ranking, references, achievable pairs, heatmaps and, for ``protocol:
        held-out``, PARAM's Figure 1 view (see :mod:`relbench_stitching.page`). The
        scores it draws from are kept for :meth:`index_cells` of the same rows."""
        self._drawn = (results, pages.score(results, page))
        return pages.stitching_page(results, page, held_out=self.protocol == "held-out", scored=self._drawn[1])

    def index_cells(self, results: pd.DataFrame, page: Page) -> list[dict] | None:
        """Per combination, its stitched score, 95 % interval and place in the page's
        bold group (:func:`relbench_stitching.page.index_cells`), from the scores
        :meth:`page` computed for these rows (computed here when it drew others)."""
        scored = self._scored(results, page)
        return pages.index_cells(scored, pages.encoder_views(results)) if scored else None

    def summary_cells(self, results: pd.DataFrame, page: Page) -> list[dict] | None:
        """Every score of the page's ranking and reference tables, per combination,
        metric and measure (stitched or own), with its interval, seeds and place in the
        bold group (:func:`relbench_stitching.page.summary_cells`), from the scores the
        page draws (computed here when :meth:`page` drew other rows)."""
        scored = self._scored(results, page)
        return pages.summary_cells(scored) if scored else None

    def matrix_cells(self, results: pd.DataFrame, page: Page) -> list[dict] | None:
        """Per combination, the source × target cells of the first metric with their
        intervals and seeds (:func:`relbench_stitching.matrix.matrix_cells`)."""
        return matrix.matrix_cells(results, page)

    def _scored(self, results: pd.DataFrame, page: Page) -> pages.Scored | None:
        """The scores :meth:`page` computed for ``results``, or computed now for other rows."""
        drawn, scored = getattr(self, "_drawn", (None, None))
        return scored if drawn is results else pages.score(results, page)

    def companion_tasks(self) -> tuple[str, ...]:
        """The ``budget_task``, when set."""
        return (self.budget_task,) if self.budget_task else ()

    @classmethod
    def cross_kind_section(cls, cells_by_task: dict[str, list[dict]],
                           companions: dict[str, dict[str, dict]]) -> str | None:
        """The index's main table: combinations × stitching tasks, with an aggregate
        over tasks and the anchors each combination needs on the tasks' anchor-budget
        companions (:mod:`relbench_stitching.main_table`); drawn here, where the
        companions' cells are given, so it stays where the kind's own section would be."""
        from relbench_stitching.budget import AnchorBudget  # it builds on this module

        return main_table.section(cells_by_task, companions, AnchorBudget.name)

    def headline(self, results: pd.DataFrame) -> dict | None:
        """The best non-reference combination, its stitched score and the non-stitched reference."""
        return pages.headline(results)

    def meaning(self, headline: dict | None, direction: str) -> str:
        """The headline in stitching's terms: what a decoder reaches on an encoder it was
        not fitted on, beside the reference (a decoder on its own encoder)."""
        return pages.meaning(headline, direction) or super().meaning(headline, direction)

    def ranking(self, results: pd.DataFrame) -> list[str] | None:
        """Non-reference combinations, best first (by achievable pairs, then stitched score)."""
        return pages.ranking(results)

    def ranking_marks(self, results: pd.DataFrame) -> dict[str, list[str]]:
        """The combinations that need both encoders' spaces at fit time, marked as the
        main table marks them (not zero-shot)."""
        return pages.ranking_marks(results)

    def claim_rows(self, results: pd.DataFrame) -> pd.DataFrame:
        """Stitched cells only: a decoder evaluated on another encoder than its own."""
        return results[results["source"] != results["target"]]
