"""A task's anchors and the work its units share.

:class:`TaskAnchors` computes each anchor recipe once per (seed, selector, held-out
encoders) from the seed's fit part (learned anchors once per cache folder:
:func:`~relbench.sharing.learned_anchors`), realises it in an encoder's space, and keeps
the memo of work shared by the units of one seed (:mod:`relbench.sharing`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from relbench import deferred
from relbench.errors import ConfigError
from relbench.interfaces import AnchorContext, Anchors
from relbench.sharing import SharedWork, learned_anchors
from relbench.task_model import PluginSpec

if TYPE_CHECKING:
    from relbench.task_run import TaskRun

torch = deferred.load("torch")


class TaskAnchors:
    """The anchors of one task run, and its shared work of the current seed."""

    def __init__(self, run: TaskRun):
        self.run = run
        self.runner = run.runner
        self.task = run.task
        self.kind = run.kind
        self._anchors: dict[str, Anchors] = {}
        self._shared: tuple[int, SharedWork] | None = None

    def shared(self, seed: int) -> SharedWork:
        """The memo of work shared by the units of seed ``seed`` (see
        :mod:`relbench.sharing`); asking for another seed drops the previous seed's, after
        adding its counts to the run's statistics."""
        if self._shared is None or self._shared[0] != seed:
            self.drop_shared()
            self._shared = (seed, SharedWork())
        return self._shared[1]

    def drop_shared(self) -> None:
        """Free the shared work, adding what it counted to the run's statistics."""
        if self._shared is not None:
            work = self._shared[1]
            self.runner.stats.shared_computed.update(work.computed)
            self.runner.stats.shared_reused.update(work.reused)
            self._shared = None

    def anchors(self, seed: int, selector: PluginSpec, excluded: frozenset[str] = frozenset(),
                similarity: PluginSpec | None = None) -> Anchors:
        """The anchor recipe for (seed, selector, held-out encoders), computed once, drawn
        from the seed's fit part (learned ones once per cache folder:
        :func:`~relbench.sharing.learned_anchors`). ``similarity`` (the grid entry the
        anchors serve) reaches only selectors that learn from the banks (PARAM's whitening)."""
        sel = selector.build()
        if sel.learns_from_banks and not excluded:
            raise ConfigError(
                f"task {self.task.name!r}: anchor selector {selector.label!r} learns from the encoders' banks, and "
                f"the {self.kind.name!r} task kind evaluates encoders without holding them out of anchor selection, "
                f"so the anchors would have seen the space they are evaluated in. Use random, stratified or "
                f"parallel anchors for this task, or a task kind that holds each source out.")
        excluded = frozenset(excluded) if sel.learns_from_banks else frozenset()
        similarity = similarity if sel.learns_from_banks else None
        key = json.dumps([seed, selector.identity(), sorted(excluded), similarity.identity() if similarity else None],
                         sort_keys=True, default=str)
        if key not in self._anchors:
            train = self.run.banks("train", seed)
            fit = next(iter(train.values()))
            labels = None if fit.labels is None else fit.labels.cpu().numpy()
            ctx = AnchorContext(
                num_anchors=self.task.num_anchors, seed=seed, ids=list(fit.ids), labels=labels,
                banks={k: v for k, v in train.items() if k not in excluded}, excluded=excluded,
                device=self.run.device, views={e.label: self.run.encoder_view(e.label) for e in self.task.encoders},
                pool_banks=self.run.pool_banks, similarity=similarity.build() if similarity else None)
            self._anchors[key] = learned_anchors(self.run, sel, ctx, selector, similarity) if sel.learns_from_banks \
                else sel.select(ctx)
        return self._anchors[key]

    def realise(self, anchors: Anchors, label: str) -> torch.Tensor:
        """The ``k × d`` anchors of encoder ``label``."""
        pool = self.run.banks("train") if anchors.pool == "train" else self.run.pool_banks(anchors.pool)
        return anchors.realise(pool[label])

    def release(self) -> None:
        """Free the anchors and the shared work (adding its counts to the run's statistics)."""
        self.drop_shared()
        self._anchors.clear()
