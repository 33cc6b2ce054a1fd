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

Beside each file, ``.index/<task>.tsv`` (:mod:`relbench.result_index`) says where each
line lies and what the hot path needs of it (unit id, displayed key, whether it
succeeded, run, time), so that deciding what is done reads a few hundred bytes per unit
and parses no JSON: superseded lines (history) cost nothing there. The index is derived
data: it is checked against the file on every read (each entry must point at the start
of a line of its unit), extended with lines another process appended, and rebuilt from
the file when anything disagrees.

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
from functools import lru_cache
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: runs on one store are not coordinated
    fcntl = None

from relbench import deferred
from relbench.errors import OutputNotWritable
from relbench.names import inside, valid_task_name
from relbench.result_index import LineIndex, StoredUnit, TaskLines, unit_line

pd = deferred.load("pandas")

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


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else the platform's), or ``unknown CPU``."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name") and ":" in line:
                return line.split(":", 1)[1].strip() or "unknown CPU"
    return platform.processor() or "unknown CPU"


#: how :func:`environment` names torch's thread count ("torch threads 1")
THREADS_PREFIX = "torch threads "


def threads_named(environment: object) -> int | None:
    """The torch thread count an :func:`environment` line names (None for lines of
    rows stored before it was recorded)."""
    for part in str(environment or "").split(","):
        part = part.strip()
        if part.startswith(THREADS_PREFIX) and part[len(THREADS_PREFIX):].isdigit():
            return int(part[len(THREADS_PREFIX):])
    return None


def environment() -> str:
    """Python, torch, operating system, CPU model, the CPU kernels torch dispatches to
    (``AVX2``, ``AVX512``, …: they decide how a matrix product sums, hence its last bits),
    torch's thread count when the unit was stored (it splits a product's sums too: exact
    where the run fixes it, ``relbench run --threads N`` and every release; a ``-j``
    run's workers may share idle cores during a unit), CPU cores and GPU (when one is
    visible), on one line."""
    import torch

    machine, cores = _fixed_environment()
    return f"{machine}, {THREADS_PREFIX}{torch.get_num_threads()}, {cores}"


@lru_cache(maxsize=1)
def _fixed_environment() -> tuple[str, str]:
    """What :func:`environment` names that cannot change while a process runs: the
    software and CPU, then the cores and GPU."""
    import torch

    machine = [f"Python {platform.python_version()}", f"torch {torch.__version__}",
               f"{platform.system()} {platform.machine()}", f"CPU {cpu_model().replace(',', ' ')}",
               f"{torch.backends.cpu.get_cpu_capability()} kernels"]
    cores = [f"{os.cpu_count()} CPU cores"]
    if torch.cuda.is_available():
        cores.append(f"GPU {torch.cuda.get_device_name(0)}")
    return ", ".join(machine), ", ".join(cores)


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
        self.index = LineIndex(self.root, self.warnings)

    def ensure_writable(self) -> None:
        """Fail early, with a fix, when the output folder cannot be written."""
        ensure_writable_dir(self.root, "The output directory", "`suite.output` in the tasks file or "
                                                              "`relbench run --output DIR`")

    def figure_path(self, task: str, filename: str) -> Path:
        """Where a figure drawn while running ``task`` is kept. Figures such as
        reconstructions need the trained models, so they are results, not renderings:
        ``relbench leaderboard`` copies them next to the page."""
        return inside(self.root / "figures", task) / Path(filename).name

    def read(self, task: str) -> TaskLines:
        """The newest line per unit id and per displayed key. Read once, kept up to date
        by :meth:`append`, and read again when another process (a ``-j`` worker, a second
        run) changed the file since."""
        signature = self._signature(task)
        cached = self._read.get(task)
        if cached is None or cached[1] != signature:
            lines = TaskLines()
            for entry in self.index.entries(task):
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
        with open(self.index.file(task), "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            lines = [unit_line(data[e.offset:e.end])[0] for e in entries]
        if None in lines:
            with contextlib.suppress(OSError):
                self.index.index_file(task).unlink(missing_ok=True)
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
        with open(self.index.file(task), "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
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
            st = os.stat(self.index.file(task), follow_symlinks=False)
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
        path = self.index.file(task)
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
                self.index.append_index(task, [entry])
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
            entries = self.index.entries(name) if all_runs else list(self.read(name).units.values())
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


def _write_whole(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (a ``write`` may take only part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _jsonable(obj):
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)
