"""Test doubles for plugin authors: run a task kind without encoders or a results store.

:class:`TaskRunDouble` implements :class:`relbench.interfaces.TaskRunAPI` over banks you
build in a test; it stores rows exactly as the runner would (:func:`relbench.rows.flat_row`)
and enforces the runner's contract: a unit must be in the kind's plan, and is computed
at most once. :func:`make_task` builds a real :class:`relbench.config.Task` from plugin
classes, without a tasks file::

    task = make_task(MyKind, encoders=["a", "b"], selectors=[spec(RandomAnchors)])
    run = TaskRunDouble(task, banks={"train": {...}, "test": {...}}, dataset=data, tmp=tmp_path)
    run.run()
    df = run.frame()   # what the kind's page() would receive

:func:`check_metric` checks a :class:`~relbench.interfaces.Metric`'s vectorised
``compute_weighted`` against its ``compute``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from relbench.config import EncoderSpec, PluginSpec, Task
from relbench.identity import key_json
from relbench.protocol import EvaluationProtocol
from relbench.interfaces import AnchorContext, Anchors, Bank, DatasetData, Metric, ResultRow, UnitKey
from relbench.rows import display_key, flat_row
from relbench.sharing import SharedWork


def check_metric(metric: Metric, classes: int = 5, samples: int = 40, cells: int = 4, resamples: int = 6,
                 seed: int = 0) -> None:
    """Raise ``AssertionError`` unless ``metric.compute_weighted`` equals
    :meth:`Metric.compute` on the repeated samples, for random class indices (some
    classes missing from the truth, as in a resample) and random bootstrap weights."""
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, classes - 1, samples)
    y_preds = rng.integers(0, classes, (cells, samples))
    weights = rng.multinomial(samples, np.full(samples, 1 / samples), size=resamples)
    weights[0] = 1  # the unweighted score is one of the checks
    got = np.asarray(metric.compute_weighted(y_true, y_preds, weights), dtype=float)
    want = Metric.compute_weighted(metric, y_true, y_preds, weights)
    name = type(metric).__name__
    assert got.shape == want.shape, f"{name}.compute_weighted returned shape {got.shape}, not {want.shape}"
    assert np.allclose(got, want, atol=1e-12), (
        f"{name}.compute_weighted disagrees with compute on the repeated samples by up to "
        f"{np.abs(got - want).max():.3g}")
    assert np.allclose(got[0], [metric.compute(y_true, p) for p in y_preds], atol=1e-12)


def spec(cls: type, interface: str | None = None, label: str | None = None, **params: Any) -> PluginSpec:
    """A validated-looking plugin choice of ``cls`` with ``params``."""
    return PluginSpec(interface or cls.interface, cls.name, params, label or cls.name, cls, "test 0")


def make_task(kind: type | PluginSpec, *, name: str = "t", encoders: list[str] = (), dataset: str = "data",
              selectors: list[PluginSpec] = (), similarities: list[PluginSpec] = (),
              stitchers: list[PluginSpec] = (), regularizers: list[PluginSpec | None] = (None,),
              metrics: list[PluginSpec] = (), seeds: list[int] = (0,), num_anchors: int = 20,
              protocol: EvaluationProtocol = EvaluationProtocol(validation=0.0), **kind_params: Any) -> Task:
    """A :class:`Task` of ``kind`` (a class, with ``kind_params``, or a spec) over encoders
    named by label. The default ``protocol`` has no validation part (nothing tuned); to
    test tuning, pass one with ``validation > 0`` and give the double ``"validation"``
    banks."""
    kind_spec = kind if isinstance(kind, PluginSpec) else spec(kind, "task_kind", **kind_params)
    return Task(name=name, kind=kind_spec, dataset=PluginSpec("dataset", dataset, {}, dataset),
                encoders=[EncoderSpec("encoder", label, {}, label) for label in encoders],
                selectors=list(selectors), similarities=list(similarities), stitchers=list(stitchers),
                regularizers=list(regularizers), metrics=list(metrics), seeds=list(seeds), num_anchors=num_anchors,
                device="cpu", batch_size=64, protocol=protocol)


class TaskRunDouble:
    """A :class:`~relbench.interfaces.TaskRunAPI` over in-memory banks (see the module)."""

    def __init__(self, task: Task, banks: dict[str, dict[str, Bank]], dataset: DatasetData | None = None,
                 tmp: Path | None = None, modality: str = "image"):
        self.task = task
        self.kind = task.kind.build()
        self.kind.validate(task)  # what loading a tasks file would refuse, the double refuses too
        self.device = torch.device("cpu")
        self._banks, self._data, self._tmp, self._modality = banks, dataset, tmp, modality
        self.shared_log: list[tuple[int, SharedWork]] = []
        self._plan = {key_json(display_key(k)) for k in self.kind.plan(task)}
        self._done: set[str] = set()
        #: the displayed keys of the units computed, in order
        self.computed: list[dict] = []
        self.rows: list[dict] = []

    def run(self) -> None:
        """Let the kind compute every unit of its plan."""
        self.kind.run(self)

    def dataset(self) -> DatasetData:
        """The data set given to the double."""
        return self._data

    def banks(self, split: str, seed: int | None = None) -> dict[str, Bank]:
        """The banks given to the double for ``split`` (the same for every seed; give a
        ``"validation"`` entry to test tuning)."""
        if split not in self._banks:
            raise ValueError(f"the test double was given no {split!r} banks (it has {sorted(self._banks)})")
        return self._banks[split]

    def pool_banks(self, dataset_name: str) -> dict[str, Bank]:
        """Out-of-domain pools are not part of the double."""
        raise ValueError(f"the test double has no out-of-domain pool {dataset_name!r}")

    def anchors(self, seed: int, selector: PluginSpec, excluded: frozenset[str] = frozenset(),
                similarity: PluginSpec | None = None) -> Anchors:
        """The selector run on the training banks (those not excluded)."""
        train = self._banks["train"]
        first = next(iter(train.values()))
        labels = None if first.labels is None else first.labels.cpu().numpy()
        ctx = AnchorContext(num_anchors=self.task.num_anchors, seed=seed, ids=list(first.ids), labels=labels,
                            banks={k: v for k, v in train.items() if k not in excluded}, excluded=frozenset(excluded),
                            device=self.device, views={k: "x" for k in train}, pool_banks=self.pool_banks,
                            similarity=similarity.build() if similarity is not None else None)
        return selector.build().select(ctx)

    def realise(self, anchors: Anchors, label: str) -> torch.Tensor:
        """The anchors in encoder ``label``'s training bank."""
        return anchors.realise(self._banks["train"][label])

    def modality(self, label: str) -> str:
        """The modality given to the double (default ``image``)."""
        return self._modality

    def shared(self, seed: int) -> SharedWork:
        """The seed's shared-work memo (one seed at a time, as the runner keeps it);
        :attr:`shared_log` keeps every seed's memo, so tests can read what was reused."""
        if not self.shared_log or self.shared_log[-1][0] != seed:
            self.shared_log.append((seed, SharedWork()))
        return self.shared_log[-1][1]

    def _checked(self, key: UnitKey) -> str:
        k = key_json(display_key(key))
        if k not in self._plan:
            raise AssertionError(f"unit {display_key(key)} is not in the kind's plan()")
        return k

    def is_done(self, key: UnitKey) -> bool:
        """Whether the unit was computed already by this double."""
        return self._checked(key) in self._done

    @contextlib.contextmanager
    def unit(self, key: UnitKey) -> Iterator[list[ResultRow]]:
        """Collect the unit's rows and keep them as the store would (exceptions propagate)."""
        k = self._checked(key)
        if k in self._done:
            raise AssertionError(f"unit {display_key(key)} computed twice")
        rows: list[ResultRow] = []
        yield rows
        self._done.add(k)
        self.computed.append(display_key(key))
        self.rows += [flat_row(self.task, self.kind, r, display_key(key), {}) for r in rows]

    def figure_path(self, filename: str) -> Path:
        """A path under the double's ``tmp`` folder."""
        path = Path(self._tmp) / "figures" / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def progress(self, iterable: Any = None, desc: str = "", total: int | None = None) -> Any:
        """No bar: the iterable itself."""
        return iterable

    def planned(self) -> int:
        """How many units the kind's plan lists."""
        return len(self._plan)

    def frame(self) -> pd.DataFrame:
        """The rows as the results store would load them."""
        return pd.DataFrame(self.rows)
