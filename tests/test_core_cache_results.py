"""Embedding cache and results store: round trips, corruption, truncation, append-only."""

from __future__ import annotations

import json

import pytest
import torch

from relbench.cache import EmbeddingCache, identity_key
from relbench.errors import OutputNotWritable
from relbench.results import ResultStore


def test_cache_round_trip_and_listing(tmp_path):
    cache = EmbeddingCache(tmp_path)
    X = torch.randn(5, 3)
    key = identity_key({"encoder": "e", "data": "d"})
    assert cache.get(key) is None
    cache.put(key, X, {"label": "e", "split": "train"})
    got, meta = cache.get(key)
    assert torch.equal(got, X) and meta["split"] == "train"
    assert [e["key"] for e in cache.entries()] == [key]
    assert cache.clear() == 1 and cache.get(key) is None


def test_identity_key_changes_with_any_field():
    a = identity_key({"encoder": "e", "params": {"seed": 0}, "data": "d"})
    assert a == identity_key({"data": "d", "params": {"seed": 0}, "encoder": "e"})
    assert a != identity_key({"encoder": "e", "params": {"seed": 1}, "data": "d"})


@pytest.mark.parametrize("damage", ["truncate", "flip", "drop_meta_field"])
def test_corrupt_cache_entry_is_detected_and_removed(tmp_path, damage):
    cache = EmbeddingCache(tmp_path)
    key = "k" * 40
    cache.put(key, torch.randn(50, 8), {})
    tensor_path, meta_path = cache.dir / f"{key}.safetensors", cache.dir / f"{key}.json"
    if damage == "truncate":
        tensor_path.write_bytes(tensor_path.read_bytes()[:-17])
    elif damage == "flip":
        data = bytearray(tensor_path.read_bytes())
        data[-1] ^= 0xFF
        tensor_path.write_bytes(bytes(data))
    else:
        meta = json.loads(meta_path.read_text())
        del meta["sha256"]
        meta_path.write_text(json.dumps(meta))
    assert cache.get(key) is None
    assert cache.warnings and "corrupt" in cache.warnings[0]
    assert not tensor_path.exists() and not meta_path.exists()


def test_store_skips_truncated_last_line_and_keeps_newest(tmp_path):
    store = ResultStore(tmp_path)
    row = {"task": "t", "metric": "accuracy", "value": 0.5}
    store.append("t", "u1", [row], "run1")
    store.append("t", "u1", [{**row, "value": 0.7}], "run2")
    with open(tmp_path / "t.jsonl", "a") as fh:
        fh.write('{"unit": "u2", "rows": [{"task"')  # a kill mid-write
    assert store.read("t").done == {"u1"}
    df = store.load("t")
    assert list(df["value"]) == [0.7]
    assert sorted(store.load("t", all_runs=True)["value"]) == [0.5, 0.7]
    store.append("t", "u3", [{**row, "value": 0.9}], "run3")  # the resumed run appends after the cut line
    assert store.read("t").done == {"u1", "u3"}
    assert sorted(store.load("t")["value"]) == [0.7, 0.9]


def test_a_task_whose_first_line_was_cut_is_still_listed(tmp_path):
    (tmp_path / "t.jsonl").write_text('{"unit": "u0", "rows": [{"ta')
    store = ResultStore(tmp_path)
    store.append("t", "u1", [{"task": "t", "metric": "accuracy", "value": 0.5}], "run1")
    assert store.tasks() == ["t"]


def test_units_that_failed_are_not_done_until_they_succeed(tmp_path):
    store = ResultStore(tmp_path)
    store.append("t", "u1", [{"task": "t", "metric": "error", "status": "error"}], "run1")
    store.append("t", "u2", [{"task": "t", "metric": "accuracy", "value": 0.5, "status": "ok"}], "run1")
    assert store.read("t").done == {"u2"}
    store.append("t", "u1", [{"task": "t", "metric": "accuracy", "value": 0.6, "status": "ok"}], "run2")
    assert store.read("t").done == {"u1", "u2"}


def test_unwritable_output_is_a_user_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OutputNotWritable, match="not writable"):
        ResultStore(blocker / "results").ensure_writable()
    with pytest.raises(OutputNotWritable, match="RELBENCH_CACHE_DIR"):
        EmbeddingCache(blocker / "cache").ensure_writable()


def test_git_revision_is_dirty_for_code_changes_not_for_published_leaderboards(tmp_path):
    import subprocess

    from relbench.results import git_revision

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "pkg").mkdir()
    (tmp_path / "leaderboards").mkdir()
    (tmp_path / "pkg" / "code.py").write_text("x = 1\n")
    (tmp_path / "leaderboards" / "README.md").write_text("old\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    revision = git_revision.__wrapped__(tmp_path / "pkg")  # uncached
    assert revision and not revision.endswith("-dirty")
    (tmp_path / "leaderboards" / "README.md").unlink()  # a run rewrites (or a user removes) the pages
    assert git_revision.__wrapped__(tmp_path / "pkg") == revision
    (tmp_path / "pkg" / "code.py").write_text("x = 2\n")
    assert git_revision.__wrapped__(tmp_path / "pkg") == revision + "-dirty"
