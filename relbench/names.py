"""Which names may become file names: a task's results file, page and figure folder
are named after it, so a task name is checked once here, wherever a path is built from
one (also when reading a results store written elsewhere)."""

from __future__ import annotations

import re
from pathlib import Path

#: letters, digits, ``.``, ``_`` and ``-``, starting with a letter or digit, at most 64
TASK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: names a task cannot take: the leaderboards index, the sources page and the figures folder
RESERVED_NAMES = {"readme", "figures", "index", "sources"}


def valid_task_name(name: str) -> bool:
    """Whether ``name`` may name a task (and so its files)."""
    return isinstance(name, str) and bool(TASK_NAME.fullmatch(name)) and name.lower() not in RESERVED_NAMES


def inside(folder: Path, name: str, suffix: str = "") -> Path:
    """``folder/name+suffix``, refusing a name that is not a valid task name (so the path
    cannot leave ``folder``)."""
    if not valid_task_name(name):
        raise ValueError(f"{name!r} is not a valid task name; refusing to build a path from it under {folder}")
    return Path(folder) / f"{name}{suffix}"
