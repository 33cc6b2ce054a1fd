"""A real third-party plugin: built, installed with pip (no network), discovered through
its entry point, listed by `relbench plugins` and used by name in a task."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "relbench-plugin-example"

TASKS = """\
suite: {seeds: [0], num_anchors: 12, output: results, leaderboards: boards}
tasks:
  - name: digits-kernel
    dataset: {name: digits, params: {train_size: 300, test_size: 150}}
    encoders:
      - {name: trained, label: mlp-0, params: {arch: mlp, seed: 0, epochs: 2}}
      - {name: trained, label: mlp-1, params: {arch: mlp, seed: 1, epochs: 2}}
    grid:
      selectors: [random]
      similarities: [gaussian-kernel]
      stitchers: [relative]
    metrics: [accuracy]
"""


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory):
    target = tmp_path_factory.mktemp("site")
    source = tmp_path_factory.mktemp("src") / EXAMPLE.name
    shutil.copytree(EXAMPLE, source)  # build from a copy: nothing is left behind in examples/
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(target), str(source)], check=True)
    return target


def _relbench(args, site, cwd):
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-m", "relbench.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_installed_plugin_is_listed_and_runs_by_name(plugin_site, tmp_path):
    listed = _relbench(["plugins", "--interface", "similarity"], plugin_site, tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "gaussian-kernel" in listed.stdout and "relbench-plugin-example 0.1.0" in listed.stdout

    (tmp_path / "tasks.yaml").write_text(TASKS)
    run = _relbench(["run", "tasks.yaml", "-q"], plugin_site, tmp_path)
    assert run.returncode == 0, run.stderr
    page = (tmp_path / "boards" / "digits-kernel.md").read_text()
    assert "gaussian-kernel" in page

    disabled = _relbench(["--disable", "example", "run", "tasks.yaml", "--dry-run"], plugin_site, tmp_path)
    assert disabled.returncode == 2 and "unknown similarity 'gaussian-kernel'" in disabled.stderr
