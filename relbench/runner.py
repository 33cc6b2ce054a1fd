"""The runner: tasks → cached banks → task kinds → results store.

:class:`Runner` walks the validated suite; for each task it builds a :class:`TaskRun`,
the service object a :class:`~relbench.interfaces.TaskKind` works through: cached
embeddings per (encoder, split), anchors per (seed, selector, held-out set), a results
sink that skips finished units, figure paths and progress bars. A task that fails on a
user error (e.g. an encoder returning NaN) is recorded and the run goes on to the next.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from relbench import __version__
from relbench.cache import EmbeddingCache, identity_key
from relbench.config import EncoderSpec, PluginSpec, Suite, Task
from relbench.errors import BadEmbeddings, ConfigError, UserError
from relbench.interfaces import (
    AnchorContext,
    Anchors,
    Bank,
    DatasetData,
    EncoderContext,
    ResultRow,
    progress_bar,
)
from relbench.plugins import Registry
from relbench.results import ResultStore, environment, git_revision, unit_key

ID_VIEW = "id"  # pseudo-view whose items are the sample ids (for precomputed embeddings)


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


@dataclass
class RunStats:
    """Counters the runner reports at the end."""

    encoded: int = 0
    cached: int = 0
    units_done: int = 0
    units_skipped: int = 0
    failures: list[str] = field(default_factory=list)
    not_achievable: int = 0


class TaskRun:
    """The services a task kind uses while evaluating one task (see the module docstring)."""

    def __init__(self, runner: Runner, task: Task):
        self.runner = runner
        self.task = task
        self.kind = task.kind.build()
        self.device = resolve_device(task.device)
        self._dataset: DatasetData | None = None
        self._banks: dict[str, dict[str, Bank]] = {}
        self._encoders: dict[str, Any] = {}
        self._anchors: dict[str, Anchors] = {}
        self._pools: dict[str, dict[str, Bank]] = {}
        self._done = runner.store.done(task.name) if not runner.force else set()
        self.params = {s.label: s.full_params() for s in self._all_specs()}
        self.kind_params = task.kind.full_params()

    def _all_specs(self) -> list[PluginSpec]:
        t = self.task
        return [t.dataset, *t.encoders, *t.selectors, *t.similarities, *t.stitchers,
                *[r for r in t.regularizers if r], *t.metrics]

    # -------------------------------------------------------------- data and embeddings

    def dataset(self) -> DatasetData:
        """The task's data set (loaded once)."""
        if self._dataset is None:
            self._dataset = self.task.dataset.build().load()
            self._check_dataset(self._dataset)
        return self._dataset

    def _check_dataset(self, data: DatasetData) -> None:
        for split in ("train", "test"):
            if split not in data.splits:
                raise ConfigError(f"task {self.task.name!r}: data set {self.task.dataset.label!r} has no "
                                  f"{split!r} split (it has {sorted(data.splits)}).")
        labels = data.splits["train"].labels
        if labels is not None and len(np.unique(labels)) < 2 and self.kind.name == "stitching":
            raise ConfigError(f"task {self.task.name!r}: data set {self.task.dataset.label!r} has a single class "
                              f"in its training split; classification stitching needs at least two.")

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
        return EncoderContext(device=self.device, view=view, dataset=data, train=data.splits["train"],
                              cache_dir=self.runner.cache.root, batch_size=self.task.batch_size)

    def _embed(self, spec: EncoderSpec, data: DatasetData, split: str, view: str) -> Bank:
        encoder = self._encoders.get(spec.label) or spec.build()
        modalities = getattr(encoder, "modalities", ())
        modality = ID_VIEW if view == ID_VIEW else data.view_modalities[view]
        if modalities and modality not in modalities:
            raise ConfigError(f"task {self.task.name!r}: encoder {spec.label!r} ({spec.name}) reads "
                              f"{'/'.join(modalities)} but view {view!r} of {data.name!r} is {modality}.")
        ctx = self._encoder_ctx(spec, data, view)
        sp = data.splits[split]
        identity = {"encoder": spec.name, "params": encoder.params(), "weights": encoder.fingerprint(ctx),
                    "plugin": self.runner.registry.package("encoder", spec.name),
                    "data": data.fingerprint, "split": split, "view": view, "relbench": __version__}
        key = identity_key(identity)
        hit = self.runner.cache.get(key)
        for warning in self.runner.cache.warnings:
            self.runner.say(f"warning: {warning}")
        self.runner.cache.warnings.clear()
        if hit is not None and hit[1].get("n") == len(sp):
            self.runner.stats.cached += 1
            X = hit[0]
        else:
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
            self.runner.cache.put(key, X, {**identity, "n": len(sp), "label": spec.label, "dataset": data.name,
                                           "seconds": dt})
            self.runner.stats.encoded += 1
        labels = None if sp.labels is None else torch.as_tensor(np.asarray(sp.labels), dtype=torch.long)
        return Bank(encoder=spec.label, split=split, X=X.to(self.device), ids=list(sp.ids),
                    labels=None if labels is None else labels.to(self.device))

    def banks(self, split: str) -> dict[str, Bank]:
        """Every encoder's embeddings of ``split``, by encoder label (encoded once)."""
        if split not in self._banks:
            data = self.dataset()
            if split not in data.splits:
                raise ConfigError(f"data set {data.name!r} has no split {split!r}.")
            self._banks[split] = {
                spec.label: self._embed(spec, data, split, self.encoder_view(spec.label))
                for spec in self.task.encoders
            }
            dims = {lbl: b.dim for lbl, b in self._banks[split].items()}
            self.runner.say(f"[{self.task.name}] {split}: " + ", ".join(f"{k} {v}-d" for k, v in dims.items()))
        return self._banks[split]

    def pool_banks(self, dataset_name: str) -> dict[str, Bank]:
        """Training banks of another data set (out-of-domain anchor pool), every encoder."""
        if dataset_name not in self._pools:
            cls = self.runner.registry.get("dataset", dataset_name, where=f"task {self.task.name!r} anchor pool")
            data = cls().load()
            banks = {}
            for spec in self.task.encoders:
                view = self.encoder_view(spec.label)
                if view not in data.view_modalities:
                    raise ConfigError(
                        f"task {self.task.name!r}: out-of-domain anchor pool {dataset_name!r} has no view {view!r} "
                        f"(read by encoder {spec.label!r}); it has {data.views}. Use a pool with that view.")
                banks[spec.label] = self._embed(spec, data, "train", view)
            self._pools[dataset_name] = banks
        return self._pools[dataset_name]

    # -------------------------------------------------------------- anchors

    def anchors(self, seed: int, selector: PluginSpec, excluded: frozenset[str] = frozenset()) -> Anchors:
        """The anchor recipe for (seed, selector, held-out encoders), computed once."""
        sel = selector.build()
        if sel.learns_from_banks and not excluded:
            raise ConfigError(
                f"task {self.task.name!r}: anchor selector {selector.label!r} learns from the encoders' banks, and "
                f"the {self.kind.name!r} task kind evaluates encoders without holding them out of anchor selection, "
                f"so the anchors would have seen the space they are evaluated in. Use random, stratified or "
                f"parallel anchors for this task, or a stitching task (which holds each source out).")
        excluded = frozenset(excluded) if sel.learns_from_banks else frozenset()
        key = f"{seed}/{selector.label}/{sorted(excluded)}"
        if key not in self._anchors:
            train = self.banks("train")
            sp = self.dataset().splits["train"]
            ctx = AnchorContext(
                num_anchors=self.task.num_anchors, seed=seed, ids=list(sp.ids), labels=sp.labels,
                banks={k: v for k, v in train.items() if k not in excluded}, excluded=excluded,
                device=self.device, views={e.label: self.encoder_view(e.label) for e in self.task.encoders},
                pool_banks=self.pool_banks)
            self._anchors[key] = sel.select(ctx)
        return self._anchors[key]

    def realise(self, anchors: Anchors, label: str) -> torch.Tensor:
        """The ``k × d`` anchors of encoder ``label``."""
        pool = self.banks("train") if anchors.pool == "train" else self.pool_banks(anchors.pool)
        return anchors.realise(pool[label])

    # -------------------------------------------------------------- results

    def _key(self, key: dict) -> str:
        return unit_key(self.task.name, {k: v for k, v in key.items()})

    def is_done(self, key: dict) -> bool:
        """Whether this unit is already in the results store (and not forced)."""
        done = self._key(key) in self._done
        if done:
            self.runner.stats.units_skipped += 1
        return done

    @contextlib.contextmanager
    def unit(self, key: dict) -> Iterator[list[ResultRow]]:
        """Collect a unit's rows; store them atomically when the block succeeds, or
        store an error row (and go on) when it raises."""
        rows: list[ResultRow] = []
        t0 = time.perf_counter()
        try:
            yield rows
        except (KeyboardInterrupt, SystemExit):
            raise
        except BadEmbeddings:
            raise
        except Exception as exc:  # a failing combination is data, not the end of the run
            message = f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, UserError):
                message += "\n" + "".join(traceback.format_exception(exc)[-3:])
            rows[:] = [ResultRow(metric="error", value=None, status="error", error=message)]
            self.runner.stats.failures.append(f"{self.task.name} {key}: {type(exc).__name__}: {exc}")
        seconds = time.perf_counter() - t0
        self.runner.store.append(self.task.name, self._key(key),
                                 [self._row(r, key, seconds) for r in rows], self.runner.run_id)
        self._done.add(self._key(key))
        self.runner.stats.units_done += 1
        self.runner.stats.not_achievable += sum(r.status == "not_achievable" for r in rows)

    def _row(self, r: ResultRow, key: dict, seconds: float) -> dict:
        row = {
            "task": self.task.name, "kind": self.task.kind.name, "dataset": self.task.dataset.label,
            "seed": key.get("seed"), "held_out": list(key.get("held_out", [])),
            **{c: getattr(r, c) if getattr(r, c) != "-" else str(key.get(c, "-"))
               for c in ("selector", "similarity", "stitcher", "regularizer", "source", "target")},
            "metric": r.metric, "value": None if r.value is None else float(r.value),
            "status": r.status, "error": r.error, "extra": r.extra,
            "params": {lbl: self.params.get(lbl) for lbl in
                       {str(key.get(c)) for c in ("selector", "similarity", "stitcher", "regularizer")}
                       if lbl in self.params},
            "encoder_params": {lbl: self.params.get(lbl) for lbl in (r.source, r.target) if lbl in self.params},
            "dataset_params": self.params.get(self.task.dataset.label),
            "kind_params": self.kind_params,
            "num_anchors": self.task.num_anchors, "relbench": __version__, "git": git_revision(),
            "device": str(self.device), "environment": environment(), "seconds": seconds,
            "command": self.runner.command,
        }
        return row

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
        self.stats = RunStats()
        self.run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
        self.command = command or "relbench run " + str(suite.file)

    def say(self, message: str) -> None:
        """Print a progress message (to stderr, above the bars)."""
        if not self.quiet:
            from tqdm.auto import tqdm

            tqdm.write(message, file=sys.stderr)

    def tasks(self) -> list[Task]:
        """The tasks selected by ``only`` (all by default)."""
        if not self.only:
            return self.suite.tasks
        names = [t.name for t in self.suite.tasks]
        for name in self.only:
            if name not in names:
                from relbench.plugins import did_you_mean

                raise ConfigError(f"--task {name!r} is not a task of {self.suite.file}; {did_you_mean(name, names)}")
        return [t for t in self.suite.tasks if t.name in self.only]

    def run(self) -> RunStats:
        """Run the selected tasks; return the counters (failures included).

        A task that raises is recorded as a task-level error row and the run goes on to
        the next task; the units it finished before failing are kept. A user error
        (bad data, missing asset) is stored as its message; anything else also keeps
        the end of its traceback, since it points at a bug in a plugin or in relbench.
        The task-level error is cleared when a later run finishes the task.
        """
        self.store.ensure_writable()
        self.cache.ensure_writable()
        for task in self.tasks():
            resolve_device(task.device)  # `device: cuda` without a GPU stops the run before any work
        for task in self.tasks():
            t0 = time.perf_counter()
            self.say(f"== task {task.name} ({task.kind.label}) ==")
            task_run = None
            error_key = unit_key(task.name, {"task_error": True})
            try:
                task_run = TaskRun(self, task)
                task_run.kind.run(task_run)
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as exc:  # noqa: BLE001 - a failing task is data; the next task still runs
                message = f"{type(exc).__name__}: {exc}" if not isinstance(exc, UserError) else str(exc)
                if not isinstance(exc, UserError):
                    message += "\n" + "".join(traceback.format_exception(exc)[-4:])
                self.stats.failures.append(f"{task.name}: {message.splitlines()[0]}")
                self.say(f"task {task.name} failed: {message}")
                self.store.append(task.name, error_key, [self._task_error_row(task, task_run, message)], self.run_id)
            else:
                if error_key in self.store.stored(task.name):
                    self.store.append(task.name, error_key, [], self.run_id)  # the task now finishes: clear it
            self.say(f"== task {task.name} finished in {time.perf_counter() - t0:.1f}s ==")
        return self.stats

    def _task_error_row(self, task: Task, task_run: TaskRun | None, message: str) -> dict:
        """The result row recording that a whole task failed."""
        row = ResultRow(metric="error", value=None, status="error", error=message)
        if task_run is not None:
            return task_run._row(row, {}, 0.0)
        return {"task": task.name, "kind": task.kind.name, "dataset": task.dataset.label, "metric": "error",
                "value": None, "status": "error", "error": message, "relbench": __version__,
                "git": git_revision(), "command": self.command}
