"""Every hook and interface is documented; registry errors are helpful."""

from __future__ import annotations

import inspect
import sys
import textwrap
from dataclasses import dataclass
from types import SimpleNamespace
from typing import ClassVar

import pytest

from relbench import hookimpl, hookspecs, interfaces
from relbench.errors import PluginConflict, PluginLoadError, UnknownPlugin
from relbench.interfaces import INTERFACES, Similarity
from relbench.plugins import Registry, _discover, own_docstring


def test_every_hookspec_is_documented_and_mapped():
    specs = [n for n, f in vars(hookspecs).items() if n.startswith("relbench_") and callable(f)]
    assert specs, "no hookspecs found"
    for name in specs:
        doc = inspect.getdoc(getattr(hookspecs, name)) or ""
        assert "Returns:" in doc and "Called:" in doc, f"hookspec {name} lacks Returns:/Called: docs"
        assert name in hookspecs.HOOK_INTERFACES, f"hookspec {name} maps to no interface"
    assert set(hookspecs.HOOK_INTERFACES.values()) == set(INTERFACES)


@pytest.mark.parametrize("cls", list(INTERFACES.values()), ids=list(INTERFACES))
def test_every_interface_and_method_is_documented(cls):
    assert inspect.getdoc(cls), f"{cls.__name__} has no docstring"
    for name, member in vars(cls).items():
        if callable(member) and not name.startswith("_"):
            assert inspect.getdoc(member), f"{cls.__name__}.{name} has no docstring"


def test_every_data_class_is_documented():
    for name in interfaces.__all__:
        obj = getattr(interfaces, name)
        if inspect.isclass(obj):
            assert own_docstring(obj), f"interfaces.{name} has no docstring of its own"
        elif inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"interfaces.{name} has no docstring"


def test_every_registered_plugin_is_documented():
    registry = Registry(_discover())
    count = 0
    for interface, table in registry.by_interface.items():
        for name, reg in table.items():
            count += 1
            assert reg.summary, f"{interface} {name!r} ({reg.package}) has no docstring of its own"
            for method, member in vars(reg.cls).items():
                if callable(member) and not method.startswith("_"):
                    assert inspect.getdoc(member), f"{interface} {name!r}: {reg.cls.__name__}.{method} has no docstring"
    assert count > 0


def test_the_documentation_check_catches_an_undocumented_plugin():
    @dataclass
    class Bare(Similarity):
        name: ClassVar[str] = "bare"
        scale: float = 1.0

        def project(self, X, A):
            return X @ A.T

    @dataclass
    class Written(Similarity):
        """Written by hand."""

        name: ClassVar[str] = "written"

    assert inspect.getdoc(Bare)  # what a naive check sees: the signature dataclass filled in
    assert own_docstring(Bare) == "" and own_docstring(Written) == "Written by hand."
    registry = Registry([("bare", _module(Bare), "tests 0")])
    assert registry.by_interface["similarity"]["bare"].summary == ""


def test_a_plugin_package_that_fails_to_import_is_named_and_can_be_disabled(monkeypatch):
    class BrokenEntryPoint:
        name, value, dist = "broken", "broken_pkg:plugin", None

        def load(self):
            raise ImportError("No module named 'broken_dependency'")

    monkeypatch.setattr("relbench.plugins.entry_points", lambda group: [BrokenEntryPoint()])
    with pytest.raises(PluginLoadError, match=r"'broken'.*broken_dependency.*--disable broken"):
        _discover()
    assert _discover({"broken"}) == [("broken", None, "")]  # known by name, never imported


def _module(*classes, hook="relbench_similarities"):
    def impl():
        return list(classes)

    impl.__name__ = hook
    return SimpleNamespace(**{hook: hookimpl(impl)})


@dataclass
class _Dot(Similarity):
    """Plain dot product (test double)."""

    name: ClassVar[str] = "dot"

    def project(self, X, A):
        return X @ A.T


def test_unknown_name_suggests_close_matches():
    registry = Registry([("a", _module(_Dot), "pkg-a 1.0")])
    with pytest.raises(UnknownPlugin, match=r"did you mean 'dot'"):
        registry.get("similarity", "dott")


def test_conflicting_names_name_both_sources():
    @dataclass
    class Other(_Dot):
        """Another dot product (test double)."""

    with pytest.raises(PluginConflict) as err:
        Registry([("a", _module(_Dot), "pkg-a 1.0"), ("b", _module(Other), "pkg-b 2.0")])
    assert "pkg-a 1.0" in str(err.value) and "pkg-b 2.0" in str(err.value)


def test_disable_by_package_or_name(monkeypatch):
    monkeypatch.setenv("RELBENCH_DISABLE_PLUGINS", "similarity:dot")
    from relbench.plugins import disabled_from_env

    assert "dot" not in Registry([("a", _module(_Dot), "p 1")], disabled_from_env()).names("similarity")
    assert "dot" not in Registry([("a", _module(_Dot), "p 1")], {"a"}).names("similarity")
    assert "dot" in Registry([("a", _module(_Dot), "p 1")]).names("similarity")


def test_wrong_interface_is_rejected():
    with pytest.raises(PluginConflict, match="not a subclass of Encoder"):
        Registry([("a", _module(_Dot, hook="relbench_encoders"), "p 1")])


def test_a_plugin_name_that_is_not_a_string_is_refused():
    @dataclass
    class Listed(_Dot):
        """A dot product whose name is a list (test double)."""

        name: ClassVar = ["dot"]

    with pytest.raises(PluginConflict, match="has no `name`"):
        Registry([("a", _module(Listed), "p 1")])


HOOK_BODIES = {
    "RuntimeError": "raise RuntimeError('boom')",
    "SystemExit": "raise SystemExit(4)",
    "a BaseException": "raise type('Odd', (BaseException,), {})('odd')",
    "not a list": "return 5",
}


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    """Write a plugin module into tmp_path (importable as its name) and forget it after."""
    names = []

    def write(name: str, source: str) -> str:
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        names.append(name)
        return name

    monkeypatch.syspath_prepend(str(tmp_path))
    yield write
    for name in names:
        sys.modules.pop(name, None)


def _hook_module(body: str) -> str:
    return f"from relbench import hookimpl\n\n@hookimpl\ndef relbench_stitchers():\n    {body}\n"


@pytest.mark.parametrize("what", list(HOOK_BODIES))
def test_a_plugin_module_whose_hook_raises_is_named_with_how_to_switch_it_off(plugin_module, capsys, what):
    from relbench.cli import main

    name = plugin_module(f"hostile_{what.replace(' ', '_')}", _hook_module(HOOK_BODIES[what]))
    assert main(["--plugin", name, "plugins"]) == 2
    err = capsys.readouterr().err
    assert f"relbench_stitchers() of the relbench plugin package {name!r}" in err and f"--disable {name}" in err
    assert "Traceback" not in err
    assert main(["--plugin", name, "--disable", name, "plugins", "--interface", "stitcher"]) == 0


def test_a_plugin_module_that_exits_while_imported_is_a_user_error(plugin_module, capsys):
    from relbench.cli import main

    name = plugin_module("hostile_exits_on_import", "raise SystemExit(5)\n")
    assert main(["--plugin", name, "plugins"]) == 2
    assert f"plugin module {name!r}" in capsys.readouterr().err
    # switched off by name, it is never imported
    assert main(["--plugin", name, "--disable", name, "plugins", "--interface", "stitcher"]) == 0
    assert "matches no plugin" not in capsys.readouterr().err


def test_ctrl_c_in_a_plugin_hook_still_interrupts(plugin_module, capsys):
    from relbench.cli import main

    name = plugin_module("hostile_interrupted", _hook_module("raise KeyboardInterrupt"))
    assert main(["--plugin", name, "plugins"]) == 130


@pytest.mark.parametrize("what", ["RuntimeError", "SystemExit"])
def test_an_installed_plugin_package_whose_hook_raises_is_named(plugin_module, monkeypatch, capsys, what):
    from relbench.cli import main
    from relbench.plugins import entry_points

    module = __import__(plugin_module(f"hostile_installed_{what}", _hook_module(HOOK_BODIES[what])))
    fake = SimpleNamespace(name="hostile", value=module.__name__, dist=SimpleNamespace(name="hostile-pkg",
                                                                                       version="1.0"),
                           load=lambda: module)
    monkeypatch.setattr("relbench.plugins.entry_points", lambda group: [*entry_points(group=group), fake])
    assert main(["plugins"]) == 2
    err = capsys.readouterr().err
    assert "plugin package 'hostile' (hostile-pkg 1.0) failed" in err and "--disable hostile" in err
    assert main(["--disable", "hostile", "plugins", "--interface", "stitcher"]) == 0
