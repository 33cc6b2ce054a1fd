"""`relbench run --reuse`: every planned unit a published release holds under the same
identity (the same inputs, plugin versions and protocol) is taken into the store before
the run, marked as taken from the release, and only the rest is computed; the summary
says how many units came from where, the pages tell the combinations computed locally
from the release's, and nothing the store holds is replaced."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from relbench.reuse import ORIGIN, RELEASE_STATEMENT, origin_marks, read_release
from relbench.run_summary import RunSummary, accounting
from test_core_verify import TASKS, release  # noqa: F401 - the published toy release fixture

TESTS = Path(__file__).resolve().parent
#: units of the fixture's tasks: blobs (2 seeds × 2 stitchers × 2 targets), quality
BLOBS, QUALITY = 8, 4


def _revision(table: Path) -> str:
    """The revision the release index beside ``table`` states."""
    return RELEASE_STATEMENT.search(table.with_name("README.md").read_text())["revision"]


def _run(cli_main, capsys, path: Path, output: Path, *args: str) -> tuple[int, str]:
    """`relbench run` into ``output`` without pages: exit code and the accounting's first line."""
    code = cli_main(["run", str(path), "--output", str(output), "--no-leaderboard", *args])
    err = capsys.readouterr().err
    return code, next((ln for ln in err.splitlines() if ln.startswith("encoded ")), err)


def _lines(output: Path, task: str) -> list[dict]:
    return [json.loads(line) for line in (output / f"{task}.jsonl").read_text().splitlines()]


def _counts(accounting_line: str) -> tuple[int, int]:
    """(ran, reused) as an accounting line states them."""
    ran = re.search(r"ran (\d+) units", accounting_line)
    reused = re.search(r"reused (\d+) already finished", accounting_line)
    return int(ran[1]), int(reused[1])


def test_a_run_computes_only_the_units_the_release_lacks(release, cli_main, capsys, tmp_path):
    path, table = release
    rows = read_release(table)
    gone = rows.loc[rows["task"] == "quality", "unit"].iloc[0]
    rows[rows["unit"] != gone].to_parquet(table, index=False)
    code, line = _run(cli_main, capsys, path, tmp_path / "fresh", "--reuse")
    assert code == 0
    assert _counts(line) == (1, BLOBS + QUALITY - 1)
    assert f"Of those, reused {BLOBS + QUALITY - 1} units from {table} (revision {_revision(table)})." in line
    taken = [ln for ln in _lines(tmp_path / "fresh", "quality") if ln["unit"] != gone]
    assert {r[ORIGIN] for ln in taken for r in ln["rows"]} == {f"release@{_revision(table)}"}
    assert {r["git"] for ln in taken for r in ln["rows"]} == {"abc1234"}  # the rows keep their own revision
    computed = [ln for ln in _lines(tmp_path / "fresh", "quality") if ln["unit"] == gone]
    assert len(computed) == 1 and all(ORIGIN not in r for r in computed[0]["rows"])
    assert _counts(_run(cli_main, capsys, path, tmp_path / "fresh")[1]) == (0, BLOBS + QUALITY)


def test_reused_rows_are_the_release_rows_nested_as_the_store_holds_them(release, cli_main, capsys, tmp_path):
    path, table = release
    assert _run(cli_main, capsys, path, tmp_path / "fresh", "--reuse", str(table))[0] == 0
    mine, theirs = (pd.DataFrame([r for ln in _lines(out, "blobs") for r in ln["rows"]])
                    for out in (tmp_path / "fresh", path.parent / "results"))
    assert isinstance(mine["packages"].iloc[0], list) and mine["packages"].tolist() == theirs["packages"].tolist()
    assert mine["value"].tolist() == theirs["value"].tolist()
    assert mine["per_sample"].tolist() == theirs["per_sample"].tolist()  # gathered back into one record
    # every field a computed row has, None where empty (a page reads its kind's unused columns too)
    keys = [sorted(r) for ln in _lines(path.parent / "results", "blobs") for r in ln["rows"]]
    reused = [sorted(set(r) - {ORIGIN}) for ln in _lines(tmp_path / "fresh", "blobs") for r in ln["rows"]]
    assert reused == keys and "regularizer" in keys[0]


def test_a_new_similarity_computes_only_its_own_units_and_is_marked_computed_locally(release, cli_main, capsys,
                                                                                         tmp_path):
    path, table = release
    path.write_text(path.read_text().replace("similarities: [cosine]", "similarities: [cosine, euclidean]"))
    boards = tmp_path / "boards"
    code = cli_main(["run", str(path), "--output", str(tmp_path / "fresh"), "--leaderboards", str(boards),
                     "--reuse"])
    line = next(ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("encoded "))
    assert code == 0
    new = [ln for ln in _lines(tmp_path / "fresh", "blobs") if ln["key"].get("similarity") == "euclidean"]
    assert new and all(ORIGIN not in r for ln in new for r in ln["rows"])
    assert _counts(line) == (len(new), BLOBS + QUALITY)  # only the new similarity's units are computed
    page = (boards / "blobs.md").read_text()
    units = BLOBS + len(new)
    assert f"Of the {units} units shown, {BLOBS} from the release at revision `{_revision(table)}`" in page
    assert f"{len(new)} computed locally" in page
    ranking = page.split("### Ranking", 1)[1].split("###", 1)[0]
    rows = ranking.splitlines()  # the origin is part of a row's name, repeated where a wide table continues
    assert any("euclidean" in r and re.search(r"\| -\s+\| computed locally\s+\|", r) for r in rows)
    assert any("cosine" in r and re.search(r"\| -\s+\| from the release\s+\|", r) for r in rows)
    assert not any("euclidean" in r and "from the release" in r for r in rows)


def test_a_changed_parameter_recomputes_its_units(release, cli_main, capsys, tmp_path):
    path, _ = release
    path.write_text(path.read_text().replace("max_samples: 60", "max_samples: 50"))
    code, line = _run(cli_main, capsys, path, tmp_path / "fresh", "--reuse")
    assert code == 0 and _counts(line) == (QUALITY, BLOBS)
    assert f"Of those, reused {BLOBS} units" in line


def test_nothing_the_store_holds_is_replaced(release, cli_main, capsys, tmp_path):
    path, _ = release
    fresh = tmp_path / "fresh"
    assert _run(cli_main, capsys, path, fresh, "--task", "quality")[0] == 0
    before = (fresh / "quality.jsonl").read_bytes()
    code, line = _run(cli_main, capsys, path, fresh, "--reuse")
    assert code == 0 and _counts(line) == (0, BLOBS + QUALITY)
    assert f"Of those, reused {BLOBS} units" in line  # blobs only: quality was stored already
    assert (fresh / "quality.jsonl").read_bytes() == before
    published = path.parent / "results"
    snapshot = {p.name: p.read_bytes() for p in published.glob("*.jsonl")}
    assert _run(cli_main, capsys, path, published, "--reuse")[0] == 0  # a complete store takes nothing
    assert {p.name: p.read_bytes() for p in published.glob("*.jsonl")} == snapshot


def test_figures_drawn_while_running_come_with_the_units_taken_from_the_release(release, cli_main, capsys,
                                                                              tmp_path):
    """A figure a kind draws while it runs (it needs the trained models) is in no row: a
    page drawn from reused rows lost it silently until the release's copy came along.
    One the store holds already is kept."""
    path, table = release
    figures = table.parent / "figures" / "quality"
    figures.mkdir(parents=True, exist_ok=True)
    (figures / "drawn_while_running.png").write_bytes(b"released")
    (figures / "held.png").write_bytes(b"released")
    fresh = tmp_path / "fresh"
    (fresh / "figures" / "quality").mkdir(parents=True)
    (fresh / "figures" / "quality" / "held.png").write_bytes(b"mine")
    assert _run(cli_main, capsys, path, fresh, "--reuse", str(table))[0] == 0
    assert (fresh / "figures" / "quality" / "drawn_while_running.png").read_bytes() == b"released"
    assert (fresh / "figures" / "quality" / "held.png").read_bytes() == b"mine"


def test_a_file_that_is_not_a_release_exits_2(release, cli_main, capsys, tmp_path):
    path, _ = release
    pd.DataFrame({"task": ["blobs"], "value": [1.0]}).to_parquet(tmp_path / "other.parquet")
    (tmp_path / "notes.txt").write_text("not a table")
    for file, said in ((tmp_path / "other.parquet", "is not a release's results table"),
                       (tmp_path / "notes.txt", "cannot read the release")):
        assert cli_main(["run", str(path), "--output", str(tmp_path / "fresh"), "--reuse", str(file)]) == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err
    assert not list((tmp_path / "fresh").glob("*.jsonl"))
    for clash in ("--dry-run", "--force"):
        assert cli_main(["run", str(path), "--reuse", clash]) == 2
        assert "--reuse writes a release's rows" in capsys.readouterr().err


def test_origin_marks_tell_combinations_apart_only_on_a_mixed_page():
    rows = pd.DataFrame({"method": ["a", "a", "b", "b", "c"], "unit": list("12345"),
                         ORIGIN: ["release@r", "release@r", None, "release@r", None]})
    assert origin_marks(rows, ["method"]) == {("a",): "from the release", ("b",): "partly computed locally",
                                              ("c",): "computed locally"}
    assert origin_marks(rows.assign(**{ORIGIN: None}), ["method"]) == {}
    assert origin_marks(rows.drop(columns=ORIGIN), ["method"]) == {}
    assert origin_marks(rows.assign(**{ORIGIN: "release@r"}), ["method"]) == {}


def test_the_accounting_names_each_release_and_merges_counts():
    one = RunSummary("", from_release=(("r.parquet (revision abc)", 3100),))
    merged = RunSummary("a", planned=3200, ran=100, reused=3100).merge(one)
    assert merged.from_release == (("r.parquet (revision abc)", 3100),)
    assert RunSummary.from_json(merged.to_json()) == merged
    assert "Of those, reused 3,100 units from r.parquet (revision abc)." in accounting(merged)
    assert "Of those" not in accounting(RunSummary("a", planned=2, reused=2))


def _cli(folder: Path, cache: str, *args: str) -> subprocess.CompletedProcess:
    """`relbench` in a subprocess in ``folder`` with the toy plugins loaded as ``--plugin``
    loads them (so that their identities are the ones of :func:`_release`'s rows)."""
    env = {**os.environ, "RELBENCH_PLUGINS": "toy_plugins", "TMPDIR": str(folder),
           "RELBENCH_CACHE_DIR": str(folder / "cache" / cache),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "relbench.cli", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=300)


def _release(folder: Path, monkeypatch) -> Path:
    """The fixture's suite run here with the toy plugins loaded as a subprocess loads
    them, exported as a release table lacking one unit of each task."""
    from relbench import cli

    monkeypatch.setenv("RELBENCH_PLUGINS", "toy_plugins")
    monkeypatch.chdir(folder)
    (folder / "tasks.yaml").write_text(TASKS)
    table = folder / "release.parquet"
    assert cli.main(["run", "tasks.yaml", "--no-leaderboard", "-q"]) == 0
    assert cli.main(["export", "tasks.yaml", "--to", str(table)]) == 0
    rows = pd.read_parquet(table)
    gone = [rows.loc[rows["task"] == task, "unit"].iloc[0] for task in ("blobs", "quality")]
    rows[~rows["unit"].isin(gone)].to_parquet(table, index=False)
    return table


@pytest.mark.skipif(os.name != "posix", reason="-j workers follow posix signals")
def test_a_parallel_run_gives_the_accounting_of_a_serial_run(tmp_path, monkeypatch):
    table = _release(tmp_path, monkeypatch)
    ends = []
    for name, jobs in (("serial", "1"), ("jobs", "2")):  # each with a cache of its own: both encode alike
        done = _cli(tmp_path, name, "run", "tasks.yaml", "--output", name, "--no-leaderboard", "-j", jobs,
                    "--reuse", str(table))
        assert done.returncode == 0, done.stderr
        ends.append(next(ln for ln in done.stderr.replace("\r", "\n").splitlines() if ln.startswith("encoded ")))
    assert ends[0] == ends[1]
    assert _counts(ends[0]) == (2, BLOBS + QUALITY - 2)
    assert f"Of those, reused {BLOBS + QUALITY - 2} units from {table}" in ends[0]


def test_the_benchmark_stops_before_timing_when_the_release_is_not_the_tasks_files(release, cli_main, tmp_path):
    sys.path.insert(0, str(TESTS.parent / "benchmarks"))
    try:
        import reuse_release as bench
    finally:
        sys.path.remove(str(TESTS.parent / "benchmarks"))
    path, table = release  # cli_main: the benchmark's registry has the toy plugins too
    assert bench.check_release(path, table) == BLOBS + QUALITY
    rows = read_release(table)
    rows[rows["task"] != "quality"].to_parquet(tmp_path / "other.parquet", index=False)
    with pytest.raises(SystemExit) as stop:
        bench.check_release(path, tmp_path / "other.parquet")
    assert f"is not the release of {path}: {QUALITY} planned units have no rows" in str(stop.value)
    assert "in tasks quality" in str(stop.value)


def test_a_tuning_record_survives_the_flat_release_table():
    # a tuned parameter's name holds a dot ("similarity.threshold_quantile"); the flat
    # release table split it into nested records, and a page drawn from reused rows
    # stopped with KeyError: 'space'
    from relbench.export import flatten
    from relbench.leaderboard import protocol_section
    from relbench.reuse import nested

    entry = {"space": [0.1, 0.05, 0.2], "relative_to": "a quantile", "chosen": 0.05}
    tuned = {"parameters": {"similarity.threshold_quantile": entry, "stitcher.weight_decay": {**entry, "chosen": 0.1}},
             "validation_metric": "accuracy", "validation_scores": [[{"similarity.threshold_quantile": 0.05}, 0.9]]}
    rows = pd.DataFrame([{"unit": "u1", "metric": "accuracy", "value": 0.5, "similarity": "vq", "stitcher": "rel",
                          "extra": {"tuned": tuned, "samples": {"fit": 8, "validation": 2, "test": 4}}}])
    back = nested(flatten(rows))
    assert back["extra"].iloc[0]["tuned"] == tuned
    from relbench.protocol import EvaluationProtocol
    from relbench.testing import make_task
    from relbench_stitching import Stitching

    task = make_task(Stitching, seeds=[0], protocol=EvaluationProtocol(train_size=10, test_size=4, validation=0.2))
    text = protocol_section(task, back)
    assert "- similarity vq: `threshold_quantile` over [0.1, 0.05, 0.2] (a quantile): chosen 0.05 ×1" in text
    # a store that an earlier reuse filled with the split records still draws its page
    split = back.assign(extra=[{**back["extra"].iloc[0], "tuned": {**tuned, "parameters": {
        "similarity": {"threshold_quantile": entry}, "stitcher": {"weight_decay": {**entry, "chosen": 0.1}}}}}])
    assert protocol_section(task, split) == text


def test_the_benchmark_adds_the_toy_to_a_shared_list_and_only_the_grids_that_alias_it(tmp_path):
    sys.path.insert(0, str(TESTS.parent / "benchmarks"))
    try:
        import reuse_release as bench
    finally:
        sys.path.remove(str(TESTS.parent / "benchmarks"))
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("x-main: &main [cosine, l1]\ntasks:\n"
                     "  - {name: a, grid: {similarities: *main}}\n"
                     "  - {name: b, grid: {similarities: *main}}\n"
                     "  - {name: c, grid: {similarities: [cosine]}}\n")
    copy, grids = bench.with_toy(tasks, ["x-main"])
    suite = yaml.safe_load(copy.read_text())
    assert grids == 2 and [t["grid"]["similarities"] for t in suite["tasks"]] == [
        ["cosine", "l1", bench.TOY], ["cosine", "l1", bench.TOY], ["cosine"]]
    copy, grids = bench.with_toy(tasks, [])
    suite = yaml.safe_load(copy.read_text())
    assert grids == 3 and all(t["grid"]["similarities"][-1] == bench.TOY for t in suite["tasks"])
    with pytest.raises(SystemExit, match="no top-level list x-other"):
        bench.with_toy(tasks, ["x-other"])
