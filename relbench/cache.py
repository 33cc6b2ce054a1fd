"""Content-addressed embedding cache: safetensors + JSON metadata, atomic, verified.

An entry's key is the SHA-256 of its identity: encoder name, every parameter, the
encoder's weight fingerprint, the data fingerprint, split, view and relbench version.
The tensor file is written first and the metadata (which records the key, the identity
fields and the tensor file's SHA-256) last, both through a temporary file and
``os.replace``: an entry without metadata does not exist. On reading, an entry must
prove what it holds: one whose tensor does not match its recorded hash, whose metadata
is not a JSON object, whose files are not regular files (a folder, a named pipe), or
whose recorded key or identity differs from the one asked for is reported, set aside
and recomputed. An entry this user may not read belongs to someone else in a shared
cache: it is reported and left in place. Files are created like ``open`` creates them
(mode 0666 less the umask), so entries in a shared cache stay readable to the others
the umask allows.

:class:`ArtefactCache` keeps other tensors computed from the banks the same way, under
``root/anchors`` (learned anchors, :func:`relbench.sharing.learned_anchors`), with a lock
per entry so that processes sharing the cache compute an entry once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from safetensors import SafetensorError

from relbench import deferred
from relbench.errors import OutputNotWritable, UserError
from relbench.rows import brief

torch = deferred.load("torch")

try:
    import fcntl
except ImportError:  # not POSIX: processes sharing a cache are not coordinated
    fcntl = None

CACHE_ENV = "RELBENCH_CACHE_DIR"
#: metadata fields the cache writes itself; an identity may not use them
RESERVED_FIELDS = frozenset({"key", "sha256", "shape", "created"})


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
    """Write ``data`` to ``path`` through a temporary file in the same folder.

    The temporary file is created with mode 0666, so the umask (and a folder's default
    ACL) applies as for any ``open``; ``tempfile.mkstemp`` would force 0600.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{secrets.token_hex(16)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _read_regular(path: Path) -> bytes:
    """The bytes of ``path``, which must be a regular file (or a link to one).

    It is opened non-blocking and checked on the open descriptor, so a named pipe in its
    place is refused instead of waiting forever for a writer.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path.name} is not a regular file")
        return fh.read()


def _read_meta(path: Path) -> dict:
    """An entry's metadata, which must be a JSON object."""
    meta = json.loads(_read_regular(path))
    if not isinstance(meta, dict):
        raise ValueError(f"{path.name} holds a JSON {type(meta).__name__}, not an object")
    return meta


def _as_stored(value):
    """``value`` as it reads back from the metadata (tuples as lists, paths as strings, …)."""
    return json.loads(json.dumps(value, default=str))


def _differing(meta: dict, identity: dict | None) -> list[str]:
    """The identity fields an entry's metadata lacks or records with another value."""
    return sorted(k for k in identity or {} if k not in meta or meta[k] != _as_stored(identity[k]))


def describe(meta: dict) -> str:
    """One line of ``relbench cache ls``: an entry's key, label, data set/split/view,
    shape and size, with ``?`` for whatever its metadata lacks or records oddly (an
    entry written by another version, or edited)."""
    def shown(*names: str) -> str:
        for name in names:
            value = meta.get(name)
            if value is not None and value != "":
                return brief(str(value))
        return "?"

    shape, size = meta.get("shape"), meta.get("bytes")
    dims = "×".join(map(str, shape)) if isinstance(shape, list) and len(shape) == 2 and all(
        isinstance(n, int) for n in shape) else "?"
    mb = f"{size / 1e6:.1f}" if isinstance(size, (int, float)) else "?"
    return f"{shown('key')}  {shown('label', 'encoder'):<20} {shown('dataset')}/{shown('split')}/{shown('view')}  " \
           f"{dims}  {mb} MB"


def _safetensors_torch():
    """safetensors' torch functions, imported when a tensor is first read or written
    (they import torch; planning reads no tensor)."""
    import safetensors.torch

    return safetensors.torch


class EmbeddingCache:
    """Embeddings on disk under ``root/embeddings``."""

    #: the folder under ``root`` that holds the entries
    folder = "embeddings"
    #: the name of the torch dtype :meth:`put` stores a tensor in; None: its own
    dtype: str | None = "float32"

    def __init__(self, root: Path | None = None):
        self.root = Path(root or default_cache_root())
        self.dir = self.root / self.folder
        #: messages about entries found corrupt (shown by the runner)
        self.warnings: list[str] = []
        #: entries held in memory only, consulted before the disk (:meth:`hold`)
        self.held: dict[str, tuple[torch.Tensor, dict]] = {}

    def hold(self, key: str, X: torch.Tensor, meta: dict) -> None:
        """Serve ``X`` with metadata ``meta`` (an entry's fields, as :meth:`put` takes
        them) under ``key`` from memory, without touching the disk: how banks that reach
        a Ray worker through the object store are read there (:mod:`relbench.ray_executor`).
        :meth:`get` checks a held entry's identity as it checks one on disk."""
        self.held[key] = (X, {**_as_stored(meta), "key": key})

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

    def get(self, key: str, identity: dict | None = None) -> tuple[torch.Tensor, dict] | None:
        """The cached tensor and metadata, or ``None`` (then the caller recomputes).

        With ``identity`` (what the caller asks for; ``key`` must be its
        :func:`identity_key`), every identity field must be recorded in the metadata with
        the same value; the recorded key must always equal ``key``. An entry that fails a
        check, or is corrupt, is reported in :attr:`warnings` and set aside; one this user
        may not read is reported and left alone.
        """
        if identity is not None and identity_key(identity) != key:
            self.warnings.append(f"cache entry {key} was asked for with an identity whose key is "
                                 f"{identity_key(identity)}; not using it")
            return None
        if key in self.held:
            X, meta = self.held[key]
            differ = _differing(meta, identity)
            return None if differ else (X, meta)
        tensor_path, meta_path = self._paths(key)
        if not os.path.lexists(meta_path):
            return None
        try:
            meta = _read_meta(meta_path)
            if meta.get("key") != key:
                return self._set_aside(key, f"holds entry {meta.get('key')!r}, not {key}")
            differ = _differing(meta, identity)
            if differ:
                return self._set_aside(key, f"records a different {', '.join(differ)} than was asked for")
            data = _read_regular(tensor_path)
            if hashlib.sha256(data).hexdigest() != meta["sha256"]:
                raise ValueError("content hash mismatch")
            X = _safetensors_torch().load(data)["embeddings"]
            if list(X.shape) != meta["shape"]:
                raise ValueError("shape mismatch")
        except PermissionError as exc:
            self.warnings.append(f"cache entry {key} cannot be read by this user ({exc.strerror}: {exc.filename}); "
                                 f"leaving it in place and recomputing")
            return None
        except (OSError, ValueError, KeyError, SafetensorError) as exc:
            return self._set_aside(key, f"is corrupt or truncated ({exc})")
        return X, meta

    def has(self, key: str) -> bool:
        """Whether an entry is held or stored under ``key`` (its files exist; :meth:`get` checks them)."""
        return key in self.held or all(os.path.lexists(p) for p in self._paths(key))

    def _set_aside(self, key: str, why: str) -> None:
        """Report entry ``key`` and remove its files (a folder in their place is renamed, not deleted)."""
        self.warnings.append(f"cache entry {key} {why}; recomputing it")
        for path in self._paths(key):
            try:
                if path.is_dir() and not path.is_symlink():
                    path.rename(path.with_name(f".{path.name}.set-aside-{secrets.token_hex(4)}"))
                else:
                    path.unlink(missing_ok=True)
            except OSError as exc:
                self.warnings.append(f"could not remove {path} ({exc.strerror})")

    def put(self, key: str, X: torch.Tensor, identity: dict) -> None:
        """Store ``X`` (moved to CPU, contiguous, in :attr:`dtype`) with its identity (and any extra fields).

        An entry this user may not replace (another user's file in a shared folder) is
        left as it is, with a warning; ``X`` then stays uncached, as it does when the
        entry cannot be written at all (a full disk).
        """
        if RESERVED_FIELDS & identity.keys():
            raise ValueError(f"identity fields {sorted(RESERVED_FIELDS & identity.keys())} are reserved for the "
                             f"cache's own metadata")
        tensor_path, meta_path = self._paths(key)
        dtype = getattr(torch, self.dtype) if self.dtype else X.dtype
        data = _safetensors_torch().save({"embeddings": X.detach().to("cpu", dtype).contiguous()})
        meta = {**identity, "key": key, "sha256": hashlib.sha256(data).hexdigest(), "shape": list(X.shape),
                "created": time.time()}
        try:
            atomic_write_bytes(tensor_path, data)
            atomic_write_bytes(meta_path, json.dumps(meta, indent=1, default=str).encode())
        except OSError as exc:  # a file of another user, a full disk: a tensor file without metadata is no entry
            self.warnings.append(f"cache entry {key} was not stored ({exc.strerror}: {exc.filename})")

    def entries(self) -> list[dict]:
        """Metadata of every complete entry, with its size in bytes."""
        out = []
        for meta_path in sorted(self.dir.glob("*.json")):
            try:
                meta = _read_meta(meta_path)
            except (OSError, ValueError):
                continue
            if meta.get("key") != meta_path.stem:
                continue
            tensor_path = meta_path.with_suffix(".safetensors")
            meta["bytes"] = tensor_path.stat().st_size if tensor_path.exists() else 0
            out.append(meta)
        return out

    def clear(self) -> int:
        """Delete every entry; return how many there were.

        A cache folder that is a symbolic link is refused (a :class:`UserError`): deleting
        through it would empty a folder the user pointed it at, and removing just the link
        would break that set-up without freeing any space.
        """
        if self.dir.is_symlink():
            raise UserError(f"The embedding cache folder {self.dir} is a symbolic link to {os.readlink(self.dir)}; "
                            f"`relbench cache clear` does not delete through links. Delete the *.json and "
                            f"*.safetensors files there yourself, or remove the link.")
        n = len(list(self.dir.glob("*.json"))) if self.dir.exists() else 0
        if self.dir.exists():
            shutil.rmtree(self.dir)
        return n


class ArtefactCache(EmbeddingCache):
    """Tensors computed from the banks (learned anchors), under ``root/anchors``: the
    embedding cache's entries, checks and atomic writes, in the tensor's own dtype, plus
    a lock per entry (:meth:`lock`)."""

    folder = "anchors"
    dtype = None

    def set_aside(self, key: str, why: str) -> None:
        """Report entry ``key`` as unusable (``why``) and remove it: a caller that finds
        its content malformed recomputes it."""
        self._set_aside(key, why)

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Hold entry ``key``'s lock for the block, waiting while another process holds
        it: an ``flock`` on ``.locks/<key>.lock`` in this cache's folder, which the system
        releases when its holder ends, however it ends (a lock is never stale). Where
        ``fcntl`` is missing (Windows) or the lock file cannot be made (a read-only
        cache), the block runs without it."""
        fd = None
        if fcntl is not None:
            try:
                folder = self.dir / ".locks"
                folder.mkdir(parents=True, exist_ok=True)
                fd = os.open(folder / f"{key}.lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError as exc:
                self.warnings.append(f"cache entry {key} could not be locked ({exc.strerror}); computing it "
                                     f"without waiting for other processes")
                if fd is not None:
                    os.close(fd)
                fd = None
        try:
            yield
        finally:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
