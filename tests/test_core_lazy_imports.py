"""Planning with a warm cache imports neither torch nor pandas: the no-op and `--dry-run`
of the default suite stay under a second and 0.3 GB (torch alone is about 0.9 s and
200 MB to import; `benchmarks/noop_run.py` measures the whole process). A cold cache
describes each data set once first, which may read data with either."""

import json
import os
import subprocess
import sys
from pathlib import Path

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
