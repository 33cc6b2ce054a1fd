"""The results store: append-only JSON lines, one line per finished unit of work.

A *unit* is the smallest piece of work that is kept or redone as a whole (for stitching:
one decoder fitted on one target and evaluated against every source). Each unit is one
line ``{"unit": id, "key": displayed key, "inputs": {...}, "run": run_id, "time": ...,
"rows": [...]}`` written with a single ``write`` and ``fsync``, so a run killed
mid-write leaves at most a truncated last line, which readers ignore: nothing finished
is lost, and nothing half-done counts as done. ``id`` is the fingerprint of ``inputs``,
everything that produced the unit (:mod:`relbench.identity`).

Files are never rewritten. Lines of older identities stay as history; pages and exports
ask for the identities of the current tasks file (``load(units=...)``). ``--force``
appends new lines; readers keep the newest line per id, and ``load(all_runs=True)``
shows every line.

Beside each file, ``.index/<task>.tsv`` says where each line lies and what the hot path
needs of it (unit id, displayed key, whether it succeeded, run, time), so that deciding
what is done reads a few hundred bytes per unit and parses no JSON: superseded lines
(history) cost nothing there. The index is derived data: it is checked against the file
on every read (each entry must point at the start of a line of its unit), extended with
lines another process appended, and rebuilt from the file when anything disagrees.

A line is a unit only when every row's ``value`` is a finite number, or null on a row
whose status is not ``ok``: any other line (a string, a list or ``Infinity`` where a
score belongs, written by hand or by another tool) is damage, set aside like a line
that is not JSON, so that it never reaches a page and its unit is recomputed.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import platform
import subprocess
import re
import threading
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import lazy_loader

pd = lazy_loader.load("pandas")

try:
    import fcntl
except ImportError:  # not POSIX: runs on one store are not coordinated
    fcntl = None

from relbench.cache import atomic_write_bytes
from relbench.errors import OutputNotWritable
from relbench.identity import key_json
from relbench.names import inside, valid_task_name
from relbench.rows import brief, finite_number

#: the folder of the indexes beside the task files, and the first line of an index
#: (version 2: lines are checked for values that are not numbers, which version 1 indexed)
INDEX_FOLDER = ".index"
INDEX_HEADER = "relbench-results-index\t2"

#: the columns every loaded frame has (a task kind adds its own)
COLUMNS = ["task", "kind", "dataset", "seed", "metric", "value", "direction", "status", "error"]


@lru_cache(maxsize=1)
def git_revision(where: Path | None = None) -> str:
    """The git revision of the relbench source tree, when it is a checkout, with
    ``-dirty`` when tracked files differ from it. The published ``leaderboards/`` folder
    does not count: it is output, rewritten by every run."""
    here = where or Path(__file__).parent
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=5)
        if out.returncode != 0:
            return ""
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", ":(top)", ":(top,exclude)leaderboards"],
                               cwd=here, capture_output=True, timeout=10)
        return out.stdout.strip() + ("-dirty" if dirty.returncode == 1 else "")
    except (OSError, subprocess.SubprocessError):
        return ""


@lru_cache(maxsize=1)
def environment() -> str:
    """Python, torch, operating system, CPU cores and GPU (when one is visible), on one line."""
    import torch

    parts = [f"Python {platform.python_version()}", f"torch {torch.__version__}",
             f"{platform.system()} {platform.machine()}", f"{os.cpu_count()} CPU cores"]
    if torch.cuda.is_available():
        parts.append(f"GPU {torch.cuda.get_device_name(0)}")
    return ", ".join(parts)


def ensure_writable_dir(folder: Path, what: str, how: str) -> None:
    """Create ``folder`` and write a probe file in it, or raise :class:`OutputNotWritable`
    saying ``what`` it is and ``how`` to choose another."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".probe-{os.getpid()}-{threading.get_ident()}"  # runs may share a process
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise OutputNotWritable(f"{what} {folder} is not writable ({exc.strerror}). Choose another with {how}.") from None


class ResultStore:
    """Result lines under ``root/<task>.jsonl``; figures drawn during a run under
    ``root/figures/<task>/``."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._read: dict[str, tuple[TaskLines, tuple[int, int] | None]] = {}
        #: damage found and set aside while reading (shown by the runner)
        self.warnings: list[str] = []

    def ensure_writable(self) -> None:
        """Fail early, with a fix, when the output folder cannot be written."""
        ensure_writable_dir(self.root, "The output directory", "`suite.output` in the tasks file or "
                                                              "`relbench run --output DIR`")

    def _file(self, task: str) -> Path:
        return inside(self.root, task, ".jsonl")

    def figure_path(self, task: str, filename: str) -> Path:
        """Where a figure drawn while running ``task`` is kept. Figures such as
        reconstructions need the trained models, so they are results, not renderings:
        ``relbench leaderboard`` copies them next to the page."""
        return inside(self.root / "figures", task) / Path(filename).name

    def _scan(self, task: str, start: int = 0) -> list[StoredUnit] | None:
        """Index the unit lines of a task's file from byte ``start`` on. A last line cut
        short by a kill is skipped (that unit is not done). Any other damaged line — not
        UTF-8, not JSON, JSON that is not a unit, a row whose value is not a finite
        number — is reported in :attr:`warnings` (with why), kept in
        ``quarantine/`` beside the store and removed from the file (so its unit is
        recomputed and no later run trips over it); then None is returned, since the
        file's offsets moved."""
        path = self._file(task)
        with open(path, "rb") as fh:
            fh.seek(start)
            data = fh.read()
        out, damaged = [], []
        raw_lines = data.split(b"\n")
        offset = start
        for number, raw in enumerate(raw_lines, 1):
            terminated = number < len(raw_lines)
            if raw.strip():
                unit, why = _unit(raw)
                if unit is not None and terminated:
                    out.append(StoredUnit.of(unit, offset, len(raw) + 1))
                elif terminated:  # the unterminated last line is a kill's, not damage
                    damaged.append((number, raw, why))
            offset += len(raw) + 1
        if damaged:
            self._quarantine(path, task, damaged, start)
            return None
        return out

    def _entries(self, task: str) -> list[StoredUnit]:
        """Every unit line of a task's file, from the index where it agrees with the file
        (extended with lines appended since), else by reading the file anew. A file
        replaced by something else (a folder, a link) is set aside and reads as empty."""
        path = self._file(task)
        if path.is_symlink() or (path.exists() and not path.is_file()):
            self._set_aside(path, task)
            return []
        if not path.exists():
            return []
        entries = self._checked_index(task)
        if entries is None:
            entries = self._scan(task) or self._scan(task) or []  # a second scan after setting damage aside
            self._write_index(task, entries)
            return entries
        start = entries[-1].end if entries else 0
        if start < path.stat().st_size:
            new = self._scan(task, start)
            if new is None:  # damage was set aside and the file rewritten: index it anew
                entries = self._scan(task) or []
                self._write_index(task, entries)
                return entries
            entries += new
            self._append_index(task, new)
        return entries

    def _index_file(self, task: str) -> Path:
        return inside(self.root / INDEX_FOLDER, task, ".tsv")

    def _checked_index(self, task: str) -> list[StoredUnit] | None:
        """The index's entries when every one points at the start of a line of its unit
        in the file (in increasing order, each ending with a newline); else None."""
        try:
            text = self._index_file(task).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        rows = text.split("\n")
        if rows[0] != INDEX_HEADER:
            return None
        try:
            entries = [StoredUnit.parse(row) for row in rows[1:] if row]
        except ValueError:
            return None
        try:
            with open(self._file(task), "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                end = 0
                for e in entries:
                    prefix = e.prefix()
                    if (e.offset < end or data[e.offset:e.offset + len(prefix)] != prefix
                            or data[e.end - 1:e.end] != b"\n"):
                        return None
                    end = e.end
        except (OSError, ValueError):  # an empty file cannot be mapped
            return None if entries else []
        return entries

    def _write_index(self, task: str, entries: list[StoredUnit]) -> None:
        try:
            atomic_write_bytes(self._index_file(task),
                               "\n".join([INDEX_HEADER, *(e.format() for e in entries)]).encode() + b"\n")
        except OSError:  # the index is an optimisation: a store that cannot hold it still works
            pass

    def _append_index(self, task: str, entries: list[StoredUnit]) -> None:
        """Add entries to the index (one ``write``, so a concurrent reader sees whole
        lines). A missing index is started when the entries start the file, else left
        to the next read, which writes it whole."""
        path = self._index_file(task)
        if not entries:
            return
        if not path.is_file():
            if entries[0].offset == 0:
                self._write_index(task, entries)
            return
        try:
            with open(path, "ab") as fh:
                fh.write("".join(e.format() + "\n" for e in entries).encode())
        except OSError:
            pass

    def _quarantine(self, path: Path, task: str, damaged: list[tuple[int, bytes, str]], start: int = 0) -> None:
        """Keep damaged lines in ``quarantine/<task>.jsonl`` and rewrite the file without
        them (``damaged``: each line's number from byte ``start``, bytes and what is
        wrong with it)."""
        data = path.read_bytes()
        first = data[:start].count(b"\n")  # lines before ``start``
        raw_lines = data.split(b"\n")
        bad = {first + n for n, _, _ in damaged}
        records = b"".join(json.dumps({"file": str(path), "line": first + n, "time": time.time(),
                                       "text": raw.decode("utf-8", errors="replace")}).encode() + b"\n"
                           for n, raw, _ in damaged)
        quarantine = self._quarantine_file(task)
        with open(quarantine, "ab") as fh:
            fh.write(records)
            fh.flush()
            os.fsync(fh.fileno())
        kept = b"\n".join(raw for n, raw in enumerate(raw_lines, 1) if n not in bad)
        atomic_write_bytes(path, kept)
        numbers = sorted(bad)
        whys = "; ".join(f"line {first + n}: {why}" for n, _, why in damaged[:5])
        self.warnings.append(f"{path}: {len(damaged)} damaged line(s) (line {', '.join(map(str, numbers[:5]))}"
                             f"{' …' if len(numbers) > 5 else ''}) set aside in {quarantine}; their units are "
                             f"recomputed ({whys}{' …' if len(damaged) > 5 else ''})")

    def _set_aside(self, path: Path, task: str) -> None:
        """Move something that is not a results file (a folder, a link) out of the way."""
        target = self._quarantine_file(task).with_suffix(f".{time.strftime('%Y%m%dT%H%M%S')}.set-aside")
        os.replace(path, target)
        self.warnings.append(f"{path} was not a results file (a folder or a link); moved it to {target}, and the "
                             f"task's units are recomputed")

    def _quarantine_file(self, task: str) -> Path:
        folder = self.root / "quarantine"
        folder.mkdir(parents=True, exist_ok=True)
        return inside(folder, task, ".jsonl")

    def read(self, task: str) -> TaskLines:
        """The newest line per unit id and per displayed key. Read once, kept up to date
        by :meth:`append`, and read again when another process (a ``-j`` worker, a second
        run) changed the file since."""
        signature = self._signature(task)
        cached = self._read.get(task)
        if cached is None or cached[1] != signature:
            lines = TaskLines()
            for entry in self._entries(task):
                lines.add(entry)
            self._read[task] = (lines, self._signature(task))
        return self._read[task][0]

    def fetch(self, task: str, entries: list[StoredUnit]) -> list[dict]:
        """The whole stored lines of ``entries`` (rows, inputs …), read from the file at
        the places the index gives (the file is read once per call). A line that is no
        longer a unit (edited in place since it was indexed) is left out, and the file
        read anew, which sets it aside and reports it."""
        if not entries:
            return []
        with open(self._file(task), "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            lines = [_unit(data[e.offset:e.end])[0] for e in entries]
        if None in lines:
            with contextlib.suppress(OSError):
                self._index_file(task).unlink(missing_ok=True)
            self._read.pop(task, None)
            self.read(task)
        return [line for line in lines if line is not None]

    def unit_seconds(self, task: str) -> list[float]:
        """The seconds each unit of ``task`` took when its newest line was computed (the
        ``seconds`` its rows record), for scheduling; read from the raw lines without
        parsing them. Units without the figure are left out."""
        entries = list(self.read(task).units.values())
        if not entries:
            return []
        found = []
        with open(self._file(task), "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            for e in entries:
                match = _SECONDS.search(data, e.offset, e.end)
                if match:
                    found.append(float(match.group(1)))
        return found

    def changed(self, task: str) -> bool:
        """Whether the task's file changed since this store last read or wrote it."""
        cached = self._read.get(task)
        return cached is None or cached[1] != self._signature(task)

    def _signature(self, task: str) -> tuple[int, int] | None:
        """Size and modification time of a task's file (None when there is none)."""
        try:
            st = os.stat(self._file(task), follow_symlinks=False)
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    def append(self, task: str, unit: str, rows: list[dict], run_id: str, key: dict | None = None,
               inputs: dict | None = None) -> None:
        """Append one finished unit atomically (one write + fsync). A last line cut
        short by a kill is first closed with a newline, so it stays the only casualty.
        A write that fails (a full disk) is undone, the file cut back to its former
        length, and raises :class:`OutputNotWritable` naming the folder."""
        self.root.mkdir(parents=True, exist_ok=True)
        record = {"unit": unit, "key": key or {}, "inputs": inputs or {}, "run": run_id, "time": time.time(),
                  "rows": rows}
        line = json.dumps(record, default=_jsonable).encode("utf-8")
        path = self._file(task)
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
                         | getattr(os, "O_BINARY", 0), 0o666)
        except OSError as exc:
            raise OutputNotWritable(f"cannot write results file {path} ({exc.strerror}); it must be a plain file, "
                                    f"never a link. Move it away or choose another `--output`.") from None
        try:
            size = os.lseek(fd, 0, os.SEEK_END)
            data = line + b"\n"
            try:
                if size > 0:
                    os.lseek(fd, size - 1, os.SEEK_SET)
                    if os.read(fd, 1) != b"\n":
                        data = b"\n" + data
                _write_whole(fd, data)
                os.fsync(fd)
            except OSError as exc:  # e.g. the disk is full: leave the file as it was, without a partial line
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise OutputNotWritable(f"cannot write to the results folder {self.root} ({exc.strerror}); units "
                                        f"stored so far are kept. Free space or choose another `--output`, then "
                                        f"run again to resume.") from None
        finally:
            os.close(fd)
        offset = size + len(data) - len(line) - 1
        if task in self._read:  # what this store read is extended, and the index with it when in step
            lines, _ = self._read[task]
            entry = StoredUnit.of(json.loads(line), offset, len(line) + 1)
            if lines.end == offset:
                self._append_index(task, [entry])
            lines.add(entry)
            self._read[task] = (lines, self._signature(task))

    @contextlib.contextmanager
    def lock(self, task: str, wait: bool) -> Iterator[bool]:
        """Hold ``task``'s lock for the block; yields False at once when another process
        holds it and ``wait`` is False. An ``flock`` on ``.locks/<task>.lock``: the system
        releases it when its holder ends, however it ends, so a lock is never stale.
        Where ``fcntl`` is missing (Windows) every lock is granted."""
        if fcntl is None:
            yield True
            return
        folder = self.root / ".locks"
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(inside(folder, task, ".lock"), os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def tasks(self) -> list[str]:
        """Names of the tasks with a results file (files whose name is not a valid task
        name, e.g. from a store written elsewhere, are ignored)."""
        return [p.stem for p in sorted(self.root.glob("*.jsonl")) if p.is_file() and valid_task_name(p.stem)]

    def load(self, task: str | None = None, units: Collection[str] | None = None,
             all_runs: bool = False) -> pd.DataFrame:
        """Result rows as a DataFrame: the newest line per unit id (every line with
        ``all_runs``), only the ids in ``units`` when given. Each row also gets its
        unit's ``unit`` id, ``run`` and ``inputs``.

        Rows come in the store's order, or, when ``units`` is a list or tuple (a task's
        plan), in that order: a page drawn from them then does not depend on the order
        in which units were stored (a Ray run stores them as they finish), down to the
        rounding of a sum."""
        tasks = [task] if task else self.tasks()
        records = []
        for name in tasks:
            entries = self._entries(name) if all_runs else list(self.read(name).units.values())
            if isinstance(units, (list, tuple)):
                order = {uid: i for i, uid in enumerate(units)}
                wanted = sorted((e for e in entries if e.unit in order), key=lambda e: order[e.unit])
            else:
                wanted = [e for e in entries if units is None or e.unit in units]
            for unit in self.fetch(name, wanted):
                extra = {"unit": unit["unit"], "run": unit["run"], "inputs": unit.get("inputs", {})}
                records += [{**row, **extra} for row in unit["rows"]]
        df = pd.DataFrame.from_records(records)
        for col in COLUMNS:
            if col not in df:
                df[col] = None
        return df


#: a row's ``seconds`` figure in a stored line (every row of a unit records the same)
_SECONDS = re.compile(rb'"seconds": ([0-9.eE+-]+)')


@dataclass(frozen=True)
class StoredUnit:
    """Where one unit line lies in its task's file (``offset``, ``length`` in bytes, the
    newline included), and what deciding what is done needs of it."""

    unit: str
    key: str  #: the displayed key as :func:`~relbench.identity.key_json` writes it ("" when none)
    ok: bool  #: not every row is an error
    run: str
    time: float
    offset: int
    length: int

    @property
    def end(self) -> int:
        """The offset just past the line's newline."""
        return self.offset + self.length

    @classmethod
    def of(cls, line: dict, offset: int, length: int) -> StoredUnit:
        """The entry of a parsed line stored at ``offset``."""
        ok = not (line["rows"] and all(r.get("status") == "error" for r in line["rows"]))
        return cls(line["unit"], key_json(line["key"]) if line.get("key") else "", ok, str(line.get("run", "")),
                   float(line.get("time", 0.0)), offset, length)

    def prefix(self) -> bytes:
        """How the line starts in the file (``{"unit": "<id>"``)."""
        return b'{"unit": ' + json.dumps(self.unit).encode()

    def format(self) -> str:
        """One tab-separated index line (JSON escapes keep tabs and newlines out of it)."""
        return "\t".join([str(self.offset), str(self.length), json.dumps(self.unit), "1" if self.ok else "0",
                          json.dumps(self.run), repr(self.time), self.key])

    @classmethod
    def parse(cls, row: str) -> StoredUnit:
        """The entry of an index line (``ValueError`` when it is not one)."""
        parts = row.split("\t")
        if len(parts) != 7 or parts[3] not in ("0", "1"):
            raise ValueError(row)
        unit, run = json.loads(parts[2]), json.loads(parts[4])
        if not isinstance(unit, str) or not isinstance(run, str):
            raise ValueError(row)
        return cls(unit, parts[6], parts[3] == "1", run, float(parts[5]), int(parts[0]), int(parts[1]))


@dataclass
class TaskLines:
    """One task's stored lines (their index entries), the newest per unit id and per
    displayed key; :meth:`ResultStore.fetch` reads the whole lines."""

    units: dict[str, StoredUnit] = field(default_factory=dict)
    by_display: dict[str, StoredUnit] = field(default_factory=dict)
    #: unit ids whose newest line succeeded (a unit whose every row is an error is not
    #: done, so the next run retries it)
    done: set[str] = field(default_factory=set)
    #: the byte offset just past the last line taken in
    end: int = 0

    def add(self, entry: StoredUnit) -> None:
        """Take a line (read or just written) into account; later lines win."""
        self.units[entry.unit] = entry
        if entry.key:
            self.by_display[entry.key] = entry
        if entry.ok:
            self.done.add(entry.unit)
        else:
            self.done.discard(entry.unit)
        self.end = max(self.end, entry.end)


def _unit(raw: bytes) -> tuple[dict | None, str]:
    """A stored unit line and "", or None and why the bytes are not one: not UTF-8, not
    JSON, JSON that is not ``{"unit": str, "rows": [{...}, ...], ...}``, or a row whose
    value is not a finite number (null is allowed on a row whose status is not ok)."""
    try:
        unit = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not UTF-8"
    except json.JSONDecodeError:
        return None, "not JSON"
    if not (isinstance(unit, dict) and isinstance(unit.get("unit"), str) and isinstance(unit.get("rows"), list)
            and all(isinstance(r, dict) for r in unit["rows"])):
        return None, "JSON that is not a unit line"
    for row in unit["rows"]:
        problem = _value_problem(row)
        if problem:
            where = f"unit {brief(repr(unit['unit']))}, metric {brief(repr(row.get('metric')))}"
            return None, f"{where}: {problem}"
    unit.setdefault("run", "")
    unit.setdefault("time", 0.0)
    return unit, ""


def _value_problem(row: dict) -> str:
    """Why a stored row's ``value`` cannot be shown as a score ("" when it can)."""
    value = row.get("value")
    if value is None:
        return "an ok row without a value" if row.get("status") == "ok" else ""
    return "" if finite_number(value) is not None else f"value {brief(repr(value))} is not a finite number"


def _write_whole(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (a ``write`` may take only part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _jsonable(obj):
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)
