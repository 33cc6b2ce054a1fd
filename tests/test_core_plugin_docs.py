"""relbench.plugin_docs: parameter docs parsed from either docstring style, and a
JSON-able description of every installed plugin."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from relbench.interfaces import Similarity
from relbench.plugin_docs import describe, format_plugin, parameter_docs, undocumented
from relbench.plugins import Registered, load_registry


@dataclass
class NumpyStyle(Similarity):
    """A toy similarity documented in numpy style.

    Parameters
    ----------
    center : bool, default False
        Subtract the anchor mean first (e.g. for
        translations). Not in the paper.
    mode : {"fast", "exact"}, default "fast"
        How to compute it.
    low, high : float
        The clamp bounds.

    Returns
    -------
    nothing : int
        Not a parameter.
    """

    name: ClassVar[str] = "toy-numpy"
    center: bool = False
    mode: Literal["fast", "exact"] = "fast"
    low: float = 0.0
    high: float = 1.0
    scale: float | None = None

    def project(self, X, A):
        return X @ A.T


@dataclass
class ColonStyle(Similarity):
    """A toy similarity documented with a ``Parameters:`` block.

    Parameters:
        k: the number of neighbours kept. Default 10 (our choice).
        weights: one weight per part, in
            order (the paper: uniform). Later sentences are dropped.
        alpha, beta: mixing weights.

    Everything after the block is prose, e.g.
        indented: not a parameter.
    """

    name: ClassVar[str] = "toy-colon"
    weights: list[float]
    k: int = 10
    alpha: float = 0.5
    beta: float = 0.5
    rng: object = field(default_factory=object)

    def project(self, X, A):
        return X @ A.T


@dataclass
class Inherits(ColonStyle):
    """A subclass that adds one documented parameter.

    Parameters:
        extra: an extra switch.
    """

    name: ClassVar[str] = "toy-inherits"
    extra: bool = True


def _registered(cls) -> Registered:
    return Registered(cls, "toy", "tests 0")


def test_numpy_style():
    assert parameter_docs(NumpyStyle) == {
        "center": "Subtract the anchor mean first (e.g. for translations).",
        "mode": "How to compute it.",
        "low": "The clamp bounds.",
        "high": "The clamp bounds.",
    }
    assert undocumented(NumpyStyle) == ["scale"]


def test_colon_style_and_inherited_docs():
    assert parameter_docs(ColonStyle) == {
        "weights": "one weight per part, in order (the paper: uniform).",
        "k": "the number of neighbours kept.",
        "alpha": "mixing weights.",
        "beta": "mixing weights.",
    }
    assert undocumented(ColonStyle) == ["rng"]
    assert parameter_docs(Inherits)["extra"] == "an extra switch."
    assert parameter_docs(Inherits)["k"] == "the number of neighbours kept."


def test_describe_types_choices_defaults():
    info = describe(_registered(NumpyStyle))
    assert info["name"] == "toy-numpy" and info["interface"] == "similarity" and info["package"] == "tests 0"
    assert info["class"] == f"{__name__}:NumpyStyle"
    assert info["summary"] == "A toy similarity documented in numpy style."
    assert info["doc"].startswith("A toy similarity") and "Parameters" in info["doc"]
    params = {p["name"]: p for p in info["parameters"]}
    assert list(params) == ["center", "mode", "low", "high", "scale"]
    assert params["mode"] == {"name": "mode", "type": "str", "choices": ["fast", "exact"], "default": "fast",
                              "required": False, "doc": "How to compute it."}
    assert params["center"]["type"] == "bool" and params["center"]["choices"] is None
    assert params["scale"]["type"] == "float | None" and params["scale"]["doc"] == ""


def test_required_and_non_json_defaults():
    params = {p["name"]: p for p in describe(_registered(ColonStyle))["parameters"]}
    assert params["weights"]["required"] and params["weights"]["default"] is None
    assert params["weights"]["type"] == "list[float]"
    assert params["rng"]["default"].startswith("<object object at")
    json.dumps(describe(_registered(ColonStyle)), allow_nan=False)


def _parameter_lines(cls) -> dict[str, str]:
    """The parameter lines of ``format_plugin``'s page, by parameter name."""
    block = format_plugin(_registered(cls)).split("\nParameters:\n")[1]
    return {line.split(":")[0].strip(): line for line in block.splitlines()}


def test_format_plugin():
    header, *rest = format_plugin(_registered(NumpyStyle)).splitlines()
    assert header.startswith("toy-numpy") and "similarity" in header and "tests 0" in header
    assert "    A toy similarity documented in numpy style." in rest
    lines = _parameter_lines(NumpyStyle)
    assert list(lines) == ["center", "mode", "low", "high", "scale"]
    assert all(s in lines["mode"] for s in ("str", '"fast", "exact"', 'default "fast"', "How to compute it."))
    assert "required" in _parameter_lines(ColonStyle)["weights"]


def test_every_installed_plugin_is_described():
    registry = load_registry()
    described = [describe(reg) for table in registry.by_interface.values() for reg in table.values()]
    assert described
    for info in described:
        json.dumps(info, allow_nan=False)
        assert info["name"] and info["interface"] and ":" in info["class"]
        assert all({"name", "type", "choices", "default", "required", "doc"} <= set(p) for p in info["parameters"])
