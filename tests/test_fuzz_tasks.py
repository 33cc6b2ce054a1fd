"""Seeded fuzz test of tasks-file validation: mutants of the shipped tasks files are
either valid or refused with a ConfigError and `relbench run --dry-run` exit 2 (no
traceback), and validating them writes nothing. The generator is
benchmarks/fuzz_tasks.py (run it there with more cases)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import fuzz_tasks  # noqa: E402

#: seeds 0 … CASES-1: about 5 s on a 2-core machine
CASES = 160


@pytest.fixture(scope="module")
def builtin_registry():
    """The registry `relbench` itself builds (built-in plugins), once for the module."""
    from relbench.plugins import load_registry

    return load_registry()


def test_mutated_tasks_files_are_valid_or_refused_cleanly(builtin_registry, tmp_path, capsys):
    """Every mutant is a Suite or a ConfigError with a clean CLI exit 2; nothing is written."""
    outcomes = fuzz_tasks.run_cases(range(CASES), tmp_path, builtin_registry, lambda: capsys.readouterr().err)
    with capsys.disabled():
        print(f"\nfuzz_tasks: {fuzz_tasks.summary(outcomes)}")
    failures = [o for o in outcomes if o.status == "failure"]
    assert not failures, f"{fuzz_tasks.summary(outcomes)}\n\n" + "\n\n".join(o.report() for o in failures)
    statuses = {o.status for o in outcomes}
    assert statuses == {"valid", "refused"}, "the generator should reach both valid and refused mutants"


@pytest.mark.parametrize("name", list(fuzz_tasks.HOSTILE))
def test_hostile_inputs_are_refused_at_once(builtin_registry, tmp_path, capsys, name):
    """Each hostile input of the benchmark is a ConfigError within a second of this
    process's CPU time (not wall time, which other processes on a loaded machine
    stretch), and the CLI exits 2 with a short message and no traceback (the benchmark
    measures memory too)."""
    from relbench.cli import main
    from relbench.config import load_suite
    from relbench.errors import ConfigError

    path = fuzz_tasks.HOSTILE[name](tmp_path)
    t0 = time.process_time()
    with pytest.raises(ConfigError):
        load_suite(path, builtin_registry)
    assert time.process_time() - t0 < 1.0
    assert main(["run", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("relbench: error:") and "Traceback" not in err and len(err) < 600
