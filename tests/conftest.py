"""Shared fixtures: a registry with the built-in plugins plus the toy test plugins.

The tests are hermetic: they discover only this repository's plugins (the ``relbench``
entry points whose module is a package under ``plugins/``) plus the toy ones, whatever
else is installed; and they never write to the user's embedding cache
(``$RELBENCH_CACHE_DIR`` or ``~/.cache/relbench`` when the run starts): the whole run,
subprocesses and module fixtures included, uses a temporary cache, each test its own.
(No check of the real cache afterwards: a `relbench run` beside the tests may write there.)
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import tempfile
import textwrap
from pathlib import Path

import pytest
import torch

from relbench.cache import CACHE_ENV

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: the plugin packages of this repository, the only installed plugins the tests load
BUILTIN_PACKAGES = frozenset(p.name for p in (Path(__file__).resolve().parents[1] / "plugins").iterdir()
                             if (p / "__init__.py").is_file())


#: the run's temporary cache, in place of the user's (set before any test module is
#: imported, so module-level code and subprocesses see it too)
RUN_CACHE = tempfile.mkdtemp(prefix="relbench-test-cache-")
os.environ[CACHE_ENV] = RUN_CACHE


def builtin_entry_points(group: str) -> list[importlib.metadata.EntryPoint]:
    """The installed ``group`` entry points whose module is one of :data:`BUILTIN_PACKAGES`."""
    return [ep for ep in importlib.metadata.entry_points(group=group) if ep.module.split(".")[0] in BUILTIN_PACKAGES]


@pytest.fixture(autouse=True, scope="session")
def _builtin_plugins_only():
    """Plugin discovery sees only this repository's entry points: a plugin the user
    installed changes nothing the tests see (the toy plugins are added explicitly)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("relbench.plugins.entry_points", builtin_entry_points)
        yield


@pytest.fixture(autouse=True, scope="session")
def _remove_run_cache():
    """Remove the run's temporary cache when the run ends."""
    yield
    shutil.rmtree(RUN_CACHE, ignore_errors=True)


@pytest.fixture
def registry():
    """Built-in plugins (this repository's entry points) plus tests/toy_plugins.py."""
    import toy_plugins

    from relbench.plugins import Registry, _discover

    return Registry(_discover() + [("toy", toy_plugins, "tests 0")])


@pytest.fixture
def cli_main(registry, monkeypatch):
    """`relbench` main() with the toy plugins registered too."""
    from relbench import cli

    monkeypatch.setattr("relbench.plugins.load_registry", lambda *args, **kwargs: registry)
    return cli.main


@pytest.fixture
def write_yaml(tmp_path):
    """Write a YAML text (dedented) into tmp_path and return its path."""

    def _write(text: str, name: str = "tasks.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return _write


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    """The tests' tensors are tiny: one intra-op thread is fastest, and unaffected by a
    busy machine (two threads made small training steps many times slower on 2 cores)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path):
    """Every test gets its own embedding cache unless it sets one (with a patch of its
    own, so that a test undoing its ``monkeypatch`` keeps it)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CACHE_ENV, str(tmp_path / "cache"))
        yield
