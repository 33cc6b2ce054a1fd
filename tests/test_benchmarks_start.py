"""Every benchmark script starts: its imports resolve against the current code. A script
that names a function the code has moved or renamed fails here rather than on the day
someone needs its figures (`stacked_heads.py` once imported ``ReferenceHead`` from the
module it had left, and failed on the first GPU it was meant to measure)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"

IMPORT_EACH = """
import importlib.util, sys, traceback
failed = []
for path in sys.argv[1:]:
    name = "benchmark_" + path.rsplit("/", 1)[-1][:-3]
    spec = importlib.util.spec_from_file_location(name, path)
    module = sys.modules[name] = importlib.util.module_from_spec(spec)  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    except Exception:
        failed.append(path + ": " + traceback.format_exc().strip().splitlines()[-1])
print("\\n".join(failed))
"""


def test_every_benchmark_script_imports():
    scripts = sorted(str(p) for p in BENCHMARKS.glob("*.py"))
    assert len(scripts) > 20
    proc = subprocess.run([sys.executable, "-c", IMPORT_EACH, *scripts], cwd=BENCHMARKS, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(BENCHMARKS)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "", proc.stdout
