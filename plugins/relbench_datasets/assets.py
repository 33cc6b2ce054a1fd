"""Where the data sets' files are, how they are hashed, and the on-disk extraction cache.

Every loader finds its raw files through :func:`package_file` or :func:`system_file`
(which raise :class:`relbench.errors.MissingAsset` with the install command), hashes
them with :func:`files_digest` (memoised per path, size and mtime) and keeps expensive
extractions under ``$RELBENCH_CACHE_DIR/datasets`` through :func:`cached_json` /
:func:`cached_array`, written atomically.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import io
import json
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from relbench.api import DataSources, MissingAsset, atomic_write_bytes, default_cache_root, file_sha256

#: bump when an extraction's code changes what it produces (invalidates the caches)
EXTRACTION_VERSION = 1


def cache_dir() -> Path:
    """``$RELBENCH_CACHE_DIR/datasets`` (default ``~/.cache/relbench/datasets``)."""
    return default_cache_root() / "datasets"


def package_dir(module: str, install: str) -> Path:
    """The folder of an installed package, found without importing it.

    ``install`` is the exact command that installs it, quoted in the
    :class:`MissingAsset` raised when the package is absent.
    """
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingAsset(f"The Python package {module!r} is not installed. Install it with: {install}")
    return Path(next(iter(spec.submodule_search_locations)))


def package_file(module: str, relative: str, install: str) -> Path:
    """A data file shipped inside an installed package (``MissingAsset`` if absent)."""
    path = package_dir(module, install) / relative
    if not path.is_file():
        raise MissingAsset(
            f"{path} is missing from the installed package {module!r}. Reinstall it with: {install}"
        )
    return path


def system_file(path: Path | str, install: str) -> Path:
    """A file installed by a system package (``MissingAsset`` naming ``install`` if absent)."""
    path = Path(path)
    if not path.is_file():
        raise MissingAsset(f"{path} is not installed. Install it with: {install}")
    return path


def package_version(distribution: str) -> str:
    """Installed version of a distribution, or ``"absent"``."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


@lru_cache(maxsize=256)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    return file_sha256(Path(path))


def files_digest(paths: Iterable[Path]) -> str:
    """SHA-256 over the contents of ``paths`` (each file hashed once per process)."""
    h = hashlib.sha256()
    for path in paths:
        st = Path(path).stat()
        h.update(f"{Path(path).name}:{_digest(str(path), st.st_size, st.st_mtime_ns)}\n".encode())
    return h.hexdigest()


def sources_of(paths: Iterable[Path], packages: Iterable[str] = ()) -> DataSources:
    """What a loader read: the files it hashed with :func:`files_digest` and the
    distributions whose versions entered its source digest (absolute paths)."""
    return DataSources(tuple(str(Path(p).absolute()) for p in paths), tuple(packages))


def fingerprint(name: str, source: str, params: dict[str, Any]) -> str:
    """The data fingerprint: hash of the data set name, its raw source digest and parameters."""
    blob = json.dumps(
        {"dataset": name, "source": source, "params": params, "version": EXTRACTION_VERSION},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _cache_path(kind: str, key: str, suffix: str) -> Path:
    return cache_dir() / kind / f"{key[:40]}{suffix}"


def cached_json(kind: str, key: str, build: Callable[[], Any]) -> Any:
    """``build()``'s JSON-able result, stored once under ``datasets/<kind>/<key>.json``."""
    path = _cache_path(kind, key, ".json")
    if path.is_file():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            path.unlink(missing_ok=True)
    value = build()
    atomic_write_bytes(path, json.dumps(value, ensure_ascii=False).encode("utf-8"))
    return value


def cached_array(kind: str, key: str, build: Callable[[], np.ndarray]) -> np.ndarray:
    """``build()``'s array, stored once as ``datasets/<kind>/<key>.npy``."""
    path = _cache_path(kind, key, ".npy")
    if path.is_file():
        try:
            return np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
    value = np.ascontiguousarray(build())
    buf = io.BytesIO()
    np.save(buf, value, allow_pickle=False)
    atomic_write_bytes(path, buf.getvalue())
    return value
