"""The results store's index: where each unit line of a task's file lies, and what
deciding what is done needs of it.

``.index/<task>.tsv`` beside the task files holds one :class:`StoredUnit` per line
(offset, length, unit id, displayed key, whether it succeeded, run, time), so that
deciding what is done parses no JSON. :class:`LineIndex` checks the index against the
file on every read (each entry must point at the start of a line of its unit), extends
it with lines another process appended, and rebuilds it from the file when anything
disagrees. A damaged line (:func:`unit_line` says why) is kept in ``quarantine/`` and
removed from the file, so that its unit is recomputed; the damage is reported in the
store's warnings.
"""

from __future__ import annotations

import json
import mmap
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from relbench.cache import atomic_write_bytes
from relbench.identity import key_json
from relbench.names import inside
from relbench.rows import brief, finite_number

#: the folder of the indexes beside the task files, and the first line of an index
#: (version 2: lines are checked for values that are not numbers, which version 1 indexed)
INDEX_FOLDER = ".index"
INDEX_HEADER = "relbench-results-index\t2"


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
    displayed key; :meth:`~relbench.results.ResultStore.fetch` reads the whole lines."""

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


def unit_line(raw: bytes) -> tuple[dict | None, str]:
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


class LineIndex:
    """The index and the damage checks of the task files under ``root``; damage found is
    reported in ``warnings`` (the store's list)."""

    def __init__(self, root: Path, warnings: list[str]):
        self.root = root
        self.warnings = warnings

    def file(self, task: str) -> Path:
        """A task's results file."""
        return inside(self.root, task, ".jsonl")

    def scan(self, task: str, start: int = 0) -> list[StoredUnit] | None:
        """Index the unit lines of a task's file from byte ``start`` on. A last line cut
        short by a kill is skipped (that unit is not done). Any other damaged line — not
        UTF-8, not JSON, JSON that is not a unit, a row whose value is not a finite
        number — is reported in :attr:`warnings` (with why), kept in
        ``quarantine/`` beside the store and removed from the file (so its unit is
        recomputed and no later run trips over it); then None is returned, since the
        file's offsets moved."""
        path = self.file(task)
        with open(path, "rb") as fh:
            fh.seek(start)
            data = fh.read()
        out, damaged = [], []
        raw_lines = data.split(b"\n")
        offset = start
        for number, raw in enumerate(raw_lines, 1):
            terminated = number < len(raw_lines)
            if raw.strip():
                unit, why = unit_line(raw)
                if unit is not None and terminated:
                    out.append(StoredUnit.of(unit, offset, len(raw) + 1))
                elif terminated:  # the unterminated last line is a kill's, not damage
                    damaged.append((number, raw, why))
            offset += len(raw) + 1
        if damaged:
            self._quarantine(path, task, damaged, start)
            return None
        return out

    def entries(self, task: str) -> list[StoredUnit]:
        """Every unit line of a task's file, from the index where it agrees with the file
        (extended with lines appended since), else by reading the file anew. A file
        replaced by something else (a folder, a link) is set aside and reads as empty."""
        path = self.file(task)
        if path.is_symlink() or (path.exists() and not path.is_file()):
            self._set_aside(path, task)
            return []
        if not path.exists():
            return []
        entries = self._checked_index(task)
        if entries is None:
            entries = self.scan(task) or self.scan(task) or []  # a second scan after setting damage aside
            self._write_index(task, entries)
            return entries
        start = entries[-1].end if entries else 0
        if start < path.stat().st_size:
            new = self.scan(task, start)
            if new is None:  # damage was set aside and the file rewritten: index it anew
                entries = self.scan(task) or []
                self._write_index(task, entries)
                return entries
            entries += new
            self.append_index(task, new)
        return entries

    def index_file(self, task: str) -> Path:
        """Where a task's index is kept."""
        return inside(self.root / INDEX_FOLDER, task, ".tsv")

    def _checked_index(self, task: str) -> list[StoredUnit] | None:
        """The index's entries when every one points at the start of a line of its unit
        in the file (in increasing order, each ending with a newline) and nothing but
        blank lines lies between two of them; else None. (An entry can go missing: a
        reader that rebuilds the index replaces the file whole, and a worker's entry
        appended meanwhile goes with it; the worker's next entry then follows a gap.)"""
        try:
            text = self.index_file(task).read_text(encoding="utf-8")
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
            with open(self.file(task), "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                end = 0
                for e in entries:
                    prefix = e.prefix()
                    if (e.offset < end or data[end:e.offset].strip()
                            or data[e.offset:e.offset + len(prefix)] != prefix or data[e.end - 1:e.end] != b"\n"):
                        return None
                    end = e.end
        except (OSError, ValueError):  # an empty file cannot be mapped
            return None if entries else []
        return entries

    def _write_index(self, task: str, entries: list[StoredUnit]) -> None:
        try:
            atomic_write_bytes(self.index_file(task),
                               "\n".join([INDEX_HEADER, *(e.format() for e in entries)]).encode() + b"\n")
        except OSError:  # the index is an optimisation: a store that cannot hold it still works
            pass

    def append_index(self, task: str, entries: list[StoredUnit]) -> None:
        """Add entries to the index (one ``write``, so a concurrent reader sees whole
        lines). A missing index is started when the entries start the file, else left
        to the next read, which writes it whole."""
        path = self.index_file(task)
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
