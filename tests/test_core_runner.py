"""The runner end to end on toy blobs: stitching works, nothing is recomputed,
killed runs resume, bad input gets a clear answer."""

from __future__ import annotations

import os
from collections import OrderedDict

import pytest
import toy_plugins
import torch

from relbench import cli
from relbench.config import load_suite
from relbench.runner import Runner

TASKS = """\
suite:
  seeds: [0, 1]
  num_anchors: 16
  output: results
  leaderboards: boards
tasks:
  - name: blobs
    description: Toy blobs behind random rotations.
    dataset: {name: toy-blobs, params: {classes: 4}}
    encoders:
      - {name: toy-rotated, label: a, params: {seed: 1}}
      - {name: toy-rotated, label: b, params: {seed: 2, scale: 3.0}}
      - {name: toy-rotated, label: c, params: {seed: 3, scale: 0.5}}
    grid:
      selectors: [random]
      similarities: [cosine]
      stitchers: [relative, absolute]
    metrics: [accuracy, weighted_f1]
    claims:
      - {claim: relative wins, better: {stitcher: relative}, worse: {stitcher: absolute}}
      - {claim: absolute wins, better: {stitcher: absolute}, worse: {stitcher: relative}}
    published:
      - {stitcher: relative, source: a, target: b, metric: accuracy, value: 0.5, reference: a paper}
"""


def _run(registry, path, **kw):
    runner = Runner(load_suite(path, registry), registry, quiet=True, **kw)
    return runner, runner.run()


def _cells(runner, stitcher):
    df = runner.store.load("blobs")
    return df[(df.stitcher == stitcher) & (df.metric == "accuracy")]


def test_relative_stitching_beats_absolute_and_rerun_does_nothing(registry, write_yaml):
    path = write_yaml(TASKS)
    toy_plugins.Rotated.calls.clear()
    runner, stats = _run(registry, path)
    assert not stats.failures
    assert stats.encoded == 6 and len(toy_plugins.Rotated.calls) == 6  # 3 encoders × 2 splits, once each
    rel, ab = _cells(runner, "relative"), _cells(runner, "absolute")
    off = lambda d: d[d.source != d.target]["value"].mean()  # noqa: E731
    assert off(rel) > 0.9 and off(ab) < 0.6, (off(rel), off(ab))
    assert len(rel) == 2 * 9  # seeds × E² cells

    toy_plugins.Rotated.calls.clear()
    runner2, stats2 = _run(registry, path)
    # nothing to do: no bank is even read from the cache
    assert stats2.encoded == 0 and stats2.cached == 0 and toy_plugins.Rotated.calls == []
    assert stats2.units_done == 0 and stats2.units_skipped == stats.units_done

    runner3, stats3 = _run(registry, path, force=True)
    assert stats3.encoded == 0 and stats3.units_done == stats.units_done
    # same seeds → same numbers
    a = _cells(runner, "relative").sort_values(["seed", "source", "target"])["value"].to_numpy()
    b = _cells(runner3, "relative").sort_values(["seed", "source", "target"])["value"].to_numpy()
    assert (a == b).all()


def _interrupt_at_cell(monkeypatch, n: int):
    """Make the n-th evaluated cell raise KeyboardInterrupt (as Ctrl-C would); return
    the real evaluation, to put back with monkeypatch.setattr."""
    import relbench_stitching.running as stitching

    real, calls = stitching._evaluate, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == n:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(stitching, "_evaluate", interrupted)
    return real


def test_killed_run_resumes_where_it_stopped(registry, write_yaml, monkeypatch):
    import relbench_stitching.running as stitching

    path = write_yaml(TASKS)
    real = _interrupt_at_cell(monkeypatch, 8)
    runner = Runner(load_suite(path, registry), registry, quiet=True)
    with pytest.raises(KeyboardInterrupt):
        runner.run()
    finished = runner.stats.units_done
    assert finished == 2  # 3 cells per unit: units 1-2 done, unit 3 died in its 2nd cell
    monkeypatch.setattr(stitching, "_evaluate", real)
    _, stats = _run(registry, path)
    total = 2 * 2 * 3  # seeds × combinations × targets
    assert stats.units_skipped == finished and stats.units_done == total - finished


def test_nan_embeddings_are_reported_with_encoder_and_rows(cli_main, write_yaml, capsys):
    path = write_yaml(TASKS.replace("params: {seed: 1}", "params: {seed: 1, nan_rows: [3, 7]}"))
    code = cli_main(["run", str(path), "-q"])
    err = capsys.readouterr().err
    assert code == 1
    assert "encoder 'a'" in err and "rows 3, 7" in err and "Traceback" not in err


def test_bad_yaml_exits_2_without_traceback(cli_main, write_yaml, capsys):
    path = write_yaml(TASKS.replace("similarities: [cosine]", "similarities: [cosinus]"))
    assert cli_main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'cosine'" in err and "tasks.yaml:" in err and "Traceback" not in err


def test_too_many_anchors_is_refused_before_any_work(cli_main, write_yaml, capsys):
    path = write_yaml(TASKS.replace("num_anchors: 16", "num_anchors: 5000"))
    toy_plugins.Rotated.calls.clear()
    assert cli_main(["run", str(path), "-q"]) == 2
    err = capsys.readouterr().err
    assert "num_anchors is 5000" in err and "192 training samples" in err and "Traceback" not in err
    assert not toy_plugins.Rotated.calls and not (path.parent / "results").exists()


def test_single_class_dataset_is_refused(cli_main, write_yaml, capsys):
    path = write_yaml(TASKS.replace("classes: 4", "classes: 1"))
    assert cli_main(["run", str(path), "-q"]) == 2
    assert "single class" in capsys.readouterr().err


def test_unwritable_output_exits_2(cli_main, write_yaml, capsys):
    path = write_yaml(TASKS)
    (path.parent / "blocker").write_text("")
    assert cli_main(["run", str(path), "--output", str(path.parent / "blocker" / "r")]) == 2
    assert "not writable" in capsys.readouterr().err


def test_leaderboard_index_keeps_the_tasks_file_order(registry, cli_main, write_yaml):
    second = """
  - name: a-second
    dataset: {name: toy-blobs, params: {classes: 3}}
    encoders:
      - {name: toy-rotated, label: a, params: {seed: 1}}
      - {name: toy-rotated, label: b, params: {seed: 2}}
    grid: {selectors: [random], similarities: [cosine], stitchers: [relative]}
    metrics: [accuracy]
"""
    path = write_yaml(TASKS + second)
    _run(registry, path)
    assert cli_main(["leaderboard", str(path)]) == 0
    index = (path.parent / "boards" / "README.md").read_text()
    assert index.index("[blobs](blobs.md)") < index.index("[a-second](a-second.md)")


def test_quiet_silences_every_progress_bar(cli_main, write_yaml, capsys, monkeypatch, tmp_path):
    path = write_yaml(TASKS)
    assert cli_main(["run", str(path), "--no-leaderboard"]) == 0
    assert "toy-rotated" in capsys.readouterr().err  # without -q the encoders' own bars show
    monkeypatch.setenv("RELBENCH_CACHE_DIR", str(tmp_path / "fresh-cache"))  # so they encode again
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")  # the user's own setting survives -q
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    assert cli_main(["run", str(path), "--force", "-q"]) == 0
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "0" and "TQDM_DISABLE" not in os.environ
    assert "%|" not in capsys.readouterr().err and toy_plugins.Rotated.calls


def test_dry_run_prints_the_plan_per_task(cli_main, write_yaml, capsys):
    assert cli_main(["run", str(write_yaml(TASKS)), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "1 tasks, 12 units, 12 to compute." in out  # seeds × combinations × targets


def test_leaderboard_rebuilds_from_store_alone(registry, cli_main, write_yaml, capsys):
    path = write_yaml(TASKS)
    _run(registry, path)
    boards = path.parent / "boards"
    assert cli_main(["leaderboard", str(path)]) == 0
    page = (boards / "blobs.md").read_text()
    assert "relative" in page and "Reference rows" in page and "absolute" in page
    assert list((boards / "figures" / "blobs").glob("heatmap-*.png"))
    first = page
    (boards / "blobs.md").unlink()
    assert cli_main(["leaderboard", str(path)]) == 0
    body = lambda page: page.split("do not edit by hand.", 1)[1]  # noqa: E731
    rebuilt = (boards / "blobs.md").read_text()
    assert body(rebuilt) == body(first) and "Toy blobs behind random rotations." in rebuilt
    index = (boards / "README.md").read_text()
    assert "[blobs](blobs.md)" in index
    # two seeds: relative 1.000 in both, absolute 0.24 and 0.72; t with one degree of freedom
    # leaves the advantage +0.523 [+0.002, +1.044] short of clearing the 0.01 margin
    assert "relative wins: **inconclusive**" in rebuilt and "absolute wins: **inconclusive**" in rebuilt
    assert "paired t-test over 2 seeds" in rebuilt
    assert "Published numbers next to ours" in rebuilt and "a paper" in rebuilt


def test_the_results_behind_the_pages_are_released_beside_them(registry, cli_main, write_yaml):
    import pandas as pd

    from relbench.samples import read_predictions

    path = write_yaml(TASKS)
    runner, _ = _run(registry, path)
    boards = path.parent / "boards"
    assert cli_main(["leaderboard", str(path)]) == 0
    release = pd.read_parquet(boards / "results.parquet")
    stored = runner.store.load("blobs")
    assert len(release) == len(stored) and set(release["unit"]) == set(stored["unit"])
    assert {"git", "command", "value", "per_sample.y_pred"} <= set(release.columns)
    record = release.dropna(subset=["per_sample.y_pred"]).iloc[0]
    y_true, y_pred = read_predictions({k.split(".", 1)[1]: record[k] for k in release.columns
                                       if k.startswith("per_sample.")})
    assert len(y_true) == len(y_pred) == record["per_sample.n"]
    assert "[results.parquet](results.parquet)" in (boards / "README.md").read_text()


def test_failed_units_are_retried_by_the_next_run(registry, write_yaml, monkeypatch):
    path = write_yaml(TASKS)
    from relbench_relreps.stitchers import AbsoluteDecoder, RelativeDecoder

    def flaky(real):
        def fit(self, target, ctx):
            if target.encoder == "b":
                raise RuntimeError("decoder b diverged")
            return real(self, target, ctx)
        return fit

    reals = {cls: cls.fit for cls in (AbsoluteDecoder, RelativeDecoder)}
    for cls, real in reals.items():
        monkeypatch.setattr(cls, "fit", flaky(real))
    _, stats = _run(registry, path)
    assert len(stats.failures) == 2 * 2  # seeds × combinations with target b
    for cls, real in reals.items():
        monkeypatch.setattr(cls, "fit", real)
    runner, stats = _run(registry, path)
    assert stats.units_done == 4 and stats.units_skipped == 8 and not stats.failures
    assert (runner.store.load("blobs")["status"] != "error").all()


def test_a_task_that_crashes_is_recorded_and_the_next_task_runs(registry, cli_main, write_yaml, monkeypatch, capsys):
    two = TASKS + TASKS.split("tasks:\n", 1)[1].replace("name: blobs", "name: blobs-2")
    path = write_yaml(two)
    import relbench_stitching.kind as stitching

    real_plan = stitching.Stitching.plan
    calls = []

    def crashing_once(self, task):
        calls.append(task.name)
        if task.name == "blobs":
            raise RuntimeError("a bug in a plugin")
        return real_plan(self, task)

    monkeypatch.setattr(stitching.Stitching, "plan", crashing_once)
    assert cli_main(["run", str(path), "-q"]) == 1
    err = capsys.readouterr().err
    assert "blobs: RuntimeError: a bug in a plugin" in err
    assert (path.parent / "boards" / "blobs-2.md").exists()
    monkeypatch.setattr(stitching.Stitching, "plan", real_plan)
    assert cli_main(["run", str(path), "-q"]) == 0  # the task now finishes and its error is cleared
    runner = Runner(load_suite(path, registry), registry, quiet=True)
    assert (runner.store.load("blobs")["status"] != "error").all()


def test_inf_embeddings_are_reported_like_nan(cli_main, write_yaml, capsys, monkeypatch):
    real = toy_plugins.Rotated.encode

    def with_inf(self, items, ctx):
        X = real(self, items, ctx)
        if self.seed == 2:
            X[5, 0] = float("inf")
        return X

    monkeypatch.setattr(toy_plugins.Rotated, "encode", with_inf)
    assert cli_main(["run", str(write_yaml(TASKS)), "-q"]) == 1
    err = capsys.readouterr().err
    assert "encoder 'b'" in err and "NaN or inf" in err and "rows 5" in err and "Traceback" not in err


def test_unwritable_leaderboards_exit_2_before_any_work(cli_main, write_yaml, capsys):
    path = write_yaml(TASKS)
    (path.parent / "blocker").write_text("")
    toy_plugins.Rotated.calls.clear()
    assert cli_main(["run", str(path), "--leaderboards", str(path.parent / "blocker" / "b")]) == 2
    assert "leaderboards directory" in capsys.readouterr().err and not toy_plugins.Rotated.calls


@pytest.mark.parametrize("mistake, message", [
    ("stitchers: [relative, absolute]", None),
    ("selectors: [random]", "needs anchors but the grid has no selectors"),
])
def test_a_grid_that_cannot_expand_is_a_validation_error(cli_main, write_yaml, capsys, mistake, message):
    if message is None:
        text = TASKS.replace("    grid:\n", "    kind: {name: stitching, params: {protocol: held-out, held_out: [z]}}\n    grid:\n")
        message = "held_out names ['z']"
    else:
        text = TASKS.replace("      " + mistake + "\n", "")
    assert cli_main(["run", str(write_yaml(text)), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert message in err and "tasks.yaml:" in err and "Traceback" not in err


def test_unknown_interface_gets_suggestions(cli_main, capsys):
    assert cli_main(["plugins", "--interface", "similarities"]) == 2
    assert "did you mean 'similarity'" in capsys.readouterr().err


@pytest.mark.parametrize("command", [[], ["run"], ["plugins"], ["leaderboard"], ["cache"]])
def test_every_command_explains_itself(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main([*command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: relbench") and len(out.splitlines()) > 5


def test_cache_ls_lists_the_banks_and_clear_empties_it(registry, cli_main, write_yaml, capsys, tmp_path):
    _run(registry, write_yaml(TASKS))
    capsys.readouterr()
    assert cli_main(["cache", "ls"]) == 0
    out = capsys.readouterr().out
    assert "6 entries" in out and out.count("toy-blobs/") == 6  # 3 encoders × 2 splits
    assert cli_main(["cache", "clear"]) == 0 and "removed 6 entries" in capsys.readouterr().out
    assert cli_main(["cache", "ls"]) == 0 and "0 entries" in capsys.readouterr().out


def test_ctrl_c_exits_130_keeps_finished_units_and_says_how_to_resume(cli_main, write_yaml, capsys, monkeypatch):
    import relbench_stitching.running as stitching

    real = _interrupt_at_cell(monkeypatch, 8)
    path = write_yaml(TASKS)
    assert cli_main(["run", str(path), "-q"]) == 130
    err = capsys.readouterr().err
    assert "interrupted: 2 units finished in this run are stored" in err and "run the same command again" in err
    monkeypatch.setattr(stitching, "_evaluate", real)
    assert cli_main(["run", str(path), "--no-leaderboard"]) == 0
    assert "reused 2 already finished" in capsys.readouterr().err


def test_cache_records_the_backend_an_encoder_used(registry, write_yaml, monkeypatch):
    monkeypatch.setattr(toy_plugins.Rotated, "backend_used", "toy-backend", raising=False)
    runner, stats = _run(registry, write_yaml(TASKS))
    assert stats.encoded == 6
    entries = [e for e in runner.cache.entries() if e.get("encoder") == "toy-rotated"]
    assert len(entries) == 6 and {e["backend"] for e in entries} == {"toy-backend"}
    assert all(e["report"] == {} for e in entries)  # the toy encoder measures nothing about itself


def test_a_task_holds_the_draws_of_one_seed_at_a_time(registry, write_yaml, monkeypatch):
    """A seed's banks are copies of pool rows (about 170 MB a seed for the full-scale
    Fashion-MNIST tasks): kept until the task ended, a task's memory grew with its
    seeds. The previous seed's draws are freed when another seed's are asked for, and
    drawn again identically when asked again."""
    import torch

    from relbench.runner import TaskRun

    held, banks = [], TaskRun.banks

    def spy(self, split, seed=None):
        out = banks(self, split, seed)
        held.append({key.split("/")[1] for key in self.bank_store._banks if "/" in key})
        return out

    monkeypatch.setattr(TaskRun, "banks", spy)
    runner, stats = _run(registry, write_yaml(TASKS))
    assert not stats.failures and stats.units_done
    assert {"0"} in held and {"1"} in held
    assert max(map(len, held)) == 1
    (task_run,) = runner.plans()
    first = {label: bank.X.clone() for label, bank in task_run.banks("train", 0).items()}
    task_run.banks("test", 1)
    assert all(torch.equal(first[label], bank.X) for label, bank in task_run.banks("train", 0).items())


def test_encoders_are_loaded_one_at_a_time(registry, write_yaml, monkeypatch):
    """Banks were encoded split by split, so every encoder of a task stayed loaded until
    its test split was done (at full scale four CNNs and their sessions at once). Now an
    encoder encodes all of its banks and is freed before the next one is set up, and the
    run stores what it stored before."""
    import gc
    import weakref

    live, seen = [], []  # weak references to the encoders set up
    encode = toy_plugins.Rotated.encode

    def setup(self, ctx):
        live.append(weakref.ref(self))

    def counting_encode(self, items, ctx):
        gc.collect()
        seen.append((self.seed, sum(ref() is not None for ref in live)))
        return encode(self, items, ctx)

    monkeypatch.setattr(toy_plugins.Rotated, "setup", setup, raising=False)
    monkeypatch.setattr(toy_plugins.Rotated, "encode", counting_encode)
    runner, stats = _run(registry, write_yaml(TASKS))
    assert not stats.failures and stats.encoded == 6
    assert [seed for seed, _ in seen] == [1, 1, 2, 2, 3, 3]  # encoder by encoder
    assert max(alive for _, alive in seen) == 1
    monkeypatch.undo()  # forced again: banks read from the cache give the rows the encoded ones gave
    again, _ = _run(registry, write_yaml(TASKS), force=True, output=runner.store.root.parent / "again")
    assert again.store.load("blobs")["value"].tolist() == runner.store.load("blobs")["value"].tolist()


def test_an_anchor_pool_that_cannot_be_read_fails_only_the_units_drawing_from_it(registry, write_yaml):
    """Banks are encoded ahead, pools included; a pool whose data set cannot be read is
    left to the units of the selector that draws from it, which fail with its error,
    while the others are computed."""
    path = write_yaml(TASKS.replace("selectors: [random]",
                                    "selectors: [random, {name: ood, params: {dataset: no-such-data}}]"))
    runner, stats = _run(registry, path)
    df = runner.store.load("blobs")
    assert (df[df.selector == "random"].status == "ok").all()
    failed = df[df.selector.str.startswith("ood")]
    assert len(failed) and (failed.status == "error").all() and failed.error.str.contains("no-such-data").all()
    assert stats.encoded == 6


def test_relative_sides_are_held_for_one_similarity_at_a_time(registry, write_yaml, monkeypatch):
    """A side holds its encoder's relative features of a seed's draws (36 MB each at full
    scale); kept for every similarity of the grid until the seed ended they reached
    4.5 GB on the full-scale method comparison. The grid visits a similarity's units one
    after another, so its sides are dropped when the next similarity starts; the stored
    results are those of a run that keeps them."""
    import gc
    import weakref

    import relbench_stitching.sides as seed_sides

    path = write_yaml(TASKS.replace("similarities: [cosine]", "similarities: [cosine, euclidean]"))
    made, held = [], []
    side_class = seed_sides.StitchSide

    def tracked_side(**fields):
        side = side_class(**fields)
        gc.collect()
        made.append((weakref.ref(side), fields["similarity"]))
        held.append({type(sim).__name__ for ref, sim in made if sim is not None and ref() is not None})
        return side

    monkeypatch.setattr(seed_sides, "StitchSide", tracked_side)
    runner, stats = _run(registry, path)
    assert not stats.failures
    assert {"Cosine"} in held and {"Euclidean"} in held and max(map(len, held)) == 1
    monkeypatch.setattr(seed_sides, "_forget_relative_sides", lambda sides, similarities: None)
    kept, _ = _run(registry, path, force=True, output=path.parent / "kept")
    assert kept.store.load("blobs")["value"].tolist() == runner.store.load("blobs")["value"].tolist()


def test_sides_are_held_for_one_selector_and_stitcher_class_at_a_time(registry, write_yaml, monkeypatch):
    """A side's memo holds what one stitcher class computed on its anchors (Procrustes'
    decomposed anchors and projected test rows), reused by the following units of the
    same selector, stitcher class and held-out encoder (farthest-point anchors are chosen
    without the unit's source); kept until the seed ended, the full-scale anchor-budget
    sweep held them for every stitcher and selector (4.16 GB). They are dropped when the
    units move on, and the stored results are those of a run that keeps them."""
    import relbench_stitching.sides as seed_sides
    from relbench_stitching.grid import plan_units

    grid = "selectors: [random, fps]\n      similarities: [cosine]\n      stitchers: [irp, procrustes, affine]"
    path = write_yaml(TASKS.replace("selectors: [random]\n      similarities: [cosine]\n      stitchers: "
                                    "[relative, absolute]", grid).split("    claims:")[0])
    dropped = []
    original = seed_sides._forget_sides

    def forget(sides):
        dropped.append({key for side in sides.values() for key in side.memo})
        original(sides)

    monkeypatch.setattr(seed_sides, "_forget_sides", forget)
    runner, stats = _run(registry, path)
    assert not stats.failures
    scopes = [(seed, combo.selector.label, combo.stitcher.label, tuple(h.label for h in held))
              for seed, combo, _, _, held in plan_units(runner.suite.tasks[0], "all-pairs", [])]
    changes = sum(a != b and a[0] == b[0] for a, b in zip(scopes, scopes[1:]))  # within a seed
    assert len({scope[3] for scope in scopes}) == 4  # random's units hold none out, fps's each source in turn
    # each change of scope drops the memos of the one before it, which held that stitcher's own work only
    memos = [m for m in dropped if m]
    assert len(memos) == changes == 2 * (3 * 4 - 1)
    assert all(len({key[0].split("/")[0] for key in m}) == 1 for m in memos)
    monkeypatch.setattr(seed_sides, "_forget_sides", lambda sides: None)
    kept, _ = _run(registry, path, force=True, output=path.parent / "kept")
    assert kept.store.load("blobs")["value"].tolist() == runner.store.load("blobs")["value"].tolist()


def test_relative_sides_of_a_seed_stay_within_their_byte_budget(registry, write_yaml, monkeypatch):
    """A tuned similarity makes a side per candidate (WIP: five shrinkages, 25 sides of
    36 MB over fashion-cross-arch's five CNNs, a worker past 2 GB). Before each
    candidate's fit the least recently used sides are dropped until the rest hold at most
    the budget; with no budget at all every fit recomputes its sides, and the results are
    the same."""
    import relbench_stitching.sides as seed_sides

    from relbench.interfaces import StitchSide

    path = write_yaml(TASKS.replace("similarities: [cosine]", "similarities: [wip]"))
    runner, stats = _run(registry, path)
    assert not stats.failures
    bounded = []
    original = seed_sides._bound_relative_sides

    def bound(sides, budget):
        original(sides, budget)
        bounded.append(sum(side.relative_bytes() for side in sides.values()))

    monkeypatch.setattr(seed_sides, "_bound_relative_sides", bound)
    monkeypatch.setattr(seed_sides, "RELATIVE_SIDES_BYTES", 0)
    starved, _ = _run(registry, path, force=True, output=path.parent / "starved")
    assert bounded and max(bounded) == 0
    assert starved.store.load("blobs")["value"].tolist() == runner.store.load("blobs")["value"].tolist()

    def side(n):
        made = StitchSide(encoder="e", train=None, test=None, anchors=None, similarity=None)
        made._relative["train"] = torch.zeros(n)  # n float32: 4n bytes
        return made

    sides = OrderedDict([((1, "s", "a"), side(10)), ((1, None, "b"), side(0)), ((1, "s", "c"), side(10)),
                         ((1, "s", "d"), side(10))])
    seed_sides._bound_relative_sides(sides, 80)
    assert list(sides) == [(1, None, "b"), (1, "s", "c"), (1, "s", "d")]  # the oldest relative side went first
