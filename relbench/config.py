"""tasks.yaml: loading, composition and validation.

The schema (every key optional unless marked)::

    suite:                       # defaults for every task
      seeds: [0, 1, 2]           # list of ints
      device: auto               # auto | cpu | cuda  (auto = cuda when available)
      num_anchors: 300           # anchors per selector (int)
      batch_size: 64             # encoding batch size (halved on CUDA out-of-memory)
      metrics: [accuracy, weighted_f1]
      output: results            # results store directory (relative to the YAML file)
      leaderboards: leaderboards # where markdown leaderboards are written
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
        grid:                    # each a list of plugin specs; regularizers may hold `none`
          selectors: [random, stratified]
          similarities: [cosine]
          stitchers: [relative, absolute]
          regularizers: [none]
        metrics, seeds, num_anchors, device, batch_size, protocol: override the suite's
        published:               # numbers from a paper, shown next to ours on the leaderboard
          - {stitcher: relative, source: rexnet, target: vit-b, metric: weighted_f1,
             value: 0.7681, reference: "Moschella et al. 2023, Table 6"}
          # without source/target: compared with the mean over stitched (off-diagonal) pairs
        claims:                  # orderings a paper reports, checked on this task's results
          - claim: relative decoders stitch far better than absolute heads
            better: {stitcher: relative}   # rows matching these grid labels …
            worse: {stitcher: absolute}    # … should beat these (measure: score | achievable)
            margin: 0.01                   # the smallest difference that counts (default 0.01)

A plugin spec is a name (``cosine``) or a mapping ``{name: cosine, params: {...},
label: cosine-centred}``; the label (default: the name, plus the parameters that differ
from the defaults) is what results and leaderboards show. YAML anchors and aliases work
for sharing blocks. Every error names the file, line and key path, what was expected and
close matches for misspelt names.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import importlib.metadata
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from relbench.errors import ConfigError, UnknownPlugin
from relbench.names import RESERVED_NAMES, valid_task_name
from relbench.plugins import Registry, did_you_mean, provider_of
from relbench.protocol import MAX_VALIDATION, EvaluationProtocol, check_similarities

SUITE_KEYS = {"seeds", "device", "num_anchors", "batch_size", "metrics", "output", "leaderboards", "cache_dir",
              "protocol", "executor"}
#: where a run computes its units: this process (or ``-j N`` local workers), or a Ray cluster
EXECUTORS = ("local", "ray")
TOP_KEYS = {"suite", "include", "tasks"}
TASK_KEYS = {"name", "kind", "description", "dataset", "encoders", "grid", "metrics", "seeds", "protocol",
             "num_anchors", "device", "batch_size", "published", "claims"}
CLAIM_KEYS = {"claim", "better", "worse", "measure", "metric", "margin"}
PUBLISHED_KEYS = {"metric", "value", "reference"}  # plus the task kind's columns
GRID_KEYS = {"selectors": "selector", "similarities": "similarity", "stitchers": "stitcher",
             "regularizers": "regularizer"}
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


# ----------------------------------------------------------------------------- YAML with lines


class _Map(dict):
    """A mapping that remembers the line of each key (1-based)."""

    line: int = 0
    lines: dict


class _Seq(list):
    """A list that remembers the line of each item (1-based)."""

    line: int = 0
    lines: list


class _LineLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's parser when PyYAML has it
    """The safe loader, keeping each mapping's and sequence's line numbers (for error
    messages) and refusing duplicate keys."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:  # explicit keys only: a key may override a `<<: *anchor` merge
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node)
            if isinstance(key, str) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first on line {seen[key]}); a second one would silently "
                                f"replace the first", key_node.start_mark)
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
        sep = f"[{key}]" if isinstance(key, int) else (f".{key}" if self.path else str(key))
        return _Where(self.file, line, self.path + sep)

    def error(self, message: str) -> ConfigError:
        return ConfigError(f"{self.file}:{self.line}: at `{self.path or '<top>'}`: {message}")


def _read_yaml(path: Path) -> Any:
    if not path.is_file():
        raise ConfigError(f"{path}: no such file. Pass the path of a tasks YAML file, e.g. `relbench run tasks.yaml`.")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: the file is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
                          f"{exc.start}); save it as UTF-8.") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror}).") from None
    try:
        return yaml.load(text, Loader=_LineLoader)
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


def plugin_fields(cls: type) -> dict[str, tuple[Any, Any]]:
    """Parameter name → (annotation, default) of a plugin class."""
    if not dataclasses.is_dataclass(cls):
        return {}
    hints = typing.get_type_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        if not f.init or f.name.startswith("_"):
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
        out[f.name] = (hints.get(f.name, Any), default)
    return out


# ----------------------------------------------------------------------------- validated objects


@dataclass
class PluginSpec:
    """One validated plugin choice: which class, with which parameters, shown as which
    label, provided by which distribution (``package``: name and version)."""

    interface: str
    name: str
    params: dict[str, Any]
    label: str
    cls: type | None = None
    package: str = ""

    def build(self):
        """A fresh instance of the plugin with these parameters."""
        return self.cls(**self.params)

    def full_params(self) -> dict[str, Any]:
        """Every parameter, defaults included (what a result row records)."""
        return self.build().params() if self.cls else {}

    def identity(self) -> dict[str, Any]:
        """What identifies this choice in a unit's fingerprint: the class, every
        parameter with defaults resolved (a tunable one the tasks file leaves open by its
        candidates), the providing package and version, and the author's own
        ``version`` of the method. The label is not part of it. Computed once per spec
        and parameters (treat the result as read-only)."""
        memo = (self.interface, self.name, json.dumps(self.params, sort_keys=True, default=repr), self.cls,
                self.package)
        if getattr(self, "_identity", (None,))[0] != memo:
            self._identity = (memo, self._identity_now())
        return self._identity[1]

    def _identity_now(self) -> dict[str, Any]:
        cls = self.cls
        params = self.full_params()
        for name, tunable in getattr(cls, "tunable", {}).items():  # open: chosen on validation data
            if name not in self.params:
                params[name] = {"tuned_over": list(tunable.values), "relative_to": tunable.relative_to}
        return {"class": f"{cls.__module__}:{cls.__qualname__}" if cls else self.name,
                "params": params, "package": self.package or package_of(cls),
                "version": str(getattr(cls, "version", ""))}


@functools.lru_cache(maxsize=None)
def _distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def package_of(cls: type | None) -> str:
    """The installed distribution ("name version") that provides ``cls``'s module, for a
    spec built in code rather than from a tasks file ("" when none does)."""
    if cls is None:
        return ""
    provider = provider_of(cls.__module__)
    if provider:
        return provider
    names = _distributions().get(cls.__module__.split(".")[0], [])
    return f"{names[0]} {importlib.metadata.version(names[0])}" if names else ""


@dataclass
class EncoderSpec(PluginSpec):
    """An encoder choice plus the data-set view it reads."""

    view: str | None = None


@dataclass
class Task:
    """One validated task."""

    name: str
    kind: PluginSpec
    dataset: PluginSpec
    encoders: list[EncoderSpec]
    selectors: list[PluginSpec]
    similarities: list[PluginSpec]
    stitchers: list[PluginSpec]
    regularizers: list[PluginSpec | None]
    metrics: list[PluginSpec]
    seeds: list[int]
    num_anchors: int
    device: str
    batch_size: int
    description: str = ""
    file: str = ""
    published: list[dict] = field(default_factory=list)
    claims: list[dict] = field(default_factory=list)
    protocol: EvaluationProtocol = field(default_factory=EvaluationProtocol)


@dataclass
class Suite:
    """A validated tasks file."""

    file: Path
    tasks: list[Task]
    output: Path
    leaderboards: Path
    cache_dir: Path | None
    device: str
    executor: str = "local"
    extra: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- validation


def _check_keys(mapping: dict, allowed: set[str], where: _Where, what: str) -> None:
    for key in mapping:
        if what == "top-level" and str(key).startswith(EXTENSION_PREFIX):
            continue
        if key not in allowed:
            raise where.child(key, mapping).error(
                f"unknown {what} key {key!r}; {did_you_mean(str(key), sorted(allowed))}"
            )


def _resolved(tasks_file: Path, value: str, where: _Where) -> Path:
    """A path of the tasks file, relative to its folder, resolved; a value no file
    system accepts (a NUL byte, an unreadable link loop) is a validation error."""
    try:
        if "\0" in value:
            raise ValueError("it contains a NUL byte")
        return (tasks_file.parent / value).resolve()
    except (ValueError, OSError, RuntimeError) as exc:
        raise where.error(f"{value!r} is not a usable path ({exc}).") from None


#: how a YAML value's type is named in messages
_TYPE_NAMES = {"_Map": "mapping", "_Seq": "list", "dict": "mapping", "NoneType": "null"}


def _expect(value: Any, tp: type | tuple, where: _Where, expected: str) -> Any:
    if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
        kind = type(value).__name__
        raise where.error(f"expected {expected}, got {_TYPE_NAMES.get(kind, kind)} {value!r}.")
    return value


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
        raise where.error(f"expected a {interface} name or a mapping with `name` and `params`, got {raw!r}.")
    _check_keys(raw, allowed, where, f"{interface} spec")
    if "name" not in raw:
        raise where.error(f"a {interface} spec needs a `name`.")
    name = raw["name"]
    try:
        cls = registry.get(interface, str(name))
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
                f"{interface} {name!r} has no parameter {key!r}; {did_you_mean(str(key), sorted(fields))}"
            )
        tp = fields[key][0]
        if not _type_ok(value, tp):
            raise kwhere.error(
                f"parameter {key!r} of {interface} {name!r} expects {_type_name(tp)}, got {value!r}."
            )
    params = dict(params)
    try:
        cls(**params)
    except (ValueError, TypeError) as exc:
        raise pwhere.error(f"invalid parameters for {interface} {name!r}: {exc}") from None
    label = raw.get("label") or _default_label(str(name), params, fields)
    if not isinstance(label, str) or label.strip().lower() in RESERVED_LABELS or len(label) > LABEL_MAX \
            or not label.isprintable() or label != label.strip():
        raise where.child("label", raw).error(
            f"label {label!r} is not allowed: a label is a display name of at most {LABEL_MAX} printable characters, "
            f"without surrounding spaces, and not {sorted(RESERVED_LABELS)} (which mean an empty part).")
    package = registry.package(interface, str(name))
    if view_ok:
        view = raw.get("view")
        if view is not None:
            _expect(view, str, where.child("view", raw), "a view name (string)")
        return EncoderSpec(interface, str(name), params, label, cls, package, view=view)
    return PluginSpec(interface, str(name), params, label, cls, package)


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
    labels = [s.label if s else NONE for s in out]
    dupes = {lbl for lbl in labels if labels.count(lbl) > 1}
    if dupes:
        raise where.error(f"duplicate {interface} labels {sorted(dupes)}; give each a distinct `label`.")
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
        if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) and s in SEED_RANGE for s in seeds):
            raise w.error(f"expected a non-empty list of integer seeds between 0 and {SEED_RANGE.stop - 1}, "
                          f"got {seeds!r}.")
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
            raise where.child("device", raw).error(f"expected auto, cpu, cuda or cuda:N (N ≥ 0), got {device!r}.")
        out["device"] = device
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
                raise where.child(key, raw).error(f"expected a positive integer or null (all samples), got {value!r}.")
            values[key] = value
    if "validation" in raw:
        value = raw["validation"]
        if not _type_ok(value, float) or not 0 <= value <= MAX_VALIDATION:
            raise where.child("validation", raw).error(
                f"expected the fraction of each seed's training draw held out for validation, between 0 (no "
                f"tuning) and {MAX_VALIDATION}, got {value!r}.")
        values["validation"] = float(value)
    if "evaluation" in raw:
        if raw["evaluation"] not in ("inductive", "transductive"):
            raise where.child("evaluation", raw).error(
                f"expected `inductive` (a prediction never depends on other test samples) or `transductive`, got "
                f"{raw['evaluation']!r}.")
        values["evaluation"] = raw["evaluation"]
    return dataclasses.replace(base, **values)


def _default_kind(registry: Registry, where: _Where) -> str:
    """The name of the installed task kind that declares itself the default."""
    names = [n for n in registry.names("task_kind") if registry.get("task_kind", n).is_default]
    if len(names) != 1:
        raise where.error(f"the task has no `kind:` and {len(names)} installed task kinds claim to be the default "
                          f"({names}); name the kind, e.g. `kind: {names[0] if names else 'stitching'}`.")
    return names[0]


def _task(raw: Any, defaults: dict, registry: Registry, where: _Where) -> Task:
    _expect(raw, dict, where, "a task mapping with name, dataset and encoders")
    _check_keys(raw, TASK_KEYS, where, "task")
    for key in ("name", "dataset"):
        if key not in raw:
            raise where.error(f"task is missing the required key `{key}`.")
    name = _expect(raw["name"], str, where.child("name", raw), "a task name (string)")
    if not valid_task_name(name):  # it becomes file names; names differing only in case are refused below
        raise where.child("name", raw).error(
            f"task name {name!r} is not allowed: a task name becomes file names, so it must be 1–64 letters, digits, "
            f"'.', '_' or '-', start with a letter or digit, and not be one of {sorted(RESERVED_NAMES)} "
            f"(any case). E.g. {re.sub(r'[^A-Za-z0-9._-]+', '-', name).strip('-._')[:64] or 'my-task'!r}.")
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
    if len(set(labels)) != len(labels):
        raise ewhere.error(f"duplicate encoder labels {sorted({x for x in labels if labels.count(x) > 1})}; "
                           f"give each encoder a distinct `label`.")
    grid_raw = raw.get("grid") or {}
    gwhere = where.child("grid", raw)
    _expect(grid_raw, dict, gwhere, "a mapping with selectors, similarities, stitchers, regularizers")
    _check_keys(grid_raw, set(GRID_KEYS), gwhere, "grid")
    grid = {}
    for key, interface in GRID_KEYS.items():
        if key in grid_raw:
            grid[key] = _spec_list(grid_raw[key], interface, registry, gwhere.child(key, grid_raw),
                                   allow_none=key == "regularizers")
        else:
            grid[key] = [None] if key == "regularizers" else []
    if not kind.cls.holds_out_sources:
        for i, sel in enumerate(grid["selectors"]):
            if sel.cls.learns_from_banks:
                raise gwhere.child("selectors", grid_raw).child(i, grid_raw["selectors"]).error(
                    f"anchor selector {sel.name!r} learns from the encoders' banks, and task kind {kind.name!r} "
                    f"evaluates encoders without holding them out of anchor selection, so the anchors would have "
                    f"seen the space they are evaluated in. Use random, stratified or parallel anchors here, or "
                    f"a task kind that holds each evaluated encoder out (e.g. stitching).")
    metrics = _spec_list(raw.get("metrics", settings["metrics"]), "metric", registry,
                         where.child("metrics", raw) if "metrics" in raw else where)
    description = raw.get("description", "")
    _expect(description, str, where.child("description", raw), "a string")
    columns = set(kind.cls.columns)
    published = []
    for entry, ewhere in _entries(raw, "published", where, PUBLISHED_KEYS | columns, ("metric", "value")):
        _expect(entry["value"], (int, float), ewhere.child("value", entry), "a number")
        published.append(entry)
    claims = []
    for entry, ewhere in _entries(raw, "claims", where, CLAIM_KEYS, ("claim", "better", "worse")):
        claims.append(entry)
        for side in ("better", "worse"):
            _expect(entry[side], dict, ewhere.child(side, entry),
                    "a mapping of column values, e.g. {stitcher: relative}")
            _check_keys(entry[side], columns, ewhere.child(side, entry), f"claim filter (task kind {kind.name!r})")
        if entry.get("measure", "score") not in ("score", "achievable"):
            raise ewhere.child("measure", entry).error("expected `score` or `achievable`.")
        if "margin" in entry:
            _expect(entry["margin"], (int, float), ewhere.child("margin", entry),
                    "a number ≥ 0 in the metric's units (the smallest difference that counts; default 0.01)")
            if isinstance(entry["margin"], bool) or entry["margin"] < 0:
                raise ewhere.child("margin", entry).error("expected a number ≥ 0 in the metric's units.")
    task = Task(name=name, kind=kind, dataset=dataset, encoders=encoders, selectors=grid["selectors"],
                similarities=grid["similarities"], stitchers=grid["stitchers"],
                regularizers=grid["regularizers"], metrics=metrics, seeds=settings["seeds"],
                num_anchors=settings["num_anchors"], device=settings["device"],
                batch_size=settings["batch_size"], description=description, file=str(where.file),
                published=[dict(e) for e in published], claims=[dict(c) for c in claims],
                protocol=settings.get("protocol", EvaluationProtocol()))
    try:
        check_similarities(task)
        kind.build().validate(task)
    except ValueError as exc:
        raise where.error(str(exc)) from None
    return task


def _collect_tasks(path: Path, registry: Registry, defaults: dict, seen: set[Path]) -> list[Task]:
    raw = _read_yaml(path)
    where = _Where(path, 1, "")
    if raw is None:
        raise where.error("the file is empty; expected a mapping with a `tasks:` list.")
    _expect(raw, dict, where, "a mapping with `suite:` and `tasks:`")
    _check_keys(raw, TOP_KEYS, where, "top-level")
    tasks = []
    if "tasks" in raw:
        twhere = where.child("tasks", raw)
        _expect(raw["tasks"], list, twhere, "a list of tasks")
        tasks = [_task(t, defaults, registry, twhere.child(i, raw["tasks"])) for i, t in enumerate(raw["tasks"])]
    for i, inc in enumerate(raw.get("include") or []):
        iwhere = where.child("include", raw).child(i, raw["include"])
        _expect(inc, str, iwhere, "a path to another tasks file")
        sub = _resolved(path, inc, iwhere)
        if sub in seen:
            raise iwhere.error(f"{inc} is included twice (or includes itself).")
        if not sub.is_file():
            raise iwhere.error(f"included file {sub} does not exist.")
        seen.add(sub)
        tasks += _collect_tasks(sub, registry, defaults, seen)
    return tasks


def load_suite(path: str | Path, registry: Registry) -> Suite:
    """Read, compose and validate a tasks file; raise :class:`ConfigError` on any problem."""
    path = Path(path)
    raw = _read_yaml(path)
    where = _Where(path, 1, "")
    if raw is None:
        raise where.error("the file is empty; expected a mapping with a `tasks:` list.")
    _expect(raw, dict, where, "a mapping with `suite:` and `tasks:`")
    _check_keys(raw, TOP_KEYS, where, "top-level")
    suite_raw = raw.get("suite") or {}
    swhere = where.child("suite", raw)
    _expect(suite_raw, dict, swhere, "a mapping of suite defaults")
    _check_keys(suite_raw, SUITE_KEYS, swhere, "suite")
    defaults = _settings(suite_raw, {"seeds": [0, 1, 2], "num_anchors": 300, "device": "auto",
                                     "batch_size": 64}, swhere)
    defaults["metrics"] = suite_raw.get("metrics", ["accuracy", "weighted_f1"])
    if "tasks" not in raw and "include" not in raw:
        raise where.error("no `tasks:` list (and no `include:`); nothing to run.")
    tasks = _collect_tasks(path, registry, defaults, {path.resolve()})
    if not tasks:
        raise where.child("tasks", raw).error("the task list is empty.")
    names = [t.name.lower() for t in tasks]
    dupes = sorted({t.name for t in tasks if names.count(t.name.lower()) > 1})
    if dupes:
        raise where.child("tasks", raw).error(f"duplicate task names {dupes} (compared without case, since each "
                                              f"names files); task names must be unique.")

    def _dir(key: str, default: str | None) -> Path | None:
        value = suite_raw.get(key, default)
        if value is None:
            return None
        _expect(value, str, swhere.child(key, suite_raw), "a directory path")
        return _resolved(path, value, swhere.child(key, suite_raw))

    executor = suite_raw.get("executor", "local")
    if executor not in EXECUTORS:
        raise swhere.child("executor", suite_raw).error(
            f"unknown executor {executor!r}; {did_you_mean(str(executor), list(EXECUTORS))} (`ray` needs "
            f"`pip install 'relbench[ray]'`)")
    return Suite(file=path, tasks=tasks, output=_dir("output", "results"),
                 leaderboards=_dir("leaderboards", "leaderboards"), cache_dir=_dir("cache_dir", None),
                 device=defaults["device"], executor=executor)
