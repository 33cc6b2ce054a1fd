"""Class-level parallel anchors: matched by class across spaces, never by sample."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from relbench.api import AnchorContext, Anchors, AnchorSelector, ConfigError, deferred_import, seeded_generator

torch = deferred_import("torch")


def class_offset(position: int, encoders: int, members: int) -> int:
    """``⌊position · members / encoders⌋``: where encoder number ``position`` (of
    ``encoders``) starts in its class's sample order. Offsets differ between encoders
    whenever ``members ≥ encoders``, and are at least ``⌊members / encoders⌋`` apart."""
    return position * members // encoders


@dataclass
class ClassParallelAnchors(AnchorSelector):
    """Class-level parallel anchors (PARAM, Svendsen, Jakobsen et al., §4 Discussion: "partial
    or class-level parallel sets"): anchor ``i`` is a sample of the same class in every
    encoder's space, but a *different* sample in each.

    With ``L_c`` the fit samples of class ``c`` in a seeded random order (``n_c`` of them),
    the random draw of ``num_anchors`` fit samples fixes each anchor's class ``c_i`` and its
    rank ``r_i`` among the anchors of that class (the draw takes the first ``u_c`` of
    ``L_c``). The ``j``-th of the task's ``E`` encoders (in label order) uses

        ``x_i^(j) = L_c[(r_i + ⌊j · n_c / E⌋) mod n_c]``,   ``c = c_i``,

    so encoder 0 reads the random draw (the ``random`` selector's anchors), every encoder
    reads ``u_c`` distinct samples of class ``c``, the ``E`` samples of one anchor are
    distinct whenever ``n_c ≥ E`` (two encoders: whenever the class has two samples), and no
    sample anchors two encoders at all when ``n_c ≥ E · u_c``. ``info`` counts the pairs of
    encoders that share an anchor's sample (``class_parallel_shared_pairs``, 0 unless a
    class is that small). The paper names the idea but runs no such experiment; the
    construction is ours.

    The recipe gives each encoder its own ids (``Anchors.encoder_ids``), the held-out one
    included, so it needs a labelled data set and a task kind that names two or more
    encoders to the selector (``AnchorContext.views``).

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "class-parallel"
    prefix_nested: ClassVar[bool] = True  # a prefix of the draw; ranks and offsets depend on no later anchor

    def select(self, ctx: AnchorContext) -> Anchors:
        """A seeded random draw fixes the classes; each encoder gets its own samples of them."""
        encoders = sorted(ctx.views)
        if len(encoders) < 2:
            raise ConfigError("anchor selector 'class-parallel' gives each encoder its own samples, but this task "
                              "kind names no two encoders to it; use 'random' or 'stratified' here.")
        if ctx.labels is None:
            raise ConfigError("anchor selector 'class-parallel' matches anchors by class and needs a labelled data "
                              "set; use 'parallel' instead.")
        k, n = ctx.num_anchors, len(ctx.ids)
        if not 0 < k <= n:
            raise ConfigError(f"anchor selector 'class-parallel' needs between 1 and {n} anchors (the training "
                              f"split's size), got {k}. Set `num_anchors` accordingly.")
        classes = np.asarray(ctx.labels).reshape(-1).tolist()
        order = torch.randperm(n, generator=seeded_generator(ctx.seed)).tolist()
        drawn = order[:k]
        members = {c: [i for i in order if classes[i] == c] for c in {classes[i] for i in drawn}}
        slots = [(members[classes[i]], r) for i, r in zip(drawn, _ranks_in_class([classes[i] for i in drawn]))]
        picks = {e: [m[(r + class_offset(j, len(encoders), len(m))) % len(m)] for m, r in slots]
                 for j, e in enumerate(encoders)}
        return Anchors(ids=[ctx.ids[i] for i in drawn],
                       encoder_ids={e: [ctx.ids[i] for i in p] for e, p in picks.items()},
                       info={"class_parallel_shared_pairs": _shared_pairs(list(picks.values()))})


def _ranks_in_class(classes: list) -> list[int]:
    """For each entry, how many earlier entries have its class."""
    seen: dict = {}
    ranks = []
    for c in classes:
        ranks.append(seen.get(c, 0))
        seen[c] = ranks[-1] + 1
    return ranks


def _shared_pairs(picks: list[list[int]]) -> int:
    """Pairs of encoders (summed over anchors) whose samples for the same anchor coincide."""
    return sum(a[i] == b[i] for x, a in enumerate(picks) for b in picks[x + 1:] for i in range(len(a)))
