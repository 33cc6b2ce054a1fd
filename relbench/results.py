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
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pandas as pd

try:
    import fcntl
except ImportError:  # not POSIX: runs on one store are not coordinated
    fcntl = None

from relbench.cache import atomic_write_bytes
from relbench.errors import OutputNotWritable
from relbench.identity import key_json
from relbench.names import inside, valid_task_name

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
        probe = folder / f".probe-{os.getpid()}"
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

    def _lines(self, task: str) -> list[dict]:
        """Every unit line of a task's file. A last line cut short by a kill is skipped
        (that unit is not done). Any other damaged line — not UTF-8, not JSON, JSON that is
        not a unit — and a file replaced by something else (a folder) are reported in
        :attr:`warnings`, kept in ``quarantine/`` beside the store, and removed from the
        file, so their units are recomputed and no later run trips over them."""
        path = self._file(task)
        if path.is_symlink() or (path.exists() and not path.is_file()):
            self._set_aside(path, task)
            return []
        if not path.exists():
            return []
        out, damaged = [], []
        data = path.read_bytes()
        raw_lines = data.split(b"\n")
        for number, raw in enumerate(raw_lines, 1):
            if not raw.strip():
                continue
            unit = _unit(raw)
            if unit is not None:
                out.append(unit)
            elif number < len(raw_lines):  # the unterminated last line is a kill's, not damage
                damaged.append((number, raw))
        if damaged:
            self._quarantine(path, task, damaged, raw_lines)
        return out

    def _quarantine(self, path: Path, task: str, damaged: list[tuple[int, bytes]], raw_lines: list[bytes]) -> None:
        """Keep damaged lines in ``quarantine/<task>.jsonl`` and rewrite the file without them."""
        bad = {n for n, _ in damaged}
        records = b"".join(json.dumps({"file": str(path), "line": n, "time": time.time(),
                                       "text": raw.decode("utf-8", errors="replace")}).encode() + b"\n"
                           for n, raw in damaged)
        quarantine = self._quarantine_file(task)
        with open(quarantine, "ab") as fh:
            fh.write(records)
            fh.flush()
            os.fsync(fh.fileno())
        kept = b"\n".join(raw for n, raw in enumerate(raw_lines, 1) if n not in bad)
        atomic_write_bytes(path, kept)
        self.warnings.append(f"{path}: {len(damaged)} damaged line(s) (line {', '.join(str(n) for n, _ in damaged[:5])}"
                             f"{' …' if len(damaged) > 5 else ''}) set aside in {quarantine}; their units are "
                             f"recomputed")

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
            for line in self._lines(task):
                lines.add(line)
            self._read[task] = (lines, self._signature(task))
        return self._read[task][0]

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
        short by a kill is first closed with a newline, so it stays the only casualty."""
        self.root.mkdir(parents=True, exist_ok=True)
        record = {"unit": unit, "key": key or {}, "inputs": inputs or {}, "run": run_id, "time": time.time(),
                  "rows": rows}
        line = json.dumps(record, default=_jsonable)
        path = self._file(task)
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
        except OSError as exc:
            raise OutputNotWritable(f"cannot write results file {path} ({exc.strerror}); it must be a plain file, "
                                    f"never a link. Move it away or choose another `--output`.") from None
        with os.fdopen(fd, "a+b") as fh:
            size = fh.seek(0, os.SEEK_END)
            try:
                if size > 0:
                    fh.seek(-1, os.SEEK_END)
                    if fh.read(1) != b"\n":
                        fh.write(b"\n")
                fh.write(line.encode("utf-8") + b"\n")
                fh.flush()
                os.fsync(fh.fileno())
            except OSError as exc:  # e.g. the disk is full: leave the file as it was
                fh.truncate(size)
                raise OutputNotWritable(f"cannot write to the results folder {self.root} ({exc.strerror}); units "
                                        f"stored so far are kept. Free space or choose another `--output`, then "
                                        f"run again to resume.") from None
        if task in self._read:
            lines, _ = self._read[task]
            lines.add(json.loads(line))
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

    def load(self, task: str | None = None, units: set[str] | None = None, all_runs: bool = False) -> pd.DataFrame:
        """Result rows as a DataFrame: the newest line per unit id (every line with
        ``all_runs``), only the ids in ``units`` when given. Each row also gets its
        unit's ``unit`` id, ``run`` and ``inputs``."""
        tasks = [task] if task else self.tasks()
        records = []
        for name in tasks:
            lines = self._lines(name) if all_runs else self.read(name).units.values()
            for unit in lines:
                if units is not None and unit["unit"] not in units:
                    continue
                extra = {"unit": unit["unit"], "run": unit["run"], "inputs": unit.get("inputs", {})}
                records += [{**row, **extra} for row in unit["rows"]]
        df = pd.DataFrame.from_records(records)
        for col in COLUMNS:
            if col not in df:
                df[col] = None
        return df


@dataclass
class TaskLines:
    """One task's stored lines, the newest per unit id and per displayed key."""

    units: dict[str, dict] = field(default_factory=dict)
    by_display: dict[str, dict] = field(default_factory=dict)

    def add(self, line: dict) -> None:
        """Take a line (read or just written) into account; later lines win."""
        if not isinstance(line, dict) or "unit" not in line or not isinstance(line.get("rows"), list):
            return
        self.units[line["unit"]] = line
        if line.get("key"):
            self.by_display[key_json(line["key"])] = line

    @property
    def done(self) -> set[str]:
        """Unit ids whose newest line succeeded (a unit whose every row is an error is
        not done, so the next run retries it)."""
        return {uid for uid, line in self.units.items()
                if not (line["rows"] and all(r.get("status") == "error" for r in line["rows"]))}


def _unit(raw: bytes) -> dict | None:
    """A stored unit line, or None when the bytes are not one (not UTF-8, not JSON, or
    JSON that is not ``{"unit": str, "rows": [{...}, ...], ...}``)."""
    try:
        unit = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not (isinstance(unit, dict) and isinstance(unit.get("unit"), str) and isinstance(unit.get("rows"), list)
            and all(isinstance(r, dict) for r in unit["rows"])):
        return None
    unit.setdefault("run", "")
    unit.setdefault("time", 0.0)
    return unit


def _jsonable(obj):
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)
