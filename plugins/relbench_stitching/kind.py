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

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import ClassVar, Literal, NamedTuple

import lazy_loader
import numpy as np


from relbench.api import (Axis, Candidate, DatasetData, EncoderSpec, FitContext, NotAchievable, Page, PluginSpec,
                          ResultRow, StitchSide, Task, TaskKind, TaskRunAPI, UnitKey, UserError, candidates, choose,
                          metric_row, per_sample_predictions)
from relbench_stitching import main_table, matrix
from relbench_stitching import page as pages

torch = lazy_loader.load("torch")
pd = lazy_loader.load("pandas")

NONE = "-"
#: Bytes of relative features the sides of one seed keep between units (least recently
#: used dropped first): five Fashion-MNIST sides of 7,000 × 1,280 floats, one untuned
#: similarity's over the five CNNs of fashion-cross-arch, so those are never recomputed.
RELATIVE_SIDES_BYTES = 192 * 2**20


@dataclass(frozen=True)
class Combination:
    """One point of the grid; ``None`` where the stitcher does not use that part."""

    selector: PluginSpec | None
    similarity: PluginSpec | None
    stitcher: PluginSpec
    regularizer: PluginSpec | None

    def key(self) -> dict:
        """Labels identifying the combination in result rows."""
        return {"selector": self.selector.label if self.selector else NONE,
                "similarity": self.similarity.label if self.similarity else NONE,
                "stitcher": self.stitcher.label,
                "regularizer": self.regularizer.label if self.regularizer else NONE}

    def specs(self) -> dict[str, PluginSpec]:
        """The plugins of the combination by column (parts it does not use left out)."""
        return {col: spec for col, spec in zip(COMBO, (self.selector, self.similarity, self.stitcher,
                                                      self.regularizer)) if spec is not None}


COMBO = ("selector", "similarity", "stitcher", "regularizer")


class Fitted(NamedTuple):
    """One candidate's fit: the stitcher and what it was fitted with."""

    stitcher: object
    anchors: object
    similarity: PluginSpec | None
    partners: dict


def expand_grid(task: Task) -> list[Combination]:
    """selectors × similarities × stitchers × regularizers, collapsing the axes a
    stitcher ignores (an absolute head is not repeated per similarity), in order."""
    out: list[Combination] = []
    seen = set()
    for stitcher in task.grid["stitchers"]:
        cls = stitcher.cls
        selectors = task.grid["selectors"] if cls.uses_anchors else [None]
        similarities = task.grid["similarities"] if cls.uses_similarity else [None]
        regularizers = task.grid["regularizers"] if cls.accepts_regularizers else [None]
        if cls.uses_anchors and not selectors:
            raise ValueError(f"stitcher {stitcher.label!r} needs anchors but the grid has no selectors; "
                             f"add e.g. `selectors: [random]` to the task's grid.")
        if cls.uses_similarity and not similarities:
            raise ValueError(f"stitcher {stitcher.label!r} needs a similarity but the grid has none; "
                             f"add e.g. `similarities: [cosine]` to the task's grid.")
        for sel in selectors:
            for sim in similarities:
                for reg in regularizers:
                    combo = Combination(sel, sim, stitcher, reg)
                    k = tuple(combo.key().values())
                    if k not in seen:
                        seen.add(k)
                        out.append(combo)
    return out


@dataclass
class Stitching(TaskKind):
    """Zero-shot stitching: fit a decoder on one encoder's space, evaluate it on every other's.

    Parameters:
        protocol: ``all-pairs`` (every source × target) or ``held-out`` (the PARAM
            protocol: for each source, anchors are chosen with that source excluded and
            decoders fitted on every other encoder). Default ``all-pairs``.
        held_out: with ``held-out``, the encoders to hold out (default: each in turn).

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
    axes: ClassVar[dict[str, Axis]] = {"selectors": Axis("selector"), "similarities": Axis("similarity"),
                                       "stitchers": Axis("stitcher"),
                                       "regularizers": Axis("regularizer", allows_none=True)}
    #: the interactive board's matrix of a combination: decoder's encoder × evaluated encoder
    matrix_axes: ClassVar[tuple[str, ...]] = matrix.AXES
    protocol: Literal["all-pairs", "held-out"] = "all-pairs"
    held_out: list[str] = field(default_factory=list)

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

    def units(self, task: Task) -> list[tuple[int, Combination, EncoderSpec, list[EncoderSpec], list[EncoderSpec]]]:
        """Every unit of work: (seed, combination, target, sources, held-out encoders).

        One decoder is fitted per unit. Selectors that learn from the banks, and the
        held-out protocol, get one unit per (source, target) with the source held out.
        """
        encoders = list(task.encoders)
        by_label = {e.label: e for e in encoders}
        out = []
        for seed in task.seeds:
            for combo in expand_grid(task):
                learns = combo.selector is not None and combo.selector.cls.learns_from_banks
                if self.protocol == "held-out" or learns:
                    for source in [by_label[h] for h in self.held_out] or encoders:
                        if combo.stitcher.cls.diagonal_only:
                            targets = [source]
                        elif self.protocol == "held-out":
                            targets = [t for t in encoders if t is not source]
                        else:
                            targets = encoders
                        out += [(seed, combo, target, [source], [source]) for target in targets]
                else:
                    for target in encoders:
                        sources = [target] if combo.stitcher.cls.diagonal_only else encoders
                        out.append((seed, combo, target, sources, []))
        return out

    @staticmethod
    def _key(seed: int, combo: Combination, target: EncoderSpec, held_out: list[EncoderSpec]) -> UnitKey:
        key: UnitKey = {"seed": seed, **combo.specs(), "target": target}
        if held_out:
            key["held_out"] = held_out
        return key

    def plan(self, task: Task) -> list[UnitKey]:
        """One unit per (seed, combination, target[, held-out encoder])."""
        return [self._key(seed, combo, target, held) for seed, combo, target, _, held in self.units(task)]

    def run(self, run: TaskRunAPI) -> None:
        """Evaluate every (seed, combination, target) unit not yet stored.

        Each seed reads its own draw (:mod:`relbench.protocol`): decoders fit on the fit
        part, open tunable constants are chosen on the target's own validation part
        (:mod:`relbench.tuning`; never on another encoder's data, never on test data),
        and every source is scored on the seed's test draw.
        """
        task = run.task
        todo = [u for u in self.units(task) if not run.is_done(self._key(u[0], u[1], u[2], u[4]))]
        if not todo:
            return
        labels = [e.label for e in task.encoders]
        protocol = task.protocol
        data = run.dataset()
        metrics = [(m.label, m.build()) for m in task.metrics]
        sides: OrderedDict[tuple, StitchSide] = OrderedDict()  # least recently used first
        similarities: dict[tuple, object] = {}
        banks: dict[str, dict] = {}

        def side(label: str, similarity, anchors) -> StitchSide:
            skey = json.dumps(similarity.identity(), sort_keys=True, default=str) if similarity else None
            key = (id(anchors), skey, label)
            if key in sides:
                sides.move_to_end(key)
            else:
                sim = None
                if similarity is not None:
                    if (skey, label) not in similarities:
                        built = similarity.build()
                        built.fit(banks["train"][label].X)
                        similarities[(skey, label)] = built
                    sim = similarities[(skey, label)]
                A = run.realise(anchors, label) if anchors is not None else None
                sides[key] = StitchSide(encoder=label, train=banks["train"][label], test=banks["test"][label],
                                        anchors=A, similarity=sim, validation=banks.get("validation", {}).get(label))
            return sides[key]

        current_seed, current_similarity = None, None
        for seed, combo, target_spec, source_specs, held in run.progress(todo, desc="fit+evaluate", total=len(todo)):
            if seed != current_seed:  # sides hold one seed's draw and relative features
                sides.clear()
                similarities.clear()
                banks = {"train": run.banks("train", seed), "test": run.banks("test", seed)}
                if protocol.validation > 0:
                    banks["validation"] = run.banks("validation", seed)
                mismatched = _width_mismatches(banks)
                current_seed = seed
            if combo.similarity != current_similarity:
                _forget_relative_sides(sides, similarities)
                current_similarity = combo.similarity
            target, sources = target_spec.label, [s.label for s in source_specs]
            excluded = frozenset(h.label for h in held)
            with run.unit(self._key(seed, combo, target_spec, held)) as rows:
                if target in mismatched:
                    raise EncoderWidths(mismatched[target])

                def fit(cand: Candidate) -> Fitted:
                    _bound_relative_sides(sides, RELATIVE_SIDES_BYTES)  # the last candidate is scored already
                    specs = cand.specs
                    sel, sim_spec = specs.get("selector"), specs.get("similarity")
                    anchors = run.anchors(seed, sel, excluded, similarity=sim_spec) if sel else None
                    stitcher = specs["stitcher"].build()
                    regs = [specs["regularizer"].build()] if specs.get("regularizer") else []
                    partners = {}
                    if any(r.needs_partner_banks for r in regs):
                        partners = {p: side(p, sim_spec, anchors).relative("train") for p in labels
                                    if p != target and p not in excluded}
                        if not partners:
                            raise ValueError(f"regularizer {combo.regularizer.label!r} compares the target's bank "
                                             f"with other encoders' banks, but this unit has none besides {target!r}")
                    ctx = FitContext(seed=seed, device=run.device, num_classes=len(data.class_names),
                                     modality=run.modality(target), regularizers=regs, partners=partners,
                                     evaluation=protocol.evaluation, shared=run.shared(seed))
                    stitcher.fit(side(target, sim_spec, anchors), ctx)
                    return Fitted(stitcher, anchors, sim_spec, partners)

                def validation_score(fitted: Fitted) -> float:
                    own = side(target, fitted.similarity, fitted.anchors)
                    pred = fitted.stitcher.predict(own.evaluated_on("validation"))
                    y_true = own.validation.labels.cpu().numpy()
                    return metrics[0][1].compute(y_true, pred.logits.argmax(dim=1).cpu().numpy())

                cands = candidates(combo.specs(), enabled=protocol.validation > 0)
                choice = choose(cands, fit, validation_score, metrics[0][1].direction(), metrics[0][0])
                stitcher, anchors, sim_spec, partners = choice.fitted
                cls = combo.stitcher.cls
                sizes = {"fit": len(banks["train"][target].ids), "test": len(banks["test"][target].ids),
                         "validation": len(banks["validation"][target].ids) if "validation" in banks else 0}
                declared = {"role": cls.role, "needs_both_spaces": cls.needs_both_spaces or bool(partners)}
                extra = {"partner_banks": sorted(partners),
                         "evaluation": protocol.evaluation, "samples": sizes, "tuned": choice.record(),
                         "transductive_similarity": bool(sim_spec and sim_spec.build().transductive()),
                         "anchors": len(anchors) if anchors is not None else 0, **(anchors.info if anchors else {})}
                reports = {lbl: banks["test"][lbl].report for lbl in (target, *sources) if banks["test"][lbl].report}
                if reports:
                    extra["encoder_reports"] = reports
                for source in sources:
                    if source in mismatched:  # only this pair fails; the unit's other pairs are scored
                        rows.append(ResultRow(metric="error", value=None, direction="neutral",
                                              cell={"source": source, **declared}, status="error",
                                              error=mismatched[source]))
                    else:
                        rows += _evaluate(stitcher, side(source, sim_spec, anchors), metrics, declared, extra)

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

    @classmethod
    def index_section(cls, cells_by_task: dict[str, list[dict]]) -> str | None:
        """The index's main table: combinations × stitching tasks, with an aggregate
        over tasks (:mod:`relbench_stitching.main_table`)."""
        return main_table.section(cells_by_task)

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

    def claim_rows(self, results: pd.DataFrame) -> pd.DataFrame:
        """Stitched cells only: a decoder evaluated on another encoder than its own."""
        return results[results["source"] != results["target"]]


class EncoderWidths(UserError):
    """An encoder embeds the task's splits in different widths: no pair it takes part
    in can be scored."""


def _width_mismatches(banks: dict[str, dict]) -> dict[str, str]:
    """For each encoder whose train and test embeddings differ in width, the message of
    the pairs it takes part in (the validation bank is drawn from the train split)."""
    return {label: f"encoder {label!r} embeds split 'train' in {bank.dim} dimensions but split 'test' in "
                   f"{banks['test'][label].dim}; an encoder must give every split the same width. Fix the encoder: "
                   f"the pairs involving it fail, the others are computed."
            for label, bank in banks["train"].items() if bank.dim != banks["test"][label].dim}


def _forget_relative_sides(sides: dict[tuple, StitchSide], similarities: dict[tuple, object]) -> None:
    """Drop the sides that hold relative features (and the fitted similarities), keeping
    the similarity-free sides that translation stitchers reuse. Called when the grid
    moves to another similarity: a side holds its features of the seed's fit, validation
    and test draws (at full scale 7,000 × 1,280 floats, 36 MB, per encoder and candidate
    of a tuned similarity), and the grid visits each similarity's units one after another
    (:func:`expand_grid`), so keeping every similarity's sides until the seed ended held
    gigabytes. A side asked for again is computed again, identically."""
    for key in [key for key in sides if key[1] is not None]:
        del sides[key]
    similarities.clear()


def _bound_relative_sides(sides: OrderedDict[tuple, StitchSide], budget: int) -> None:
    """Drop the least recently used sides that hold relative features until those left
    hold at most ``budget`` bytes of them (before each candidate's fit, when the one
    before is scored). A tuned similarity makes a side per candidate: WIP's five
    shrinkages over five Fashion-MNIST CNNs held 25 sides of 36 MB, and pushed a worker
    past 2 GB. A side asked for again is computed again, identically."""
    held = {key: side.relative_bytes() for key, side in sides.items() if key[1] is not None}
    total = sum(held.values())
    for key, size in held.items():
        if total <= budget:
            break
        del sides[key]
        total -= size


def _evaluate(stitcher, source: StitchSide, metrics, declared: dict, extra: dict) -> list[ResultRow]:
    """The rows of one source through a fitted stitcher: each metric, and the
    stitcher's per-cell diagnostics; every row carries the unit's ``declared`` columns."""
    cell = {"source": source.encoder, **declared}
    try:
        pred = stitcher.predict(source)
    except NotAchievable as exc:
        return [ResultRow(metric=m, value=None, direction=metric.direction(), cell=cell, status="not_achievable",
                          error=str(exc), extra=extra) for m, metric in metrics]
    if not torch.isfinite(pred.logits).all():
        raise ValueError(f"stitcher {type(stitcher).name!r} predicted non-finite logits for source {source.encoder!r}; "
                         f"nothing is scored on them")
    y_true = source.test.labels.cpu().numpy()
    y_pred = pred.logits.argmax(dim=1).cpu().numpy()
    rows = [metric_row(label, metric, y_true, y_pred, cell=cell, extra=extra) for label, metric in metrics]
    rows[0].per_sample = per_sample_predictions(source.test.ids, y_true, y_pred)
    rows += [ResultRow(metric=name, value=float(d.value), direction=d.direction, cell=cell, extra=extra)
             for name, d in pred.extras.items() if d.value is not None and np.isfinite(d.value)]
    return rows
