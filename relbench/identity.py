"""What identifies a unit of work: everything that produced it, and nothing else.

A unit's *inputs* are a JSON-able description of all that went into it: relbench's
protocol version; the task kind and the data set (each a plugin identity, the data set's
with its content fingerprint); every encoder the task reads (its cache identity); the
metric list; the number of anchors; and the unit's own key (seed, the plugins of its
combination, the target encoder …). A plugin identity is its class, every parameter
with defaults resolved, the distribution (package and version) that provides it and
the author's own :attr:`~relbench.interfaces.Plugin.version`.

Labels are display names only. The inputs name encoders and metrics by label so that
a change can be explained ("encoders.mlp-s0.params.epochs changed"), but the hash that
identifies a unit, :func:`fingerprint`, is taken over a canonical form in which those
labels are dropped: renaming a label recomputes nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from typing import Any

#: bumped when the harness's own protocol changes what a unit computes (how rows are
#: formed, how units are split); every stored unit then becomes stale
PROTOCOL_VERSION = "2"

#: keys of the inputs whose mapping is label → identity (labels dropped when hashing)
LABELLED = ("encoders", "metrics")


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))


def key_json(display: dict[str, Any]) -> str:
    """A displayed unit key as one canonical string (for lookups)."""
    return _json(display)


def canonical(inputs: dict[str, Any]) -> dict[str, Any]:
    """The inputs without display names: label-keyed mappings become sorted lists."""
    out = dict(inputs)
    for key in LABELLED:
        if isinstance(out.get(key), dict):
            out[key] = sorted(out[key].values(), key=_json)
    return out


def fingerprint(inputs: dict[str, Any]) -> str:
    """The unit's identity: a SHA-256 (40 hex digits) of its canonical inputs."""
    return hashlib.sha256(_json(canonical(inputs)).encode()).hexdigest()[:40]


class SharedInputs:
    """:func:`fingerprint` of many inputs that share every top-level field but one.

    A task's units share its inputs (protocol, kind, data set, encoders …) and differ
    in ``unit`` only. ``SharedInputs(base, "unit").fingerprint(value)`` equals
    ``fingerprint({**base, "unit": value})`` to the last digit, but the shared fields
    are made canonical and written as JSON once: planning a 7,000-unit suite wrote
    them again for every unit (the encoders' identities sorted by their JSON each
    time), most of a no-op run's time."""

    def __init__(self, base: dict[str, Any], field: str) -> None:
        shared = canonical({k: v for k, v in base.items() if k != field})
        self._field = field
        # json.dumps(sort_keys=True) writes a dict's fields sorted by key, each as `"key":value`
        self._parts = {key: f"{json.dumps(key)}:{_json(value)}" for key, value in shared.items()}
        self._order = sorted([*self._parts, field])
        self._field_key = json.dumps(field)

    def fingerprint(self, value: Any) -> str:
        """The fingerprint of the shared fields with ``field`` set to ``value``."""
        own = f"{self._field_key}:{_json(canonical({self._field: value})[self._field])}"
        text = "{" + ",".join(own if key == self._field else self._parts[key] for key in self._order) + "}"
        return hashlib.sha256(text.encode()).hexdigest()[:40]


def changed_fields(old: Any, new: Any, path: str = "") -> list[str]:
    """Dotted paths of the leaves where ``new`` differs from ``old`` (a key present on
    one side only is reported at that key), e.g. ``["dataset.params.train_size"]``."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in old or key not in new:
                out.append(sub)
            else:
                out += changed_fields(old[key], new[key], sub)
        return out
    return [] if _json(old) == _json(new) else [path or "<all>"]


#: input fields that follow from others (a data set's content from its parameters, an
#: encoder's weights from its training data): named only when nothing declared changed
DERIVED = ("fingerprint", "weights")


def explain(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Why a stored unit's inputs differ from the current ones: the changed fields, the
    derived ones left out when a declared field explains them."""
    fields = changed_fields(old, new)
    declared = [f for f in fields if f.rsplit(".", 1)[-1] not in DERIVED]
    return declared or fields


def relabelled(old: dict[str, Any], new: dict[str, Any], plugins: Collection[str]) -> bool:
    """Whether displayed unit key ``old`` differs from ``new`` at most in the columns
    ``plugins``, which show plugin labels (a default label names the parameters that
    differ from the defaults, so editing one changes it)."""
    return old.keys() == new.keys() and all(old[c] == new[c] for c in new if c not in plugins)


def same_plugins(old: dict[str, Any], new: dict[str, Any], plugins: Collection[str]) -> bool:
    """Whether the unit inputs ``old`` and ``new`` (``inputs["unit"]``) name plugins of
    the same classes in the columns ``plugins``, whatever their parameters."""
    def classes(value: Any) -> Any:
        if isinstance(value, dict):
            return value.get("class")
        if isinstance(value, list):
            return sorted(str(classes(v)) for v in value)
        return value

    return all(classes(old.get(c)) == classes(new.get(c)) for c in plugins)
