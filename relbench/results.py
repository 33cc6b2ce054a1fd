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

import json
import os
import platform
import subprocess
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pandas as pd

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
        self._read: dict[str, TaskLines] = {}

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
        path = self._file(task)
        if not path.exists():
            return []
        out = []
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a unit cut short by a kill: not done
        return out

    def read(self, task: str) -> TaskLines:
        """The newest line per unit id and per displayed key (read once, then kept up to
        date by :meth:`append`)."""
        if task not in self._read:
            lines = TaskLines()
            for line in self._lines(task):
                lines.add(line)
            self._read[task] = lines
        return self._read[task]

    def append(self, task: str, unit: str, rows: list[dict], run_id: str, key: dict | None = None,
               inputs: dict | None = None) -> None:
        """Append one finished unit atomically (one write + fsync). A last line cut
        short by a kill is first closed with a newline, so it stays the only casualty."""
        self.root.mkdir(parents=True, exist_ok=True)
        record = {"unit": unit, "key": key or {}, "inputs": inputs or {}, "run": run_id, "time": time.time(),
                  "rows": rows}
        line = json.dumps(record, default=_jsonable)
        path = self._file(task)
        with open(path, "a+b") as fh:
            if fh.tell() > 0:
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    fh.write(b"\n")
            fh.write(line.encode("utf-8") + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        if task in self._read:
            self._read[task].add(json.loads(line))

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


def _jsonable(obj):
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)
