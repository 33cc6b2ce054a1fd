"""Contributor bundles: `relbench submit` writes the units computed locally (not those
`--reuse` took from a release) into one zip with a manifest; `relbench verify BUNDLE`
recomputes a sample and writes a receipt beside it; `relbench leaderboard --include`
shows only a bundle whose receipt is this bundle's and agrees, marked submitted. A
damaged, edited, forged or mismatched bundle is refused, and nothing else is written."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from relbench.bundle import MANIFEST, ROWS, receipt_path, read_bundle
from relbench.errors import UserError
from test_core_verify import release  # noqa: F401 - the published toy release fixture

TESTS = Path(__file__).resolve().parent
#: units of the release's tasks (blobs, quality) and those a second similarity adds to blobs (relative stitching only)
BLOBS, QUALITY, NEW = 8, 4, 4


def _snapshot(folder: Path, leave_out: tuple[str, ...] = ()) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not str(p.relative_to(folder)).startswith(leave_out)}


@pytest.fixture
def submission(release, cli_main, tmp_path):  # noqa: F811 - the fixture imported above
    """A contributor's bundle: the release's tasks file with a second similarity, run
    with `--reuse` into a store of its own (only the new units computed) and submitted:
    ``(tasks file, bundle)``."""
    path, _ = release
    path.write_text(path.read_text().replace("similarities: [cosine]", "similarities: [cosine, euclidean]"))
    contrib = tmp_path / "contrib"
    assert cli_main(["run", str(path), "--output", str(contrib), "--no-leaderboard", "-q", "--reuse"]) == 0
    bundle = tmp_path / "bundle.zip"
    assert cli_main(["submit", str(path), "--output", str(contrib), "--to", str(bundle)]) == 0
    return path, bundle


def _members(bundle: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(bundle) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _rewrite(bundle: Path, members: dict[str, bytes]) -> None:
    bundle.unlink()
    with zipfile.ZipFile(bundle, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def _forge(bundle: Path, change_rows=None, change_manifest=None, digests: bool = True) -> None:
    """Edit the bundle's rows and/or manifest; with ``digests``, recompute the rows'
    sha256 in the manifest as a forger would."""
    members = _members(bundle)
    manifest = json.loads(members[MANIFEST])
    if change_rows:
        rows = pd.read_parquet(io.BytesIO(members[ROWS]))
        change_rows(rows)
        buffer = io.BytesIO()
        rows.to_parquet(buffer, index=False)
        members[ROWS] = buffer.getvalue()
    if change_manifest:
        change_manifest(manifest)
    if digests:
        manifest["members"][ROWS] = hashlib.sha256(members[ROWS]).hexdigest()
    members[MANIFEST] = json.dumps(manifest).encode()
    _rewrite(bundle, members)


def _cli(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """`relbench` in a subprocess (the toy plugins loaded as --plugin loads them)."""
    env = {**os.environ, "RELBENCH_PLUGINS": "toy_plugins", "TMPDIR": str(folder),
           "RELBENCH_CACHE_DIR": str(folder / "cache"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "relbench.cli", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=300)


def _refused(done: subprocess.CompletedProcess, said: str) -> None:
    """Exit 2 with one line ``relbench: error: …`` saying ``said``, and no traceback."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("relbench: error: ") and said in lines[0], done.stderr


def test_submit_verify_include_round_trip(submission, cli_main, capsys, tmp_path):
    path, bundle = submission
    manifest = json.loads(_members(bundle)[MANIFEST])
    assert manifest["units"] == {"blobs": NEW} and manifest["reused"] == {"blobs": BLOBS, "quality": QUALITY}
    assert manifest["revisions"] == ["abc1234"] and manifest["tasks"]["text"] == path.read_text()
    assert manifest["tasks"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert "tests 0" in manifest["packages"]  # the toy plugins' package, as the rows name it
    rows = read_bundle(bundle).rows
    assert set(rows["similarity"]) == {"euclidean"} and rows["per_sample.format"].notna().any()

    before = _snapshot(tmp_path, ("cache",))
    assert cli_main(["verify", str(bundle), "--sample", "3", "-q"]) == 0
    out = capsys.readouterr().out
    assert "holds:" in out and "all 3 units (" in out and "verdict: the bundle agrees" in out
    after = _snapshot(tmp_path, ("cache",))
    assert set(after) - set(before) == {receipt_path(bundle).name} and {k: after[k] for k in before} == before
    receipt = json.loads(receipt_path(bundle).read_text())
    assert (receipt["verdict"], receipt["units_agree"], receipt["units_disagree"], receipt["seed"]) == \
        ("agrees", 3, 0, 0)
    assert receipt["bundle_sha256"] == hashlib.sha256(bundle.read_bytes()).hexdigest()

    store = tmp_path / "results"
    assert cli_main(["leaderboard", str(path)]) == 0  # the store's own pages (and index) first
    kept = _snapshot(store, ("boards",))
    assert cli_main(["leaderboard", str(path), "--include", str(bundle)]) == 0
    assert f"merged {NEW} units of {bundle}" in capsys.readouterr().err
    assert _snapshot(store, ("boards",)) == kept  # the store is never written
    page = (store / "boards" / "blobs.md").read_text()
    assert (f"Of the {BLOBS + NEW} units shown, {NEW} submitted in `bundle.zip` at revision `abc1234` (merged by "
            f"`relbench leaderboard --include`; `relbench verify`: 3 of 3 sampled units recomputed alike") in page
    assert f"{BLOBS} computed locally" in page
    ranking = page.split("### Ranking", 1)[1].split("###", 1)[0].splitlines()
    assert any("euclidean" in r and re.search(r"\| submitted\s+\|", r) for r in ranking)
    assert any("cosine" in r and re.search(r"\| computed locally\s+\|", r) for r in ranking)


def test_a_unit_the_store_holds_shows_the_stores_rows(submission, cli_main, capsys, tmp_path):
    path, bundle = submission
    assert cli_main(["verify", str(bundle), "--sample", "1", "-q"]) == 0
    boards = tmp_path / "boards"
    assert cli_main(["leaderboard", str(path), "--output", str(tmp_path / "contrib"), "--leaderboards", str(boards),
                     "--include", str(bundle)]) == 0
    assert f"merged 0 units of {bundle}" in capsys.readouterr().err
    assert "submitted in `" not in (boards / "blobs.md").read_text()


def test_a_forged_bundle_disagrees_and_is_not_included(submission, cli_main, capsys, tmp_path):
    path, bundle = submission

    def tamper(rows):
        target = rows[rows["metric"] == "accuracy"].index[0]
        rows.loc[target, "value"] = rows.loc[target, "value"] + 0.01

    _forge(bundle, tamper)
    read_bundle(bundle)  # its digests hold: only recomputing tells
    assert cli_main(["verify", str(bundle), "--sample", str(NEW), "-q"]) == 1
    assert "verdict: the bundle disagrees" in capsys.readouterr().out
    receipt = json.loads(receipt_path(bundle).read_text())
    assert (receipt["verdict"], receipt["units_disagree"], receipt["units_agree"]) == ("disagrees", 1, NEW - 1)
    before = _snapshot(tmp_path, ("cache",))
    assert cli_main(["leaderboard", str(path), "--include", str(bundle)]) == 2
    err = capsys.readouterr().err
    assert "its verification disagrees" in err and f"relbench verify {bundle} --sample 30" in err
    assert _snapshot(tmp_path, ("cache",)) == before


def test_a_bundle_of_another_tasks_file_is_refused(submission, cli_main, capsys, tmp_path):
    path, bundle = submission
    assert cli_main(["verify", str(bundle), "--sample", "1", "-q"]) == 0
    other = tmp_path / "other.yaml"
    other.write_text(path.read_text().replace("similarities: [cosine, euclidean]", "similarities: [cosine]"))
    assert cli_main(["leaderboard", str(other), "--include", str(bundle)]) == 2
    err = capsys.readouterr().err
    assert f"{NEW} of its units (blobs) are not in the plan of {other}" in err
    assert "pass the tasks file the bundle was made from" in err
    # the tasks text of the manifest edited, its digest recomputed: its plan lacks the rows' units
    text = other.read_text()
    _forge(bundle, change_manifest=lambda m: m["tasks"].update(text=text, sha256=hashlib.sha256(
        text.encode()).hexdigest()))
    assert cli_main(["verify", str(bundle), "-q"]) == 2
    assert "are not in the plan of the tasks file it holds" in capsys.readouterr().err
    _forge(bundle, change_manifest=lambda m: m["tasks"].update(text=text + "\n# edited\n"))
    with pytest.raises(UserError, match="tasks file text it holds does not have the sha256 .* \\(mismatched\\)"):
        read_bundle(bundle)


def test_submit_refuses_nothing_to_submit_and_dirty_rows(release, cli_main, capsys, tmp_path, monkeypatch):
    path, _ = release
    reused = tmp_path / "reused"
    assert cli_main(["run", str(path), "--output", str(reused), "--no-leaderboard", "-q", "--reuse"]) == 0
    assert cli_main(["submit", str(path), "--output", str(reused), "--to", str(tmp_path / "b.zip")]) == 2
    assert "nothing to submit" in capsys.readouterr().err and not (tmp_path / "b.zip").exists()
    monkeypatch.setattr("relbench.unit_store.git_revision", lambda: "abc1234-dirty")
    dirty = tmp_path / "dirty"
    assert cli_main(["run", str(path), "--output", str(dirty), "--no-leaderboard", "-q", "--task", "quality"]) == 0
    assert cli_main(["submit", str(path), "--output", str(dirty), "--to", str(tmp_path / "b.zip")]) == 2
    assert "uncommitted changes or none (abc1234-dirty)" in capsys.readouterr().err
    assert cli_main(["submit", str(path), "--output", str(dirty), "--to", str(tmp_path / "b.tar")]) == 2
    assert "a bundle is a .zip file" in capsys.readouterr().err
    assert not list(tmp_path.glob("b.*")) and not list(tmp_path.glob(".b.*"))


def test_damaged_edited_and_unverified_bundles_exit_2_with_one_line(submission, cli_main, tmp_path):
    path, bundle = submission
    good = bundle.read_bytes()
    cut = tmp_path / "cut.zip"
    cut.write_bytes(good[: len(good) // 2])
    edited = tmp_path / "edited.zip"
    edited.write_bytes(good)
    _forge(edited, lambda rows: rows.__setitem__("value", rows["value"] * 0.5), digests=False)
    other = tmp_path / "other.zip"
    other.write_bytes(good)
    _forge(other, change_manifest=lambda m: m.update(created="2000-01-01T00:00:00+00:00"))
    assert cli_main(["verify", str(bundle), "--sample", "1", "-q"]) == 0
    receipt_path(other).write_bytes(receipt_path(bundle).read_bytes())  # the receipt of another bundle
    before = _snapshot(tmp_path, ("cache",))
    _refused(_cli(tmp_path, "verify", str(cut)), "not a whole bundle, damaged or cut short")
    _refused(_cli(tmp_path, "verify", str(edited)),
             "member rows.parquet does not have the sha256 its manifest states (damaged or edited")
    unverified = tmp_path / "unverified.zip"
    unverified.write_bytes(good)
    before[unverified.name] = good
    _refused(_cli(tmp_path, "leaderboard", str(path), "--include", str(unverified)),
             "not verified: no receipt unverified.zip.verified.json beside it; run `relbench verify")
    _refused(_cli(tmp_path, "leaderboard", str(path), "--include", str(other)),
             "is of another bundle (its sha256 is not this file's)")
    assert _snapshot(tmp_path, ("cache",)) == before


def test_unsafe_names_oversized_members_and_other_formats_are_refused(submission, monkeypatch):
    _, bundle = submission
    members = _members(bundle)
    _rewrite(bundle, {**members, "../outside.txt": b"x"})
    with pytest.raises(UserError, match=r"unsafe member names '\.\./outside\.txt'"):
        read_bundle(bundle)
    _rewrite(bundle, {**members, "extra.txt": b"x"})
    with pytest.raises(UserError, match="are not the ones its manifest lists"):
        read_bundle(bundle)
    _rewrite(bundle, members)
    monkeypatch.setattr("relbench.bundle.MEMBER_LIMIT", len(members[MANIFEST]))  # the rows are larger
    with pytest.raises(UserError, match=f"member rows.parquet holds more than {len(members[MANIFEST]):,} bytes"):
        read_bundle(bundle)
    monkeypatch.undo()
    _forge(bundle, change_manifest=lambda m: m.update(format=99))
    with pytest.raises(UserError, match="bundle format 99, this relbench reads format 1"):
        read_bundle(bundle)
    bundle.write_text("not a zip")
    with pytest.raises(UserError, match="not a whole bundle"):
        read_bundle(bundle)
