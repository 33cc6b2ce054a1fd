"""``relbench.api`` is the one relbench module plugins import, and every name it exports
resolves and is documented in the README's "The plugin API" section."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import relbench.api

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_TREES = [ROOT / "plugins", ROOT / "examples"]
API = "relbench.api"
DOC_HEADING = "### The plugin API"


def core_imports(source: str) -> list[str]:
    """Every import in ``source`` (at any depth, inside functions too) of a relbench
    module other than :mod:`relbench.api`, as ``line: module``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "relbench":
            modules = [f"relbench.{alias.name}" for alias in node.names]  # `from relbench import x`
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [node.module or ""]
        else:
            continue
        found += [f"{node.lineno}: {m}" for m in modules
                  if (m == "relbench" or m.startswith("relbench.")) and m != API]
    return found


def documented_names(readme: str) -> list[str]:
    """The names listed (``- `name`: ...``) in the README's plugin-API section."""
    section = readme.split(DOC_HEADING, 1)[1]
    section = re.split(r"^#", section, maxsplit=1, flags=re.MULTILINE)[0]
    return re.findall(r"^- `([A-Za-z_]\w*)`:", section, flags=re.MULTILINE)


def undocumented(exported: list[str], documented: list[str]) -> dict[str, list[str]]:
    """Names exported but not documented, and documented but not exported."""
    return {"not documented": sorted(set(exported) - set(documented)),
            "documented but not exported": sorted(set(documented) - set(exported))}


def test_plugins_and_examples_import_relbench_only_through_the_api():
    files = [p for tree in PLUGIN_TREES for p in tree.rglob("*.py")]
    assert len(files) > 50
    offenders = {str(p.relative_to(ROOT)): hits for p in files if (hits := core_imports(p.read_text()))}
    assert not offenders, f"import these names from {API} instead: {offenders}"


def test_the_import_check_sees_every_form_of_import():
    source = textwrap.dedent("""\
        import relbench
        import relbench.config as config
        from relbench.pages import Page
        from relbench import hookimpl, precision
        from relbench.api import Similarity
        import relbench.api
        from relbench import api
        import relbench_stitching.kind
        from relbench_encoders._common import run_batched
        from . import sibling

        def later():
            from relbench.training import seeded_generator
        """)
    assert core_imports(source) == ["1: relbench", "2: relbench.config", "3: relbench.pages",
                                    "4: relbench.hookimpl", "4: relbench.precision",
                                    "13: relbench.training"]


def test_every_exported_name_is_documented_and_every_documented_name_exported():
    documented = documented_names((ROOT / "README.md").read_text())
    assert len(documented) == len(set(documented)), "a name is documented twice"
    assert undocumented(relbench.api.__all__, documented) == {"not documented": [],
                                                              "documented but not exported": []}


def test_the_documentation_check_catches_a_missing_and_a_stale_name():
    readme = f"intro\n\n{DOC_HEADING}\n\n- `Page`: a page.\n- `gone`: removed.\n\n## Next\n- `Task`: elsewhere.\n"
    assert documented_names(readme) == ["Page", "gone"]
    assert undocumented(["Page", "Task"], documented_names(readme)) == {
        "not documented": ["Task"], "documented but not exported": ["gone"]}


def test_every_exported_name_resolves():
    assert len(relbench.api.__all__) == len(set(relbench.api.__all__))
    missing = [name for name in relbench.api.__all__ if getattr(relbench.api, name, None) is None]
    assert not missing


def test_the_api_imports_on_its_own_in_a_fresh_interpreter():
    check = ("import relbench.api as api; ns = {}; exec('from relbench.api import *', ns); "
             "assert sorted(set(ns) - {'__builtins__'}) == sorted(api.__all__)")
    proc = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
