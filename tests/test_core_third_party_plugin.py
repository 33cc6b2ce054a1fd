"""A real third-party plugin: built, installed with pip (no network), discovered through
its entry point, listed by `relbench plugins` and used by name in a task."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from relbench.bundle import read_bundle
from test_core_reuse import QUALITY
from test_core_verify import TASKS as RELEASED_TASKS

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


def _commit(folder: Path) -> Path:
    """Everything in ``folder`` committed in a git repository of its own."""
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "checkout"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=folder, check=True,
                       capture_output=True)
    return folder


def _clean_copy(folder: Path) -> Path:
    """This working tree's relbench and built-in plugins, committed on their own: a fresh
    clone whose rows name a clean revision however this tree stands."""
    for part in ("relbench", "plugins"):
        shutil.copytree(ROOT / part, folder / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return _commit(folder)


def test_an_installed_similarity_reuses_the_release_submits_verifies_and_merges(plugin_site, tmp_path_factory):
    """The contributor's path end to end, in subprocesses as a user runs it: a similarity
    package installed with pip, added to the release's tasks file, computes only its own
    units (the rest reused), shows in the main table, the summary export and the HTML
    board, and its bundle verifies and merges as submitted."""
    checkout = tmp_path_factory.mktemp("checkout")
    path = checkout / "tasks.yaml"
    path.write_text(RELEASED_TASKS)
    (checkout / ".gitignore").write_text("results/\ncache/\n")
    _commit(checkout)
    clone = _clean_copy(tmp_path_factory.mktemp("clone"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(clone), str(clone / "plugins"), str(plugin_site),
                                                         str(ROOT / "tests")]),
           "RELBENCH_PLUGINS": "toy_plugins", "RELBENCH_CACHE_DIR": str(checkout / "cache"),
           "TMPDIR": str(tmp_path_factory.mktemp("tmp"))}

    def relbench(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-m", "relbench.cli", *args], cwd=checkout, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return done

    relbench("run", "tasks.yaml", "-q", "--no-leaderboard")
    relbench("publish", "tasks.yaml")  # the release: computed by the same installation
    path.write_text(path.read_text().replace("similarities: [cosine]", "similarities: [cosine, gaussian-kernel]"))
    ran = relbench("run", "tasks.yaml", "--reuse", "--output", "results/mine", "--leaderboards", "results/boards")
    accounting = next(ln for ln in ran.stderr.splitlines() if ln.startswith("encoded "))
    lines = [json.loads(ln) for ln in (checkout / "results" / "mine" / "blobs.jsonl").read_text().splitlines()]
    mine = [ln for ln in lines if ln["key"].get("similarity") == "gaussian-kernel"]
    assert mine and f"ran {len(mine)} units" in accounting  # its own units, nothing else
    assert re.search(rf"reused {len(lines) - len(mine) + QUALITY} already finished", accounting)
    assert "computed locally" in (checkout / "results" / "boards" / "blobs.md").read_text()
    index = (checkout / "results" / "boards" / "README.md").read_text()
    assert "gaussian-kernel" in index  # the main table

    relbench("export", "tasks.yaml", "--summary", "--output", "results/mine", "--format", "csv", "--to",
             "results/summary.csv")
    summary = pd.read_csv(checkout / "results" / "summary.csv")
    assert (summary["similarity"] == "gaussian-kernel").any()
    relbench("leaderboard", "tasks.yaml", "--output", "results/mine", "--html", "results/site")
    assert "gaussian-kernel" in (checkout / "results" / "site" / "index.html").read_text()

    relbench("submit", "tasks.yaml", "--output", "results/mine", "--to", "results/bundle.zip")
    bundle = read_bundle(checkout / "results" / "bundle.zip")
    assert set(bundle.rows["similarity"]) == {"gaussian-kernel"}
    assert "relbench-plugin-example 0.1.0" in bundle.manifest["packages"]
    verified = relbench("verify", "results/bundle.zip", "--sample", "2", "-q")
    assert "verdict: the bundle agrees" in verified.stdout
    merged = relbench("leaderboard", "tasks.yaml", "--leaderboards",  # the release's own store
                      "results/merged", "--include", "results/bundle.zip")
    assert f"merged {len(mine)} units" in merged.stderr
    page = (checkout / "results" / "merged" / "blobs.md").read_text()
    ranking = page.split("### Ranking", 1)[1].split("###", 1)[0].splitlines()
    assert any("gaussian-kernel" in r and re.search(r"\| submitted\s+\|", r) for r in ranking)
