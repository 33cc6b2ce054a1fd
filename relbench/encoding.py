"""A task's encodings: what each encoder reads, the embeddings it produced, and the
embedding cache that keeps them.

:class:`TaskEncodings` names every bank a task reads (:class:`BankNeed`: its cache key
and identity), reads it from the embedding cache (:mod:`relbench.cache`) or encodes it,
checks it (:func:`check_finite`) and caches it; it encodes a task's missing banks
encoder by encoder ahead of the units, so that one encoder is resident at a time. The
device helpers resolve where a task computes without importing torch for ``auto``/``cpu``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from relbench import deferred
from relbench import __version__
from relbench.cache import RESERVED_FIELDS, identity_key
from relbench.descriptions import loaded
from relbench.errors import BadEmbeddings, ConfigError
from relbench.interfaces import DatasetData, EncoderContext
from relbench.task_model import EncoderSpec

if TYPE_CHECKING:
    from relbench.task_run import TaskRun

torch = deferred.load("torch")

ID_VIEW = "id"  # pseudo-view whose items are the sample ids (for precomputed embeddings)


def check_device(name: str) -> None:
    """Stop a run that asks for ``cuda`` where no GPU is visible (a user error), before
    any work. ``auto`` and ``cpu`` need no check, so planning them imports no torch."""
    if name.startswith("cuda"):
        resolve_device(name)


def resolve_device(name: str) -> torch.device:
    """``auto`` → CUDA when available, else CPU; ``cuda`` without a GPU is a user error.
    On CUDA, fp32 stays fp32 (:func:`strict_fp32_on_gpu`)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} was requested but no CUDA GPU is visible; use `device: auto` or `cpu`.")
    if name.startswith("cuda"):
        strict_fp32_on_gpu()
    return torch.device(name)


def strict_fp32_on_gpu() -> None:
    """Turn TF32 off for CUDA's matrix products and cuDNN's convolutions. PyTorch leaves it
    on for convolutions by default, which rounds their fp32 inputs to a 10-bit mantissa:
    an fp32 task on a GPU would then neither be fp32 nor match the CPU's rows. A bf16
    task's loops opt in to bfloat16 explicitly (:mod:`relbench.precision`)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


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

class TaskEncodings:
    """The encoders of one task run, their banks' cache entries, and the encoding of
    the banks the cache lacks."""

    def __init__(self, run: TaskRun):
        self.run = run
        self.runner = run.runner
        self.task = run.task
        self._encoders: dict[str, Any] = {}
        #: banks encoded ahead of being asked for (:meth:`encode_ahead`), by cache key
        self._ahead: dict[str, tuple[torch.Tensor, dict]] | None = None
        self._pool_data_sets: dict[str, DatasetData] = {}

    def encoder_view(self, label: str) -> str:
        """The view an encoder reads (its spec's ``view``, else the data set's first)."""
        spec = self.spec(label)
        data = self.run.dataset()
        view = spec.view or data.views[0]
        if view != ID_VIEW and view not in data.view_modalities:
            raise ConfigError(f"task {self.task.name!r}, encoder {label!r}: view {view!r} is not a view of data set "
                              f"{self.task.dataset.label!r}; it has {data.views}.")
        return view

    def modality(self, label: str) -> str:
        """Modality of the view an encoder reads."""
        view = self.encoder_view(label)
        return "id" if view == ID_VIEW else self.run.dataset().view_modalities[view]

    def spec(self, label: str) -> EncoderSpec:
        """The task's encoder labelled ``label``."""
        for spec in self.task.encoders:
            if spec.label == label:
                return spec
        raise KeyError(label)

    def context(self, spec: EncoderSpec, data: DatasetData, view: str) -> EncoderContext:
        """What encoder ``spec`` is given to read ``view`` of ``data`` for the task."""
        return EncoderContext(device=lambda: self.run.device, view=view, dataset=data, train=data.splits["train"],
                              cache_dir=self.runner.cache.root, batch_size=self.task.batch_size,
                              precision=self.task.precision)

    def _bank_identity(self, spec: EncoderSpec, encoder, data: DatasetData, split: str, view: str) -> dict:
        """What a bank's cache entry is keyed by: the encoder, its parameters and weights
        fingerprint, the data set's fingerprint, the split and the view, and the encoder's
        arithmetic where it is not fp32 (so an fp32 bank keeps its key, and a bf16 one is
        never read by an fp32 task)."""
        ctx = self.context(spec, data, view)
        identity = {"encoder": spec.name, "params": encoder.params(), "weights": encoder.fingerprint(ctx),
                    "plugin": spec.package, "data": data.fingerprint, "split": split, "view": view,
                    "relbench": __version__}
        arithmetic = encoder.arithmetic(ctx)
        if arithmetic != "fp32":
            identity["arithmetic"] = arithmetic
        return identity

    def bank_needs(self) -> list[BankNeed]:
        """Every bank the task reads: each encoder's train and test pools, then the
        training banks of the data sets its selectors draw anchors from
        (:meth:`~relbench.interfaces.AnchorSelector.pools`). Loads no items; an executor
        encodes them ahead of the units (:mod:`relbench.ray_executor`)."""
        return [*self._needs(None, ("train", "test")), *self.pool_needs()]

    def pool_needs(self) -> list[BankNeed]:
        """The training banks of the anchor pools the task's selectors declare."""
        pools = dict.fromkeys(name for sel in self.task.specs("selector") for name in sel.build().pools())
        return [need for pool in pools for need in self._needs(pool, ("train",))]

    def _needs(self, pool: str | None, splits: tuple[str, ...]) -> list[BankNeed]:
        """The banks of ``splits`` of the task's data set (``pool`` None) or of anchor pool
        ``pool``, split by split, encoder by encoder."""
        needs = []
        for split in splits:
            for spec in self.task.encoders:
                data, view = self.source(spec, pool)
                encoder = self._encoders.get(spec.label) or spec.build()
                identity = self._bank_identity(spec, encoder, data, split, view)
                needs.append(BankNeed(spec.label, split, pool, identity_key(identity), identity,
                                      len(data.splits[split])))
        return needs

    def source(self, spec: EncoderSpec, pool: str | None) -> tuple[DatasetData, str]:
        """The data set an encoder reads for the task (``pool`` None) or anchor pool
        ``pool``, and the view it reads there."""
        if pool is None:
            return self.run.dataset(), self.encoder_view(spec.label)
        data = self._pool_data(pool)
        return data, self._pool_view(spec, data, pool)

    def bank_entry(self, need: BankNeed) -> tuple[torch.Tensor, dict]:
        """The embeddings of ``need`` and their cache metadata, read from the embedding
        cache or encoded (and cached) now."""
        spec = self.spec(need.label)
        return self.entry(spec, *self.source(spec, need.pool), need.split)

    def cached_entry(self, need: BankNeed) -> tuple[torch.Tensor, dict] | None:
        """The embeddings of ``need`` and their metadata when the cache holds them, else None."""
        hit = self.runner.cache.get(need.key, need.identity)
        for warning in self.runner.cache.warnings:
            self.runner.say(f"warning: {warning}")
        self.runner.cache.warnings.clear()
        if hit is None or hit[1].get("n") != need.n:
            return None
        return hit[0], {k: v for k, v in hit[1].items() if k not in RESERVED_FIELDS}

    def entry(self, spec: EncoderSpec, data: DatasetData, view: str, split: str) -> tuple[torch.Tensor, dict]:
        """Encoder ``spec``'s embeddings of ``view`` of ``split`` of ``data`` and their metadata:
        encoded ahead, read from the embedding cache, or encoded (checked and cached) now."""
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
        ctx = self.context(spec, data, view)
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

    def encode_ahead(self) -> None:
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
            pools = self.pool_needs()
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

    def release(self) -> None:
        """Free the encoders, the banks encoded ahead and the anchor pools' data sets."""
        for encoder in self._encoders.values():
            getattr(encoder, "release", lambda: None)()
        self._ahead = None
        self._encoders.clear()
        self._pool_data_sets.clear()
