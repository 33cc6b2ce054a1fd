"""Published pages are never destroyed: a partial or interrupted run keeps every complete
page, figure and release row; only `relbench publish` writes a citable release, from a
complete store at a clean revision; runs sharing a folder write it one after the other."""

from __future__ import annotations

import re

import subprocess
import threading
from pathlib import Path

import pandas as pd
import pytest
from test_core_runner import _interrupt_at_cell

from relbench import __version__
from relbench.leaderboard import MANIFEST, RELEASE, reference_gap

TWO_TASKS = """\
suite:
  seeds: [0, 1]
  num_anchors: 16
  output: {output}
  leaderboards: {boards}
tasks:
  - name: blobs
    dataset: {{name: toy-blobs, params: {{classes: 4}}}}
    encoders:
      - {{name: toy-rotated, label: a, params: {{seed: 1}}}}
      - {{name: toy-rotated, label: b, params: {{seed: 2, scale: 3.0}}}}
    grid: {{selectors: [random], similarities: [cosine], stitchers: [relative, absolute]}}
    metrics: [accuracy]
  - name: other-blobs
    dataset: {{name: toy-blobs, params: {{classes: 3, seed: 5}}}}
    encoders:
      - {{name: toy-rotated, label: a, params: {{seed: 1}}}}
      - {{name: toy-rotated, label: b, params: {{seed: 4}}}}
    grid: {{selectors: [random], similarities: [cosine], stitchers: [relative, absolute]}}
    metrics: [accuracy]
"""


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def published(cli_main, write_yaml, tmp_path):
    """A tasks file whose pages were drawn from a complete store into ``boards``."""
    path = write_yaml(TWO_TASKS.format(output="results", boards="boards"))
    assert cli_main(["run", str(path), "-q"]) == 0
    return path, tmp_path / "boards"


@pytest.mark.parametrize("manifest", ["current", "before completeness was recorded"])
def test_an_interrupted_run_into_a_fresh_store_leaves_the_pages_byte_for_byte(published, cli_main, monkeypatch,
                                                                              manifest):
    import json

    path, boards = published
    if manifest != "current":  # the release committed before this guard: its entries say nothing of it
        entries = json.loads((boards / MANIFEST).read_text())
        for entry in entries.values():
            for key in ("complete", "stored", "units", "store", "revisions", "newest", "plan"):
                entry.pop(key, None) if isinstance(entry, dict) else None
        (boards / MANIFEST).write_text(json.dumps(entries))
    before = _snapshot(boards)
    assert any(name.startswith("figures/") for name in before) and RELEASE in before
    # a fresh clone: the pages are there, the store is empty; Ctrl-C after a few units
    _interrupt_at_cell(monkeypatch, 3)
    assert cli_main(["run", str(path), "-q", "--output", str(path.parent / "fresh")]) == 130
    assert _snapshot(boards) == before
    # redrawing from that partial store keeps them too
    assert cli_main(["leaderboard", str(path), "--output", str(path.parent / "fresh")]) == 0
    assert _snapshot(boards) == before


def test_a_complete_task_replaces_its_page_and_a_partial_one_keeps_its_page_and_rows(published, cli_main,
                                                                                      monkeypatch):
    path, boards = published
    old = pd.read_parquet(boards / RELEASE)
    old_other = (boards / "other-blobs.md").read_bytes()
    # blobs finishes in a fresh store, other-blobs is interrupted: blobs' page is redrawn from the new
    # store, other-blobs' page and rows stay what the complete store drew
    fresh = str(path.parent / "fresh")
    assert cli_main(["run", str(path), "-q", "--output", fresh, "--task", "blobs"]) == 0
    _interrupt_at_cell(monkeypatch, 2)
    assert cli_main(["run", str(path), "-q", "--output", fresh]) == 130
    assert (boards / "other-blobs.md").read_bytes() == old_other
    new = pd.read_parquet(boards / RELEASE)
    assert set(new["task"]) == {"blobs", "other-blobs"}
    kept = new[new["task"] == "other-blobs"].reset_index(drop=True)
    pd.testing.assert_series_equal(kept["value"].astype(float), old[old["task"] == "other-blobs"]
                                   .reset_index(drop=True)["value"].astype(float))
    assert set(new.loc[new["task"] == "blobs", "run"]) != set(old.loc[old["task"] == "blobs", "run"])
    index = (boards / "README.md").read_text()
    assert "complete (" in index and "**partial**" not in index  # both pages come from complete stores


def test_a_task_without_a_complete_page_gets_one_marked_partial(cli_main, write_yaml, monkeypatch, tmp_path):
    path = write_yaml(TWO_TASKS.format(output="results", boards="boards"))
    _interrupt_at_cell(monkeypatch, 3)
    assert cli_main(["run", str(path), "-q"]) == 130
    assert not list((tmp_path / "boards").iterdir())  # Ctrl-C draws nothing
    assert cli_main(["leaderboard", str(path)]) == 0
    page = (tmp_path / "boards" / "blobs.md").read_text()
    assert "**Partial results:** the store holds 1 of this task's 8 units" in page
    index = (tmp_path / "boards" / "README.md").read_text()
    assert "**partial** (1 of 8 units) in `results`, git " in index and "Not a release: not for citation" in index
    assert "How to cite" not in index


def test_the_gap_to_the_reference_is_a_shortfall_in_the_metrics_better_direction():
    assert reference_gap(0.8, 0.9, "higher") == pytest.approx(0.1)
    assert reference_gap(0.3, 0.2, "lower") == pytest.approx(0.1)  # an MSE of 0.3 falls 0.1 short of 0.2
    assert pd.isna(reference_gap(0.3, float("nan"), "lower"))
    assert reference_gap(0.95, 0.9, "higher") == pytest.approx(-0.05)  # a best score above its reference
    assert reference_gap(0.1, 0.2, "lower") == pytest.approx(-0.1)


def test_runs_sharing_a_folder_draw_it_one_after_the_other(published, registry, monkeypatch):
    """Two renderings of one folder at once (two runs on one store) both succeed and
    leave identical, complete pages; before, one deleted figures the other listed."""
    import relbench.leaderboard as leaderboard
    from relbench.config import load_suite
    from relbench.runner import Runner

    path, boards = published
    runner = Runner(load_suite(path, registry), registry, quiet=True)
    plans = runner.plans()
    current = {tr.task.name: [u.id for u in tr.plan().units] for tr in plans}
    inside, real = [], leaderboard._draw

    def slow_draw(*args, **kwargs):
        inside.append(1)
        assert len(inside) == 1, "two renderings drew at once"
        try:
            threading.Event().wait(0.2)
            return real(*args, **kwargs)
        finally:
            inside.pop()

    monkeypatch.setattr(leaderboard, "_draw", slow_draw)
    errors = []

    def render():
        try:
            leaderboard.render(runner.store, boards, [tr.task for tr in plans], current, redraw=True)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=render) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert all((boards / f).is_file() for e in leaderboard._read_manifest(boards).values()
               if isinstance(e, dict) for f in e.get("files", []))


def _git(folder: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=folder, check=True,
                   capture_output=True)


def test_publish_draws_a_citable_release_only_from_a_complete_clean_store(cli_main, write_yaml, monkeypatch,
                                                                          tmp_path, capsys):
    monkeypatch.setattr("relbench.unit_store.git_revision", lambda: "abc1234")
    path = write_yaml(TWO_TASKS.format(output="results", boards="results/boards"))
    (tmp_path / ".gitignore").write_text("results/\ncache/\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "tasks.yaml", ".gitignore")
    _git(tmp_path, "commit", "-qm", "tasks")
    release = tmp_path / "leaderboards"

    import relbench_stitching.running as stitching

    real = _interrupt_at_cell(monkeypatch, 3)
    assert cli_main(["run", str(path), "-q"]) == 130
    assert cli_main(["publish", str(path)]) == 2
    assert "does not hold every unit of blobs (1 of 8 units), other-blobs (0 of 8 units)" in capsys.readouterr().err
    assert not release.exists()

    monkeypatch.setattr(stitching, "_evaluate", real)
    assert cli_main(["run", str(path), "-q"]) == 0
    path.write_text(path.read_text() + "\n# an uncommitted edit\n")
    assert cli_main(["publish", str(path)]) == 2
    assert "uncommitted changes (tasks.yaml)" in capsys.readouterr().err
    _git(tmp_path, "commit", "-qam", "edit")

    assert cli_main(["publish", str(path)]) == 0
    index = (release / "README.md").read_text()
    cited = re.search(rf"\*relbench {re.escape(__version__)}, the release drawn at git revision (\w+), results of ", index)
    assert cited and f"Drawn by `relbench publish` at git revision `{cited[1]}`" in index  # the revision it names
    assert "Not a release" not in index
    # the rows name another revision than the one the pages are drawn at: each page says both
    page = (release / "blobs.md").read_text()
    assert f"This page was drawn by `relbench publish` at git {cited[1]}, from rows computed at git abc1234." in page
    assert "This page was drawn" not in (tmp_path / "results" / "boards" / "blobs.md").read_text()  # a run's page
    assert "from `tasks.yaml`" in index and "rows come from revisions `abc1234`" in index
    assert {"blobs.md", "other-blobs.md", RELEASE, MANIFEST} <= set(_snapshot(release))


def test_publish_refuses_rows_of_uncommitted_code(cli_main, write_yaml, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("relbench.unit_store.git_revision", lambda: "abc1234-dirty")
    path = write_yaml(TWO_TASKS.format(output="results", boards="results/boards"))
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "tasks.yaml")
    _git(tmp_path, "commit", "-qm", "tasks")
    assert cli_main(["run", str(path), "-q"]) == 0
    assert cli_main(["publish", str(path)]) == 2
    err = capsys.readouterr().err
    assert "uncommitted changes or none (abc1234-dirty)" in err and "Traceback" not in err


def test_publish_refuses_a_tasks_file_outside_a_checkout(cli_main, write_yaml, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    path = write_yaml(TWO_TASKS.format(output="results", boards="boards"))
    assert cli_main(["run", str(path), "-q"]) == 0
    assert cli_main(["publish", str(path)]) == 2
    assert "is not in a git checkout" in capsys.readouterr().err


def test_the_default_suite_never_draws_into_the_release_folder(registry):
    from relbench.config import load_suite

    root = Path(__file__).resolve().parents[1]
    suite = load_suite(root / "tasks.yaml", registry)
    assert suite.leaderboards.resolve() != (root / "leaderboards").resolve()


def test_a_smoke_suite_says_so_first_and_on_its_index_and_is_never_published(cli_main, write_yaml, tmp_path,
                                                                              capsys):
    from relbench.progress import SMOKE

    path = write_yaml(TWO_TASKS.format(output="results", boards="boards").replace(
        "  leaderboards: boards\n", "  leaderboards: boards\n  smoke: true\n"))
    assert cli_main(["run", str(path)]) == 0
    err = capsys.readouterr().err
    assert err.index(SMOKE) < err.index("checking the results store")
    assert SMOKE in (tmp_path / "boards" / "README.md").read_text()
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "tasks.yaml")
    _git(tmp_path, "commit", "-qm", "tasks")
    assert cli_main(["publish", str(path)]) == 2
    assert "is a smoke suite (`smoke: true`)" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["leaderboard", "export", "publish"])
def test_a_named_pipe_given_to_a_stored_results_command_is_not_called_missing(cli_main, tmp_path, capsys, command):
    import os

    fifo = tmp_path / "tasks.yaml"
    os.mkfifo(fifo)
    assert cli_main([command, str(fifo)]) == 2
    err = capsys.readouterr().err
    assert "not a regular file" in err and "no such tasks file" not in err


def _release_repo(tmp_path, write_yaml, version: str | None = None):
    """A committed toy suite with a CITATION.cff of relbench's version (or ``version``)."""
    path = write_yaml(TWO_TASKS.format(output="results", boards="results/boards"))
    (tmp_path / ".gitignore").write_text("results/\nresults-release/\ncache/\n")
    (tmp_path / "CITATION.cff").write_text(f'cff-version: 1.2.0\nversion: "{version or __version__}"\n')
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "tasks.yaml", ".gitignore", "CITATION.cff")
    _git(tmp_path, "commit", "-qm", "tasks")
    return path


def test_release_runs_the_suite_from_scratch_into_its_revisions_store_and_publishes_it(
        cli_main, write_yaml, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("relbench.unit_store.git_revision", lambda: "abc1234")
    path = _release_repo(tmp_path, write_yaml)
    # rows of an earlier revision in the suite's own store never reach the release
    monkeypatch.setattr("relbench.unit_store.git_revision", lambda: "0ld0ld0")
    assert cli_main(["run", str(path), "-q"]) == 0
    monkeypatch.setattr("relbench.unit_store.git_revision", lambda: "abc1234")
    assert cli_main(["release", str(path), "-q", "-j", "1", "--tag"]) == 0
    store = tmp_path / "results-release" / "abc1234"
    assert {p.name for p in store.glob("*.jsonl")} == {"blobs.jsonl", "other-blobs.jsonl"}
    rows = pd.read_parquet(tmp_path / "leaderboards" / RELEASE)
    assert set(rows["git"]) == {"abc1234"}
    assert rows["environment"].str.contains("torch threads 1").all()  # one fixed thread: recomputable bit for bit
    assert "rows come from revisions `abc1234`" in (tmp_path / "leaderboards" / "README.md").read_text()
    tags = subprocess.run(["git", "tag"], cwd=tmp_path, capture_output=True, text=True).stdout.split()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tmp_path, capture_output=True, text=True)
    assert len(tags) == 1 and tags[0].startswith("results-") and tags[0].endswith("-" + head.stdout.strip())
    # the release publishes its own reproduction audit beside the pages
    audit = (tmp_path / "leaderboards" / "AUDIT.md").read_text()
    assert "Outcome: everything holds (exit 0)" in audit
    assert f"`relbench verify {path} --sample 30 --seed 0 --release {tmp_path / 'leaderboards' / RELEASE}`" in audit
    assert "within tolerance" in audit and "integrity of" in audit


def test_a_release_without_an_audit_writes_none(cli_main, write_yaml, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("relbench.unit_store.git_revision", lambda: "abc1234")
    path = _release_repo(tmp_path, write_yaml)
    assert cli_main(["release", str(path), "-q", "-j", "1", "--audit", "0"]) == 0
    assert (tmp_path / "leaderboards" / RELEASE).exists() and not (tmp_path / "leaderboards" / "AUDIT.md").exists()
    with pytest.raises(SystemExit) as exit_:
        cli_main(["release", str(path), "-q", "--audit", "-1"])
    assert exit_.value.code == 2 and "expected 0 or a positive whole number" in capsys.readouterr().err


def test_release_refuses_before_any_work(cli_main, write_yaml, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("relbench.unit_store.git_revision", lambda: "abc1234-dirty")
    path = _release_repo(tmp_path, write_yaml)
    assert cli_main(["release", str(path), "-q"]) == 2
    assert "relbench's source tree is modified (abc1234-dirty)" in capsys.readouterr().err
    monkeypatch.setattr("relbench.unit_store.git_revision", lambda: "abc1234")
    (tmp_path / "CITATION.cff").write_text('cff-version: 1.2.0\nversion: "9.9"\n')
    _git(tmp_path, "commit", "-qam", "a citation of another version")
    assert cli_main(["release", str(path), "-q"]) == 2
    err = capsys.readouterr().err
    assert "names version '9.9', but relbench is" in err and "Traceback" not in err
    path.write_text(path.read_text() + "\n# an uncommitted edit\n")
    assert cli_main(["release", str(path), "-q"]) == 2
    assert "uncommitted changes (tasks.yaml)" in capsys.readouterr().err
    assert not (tmp_path / "results-release").exists() and not (tmp_path / "leaderboards").exists()


def test_a_release_store_holding_rows_of_another_revision_is_refused(cli_main, write_yaml, monkeypatch, tmp_path,
                                                                    capsys):
    monkeypatch.setattr("relbench.unit_store.git_revision", lambda: "0ld0ld0")
    path = _release_repo(tmp_path, write_yaml)
    assert cli_main(["run", str(path), "-q", "--output", str(tmp_path / "results-release" / "abc1234")]) == 0
    monkeypatch.setattr("relbench.unit_store.git_revision", lambda: "abc1234")
    assert cli_main(["release", str(path), "-q", "-j", "1"]) == 2
    assert "come from revisions 0ld0ld0 besides abc1234" in capsys.readouterr().err
    assert not (tmp_path / "leaderboards").exists()


def test_a_page_names_the_revision_it_is_drawn_at_only_where_its_rows_name_another():
    from relbench.leaderboard import provenance

    rows = pd.DataFrame({"git": ["abc1234", "def5678"], "seed": [0, 1], "command": "relbench run", "metric": "m"})
    said = "This page was drawn by `relbench publish` at git"
    assert said not in provenance(rows) and said not in provenance(rows, "def5678")  # one of its rows' revisions
    assert f"{said} 9999999, from rows computed at git abc1234, def5678." in provenance(rows, "9999999")
