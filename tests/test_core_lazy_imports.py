"""Planning with a warm cache imports neither torch nor pandas: the no-op and `--dry-run`
of the default suite stay under a second and 0.3 GB (torch alone is about 0.9 s and
200 MB to import; `benchmarks/noop_run.py` measures the whole process). A cold cache
describes each data set once first, which may read data with either."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PLAN_AND_REPORT = """
import json, sys
from relbench.cli import main
code = main(["run", "tasks.yaml", "--dry-run", "--json", "--output", sys.argv[1]])
heavy = sorted(m for m in ("torch._C", "pandas._libs", "pyarrow.lib", "scipy", "transformers", "timm")
               if m in sys.modules)
print(json.dumps({"code": code, "heavy": heavy}))
"""


def test_the_default_suites_plan_imports_no_torch_and_no_pandas(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RELBENCH_PLUGINS", "RELBENCH_DISABLE_PLUGINS")}
    for _ in range(2):  # the first plan describes the data sets into the (test session's) cache
        proc = subprocess.run([sys.executable, "-c", PLAN_AND_REPORT, str(tmp_path / "results")], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"code": 0, "heavy": []}, proc.stderr[-2000:]


def test_a_torch_module_of_a_plugin_still_works_once_imported_lazily():
    """The lazily imported torch is the real module once touched: a plugin module that
    names it at import time only through the lazy proxy computes as before."""
    from relbench_relreps.similarities import cosine_matrix

    import torch

    X = torch.eye(3)
    assert torch.allclose(cosine_matrix(X, X), torch.eye(3))
    assert type(torch).__name__ == "module"


NOTHING_STANDS_IN = """
import sys, types
import relbench.banks, relbench_relreps.similarities, relbench.results
before = sorted(m for m in ("torch", "pandas") if m in sys.modules)
relbench.banks.torch.zeros(1)
relbench.results.pd.DataFrame()
print(before, type(sys.modules["torch"]) is types.ModuleType, type(sys.modules["pandas"]) is types.ModuleType,
      relbench_relreps.similarities.torch.as_tensor is sys.modules["torch"].as_tensor)
"""


def test_a_deferred_module_puts_nothing_in_sys_modules_before_its_real_import():
    """A lazy module in ``sys.modules`` (importlib's LazyLoader, which lazy_loader used) is
    what torch met importing its own submodules, and under Python 3.12.3 that recursed
    until the import failed; the deferred stand-in leaves ``sys.modules`` to the ordinary
    import, which then holds the plain module."""
    proc = subprocess.run([sys.executable, "-c", NOTHING_STANDS_IN], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.split() == ["[]", "True", "True", "True"], proc.stderr[-2000:]


def test_a_deferred_module_forwards_attributes_and_says_what_it_stands_for():
    from relbench.deferred import load

    json_module = load("json")
    assert "not imported yet" in repr(json_module)
    assert json_module.loads("[1]") == [1]
    assert "imported" in repr(json_module) and "not" not in repr(json_module)
    with pytest.raises(ModuleNotFoundError, match="relbench_no_such_module"):  # on first use, not before
        load("relbench_no_such_module").anything


def test_a_deferred_module_pickles_and_copies_as_the_name_it_stands_for():
    """Copying or unpickling makes an instance without ``__init__``; its first attribute
    lookup must not recurse through the unset slots."""
    import copy
    import pickle

    from relbench.deferred import DeferredModule, load

    deferred = load("json")
    for _ in range(2):  # before and after the stand-in has imported its module
        for twin in (pickle.loads(pickle.dumps(deferred)), copy.copy(deferred), copy.deepcopy(deferred)):
            assert isinstance(twin, DeferredModule) and twin.dumps([2]) == "[2]"
        assert deferred.loads("1") == 1
    with pytest.raises(AttributeError, match="_module"):
        DeferredModule.__new__(DeferredModule).anything
    assert load("json").__name__ == "json"  # module dunders are forwarded
