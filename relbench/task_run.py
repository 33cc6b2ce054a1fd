"""The task run: the services a task kind uses while evaluating one task.

:class:`TaskRun` is the runner's :class:`~relbench.interfaces.TaskRunAPI`, a façade over
the rooms that do the work, one job each: the plan and identities
(:class:`~relbench.task_plan.TaskPlanner`), the encoders and the embedding cache
(:class:`~relbench.encoding.TaskEncodings`), the banks and seed draws
(:class:`~relbench.banks.TaskBanks`), the anchors and shared work
(:class:`~relbench.anchor_store.TaskAnchors`), and the storing of units
(:class:`~relbench.unit_store.TaskUnits`).
"""

from __future__ import annotations

import functools
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from relbench import deferred
from relbench.anchor_store import TaskAnchors
from relbench.banks import TaskBanks
from relbench.console import progress_bar
from relbench.encoding import BankNeed, TaskEncodings, resolve_device
from relbench.errors import ConfigError
from relbench.interfaces import Anchors, Bank, DatasetData, ResultRow, UnitKey
from relbench.sharing import SharedWork
from relbench.task_model import PluginSpec, Task
from relbench.task_plan import TaskPlan, TaskPlanner
from relbench.unit_store import TaskUnits

if TYPE_CHECKING:
    from relbench.runner import Runner

torch = deferred.load("torch")


class TaskRun:
    """The services a task kind uses while evaluating one task (the runner's
    :class:`~relbench.interfaces.TaskRunAPI`), and the task's plan and identities."""

    def __init__(self, runner: Runner, task: Task):
        self.runner = runner
        self.task = task
        self.kind = task.kind.build()
        self.planner = TaskPlanner(self)
        self.encodings = TaskEncodings(self)
        self.bank_store = TaskBanks(self)
        self.anchor_store = TaskAnchors(self)
        self.unit_store = TaskUnits(self)
        #: why the task cannot be planned here (a missing asset …), for ``--dry-run``
        self.unavailable: str = ""

    @functools.cached_property
    def device(self) -> torch.device:
        """Where the task computes (:func:`~relbench.encoding.resolve_device`), resolved
        when first used, so that a run which only plans never imports torch to ask for a GPU."""
        return resolve_device(self.task.device)

    # -------------------------------------------------------------- plan (TaskPlanner)

    def task_inputs(self) -> dict:
        """What every unit of the task depends on (see :mod:`relbench.identity`)."""
        return self.planner.task_inputs()

    def plan(self) -> TaskPlan:
        """The kind's units with their identities, checked against the store."""
        return self.planner.plan()

    def replan(self) -> TaskPlan:
        """The plan again, against the store as it is now (identities are kept)."""
        return self.planner.replan()

    def restrict(self, units: set[str]) -> TaskPlan:
        """The plan with only ``units`` left to compute (:meth:`TaskPlanner.restrict`)."""
        return self.planner.restrict(units)

    # -------------------------------------------------------------- data and encoders (TaskEncodings)

    def dataset(self) -> DatasetData:
        """The task's data set (loaded once per run, shared by tasks of the same data set)."""
        data = self.runner.dataset(self.task.dataset)
        self._check_dataset(data)
        return data

    def _check_dataset(self, data: DatasetData) -> None:
        for split in ("train", "test"):
            if split not in data.splits:
                raise ConfigError(f"task {self.task.name!r}: data set {self.task.dataset.label!r} has no "
                                  f"{split!r} split (it has {sorted(data.splits)}).")
        try:
            self.kind.check_data(self.task, data)
        except ValueError as exc:
            raise ConfigError(f"task {self.task.name!r} ({self.kind.name}), data set {self.task.dataset.label!r}: "
                              f"{exc}") from None

    def encoder_view(self, label: str) -> str:
        """The view an encoder reads (its spec's ``view``, else the data set's first)."""
        return self.encodings.encoder_view(label)

    def modality(self, label: str) -> str:
        """Modality of the view an encoder reads."""
        return self.encodings.modality(label)

    def bank_needs(self) -> list[BankNeed]:
        """Every bank the task reads (:meth:`TaskEncodings.bank_needs`); loads no items."""
        return self.encodings.bank_needs()

    def bank_entry(self, need: BankNeed) -> tuple[torch.Tensor, dict]:
        """The embeddings of ``need`` and their cache metadata, read from the cache or encoded now."""
        return self.encodings.bank_entry(need)

    def cached_entry(self, need: BankNeed) -> tuple[torch.Tensor, dict] | None:
        """The embeddings of ``need`` and their metadata when the cache holds them, else None."""
        return self.encodings.cached_entry(need)

    # -------------------------------------------------------------- banks (TaskBanks)

    def banks(self, split: str, seed: int | None = None) -> dict[str, Bank]:
        """Every encoder's embeddings by label: the whole ``split``, or seed ``seed``'s draw of it."""
        return self.bank_store.banks(split, seed)

    def pool_banks(self, dataset_name: str) -> dict[str, Bank]:
        """Training banks of another data set (out-of-domain anchor pool), every encoder."""
        return self.bank_store.pool_banks(dataset_name)

    # -------------------------------------------------------------- anchors (TaskAnchors)

    def anchors(self, seed: int, selector: PluginSpec, excluded: frozenset[str] = frozenset(),
                similarity: PluginSpec | None = None) -> Anchors:
        """The anchor recipe for (seed, selector, held-out encoders), computed once."""
        return self.anchor_store.anchors(seed, selector, excluded, similarity)

    def realise(self, anchors: Anchors, label: str) -> torch.Tensor:
        """The ``k × d`` anchors of encoder ``label``."""
        return self.anchor_store.realise(anchors, label)

    def shared(self, seed: int) -> SharedWork:
        """The memo of work shared by the units of seed ``seed`` (:mod:`relbench.sharing`)."""
        return self.anchor_store.shared(seed)

    # -------------------------------------------------------------- units (TaskUnits)

    def is_done(self, key: UnitKey) -> bool:
        """Whether this unit is stored with its current identity (and not forced)."""
        return self.unit_store.is_done(key)

    def unit(self, key: UnitKey) -> AbstractContextManager[list[ResultRow]]:
        """Collect a unit's rows; store them atomically when the block succeeds, or
        store an error row (and go on) when it raises."""
        return self.unit_store.unit(key)

    # -------------------------------------------------------------- presentation and memory

    def figure_path(self, filename: str) -> Path:
        """Where a figure drawn during the run goes: the results store, since it cannot be
        redrawn from rows; rendering copies it next to the page (``Page.stored_figure``)."""
        path = self.runner.store.figure_path(self.task.name, filename)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def progress(self, iterable=None, desc: str = "", total: int | None = None):
        """A progress bar for the task's own loops."""
        return progress_bar(iterable, desc=f"[{self.task.name}] {desc}", total=total,
                            disable=self.runner.quiet)

    def release(self) -> None:
        """Free what computing the task held (banks, encoders, anchors, shared work); the
        plan and identities are kept, and anything asked again is loaded again."""
        self.anchor_store.release()
        self.encodings.release()
        self.bank_store.release()
