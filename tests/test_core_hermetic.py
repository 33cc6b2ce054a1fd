"""The tests are hermetic (see conftest.py): a plugin the user installed changes nothing
they see, and nothing they run writes to the user's embedding cache."""

from __future__ import annotations

import importlib.metadata
import tempfile
from pathlib import Path

import pytest

from relbench.cache import default_cache_root
from relbench.plugins import _discover, load_registry

USER_PLUGIN = '''
from dataclasses import dataclass
from typing import ClassVar

from relbench import hookimpl
from relbench.interfaces import Similarity


@dataclass
class Dot(Similarity):
    """Inner product (a plugin a user installed)."""

    name: ClassVar[str] = "user-dot"

    def project(self, X, A):
        return X @ A.T


@hookimpl
def relbench_similarities():
    return [Dot]
'''


def test_a_plugin_the_user_installed_changes_nothing_the_tests_see(tmp_path, monkeypatch):
    """Installed as pip would (a module and its dist-info on the path), a user's plugin
    is an entry point like the built-in ones, but no registry of the tests loads it, and
    the default suite's test still finds every registered similarity in use."""
    import test_suites_validate

    site = tmp_path / "site"
    (site / "user_relbench_plugin-1.0.dist-info").mkdir(parents=True)
    (site / "user_relbench_plugin-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: user-relbench-plugin\nVersion: 1.0\n")
    (site / "user_relbench_plugin-1.0.dist-info" / "entry_points.txt").write_text(
        "[relbench]\nuser = user_relbench_plugin\n")
    (site / "user_relbench_plugin.py").write_text(USER_PLUGIN)
    monkeypatch.syspath_prepend(str(site))
    assert "user" in {ep.name for ep in importlib.metadata.entry_points(group="relbench")}  # installed

    assert "user" not in {name for name, _, _ in _discover()}
    assert "user-dot" not in load_registry().names("similarity")
    test_suites_validate.test_default_suite_has_three_seeds_and_every_task_kind()


@pytest.fixture(scope="module")
def module_cache_root():
    return default_cache_root()


def test_code_outside_a_test_uses_a_temporary_cache(module_cache_root):
    """Module fixtures (and module-level code, subprocesses they start) run before a
    test's own cache is set: they get the run's temporary one, never the user's."""
    assert module_cache_root.is_relative_to(tempfile.gettempdir()) and module_cache_root.name.startswith(
        "relbench-test-cache-")


def test_a_test_that_undoes_its_monkeypatch_keeps_its_own_cache(tmp_path, monkeypatch):
    """``monkeypatch.undo()`` in a test (test_core_runner does it) used to undo the
    test's cache too, and the rest of the test wrote to the user's real cache."""
    monkeypatch.setattr(Path, "home", lambda: tmp_path / "home")
    monkeypatch.undo()
    assert default_cache_root() == tmp_path / "cache"
