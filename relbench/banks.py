"""A task's banks: every encoder's embeddings of the task's data set, whole or as one
seed's draw, and of the anchor pools the selectors read.

:class:`TaskBanks` turns the embeddings that :class:`~relbench.encoding.TaskEncodings`
reads or encodes into :class:`~relbench.interfaces.Bank` objects on the task's device,
draws each seed's samples under the task's protocol (:mod:`relbench.protocol`), and
holds the draws of one seed at a time.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

from relbench import deferred
from relbench.errors import ConfigError
from relbench.interfaces import Bank, DatasetData
from relbench.protocol import Draw, draw
from relbench.task_model import EncoderSpec

if TYPE_CHECKING:
    from relbench.task_run import TaskRun

torch = deferred.load("torch")


class TaskBanks:
    """The banks of one task run, by split or by seed's draw, and of anchor pools."""

    def __init__(self, run: TaskRun):
        self.run = run
        self.runner = run.runner
        self.task = run.task
        self._banks: dict[str, dict[str, Bank]] = {}
        self._bank_seed: int | None = None  #: the seed whose draws ``_banks`` holds
        self._draws: dict[int, Draw] = {}
        self._pools: dict[str, dict[str, Bank]] = {}

    def _embed(self, spec: EncoderSpec, data: DatasetData, view: str, split: str) -> Bank:
        X, meta = self.run.encodings.entry(spec, data, view, split)
        sp = data.splits[split]
        labels = None if sp.labels is None else torch.as_tensor(np.asarray(sp.labels), dtype=torch.long)
        return Bank(encoder=spec.label, split=split, X=X.to(self.run.device), ids=list(sp.ids),
                    labels=None if labels is None else labels.to(self.run.device), report=meta.get("report") or {})

    def draw(self, seed: int) -> Draw:
        """The samples seed ``seed`` draws under the task's protocol (computed once)."""
        if seed not in self._draws:
            data = self.run.dataset()
            shared = (data.fingerprint, json.dumps(self.task.protocol.identity(), sort_keys=True), seed)
            if shared not in self.runner.draws:  # tasks of one data set and protocol draw the same samples
                train, test = data.splits["train"], data.splits["test"]
                self.runner.draws[shared] = draw(self.task.protocol, train.labels, len(train), test.labels, len(test),
                                                 seed)
            self._draws[seed] = self.runner.draws[shared]
        return self._draws[seed]

    def banks(self, split: str, seed: int | None = None) -> dict[str, Bank]:
        """Every encoder's embeddings by encoder label. Without ``seed``: the data set's
        whole ``split`` (the pool, encoded once). With ``seed``: that seed's draw —
        ``train`` (the fit part), ``validation`` or ``test`` (see :mod:`relbench.protocol`)."""
        if seed is not None:
            self._hold_seed(seed)
            key = f"{split}/{seed}"
            if key not in self._banks:
                if split not in ("train", "validation", "test"):
                    raise ValueError(f"a seed's banks are train, validation or test, not {split!r}")
                positions = torch.as_tensor(self.draw(seed).positions(split), dtype=torch.long)
                pool = self.banks("test" if split == "test" else "train")
                self._banks[key] = {label: bank.subset(positions, split) for label, bank in pool.items()}
            return self._banks[key]
        if split not in self._banks:
            data = self.run.dataset()
            if split not in data.splits:
                raise ConfigError(f"data set {data.name!r} has no split {split!r}.")
            self.run.encodings.encode_ahead()
            self._banks[split] = {
                spec.label: self._embed(spec, data, self.run.encoder_view(spec.label), split)
                for spec in self.task.encoders
            }
            dims = {lbl: b.dim for lbl, b in self._banks[split].items()}
            self.runner.say(f"[{self.task.name}] {split}: " + ", ".join(f"{k} {v}-d" for k, v in dims.items()))
        return self._banks[split]

    def _hold_seed(self, seed: int) -> None:
        """Keep the draws of one seed only. A seed's banks are copies of pool rows (at full
        scale about 170 MB a seed for five image encoders), a unit reads one seed, and the
        task kinds walk the seeds one after another; so asking for another seed's banks
        frees the previous seed's. Asked again, they are drawn again, identically."""
        if self._bank_seed != seed:
            for key in [k for k in self._banks if "/" in k]:
                del self._banks[key]
            self._bank_seed = seed

    def pool_banks(self, dataset_name: str) -> dict[str, Bank]:
        """Training banks of another data set (out-of-domain anchor pool), every encoder."""
        if dataset_name not in self._pools:
            self.run.encodings.encode_ahead()
            self._pools[dataset_name] = {
                spec.label: self._embed(spec, *self.run.encodings.source(spec, dataset_name), "train")
                for spec in self.task.encoders}
        return self._pools[dataset_name]

    def release(self) -> None:
        """Free the banks (the draws are kept: they are small and drawn identically)."""
        self._banks.clear()
        self._bank_seed = None
        self._pools.clear()
