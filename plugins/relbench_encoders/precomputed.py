"""Encoder reading embeddings computed elsewhere, aligned by sample id."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from relbench.api import deferred_import, Encoder, EncoderContext, MissingAsset, UserError
from relbench_encoders._common import cache_subdir, file_sha256, require

torch = deferred_import("torch")


class MissingIds(UserError):
    """Sample ids that the embeddings file does not contain."""


def read_embeddings(path: Path, ids_path: Path | None, id_column: str, vector_column: str) -> tuple[list[str], np.ndarray]:
    """``(ids, n × d float32)`` from a ``.npy``, ``.safetensors`` or ``.parquet`` file.

    Layouts: ``.npy``: an ``n × d`` array, ids one per line in ``ids_path``;
    ``.safetensors``: tensor ``embeddings`` (``n × d``) and tensor ``ids`` (``n × L`` uint8,
    each row the UTF-8 id padded with zero bytes), or ids in ``ids_path``;
    ``.parquet``: column ``id_column`` (ids) and ``vector_column`` (a list of floats per row).
    """
    suffix = path.suffix.lower()
    ids: list[str] | None = None
    if suffix == ".npy":
        X = np.load(path)
    elif suffix == ".safetensors":
        from safetensors.numpy import load_file

        tensors = load_file(str(path))
        if "embeddings" not in tensors:
            raise UserError(f"{path} has no tensor named 'embeddings' (has: {', '.join(tensors)})")
        X = tensors["embeddings"]
        if "ids" in tensors:
            ids = [bytes(row).rstrip(b"\0").decode("utf-8") for row in np.asarray(tensors["ids"], np.uint8)]
    elif suffix == ".parquet":
        pd = require("pandas", "the precomputed encoder")
        df = pd.read_parquet(path, columns=[id_column, vector_column])
        ids = df[id_column].astype(str).tolist()
        X = np.stack([np.asarray(v, np.float32) for v in df[vector_column]]) if len(df) else np.zeros((0, 0))
    else:
        raise UserError(f"unsupported embeddings file {path}: use .npy, .safetensors or .parquet")
    if ids is None:
        if ids_path is None:
            raise UserError(f"{path} carries no ids: set `ids` to a text file with one sample id per line")
        ids = ids_path.read_text(encoding="utf-8").splitlines()
    X = np.asarray(X, dtype=np.float32)
    if X.ndim != 2 or len(ids) != len(X):
        raise UserError(f"{path}: expected n × d embeddings with n ids, got shape {X.shape} and {len(ids)} ids")
    return ids, X


@dataclass
class PrecomputedEncoder(Encoder):
    """Embeddings read from a file, aligned by sample id (reads the ``id`` pseudo-view).

    Use it with ``view: id``: the items it receives are then the sample ids, and row
    ``i`` of the output is the file's vector for ``items[i]``. Every id must be present.

    Parameters
    ----------
    path: the embeddings file: ``.npy`` (``n × d``, ids in ``ids``), ``.safetensors``
        (tensor ``embeddings`` ``n × d``, optional tensor ``ids`` ``n × L`` uint8 holding
        zero-padded UTF-8 ids) or ``.parquet`` (columns ``id_column``, ``vector_column``)
        (required).
    ids: text file with one sample id per line, in the file's row order (default none;
        needed for ``.npy`` and for ``.safetensors`` without ``ids``).
    id_column: parquet column with the ids (default ``id``).
    vector_column: parquet column with the vectors (default ``embedding``).
    """

    name: ClassVar[str] = "precomputed"
    modalities: ClassVar[tuple[str, ...]] = ()

    path: str = ""
    ids: str | None = None
    id_column: str = "id"
    vector_column: str = "embedding"

    def __post_init__(self) -> None:
        if not self.path:
            raise ValueError("the precomputed encoder needs `path` to an embeddings file")
        self._index: dict[str, int] | None = None
        self._X: np.ndarray | None = None

    def _files(self) -> list[Path]:
        files = [Path(self.path).expanduser()] + ([Path(self.ids).expanduser()] if self.ids else [])
        for f in files:
            if not f.is_file():
                raise MissingAsset(f"precomputed embeddings: {f} does not exist")
        return files

    def fingerprint(self, ctx: EncoderContext) -> str:
        """sha256 of the embeddings file (and of the ids file)."""
        hashes = cache_subdir(ctx, "weights") / "hashes"
        return "+".join(file_sha256(f, hashes) for f in self._files())

    def setup(self, ctx: EncoderContext) -> None:
        """Read the file and index its ids."""
        files = self._files()
        ids, self._X = read_embeddings(files[0], files[1] if len(files) > 1 else None, self.id_column, self.vector_column)
        self._index = {sid: i for i, sid in enumerate(ids)}

    def encode(self, items: Sequence[Any], ctx: EncoderContext) -> torch.Tensor:
        """The rows of the given sample ids: ``len(items) × d`` float32."""
        if self._X is None:
            self.setup(ctx)
        missing = [str(i) for i in items if str(i) not in self._index]
        if missing:
            raise MissingIds(
                f"{len(missing)} sample ids are not in {self.path} (first: {', '.join(missing[:5])}); "
                f"is the encoder's view `id`?"
            )
        rows = np.fromiter((self._index[str(i)] for i in items), dtype=np.int64, count=len(items))
        return torch.from_numpy(np.ascontiguousarray(self._X[rows]))
