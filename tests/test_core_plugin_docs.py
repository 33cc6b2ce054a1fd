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


# ----------------------------------------------------------------------------- `relbench plugins NAME`


def _shown(cli_main, capsys, *args: str) -> str:
    assert cli_main(["plugins", *args]) == 0
    return capsys.readouterr().out


def test_a_metric_shows_its_direction_aggregation_versions_and_parameters(cli_main, capsys):
    from relbench_metrics.classification import Accuracy

    text = _shown(cli_main, capsys, "accuracy")
    assert "Version: 1 (the method's own)" in text and "package relbench " in text
    declared = text.split("\nDeclares:\n")[1].split("\n\n")[0].splitlines()
    assert declared == [f"  direction: {Accuracy.direction()}", f"  aggregation: {Accuracy.aggregation}",
                        f"  output: {Accuracy.output}"]


def test_a_lower_is_better_metric_says_lower(cli_main, capsys, registry):
    lower = [n for n in registry.names("metric") if not registry.by_interface["metric"][n].cls.higher_is_better]
    assert lower, "the built-in metrics hold one whose lower values are better"
    assert "  direction: lower" in _shown(cli_main, capsys, f"metric:{lower[0]}")


def test_a_similarity_shows_its_declared_invariances(cli_main, capsys, registry):
    cls = registry.by_interface["similarity"]["cosine"].cls
    text = _shown(cli_main, capsys, "similarity:cosine")
    assert f"  invariances: {', '.join(sorted(cls.invariances))}" in text.splitlines()
    assert "  center: bool; default false" in text  # its parameter with type and default


def test_a_kind_shows_its_axes_columns_and_row_fields(cli_main, capsys):
    text = _shown(cli_main, capsys, "task_kind:stitching")
    assert "Version: 2 (the method's own)" in text
    lines = text.splitlines()
    axes = next(line for line in lines if line.startswith("  axes: "))
    assert "selectors (interface selector, allows_none false)" in axes
    assert "regularizers (interface regularizer, allows_none true)" in axes
    assert "  row_fields: role str, needs_both_spaces bool" in lines
    assert any(line.startswith("Columns of its results: seed, selector, similarity") for line in lines)


def test_json_holds_the_same_fields_as_the_page(cli_main, capsys, registry):
    for name in ("metric:accuracy", "similarity:cosine", "task_kind:stitching"):
        info, = json.loads(_shown(cli_main, capsys, name, "--json"))
        reg = registry.find(name)[0]
        assert info == json.loads(json.dumps(describe(reg)))  # a round trip changes nothing
        text = _shown(cli_main, capsys, name)
        assert f"Version: {info['version']} (the method's own) · package {info['package']}" in text
        assert info["package_version"] and info["package"].endswith(info["package_version"])
        for key, value in info["declarations"].items():
            assert any(line.startswith(f"  {key}: ") for line in text.splitlines()), key
        for p in info["parameters"]:
            assert f"  {p['name']}: {p['type']};" in text
    metric, = json.loads(_shown(cli_main, capsys, "metric:accuracy", "--json"))
    assert metric["declarations"] == {"direction": "higher", "aggregation": "mean", "output": "labels"}
    sim, = json.loads(_shown(cli_main, capsys, "similarity:cosine", "--json"))
    assert sim["declarations"] == {"invariances": ["orthogonal", "permutation", "scale"]}


def test_an_unknown_name_exits_2_with_a_suggestion(cli_main, capsys):
    assert cli_main(["plugins", "cosin"]) == 2
    assert "did you mean 'cosine'" in capsys.readouterr().err


def test_declarations_become_json_values():
    from relbench.interfaces import Axis, TaskKind
    from relbench.plugin_docs import declarations, package_version

    class Kind(TaskKind):
        name: ClassVar[str] = "toy-declared"
        axes: ClassVar[dict] = {"selectors": Axis("selector", allows_none=True)}
        row_fields: ClassVar[dict] = {"flag": bool}
        paired_on: ClassVar[tuple] = ("source",)
        presentation_params: ClassVar[tuple] = ("companion",)

    assert declarations(Kind) == {"axes": {"selectors": {"interface": "selector", "allows_none": True}},
                                  "paired_on": ["source"], "row_fields": {"flag": "bool"}, "uses_encoders": True,
                                  "presentation_params": ["companion"], "seeds_vary": ""}
    assert declarations(NumpyStyle) == {"invariances": []}
    assert package_version("relbench 0.1.0") == "0.1.0"
    assert package_version("my_method (not installed)") == "" and package_version("?") == ""
