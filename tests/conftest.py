"""Shared fixtures: a registry with the built-in plugins plus the toy test plugins."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture
def registry():
    """Built-in plugins (entry points) plus tests/toy_plugins.py."""
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
def _isolated_cache(tmp_path, monkeypatch):
    """Every test gets its own embedding cache unless it sets one."""
    monkeypatch.setenv("RELBENCH_CACHE_DIR", str(tmp_path / "cache"))
