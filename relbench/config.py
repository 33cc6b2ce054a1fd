"""tasks.yaml: loading, composition and validation.

The schema (every key optional unless marked)::

    suite:                       # defaults for every task
      seeds: [0, 1, 2]           # list of ints
      device: auto               # auto | cpu | cuda  (auto = cuda when available)
      precision: fp32            # fp32 | bf16: heavy loops that opt in run under bf16 autocast (relbench.precision);
                                 # `relbench run --precision P` sets every task's
      num_anchors: 300           # anchors per selector (int)
      batch_size: 64             # encoding batch size (halved on CUDA out-of-memory)
      metrics: [accuracy, weighted_f1]
      output: results            # results store directory (relative to the YAML file)
      leaderboards: leaderboards # where `relbench run` draws its pages (the release: `relbench publish`)
      smoke: false               # true: a smoke suite (a check that everything runs), never for citation
      cache_dir: null            # embedding cache; default $RELBENCH_CACHE_DIR or ~/.cache/relbench
      executor: local            # local | ray (relbench.ray_executor); `relbench run --executor` overrides it
      protocol:                  # what each seed draws (relbench.protocol); a task's keys override these
        train_size: 5000         # training samples per seed, drawn from the data set's pool (null = all)
        test_size: 2000          # test samples per seed (null = all)
        validation: 0.2          # fraction of the training draw held out to choose tunable constants
        evaluation: inductive    # inductive | transductive (heads normalise over the evaluated split)
    include: [tasks/more.yaml]   # tasks of other files, appended (their suite: is ignored)
    x-anything: ...              # top-level keys starting with x- are ignored: define YAML anchors there
    tasks:                       # required: a non-empty list
      - name: digits-cross-seed  # required, unique
        kind: stitching          # task kind plugin (default: the installed kind marked is_default), or {name:, params:}
        description: text shown on the leaderboard page
        dataset: digits          # required: dataset plugin, or {name:, params:}
        encoders:                # list of encoder plugins (required unless the kind trains its own), each
          - {name: trained, label: mlp-s0, view: image, params: {arch: mlp, seed: 0}}
        grid:                    # the axes the kind declares (TaskKind.axes), each a list of plugin specs;
                                 # an axis that allows it may hold `none`. Stitching's four:
          selectors: [random, stratified]
          similarities: [cosine]
          stitchers: [relative, absolute]
          regularizers: [none]  # the one of the four that may hold `none` (omitted: [none])
        metrics, seeds, num_anchors, device, precision, batch_size, protocol: override the suite's
        published:               # numbers from a paper, shown next to ours on the leaderboard
          - {stitcher: relative, source: rexnet, target: vit-b, metric: weighted_f1,
             value: 0.7681, reference: "Moschella et al. 2023, Table 6",
             differs: "encoders at 128 px; 5 head epochs; 300 anchors"}   # what differs here (a note)
          # without source/target: compared with the mean over stitched (off-diagonal) pairs
        claims:                  # orderings a paper reports, checked on this task's results
          - claim: relative decoders stitch far better than absolute heads
            better: {stitcher: relative}   # rows matching these grid labels …
            worse: {stitcher: absolute}    # … should beat these (measure: score | achievable)
            margin: 0.01                   # the smallest difference that counts (default: the metric's)
            test: superiority              # or non-inferiority: "at least as good", within the margin
            paper: "Moschella et al. 2023, Table 6; differs: …"  # the setting it stands for, what differs

A plugin spec is a name (``cosine``) or a mapping ``{name: cosine, params: {...},
label: cosine-centred}``; the label (default: the name, plus the parameters that differ
from the defaults) is what results and leaderboards show. A parameter called ``seed`` or
``…_seed`` (a list: ``seeds``, ``…_seeds``) is checked like ``seeds:``. YAML anchors and
aliases work for sharing blocks. Every error names the file, line and key path, what was
expected and close matches for misspelt names, quoting at most 200 characters of a value.

Limits, each refused at once with its file and line: a tasks file and the files it
includes hold at most 1 MiB of YAML (:data:`MAX_SUITE_BYTES`) and 10,000 tasks
(:data:`MAX_TASKS`) together, in a chain of at most 32 files (:data:`MAX_INCLUDE_DEPTH`);
one file holds at most 1,000,000 values, each alias counted as a copy of its anchor's
value (:data:`MAX_YAML_VALUES`), nested at most 64 levels (:data:`MAX_YAML_DEPTH`); a
task asks for at most 20,000 units of work (:data:`MAX_TASK_UNITS`) and the suite for
100,000 (:data:`MAX_SUITE_UNITS`), each bounded by :func:`unit_bound`. A tasks file or
include must be a regular file (not a folder, named pipe or device).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import os
import re
import stat
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from relbench.errors import TEXT_LIMIT, ConfigError, UnknownPlugin, short_repr, short_text
from relbench.interfaces import Axis
from relbench.names import RESERVED_NAMES, valid_task_name
from relbench.plugins import Registry, did_you_mean
from relbench.precision import DEFAULT as DEFAULT_PRECISION
from relbench.precision import PRECISION_ENV, PRECISIONS, override
from relbench.protocol import MAX_VALIDATION, EvaluationProtocol, check_similarities
from relbench.task_model import EncoderSpec, PluginSpec, Suite, Task

SUITE_KEYS = {"seeds", "device", "precision", "num_anchors", "batch_size", "metrics", "output", "leaderboards", "cache_dir",
              "protocol", "executor", "smoke"}
#: where a run computes its units: this process (or ``-j N`` local workers), or a Ray cluster
EXECUTORS = ("local", "ray")
TOP_KEYS = {"suite", "include", "tasks"}
TASK_KEYS = {"name", "kind", "description", "dataset", "encoders", "grid", "metrics", "seeds", "protocol",
             "num_anchors", "device", "precision", "batch_size", "published", "claims"}
CLAIM_KEYS = {"claim", "better", "worse", "measure", "metric", "margin", "test", "paper"}
#: what a score claim may test: a strict ordering, or "at least as good" within the margin
CLAIM_TESTS = ("superiority", "non-inferiority")
PUBLISHED_KEYS = {"metric", "value", "reference", "differs"}  # plus the task kind's columns
SPEC_KEYS = {"name", "params", "label"}
ENCODER_KEYS = SPEC_KEYS | {"view"}
NONE = "none"
EXTENSION_PREFIX = "x-"  # top-level keys ignored by validation: homes for YAML anchors

#: a label is shown in tables and figure titles: printable, at most 100 characters
LABEL_MAX = 100
#: what an empty part of a combination is shown as; no label may take it
RESERVED_LABELS = {"-", NONE}
#: seeds reach numpy and torch generators: 0 ≤ seed < 2³²
SEED_RANGE = range(0, 2**32)
DEVICE = re.compile(r"auto|cpu|cuda(:[0-9]+)?")
#: a plugin parameter called ``seed``, ``seeds`` or ``…_seed(s)`` holds seeds, checked like ``seeds:``
SEED_PARAM = re.compile(r"(?:.*_)?seeds?")

# What one suite may hold (the shipped tasks files use a few percent of each); beyond
# these a tasks file is refused at once, before it can take minutes or gigabytes.
#: bytes of YAML: the tasks file and every file it includes, together
MAX_SUITE_BYTES = 2**20
#: tasks, over the tasks file and every file it includes
MAX_TASKS = 10_000
#: files in a chain of ``include:`` (the tasks file is the first)
MAX_INCLUDE_DEPTH = 32
#: YAML values (scalars, lists, mappings) of one file, each alias counted as a copy of
#: its anchor's value: bounds what a few nested aliases can multiply into ("billion laughs")
MAX_YAML_VALUES = 1_000_000
#: levels of lists and mappings inside one another
MAX_YAML_DEPTH = 64
#: units of work one task may ask for, bounded by :func:`unit_bound` (the default suite's
#: largest task asks for 1,350): a few lines of seeds or grid entries must not plan for
#: minutes into gigabytes
MAX_TASK_UNITS = 20_000
#: the same over the whole suite (the default suite: 1,921)
MAX_SUITE_UNITS = 100_000


# ----------------------------------------------------------------------------- YAML with lines


class _Map(dict):
    """A mapping that remembers the line of each key (1-based)."""

    line: int = 0
    lines: dict


class _Seq(list):
    """A list that remembers the line of each item (1-based)."""

    line: int = 0
    lines: list


class _Refused(yaml.YAMLError):
    """A YAML document refused before it is built: too large once its aliases are
    expanded, nested too deep, or containing itself."""

    def __init__(self, problem: str, mark: Any):
        super().__init__(problem)
        self.problem, self.problem_mark = problem, mark


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a document that expands (every alias a copy of its anchor's value) to more
    than :data:`MAX_YAML_VALUES` values or :data:`MAX_YAML_DEPTH` levels, or whose alias
    refers to a value containing it. The work is linear in the nodes of the file: each
    node is measured once, however many aliases share it."""
    measured: dict[int, tuple[int, int]] = {}  # id(node) -> (values, depth) once expanded
    open_nodes: set[int] = set()  # begun but not finished: the ancestors of the node popped
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            parts = [measured[id(child)] for child in _children(node)]
            values, depth = 1 + sum(p[0] for p in parts), 1 + max((p[1] for p in parts), default=0)
            measured[key] = values, depth
            open_nodes.discard(key)
            if values > MAX_YAML_VALUES:
                raise _Refused(f"the value starting here holds more than {MAX_YAML_VALUES:,} YAML values once its "
                               f"aliases are expanded (each `*name` is a full copy of its anchor's value), more than "
                               f"a tasks file may hold; share smaller blocks through aliases", node.start_mark)
            if depth > MAX_YAML_DEPTH:
                raise _Refused(f"lists and mappings are nested more than {MAX_YAML_DEPTH} levels deep here, more than "
                               f"a tasks file may hold", node.start_mark)
        elif key in open_nodes:
            raise _Refused("an alias here refers to a value that contains the alias itself (e.g. `&a [*a]`), which "
                           "would be infinitely deep", node.start_mark)
        elif key not in measured:
            open_nodes.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in _children(node))


class _LineLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's parser when PyYAML has it
    """The safe loader, keeping each mapping's and sequence's line numbers (for error
    messages), refusing duplicate keys, and refusing a document whose aliases expand
    beyond the limits before building it (:func:`_check_expansion`)."""

    def construct_document(self, node):
        _check_expansion(node)
        return super().construct_document(node)

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError) as exc:  # a date like 2024-13-45, an integer of 5000 digits
            raise yaml.constructor.ConstructorError(None, None, f"cannot read this value ({short_text(str(exc))})",
                                                    node.start_mark) from None

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:  # explicit keys only: a key may override a `<<: *anchor` merge
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node)
            if isinstance(key, str) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {short_repr(key)} (first on line {seen[key]}); a second one would "
                                f"silently replace the first", key_node.start_mark)
            if isinstance(key, str):
                seen[key] = key_node.start_mark.line + 1
        mapping = _Map(super().construct_mapping(node, deep=True))
        mapping.line = node.start_mark.line + 1
        mapping.lines = {self.construct_object(k): k.start_mark.line + 1 for k, _ in node.value}
        return mapping

    def construct_sequence(self, node, deep=False):
        seq = _Seq(super().construct_sequence(node, deep=True))
        seq.line = node.start_mark.line + 1
        seq.lines = [item.start_mark.line + 1 for item in node.value]
        return seq


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _LineLoader.construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _LineLoader.construct_sequence)


@dataclass
class _Where:
    """A position in a YAML file, for error messages."""

    file: Path
    line: int
    path: str

    def child(self, key: Any, container: Any) -> _Where:
        line = self.line
        if isinstance(container, _Map):
            line = container.lines.get(key, container.line)
        elif isinstance(container, _Seq) and isinstance(key, int) and key < len(container.lines):
            line = container.lines[key]
        shown = short_text(str(key))
        sep = f"[{shown}]" if isinstance(key, int) else (f".{shown}" if self.path else shown)
        return _Where(self.file, line, self.path + sep)

    def error(self, message: str) -> ConfigError:
        return ConfigError(f"{self.file}:{self.line}: at `{self.path or '<top>'}`: {message}")


def _file_kind(mode: int) -> str:
    """What a file that is not a regular file is, for messages."""
    for test, kind in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "a special file"


@dataclass
class _Reading:
    """What composing one suite has read so far (its files, bytes and tasks), checked
    against the limits."""

    seen: set[Path]
    bytes: int = 0
    tasks: int = 0
    units: int = 0
    #: per task read, the companion tasks its kind names and where its kind is written
    companions: list[tuple[tuple[str, ...], _Where]] = field(default_factory=list)


def _read_yaml(path: Path, reading: _Reading, refuse: Callable[[str], ConfigError]) -> Any:
    """The parsed YAML of one file of a suite, its bytes counted in ``reading``.
    ``refuse`` makes the error for a file that cannot be one (missing, not a regular file,
    past :data:`MAX_SUITE_BYTES`) from a phrase saying why; the file is opened without
    waiting (a named pipe never blocks) and read no further than the limit."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise refuse("does not exist") from None
    except OSError as exc:
        raise refuse(f"cannot be read ({exc.strerror})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise refuse(f"is {_file_kind(mode)}, not a regular file")
    with os.fdopen(fd, "rb") as file:
        try:
            data = file.read(MAX_SUITE_BYTES - reading.bytes + 1)
        except OSError as exc:
            raise refuse(f"cannot be read ({exc.strerror})") from None
    reading.bytes += len(data)
    if reading.bytes > MAX_SUITE_BYTES:
        raise refuse(f"takes the suite past {MAX_SUITE_BYTES // 2**20} MiB of YAML, the most a tasks file and the "
                     f"files it includes may hold together; split it into smaller suites")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: the file is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
                          f"{exc.start}); save it as UTF-8.") from None
    try:
        return yaml.load(text, Loader=_LineLoader)
    except _Refused as exc:
        raise ConfigError(f"{path}:{exc.problem_mark.line + 1}: {exc.problem}.") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = " ".join(filter(None, (getattr(exc, "context", None), getattr(exc, "problem", None)))) or str(exc)
        raise ConfigError(f"{where}: malformed YAML: {problem}. Check indentation and quoting there.") from None


# ----------------------------------------------------------------------------- parameter types


def _type_ok(value: Any, tp: Any) -> bool:
    """Whether a YAML value fits a parameter annotation."""
    if isinstance(value, float) and not math.isfinite(value):
        return False  # NaN and infinities are never a parameter value
    if tp is Any:
        return True
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(value, a) for a in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if origin is typing.Literal:
        return value in typing.get_args(tp)
    if origin in (list, tuple, typing.Sequence) or tp in (list, tuple):
        args = typing.get_args(tp)
        if not isinstance(value, list):
            return False
        inner = args[0] if args else Any
        return all(_type_ok(v, inner) for v in value)
    if origin is dict or tp is dict:
        return isinstance(value, dict)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(tp, type):
        return isinstance(value, tp)
    return True


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp)).replace("NoneType", "null")


@functools.lru_cache(maxsize=None)
def _type_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)  # evaluates every annotation: once per class, not per spec


def plugin_fields(cls: type) -> dict[str, tuple[Any, Any]]:
    """Parameter name → (annotation, default) of a plugin class."""
    if not dataclasses.is_dataclass(cls):
        return {}
    hints = _type_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        if not f.init or f.name.startswith("_"):
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
        out[f.name] = (hints.get(f.name, Any), default)
    return out


# ----------------------------------------------------------------------------- validation


def _check_keys(mapping: dict, allowed: set[str], where: _Where, what: str) -> None:
    for key in mapping:
        if what == "top-level" and str(key).startswith(EXTENSION_PREFIX):
            continue
        if key not in allowed:
            raise where.child(key, mapping).error(
                f"unknown {what} key {short_repr(key)}; {did_you_mean(str(key), sorted(allowed))}"
            )


def _resolved(tasks_file: Path, value: str, where: _Where) -> Path:
    """A path of the tasks file, relative to its folder, resolved; a value no file
    system accepts (a NUL byte, an unreadable link loop) is a validation error."""
    try:
        if "\0" in value:
            raise ValueError("it contains a NUL byte")
        return (tasks_file.parent / value).resolve()
    except (ValueError, OSError, RuntimeError) as exc:
        raise where.error(f"{short_repr(value)} is not a usable path ({exc}).") from None


#: how a YAML value's type is named in messages
_TYPE_NAMES = {"_Map": "mapping", "_Seq": "list", "dict": "mapping", "NoneType": "null", "str": "string"}


def _expect(value: Any, tp: type | tuple, where: _Where, expected: str) -> Any:
    if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
        kind = type(value).__name__
        raise where.error(f"expected {expected}, got {_TYPE_NAMES.get(kind, kind)} {short_repr(value)}.")
    return value


def _optional_text(entry: dict, key: str, where: _Where, what: str) -> None:
    """``entry[key]``, when present, is a string (``what`` says what it holds)."""
    if key in entry:
        _expect(entry[key], str, where.child(key, entry), f"a string: {what}")


def _repeated(items: list) -> list:
    """The items that occur more than once in ``items``, sorted (linear in the items)."""
    return sorted(item for item, count in collections.Counter(items).items() if count > 1)


def _seed_problem(seed: Any) -> str:
    """Why ``seed`` cannot seed numpy's and torch's generators ("" when it can)."""
    if isinstance(seed, int) and not isinstance(seed, bool) and seed in SEED_RANGE:
        return ""
    return f"expected integer seeds between 0 and {SEED_RANGE.stop - 1}, got {short_repr(seed)}."


def _check_seeds(seeds: list, where: _Where) -> None:
    """Refuse a list of seeds holding one that cannot seed (:func:`_seed_problem`) or one
    listed twice (it would repeat the same units), naming that item's line."""
    seen = set()
    for i, seed in enumerate(seeds):
        problem = _seed_problem(seed) or (f"seed {seed} is listed twice; list each seed once (a repeated seed would "
                                          f"repeat the same units)." if seed in seen else "")
        if problem:
            raise where.child(i, seeds).error(problem)
        seen.add(seed)


def _default_label(name: str, params: dict, fields: dict) -> str:
    changed = {k: v for k, v in params.items() if k in fields and fields[k][1] != v}
    if not changed:
        return name
    return name + "(" + ",".join(f"{k}={v}" for k, v in changed.items()) + ")"


def _plugin_spec(raw: Any, interface: str, registry: Registry, where: _Where, view_ok: bool = False) -> PluginSpec:
    allowed = ENCODER_KEYS if view_ok else SPEC_KEYS
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict):
        raise where.error(f"expected a {interface} name or a mapping with `name` and `params`, got "
                          f"{short_repr(raw)}.")
    _check_keys(raw, allowed, where, f"{interface} spec")
    if "name" not in raw:
        raise where.error(f"a {interface} spec needs a `name`.")
    name = _expect(raw["name"], str, where.child("name", raw), f"a {interface} name (string)")
    try:
        name = registry.current_name(interface, name, f"{where.file}:{where.child('name', raw).line}")  # an alias
        cls = registry.get(interface, name)
    except UnknownPlugin as exc:
        raise where.child("name", raw).error(str(exc)) from None
    params = raw.get("params") or {}
    pwhere = where.child("params", raw)
    _expect(params, dict, pwhere, "a mapping of parameter names to values")
    fields = plugin_fields(cls)
    for key, value in params.items():
        kwhere = pwhere.child(key, params)
        if key not in fields:
            raise kwhere.error(
                f"{interface} {name!r} has no parameter {short_repr(key)}; {did_you_mean(str(key), sorted(fields))}"
            )
        tp = fields[key][0]
        if not _type_ok(value, tp):
            raise kwhere.error(
                f"parameter {key!r} of {interface} {name!r} expects {_type_name(tp)}, got {short_repr(value)}."
            )
        if SEED_PARAM.fullmatch(key) and isinstance(value, list):
            _check_seeds(value, kwhere)
        elif SEED_PARAM.fullmatch(key) and value is not None and _seed_problem(value):
            raise kwhere.error(_seed_problem(value))
    params = dict(params)
    try:
        cls(**params)
    except (ValueError, TypeError) as exc:
        raise pwhere.error(f"invalid parameters for {interface} {name!r}: {short_text(str(exc), TEXT_LIMIT)}") from None
    label = raw.get("label") or _default_label(name, params, fields)
    if not isinstance(label, str) or label.strip().lower() in RESERVED_LABELS or len(label) > LABEL_MAX \
            or not label.isprintable() or label != label.strip():
        raise where.child("label", raw).error(
            f"label {short_repr(label)} is not allowed: a label is a display name of at most {LABEL_MAX} printable "
            f"characters, without surrounding spaces, and not {sorted(RESERVED_LABELS)} (which mean an empty part).")
    package = registry.package(interface, name)
    if view_ok:
        view = raw.get("view")
        if view is not None:
            _expect(view, str, where.child("view", raw), "a view name (string)")
        return EncoderSpec(interface, name, params, label, cls, package, view=view)
    return PluginSpec(interface, name, params, label, cls, package)


def _spec_list(raw: Any, interface: str, registry: Registry, where: _Where, allow_none: bool = False) -> list:
    if isinstance(raw, (str, dict)):
        raw = [raw]
    _expect(raw, list, where, f"a list of {interface} specs")
    if not raw:
        raise where.error(f"expected at least one {interface}.")
    out = []
    for i, item in enumerate(raw):
        if allow_none and item in (NONE, None):
            out.append(None)
        else:
            out.append(_plugin_spec(item, interface, registry, where.child(i, raw)))
    dupes = _repeated([s.label if s else NONE for s in out])
    if dupes:
        raise where.error(f"duplicate {interface} labels {short_repr(dupes)}; give each a distinct `label`.")
    return out


def _entries(raw: dict, key: str, where: _Where, allowed: set[str], required: tuple[str, ...]):
    """Validated mappings of the list ``raw[key]`` (each with its position)."""
    entries = raw.get(key, [])
    lwhere = where.child(key, raw)
    _expect(entries, list, lwhere, f"a list of {key} entries")
    for i, entry in enumerate(entries):
        ewhere = lwhere.child(i, entries)
        _expect(entry, dict, ewhere, f"a mapping with {', '.join(required)}")
        _check_keys(entry, allowed, ewhere, key)
        missing = [k for k in required if k not in entry]
        if missing:
            raise ewhere.error(f"a {key} entry needs {', '.join(f'`{k}`' for k in missing)}.")
        yield entry, ewhere


def _settings(raw: dict, defaults: dict, where: _Where) -> dict:
    out = dict(defaults)
    if "seeds" in raw:
        seeds = raw["seeds"]
        w = where.child("seeds", raw)
        _expect(seeds, list, w, "a list of integer seeds, e.g. [0, 1, 2]")
        if not seeds:
            raise w.error(f"expected a non-empty list of integer seeds between 0 and {SEED_RANGE.stop - 1}.")
        _check_seeds(seeds, w)
        out["seeds"] = list(seeds)
    for key in ("num_anchors", "batch_size"):
        if key in raw:
            value = _expect(raw[key], int, where.child(key, raw), "a positive integer")
            if value <= 0:
                raise where.child(key, raw).error(f"expected a positive integer, got {value}.")
            out[key] = value
    if "protocol" in raw:
        out["protocol"] = _protocol(raw["protocol"], out.get("protocol", EvaluationProtocol()),
                                    where.child("protocol", raw))
    if "device" in raw:
        device = raw["device"]
        if not (isinstance(device, str) and DEVICE.fullmatch(device)):
            raise where.child("device", raw).error(f"expected auto, cpu, cuda or cuda:N (N ≥ 0), got "
                                                   f"{short_repr(device)}.")
        out["device"] = device
    if "precision" in raw:
        precision = raw["precision"]
        if precision not in PRECISIONS:
            raise where.child("precision", raw).error(
                f"expected one of {', '.join(PRECISIONS)} (the precision of the task's heavy loops; "
                f"{DEFAULT_PRECISION} is the default), got {short_repr(precision)}.")
        out["precision"] = precision
    return out


def _protocol(raw: Any, base: EvaluationProtocol, where: _Where) -> EvaluationProtocol:
    """``protocol:`` over ``base`` (the suite's, for a task), checked key by key."""
    _expect(raw, dict, where, "a mapping with train_size, test_size, validation, evaluation")
    _check_keys(raw, {f.name for f in dataclasses.fields(EvaluationProtocol)}, where, "protocol")
    values = {}
    for key in ("train_size", "test_size"):
        if key in raw:
            value = raw[key]
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
                raise where.child(key, raw).error(f"expected a positive integer or null (all samples), got "
                                                  f"{short_repr(value)}.")
            values[key] = value
    if "validation" in raw:
        value = raw["validation"]
        if not _type_ok(value, float) or not 0 <= value <= MAX_VALIDATION:
            raise where.child("validation", raw).error(
                f"expected the fraction of each seed's training draw held out for validation, between 0 (no "
                f"tuning) and {MAX_VALIDATION}, got {short_repr(value)}.")
        values["validation"] = float(value)
    if "evaluation" in raw:
        if raw["evaluation"] not in ("inductive", "transductive"):
            raise where.child("evaluation", raw).error(
                f"expected `inductive` (a prediction never depends on other test samples) or `transductive`, got "
                f"{short_repr(raw['evaluation'])}.")
        values["evaluation"] = raw["evaluation"]
    return dataclasses.replace(base, **values)


def _default_kind(registry: Registry, where: _Where) -> str:
    """The name of the installed task kind that declares itself the default."""
    names = [n for n in registry.names("task_kind") if registry.get("task_kind", n).is_default]
    if len(names) != 1:
        raise where.error(f"the task has no `kind:` and {len(names)} installed task kinds claim to be the default "
                          f"({names}); name the kind, e.g. `kind: {names[0] if names else 'stitching'}`.")
    return names[0]


def _allowed_name_like(name: str) -> str:
    """An allowed task name close to the refused ``name`` (so never ``name`` itself)."""
    near = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:64]
    if valid_task_name(near):
        return near
    return f"{near[:59]}-task" if near else "my-task"  # near is empty or a reserved name


def _task(raw: Any, defaults: dict, registry: Registry, where: _Where) -> Task:
    _expect(raw, dict, where, "a task mapping with name, dataset and encoders")
    _check_keys(raw, TASK_KEYS, where, "task")
    for key in ("name", "dataset"):
        if key not in raw:
            raise where.error(f"task is missing the required key `{key}`.")
    name = _expect(raw["name"], str, where.child("name", raw), "a task name (string)")
    if not valid_task_name(name):  # it becomes file names; names differing only in case are refused below
        raise where.child("name", raw).error(
            f"task name {short_repr(name)} is not allowed: a task name becomes file names, so it must be 1–64 "
            f"letters, digits, '.', '_' or '-', start with a letter or digit, and not be one of "
            f"{sorted(RESERVED_NAMES)} (any case). E.g. {_allowed_name_like(name)!r}.")
    settings = _settings(raw, defaults, where)
    kind = _plugin_spec(raw["kind"] if "kind" in raw else _default_kind(registry, where), "task_kind", registry,
                        where.child("kind", raw))
    dataset = _plugin_spec(raw["dataset"], "dataset", registry, where.child("dataset", raw))
    if kind.cls.uses_encoders and "encoders" not in raw:
        raise where.error(f"task is missing the required key `encoders` (task kind {kind.name!r} evaluates "
                          f"encoders).")
    ewhere = where.child("encoders", raw)
    _expect(raw.get("encoders", []), list, ewhere, "a list of encoder specs")
    if kind.cls.uses_encoders and not raw["encoders"]:
        raise ewhere.error("expected at least one encoder.")
    encoders = [_plugin_spec(item, "encoder", registry, ewhere.child(i, raw["encoders"]), view_ok=True)
                for i, item in enumerate(raw.get("encoders", []))]
    labels = [e.label for e in encoders]
    if _repeated(labels):
        raise ewhere.error(f"duplicate encoder labels {short_repr(_repeated(labels))}; "
                           f"give each encoder a distinct `label`.")
    grid_raw = raw.get("grid") or {}
    gwhere = where.child("grid", raw)
    _check_grid_keys(grid_raw, kind, gwhere)
    bound = _unit_bound(len(settings["seeds"]), len(raw.get("encoders", [])),
                        [len(axis) if isinstance(axis, list) else 1 for axis in grid_raw.values()])
    if bound > MAX_TASK_UNITS:  # before thousands of grid entries are validated
        raise where.error(f"task {name!r} asks for up to {bound:,} units of work (seeds × encoders × each grid "
                          f"list's length), more than the {MAX_TASK_UNITS:,} one task may plan; split it into tasks "
                          f"over fewer seeds, encoders or grid entries.")
    grid = {key: _axis_entries(grid_raw, key, axis, registry, gwhere) for key, axis in kind.cls.axes.items()}
    if not kind.cls.holds_out_sources:
        _refuse_learned_anchors(grid, grid_raw, kind, gwhere)
    metrics = _spec_list(raw.get("metrics", settings["metrics"]), "metric", registry,
                         where.child("metrics", raw) if "metrics" in raw else where)
    description = raw.get("description", "")
    _expect(description, str, where.child("description", raw), "a string")
    columns = set(kind.cls.columns)
    published = []
    for entry, ewhere in _entries(raw, "published", where, PUBLISHED_KEYS | columns, ("metric", "value")):
        _expect(entry["value"], (int, float), ewhere.child("value", entry), "a number")
        _optional_text(entry, "differs", ewhere, "what differs here from the paper's setting")
        published.append(entry)
    claims = []
    for entry, ewhere in _entries(raw, "claims", where, CLAIM_KEYS, ("claim", "better", "worse")):
        claims.append(entry)
        _optional_text(entry, "paper", ewhere, "which paper and setting the claim stands for, and what differs here")
        for side in ("better", "worse"):
            _expect(entry[side], dict, ewhere.child(side, entry),
                    "a mapping of column values, e.g. {stitcher: relative}")
            _check_keys(entry[side], columns | set(kind.cls.claim_columns), ewhere.child(side, entry),
                        f"claim filter (task kind {kind.name!r})")
        if entry.get("measure", "score") not in ("score", "achievable"):
            raise ewhere.child("measure", entry).error("expected `score` or `achievable`.")
        if entry.get("test", CLAIM_TESTS[0]) not in CLAIM_TESTS:
            raise ewhere.child("test", entry).error(f"expected one of {', '.join(CLAIM_TESTS)}.")
        if "margin" in entry:
            _expect(entry["margin"], (int, float), ewhere.child("margin", entry),
                    "a number ≥ 0 in the metric's units (the smallest difference that counts; default: the "
                    "metric's own, 0.01 for most)")
            if isinstance(entry["margin"], bool) or entry["margin"] < 0:
                raise ewhere.child("margin", entry).error("expected a number ≥ 0 in the metric's units.")
    task = Task(name=name, kind=kind, dataset=dataset, encoders=encoders, grid=grid, metrics=metrics,
                seeds=settings["seeds"],
                num_anchors=settings["num_anchors"], device=settings["device"],
                precision=settings.get("precision", DEFAULT_PRECISION), batch_size=settings["batch_size"], description=description, file=str(where.file),
                published=[dict(e) for e in published], claims=[dict(c) for c in claims],
                protocol=settings.get("protocol", EvaluationProtocol()))
    try:
        check_similarities(task)
        kind.build().validate(task)
    except ValueError as exc:
        raise where.error(short_text(str(exc), TEXT_LIMIT)) from None
    return task


def _check_grid_keys(grid_raw: Any, kind: PluginSpec, where: _Where) -> None:
    """``grid:`` is a mapping whose keys are axes the task's kind declares."""
    axes = list(kind.cls.axes)
    if not axes:
        _expect(grid_raw, dict, where, "a mapping")
        if grid_raw:
            key = next(iter(grid_raw))
            raise where.child(key, grid_raw).error(f"unknown grid key {short_repr(key)}; task kind {kind.name!r} "
                                                   f"declares no grid axes, so remove `grid:`.")
        return
    _expect(grid_raw, dict, where, f"a mapping with {', '.join(axes)}")
    _check_keys(grid_raw, set(axes), where, "grid")


def _axis_entries(grid_raw: dict, key: str, axis: Axis, registry: Registry, where: _Where) -> list:
    """The validated entries of axis ``key`` (what the axis holds when omitted)."""
    if key not in grid_raw:
        return axis.omitted()
    return _spec_list(grid_raw[key], axis.interface, registry, where.child(key, grid_raw),
                      allow_none=axis.allows_none)


def _refuse_learned_anchors(grid: dict, grid_raw: dict, kind: PluginSpec, where: _Where) -> None:
    """Refuse, for a kind that does not hold the evaluated encoder out of anchor
    selection, a selector of any axis that learns from the encoders' banks."""
    for key, entries in grid.items():
        for i, sel in enumerate(entries):
            if sel is not None and sel.interface == "selector" and sel.cls.learns_from_banks:
                raise where.child(key, grid_raw).child(i, grid_raw[key]).error(
                    f"anchor selector {sel.name!r} learns from the encoders' banks, and task kind {kind.name!r} "
                    f"evaluates encoders without holding them out of anchor selection, so the anchors would have "
                    f"seen the space they are evaluated in. Use random, stratified or parallel anchors here, or "
                    f"a task kind that holds each evaluated encoder out (e.g. stitching).")


def _unit_bound(seeds: int, encoders: int, axes: list[int]) -> int:
    return seeds * max(1, encoders) * math.prod(max(1, n) for n in axes)


def unit_bound(task: Task) -> int:
    """An upper bound on the units a task plans, from its shape alone: seeds × encoders
    × the length of each axis of its grid (the axes its kind declares: a kind plans at
    most one unit per seed, target encoder and grid point)."""
    return _unit_bound(len(task.seeds), len(task.encoders), [len(axis) for axis in task.grid.values()])


def _top(raw: Any, where: _Where) -> dict:
    """The top-level mapping of a tasks file, its keys checked. Nothing of a file that is
    not a mapping is quoted: it may be another file entirely (a key is, shortened)."""
    if raw is None:
        raise where.error("the file is empty; expected a mapping with a `tasks:` list.")
    if not isinstance(raw, dict):
        raise where.error(f"expected a mapping with `suite:` and `tasks:`, got a YAML "
                          f"{_TYPE_NAMES.get(type(raw).__name__, type(raw).__name__)}; is this a tasks file?")
    _check_keys(raw, TOP_KEYS, where, "top-level")
    return raw


def _collect_tasks(path: Path, raw: dict, registry: Registry, defaults: dict, reading: _Reading,
                   depth: int = 1) -> list[Task]:
    """The tasks of the file ``path`` (parsed: ``raw``), then those of the files it
    includes, in order; ``depth`` counts the files of the ``include:`` chain so far."""
    where = _Where(path, 1, "")
    tasks = []
    if "tasks" in raw:
        twhere = where.child("tasks", raw)
        _expect(raw["tasks"], list, twhere, "a list of tasks")
        reading.tasks += len(raw["tasks"])
        if reading.tasks > MAX_TASKS:
            raise twhere.error(f"the suite holds more than {MAX_TASKS:,} tasks, the most one suite may hold (this "
                               f"file {len(raw['tasks']):,}); split it into smaller suites.")
        for i, raw_task in enumerate(raw["tasks"]):
            task_where = twhere.child(i, raw["tasks"])
            tasks.append(_task(raw_task, defaults, registry, task_where))
            named = tasks[-1].kind.build().companion_tasks()
            if named:
                reading.companions.append((named, task_where.child("kind", raw_task)))
            reading.units += unit_bound(tasks[-1])
            if reading.units > MAX_SUITE_UNITS:
                raise twhere.child(i, raw["tasks"]).error(
                    f"with this task the suite asks for more than {MAX_SUITE_UNITS:,} units of work (seeds × "
                    f"encoders × each grid list's length, summed over tasks), the most one suite may plan; split it "
                    f"into smaller suites.")
    includes = raw.get("include") or []
    includes = [includes] if isinstance(includes, str) else includes
    _expect(includes, list, where.child("include", raw), "a list of paths of other tasks files")
    for i, inc in enumerate(includes):
        iwhere = where.child("include", raw).child(i, includes)
        _expect(inc, str, iwhere, "a path to another tasks file")
        sub = _resolved(path, inc, iwhere)
        if sub in reading.seen:
            raise iwhere.error(f"{short_repr(inc)} is included twice (or includes itself).")
        if depth >= MAX_INCLUDE_DEPTH:
            raise iwhere.error(f"includes are nested more than {MAX_INCLUDE_DEPTH} files deep here, the most a suite "
                               f"may nest; include the deepest files from a file higher up the chain.")
        reading.seen.add(sub)
        sub_raw = _read_yaml(sub, reading, lambda problem: iwhere.error(f"included file {sub} {problem}."))
        tasks += _collect_tasks(sub, _top(sub_raw, _Where(sub, 1, "")), registry, defaults, reading, depth + 1)
    return tasks


def _check_companions(companions: list[tuple[tuple[str, ...], _Where]], names: list[str]) -> None:
    """Every companion task a task's kind names (:meth:`TaskKind.companion_tasks`) is a
    task of the suite: a misspelt one would silently drop what the index draws from it."""
    for named, where in companions:
        for name in named:
            if name not in names:
                raise where.error(f"names the companion task {short_repr(name)}, which this suite does not have; "
                                  f"{did_you_mean(name, names)}")


def load_suite(path: str | Path, registry: Registry) -> Suite:
    """Read, compose and validate a tasks file; raise :class:`ConfigError` on any problem,
    also when the suite passes one of the limits (:data:`MAX_SUITE_BYTES`,
    :data:`MAX_TASKS`, :data:`MAX_INCLUDE_DEPTH`, :data:`MAX_YAML_VALUES`,
    :data:`MAX_YAML_DEPTH`)."""
    path = Path(path)
    reading = _Reading(seen={path.resolve()})
    where = _Where(path, 1, "")
    raw = _top(_read_yaml(path, reading, lambda problem: ConfigError(f"{path}: the tasks file {problem}.")), where)
    suite_raw = raw.get("suite") or {}
    swhere = where.child("suite", raw)
    _expect(suite_raw, dict, swhere, "a mapping of suite defaults")
    _check_keys(suite_raw, SUITE_KEYS, swhere, "suite")
    defaults = _settings(suite_raw, {"seeds": [0, 1, 2], "num_anchors": 300, "device": "auto",
                                     "batch_size": 64}, swhere)
    defaults["metrics"] = suite_raw.get("metrics", ["accuracy", "weighted_f1"])
    if "tasks" not in raw and "include" not in raw:
        raise where.error("no `tasks:` list (and no `include:`); nothing to run.")
    tasks = _collect_tasks(path, raw, registry, defaults, reading)
    if not tasks:
        raise where.child("tasks", raw).error("the task list is empty.")
    names = collections.Counter(t.name.lower() for t in tasks)
    dupes = sorted({t.name for t in tasks if names[t.name.lower()] > 1})
    if dupes:
        raise where.child("tasks", raw).error(f"duplicate task names {short_repr(dupes)} (compared without case, "
                                              f"since each names files); task names must be unique.")
    _check_companions(reading.companions, [t.name for t in tasks])

    def _dir(key: str, default: str | None) -> Path | None:
        value = suite_raw.get(key, default)
        if value is None:
            return None
        _expect(value, str, swhere.child(key, suite_raw), "a directory path")
        return _resolved(path, value, swhere.child(key, suite_raw))

    executor = suite_raw.get("executor", "local")
    if executor not in EXECUTORS:
        raise swhere.child("executor", suite_raw).error(
            f"unknown executor {short_repr(executor)}; "
            f"{did_you_mean(executor if isinstance(executor, str) else '', list(EXECUTORS))} (`ray` needs "
            f"`pip install 'relbench[ray]'`)")
    forced = override()
    if forced is not None:
        if forced not in PRECISIONS:
            raise ConfigError(f"{PRECISION_ENV}={short_repr(forced)}: expected one of {', '.join(PRECISIONS)} "
                              f"(`relbench run --precision`); unset it to use the tasks file's precision.")
        for task in tasks:
            task.precision = forced
    smoke = suite_raw.get("smoke", False)
    _expect(smoke, bool, swhere.child("smoke", suite_raw), "true or false")
    return Suite(file=path, tasks=tasks, output=_dir("output", "results"),
                 leaderboards=_dir("leaderboards", "leaderboards"), cache_dir=_dir("cache_dir", None),
                 device=defaults["device"], executor=executor, smoke=smoke)
