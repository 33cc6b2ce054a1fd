"""Learned anchors (relbench.sharing.learned_anchors) are computed once by every process
sharing a cache folder, read back bit for bit, and learned again when their entry is
corrupt, partial or malformed."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

from relbench.config import load_suite
from relbench.runner import Runner
from relbench.sharing import LEARNED_ANCHORS


def learned_tasks(selectors: str, protocol: str = "stitching") -> str:
    """One toy task whose grid learns its anchors from the banks: two seeds, three
    encoders, each held out in turn (3 anchor recipes a seed)."""
    return f"""\
suite: {{seeds: [0, 1], num_anchors: 16, output: results}}
tasks:
  - name: blobs
    kind: {protocol}
    dataset: {{name: toy-blobs, params: {{classes: 4}}}}
    encoders:
      - {{name: toy-rotated, label: a, params: {{seed: 1}}}}
      - {{name: toy-rotated, label: b, params: {{seed: 2, scale: 3.0}}}}
      - {{name: toy-rotated, label: c, params: {{seed: 3, scale: 0.5}}}}
    grid:
      selectors: {selectors}
      similarities: [cosine]
      stitchers: [{{name: relative, params: {{epochs: 2}}}}]
    metrics: [accuracy]
"""


def rows(store: Path) -> list:
    """Every stored row of task ``blobs`` with what a run computes (no timings)."""
    from relbench.results import ResultStore

    df = ResultStore(store).load("blobs")
    extra = df["extra"].map(lambda e: {k: v for k, v in e.items() if k != "param_seconds"})
    keys = ["unit", "metric", "source"]
    return df.assign(extra=extra).sort_values(keys)[keys + ["value", "inputs", "per_sample", "extra"]] \
        .astype(str).values.tolist()


def run(registry, path: Path, **kw):
    runner = Runner(load_suite(path, registry), registry, quiet=True, **kw)
    stats = runner.run()
    assert not stats.failures, stats.failures
    return runner, stats


PARAM_AND_FPS = "[fps, {name: param, params: {epochs: 2, subset_size: 60}}]"


def test_learned_anchors_are_read_back_bit_for_bit(registry, write_yaml, tmp_path):
    path = write_yaml(learned_tasks(PARAM_AND_FPS, "{name: stitching, params: {protocol: held-out}}"))
    _, first = run(registry, path)
    assert first.shared_computed[LEARNED_ANCHORS] == 2 * 2 * 3  # seeds × selectors × held-out encoders
    entries = list((tmp_path / "cache" / "anchors").glob("*.json"))
    assert len(entries) == 12 and not list((tmp_path / "cache" / "anchors").glob(".tmp-*"))
    _, again = run(registry, path, force=True, output=tmp_path / "again")
    assert again.shared_computed[LEARNED_ANCHORS] == 0 and again.shared_reused[LEARNED_ANCHORS] == 12
    assert rows(tmp_path / "results") == rows(tmp_path / "again")


def test_a_corrupt_partial_or_malformed_entry_is_learned_again(registry, write_yaml, tmp_path):
    path = write_yaml(learned_tasks(PARAM_AND_FPS, "{name: stitching, params: {protocol: held-out}}"))
    run(registry, path)
    folder = tmp_path / "cache" / "anchors"
    weighted = [p for p in sorted(folder.glob("*.json")) if json.loads(p.read_text())["recipe"]["weights"]]
    truncated, partial, malformed = weighted[:3]
    tensor = truncated.with_suffix(".safetensors")
    tensor.write_bytes(tensor.read_bytes()[:40])  # a write cut short
    partial.unlink()  # the tensor without its metadata: no entry
    meta = json.loads(malformed.read_text())
    meta["recipe"]["ids"] = meta["recipe"]["ids"][:-1]  # ids that do not fit the weights
    malformed.write_text(json.dumps(meta))
    runner = Runner(load_suite(path, registry), registry, quiet=True, force=True, output=tmp_path / "again")
    said = []
    runner.say = said.append
    stats = runner.run()
    assert not stats.failures
    assert stats.shared_computed[LEARNED_ANCHORS] == 3 and stats.shared_reused[LEARNED_ANCHORS] == 9
    assert any("is corrupt or truncated" in s for s in said) and any("malformed anchor recipe" in s for s in said)
    assert rows(tmp_path / "results") == rows(tmp_path / "again")
    assert len(list(folder.glob("*.json"))) == 12  # each stored again


def test_anchors_differing_in_any_input_are_never_shared(registry, write_yaml, tmp_path):
    """Another number of anchors, selector parameter or encoder makes other entries; an
    encoder held out of a recipe is no input of it."""
    text = learned_tasks("[fps]")
    run(registry, write_yaml(text))
    for change, reused in ((text.replace("num_anchors: 16", "num_anchors: 12"), 0),
                           (text.replace("[fps]", "[{name: fps, params: {center: false}}]"), 0),
                           (text.replace("scale: 0.5", "scale: 0.25"), 2)):  # c's: the two seeds' without c
        _, stats = run(registry, write_yaml(change), output=tmp_path / "other")
        assert stats.shared_reused[LEARNED_ANCHORS] == reused, change
    _, stats = run(registry, write_yaml(text.replace("output: results", "output: same")))
    assert stats.shared_computed[LEARNED_ANCHORS] == 0  # the same inputs: all read


def _spy(log: Path) -> str:
    return f"[{{name: toy-spy, params: {{log: '{log}', sleep: 0.3}}}}]"


def _run_in_child(registry, path: Path, output: Path) -> None:
    """A forked worker process: one whole run; exit status 0 when it succeeded."""
    try:
        run(registry, path, output=output)
    except BaseException:  # noqa: BLE001 - reported through the exit status
        os._exit(1)
    os._exit(0)


def test_two_processes_sharing_a_cache_learn_each_recipe_once(registry, write_yaml, tmp_path):
    """Two runs at once, as ``-j`` workers or Ray workers of one node are: the second asks
    for anchors the first is learning, waits, and reads them. Before, both learned all."""
    log = tmp_path / "calls.txt"
    path = write_yaml(learned_tasks(_spy(log)))
    run(registry, write_yaml(learned_tasks("[random]"), "warm.yaml"))  # both read the banks from the cache
    fork = multiprocessing.get_context("fork")
    procs = [fork.Process(target=_run_in_child, args=(registry, path, tmp_path / out)) for out in ("one", "two")]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
        assert proc.exitcode == 0
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted((seed, *held) for seed, held in calls) == [(seed, h) for seed in (0, 1) for h in "abc"]
    assert rows(tmp_path / "one") == rows(tmp_path / "two")


def test_cache_ls_and_clear_cover_the_learned_anchors(registry, cli_main, write_yaml, tmp_path, capsys):
    path = write_yaml(learned_tasks(PARAM_AND_FPS, "{name: stitching, params: {protocol: held-out}}"))
    run(registry, path)
    capsys.readouterr()
    assert cli_main(["cache", "ls"]) == 0
    out = capsys.readouterr().out
    assert "12 entries" in out and str(tmp_path / "cache" / "anchors") in out
    assert cli_main(["cache", "clear"]) == 0
    assert "removed 12 entries from " + str(tmp_path / "cache" / "anchors") in capsys.readouterr().out
    assert not list((tmp_path / "cache" / "anchors").glob("*.json"))
