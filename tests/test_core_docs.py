"""The README documents every built-in plugin by name, and its commands exist."""

from __future__ import annotations

from pathlib import Path

from relbench.plugins import Registry, _discover

ROOT = Path(__file__).resolve().parents[1]


def test_every_builtin_plugin_is_named_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    registry = Registry(_discover())
    missing = [f"{interface} {name}" for interface, table in registry.by_interface.items()
               for name, reg in table.items()
               if reg.package.startswith("relbench ") and f"`{name}`" not in readme]
    assert not missing, f"README does not mention: {missing}"


def test_readme_commands_are_the_ci_commands():
    readme = (ROOT / "README.md").read_text()
    assert "make run" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert ".venv/bin/relbench run tasks.yaml" in makefile and "pytest" in makefile
