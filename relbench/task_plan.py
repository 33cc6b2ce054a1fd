"""A task's plan: its units, what each depends on, and which of them the results store
already holds.

:class:`TaskPlanner` asks the task's kind for its units, computes every unit's identity
(the fingerprint of its inputs, :mod:`relbench.identity`), reads the task's lines in the
results store, and makes the :class:`TaskPlan`: units done, units to compute, and for a
unit whose inputs changed, the stored unit it replaces and the fields that changed.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from relbench.errors import ConfigError, UserError
from relbench.identity import (PROTOCOL_VERSION, SharedInputs, changed_fields, explain, key_json, relabelled,
                               same_plugins)
from relbench.interfaces import USES, UnitKey
from relbench.result_index import TaskLines
from relbench.rows import display_key
from relbench.task_model import EncoderSpec, PluginSpec

if TYPE_CHECKING:
    from relbench.task_run import TaskRun


@dataclass
class PlannedUnit:
    """One unit of a task's plan: its key, displayed columns, inputs and identity."""

    key: UnitKey
    display: dict[str, Any]
    inputs: dict[str, Any]
    id: str


@dataclass
class TaskPlan:
    """A task's units against the results store: what is reused and what is to compute.

    ``stale`` maps a unit to the input fields that changed since the stored unit with
    the same displayed key was computed; units in ``todo`` but not in ``stale`` are new
    (or failed before, or ``--force``).
    """

    task: str
    units: list[PlannedUnit]
    done: set[str]
    stale: dict[str, list[str]]

    @property
    def todo(self) -> list[PlannedUnit]:
        """The units to compute, in plan order."""
        return [u for u in self.units if u.id not in self.done]

    def reasons(self) -> Counter:
        """How many stale units changed for each set of fields (``"a.b, c"`` → count)."""
        return Counter(", ".join(shorten(fields)) for fields in self.stale.values())

    def summary(self) -> dict[str, Any]:
        """Counts for ``--dry-run`` and the run's summary (JSON-able)."""
        todo = self.todo
        return {"task": self.task, "units": len(self.units), "done": len(self.units) - len(todo),
                "to_compute": len(todo), "stale": len(self.stale),
                "stale_reasons": dict(self.reasons())}


def plugin_columns(key: UnitKey) -> set[str]:
    """The columns of a unit key that hold plugins (a spec or a list of specs): their
    displayed values are labels."""
    def plugin(value: Any) -> bool:
        return isinstance(value, PluginSpec) or (isinstance(value, (list, tuple, set, frozenset)) and bool(value)
                                                 and all(isinstance(v, PluginSpec) for v in value))

    return {c for c, v in key.items() if c != USES and plugin(v)}


def shorten(fields: list[str], most: int = 3) -> list[str]:
    """At most ``most`` field paths, then how many more."""
    return fields[:most] + ([f"{len(fields) - most} more"] if len(fields) > most else [])




class TaskPlanner:
    """The plan and the identities of one task run (computed once per run; the store is
    read again when it changed)."""

    def __init__(self, run: TaskRun):
        self.run = run
        self.runner = run.runner
        self.task = run.task
        self.kind = run.kind
        self._encoder_identities: dict[str, dict] = {}
        self._task_inputs: dict | None = None
        self._plan: TaskPlan | None = None
        self._by_display: dict[str, PlannedUnit] = {}

    def encoder_identity(self, spec: EncoderSpec) -> dict[str, Any]:
        """An encoder's identity: its plugin identity, weights fingerprint and view."""
        if spec.label not in self._encoder_identities:
            data = self.run.dataset()
            view = self.run.encoder_view(spec.label)
            weights = spec.build().fingerprint(self.run.encodings.context(spec, data, view))
            self._encoder_identities[spec.label] = {**spec.identity(), "weights": weights, "view": view}
        return self._encoder_identities[spec.label]

    def task_inputs(self) -> dict[str, Any]:
        """What every unit of the task depends on (see :mod:`relbench.identity`)."""
        if self._task_inputs is None:
            t = self.task
            self._task_inputs = {
                "protocol": PROTOCOL_VERSION,
                "kind": t.kind.identity(),
                "dataset": {**t.dataset.identity(), "fingerprint": self.run.dataset().fingerprint},
                "encoders": {e.label: self.encoder_identity(e) for e in t.encoders},
                "metrics": {m.label: m.identity() for m in t.metrics},
                "num_anchors": t.num_anchors,
                "evaluation_protocol": t.protocol.identity(),
                "precision": t.precision,
            }
        return self._task_inputs

    def _describe(self, value: Any, specs: dict[int, tuple[PluginSpec, dict]]) -> Any:
        """A unit-key value as it enters the inputs: a spec by its identity. ``specs``
        keeps each spec's identity (by the spec object) for the units of one plan, which
        name the task's few specs thousands of times."""
        if isinstance(value, EncoderSpec):
            return self.encoder_identity(value)
        if isinstance(value, PluginSpec):
            if id(value) not in specs:  # the entry holds the spec, so its id is not reused while it lives
                specs[id(value)] = (value, value.identity())
            return specs[id(value)][1]
        if isinstance(value, dict):
            return {k: self._describe(v, specs) for k, v in value.items()}
        if isinstance(value, (list, tuple, frozenset, set)):
            return sorted((self._describe(v, specs) for v in value), key=lambda v: json.dumps(v, sort_keys=True,
                                                                                               default=str))
        return value

    def plan(self) -> TaskPlan:
        """The kind's units with their identities, checked against the store."""
        if self._plan is None:
            self._check_sizes()
            base = self.task_inputs()
            lines = self.runner.store.read(self.task.name)
            for warning in self.runner.store.warnings:
                self.runner.say(f"warning: {warning}")
            self.runner.store.warnings.clear()
            units, identity, specs = [], SharedInputs(base, "unit"), {}
            for key in self.kind.plan(self.task):
                unknown = set(key) - set(self.kind.columns) - {"seed", USES}
                if unknown:
                    raise TypeError(f"task kind {self.kind.name!r} planned a unit with columns {sorted(unknown)} it "
                                    f"does not declare in `columns` {self.kind.columns}")
                display = display_key(key)
                described = {k: self._describe(v, specs) for k, v in key.items()}
                unit = PlannedUnit(key, display, {**base, "unit": described}, identity.fingerprint(described))
                units.append(unit)
                self._by_display[key_json(display)] = unit
            if len(self._by_display) != len(units):
                raise TypeError(f"task kind {self.kind.name!r} planned two units with the same key")
            done = set() if self.runner.force else {u.id for u in units if u.id in lines.done}
            stale = {}
            if not self.runner.force:
                for u, old in self._replaced(units, lines):
                    if old.get("inputs"):
                        stale[u.id] = explain(old["inputs"], u.inputs)
            self._plan = TaskPlan(self.task.name, units, done, stale)
        return self._plan

    def _replaced(self, units: list[PlannedUnit], lines: TaskLines) -> list[tuple[PlannedUnit, dict]]:
        """Each unit without a stored line of its identity, with the stored line it
        replaces: the newest line with its displayed key; else, of the lines no unit of
        the plan shows whose keys differ from its own only in the labels of plugins of
        the same classes (a grid plugin's edited parameters change its default label),
        the one with the fewest changed inputs, the newest of those."""
        new = [u for u in units if u.id not in lines.units]
        if not new:  # every unit is stored with its identity (a no-op's case)
            return []
        same = {u.id: lines.by_display.get(key_json(u.display)) for u in new}
        orphans = []
        if None in same.values():
            shown = {key_json(u.display) for u in units}
            orphans = [(json.loads(k), e) for k, e in lines.by_display.items() if k not in shown]
        matches = {u.id: [same[u.id]] if same[u.id] is not None else [
            e for display, e in orphans if relabelled(display, u.display, plugin_columns(u.key))] for u in new}
        entries = list({e.offset: e for found in matches.values() for e in found}.values())
        fetched = self.runner.store.fetch(self.task.name, entries)
        if len(fetched) != len(entries):  # damage was found and set aside: the lines moved
            return []
        line_at = {e.offset: line for e, line in zip(entries, fetched)}
        out = []
        for u in new:
            olds = [line_at[e.offset] for e in matches[u.id]]
            if same[u.id] is None:  # matched by its plugins' classes, not by its key
                olds = [old for old in olds if isinstance(old.get("inputs"), dict) and same_plugins(
                    old["inputs"].get("unit", {}), u.inputs["unit"], plugin_columns(u.key))]
            if olds:
                out.append((u, min(olds, key=lambda old: (len(changed_fields(old.get("inputs"), u.inputs)),
                                                          -old["time"]))))
        return out

    def _check_sizes(self) -> None:
        """User errors that only the data reveal, before any work."""
        if not self.task.specs("selector"):
            return
        fit = min(len(self.run.bank_store.draw(seed).fit) for seed in self.task.seeds)
        if self.task.num_anchors > fit:
            raise ConfigError(f"task {self.task.name!r}: num_anchors is {self.task.num_anchors} but each seed fits on "
                              f"only {fit} training samples of data set {self.task.dataset.label!r} (its training "
                              f"draw less the validation part) to draw anchors from. Lower `num_anchors`, or raise "
                              f"`protocol.train_size` or the data set's training size.")

    def restrict(self, units: set[str]) -> TaskPlan:
        """The plan with only ``units`` left to compute, every other unit counting as
        done: how an executor that splits a task among workers (:mod:`relbench.ray_executor`)
        gives one worker its share. The kind's loop then skips the rest as it skips
        stored units. A unit id this plan does not list is a :class:`UserError`: the
        units were planned from other inputs than this process's (another tasks file,
        data or plugin code), and none of them may count as done."""
        plan = self.plan()
        unknown = units - {u.id for u in plan.units}
        if unknown:
            shown = ", ".join(sorted(unknown)[:3]) + (" …" if len(unknown) > 3 else "")
            raise UserError(f"task {self.task.name!r}: {len(unknown)} of the {len(units)} units to compute here are "
                            f"not in this process's plan of the task ({shown}): they were planned from another "
                            f"tasks file, other data or other plugin code. Use the same relbench, plugins, tasks "
                            f"file and data everywhere the task runs.")
        plan.done = {u.id for u in plan.units if u.id not in units}
        return plan

    def replan(self) -> TaskPlan:
        """The plan again, against the store as it is now (another run may have added
        units); identities are kept, so this costs a read of what changed."""
        stale = self._plan is None or self.runner.store.changed(self.task.name)
        if stale:
            self._plan = None
            self._by_display.clear()
        return self.plan()

    def planned(self, key: UnitKey) -> PlannedUnit:
        """The planned unit of ``key``; a key the kind's plan does not list is a bug of the kind."""
        self.plan()
        unit = self._by_display.get(key_json(display_key(key)))
        if unit is None:
            raise TypeError(f"task kind {self.kind.name!r} computed unit {display_key(key)}, which its plan() does "
                            f"not list; a kind's plan must be exact.")
        return unit
