"""What a run says while it works: a first line before anything slow, the plan with an
estimate from recorded unit costs, one suite bar; Ctrl-C stops without drawing pages."""

from __future__ import annotations

import pytest
from test_core_runner import TASKS, _interrupt_at_cell

from relbench.cli import WORKER_BYTES, auto_jobs


def test_the_first_line_comes_before_the_store_and_cache_are_checked(cli_main, write_yaml, capsys, monkeypatch):
    import sys

    from relbench.runner import Runner

    real = Runner.plans

    def plans(self, *args, **kwargs):
        print("<planning>", file=sys.stderr)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Runner, "plans", plans)
    path = write_yaml(TASKS)
    assert cli_main(["run", str(path), "--no-leaderboard"]) == 0
    err = capsys.readouterr().err
    first = "relbench: 1 tasks, 12 units in tasks.yaml; checking the results store"
    assert first in err and err.index(first) < err.index("<planning>")
    assert "to compute: 12 units of 1 tasks and 6 encodings" in err
    assert "no recorded unit costs to estimate from" in err
    # the bar counts the run's units, with the task being computed
    assert "suite: 100%" in err and "12/12" in err and "blobs" in err.split("suite: 100%", 1)[1]


def test_the_estimate_comes_from_the_unit_costs_recorded_in_the_store(cli_main, write_yaml, capsys):
    path = write_yaml(TASKS)
    assert cli_main(["run", str(path), "-q"]) == 0
    assert cli_main(["run", str(path), "--force", "--no-leaderboard"]) == 0
    err = capsys.readouterr().err
    assert "to compute: 12 units of 1 tasks and 0 encodings" in err
    assert "of unit work on 1 worker (from the unit costs recorded in this store" in err


def test_ctrl_c_stops_without_drawing_pages(cli_main, write_yaml, capsys, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("pages drawn after Ctrl-C")

    monkeypatch.setattr("relbench.leaderboard.render", never)
    _interrupt_at_cell(monkeypatch, 8)
    path = write_yaml(TASKS)
    assert cli_main(["run", str(path)]) == 130
    err = capsys.readouterr().err
    assert "interrupted: 2 units finished in this run are stored" in err and "relbench leaderboard" in err


@pytest.mark.parametrize("cores, available, jobs", [(2, 24e9, 2), (2, 3e9, 1), (16, 10e9, 4), (2, 1e9, 1)])
def test_auto_jobs_uses_every_core_the_memory_allows(cores, available, jobs):
    assert auto_jobs(cores, int(available)) == jobs
    assert WORKER_BYTES >= 2.1e9  # the largest task's measured peak fits one worker


def test_jobs_auto_is_accepted_and_a_wrong_value_says_what_is_expected(cli_main, write_yaml, capsys):
    path = write_yaml(TASKS)
    assert cli_main(["run", str(path), "-j", "auto", "--dry-run"]) == 0
    with pytest.raises(SystemExit) as exit:
        cli_main(["run", str(path), "-j", "many"])
    assert exit.value.code == 2 and "expected `auto` or a whole number" in capsys.readouterr().err


def test_an_empty_store_orders_tasks_by_the_unit_costs_of_the_release(tmp_path):
    import pandas as pd

    from relbench.progress import unit_costs

    class Store:  # one task measured in this store, the others not
        def unit_seconds(self, task):
            return [2.0, 4.0] if task == "mine" else []

    release = tmp_path / "results.parquet"
    pd.DataFrame({"task": ["slow", "slow", "slow", "fast"], "unit": ["u1", "u1", "u2", "u3"],
                  "seconds": [30.0, 30.0, 50.0, 1.0]}).to_parquet(release)
    costs = unit_costs(Store(), ["mine", "slow", "fast", "new"], release)
    assert costs == {"mine": [2.0, 4.0], "slow": [40.0], "fast": [1.0], "new": []}
    assert unit_costs(Store(), ["slow"], tmp_path / "missing.parquet") == {"slow": []}
