"""Per-parameter documentation of plugin classes (``relbench plugins NAME`` / ``--json``).

A plugin's parameters are its dataclass fields (:func:`relbench.config.plugin_fields`);
what each one means is written in the class docstring, in either of the two styles the
built-in plugins use::

    Parameters                          Parameters:
    ----------                              center: subtract the anchor mean first.
    center : bool, default False                Continuation lines are indented further.
        Subtract the anchor mean first.

A field documented on a base class (a shared parameter block) counts for its subclasses.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from typing import Any

from relbench.config import plugin_fields
from relbench.plugins import Registered, own_docstring

# "name : type, default x" (numpy) or "name: description"; an entry may document several names
_NUMPY_ENTRY = re.compile(r"(?P<names>\w+(?:\s*,\s*\w+)*)\s+:(?:\s.*)?")
_COLON_ENTRY = re.compile(r"(?P<names>\w+(?:\s*,\s*\w+)*):(?:\s+(?P<doc>.*))?")
_SENTENCE_END = re.compile(r"[.!?](?=\s+[A-Z`(\['\"])")


def parameter_docs(cls: type) -> dict[str, str]:
    """Parameter name → one-line doc (its first sentence), for the parameters of ``cls``
    that its docstring, or a base class's, documents; in declaration order."""
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        found.update(_parse(own_docstring(klass)))
    return {name: found[name] for name in plugin_fields(cls) if found.get(name)}


def undocumented(cls: type) -> list[str]:
    """The parameters of ``cls`` that its docstrings do not document."""
    docs = parameter_docs(cls)
    return [name for name in plugin_fields(cls) if name not in docs]


def describe(registered: Registered) -> dict[str, Any]:
    """Everything known about one registered plugin, as a JSON-able dict.

    Keys: ``name``, ``interface``, ``class`` (``module:qualname``), ``package`` (the
    distribution that provides it, "name version"), ``package_version`` (that
    distribution's version; "" where none is known), ``version`` (the author's version
    of the method, :attr:`~relbench.interfaces.Plugin.version`; both versions are part
    of a unit's identity), ``aliases`` (former names, still accepted), ``columns`` (for
    a task kind: the columns identifying its cells; else empty), ``declarations`` (what
    its interface's :attr:`~relbench.interfaces.Plugin.declarations` name, by name: a
    metric's direction and aggregation, a similarity's invariances …), ``summary``,
    ``doc`` (the class's own docstring) and ``parameters``, a list of
    ``{name, type, choices, default, required, doc}``: ``choices`` lists the allowed values
    of a ``Literal`` parameter (else null); ``default`` is null for a required parameter
    and the ``repr`` string of a default JSON cannot hold.
    """
    cls = registered.cls
    docs = parameter_docs(cls)
    parameters = []
    for name, (annotation, default) in plugin_fields(cls).items():
        required = default is dataclasses.MISSING
        parameters.append({
            "name": name, "type": _type_name(annotation), "choices": _choices(annotation),
            "default": None if required else _jsonable(default), "required": required,
            "doc": docs.get(name, ""),
        })
    return {"name": cls.name, "interface": cls.interface, "class": f"{cls.__module__}:{cls.__qualname__}",
            "package": registered.package, "package_version": package_version(registered.package),
            "version": str(getattr(cls, "version", "")), "aliases": list(registered.aliases),
            "declarations": declarations(cls),
            "columns": list(getattr(cls, "columns", ())), "summary": registered.summary, "doc": own_docstring(cls),
            "parameters": parameters}


def package_version(package: str) -> str:
    """The version in a registered plugin's ``package`` ("relbench 0.1.0" → "0.1.0"; ""
    where it names none, e.g. a module loaded with ``--plugin`` that has no ``__version__``)."""
    words = package.split()
    return words[1] if len(words) > 1 and not words[1].startswith("(") else ""


def declarations(cls: type) -> dict[str, Any]:
    """What ``cls`` declares about itself, by the names its interface lists in
    ``declarations``, as JSON values: a method is called (a metric's ``direction()``), a
    set becomes a sorted list, a mapping a dict, a type its name, a dataclass (a grid
    :class:`~relbench.interfaces.Axis`) the dict of its fields."""
    out = {}
    for name in getattr(cls, "declarations", ()):
        value = getattr(cls, name, None)
        out[name] = _declared(value() if callable(value) and not isinstance(value, type) else value)
    return out


def _declared(value: Any) -> Any:
    """One declared value as JSON can hold it (see :func:`declarations`)."""
    if isinstance(value, (set, frozenset)):
        return sorted(_declared(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [_declared(v) for v in value]
    if isinstance(value, typing.Mapping):
        return {str(k): _declared(v) for k, v in value.items()}
    if isinstance(value, type):
        return value.__name__
    if dataclasses.is_dataclass(value):
        return {f.name: _declared(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return _jsonable(value)


def format_plugin(registered: Registered) -> str:
    """A human-readable page for one plugin: a header line (name, interface, package and
    class), its versions (the method's own and its package's), its former names if it
    has any, the docstring, what it declares (:func:`declarations`), then one line per
    parameter: name, type, choices, default, doc."""
    info = describe(registered)
    lines = [f"{info['name']}  ({info['interface']}, {info['package']}, {info['class']})",
             f"Version: {info['version'] or '?'} (the method's own) · package {info['package'] or '?'}"]
    if info["aliases"]:
        lines.append(f"Former names (deprecated, still accepted): {', '.join(info['aliases'])}")
    if info["doc"]:
        lines += ["", *("    " + line if line else "" for line in info["doc"].splitlines())]
    if info["columns"]:
        lines += ["", f"Columns of its results: seed, {', '.join(info['columns'])}"]
    if info["declarations"]:
        lines += ["", "Declares:", *(f"  {name}: {_shown(value)}" for name, value in info["declarations"].items())]
    lines += ["", "Parameters:" if info["parameters"] else "Parameters: none"]
    for p in info["parameters"]:
        choices = f" one of {', '.join(json.dumps(c) for c in p['choices'])};" if p["choices"] else ""
        default = "required" if p["required"] else f"default {json.dumps(p['default'])}"
        lines.append(f"  {p['name']}: {p['type']};{choices} {default}" + (f" — {p['doc']}" if p["doc"] else ""))
    return "\n".join(lines)


def _shown(value: Any) -> str:
    """A declared value as ``relbench plugins NAME`` prints it: a list as its items
    joined by commas (``none`` when empty), a dict as ``key value`` pairs (an inner dict
    in parentheses), text as is, anything else as JSON."""
    if isinstance(value, list):
        return ", ".join(map(_shown, value)) or "none"
    if isinstance(value, dict):
        return ", ".join(f"{k} ({_shown(v)})" if isinstance(v, dict) else f"{k} {_shown(v)}"
                         for k, v in value.items()) or "none"
    return value if isinstance(value, str) else json.dumps(value)


def _type_name(annotation: Any) -> str:
    """A parameter annotation as it is written: ``int``, ``list[float]``, ``str | None``;
    a ``Literal`` as the type of its values (its values are the choices)."""
    if annotation is Any:
        return "Any"
    if annotation is type(None):
        return "None"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(dict.fromkeys(_type_name(type(a)) for a in args))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(dict.fromkeys(_type_name(a) for a in args))
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else _type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]" if args else origin.__name__
    return getattr(annotation, "__name__", str(annotation).replace("typing.", ""))


def _choices(annotation: Any) -> list | None:
    """The values of a ``Literal`` annotation, also inside ``Optional``/unions; else None."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return list(args)
    if origin in (typing.Union, types.UnionType):
        values = [c for a in args for c in (_choices(a) or [])]
        return values or None
    return None


def _jsonable(value: Any) -> Any:
    """``value`` when JSON can hold it exactly, else its ``repr``."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)
    return value


def _parse(doc: str) -> dict[str, str]:
    """Name → first sentence of every entry in the ``Parameters`` section of a (cleaned)
    docstring, in either style."""
    lines = doc.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() in ("Parameters", "Parameters:")), None)
    if start is None:
        return {}
    body = start + 1
    if body < len(lines) and set(lines[body].strip()) == {"-"}:
        body += 1
    entries: dict[str, list[str]] = {}
    current: list[str] = []
    entry_indent = None
    for line in lines[body:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if entry_indent is None:
            entry_indent = indent
        if indent > entry_indent:
            current.append(line.strip())
            continue
        numpy, colon = _NUMPY_ENTRY.fullmatch(line.strip()), _COLON_ENTRY.fullmatch(line.strip())
        if indent < entry_indent or not (numpy or colon):
            break  # the section is over
        current = [] if numpy else [colon["doc"] or ""]
        for name in (numpy or colon)["names"].split(","):
            entries[name.strip()] = current
    return {name: _first_sentence(" ".join(text)) for name, text in entries.items()}


def _first_sentence(text: str) -> str:
    """The first sentence of ``text`` with whitespace collapsed; a full stop inside
    parentheses (``(e.g. x. Y)``) does not end it."""
    text = " ".join(text.split())
    for match in _SENTENCE_END.finditer(text):
        head = text[:match.end()]
        if head.count("(") == head.count(")"):
            return head
    return text
