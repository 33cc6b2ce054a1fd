"""The stitch sides a seed's units share: the seed's banks, a side per (anchors,
similarity, encoder) with each similarity fitted once per encoder, and the bounds that
keep their relative features within memory."""

from __future__ import annotations

import json
from collections import OrderedDict

from relbench.api import PluginSpec, StitchSide, TaskRunAPI
from relbench_stitching.grid import Combination

#: Bytes of relative features the sides of one seed keep between units (least recently
#: used dropped first): five Fashion-MNIST sides of 7,000 × 1,280 floats, one untuned
#: similarity's over the five CNNs of fashion-cross-arch, so those are never recomputed.
RELATIVE_SIDES_BYTES = 192 * 2**20


class SeedSides:
    """The banks of the current seed's draw and the stitch sides built on them, shared
    by the seed's units: a side per (anchors, similarity, encoder), each similarity
    fitted once per encoder, least recently used first."""

    def __init__(self, run: TaskRunAPI) -> None:
        self.run = run
        self.sides: OrderedDict[tuple, StitchSide] = OrderedDict()  # least recently used first
        self.similarities: dict[tuple, object] = {}
        self.banks: dict[str, dict] = {}
        #: encoder label → the error of the pairs it takes part in (its splits' widths differ)
        self.mismatched: dict[str, str] = {}
        self._seed: int | None = None
        self._similarity: PluginSpec | None = None
        self._reused_by: tuple | None = None  # the (selector, stitcher class, held-out encoders) the sides serve

    def enter(self, seed: int, combo: Combination, held_out: frozenset[str] = frozenset()) -> None:
        """Prepare for a unit of ``seed`` and combination ``combo`` holding out the
        encoders ``held_out``: a new seed reads its banks and drops every side (sides hold
        one seed's draw and relative features); another similarity drops the sides of
        relative features; another selector, stitcher class or held-out set drops every
        side (:func:`_forget_sides`)."""
        if seed != self._seed:
            self.sides.clear()
            self.similarities.clear()
            self.banks = {"train": self.run.banks("train", seed), "test": self.run.banks("test", seed)}
            if self.run.task.protocol.validation > 0:
                self.banks["validation"] = self.run.banks("validation", seed)
            self.mismatched = _width_mismatches(self.banks)
            self._seed = seed
        if combo.similarity != self._similarity:
            _forget_relative_sides(self.sides, self.similarities)
            self._similarity = combo.similarity
        reused_by = (combo.selector, combo.stitcher.cls, held_out)
        if reused_by != self._reused_by:
            _forget_sides(self.sides)
            self._reused_by = reused_by

    def side(self, label: str, similarity: PluginSpec | None, anchors) -> StitchSide:
        """Encoder ``label``'s side with these anchors and (fitted on its training bank)
        similarity, built on first use."""
        skey = json.dumps(similarity.identity(), sort_keys=True, default=str) if similarity else None
        key = (id(anchors), skey, label)
        if key in self.sides:
            self.sides.move_to_end(key)
        else:
            sim = None
            if similarity is not None:
                if (skey, label) not in self.similarities:
                    built = similarity.build()
                    built.fit(self.banks["train"][label].X)
                    self.similarities[(skey, label)] = built
                sim = self.similarities[(skey, label)]
            A = self.run.realise(anchors, label) if anchors is not None else None
            self.sides[key] = StitchSide(encoder=label, train=self.banks["train"][label],
                                         test=self.banks["test"][label], anchors=A, similarity=sim,
                                         validation=self.banks.get("validation", {}).get(label))
        return self.sides[key]

    def bound(self) -> None:
        """Drop the least recently used sides of relative features beyond
        :data:`RELATIVE_SIDES_BYTES` (:func:`_bound_relative_sides`)."""
        _bound_relative_sides(self.sides, RELATIVE_SIDES_BYTES)


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
    (:func:`~relbench_stitching.grid.expand_grid`), so keeping every similarity's sides
    until the seed ended held gigabytes. A side asked for again is computed again,
    identically."""
    for key in [key for key in sides if key[1] is not None]:
        del sides[key]
    similarities.clear()


def _forget_sides(sides: dict[tuple, StitchSide]) -> None:
    """Drop every side. Called when the units move to another selector, stitcher class or
    held-out encoder (:func:`~relbench_stitching.grid.plan_units` visits a stitcher's
    selectors one after another, and a held-out encoder's units, whose anchors are chosen
    without it, one after another): a side's memo holds what one stitcher class computed
    on its anchors for the units that meet it again (Procrustes' decomposed anchors and
    projected test rows: at full scale up to 23 MB a side), and those units are the
    following ones of the same selector, stitcher class and held-out encoders. Kept until
    the seed ended, the anchor-budget sweep over five CNNs (a side per budget, encoder,
    selector and, for farthest-point anchors, held-out encoder) held them for every
    stitcher and selector: 4.16 GB. A side asked for again is computed again, identically."""
    sides.clear()


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
