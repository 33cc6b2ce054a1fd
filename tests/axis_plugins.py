"""A task kind of a third party, with grid axes relbench's core does not name (a test
fixture, registered where a test adds this module to its registry): it imports relbench
only through :mod:`relbench.api`, as a plugin package would."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from relbench.api import Axis, ResultRow, TaskKind, hookimpl


@dataclass
class Probing(TaskKind):
    """Each probe (a similarity) of the grid projects every encoder's test bank onto the
    anchors each anchoring (a selector) of the grid draws; ``none`` probes the absolute
    embeddings. One unit per (seed, anchoring, probe, encoder), scored by the mean feature
    of the test bank (a test fixture)."""

    name: ClassVar[str] = "toy-probing"
    columns: ClassVar[tuple[str, ...]] = ("anchoring", "probe", "encoder")
    axes: ClassVar[dict[str, Axis]] = {"anchorings": Axis("selector"),
                                       "probes": Axis("similarity", allows_none=True)}

    def validate(self, task):
        """The grid names at least one anchoring."""
        if not task.grid["anchorings"]:
            raise ValueError("a probing task needs `grid.anchorings`, e.g. [random].")

    def plan(self, task):
        return [{"seed": seed, "anchoring": anchoring, **({"probe": probe} if probe else {}), "encoder": encoder.label}
                for seed in task.seeds for anchoring in task.grid["anchorings"] for probe in task.grid["probes"]
                for encoder in task.encoders]

    def run(self, run):
        for key in self.plan(run.task):
            if run.is_done(key):
                continue
            with run.unit(key) as rows:
                rows.append(ResultRow("mean_feature", self._score(run, key), "neutral"))

    @staticmethod
    def _score(run, key) -> float:
        """The mean of the unit's probe over the encoder's test bank (its raw embeddings
        without a probe)."""
        label = key["encoder"]
        test = run.banks("test", key["seed"])[label].X
        if "probe" not in key:
            return float(test.mean())
        probe = key["probe"].build()
        probe.fit(run.banks("train", key["seed"])[label].X)
        anchors = run.realise(run.anchors(key["seed"], key["anchoring"]), label)
        return float(probe.project(test, anchors).mean())

    def page(self, results, page):
        return "probes\n"


@hookimpl
def relbench_task_kinds():
    return [Probing]
