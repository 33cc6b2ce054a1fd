"""The runner: tasks → cached banks → task kinds → results store.

:class:`Runner` walks the validated suite; for each task it builds a :class:`TaskRun`,
the service object a :class:`~relbench.interfaces.TaskKind` works through: cached
embeddings per (encoder, split), anchors per (seed, selector, held-out set), a results
sink that skips finished units, figure paths and progress bars. A task that fails on a
user error (e.g. an encoder returning NaN) is recorded and the run goes on to the next.
"""

from __future__ import annotations

import contextlib
import copy
import fnmatch
import functools
import json
import math
import os
import sys
import time
import traceback
import uuid
from collections.abc import Iterator
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lazy_loader
import numpy as np

from relbench import __version__
from relbench.cache import RESERVED_FIELDS, EmbeddingCache, identity_key
from relbench.descriptions import Descriptions, check_same, loaded
from relbench.identity import (PROTOCOL_VERSION, changed_fields, explain, fingerprint, key_json, relabelled,
                               same_plugins)
from relbench.errors import BadEmbeddings, ConfigError, OutputNotWritable, UserError
from relbench.interfaces import (
    AnchorContext,
    Anchors,
    Bank,
    DatasetData,
    EncoderContext,
    USES,
    ResultRow,
    UnitKey,
)
from relbench.console import progress_bar
from relbench.plugins import Registry
from relbench.precision import running_at
from relbench.progress import SuiteBar
from relbench.protocol import Draw, draw
from relbench.results import ResultStore, TaskLines, environment, git_revision
from relbench.sharing import SharedWork, learned_anchors
from relbench.task_model import EncoderSpec, PluginSpec, Suite, Task
from relbench.training import NonFinite
from relbench.rows import TASK_ERROR, display_key, flat_row
from relbench.run_summary import RunSummary, merged

torch = lazy_loader.load("torch")

ID_VIEW = "id"  # pseudo-view whose items are the sample ids (for precomputed embeddings)


def check_device(name: str) -> None:
    """Stop a run that asks for ``cuda`` where no GPU is visible (a user error), before
    any work. ``auto`` and ``cpu`` need no check, so planning them imports no torch."""
    if name.startswith("cuda"):
        resolve_device(name)


def resolve_device(name: str) -> torch.device:
    """``auto`` → CUDA when available, else CPU; ``cuda`` without a GPU is a user error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} was requested but no CUDA GPU is visible; use `device: auto` or `cpu`.")
    return torch.device(name)


def check_finite(X: torch.Tensor, encoder: str, split: str) -> None:
    """Raise :class:`BadEmbeddings` naming the encoder and rows if ``X`` has NaN/inf."""
    if X.ndim != 2:
        raise BadEmbeddings(f"encoder {encoder!r} returned a tensor of shape {tuple(X.shape)} for split "
                            f"{split!r}; an encoder must return n × d.")
    bad = ~torch.isfinite(X).all(dim=1)
    if bad.any():
        rows = torch.nonzero(bad).flatten().tolist()
        shown = ", ".join(map(str, rows[:10])) + (" …" if len(rows) > 10 else "")
        raise BadEmbeddings(
            f"encoder {encoder!r} produced NaN or inf embeddings for {len(rows)} of {len(X)} samples of split "
            f"{split!r} (rows {shown}). Check the encoder's weights and input preprocessing; nothing was cached "
            f"for it, and results of other encoders and tasks are kept."
        )


@dataclass(frozen=True)
class BankNeed:
    """One bank a task reads: encoder ``label``'s embeddings of ``split`` of the task's
    data set, or of anchor-pool data set ``pool``; ``key`` and ``identity`` are its
    embedding-cache entry's, ``n`` its number of rows."""

    label: str
    split: str
    pool: str | None
    key: str
    identity: dict
    n: int


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
        return Counter(", ".join(_shorten(fields)) for fields in self.stale.values())

    def summary(self) -> dict[str, Any]:
        """Counts for ``--dry-run`` and the run's summary (JSON-able)."""
        todo = self.todo
        return {"task": self.task, "units": len(self.units), "done": len(self.units) - len(todo),
                "to_compute": len(todo), "stale": len(self.stale),
                "stale_reasons": dict(self.reasons())}


def _plugin_columns(key: UnitKey) -> set[str]:
    """The columns of a unit key that hold plugins (a spec or a list of specs): their
    displayed values are labels."""
    def plugin(value: Any) -> bool:
        return isinstance(value, PluginSpec) or (isinstance(value, (list, tuple, set, frozenset)) and bool(value)
                                                 and all(isinstance(v, PluginSpec) for v in value))

    return {c for c, v in key.items() if c != USES and plugin(v)}


def _shorten(fields: list[str], most: int = 3) -> list[str]:
    """At most ``most`` field paths, then how many more."""
    return fields[:most] + ([f"{len(fields) - most} more"] if len(fields) > most else [])


@dataclass
class RunStats:
    """Counters the runner reports at the end."""

    encoded: int = 0
    cached: int = 0
    units_done: int = 0
    #: units of ``units_done`` stored with an error row (the whole unit or one of its cells failed)
    units_failed: int = 0
    units_skipped: int = 0
    recomputed: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    not_achievable: int = 0
    #: shared work (:mod:`relbench.sharing`) by what it is: computed once, reused after
    shared_computed: Counter = field(default_factory=Counter)
    shared_reused: Counter = field(default_factory=Counter)


class TaskRun:
    """The services a task kind uses while evaluating one task (the runner's
    :class:`~relbench.interfaces.TaskRunAPI`), and the task's plan and identities."""

    def __init__(self, runner: Runner, task: Task):
        self.runner = runner
        self.task = task
        self.kind = task.kind.build()
        self._banks: dict[str, dict[str, Bank]] = {}
        self._bank_seed: int | None = None  #: the seed whose draws ``_banks`` holds
        #: banks encoded ahead of being asked for (:meth:`_encode_ahead`), by cache key
        self._ahead: dict[str, tuple[torch.Tensor, dict]] | None = None
        self._encoders: dict[str, Any] = {}
        self._encoder_identities: dict[str, dict] = {}
        self._anchors: dict[str, Anchors] = {}
        self._draws: dict[int, Draw] = {}
        self._pools: dict[str, dict[str, Bank]] = {}
        self._pool_data_sets: dict[str, DatasetData] = {}
        self._shared: tuple[int, SharedWork] | None = None
        self._task_inputs: dict | None = None
        self._plan: TaskPlan | None = None
        self._by_display: dict[str, PlannedUnit] = {}
        #: why the task cannot be planned here (a missing asset …), for ``--dry-run``
        self.unavailable: str = ""

    @functools.cached_property
    def device(self) -> torch.device:
        """Where the task computes (:func:`resolve_device`), resolved when first used, so
        that a run which only plans never imports torch to ask for a GPU."""
        return resolve_device(self.task.device)

    # -------------------------------------------------------------- identity and plan

    def encoder_identity(self, spec: EncoderSpec) -> dict[str, Any]:
        """An encoder's identity: its plugin identity, weights fingerprint and view."""
        if spec.label not in self._encoder_identities:
            data = self.dataset()
            view = self.encoder_view(spec.label)
            weights = spec.build().fingerprint(self._encoder_ctx(spec, data, view))
            self._encoder_identities[spec.label] = {**spec.identity(), "weights": weights, "view": view}
        return self._encoder_identities[spec.label]

    def task_inputs(self) -> dict[str, Any]:
        """What every unit of the task depends on (see :mod:`relbench.identity`)."""
        if self._task_inputs is None:
            t = self.task
            self._task_inputs = {
                "protocol": PROTOCOL_VERSION,
                "kind": t.kind.identity(),
                "dataset": {**t.dataset.identity(), "fingerprint": self.dataset().fingerprint},
                "encoders": {e.label: self.encoder_identity(e) for e in t.encoders},
                "metrics": {m.label: m.identity() for m in t.metrics},
                "num_anchors": t.num_anchors,
                "evaluation_protocol": t.protocol.identity(),
                "precision": t.precision,
            }
        return self._task_inputs

    def _describe(self, value: Any) -> Any:
        """A unit-key value as it enters the inputs: a spec by its identity."""
        if isinstance(value, EncoderSpec):
            return self.encoder_identity(value)
        if isinstance(value, PluginSpec):
            return value.identity()
        if isinstance(value, dict):
            return {k: self._describe(v) for k, v in value.items()}
        if isinstance(value, (list, tuple, frozenset, set)):
            return sorted((self._describe(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True,
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
            units = []
            for key in self.kind.plan(self.task):
                unknown = set(key) - set(self.kind.columns) - {"seed", USES}
                if unknown:
                    raise TypeError(f"task kind {self.kind.name!r} planned a unit with columns {sorted(unknown)} it "
                                    f"does not declare in `columns` {self.kind.columns}")
                display = display_key(key)
                inputs = {**base, "unit": {k: self._describe(v) for k, v in key.items()}}
                unit = PlannedUnit(key, display, inputs, fingerprint(inputs))
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
        same = {u.id: lines.by_display.get(key_json(u.display)) for u in new}
        shown = {key_json(u.display) for u in units}
        orphans = [(json.loads(k), e) for k, e in lines.by_display.items() if k not in shown] \
            if None in same.values() else []
        matches = {u.id: [same[u.id]] if same[u.id] is not None else [
            e for display, e in orphans if relabelled(display, u.display, _plugin_columns(u.key))] for u in new}
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
                    old["inputs"].get("unit", {}), u.inputs["unit"], _plugin_columns(u.key))]
            if olds:
                out.append((u, min(olds, key=lambda old: (len(changed_fields(old.get("inputs"), u.inputs)),
                                                          -old["time"]))))
        return out

    def _check_sizes(self) -> None:
        """User errors that only the data reveal, before any work."""
        fit = min(len(self.draw(seed).fit) for seed in self.task.seeds)
        if self.task.specs("selector") and self.task.num_anchors > fit:
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

    def _planned(self, key: UnitKey) -> PlannedUnit:
        self.plan()
        unit = self._by_display.get(key_json(display_key(key)))
        if unit is None:
            raise TypeError(f"task kind {self.kind.name!r} computed unit {display_key(key)}, which its plan() does "
                            f"not list; a kind's plan must be exact.")
        return unit

    # -------------------------------------------------------------- data and embeddings

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
        spec = self._spec(label)
        data = self.dataset()
        view = spec.view or data.views[0]
        if view != ID_VIEW and view not in data.view_modalities:
            raise ConfigError(f"task {self.task.name!r}, encoder {label!r}: view {view!r} is not a view of data set "
                              f"{self.task.dataset.label!r}; it has {data.views}.")
        return view

    def modality(self, label: str) -> str:
        """Modality of the view an encoder reads."""
        view = self.encoder_view(label)
        return "id" if view == ID_VIEW else self.dataset().view_modalities[view]

    def _spec(self, label: str) -> EncoderSpec:
        for spec in self.task.encoders:
            if spec.label == label:
                return spec
        raise KeyError(label)

    def _encoder_ctx(self, spec: EncoderSpec, data: DatasetData, view: str) -> EncoderContext:
        return EncoderContext(device=lambda: self.device, view=view, dataset=data, train=data.splits["train"],
                              cache_dir=self.runner.cache.root, batch_size=self.task.batch_size)

    def _bank_identity(self, spec: EncoderSpec, encoder, data: DatasetData, split: str, view: str) -> dict:
        """What a bank's cache entry is keyed by: the encoder, its parameters and weights
        fingerprint, the data set's fingerprint, the split and the view."""
        ctx = self._encoder_ctx(spec, data, view)
        return {"encoder": spec.name, "params": encoder.params(), "weights": encoder.fingerprint(ctx),
                "plugin": spec.package, "data": data.fingerprint, "split": split, "view": view,
                "relbench": __version__}

    def bank_needs(self) -> list[BankNeed]:
        """Every bank the task reads: each encoder's train and test pools, then the
        training banks of the data sets its selectors draw anchors from
        (:meth:`~relbench.interfaces.AnchorSelector.pools`). Loads no items; an executor
        encodes them ahead of the units (:mod:`relbench.ray_executor`)."""
        return [*self._needs(None, ("train", "test")), *self._pool_needs()]

    def _pool_needs(self) -> list[BankNeed]:
        """The training banks of the anchor pools the task's selectors declare."""
        pools = dict.fromkeys(name for sel in self.task.specs("selector") for name in sel.build().pools())
        return [need for pool in pools for need in self._needs(pool, ("train",))]

    def _needs(self, pool: str | None, splits: tuple[str, ...]) -> list[BankNeed]:
        """The banks of ``splits`` of the task's data set (``pool`` None) or of anchor pool
        ``pool``, split by split, encoder by encoder."""
        needs = []
        for split in splits:
            for spec in self.task.encoders:
                data, view = self._source(spec, pool)
                encoder = self._encoders.get(spec.label) or spec.build()
                identity = self._bank_identity(spec, encoder, data, split, view)
                needs.append(BankNeed(spec.label, split, pool, identity_key(identity), identity,
                                      len(data.splits[split])))
        return needs

    def _source(self, spec: EncoderSpec, pool: str | None) -> tuple[DatasetData, str]:
        """The data set an encoder reads for the task (``pool`` None) or anchor pool
        ``pool``, and the view it reads there."""
        if pool is None:
            return self.dataset(), self.encoder_view(spec.label)
        data = self._pool_data(pool)
        return data, self._pool_view(spec, data, pool)

    def bank_entry(self, need: BankNeed) -> tuple[torch.Tensor, dict]:
        """The embeddings of ``need`` and their cache metadata, read from the embedding
        cache or encoded (and cached) now."""
        spec = self._spec(need.label)
        return self._entry(spec, *self._source(spec, need.pool), need.split)

    def cached_entry(self, need: BankNeed) -> tuple[torch.Tensor, dict] | None:
        """The embeddings of ``need`` and their metadata when the cache holds them, else None."""
        hit = self.runner.cache.get(need.key, need.identity)
        for warning in self.runner.cache.warnings:
            self.runner.say(f"warning: {warning}")
        self.runner.cache.warnings.clear()
        if hit is None or hit[1].get("n") != need.n:
            return None
        return hit[0], {k: v for k, v in hit[1].items() if k not in RESERVED_FIELDS}

    def _entry(self, spec: EncoderSpec, data: DatasetData, view: str, split: str) -> tuple[torch.Tensor, dict]:
        encoder = self._encoders.get(spec.label) or spec.build()
        modalities = getattr(encoder, "modalities", ())
        modality = ID_VIEW if view == ID_VIEW else data.view_modalities[view]
        if modalities and modality not in modalities:
            raise ConfigError(f"task {self.task.name!r}: encoder {spec.label!r} ({spec.name}) reads "
                              f"{'/'.join(modalities)} but view {view!r} of {data.name!r} is {modality}.")
        identity = self._bank_identity(spec, encoder, data, split, view)
        need = BankNeed(spec.label, split, None, identity_key(identity), identity, len(data.splits[split]))
        if self._ahead and need.key in self._ahead:
            return self._ahead.pop(need.key)
        hit = self.cached_entry(need)
        if hit is not None:
            self.runner.stats.cached += need.key not in self.runner.cache.held  # held: counted where it was read
            return hit
        data = loaded(data)  # a described data set is loaded now: its items are read
        ctx = self._encoder_ctx(spec, data, view)
        sp = data.splits[split]
        if spec.label not in self._encoders:
            encoder.setup(ctx)
            self._encoders[spec.label] = encoder
        items = sp.ids if view == ID_VIEW else sp.views[view]
        t0 = time.perf_counter()
        X = encoder.encode(items, ctx)
        X = torch.as_tensor(X).to(torch.float32)
        if X.ndim == 2 and X.shape[0] != len(sp):
            raise BadEmbeddings(f"encoder {spec.label!r} returned {X.shape[0]} rows for {len(sp)} samples of "
                                f"split {split!r}; an encoder must return one row per item.")
        check_finite(X, spec.label, split)
        dt = time.perf_counter() - t0
        self.runner.say(f"encoded {data.name}/{split}/{view} with {spec.label}: {len(sp)} samples, "
                        f"{X.shape[1]}-d, {len(sp) / max(dt, 1e-9):.1f} samples/s")
        meta = {**identity, "n": len(sp), "label": spec.label, "dataset": data.name, "seconds": dt,
                "backend": getattr(encoder, "backend_used", None), "report": encoder.report()}
        self.runner.cache.put(need.key, X, meta)
        self.runner.stats.encoded += 1
        return X, meta

    def _embed(self, spec: EncoderSpec, data: DatasetData, view: str, split: str) -> Bank:
        X, meta = self._entry(spec, data, view, split)
        sp = data.splits[split]
        labels = None if sp.labels is None else torch.as_tensor(np.asarray(sp.labels), dtype=torch.long)
        return Bank(encoder=spec.label, split=split, X=X.to(self.device), ids=list(sp.ids),
                    labels=None if labels is None else labels.to(self.device), report=meta.get("report") or {})

    def draw(self, seed: int) -> Draw:
        """The samples seed ``seed`` draws under the task's protocol (computed once)."""
        if seed not in self._draws:
            data = self.dataset()
            train, test = data.splits["train"], data.splits["test"]
            self._draws[seed] = draw(self.task.protocol, train.labels, len(train), test.labels, len(test), seed)
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
            data = self.dataset()
            if split not in data.splits:
                raise ConfigError(f"data set {data.name!r} has no split {split!r}.")
            self._encode_ahead()
            self._banks[split] = {
                spec.label: self._embed(spec, data, self.encoder_view(spec.label), split)
                for spec in self.task.encoders
            }
            dims = {lbl: b.dim for lbl, b in self._banks[split].items()}
            self.runner.say(f"[{self.task.name}] {split}: " + ", ".join(f"{k} {v}-d" for k, v in dims.items()))
        return self._banks[split]

    def _encode_ahead(self) -> None:
        """Encode every bank of :meth:`bank_needs` that the cache lacks, encoder by
        encoder, and free each encoder (:meth:`~relbench.interfaces.Encoder.release`,
        then the runner's reference) once its banks are encoded, so that one encoder's
        weights and session are resident at a time. Encoded split by split, as the kinds
        ask for them, every encoder of the task stayed loaded until its test split was
        done. Runs once per task run, when a bank is first asked for; the banks are
        kept until asked for (a kind that reads only some of them costs the encoding of
        the others, as on Ray, which encodes :meth:`bank_needs` too). An anchor pool
        that cannot be read or encoded is left to the units that draw from it, so that
        its error stays theirs, as when pools were encoded on demand."""
        if self._ahead is not None:
            return
        self._ahead = {}
        try:
            pools = self._pool_needs()
        except Exception:  # noqa: BLE001 - reported by the units that draw from the pool
            pools = []
        unique: dict[str, BankNeed] = {}  # each bank once: a pool may be the task's own data
        for need in [*self._needs(None, ("train", "test")), *pools]:
            unique.setdefault(need.key, need)
        missing = [need for need in unique.values() if not self.runner.cache.has(need.key)]
        for label in dict.fromkeys(need.label for need in missing):
            for need in missing:
                if need.label != label:
                    continue
                try:
                    self._ahead[need.key] = self.bank_entry(need)
                except Exception:  # noqa: BLE001
                    if need.pool is None:
                        raise
            getattr(self._encoders.pop(label, None), "release", lambda: None)()  # no reference is left

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
            self._encode_ahead()
            self._pools[dataset_name] = {
                spec.label: self._embed(spec, *self._source(spec, dataset_name), "train")
                for spec in self.task.encoders}
        return self._pools[dataset_name]

    def _pool_data(self, dataset_name: str) -> DatasetData:
        """Another data set, by plugin name, with its default parameters (loaded once per run)."""
        if dataset_name not in self._pool_data_sets:
            cls = self.runner.registry.get("dataset", dataset_name, where=f"task {self.task.name!r} anchor pool")
            self._pool_data_sets[dataset_name] = cls().load()
        return self._pool_data_sets[dataset_name]

    def _pool_view(self, spec: EncoderSpec, data: DatasetData, dataset_name: str) -> str:
        """The view encoder ``spec`` reads in anchor pool ``dataset_name``: its own view there."""
        view = self.encoder_view(spec.label)
        if view not in data.view_modalities:
            raise ConfigError(
                f"task {self.task.name!r}: out-of-domain anchor pool {dataset_name!r} has no view {view!r} "
                f"(read by encoder {spec.label!r}); it has {data.views}. Use a pool with that view.")
        return view

    def shared(self, seed: int) -> SharedWork:
        """The memo of work shared by the units of seed ``seed`` (see
        :mod:`relbench.sharing`); asking for another seed drops the previous seed's, after
        adding its counts to the run's statistics."""
        if self._shared is None or self._shared[0] != seed:
            self.drop_shared()
            self._shared = (seed, SharedWork())
        return self._shared[1]

    def release(self) -> None:
        """Free what computing the task held (banks, encoders, anchors, shared work); the
        plan and identities are kept, and anything asked again is loaded again."""
        self.drop_shared()
        for encoder in self._encoders.values():
            getattr(encoder, "release", lambda: None)()
        self._banks.clear()
        self._bank_seed = None
        self._ahead = None
        self._encoders.clear()
        self._anchors.clear()
        self._pools.clear()
        self._pool_data_sets.clear()

    def drop_shared(self) -> None:
        """Free the shared work, adding what it counted to the run's statistics."""
        if self._shared is not None:
            work = self._shared[1]
            self.runner.stats.shared_computed.update(work.computed)
            self.runner.stats.shared_reused.update(work.reused)
            self._shared = None

    # -------------------------------------------------------------- anchors

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
            train = self.banks("train", seed)
            fit = next(iter(train.values()))
            labels = None if fit.labels is None else fit.labels.cpu().numpy()
            ctx = AnchorContext(
                num_anchors=self.task.num_anchors, seed=seed, ids=list(fit.ids), labels=labels,
                banks={k: v for k, v in train.items() if k not in excluded}, excluded=excluded,
                device=self.device, views={e.label: self.encoder_view(e.label) for e in self.task.encoders},
                pool_banks=self.pool_banks, similarity=similarity.build() if similarity else None)
            self._anchors[key] = learned_anchors(self, sel, ctx, selector, similarity) if sel.learns_from_banks \
                else sel.select(ctx)
        return self._anchors[key]

    def realise(self, anchors: Anchors, label: str) -> torch.Tensor:
        """The ``k × d`` anchors of encoder ``label``."""
        pool = self.banks("train") if anchors.pool == "train" else self.pool_banks(anchors.pool)
        return anchors.realise(pool[label])

    # -------------------------------------------------------------- results

    def is_done(self, key: UnitKey) -> bool:
        """Whether this unit is stored with its current identity (and not forced)."""
        return self._planned(key).id in self.plan().done

    @contextlib.contextmanager
    def unit(self, key: UnitKey) -> Iterator[list[ResultRow]]:
        """Collect a unit's rows; store them atomically when the block succeeds, or
        store an error row (and go on) when it raises."""
        planned = self._planned(key)
        rows: list[ResultRow] = []
        t0 = time.perf_counter()
        try:
            yield rows
            bad = next((r for r in rows if r.status == "ok" and (r.value is None or not math.isfinite(r.value))), None)
            if bad is not None:
                raise NonFinite(f"task kind {self.kind.name!r} produced {bad.value} for {bad.metric!r} "
                                f"(cell {bad.cell or planned.display}); a non-finite number is never scored")
            self.runner.stats.failures += [  # rows the kind failed alone (a faulty metric, one pair)
                f"{self.task.name} {planned.display} {r.cell}: {(r.error or 'error').splitlines()[0]}"
                for r in rows if r.status == "error"]
        except KeyboardInterrupt:
            raise
        except BadEmbeddings:
            raise
        except (Exception, SystemExit) as exc:  # a failing combination (even one calling sys.exit) is data
            if isinstance(exc, SystemExit):
                exc = RuntimeError(f"a plugin called sys.exit({exc.code!r}) while computing this unit")
            message = f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, UserError):
                message += "\n" + "".join(traceback.format_exception(exc)[-3:])
            rows[:] = [ResultRow(metric="error", value=None, direction="neutral", status="error", error=message)]
            self.runner.stats.failures.append(f"{self.task.name} {planned.display}: {type(exc).__name__}: {exc}")
        seconds = time.perf_counter() - t0
        stored = [self.row(r, planned, seconds) for r in rows]
        self.runner.store.append(self.task.name, planned.id, stored, self.runner.run_id,
                                 key=planned.display, inputs=planned.inputs)
        plan = self.plan()
        plan.done.add(planned.id)
        self.runner.stats.units_done += 1
        self.runner.stats.units_failed += any(r.status == "error" for r in rows)
        self.runner.bar.advance()
        if planned.id in plan.stale:
            self.runner.stats.recomputed[", ".join(_shorten(plan.stale[planned.id]))] += 1
        self.runner.stats.not_achievable += sum(r.status == "not_achievable" for r in rows)

    def row(self, r: ResultRow, unit: PlannedUnit, seconds: float) -> dict:
        """A stored result row: the unit's columns and the row's cell flat, its number
        with its direction, and where it came from."""
        return flat_row(self.task, self.kind, r, unit.display, unit.inputs) | {
            "relbench": __version__, "git": git_revision(), "device": str(self.device),
            "precision": self.task.precision,
            "environment": environment(), "seconds": seconds, "command": self.runner.command}

    # -------------------------------------------------------------- presentation

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


class Runner:
    """Runs every task of a suite, resuming from the results store."""

    def __init__(self, suite: Suite, registry: Registry, *, force: bool = False, quiet: bool = False,
                 only: list[str] | None = None, output: Path | None = None, command: str = ""):
        self.suite = suite
        self.registry = registry
        self.force = force
        self.quiet = quiet
        self.only = only
        self.store = ResultStore(output or suite.output)
        if suite.cache_dir is not None:
            # data sets and word tables keep their extractions under the same folder; they
            # (and --jobs workers) read it from the environment, like the embedding cache
            os.environ["RELBENCH_CACHE_DIR"] = str(suite.cache_dir)
        self.cache = EmbeddingCache(suite.cache_dir)
        self.descriptions = Descriptions(self.cache.root / "descriptions")
        self.stats = RunStats()
        #: per task, what this run did to it (:meth:`summary`): tasks computed, or failed in planning
        self.summaries: dict[str, RunSummary] = {}
        self._scheduled: list[TaskRun] = []  # the tasks :meth:`run` planned, in order
        self.run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
        self._datasets: dict[str, DatasetData] = {}
        self._task_runs: dict[str, TaskRun] = {}  # planned tasks, kept for the pages drawn after the run
        #: the suite-level bar (:class:`relbench.progress.SuiteBar`), made by :meth:`run`
        self.bar = SuiteBar(0, quiet=True)
        self.command = command or "relbench run " + str(suite.file)

    def say(self, message: str) -> None:
        """Print a progress message (to stderr, above the bars)."""
        if not self.quiet:
            from tqdm.auto import tqdm

            tqdm.write(message, file=sys.stderr)

    def tasks(self) -> list[Task]:
        """The tasks selected by ``only`` (names or glob patterns such as ``fashion-*``;
        all by default), in the tasks file's order."""
        if not self.only:
            return self.suite.tasks
        names = [t.name for t in self.suite.tasks]
        for pattern in self.only:
            if not fnmatch.filter(names, pattern):
                from relbench.plugins import did_you_mean

                raise ConfigError(f"--task {pattern!r} matches no task of {self.suite.file}; "
                                  f"{did_you_mean(pattern, names)}")
        return [t for t in self.suite.tasks if any(fnmatch.fnmatchcase(t.name, p) for p in self.only)]

    def dataset(self, spec: PluginSpec) -> DatasetData:
        """A data set, loaded once per run whatever the number of tasks that read it. A
        data set that declares its sources is described instead while they are unchanged
        (:mod:`relbench.descriptions`): planning reads no image or text, and the data are
        loaded the first time a view is read."""
        key = json.dumps(spec.identity(), sort_keys=True, default=str)
        if key not in self._datasets:
            described = self.descriptions.get(key, spec.cls, functools.cache(lambda: self._load(spec, key, described)))
            self._datasets[key] = described or self._load(spec, key, None)
        return self._datasets[key]

    def _load(self, spec: PluginSpec, key: str, described: DatasetData | None) -> DatasetData:
        data = spec.build().load()
        self.descriptions.put(key, spec.cls, data)
        return data if described is None else check_same(described, data)

    def plans(self, lenient: bool = False) -> list[TaskRun]:
        """A :class:`TaskRun` per selected task with its plan made: every identity is
        computed and every user error that the data reveal (a missing asset, too many
        anchors, a view the data set lacks) is raised here, before any work. A task
        whose planning fails on a bug (a plugin raising anything else) is recorded as a
        failed task and left out; the others go on. ``lenient`` (``--dry-run``) keeps a
        task whose user error stops its planning, with the message in ``unavailable``."""
        runs = []
        for task in self.tasks():
            check_device(task.device)  # `device: cuda` without a GPU stops the run before any work
            task_run = self._task_runs.get(task.name) or TaskRun(self, task)
            try:
                task_run.replan()  # identities are computed once per run; the store is read again if it changed
                self._task_runs[task.name] = task_run
            except UserError as exc:
                if not lenient:
                    raise
                task_run.unavailable = str(exc)
            except Exception as exc:  # noqa: BLE001 - a plugin's bug fails its task, not the run
                self.summaries[task.name] = RunSummary(task.name, failures=(self.task_failed(task_run, exc),))
                continue
            runs.append(task_run)
        return runs

    def clear_task_error(self, task: Task) -> None:
        """A task that now plans and finishes clears the error an earlier run recorded."""
        lines = self.store.read(task.name)
        if TASK_ERROR in lines.units and TASK_ERROR not in lines.done:
            self.store.append(task.name, TASK_ERROR, [], self.run_id)

    def task_failed(self, task_run: TaskRun, exc: Exception) -> str:
        """Record a whole task's failure (once per run): message, summary line, error row;
        return the summary line."""
        task = task_run.task
        message = f"{type(exc).__name__}: {exc}" if not isinstance(exc, UserError) else str(exc)
        if not isinstance(exc, UserError):
            message += "\n" + "".join(traceback.format_exception(exc)[-4:])
        line = f"{task.name}: {message.splitlines()[0]}"
        if line in self.stats.failures:
            return line
        self.stats.failures.append(line)
        self.say(f"task {task.name} failed: {message}")
        row = ResultRow(metric="error", value=None, direction="neutral", status="error", error=message)
        self.store.append(task.name, TASK_ERROR, [flat_row(task, task_run.kind, row, {}, {})], self.run_id)
        return line

    def run(self) -> RunStats:
        """Plan every selected task, then compute what is not done; return the counters.

        Units stored with their current identity are reused; a task with nothing to do
        loads no embeddings. A task that raises is recorded as a task-level error row
        and the run goes on to the next task; the units it finished before failing are
        kept. A user error (bad data, missing asset) is stored as its message; anything
        else also keeps the end of its traceback, since it points at a bug in a plugin
        or in relbench. The task-level error is cleared when a later run finishes the task.

        Runs sharing a results store share the work: a task is computed under a lock
        (:meth:`ResultStore.lock`, released by the system when its holder dies, so never
        stale); a task another run holds is taken up after the others, once that run is
        done with it, and only its units still missing are computed.
        """
        plans = self.plans()  # user errors before anything is written
        self._scheduled = plans
        self.store.ensure_writable()
        self.cache.ensure_writable()
        self.bar = SuiteBar(sum(len(tr.plan().todo) for tr in plans), self.quiet)
        try:
            self._run(plans)
        finally:
            self.bar.close()
        return self.stats

    def _run(self, plans: list[TaskRun]) -> None:
        waiting = []
        for task_run in plans:
            with self.store.lock(task_run.task.name, wait=False) as held:
                if held:
                    task_run.replan()  # another run may have finished units since we planned
                    self.compute(task_run)
                else:
                    waiting.append(task_run)
        for task_run in waiting:
            self.say(f"task {task_run.task.name} is being computed by another relbench run on this store; "
                     f"waiting for it, then computing what it left")
            with self.store.lock(task_run.task.name, wait=True):
                task_run.replan()
                self.compute(task_run)

    def todo(self, task_run: TaskRun) -> list[PlannedUnit]:
        """The task's units still to compute, counting the others as reused; a task with
        none left clears the error an earlier run recorded."""
        plan = task_run.plan()
        todo = plan.todo
        self.stats.units_skipped += len(plan.units) - len(todo)
        if not todo:
            self.clear_task_error(task_run.task)
        return todo

    def compute(self, task_run: TaskRun) -> None:
        """Compute the units of one task that are not done (the caller holds its lock),
        and record what this run did to it in :attr:`summaries`, interrupted or not."""
        before, t0, failed = copy.deepcopy(self.stats), time.perf_counter(), False
        todo = self.todo(task_run)
        try:
            if todo:
                failed = self._compute(task_run, len(todo))
        finally:
            self.summaries[task_run.task.name] = self._task_summary(task_run, todo, before, t0, failed)

    def _compute(self, task_run: TaskRun, todo: int) -> bool:
        """Run the task's kind over its ``todo`` units; whether the task failed as a whole."""
        task, plan = task_run.task, task_run.plan()
        t0, failed = time.perf_counter(), False
        self.say(f"== task {task.name} ({task.kind.label}): {todo} of {len(plan.units)} units to compute ==")
        self.bar.task(task.name)
        try:
            with running_at(task.precision):
                task_run.kind.run(task_run)
        except (KeyboardInterrupt, OutputNotWritable):  # a full disk ends the run: nothing more can be stored
            raise
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a failing task is data; the next task runs
            if isinstance(exc, SystemExit):
                exc = RuntimeError(f"a plugin called sys.exit({exc.code!r}) while task {task.name!r} ran")
            self.task_failed(task_run, exc)
            failed = True
        else:
            self.clear_task_error(task)
        finally:
            task_run.release()
        self.say(f"== task {task.name} finished in {time.perf_counter() - t0:.1f}s ==")
        return failed

    def _task_summary(self, task_run: TaskRun, todo: list[PlannedUnit], before: RunStats, t0: float,
                      failed: bool) -> RunSummary:
        """What computing ``todo`` did, from the counters ``before`` it and now: a unit of
        ``todo`` left unstored is failed when its task failed as a whole, else missing."""
        plan, now = task_run.plan(), self.stats
        left = sum(u.id not in plan.done for u in todo)
        return RunSummary(
            task=task_run.task.name, planned=len(plan.units), ran=now.units_done - before.units_done,
            reused=len(plan.units) - len(todo), failed=now.units_failed - before.units_failed + failed * left,
            missing=0 if failed else left, seconds=time.perf_counter() - t0, encoded=now.encoded - before.encoded,
            cached=now.cached - before.cached, not_achievable=now.not_achievable - before.not_achievable,
            recomputed=tuple((now.recomputed - before.recomputed).most_common()),
            shared_computed=tuple((now.shared_computed - before.shared_computed).most_common()),
            shared_reused=tuple((now.shared_reused - before.shared_reused).most_common()),
            failures=tuple(now.failures[len(before.failures):]))

    def summary(self) -> RunSummary:
        """What this run did, every task's :attr:`summaries` merged; a task :meth:`run`
        planned but never reached (the run was interrupted first) counts its units to
        compute as missing."""
        parts = dict(self.summaries)
        for task_run in self._scheduled:
            if task_run.task.name not in parts:
                plan = task_run.plan()
                parts[task_run.task.name] = RunSummary(task_run.task.name, planned=len(plan.units),
                                                       reused=len(plan.units) - len(plan.todo),
                                                       missing=len(plan.todo))
        return merged(list(parts.values()))
