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

    python benchmarks/fuzz_tasks.py [--cases 3000] [--seed 0]

tests/test_fuzz_tasks.py imports this module and runs a bounded number of cases.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import shutil
import sys
import tempfile
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=3000, help="number of seeded cases (default 3000)")
    parser.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
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
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
