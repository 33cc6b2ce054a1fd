"""Anchor selectors of the relative-representations paper: random, stratified,
parallel and out-of-domain (OOD), and the chance null of its relative stitching
(mismatched)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from relbench.api import AnchorContext, Anchors, AnchorSelector, ConfigError, deferred_import, seeded_generator

torch = deferred_import("torch")


def _check_count(selector: str, k: int, available: int, pool: str) -> None:
    if k > available:
        raise ConfigError(
            f"anchor selector {selector!r} needs {k} anchors but the {pool} has only {available} samples. "
            f"Lower `num_anchors` (task or suite) to at most {available}, or use a larger data set."
        )
    if k <= 0:
        raise ConfigError(f"anchor selector {selector!r}: num_anchors must be positive, got {k}.")


def _draw(ids: Sequence[str], k: int, seed: int) -> list[str]:
    """``k`` ids drawn uniformly without replacement with a fresh generator seeded by
    ``seed`` (so the draw does not depend on what ran before)."""
    perm = torch.randperm(len(ids), generator=seeded_generator(seed))[:k]
    return [ids[i] for i in perm.tolist()]


def _shared_ids(ids: Sequence[str], banks: dict) -> list[str]:
    """``ids`` (in order) that every bank holds."""
    keep = [set(b.ids) for b in banks.values()]
    return [i for i in ids if all(i in s for s in keep)]


@dataclass
class RandomAnchors(AnchorSelector):
    """Random anchors: ``num_anchors`` training samples drawn uniformly (seeded), the
    paper's default choice.

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "random"
    prefix_nested: ClassVar[bool] = True  # the first k of a seeded permutation

    def select(self, ctx: AnchorContext) -> Anchors:
        """Uniform draw from ``ctx.ids``."""
        _check_count(self.name, ctx.num_anchors, len(ctx.ids), "training split")
        return Anchors(ids=_draw(ctx.ids, ctx.num_anchors, ctx.seed))


@dataclass
class StratifiedAnchors(AnchorSelector):
    """Stratified anchors: after a seeded shuffle, take samples round-robin over the
    classes (the reference code's default), so every class is represented as evenly as
    ``num_anchors`` allows.

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "stratified"
    prefix_nested: ClassVar[bool] = True  # round-robin picks, in order

    def select(self, ctx: AnchorContext) -> Anchors:
        """Round-robin over classes (sorted class order) of a seeded shuffle."""
        if ctx.labels is None:
            raise ConfigError("anchor selector 'stratified' needs a labelled data set; use 'random' instead.")
        k = ctx.num_anchors
        _check_count(self.name, k, len(ctx.ids), "training split")
        labels = np.asarray(ctx.labels).reshape(-1)
        order = torch.randperm(len(ctx.ids), generator=seeded_generator(ctx.seed)).tolist()
        queues = {c: [i for i in order if labels[i] == c] for c in sorted(set(labels.tolist()))}
        chosen: list[int] = []
        depth = 0
        while len(chosen) < k:
            for queue in queues.values():
                if depth < len(queue) and len(chosen) < k:
                    chosen.append(queue[depth])
            depth += 1
        return Anchors(ids=[ctx.ids[i] for i in chosen], info={"classes": len(queues)})


@dataclass
class ParallelAnchors(AnchorSelector):
    """Parallel anchors: random sample ids that every bank holds, so each encoder — in
    whichever view it reads (language, modality) — embeds the same samples (Moschella et
    al. 2023, §3.1). In relbench ids are shared by the views of a sample, so this is the
    random draw restricted to the ids present in every training bank; the data set's
    views supply the correspondence.

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "parallel"
    prefix_nested: ClassVar[bool] = True  # the first k of a seeded permutation

    def select(self, ctx: AnchorContext) -> Anchors:
        """Uniform draw from the ids every bank shares."""
        ids = _shared_ids(ctx.ids, ctx.banks) if ctx.banks else list(ctx.ids)
        _check_count(self.name, ctx.num_anchors, len(ids), "set of ids shared by every bank")
        return Anchors(ids=_draw(ids, ctx.num_anchors, ctx.seed), info={"parallel": True})


@dataclass
class OODAnchors(AnchorSelector):
    """Out-of-domain anchors: parallel samples of *another* data set, encoded by every
    encoder (Moschella et al. 2023, §3.1 and §5.2, e.g. parallel Wikipedia sentences for
    a review task).

    Parameters
    ----------
    dataset : str, default "ui-strings"
        The data set plugin that supplies the anchors; its training split is encoded by
        every encoder in the view it reads, so it must offer those views (e.g. parallel
        UI strings in en, es, fr, de, ja).
    """

    name: ClassVar[str] = "ood"
    prefix_nested: ClassVar[bool] = True  # the first k of a seeded permutation
    dataset: str = "ui-strings"

    def __post_init__(self) -> None:
        if not self.dataset:
            raise ValueError("dataset must name the data set plugin that supplies the anchors")

    def pools(self) -> list[str]:
        """The anchor pool's data set."""
        return [self.dataset]

    def select(self, ctx: AnchorContext) -> Anchors:
        """Uniform draw from the ids every pool bank shares."""
        banks = ctx.pool_banks(self.dataset)
        if not banks:
            raise ConfigError(f"anchor selector 'ood': data set {self.dataset!r} produced no banks.")
        first = next(iter(banks.values()))
        ids = _shared_ids(first.ids, banks)
        _check_count(self.name, ctx.num_anchors, len(ids), f"out-of-domain pool {self.dataset!r}")
        return Anchors(ids=_draw(ids, ctx.num_anchors, ctx.seed), pool=self.dataset)


def _encoder_seed(seed: int, encoder: str) -> int:
    """A seed of its own for ``encoder``'s permutation under ``seed``: a hash of both, so it
    depends on neither the other encoders nor their order."""
    digest = hashlib.sha256(f"{seed}\0{encoder}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


@dataclass
class MismatchedAnchors(AnchorSelector):
    """Mismatched anchors, the chance null of relative stitching: the ``random`` selector's
    draw, put in an order of its own in every encoder's space, so that anchor ``k`` is a
    different sample in each space and the relative coordinates correspond to nothing
    across spaces.

    A relative representation (Moschella et al. 2023) transfers between spaces only because
    its anchors are parallel: coordinate ``k`` is the similarity to the *same* sample in
    every space. This selector breaks that parallelism and nothing else: every encoder sees
    the same ``num_anchors`` real samples of its own data (the ``random`` selector's, for
    the same seed) and a decoder used on its own encoder is unaffected, while a decoder
    used zero-shot on another encoder reads permuted coordinates. Its stitched score is
    what the same head, budget and tuning reach by chance, the floor against which a
    stitching score's distance to the own head is measured (``chance_null``).

    Each encoder's order is an independent seeded permutation (seeded by the run's seed and
    the encoder's label, so it does not depend on the other encoders); two encoders may
    share an anchor's sample at a few positions, as two random orders do. Not
    ``prefix_nested``: the first ``k`` of a permuted draw of ``n`` are not the permuted
    draw of ``k``. Needs a task kind that names two or more encoders to the selector.

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "mismatched"
    chance_null: ClassVar[bool] = True

    def select(self, ctx: AnchorContext) -> Anchors:
        """The random draw as ``ids``; every encoder's own seeded permutation of it as ``encoder_ids``."""
        encoders = sorted(ctx.views)
        if len(encoders) < 2:
            raise ConfigError("anchor selector 'mismatched' orders the anchors differently in each encoder's space, "
                              "but this task kind names no two encoders to it; use 'random' here.")
        _check_count(self.name, ctx.num_anchors, len(ctx.ids), "training split")
        drawn = _draw(ctx.ids, ctx.num_anchors, ctx.seed)
        orders = {e: torch.randperm(len(drawn), generator=seeded_generator(_encoder_seed(ctx.seed, e))).tolist()
                  for e in encoders}
        return Anchors(ids=drawn, encoder_ids={e: [drawn[i] for i in order] for e, order in orders.items()})
