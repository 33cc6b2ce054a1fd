"""Content-addressed embedding cache: safetensors + JSON metadata, atomic, verified.

An entry's key is the SHA-256 of its identity: encoder name, every parameter, the
encoder's weight fingerprint, the data fingerprint, split, view and relbench version.
The tensor file is written first and the metadata (which records the tensor file's
SHA-256) last, both through a temporary file and ``os.replace``: an entry without
metadata does not exist, and one whose tensor does not match its recorded hash is
reported, deleted and recomputed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from relbench.errors import OutputNotWritable

CACHE_ENV = "RELBENCH_CACHE_DIR"


def default_cache_root() -> Path:
    """``$RELBENCH_CACHE_DIR`` or ``~/.cache/relbench``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "relbench")


def identity_key(identity: dict) -> str:
    """Stable hash of a JSON-able identity dict."""
    blob = json.dumps(identity, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:40]


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class EmbeddingCache:
    """Embeddings on disk under ``root/embeddings``."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root or default_cache_root())
        self.dir = self.root / "embeddings"
        #: messages about entries found corrupt (shown by the runner)
        self.warnings: list[str] = []

    def ensure_writable(self) -> None:
        """Fail early, with a fix, when the cache folder cannot be written."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.dir):
                pass
        except OSError as exc:
            raise OutputNotWritable(
                f"The embedding cache {self.dir} is not writable ({exc.strerror}). Set {CACHE_ENV} or "
                f"`suite.cache_dir` in the tasks file to a writable folder."
            ) from None

    def _paths(self, key: str) -> tuple[Path, Path]:
        return self.dir / f"{key}.safetensors", self.dir / f"{key}.json"

    def get(self, key: str) -> tuple[torch.Tensor, dict] | None:
        """The cached tensor and metadata, or ``None`` (missing, or corrupt → removed)."""
        tensor_path, meta_path = self._paths(key)
        if not meta_path.exists():
            return None
        try:
            meta = json.loads(meta_path.read_text())
            if file_sha256(tensor_path) != meta["sha256"]:
                raise ValueError("content hash mismatch")
            X = load_file(str(tensor_path))["embeddings"]
            if list(X.shape) != meta["shape"]:
                raise ValueError("shape mismatch")
        except (OSError, ValueError, KeyError, json.JSONDecodeError) as exc:
            self.warnings.append(
                f"cache entry {key} ({meta_path.name}) is corrupt or truncated ({exc}); recomputing it"
            )
            tensor_path.unlink(missing_ok=True)
            meta_path.unlink(missing_ok=True)
            return None
        return X, meta

    def put(self, key: str, X: torch.Tensor, identity: dict) -> None:
        """Store ``X`` (moved to CPU, contiguous float32) with its identity."""
        tensor_path, meta_path = self._paths(key)
        self.dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".tmp-", suffix=".safetensors")
        os.close(fd)
        try:
            save_file({"embeddings": X.detach().to("cpu", torch.float32).contiguous()}, tmp)
            digest = file_sha256(Path(tmp))
            os.replace(tmp, tensor_path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        meta = {"key": key, "sha256": digest, "shape": list(X.shape), "created": time.time(), **identity}
        atomic_write_bytes(meta_path, json.dumps(meta, indent=1, default=str).encode())

    def entries(self) -> list[dict]:
        """Metadata of every complete entry, with its size in bytes."""
        out = []
        for meta_path in sorted(self.dir.glob("*.json")):
            try:
                meta = json.loads(meta_path.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            tensor_path = meta_path.with_suffix(".safetensors")
            meta["bytes"] = tensor_path.stat().st_size if tensor_path.exists() else 0
            out.append(meta)
        return out

    def clear(self) -> int:
        """Delete every entry; return how many there were."""
        n = len(list(self.dir.glob("*.json"))) if self.dir.exists() else 0
        if self.dir.exists():
            shutil.rmtree(self.dir)
        return n
