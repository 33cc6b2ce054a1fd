"""The task model: what a validated tasks file is made of, apart from how it is read.

A :class:`Suite` holds :class:`Task` objects; a task names its kind, data set, encoders
and metrics as :class:`PluginSpec` choices, and holds a *grid*: for each axis its task
kind declares (:attr:`relbench.interfaces.TaskKind.axes`, each an
:class:`~relbench.interfaces.Axis`), the list of plugin choices the tasks file gives
under ``grid:``. The core knows no axis by name: stitching's ``selectors``,
``similarities``, ``stitchers`` and ``regularizers`` are the stitching kind's
declaration, and a kind of another package may declare axes of its own.
:mod:`relbench.config` builds these objects from YAML; :mod:`relbench.testing` builds
them in code.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relbench.plugins import provider_of
from relbench.precision import DEFAULT as DEFAULT_PRECISION
from relbench.protocol import EvaluationProtocol


@dataclass
class PluginSpec:
    """One validated plugin choice: which class, with which parameters, shown as which
    label, provided by which distribution (``package``: name and version)."""

    interface: str
    name: str
    params: dict[str, Any]
    label: str
    cls: type | None = None
    package: str = ""

    def build(self):
        """A fresh instance of the plugin with these parameters."""
        return self.cls(**self.params)

    def full_params(self) -> dict[str, Any]:
        """Every parameter, defaults included (what a result row records)."""
        return self.build().params() if self.cls else {}

    def identity(self) -> dict[str, Any]:
        """What identifies this choice in a unit's fingerprint: the class, every
        parameter with defaults resolved (a tunable one the tasks file leaves open by its
        candidates), the providing package and version, and the author's own
        ``version`` of the method. The label is not part of it, nor a parameter the
        class declares as only presentation (``presentation_params``, a task kind's).
        Computed once per spec and parameters (treat the result as read-only)."""
        memo = (self.interface, self.name, json.dumps(self.params, sort_keys=True, default=repr), self.cls,
                self.package)
        if getattr(self, "_identity", (None,))[0] != memo:
            self._identity = (memo, self._identity_now())
        return self._identity[1]

    def _identity_now(self) -> dict[str, Any]:
        cls = self.cls
        shown_only = getattr(cls, "presentation_params", ())
        params = {name: value for name, value in self.full_params().items() if name not in shown_only}
        for name, tunable in getattr(cls, "tunable", {}).items():  # open: chosen on validation data
            if name not in self.params:
                params[name] = {"tuned_over": list(tunable.values), "relative_to": tunable.relative_to}
        return {"class": f"{cls.__module__}:{cls.__qualname__}" if cls else self.name,
                "params": params, "package": self.package or package_of(cls),
                "version": str(getattr(cls, "version", ""))}


@functools.lru_cache(maxsize=None)
def _distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def package_of(cls: type | None) -> str:
    """The installed distribution ("name version") that provides ``cls``'s module, for a
    spec built in code rather than from a tasks file ("" when none does)."""
    if cls is None:
        return ""
    provider = provider_of(cls.__module__)
    if provider:
        return provider
    names = _distributions().get(cls.__module__.split(".")[0], [])
    return f"{names[0]} {importlib.metadata.version(names[0])}" if names else ""


@dataclass
class EncoderSpec(PluginSpec):
    """An encoder choice plus the data-set view it reads."""

    view: str | None = None


@dataclass
class Task:
    """One validated task: its kind, data set, encoders and metrics, the settings of its
    runs, and its ``grid``: for every axis its kind declares
    (:attr:`~relbench.interfaces.TaskKind.axes`), the plugin choices in the tasks file's
    order (``None`` for ``none``), e.g. ``task.grid["selectors"]``."""

    name: str
    kind: PluginSpec
    dataset: PluginSpec
    encoders: list[EncoderSpec]
    grid: dict[str, list[PluginSpec | None]]
    metrics: list[PluginSpec]
    seeds: list[int]
    num_anchors: int
    device: str
    batch_size: int
    description: str = ""
    #: the numeric precision of the task's heavy loops (:mod:`relbench.precision`)
    precision: str = DEFAULT_PRECISION
    file: str = ""
    published: list[dict] = field(default_factory=list)
    claims: list[dict] = field(default_factory=list)
    protocol: EvaluationProtocol = field(default_factory=EvaluationProtocol)

    def specs(self, interface: str) -> list[PluginSpec]:
        """Every plugin choice of the grid of ``interface`` (e.g. ``"selector"``), over
        all axes in their order: what the runner serves whatever the axis is called."""
        return [spec for axis in self.grid.values() for spec in axis
                if isinstance(spec, PluginSpec) and spec.interface == interface]


@dataclass
class Suite:
    """A validated tasks file."""

    file: Path
    tasks: list[Task]
    output: Path
    leaderboards: Path
    cache_dir: Path | None
    device: str
    executor: str = "local"
    #: a smoke suite: its first line and its pages say it is not for citation, and
    #: ``relbench publish`` refuses it
    smoke: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
