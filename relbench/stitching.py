"""The zero-shot stitching protocol: the task kind most relbench tasks use.

For every seed and every combination of the grid, a decoder is fitted on each target
(decoder-side) encoder's training bank and evaluated on every source (encoder-side)
encoder's test bank. With a selector that does not learn from the banks this costs E
fits and E² evaluations. With one that does (fps, PARAM), or with ``protocol:
held-out``, the anchors are chosen again for every source with that source excluded, so
the source is never seen before it is evaluated (E fits per source).

A regularizer that compares banks (``needs_partner_banks``: PARAM's losses) is given the
training-split relative features of every other encoder the unit does not hold out; its
rows say so (``needs_both_spaces``, ``partner_banks``), as Procrustes' rows do. Under
``protocol: held-out`` the evaluated encoder is never among them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np

from relbench import hookimpl
from relbench.config import PluginSpec, Task
from relbench.interfaces import FitContext, NotAchievable, ResultRow, StitchSide, TaskKind

NONE = "-"


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


def expand_grid(task: Task) -> list[Combination]:
    """selectors × similarities × stitchers × regularizers, collapsing the axes a
    stitcher ignores (an absolute head is not repeated per similarity), in order."""
    out: list[Combination] = []
    seen = set()
    for stitcher in task.stitchers:
        cls = stitcher.cls
        selectors = task.selectors if cls.uses_anchors else [None]
        similarities = task.similarities if cls.uses_similarity else [None]
        regularizers = task.regularizers if cls.accepts_regularizers else [None]
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
    """

    name: ClassVar[str] = "stitching"
    holds_out_sources: ClassVar[bool] = True
    protocol: Literal["all-pairs", "held-out"] = "all-pairs"
    held_out: list[str] = field(default_factory=list)

    def validate(self, task: Task) -> None:
        """The grid expands (stitchers have the selectors and similarities they need)
        and ``held_out`` names encoder labels."""
        if not task.stitchers:
            raise ValueError("a stitching task needs `grid.stitchers`, e.g. [relative, absolute, non-stitched].")
        expand_grid(task)
        labels = [e.label for e in task.encoders]
        unknown = [h for h in self.held_out if h not in labels]
        if unknown:
            raise ValueError(f"held_out names {unknown}, which are not encoder labels of this task ({labels}).")
        if self.held_out and self.protocol != "held-out":
            raise ValueError("held_out is used only with `protocol: held-out`; add it or remove held_out.")
        if self.protocol == "held-out" and len(labels) < 2:
            raise ValueError("the held-out protocol needs at least two encoders (one held out, one to train on).")

    def plan(self, task: Task) -> list[tuple[int, Combination, str, list[str], frozenset[str]]]:
        """Every unit of work: (seed, combination, target, sources, excluded encoders).

        One decoder is fitted per unit. Selectors that learn from the banks, and the
        held-out protocol, get one unit per (source, target) with the source excluded.
        """
        labels = [e.label for e in task.encoders]
        out = []
        for seed in task.seeds:
            for combo in expand_grid(task):
                learns = combo.selector is not None and combo.selector.cls.learns_from_banks
                if self.protocol == "held-out" or learns:
                    for source in self.held_out or labels:
                        if combo.stitcher.cls.diagonal_only:
                            targets = [source]
                        elif self.protocol == "held-out":
                            targets = [t for t in labels if t != source]
                        else:
                            targets = labels
                        out += [(seed, combo, target, [source], frozenset({source})) for target in targets]
                else:
                    for target in labels:
                        sources = [target] if combo.stitcher.cls.diagonal_only else labels
                        out.append((seed, combo, target, sources, frozenset()))
        return out

    def run(self, run) -> None:
        """Evaluate every (seed, combination, target) unit not yet stored."""
        task = run.task
        labels = [e.label for e in task.encoders]
        train, test = run.banks("train"), run.banks("test")
        data = run.dataset()
        metrics = [(m.label, m.build()) for m in task.metrics]
        similarities: dict[tuple[str, str], object] = {}

        sides: dict[tuple, StitchSide] = {}

        def side(label: str, combo: Combination, anchors) -> StitchSide:
            key = (id(anchors), combo.similarity.label if combo.similarity else None, label)
            if key not in sides:
                sides[key] = new_side(label, combo, anchors)
            return sides[key]

        def new_side(label: str, combo: Combination, anchors) -> StitchSide:
            sim = None
            if combo.similarity is not None:
                skey = (combo.similarity.label, label)
                if skey not in similarities:
                    sim = combo.similarity.build()
                    sim.fit(train[label].X)
                    similarities[skey] = sim
                sim = similarities[skey]
            A = run.realise(anchors, label) if anchors is not None else None
            return StitchSide(encoder=label, train=train[label], test=test[label], anchors=A, similarity=sim)

        todo = self.plan(task)
        current_seed = None
        for seed, combo, target, sources, excluded in run.progress(todo, desc="fit+evaluate", total=len(todo)):
            if seed != current_seed:  # sides hold relative features: keep one seed's at a time
                sides.clear()
                current_seed = seed
            key = {"seed": seed, **combo.key(), "target": target}
            if excluded:
                key["held_out"] = sorted(excluded)
            if run.is_done(key):
                continue
            with run.unit(key) as rows:
                anchors = run.anchors(seed, combo.selector, excluded) if combo.selector else None
                stitcher = combo.stitcher.build()
                regs = [combo.regularizer.build()] if combo.regularizer else []
                partners = {}
                if any(r.needs_partner_banks for r in regs):
                    partners = {p: side(p, combo, anchors).relative("train") for p in labels
                                if p != target and p not in excluded}
                    if not partners:
                        raise ValueError(f"regularizer {combo.regularizer.label!r} compares the target's bank with "
                                         f"other encoders' banks, but this unit has none besides {target!r}")
                ctx = FitContext(seed=seed, device=run.device, num_classes=len(data.class_names),
                                 modality=run.modality(target), regularizers=regs, partners=partners)
                stitcher.fit(side(target, combo, anchors), ctx)
                cls = combo.stitcher.cls
                extra = {"needs_both_spaces": cls.needs_both_spaces or bool(partners),
                         "partner_banks": sorted(partners),
                         "role": "reference" if cls.diagonal_only or not cls.uses_anchors else "method",
                         "anchors": len(anchors) if anchors is not None else 0, **(anchors.info if anchors else {})}
                for source in sources:
                    rows += _evaluate(stitcher, side(source, combo, anchors), target, metrics, extra)

    def leaderboard(self, df, page) -> str:
        """Ranking, references, achievable pairs and a heatmap (see relbench.leaderboard)."""
        from relbench.leaderboard import stitching_page

        return stitching_page(df, page)


def _evaluate(stitcher, source: StitchSide, target: str, metrics, extra: dict) -> list[ResultRow]:
    cell = {"source": source.encoder, "target": target, "extra": extra}
    try:
        pred = stitcher.predict(source)
    except NotAchievable as exc:
        return [ResultRow(metric=m, value=None, status="not_achievable", error=str(exc), **cell) for m, _ in metrics]
    y_true = source.test.labels.cpu().numpy()
    y_pred = pred.logits.argmax(dim=1).cpu().numpy()
    rows = [ResultRow(metric=label, value=float(metric.compute(y_true, y_pred)), **cell) for label, metric in metrics]
    rows += [ResultRow(metric=name, value=float(value), **cell) for name, value in pred.extras.items()
             if value is not None and np.isfinite(value)]
    return rows


@hookimpl
def relbench_task_kinds():
    """The harness's own protocol."""
    return [Stitching]

