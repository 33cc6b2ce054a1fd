"""A published release's rows, read and taken into a results store.

A release's ``results.parquet`` holds every result row its pages show, flat
(:func:`relbench.export.flatten`): one row per unit and metric, with the unit's id, the
fingerprint of everything that produced it (:mod:`relbench.identity`). A planned unit
whose id has rows there was computed from exactly the inputs the plan names, so its
rows can stand for it in a store: ``relbench verify`` does so for every unit it does
not recompute (:func:`relbench.verify.store_release`), and ``relbench run --reuse``
(:func:`reuse_release`) for every planned unit the store does not hold yet, each row
marked with where it came from (:data:`ORIGIN`, ``release@<revision>``); the rows keep
their own ``git`` revision. Units whose inputs differ have other ids and are computed.
``relbench leaderboard --include BUNDLE`` shows a contributor's verified units the same
way (:mod:`relbench.bundle`), marked ``submitted:<bundle>@<revision>`` with their
verification result (:data:`VERIFIED`).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from relbench import deferred
from relbench.errors import UserError
from relbench.export import gathered
from relbench.names import inside

if TYPE_CHECKING:
    from relbench.interfaces import TaskKind

pd = deferred.load("pandas")

#: the field of a stored row taken from a release: ``release@<revision>`` (absent on rows computed here)
ORIGIN = "origin"
#: the origin of a row a contributor's bundle submitted: ``submitted:<bundle name>@<revision>``
SUBMITTED_PREFIX = "submitted:"
#: the field of a submitted row saying how ``relbench verify`` judged its bundle
VERIFIED = "verified"
#: the line fields a release row carries as columns, which a stored line holds itself
LINE_FIELDS = ("unit", "run")
#: how the release index states its revision, tasks file and digest (:func:`relbench.leaderboard.release_section`)
RELEASE_STATEMENT = re.compile(r"\*\*Release\.\*\*.*? at git revision `(?P<revision>[^`]+)`.*? "
                               r"from `(?P<tasks>[^`]+)` \(sha256 `(?P<sha256>[0-9a-f]+)`\)")


#: the columns every results table has
RESULT_COLUMNS = ("task", "unit", "metric", "value", "status")


def release_columns(path: Path) -> list[str]:
    """The columns of a release's ``results.parquet``, read from its schema alone;
    :class:`UserError` when it cannot be read or is not a results table."""
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read the release {path} ({exc}); pass the results table of a release, e.g. "
                        f"`leaderboards/results.parquet`.") from None
    lacking = [c for c in RESULT_COLUMNS if c not in names]
    if lacking:
        raise UserError(f"{path} is not a release's results table: it has no column {', '.join(lacking)}.")
    return names


def read_release(path: Path, columns: set[str] | None = None) -> pd.DataFrame:
    """The flat rows of a release's ``results.parquet`` (only those of ``columns`` it has,
    when given: a whole release read with its hundreds of columns takes gigabytes);
    :class:`UserError` when it cannot be read or is not a results table
    (:func:`release_columns`)."""
    names = release_columns(path)
    wanted = None if columns is None else [c for c in names if c in {*columns, *RESULT_COLUMNS}]
    try:
        return pd.read_parquet(path, columns=wanted)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read the release {path} ({exc}); pass the results table of a release, e.g. "
                        f"`leaderboards/results.parquet`.") from None


def by_unit(rows: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """A release's rows grouped by unit id, in the release's order."""
    return {unit: group for unit, group in rows.groupby("unit", sort=False)}


def release_revision(path: Path, rows: pd.DataFrame) -> str:
    """The revision a release was published at, as its index (``README.md`` beside
    ``path``) states it; without one, the revision most of its rows name; ``unknown``
    when neither does."""
    try:
        found = RELEASE_STATEMENT.search(path.with_name("README.md").read_text(encoding="utf-8"))
    except OSError:
        found = None
    if found is not None:
        return found["revision"]
    revisions = rows["git"].dropna().astype(str) if "git" in rows else pd.Series([], dtype=object)
    revisions = revisions[revisions != ""]
    return str(revisions.value_counts().index[0]) if len(revisions) else "unknown"


def nested(rows: pd.DataFrame) -> pd.DataFrame:
    """A release's flat rows as a store holds them: lists written as JSON text read back
    (a column whose every value is a JSON list) and dotted columns gathered back into
    their records (:func:`relbench.export.gathered`: ``extra.samples.train`` → ``extra``,
    a tuning record's dotted parameter names made whole again);
    the line's inputs (``inputs.*``: the plan names them) left out."""
    rows = rows.drop(columns=[c for c in rows.columns if str(c).startswith("inputs.")])
    rows = rows.assign(**{c: rows[c].map(_parsed, na_action="ignore") for c in rows.columns if _lists(rows[c])})
    roots = sorted({str(c).split(".", 1)[0] for c in rows.columns if "." in str(c)})
    flat = rows[[c for c in rows.columns if "." not in str(c)]]
    out = flat.assign(**{root: gathered(rows, root) for root in roots})
    if "extra" in out:
        out["extra"] = out["extra"].map(_tuning_whole)
    return out


def _tuning_whole(extra: Any) -> Any:
    """``extra`` with its tuning record's dotted parameter names whole again
    (:func:`relbench.tuning.rejoined_parameters`: flattening split them)."""
    from relbench.tuning import rejoined_parameters

    tuned = extra.get("tuned") if isinstance(extra, dict) else None
    if not isinstance(tuned, dict) or not isinstance(tuned.get("parameters"), dict):
        return extra
    return {**extra, "tuned": {**tuned, "parameters": rejoined_parameters(tuned["parameters"])}}


def _lists(column: pd.Series) -> bool:
    """Whether every value of ``column`` is a JSON list as text (what flattening made of a list)."""
    values = column.dropna()
    return not values.empty and all(isinstance(v, str) and v.startswith("[") and isinstance(_parsed(v), list)
                                    for v in values)


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def stored_rows(group: pd.DataFrame, kind: TaskKind, origin: str | None = None) -> list[dict]:
    """A unit's release rows, :func:`nested`, as a store line of ``kind`` holds them:
    without the line's own fields (:data:`LINE_FIELDS`) and the empty fields the flat
    table has for other tasks' columns, but with every field a computed row has, None
    where empty (:func:`relbench.rows.row_keys`: a page reads its kind's columns whether
    or not a unit uses them), each marked with ``origin`` (:data:`ORIGIN`) when given."""
    from relbench.rows import row_keys

    marked = {ORIGIN: origin} if origin else {}
    always = row_keys(kind)

    def empty(v: Any) -> bool:
        return pd.api.types.is_scalar(v) and pd.isna(v)

    return [{k: v for k, v in r.items() if k not in LINE_FIELDS and not empty(v)}
            | {k: None for k in always if empty(r.get(k))} | marked for r in group.to_dict("records")]


def append_release_unit(store, task_run, unit, group: pd.DataFrame, origin: str | None = None) -> None:
    """Append to ``store`` a line of ``task_run``'s task for the planned ``unit`` (under
    the plan's id, displayed key and inputs) holding its release rows ``group``
    (:func:`nested`; :func:`stored_rows`), with the run id the release names for them."""
    store.append(task_run.task.name, unit.id, stored_rows(group, task_run.kind, origin), str(group["run"].iloc[0]),
                 key=unit.display, inputs=unit.inputs)


@dataclass(frozen=True)
class Reused:
    """What ``relbench run --reuse`` took from a release: ``units`` units of ``path`` at ``revision``."""

    path: Path
    revision: str
    units: int

    @property
    def origin(self) -> str:
        """The :data:`ORIGIN` its rows carry."""
        return f"release@{self.revision}"

    def describe(self) -> str:
        """``leaderboards/results.parquet (revision abc1234)``: the source, as the accounting names it."""
        return f"{self.path} (revision {self.revision})"


def reuse_release(task_runs: list, path: Path, store) -> Reused:
    """Append to ``store``, for every planned unit of ``task_runs`` (their plans made)
    that has rows in the release at ``path`` (the same id: the same inputs, plugin
    versions and protocol) and no line in the store yet, the release's rows as that
    unit's line, marked as taken from the release. Each task is written under its lock;
    nothing the store holds is replaced. :class:`UserError` when ``path`` is not a
    release's results table."""
    rows = read_release(path)
    taken = Reused(path, release_revision(path, rows), 0)
    count = 0
    for task_run in task_runs:
        name = task_run.task.name
        mine = rows[rows["task"] == name]
        published = set(mine["unit"])
        with store.lock(name, wait=True):
            held = store.read(name).units
            fresh = [u for u in task_run.plan().units if u.id in published and u.id not in held]
            groups = by_unit(nested(mine[mine["unit"].isin({u.id for u in fresh})])) if fresh else {}
            for unit in fresh:
                append_release_unit(store, task_run, unit, groups[unit.id], taken.origin)
            if fresh:
                copy_release_figures(path, name, store)
        count += len(fresh)
    return dataclasses.replace(taken, units=count)


def copy_release_figures(path: Path, task: str, store) -> list[Path]:
    """Copy into ``store`` the figures the release beside ``path`` holds for ``task``
    (its ``figures/<task>/`` folder) that the store has none of under the same name;
    returns the copies. Some figures are drawn while a task runs (reconstructions, death
    time histograms: they need the trained models, see
    :meth:`relbench.results.ResultStore.figure_path`) and no row can carry them, so a page
    drawn from rows taken from a release shows the release's. A run that computes units of
    the task draws its own over them, as a resumed run does."""
    source = inside(path.parent / "figures", task)
    if not source.is_dir():
        return []
    copied = []
    for figure in sorted(f for f in source.iterdir() if f.is_file() and not f.is_symlink()):
        target = store.figure_path(task, figure.name)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(figure, target)
            copied.append(target)
    return copied


# ----------------------------------------------------------------------------- on the pages

#: how a page marks a group of rows (a combination, …) by where its units came from
COMPUTED_LOCALLY, PARTLY_LOCALLY, FROM_RELEASE = "computed locally", "partly computed locally", "from the release"
SUBMITTED, PARTLY_SUBMITTED = "submitted", "partly submitted"


def taken_from_release(df: pd.DataFrame) -> pd.Series:
    """Per row of a task's stored rows, whether it was not computed here: ``relbench run
    --reuse`` took it from a release, or a bundle submitted it (its :data:`ORIGIN` is set)."""
    if ORIGIN not in df:
        return pd.Series(False, index=df.index)
    return df[ORIGIN].notna() & (df[ORIGIN].astype(str) != "")


def submitted(df: pd.DataFrame) -> pd.Series:
    """Per row, whether a contributor's bundle submitted it (``relbench leaderboard --include``)."""
    if ORIGIN not in df:
        return pd.Series(False, index=df.index)
    return df[ORIGIN].astype(str).str.startswith(SUBMITTED_PREFIX)


def sources(df: pd.DataFrame) -> pd.Series:
    """Per row, where it came from: :data:`COMPUTED_LOCALLY`, :data:`FROM_RELEASE` or :data:`SUBMITTED`."""
    taken, sent = taken_from_release(df), submitted(df)
    return pd.Series(COMPUTED_LOCALLY, index=df.index).mask(taken, FROM_RELEASE).mask(sent, SUBMITTED)


def origin_marks(df: pd.DataFrame, by: list[str]) -> dict[tuple, str]:
    """Where each group of rows (by the values of the columns ``by``, e.g. a
    combination's plugins) came from, on a page that shows rows of more than one source
    (computed here, taken from a release, submitted in a bundle): the source's mark
    (:data:`COMPUTED_LOCALLY`, :data:`FROM_RELEASE`, :data:`SUBMITTED`) when all its
    rows share it, else :data:`PARTLY_LOCALLY` when some were computed here and
    :data:`PARTLY_SUBMITTED` when none were. Empty when every row has one source: then
    there is nothing to tell apart."""
    source = sources(df)
    if source.nunique() < 2:
        return {}
    marks = {}
    for key, group in source.groupby([df[c] for c in by], sort=False, dropna=False):
        kinds = set(group)
        marks[key if isinstance(key, tuple) else (key,)] = (kinds.pop() if len(kinds) == 1 else PARTLY_LOCALLY
                                                            if COMPUTED_LOCALLY in kinds else PARTLY_SUBMITTED)
    return marks


def reuse_statement(df: pd.DataFrame) -> str:
    """The page's sentence on what was not computed here: how many of the units shown
    ``relbench run --reuse`` took from which release revision, how many a bundle
    submitted (with its revision and verification result), and how many were computed
    locally (empty when every row was computed here)."""
    taken = taken_from_release(df)
    if not taken.any() or "unit" not in df:
        return ""
    units = df["unit"].nunique()
    origins = df.loc[taken, ORIGIN].astype(str)
    parts = [_taken_part(origin, df.loc[origins.index[origins == origin]]) for origin in sorted(set(origins))]
    local = df.loc[~taken, "unit"].nunique()
    return f"Of the {units:,} units shown, {', '.join(parts)}, {local:,} computed locally. "


def _taken_part(origin: str, rows: pd.DataFrame) -> str:
    """The statement's part on the units of one ``origin`` (a release's or a bundle's)."""
    count = rows["unit"].nunique()
    if not origin.startswith(SUBMITTED_PREFIX):
        return (f"{count:,} from the release at revision `{origin.split('@', 1)[-1]}` (taken by `relbench run "
                f"--reuse`; their rows keep the git revision they were computed at)")
    bundle, _, revision = origin[len(SUBMITTED_PREFIX):].rpartition("@")
    verdicts = sorted(set(rows[VERIFIED].dropna().astype(str))) if VERIFIED in rows else []
    return (f"{count:,} submitted in `{bundle}` at revision `{revision}` (merged by `relbench leaderboard "
            f"--include`; {'; '.join(verdicts) or 'verification unknown'})")
