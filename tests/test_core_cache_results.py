"""Embedding cache and results store: round trips, corruption, truncation, append-only."""

from __future__ import annotations

import json
import os

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


def _entry_files(cache, key):
    return cache.dir / f"{key}.safetensors", cache.dir / f"{key}.json"


@pytest.mark.parametrize("how", ["copy", "swap", "copy_and_rename"])
def test_an_entry_must_prove_it_holds_the_identity_asked_for(tmp_path, how):
    import shutil

    cache = EmbeddingCache(tmp_path)
    id_a = {"encoder": "e", "params": {"seed": 0}, "data": "d", "split": "train"}
    id_b = {**id_a, "params": {"seed": 1}}
    key_a, key_b = identity_key(id_a), identity_key(id_b)
    cache.put(key_a, torch.zeros(4, 2), {**id_a, "n": 4})
    cache.put(key_b, torch.ones(4, 2), {**id_b, "n": 4})
    (ta, ma), (tb, mb) = _entry_files(cache, key_a), _entry_files(cache, key_b)
    if how == "swap":
        for p, q in ((ta, tb), (ma, mb)):
            tmp = p.with_suffix(".swap")
            p.rename(tmp)
            q.rename(p)
            tmp.rename(q)
    else:
        shutil.copyfile(tb, ta)
        shutil.copyfile(mb, ma)
        if how == "copy_and_rename":  # the recorded key rewritten too: only the identity fields tell
            ma.write_text(json.dumps({**json.loads(ma.read_text()), "key": key_a}))
    assert cache.get(key_a, id_a) is None
    assert cache.warnings and key_a in cache.warnings[0]
    assert not ta.exists() and not ma.exists()  # set aside, so the runner recomputes and rewrites it
    if how != "swap":
        X, meta = cache.get(key_b, id_b)  # the source entry itself is untouched and still proves itself
        assert torch.equal(X, torch.ones(4, 2)) and meta["n"] == 4


def test_get_with_identity_accepts_the_entry_put_under_it(tmp_path):
    cache = EmbeddingCache(tmp_path)
    identity = {"encoder": "e", "params": {"dims": (3, 4), "path": tmp_path}, "split": "train", "view": "id"}
    key = identity_key(identity)
    cache.put(key, torch.randn(3, 2), {**identity, "n": 3, "label": "x"})  # extra fields are fine
    X, meta = cache.get(key, identity)  # tuples and paths come back from JSON as lists and strings
    assert X.shape == (3, 2) and meta["n"] == 3 and cache.warnings == []
    wrong_key = "0" * 40  # a key that is not the identity's hash: refused, and the entry is not at fault
    cache.put(wrong_key, torch.randn(3, 2), identity)
    assert cache.get(wrong_key, identity) is None and cache.warnings
    assert (cache.dir / f"{wrong_key}.json").exists()
    with pytest.raises(ValueError, match="reserved"):
        cache.put(key, torch.randn(3, 2), {**identity, "sha256": "forged"})


@pytest.mark.parametrize("meta_text", ["[]", "123", '"text"', "null"])
def test_metadata_that_is_json_but_not_an_object_is_corrupt(tmp_path, meta_text):
    cache = EmbeddingCache(tmp_path)
    key = "k" * 40
    cache.put(key, torch.randn(3, 2), {})
    tensor_path, meta_path = _entry_files(cache, key)
    meta_path.write_text(meta_text)
    assert cache.entries() == []
    assert cache.get(key) is None
    assert cache.warnings and "corrupt" in cache.warnings[0]
    assert not tensor_path.exists() and not meta_path.exists()


@pytest.mark.parametrize("which", ["tensor", "meta"])
def test_a_folder_in_place_of_an_entry_file_is_set_aside(tmp_path, which):
    cache = EmbeddingCache(tmp_path)
    key = "k" * 40
    cache.put(key, torch.randn(3, 2), {})
    path = _entry_files(cache, key)[which == "meta"]
    path.unlink()
    (path / "inner").mkdir(parents=True)
    assert len(cache.entries()) == (which == "tensor")  # listed from its metadata, without raising
    assert cache.get(key) is None and cache.warnings
    assert not path.exists()
    cache.put(key, torch.ones(3, 2), {})  # the recomputed entry can be stored again
    assert torch.equal(cache.get(key)[0], torch.ones(3, 2))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX-only")
@pytest.mark.parametrize("which", ["tensor", "meta"])
def test_a_named_pipe_in_place_of_an_entry_file_does_not_hang(tmp_path, which):
    import threading

    cache = EmbeddingCache(tmp_path)
    key = "k" * 40
    cache.put(key, torch.randn(3, 2), {})
    path = _entry_files(cache, key)[which == "meta"]
    path.unlink()
    os.mkfifo(path)
    stop, hung = threading.Event(), []

    def watchdog():  # a reader blocked on the pipe is released by opening its write end
        if not stop.wait(5):
            hung.append(path.name)
            while not stop.wait(0.05):
                try:
                    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    pass

    guard = threading.Thread(target=watchdog, daemon=True)
    guard.start()
    try:
        listed, got = cache.entries(), cache.get(key)
    finally:
        stop.set()
        guard.join()
    assert not hung, f"blocked opening the named pipe {path.name}"
    assert len(listed) == (which == "tensor") and got is None
    assert cache.warnings and "corrupt" in cache.warnings[0] and not path.exists()


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_cache_files_respect_the_umask(tmp_path, umask, mode):
    import stat

    cache = EmbeddingCache(tmp_path)
    previous = os.umask(umask)
    try:
        cache.put("k" * 40, torch.randn(3, 2), {})
    finally:
        os.umask(previous)
    for path in _entry_files(cache, "k" * 40):
        assert stat.S_IMODE(path.stat().st_mode) == mode, path.name


def test_an_entry_this_user_cannot_read_is_left_alone(tmp_path, monkeypatch):
    import relbench.cache as cache_module

    cache = EmbeddingCache(tmp_path)
    key = "k" * 40
    cache.put(key, torch.randn(3, 2), {})

    def denied(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(cache_module, "_read_regular", denied)
    assert cache.get(key) is None
    assert cache.warnings and "cannot be read" in cache.warnings[0]
    assert all(p.exists() for p in _entry_files(cache, key))  # another user's entry is not deleted


def test_an_entry_this_user_cannot_replace_is_left_uncached(tmp_path, monkeypatch):
    cache = EmbeddingCache(tmp_path)
    key = "k" * 40

    def denied(src, dst):
        raise PermissionError(1, "Operation not permitted", str(dst))

    monkeypatch.setattr(os, "replace", denied)  # e.g. another user's file in a sticky shared folder
    cache.put(key, torch.randn(3, 2), {})
    monkeypatch.undo()
    assert cache.warnings and "not stored" in cache.warnings[0]
    assert list(cache.dir.iterdir()) == []  # no temporary files left behind


def test_clear_never_deletes_through_a_symlinked_cache_folder(tmp_path):
    from relbench.errors import UserError

    target = tmp_path / "elsewhere"
    (target / "keep.txt").parent.mkdir()
    (target / "keep.txt").write_text("not ours")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "embeddings").symlink_to(target, target_is_directory=True)
    cache = EmbeddingCache(tmp_path / "cache")
    cache.put("k" * 40, torch.randn(3, 2), {})
    with pytest.raises(UserError, match="symbolic link"):
        cache.clear()
    assert (target / "keep.txt").read_text() == "not ours" and (target / f"{'k' * 40}.json").exists()
    assert cache.dir.is_symlink()
    real = EmbeddingCache(tmp_path / "real")  # a real folder is still cleared
    real.put("k" * 40, torch.randn(3, 2), {})
    assert real.clear() == 1 and not real.dir.exists()


# ----------------------------------------------------------------------------- the store's index


def _filled(tmp_path, n=5):
    store = ResultStore(tmp_path)
    store.read("t")  # as a run plans before it appends: the index is kept in step from the first line
    for i in range(n):
        status = "error" if i == 3 else "ok"
        store.append("t", f"u{i}", [{"task": "t", "metric": "m", "value": float(i), "status": status}], f"run{i}",
                     key={"seed": i})
    store.append("t", "u1", [{"task": "t", "metric": "m", "value": 9.0, "status": "ok"}], "again", key={"seed": 1})
    return store


def _as_parsed(store, task="t"):
    lines = store.read(task)
    return lines.done, {u: (e.run, e.time, e.key) for u, e in lines.units.items()}


def test_a_fresh_read_of_an_indexed_store_parses_no_line(tmp_path, monkeypatch):
    import relbench.result_index as result_index
    import relbench.results as results

    expected = _as_parsed(_filled(tmp_path))
    assert (tmp_path / ".index" / "t.tsv").is_file()
    parsed = []
    for module in (results, result_index):  # every place a stored line is parsed
        monkeypatch.setattr(module, "unit_line", lambda raw: parsed.append(raw))
    assert _as_parsed(ResultStore(tmp_path)) == expected and not parsed
    assert expected[0] == {"u0", "u1", "u2", "u4"}


def test_the_index_takes_in_lines_another_process_appended(tmp_path):
    _filled(tmp_path)
    reader = ResultStore(tmp_path)
    reader.read("t")
    ResultStore(tmp_path).append("t", "u3", [{"task": "t", "metric": "m", "value": 3.0, "status": "ok"}], "later")
    assert "u3" in reader.read("t").done
    assert _as_parsed(ResultStore(tmp_path)) == _as_parsed(reader)


@pytest.mark.parametrize("change", ["delete", "garbage", "reorder", "drop-first", "truncate-index"])
def test_an_index_that_disagrees_with_the_file_is_rebuilt(tmp_path, change):
    _filled(tmp_path)
    path, index = tmp_path / "t.jsonl", tmp_path / ".index" / "t.tsv"
    if change == "delete":
        index.unlink()
    elif change == "garbage":
        index.write_text("nonsense\n1\t2\n")
    elif change == "reorder":  # same bytes, other order: every offset moves
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[::-1]))
    elif change == "drop-first":
        path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[1:]))
    else:
        index.write_text("\n".join(index.read_text().splitlines()[:3]) + "\n")
    fresh = _as_parsed(ResultStore(tmp_path))
    index.unlink()
    assert _as_parsed(ResultStore(tmp_path)) == fresh  # what a read with no index parses from the file
    assert (fresh[1]["u1"][0] == "run1") == (change == "reorder")  # reversed: u1's older line comes last, wins
    assert index.is_file()  # written again


def test_a_held_entry_is_served_from_memory_and_checked_like_one_on_disk(tmp_path):
    cache = EmbeddingCache(tmp_path)
    identity = {"encoder": "e", "params": {"dims": (4, 2)}, "split": "train"}
    key, X = identity_key(identity), torch.arange(6.0).reshape(3, 2)
    cache.hold(key, X, {**identity, "n": 3})
    assert cache.has(key) and not (tmp_path / "embeddings").exists()  # nothing on disk
    got, meta = cache.get(key, identity)  # a tuple parameter reads back as the list it is stored as
    assert got is X and meta["n"] == 3 and meta["key"] == key
    assert cache.get(key, {**identity, "split": "test"}) is None  # another identity under that key: not served
    cache.held.clear()
    assert not cache.has(key) and cache.get(key, identity) is None
