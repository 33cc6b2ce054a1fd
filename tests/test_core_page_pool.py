"""Pages drawn several at once (`-j N`) are the pages drawn one after the other, byte for
byte, and an error while drawing one page reaches the caller."""

from __future__ import annotations

from pathlib import Path

import pytest

from relbench.page_pool import draw_pages
from test_core_verify import TASKS


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_pages_drawn_in_two_workers_are_the_serial_pages(cli_main, write_yaml, tmp_path, capsys):
    path = write_yaml(TASKS)
    assert cli_main(["run", str(path), "-q", "--no-leaderboard"]) == 0
    assert cli_main(["leaderboard", str(path), "--leaderboards", str(tmp_path / "serial")]) == 0
    assert cli_main(["leaderboard", str(path), "--leaderboards", str(tmp_path / "parallel"), "-j", "2"]) == 0
    assert "wrote 2 changed pages" in capsys.readouterr().err
    serial, parallel = _snapshot(tmp_path / "serial"), _snapshot(tmp_path / "parallel")
    assert {"blobs.md", "quality.md", "README.md"} <= set(serial) and serial == parallel


def _fails(name: str) -> dict:
    raise OSError(f"no space left while drawing {name}")


def test_an_error_of_one_page_is_raised_by_the_pool():
    with pytest.raises(OSError, match="drawing b"):
        draw_pages(_fails, [("b",), ("c",)], jobs=2)
    assert draw_pages(dict, [((("x", 1),),), ((("y", 2),),)], jobs=2) == [{"x": 1}, {"y": 2}]
