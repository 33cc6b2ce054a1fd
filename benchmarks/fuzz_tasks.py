"""Fuzz the tasks-file validation: every invalid file must get a clear user error.

Each case is seeded: ``random.Random(seed)`` picks one of the shipped tasks files
(tasks.yaml, tasks/quick.yaml, tasks/paper.yaml) and applies one to three mutations,
either to its parsed structure (loaded and dumped again with PyYAML's safe loader and
dumper) or to its raw bytes (duplicated top-level key, truncation, a byte that is not
UTF-8 or a control character, a tab). The mutant is written to a fresh folder and
``relbench.config.load_suite`` must either return a Suite (a *valid* mutant) or raise
``ConfigError`` (*refused*); then ``relbench run MUTANT --dry-run`` must exit 2 at once
with ``relbench: error:`` and no traceback on stderr. Anything else is a *failure*: a
different exception, a slow or noisy CLI, or a file or folder written anywhere under the
case's folder or the repository's results/ and leaderboards/ (validation writes
nothing).

Then come the hostile inputs (:data:`HOSTILE`): YAML alias bombs ("billion laughs") in
the places a string, a list of seeds or an integer is expected, 60,000 tasks, a chain of
3,000 includes, an include of /etc/passwd, named pipes, repeated and negative seeds,
deep nesting. Each runs as its own ``relbench run FILE --dry-run`` process (under a
4 GiB address-space limit), reported with its exit code, wall time, answer time (that of
the command alone, once Python, torch and the plugins are imported: the part hostile
input could stretch) and peak memory, next to those of a valid file; the last line
counts tracebacks (must be 0) and gives the largest peak memory (must stay under 1 GB
for inputs of at most 1 MB).

    python benchmarks/fuzz_tasks.py [--cases 3000] [--seed 0] [--hostile]

tests/test_fuzz_tasks.py imports this module and runs a bounded number of cases, and
every hostile input in-process.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("tasks.yaml", "tasks/quick.yaml", "tasks/paper.yaml")
#: folders of the repository that validation must never touch
REPO_FOLDERS = (ROOT / "results", ROOT / "leaderboards")
#: name of the mutant inside its case folder (an `include:` of it includes itself)
MUTANT_NAME = "tasks.yaml"
#: the CLI must refuse a file that load_suite refused within this many seconds
CLI_SECONDS = 10.0

WEIRD_STRINGS = ["", " ", "-", "none", "None", "a/b", "../x", "/abs", "a\x00b", "tab\there", "x" * 300,
                 "ünïcødé-名前-😀", " padded ", "\u200b", "line\nbreak"]
TASK_NAMES = ["../README", "/abs", "a/b", "README", "readme", "figures", "index", "-x", ".hidden", "x" * 300,
              "x" * 65, "ünïcødé", "名前", "", " ", "a b", "a\x00b", "con", "a\\b"]
LABELS = ["-", "none", "NONE", " none", "", " padded ", "x" * 101, "tab\tlabel", "a\x00b", ["a", "b"],
          {"name": "x"}, {}, [], 0, True, 1.5]
UNKNOWN_PLUGINS = ["no-such-plugin", "cosinee", "Cosine", "", " cosine", "relbench_relreps", "timm", "digits",
                   "relative", "accuracy", "stitching", "a\x00b", "x" * 300]
PARAM_VALUES = [0, -1, 1, 2**70, -(2**70), 10**12, float("nan"), float("inf"), float("-inf"), 0.5, -0.5, "", "x",
                None, [], [0], {}, True, False]
INCLUDES = [[MUTANT_NAME], ["."], [""], ["../README.md"], ["/dev/null"], ["no-such.yaml"], "a\x00b", ["a\x00b"],
            [str(ROOT / "README.md")], [str(ROOT / "tasks.yaml")], [str(ROOT / "tasks" / "quick.yaml")],
            [str(ROOT / "pyproject.toml")], [1], [None], [["x"]]]
SUITE_PATHS = ["", ".", "/", "a\x00b", "/dev/null", "../README.md", "~", "x" * 300, "/proc/no/such", "ünï/名前"]
SEEDS = [[-1], [2**40], [], [2**32], [2**32 - 1], [0, 0], [True], [0.5], ["0"]]
DEVICES = ["cuda:-1", "tpu", "CUDA", "cuda:", " cpu", "mps", "cuda:99999999999999999999", "auto\n"]
#: raw mutations almost always make the YAML unreadable: drawn less often, so that more
#: mutants reach the validation behind the parser
RAW_WEIGHT = 0.5
#: libyaml when installed (ten times faster; the same documents)
LOADER, DUMPER = getattr(yaml, "CSafeLoader", yaml.SafeLoader), getattr(yaml, "CSafeDumper", yaml.SafeDumper)
BAD_BYTES = [b"\xff", b"\xfe", b"\x80", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\x07", b"\x1b"]


# ----------------------------------------------------------------------------- structure


def _slots(node: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every (path, container, key) below ``node``, depth first (shared blocks once per alias)."""
    out = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, value in items:
        child = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else str(key)
        out.append((child, node, key))
        out += _slots(value, child)
    return out


def _tasks(tree: Any) -> list[dict]:
    """The task mappings of ``tree`` (none when `tasks:` is not a list)."""
    tasks = tree.get("tasks") if isinstance(tree, dict) else None
    return [t for t in tasks if isinstance(t, dict)] if isinstance(tasks, list) else []


def _spec_slots(tree: Any) -> list[tuple[str, Any, Any]]:
    """Every (path, container, key) holding a plugin spec: kind, dataset, encoders, grid
    lists and metrics of every task, and the suite's metrics."""
    out = []

    def add_list(path: str, specs: Any) -> None:
        if isinstance(specs, list):
            out.extend((f"{path}[{i}]", specs, i) for i in range(len(specs)))

    suite = tree.get("suite") if isinstance(tree, dict) else None
    if isinstance(suite, dict):
        add_list("suite.metrics", suite.get("metrics"))
    tasks = tree.get("tasks") if isinstance(tree, dict) else None
    for i, task in enumerate(tasks if isinstance(tasks, list) else []):
        if not isinstance(task, dict):
            continue
        out.extend((f"tasks[{i}].{key}", task, key) for key in ("kind", "dataset") if key in task)
        add_list(f"tasks[{i}].encoders", task.get("encoders"))
        add_list(f"tasks[{i}].metrics", task.get("metrics"))
        grid = task.get("grid")
        for key in grid if isinstance(grid, dict) else []:
            add_list(f"tasks[{i}].grid.{key}", grid[key])
    return out


def _settings_holders(tree: Any) -> list[tuple[str, dict]]:
    """The suite mapping and every task mapping (where seeds, num_anchors and device go)."""
    holders = [("suite", tree["suite"])] if isinstance(tree, dict) and isinstance(tree.get("suite"), dict) else []
    return holders + [(f"tasks[{i}]", t) for i, t in enumerate(_tasks(tree))]


def _other_value(rng: random.Random, current: Any) -> Any:
    """A value of a different type than ``current``."""
    choices = [None, rng.randint(0, 1000), -rng.randint(1, 1000), 2**70, float("nan"), float("inf"),
               float("-inf"), rng.uniform(-10, 10), rng.choice(WEIRD_STRINGS), [], [rng.randint(0, 9), "x"],
               [None], {}, {"name": "x"}, {"a": {"b": 1}}, rng.choice([True, False])]
    return rng.choice([c for c in choices if type(c) is not type(current)])


def _misspell(rng: random.Random, word: str) -> str:
    """A close misspelling of ``word`` (never ``word`` itself)."""
    for _ in range(10):
        i = rng.randrange(max(len(word), 1))
        edits = [word[:i] + word[i + 1:], word[:i] + word[i:i + 1] * 2 + word[i + 1:], word.upper(),
                 word + "s", word.rstrip("s"), word.replace("_", "-"), word.replace("-", "_"),
                 word[:i] + rng.choice("aeiouxz") + word[i + 1:], word.capitalize(), " " + word]
        if i + 1 < len(word):
            edits.append(word[:i] + word[i + 1] + word[i] + word[i + 2:])
        new = rng.choice(edits)
        if new != word:
            return new
    return word + "x"


def delete_key(tree: Any, rng: random.Random) -> str:
    """Delete a random mapping key anywhere."""
    slots = [s for s in _slots(tree) if isinstance(s[1], dict)]
    if not slots:
        return "delete: no key"
    path, container, key = rng.choice(slots)
    del container[key]
    return f"delete {path}"


def retype_value(tree: Any, rng: random.Random) -> str:
    """Replace a random value anywhere by one of another type."""
    path, container, key = rng.choice(_slots(tree) or [("<top>", None, None)])
    if container is None:
        return "retype: no value"
    value = _other_value(rng, container[key])
    container[key] = value
    return f"{path} = {value!r}"


def rename_key(tree: Any, rng: random.Random) -> str:
    """Rename a random mapping key to a close misspelling (keeping the key order)."""
    slots = [s for s in _slots(tree) if isinstance(s[1], dict) and isinstance(s[2], str)]
    if not slots:
        return "rename: no key"
    path, container, key = rng.choice(slots)
    new = _misspell(rng, key)
    items = [(new if k == key else k, v) for k, v in container.items()]
    container.clear()
    container.update(items)
    return f"rename {path} key {key!r} -> {new!r}"


def task_name(tree: Any, rng: random.Random) -> str:
    """Give a task a path-like, reserved, overlong, unicode or duplicate name."""
    tasks = _tasks(tree)
    if not tasks:
        return "task name: no task"
    index = rng.randrange(len(tasks))
    others = [t.get("name") for t in tasks if t is not tasks[index] and isinstance(t.get("name"), str)]
    tasks[index]["name"] = rng.choice(TASK_NAMES + [n.upper() for n in others[:1]] + others[:1])
    return f"task {index} name = {tasks[index]['name']!r}"


def label(tree: Any, rng: random.Random) -> str:
    """Set a plugin spec's label to a reserved, malformed or sibling's label."""
    slots = _spec_slots(tree)
    if not slots:
        return "label: no spec"
    path, container, key = rng.choice(slots)
    spec = container[key]
    if not isinstance(spec, dict):
        spec = {"name": spec}
    siblings = [s.get("label") for s in container if isinstance(s, dict) and s is not spec and "label" in s] \
        if isinstance(container, list) else []
    spec = dict(spec, label=rng.choice(LABELS + siblings[:1]))
    container[key] = spec
    return f"{path}.label = {spec['label']!r}"


def unknown_plugin(tree: Any, rng: random.Random) -> str:
    """Name a plugin that does not exist (or exists under another interface)."""
    slots = _spec_slots(tree)
    if not slots:
        return "plugin: no spec"
    path, container, key = rng.choice(slots)
    name = rng.choice(UNKNOWN_PLUGINS)
    container[key] = dict(container[key], name=name) if isinstance(container[key], dict) else name
    return f"{path} name = {name!r}"


def plugin_param(tree: Any, rng: random.Random) -> str:
    """Set a plugin parameter (existing or new) to an edge value."""
    specs = [(p, c, k) for p, c, k in _spec_slots(tree) if isinstance(c[k], dict)]
    if not specs:
        return "param: no spec"
    path, container, key = rng.choice(specs)
    params = container[key].get("params")
    params = dict(params) if isinstance(params, dict) else {}
    names = [k for k in params if isinstance(k, str)] or ["no_such_param"]
    name = rng.choice(names + ["no_such_param"])
    params[name] = rng.choice(PARAM_VALUES)
    container[key] = dict(container[key], params=params)
    return f"{path}.params.{name} = {params[name]!r}"


def num_anchors(tree: Any, rng: random.Random) -> str:
    """num_anchors 0, -1 or 10**12 on the suite or a task."""
    return _setting(tree, rng, "num_anchors", [0, -1, 10**12])


def seeds(tree: Any, rng: random.Random) -> str:
    """Seeds out of range, empty, repeated or of the wrong type on the suite or a task."""
    return _setting(tree, rng, "seeds", SEEDS)


def device(tree: Any, rng: random.Random) -> str:
    """A device that is not auto, cpu, cuda or cuda:N on the suite or a task."""
    return _setting(tree, rng, "device", DEVICES)


def _setting(tree: Any, rng: random.Random, key: str, values: list) -> str:
    """Set ``key`` of the suite or of a random task to one of ``values``."""
    holders = _settings_holders(tree)
    if not holders:
        return f"{key}: no holder"
    path, holder = rng.choice(holders)
    holder[key] = rng.choice(values)
    return f"{path}.{key} = {holder[key]!r}"


def include(tree: Any, rng: random.Random) -> str:
    """An `include:` of the file itself, a folder, a missing or non-YAML file, or a shipped suite."""
    if not isinstance(tree, dict):
        return "include: no top"
    tree["include"] = rng.choice(INCLUDES)
    return f"include = {tree['include']!r}"


def suite_path(tree: Any, rng: random.Random) -> str:
    """Point suite.output, leaderboards or cache_dir at an empty, odd or impossible path."""
    if not isinstance(tree, dict) or not isinstance(tree.get("suite"), dict):
        return "suite path: no suite"
    key = rng.choice(["output", "leaderboards", "cache_dir"])
    tree["suite"][key] = rng.choice(SUITE_PATHS)
    return f"suite.{key} = {tree['suite'][key]!r}"


STRUCTURAL: dict[str, Callable[[Any, random.Random], str]] = {
    f.__name__: f for f in (delete_key, retype_value, rename_key, task_name, label, unknown_plugin, plugin_param,
                            num_anchors, seeds, device, include, suite_path)}


# ----------------------------------------------------------------------------- raw text


def duplicate_key(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Append a copy of a random top-level key's block (a duplicate key)."""
    lines = data.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line[:1].isalpha() and b":" in line]
    if not starts:
        return data, "duplicate: no top-level key"
    start = rng.choice(starts)
    end = next((i for i in range(start + 1, len(lines)) if lines[i][:1].isalpha()), len(lines))
    block = b"".join(lines[start:end])
    return data.rstrip(b"\n") + b"\n" + block, f"duplicate top-level block {lines[start].split(b':')[0]!r}"


def truncate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Cut the file at a random byte (possibly inside a UTF-8 character)."""
    at = rng.randrange(len(data) + 1)
    return data[:at], f"truncate at byte {at}"


def bad_byte(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Insert a byte that is not UTF-8, or a control character, at a random offset."""
    at, byte = rng.randrange(len(data) + 1), rng.choice(BAD_BYTES)
    return data[:at] + byte + data[at:], f"insert {byte!r} at byte {at}"


def tab(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Insert a tab at the start of a random line or at a random offset."""
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A]
    at = rng.choice(starts) if rng.random() < 0.5 else rng.randrange(len(data) + 1)
    return data[:at] + b"\t" + data[at:], f"insert a tab at byte {at}"


RAW: dict[str, Callable[[bytes, random.Random], tuple[bytes, str]]] = {
    f.__name__: f for f in (duplicate_key, truncate, bad_byte, tab)}


# ----------------------------------------------------------------------------- cases


@dataclass
class Mutant:
    """One seeded mutant: its source file, the mutations applied, and its bytes."""

    seed: int
    source: str
    steps: list[str]
    data: bytes


def mutate(seed: int) -> Mutant:
    """The mutant of ``seed``: one to three mutations of a shipped tasks file, the
    structural ones first (on the parsed YAML, dumped again), then the raw ones."""
    rng = random.Random(seed)
    source = rng.choice(SOURCES)
    text = (ROOT / source).read_text(encoding="utf-8")
    names = list(STRUCTURAL) + list(RAW)
    weights = [1.0] * len(STRUCTURAL) + [RAW_WEIGHT] * len(RAW)
    chosen = rng.choices(names, weights, k=rng.choice([1, 1, 2, 3]))
    steps = []
    if any(name in STRUCTURAL for name in chosen):
        tree = yaml.load(text, Loader=LOADER)
        steps += [STRUCTURAL[name](tree, rng) for name in chosen if name in STRUCTURAL]
        text = yaml.dump(tree, Dumper=DUMPER, sort_keys=False, allow_unicode=True)
    data = text.encode("utf-8")
    for name in chosen:
        if name in RAW:
            data, step = RAW[name](data, rng)
            steps.append(step)
    return Mutant(seed, source, steps, data)


def listing(folder: Path, stat: bool = True) -> set[tuple]:
    """Every path under ``folder`` (relative), with size and mtime when ``stat``."""
    if not folder.exists():
        return set()
    out = set()
    for path in folder.rglob("*"):
        rel = str(path.relative_to(folder))
        if stat and path.is_file():
            info = path.stat()
            out.add((rel, info.st_size, info.st_mtime_ns))
        else:
            out.add((rel,))
    return out


@dataclass
class Outcome:
    """What one case did: ``valid`` (a Suite), ``refused`` (ConfigError and CLI exit 2)
    or ``failure``, with the reasons of a failure."""

    mutant: Mutant
    status: str
    problems: list[str] = field(default_factory=list)

    def report(self) -> str:
        """The failure's seed, mutations, problems and the mutated YAML."""
        text = self.mutant.data.decode("utf-8", errors="backslashreplace")
        return (f"seed {self.mutant.seed} ({self.mutant.source}): {'; '.join(self.mutant.steps)}\n"
                + "\n".join(self.problems) + f"\n--- mutated YAML ---\n{text}\n--- end ---")


def run_case(seed: int, folder: Path, registry, read_stderr: Callable[[], str]) -> Outcome:
    """Write the mutant of ``seed`` into ``folder/case`` and check load_suite and, when it
    refused, the CLI. ``folder`` is compared before and after (the case folder is removed
    afterwards); ``read_stderr`` returns what was printed to stderr since its last call."""
    from relbench.cli import main
    from relbench.config import Suite, load_suite
    from relbench.errors import ConfigError

    mutant = mutate(seed)
    case = folder / "case"
    case.mkdir()
    path = case / MUTANT_NAME
    path.write_bytes(mutant.data)
    before = listing(folder), [listing(f, stat=False) for f in REPO_FOLDERS]
    problems = []
    try:
        suite = load_suite(path, registry)
        status = "valid"
        if not isinstance(suite, Suite):
            problems.append(f"load_suite returned {type(suite).__name__}, not a Suite")
    except ConfigError as exc:
        status = "refused"
        if not str(exc).strip():
            problems.append("ConfigError with an empty message")
    except Exception:  # noqa: BLE001 - the point of the fuzz test: anything else is a bug
        status = "failure"
        problems.append("load_suite raised something other than ConfigError:\n" + traceback.format_exc())
    if status == "refused":
        read_stderr()
        t0 = time.perf_counter()
        try:
            code = main(["run", str(path), "--dry-run"])
        except (Exception, SystemExit):  # noqa: BLE001 - main() must return its code, never raise
            code = "raised:\n" + traceback.format_exc()
        seconds = time.perf_counter() - t0
        err = read_stderr()
        if code != 2 or "relbench: error:" not in err or "Traceback" in err or seconds > CLI_SECONDS:
            problems.append(f"`relbench run --dry-run` returned {code} after {seconds:.1f} s; stderr:\n{err}")
    after = listing(folder), [listing(f, stat=False) for f in REPO_FOLDERS]
    if after != before:
        changed = (before[0] ^ after[0]) | {p for b, a in zip(before[1], after[1]) for p in b ^ a}
        problems.append(f"validation wrote to disk: {sorted(changed)}")
    shutil.rmtree(case)
    return Outcome(mutant, "failure" if problems else status, problems)


def run_cases(seeds: range, folder: Path, registry, read_stderr: Callable[[], str]) -> list[Outcome]:
    """The outcomes of every seed in ``seeds`` (see :func:`run_case`)."""
    return [run_case(seed, folder, registry, read_stderr) for seed in seeds]


def summary(outcomes: list[Outcome]) -> str:
    """One line of counts: cases, valid, refused with exit 2, failures."""
    count = {s: sum(o.status == s for o in outcomes) for s in ("valid", "refused", "failure")}
    return (f"{len(outcomes)} cases: {count['valid']} valid, {count['refused']} refused with exit 2, "
            f"{count['failure']} failures")


# ----------------------------------------------------------------------------- hostile inputs

#: a valid tasks file of built-in plugins that the hostile inputs edit
HOSTILE_TASKS = """\
suite: {seeds: [0], num_anchors: 16}
tasks:
  - name: digits-hostile
    description: a valid task
    dataset: {name: digits, params: {train_size: 100, test_size: 50}}
    encoders:
      - {name: trained, label: mlp-a, params: {arch: mlp, seed: 0}}
      - {name: trained, label: mlp-b, params: {arch: mlp, seed: 1}}
    grid: {selectors: [random], similarities: [cosine], stitchers: [relative]}
"""
#: the largest input (all its files) whose peak memory must stay under PEAK_LIMIT
SMALL_INPUT = 10**6
PEAK_LIMIT = 10**9
#: seconds and bytes of address space one hostile input's process may take
HOSTILE_SECONDS, HOSTILE_ADDRESS_SPACE = 120, 4 * 2**30


def alias_bomb(levels: int = 9, width: int = 9) -> tuple[str, str]:
    """Top-level ``x-`` anchors, each a list of ``width`` aliases of the one before
    (``width ** levels`` strings once expanded, a few hundred bytes written), and the
    alias of the last."""
    lines = [f"x-a0: &a0 [{', '.join(['lol'] * width)}]"]
    lines += [f"x-a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n", f"*a{levels - 1}"


def _edited(folder: Path, old: str, new: str, prefix: str = "", suffix: str = "") -> Path:
    """:data:`HOSTILE_TASKS` with ``old`` replaced by ``new``, written to ``folder``."""
    assert old in HOSTILE_TASKS, old
    path = folder / MUTANT_NAME
    path.write_text(prefix + HOSTILE_TASKS.replace(old, new, 1) + suffix, encoding="utf-8")
    return path


def _bomb(old: str, new: str) -> Callable[[Path], Path]:
    """An input with an alias bomb where ``old`` is (``BOMB`` in ``new`` is its alias)."""
    def write(folder: Path) -> Path:
        anchors, alias = alias_bomb()
        return _edited(folder, old, new.replace("BOMB", alias), prefix=anchors)
    return write


def _many_tasks(folder: Path, count: int = 60_000) -> Path:
    head, task = HOSTILE_TASKS.split("tasks:\n")
    path = folder / MUTANT_NAME
    with path.open("w", encoding="utf-8") as out:
        out.write(head + "tasks:\n")
        for i in range(count):
            out.write(task.replace("name: digits-hostile", f"name: digits-hostile-{i}"))
    return path


def _aliased_tasks(folder: Path, count: int = 60_000) -> Path:
    head, task = HOSTILE_TASKS.split("tasks:\n")
    anchor = "x-task: &task\n" + task.replace("  - name:", "    name:", 1)
    return _write(folder, head + anchor + "tasks: [" + ", ".join(["*task"] * count) + "]\n")


def _include_chain(folder: Path, depth: int = 3000) -> Path:
    for i in range(depth - 1):
        (folder / f"chain-{i}.yaml").write_text(f"include: [chain-{i + 1}.yaml]\n", encoding="utf-8")
    (folder / f"chain-{depth - 1}.yaml").write_text(HOSTILE_TASKS.split("\n", 1)[1], encoding="utf-8")
    return folder / "chain-0.yaml"


def _fifo(folder: Path) -> Path:
    os.mkfifo(folder / "pipe.yaml")
    return folder / "pipe.yaml"


def _fifo_include(folder: Path) -> Path:
    _fifo(folder)
    return _edited(folder, "tasks:", "include: [pipe.yaml]\ntasks:")


def _write(folder: Path, text: str) -> Path:
    path = folder / MUTANT_NAME
    path.write_text(text, encoding="utf-8")
    return path


#: name → writer of one hostile input into an empty folder (returns the tasks file)
HOSTILE: dict[str, Callable[[Path], Path]] = {
    "bomb in a description": _bomb("description: a valid task", "description: BOMB"),
    "bomb as seeds": _bomb("seeds: [0]", "seeds: BOMB"),
    "bomb in a plugin parameter": _bomb("seed: 0}", "seed: 0, epochs: BOMB}"),
    "bomb as a label": _bomb("label: mlp-a", "label: BOMB"),
    "bomb as a task name": _bomb("name: digits-hostile", "name: BOMB"),
    "bomb as a plugin name": _bomb("stitchers: [relative]", "stitchers: [{name: BOMB}]"),
    "60,000 tasks": _many_tasks,
    "60,000 aliases of one task": _aliased_tasks,
    "10,001 aliases of one task": lambda folder: _aliased_tasks(folder, 10_001),
    "3,000 nested includes": _include_chain,
    "include of /etc/passwd": lambda folder: _edited(folder, "tasks:", "include: [/etc/passwd]\ntasks:"),
    "a named pipe as tasks file": _fifo,
    "include of a named pipe": _fifo_include,
    "repeated seeds": lambda folder: _edited(folder, "seeds: [0]", "seeds: [0, 0]"),
    "a data set's seed -1": lambda folder: _edited(folder, "test_size: 50}", "test_size: 50, seed: -1}"),
    "lists nested 900 deep": lambda folder: _edited(folder, "seeds: [0]", "seeds: " + "[" * 900 + "]" * 900),
    "an alias inside itself": lambda folder: _edited(folder, "seeds: [0]", "seeds: &loop [*loop]"),
    "a 13th month": lambda folder: _edited(folder, "a valid task", "2024-13-45"),
    "an integer of 5,000 digits": lambda folder: _edited(folder, "seeds: [0]", f"seeds: [{'9' * 5000}]"),
    "30,000 seeds": lambda folder: _edited(folder, "seeds: [0]", f"seeds: [{', '.join(map(str, range(30_000)))}]"),
    "a grid of 1,000 × 1,000 entries": lambda folder: _edited(
        folder, "similarities: [cosine], stitchers: [relative]",
        "similarities: [" + ", ".join(f"{{name: cosine, label: c{i}}}" for i in range(1000)) + "], stitchers: ["
        + ", ".join(f"{{name: relative, label: r{i}}}" for i in range(1000)) + "]"),
}


#: one hostile input's process: imports relbench and the plugins, then times the command
DRIVER = """\
import sys, time
from relbench.plugins import load_registry
load_registry()
from relbench.cli import main
t0 = time.perf_counter()
try:
    code = main(sys.argv[1:])
finally:
    print(f"{ANSWER}{time.perf_counter() - t0:.3f}", file=sys.stderr)
sys.exit(code)
"""
ANSWER = "fuzz_tasks answer seconds: "


@dataclass
class HostileOutcome:
    """One ``relbench run FILE --dry-run`` process: its input's size (every file written
    for it), exit code, wall and answer seconds, peak resident memory and stderr."""

    name: str
    size: int
    code: int
    seconds: float
    answer: float
    peak: int
    stderr: str
    folder: Path

    @property
    def message(self) -> str:
        """The error line of stderr (else its last line), without the input's folder."""
        lines = [line for line in self.stderr.splitlines() if line.strip() and not line.startswith(ANSWER)]
        line = next((line for line in lines if line.startswith("relbench: error:")), lines[-1] if lines else "")
        return line.replace(f"{self.folder}{os.sep}", "")

    @property
    def traceback(self) -> bool:
        """Whether the process printed a traceback."""
        return "Traceback (most recent call last)" in self.stderr


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (HOSTILE_ADDRESS_SPACE, HOSTILE_ADDRESS_SPACE))


def run_dry(name: str, path: Path, size: int) -> HostileOutcome:
    """``relbench run PATH --dry-run`` in a fresh process (address space limited, killed
    after :data:`HOSTILE_SECONDS`), measured with ``wait4``: only that child's peak."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", DRIVER.replace("{ANSWER}", ANSWER), "run", str(path),
                                 "--dry-run"],
                                cwd=path.parent, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                preexec_fn=_limit_address_space)
        watchdog = threading.Timer(HOSTILE_SECONDS, proc.kill)
        watchdog.start()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        watchdog.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode("utf-8", errors="backslashreplace")
    answer = next((float(line[len(ANSWER):]) for line in stderr.splitlines() if line.startswith(ANSWER)), math.nan)
    return HostileOutcome(name, size, proc.returncode, seconds, answer, usage.ru_maxrss * 1024, stderr, path.parent)


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def run_hostile(folder: Path) -> tuple[HostileOutcome, list[HostileOutcome]]:
    """The valid :data:`HOSTILE_TASKS` (the baseline) and every hostile input, each in
    its own process and folder under ``folder``."""
    base = folder / "baseline"
    base.mkdir()
    baseline = run_dry("baseline: a valid file", _write(base, HOSTILE_TASKS), _folder_bytes(base))
    outcomes = []
    for i, (name, write) in enumerate(HOSTILE.items()):
        case = folder / f"hostile-{i}"
        case.mkdir()
        path = write(case)
        outcomes.append(run_dry(name, path, _folder_bytes(case)))
    return baseline, outcomes


def hostile_report(baseline: HostileOutcome, outcomes: list[HostileOutcome]) -> tuple[str, bool]:
    """A table (input, size, exit, wall, wall over the baseline, peak memory, the error's
    start), a summary line, and whether every input was refused cleanly: exit 2, no
    traceback, and under :data:`PEAK_LIMIT` for inputs of at most :data:`SMALL_INPUT`."""
    rows = [f"{'input':<28} {'size':>9} {'exit':>4} {'wall s':>7} {'answer s':>8} {'peak MB':>7}  message"]
    for o in [baseline] + outcomes:
        rows.append(f"{o.name[:28]:<28} {o.size / 1e3:>7.1f}KB {o.code:>4} {o.seconds:>7.2f} {o.answer:>8.3f} "
                    f"{o.peak / 1e6:>7.0f}  {o.message[:120]}")
    tracebacks = sum(o.traceback for o in outcomes)
    small = [o.peak for o in outcomes if o.size <= SMALL_INPUT]
    refused = sum(o.code == 2 and not o.traceback for o in outcomes)
    ok = tracebacks == 0 and refused == len(outcomes) and max(small, default=0) <= PEAK_LIMIT
    rows.append(f"{len(outcomes)} hostile inputs: {tracebacks} tracebacks, {refused} refused with exit 2; max peak "
                f"memory {max(o.peak for o in outcomes) / 1e6:.0f} MB ({max(small, default=0) / 1e6:.0f} MB over "
                f"inputs ≤ {SMALL_INPUT / 1e6:.0f} MB, limit {PEAK_LIMIT / 1e9:.0f} GB); slowest answer "
                f"{max(o.answer for o in outcomes):.3f} s, wall {max(o.seconds for o in outcomes):.2f} s (a valid "
                f"file: {baseline.answer:.3f} s, {baseline.seconds:.2f} s, {baseline.peak / 1e6:.0f} MB)")
    return "\n".join(rows), ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=3000, help="number of seeded cases (default 3000)")
    parser.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--hostile", action="store_true", help="run only the hostile inputs")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="relbench-hostile-") as tmp:
        os.environ["RELBENCH_CACHE_DIR"] = str(Path(tmp) / "cache")
        report, hostile_ok = hostile_report(*run_hostile(Path(tmp)))
    print(report, end="\n\n")
    if args.hostile:
        sys.exit(0 if hostile_ok else 1)
    from relbench.plugins import load_registry

    registry = load_registry()
    stderr = io.StringIO()

    def read_stderr() -> str:
        text = stderr.getvalue()
        stderr.seek(0)
        stderr.truncate()
        return text

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="relbench-fuzz-") as tmp:
        os.environ["RELBENCH_CACHE_DIR"] = str(Path(tmp) / "cache")
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            outcomes = run_cases(range(args.seed, args.seed + args.cases), Path(tmp), registry, read_stderr)
    failures = [o for o in outcomes if o.status == "failure"]
    for outcome in failures:
        print(outcome.report(), end="\n\n")
    print(f"{summary(outcomes)} ({time.perf_counter() - t0:.0f} s)")
    sys.exit(1 if failures or not hostile_ok else 0)


if __name__ == "__main__":
    main()
