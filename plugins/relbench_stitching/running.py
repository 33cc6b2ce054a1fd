"""Running the stitching kind's units: the fit of each tuning candidate on the target's
side, the choice among them, and the rows of every source a fitted decoder is evaluated
on (the sides they share: :mod:`relbench_stitching.sides`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from relbench.api import deferred_import
from relbench.api import (Candidate, FitContext, Metric, NotAchievable, PluginSpec, ResultRow, StitchSide,
                          TaskRunAPI, UserError, candidates, choose, metric_row, per_sample_predictions)
from relbench_stitching.grid import Combination, Unit, unit_key
from relbench_stitching.sides import SeedSides

torch = deferred_import("torch")


class Fitted(NamedTuple):
    """One candidate's fit: the stitcher and what it was fitted with."""

    stitcher: object
    anchors: object
    similarity: PluginSpec | None
    partners: dict


class EncoderWidths(UserError):
    """An encoder embeds the task's splits in different widths: no pair it takes part
    in can be scored."""


def run_units(run: TaskRunAPI, todo: list[Unit]) -> None:
    """Fit and evaluate every unit of ``todo`` (in order: a seed's units, and within it
    a similarity's, follow one another), storing each unit's rows."""
    task = run.task
    labels = [e.label for e in task.encoders]
    data = run.dataset()
    metrics = [(m.label, m.build()) for m in task.metrics]
    sides = SeedSides(run)
    for seed, combo, target_spec, source_specs, held in run.progress(todo, desc="fit+evaluate", total=len(todo)):
        held_out = frozenset(h.label for h in held)
        sides.enter(seed, combo, held_out)
        target = target_spec.label
        unit = UnitRun(run, sides, seed, combo, target, held_out,
                       [p for p in labels if p != target], len(data.class_names), metrics)
        with run.unit(unit_key(seed, combo, target_spec, held)) as rows:
            if target in sides.mismatched:
                raise EncoderWidths(sides.mismatched[target])
            unit.evaluate([s.label for s in source_specs], rows)


@dataclass
class UnitRun:
    """One unit: a decoder fitted on ``target``'s side (tuned on its validation part
    over the combination's open parameters) and evaluated on every source; ``others``
    are the task's other encoders, ``excluded`` those held out of anchors and partners."""

    run: TaskRunAPI
    sides: SeedSides
    seed: int
    combo: Combination
    target: str
    excluded: frozenset[str]
    others: list[str]
    classes: int
    metrics: list[tuple[str, Metric]]

    def fit(self, cand: Candidate) -> Fitted:
        """Fit the stitcher of one tuning candidate on the target's side."""
        self.sides.bound()  # the last candidate is scored already
        specs = cand.specs
        sel, sim_spec = specs.get("selector"), specs.get("similarity")
        anchors = self.run.anchors(self.seed, sel, self.excluded, similarity=sim_spec) if sel else None
        stitcher = specs["stitcher"].build()
        regs = [specs["regularizer"].build()] if specs.get("regularizer") else []
        partners = {}
        if any(r.needs_partner_banks for r in regs):
            partners = {p: self.sides.side(p, sim_spec, anchors).relative("train") for p in self.others
                        if p not in self.excluded}
            if not partners:
                raise ValueError(f"regularizer {self.combo.regularizer.label!r} compares the target's bank "
                                 f"with other encoders' banks, but this unit has none besides {self.target!r}")
        protocol = self.run.task.protocol
        ctx = FitContext(seed=self.seed, device=self.run.device, num_classes=self.classes,
                         modality=self.run.modality(self.target), regularizers=regs, partners=partners,
                         evaluation=protocol.evaluation, shared=self.run.shared(self.seed))
        stitcher.fit(self.sides.side(self.target, sim_spec, anchors), ctx)
        return Fitted(stitcher, anchors, sim_spec, partners)

    def validation_score(self, fitted: Fitted) -> float:
        """The first metric of a fitted candidate on the target's own validation part."""
        own = self.sides.side(self.target, fitted.similarity, fitted.anchors)
        pred = fitted.stitcher.predict(own.evaluated_on("validation"))
        y_true = own.validation.labels.cpu().numpy()
        return self.metrics[0][1].compute(y_true, pred.logits.argmax(dim=1).cpu().numpy())

    def evaluate(self, sources: list[str], rows: list[ResultRow]) -> None:
        """Choose the candidate, then append to ``rows`` the rows of every source through
        its decoder (an error row for a source whose splits' widths differ)."""
        protocol = self.run.task.protocol
        banks, mismatched = self.sides.banks, self.sides.mismatched
        cands = candidates(self.combo.specs(), enabled=protocol.validation > 0)
        choice = choose(cands, self.fit, self.validation_score, self.metrics[0][1].direction(), self.metrics[0][0])
        stitcher, anchors, sim_spec, partners = choice.fitted
        cls = self.combo.stitcher.cls
        target = self.target
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
                rows += _evaluate(stitcher, self.sides.side(source, sim_spec, anchors), self.metrics, declared, extra)


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
