"""Renamed plugins: a plugin's former names (``aliases``) resolve to it with a one-line
deprecation message naming the place and the new name; a tasks file naming one gets the
current plugin's specs, labels and identities (so stored results are shared); unknown
names keep the did-you-mean error; names and aliases never collide."""

from __future__ import annotations

import json
import sys
import textwrap
from dataclasses import dataclass
from types import ModuleType
from typing import ClassVar

import pytest

from relbench import hookimpl
from relbench.config import load_suite
from relbench.errors import ConfigError, PluginConflict, UnknownPlugin
from relbench.plugins import Registry, _discover
from relbench_relreps.similarities import Cosine

from test_core_config import GOOD


@dataclass
class Renamed(Cosine):
    """Cosine under a new name, formerly two others (a test fixture)."""

    name: ClassVar[str] = "cosine-renamed"
    aliases: ClassVar[tuple[str, ...]] = ("cosine-old", "cos-older")


def _module(*classes: type) -> ModuleType:
    module = ModuleType("aliased_plugins")

    @hookimpl
    def relbench_similarities():
        return list(classes)

    module.relbench_similarities = relbench_similarities
    return module


def _registry(*classes: type) -> Registry:
    import toy_plugins

    return Registry(_discover() + [("toy", toy_plugins, "tests 0"), ("aliased", _module(*classes), "aliased 1.0")])


def test_an_alias_resolves_to_the_current_plugin_once_per_place(capsys):
    registry = _registry(Renamed)
    assert registry.get("similarity", "cosine-old", where="here") is Renamed
    assert registry.get("similarity", "cosine-old", where="here") is Renamed
    assert registry.get("similarity", "cosine-renamed") is Renamed  # the current name says nothing
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("here: warning:")
    assert "'cosine-old' is deprecated" in err and "'cosine-renamed'" in err
    assert registry.aliases["similarity"] == {"cosine-old": "cosine-renamed", "cos-older": "cosine-renamed"}
    found = [[r.cls for r in registry.find(name)] for name in ("cos-older", "similarity:cosine-old")]
    assert found == [[Renamed], [Renamed]]
    assert registry.find("stitcher:cosine-old") == []


def test_a_tasks_file_naming_an_alias_gets_the_current_plugin_and_its_identity(write_yaml, capsys):
    registry = _registry(Renamed)
    current = load_suite(write_yaml(GOOD.replace("[cosine]", "[cosine-renamed]"), "current.yaml"), registry)
    assert capsys.readouterr().err == ""
    old_yaml = write_yaml(GOOD.replace("[cosine]", "[cosine-old]"))
    old = load_suite(old_yaml, registry)
    (spec_now,), (spec_old,) = current.tasks[0].specs("similarity"), old.tasks[0].specs("similarity")
    assert (spec_old.name, spec_old.label, spec_old.cls) == ("cosine-renamed", "cosine-renamed", Renamed)
    assert spec_old.identity() == spec_now.identity()
    err = capsys.readouterr().err
    assert err.splitlines() == [f"{old_yaml}:12: warning: the similarity name 'cosine-old' is deprecated: it is now "
                                f"'cosine-renamed' (same plugin, same results); write 'cosine-renamed'."]


def test_unknown_names_keep_did_you_mean(write_yaml):
    registry = _registry(Renamed)
    with pytest.raises(ConfigError, match="tasks.yaml:12.*did you mean 'cosine-renamed'"):
        load_suite(write_yaml(GOOD.replace("[cosine]", "[cosine-renamd]")), registry)
    with pytest.raises(UnknownPlugin, match="unknown stitcher 'cosine-old'"):
        registry.get("stitcher", "cosine-old")  # an alias is a name of its own interface only


@dataclass
class TakesAnAlias(Cosine):
    """A plugin named as another's former name (a test fixture)."""

    name: ClassVar[str] = "cosine-old"


@dataclass
class AliasOfAName(Cosine):
    """A plugin whose former name is another plugin's name (a test fixture)."""

    name: ClassVar[str] = "cosine-new"
    aliases: ClassVar[tuple[str, ...]] = ("cosine",)


@dataclass
class ItsOwnAlias(Cosine):
    """A plugin listing its own name as a former one (a test fixture)."""

    name: ClassVar[str] = "cosine-self"
    aliases: ClassVar[tuple[str, ...]] = ("cosine-self",)


@dataclass
class OneString(Cosine):
    """Aliases written as a string, not a tuple (a test fixture)."""

    name: ClassVar[str] = "cosine-string"
    aliases: ClassVar[str] = "cosine-str"


@pytest.mark.parametrize("classes, message", [
    ((Renamed, TakesAnAlias), "'cosine-old' of TakesAnAlias .* already a name or former name \\(alias\\) of Renamed"),
    ((TakesAnAlias, Renamed), "'cosine-old' of Renamed .* already a name or former name \\(alias\\) of TakesAnAlias"),
    ((AliasOfAName,), "'cosine' of AliasOfAName .* of Cosine"),
    ((ItsOwnAlias,), "other than its name"),
    ((OneString,), "a tuple of former names"),
], ids=["name-after-alias", "alias-after-name", "alias-of-builtin", "own-name", "string"])
def test_names_and_aliases_never_collide(classes, message):
    with pytest.raises(PluginConflict, match=message):
        _registry(*classes)


def test_relbench_plugins_shows_and_finds_aliases(tmp_path, monkeypatch, capsys):
    from relbench.cli import main

    (tmp_path / "renamed_plugin.py").write_text(textwrap.dedent('''\
        from dataclasses import dataclass
        from typing import ClassVar
        from relbench.api import hookimpl
        from relbench_relreps.similarities import Cosine

        @dataclass
        class Renamed(Cosine):
            """Cosine under a new name (a test fixture)."""
            name: ClassVar[str] = "cosine-renamed"
            aliases: ClassVar[tuple[str, ...]] = ("cosine-old",)

        @hookimpl
        def relbench_similarities():
            return [Renamed]
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert main(["--plugin", "renamed_plugin", "plugins", "cosine-old"]) == 0
        out = capsys.readouterr().out
        assert out.startswith("cosine-renamed  (similarity,")
        assert "Former names (deprecated, still accepted): cosine-old" in out
        assert main(["--plugin", "renamed_plugin", "plugins", "cosine-renamed", "--json"]) == 0
        assert [info["aliases"] for info in json.loads(capsys.readouterr().out)] == [["cosine-old"]]
    finally:
        sys.modules.pop("renamed_plugin", None)
