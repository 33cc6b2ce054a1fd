"""The smoke suite tasks/quick.yaml end to end on the real models and data: every task
kind runs, leaderboards are written, and a second run encodes and recomputes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from relbench.results import ResultStore

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("quick")
    env = {**os.environ, "RELBENCH_CACHE_DIR": str(out / "cache")}
    cmd = [sys.executable, "-m", "relbench.cli", "run", str(ROOT / "tasks" / "quick.yaml"),
           "--output", str(out / "results"), "--leaderboards", str(out / "boards")]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    return out, first, second


def test_quick_suite_runs_every_task_kind(quick_run):
    out, first, _ = quick_run
    assert first.returncode == 0, first.stderr[-3000:]
    store = ResultStore(out / "results")
    df = store.load()
    assert set(df["kind"]) == {"stitching", "translation-quality", "scale-invariance", "reconstruction", "proxy"}
    assert (df["status"] != "error").all(), df[df["status"] == "error"]["error"].head().tolist()
    boards = out / "boards"
    index = (boards / "README.md").read_text()
    for task in pd.unique(df["task"]):
        assert (boards / f"{task}.md").exists() and f"[{task}]({task}.md)" in index


def test_quick_suite_shows_relative_beats_absolute_across_seeds(quick_run):
    out, _, _ = quick_run
    df = ResultStore(out / "results").load("quick-digits-cross-seed")
    off = df[(df["source"] != df["target"]) & (df["metric"] == "accuracy") & (df["status"] == "ok")]
    rel = off[(off["stitcher"] == "relative") & (off["similarity"] == "cosine")]["value"].mean()
    ab = off[off["stitcher"] == "absolute"]["value"].mean()
    assert rel > ab + 0.3, (rel, ab)


def test_second_run_reencodes_and_recomputes_nothing(quick_run):
    _, first, second = quick_run
    assert second.returncode == 0, second.stderr[-3000:]
    assert "encoded 0 (encoder, split) banks, reused 0 from the cache" in second.stderr  # not even read
    assert "ran 0 units" in second.stderr and "already finished with the same identity" in second.stderr
    assert "0 changed pages" in second.stderr


def test_jobs_run_tasks_in_worker_processes(quick_run):
    out, _, _ = quick_run
    env = {**os.environ, "RELBENCH_CACHE_DIR": str(out / "cache")}
    cmd = [sys.executable, "-m", "relbench.cli", "run", str(ROOT / "tasks" / "quick.yaml"), "--jobs", "2",
           "--force", "--task", "quick-digits-cross-seed", "--task", "quick-reconstruction",
           "--output", str(out / "results"), "--leaderboards", str(out / "boards")]
    before = ResultStore(out / "results").load(all_runs=True)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 workers" in done.stderr and "encoded 0 (encoder, split) banks" in done.stderr
    after = ResultStore(out / "results").load(all_runs=True)
    new = after[~after["run"].isin(before["run"])]
    for task in ("quick-digits-cross-seed", "quick-reconstruction"):
        assert after["run"][after["task"] == task].nunique() == before["run"][before["task"] == task].nunique() + 1
    # rows name the command the user typed, not the workers' internal ones
    assert set(new["command"]) == {"relbench " + " ".join(cmd[3:])}


def test_leaderboards_rebuild_from_the_store_alone_figures_included(quick_run):
    out, _, _ = quick_run
    fresh = out / "rebuilt"
    cmd = [sys.executable, "-m", "relbench.cli", "leaderboard", str(ROOT / "tasks" / "quick.yaml"),
           "--output", str(out / "results"), "--leaderboards", str(fresh)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    # reconstructions are drawn from the trained models during the run and kept in the store
    page = (fresh / "quick-reconstruction.md").read_text()
    for kind in ("absolute", "relative"):
        assert f"figures/quick-reconstruction/reconstruction_{kind}.png" in page
        assert (fresh / "figures" / "quick-reconstruction" / f"reconstruction_{kind}.png").stat().st_size > 1000
    # every figure of every page (heatmaps, curves, scatter, reconstructions) has its vector twin
    pngs = list((fresh / "figures").rglob("*.png"))
    assert len(pngs) > 10 and [p for p in pngs if not p.with_suffix(".svg").is_file()] == []
