"""Markdown leaderboards, rendered from the results store alone.

One page per task (``<task>.md``) and an index (``README.md``). The core writes what
every page shares — the title, a three-line summary (what is measured, the headline,
what it means: :meth:`TaskKind.meaning`), the description, where the numbers came from (command,
revision, device, environment, the packages of every plugin involved), the claims of
the tasks file checked on the rows, the published numbers next to ours — and asks the
task's kind, built with the task's own parameters, for the body (:meth:`TaskKind.page`),
the index line (:meth:`TaskKind.headline`) and its ranking of combinations
(:meth:`TaskKind.ranking`), which the index compares across tasks
(:mod:`relbench.crosstask`), and the cells of the kind's section of the index
(:meth:`TaskKind.index_cells`, kept with the page; :meth:`TaskKind.index_section`), and
the sections that read other kinds' tasks (:meth:`TaskKind.companion_tasks`, whose matrix
cells are then kept with their pages; :meth:`TaskKind.cross_kind_section`);
``sources.md`` lists where data and models come from (:mod:`relbench.provenance`). Only
rows of the current tasks file's identities reach a page; nothing here recomputes a result.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: folders are not locked
    fcntl = None

import numpy as np
from tabulate import tabulate

from relbench import deferred
from relbench import __version__, crosstask
from relbench.cache import atomic_write_bytes
from relbench.errors import OutputNotWritable
from relbench.export import flatten, write_stacked_parquet
from relbench.identity import fingerprint
from relbench.interfaces import TaskKind
from relbench.names import inside
from relbench.page_pool import draw_pages
from relbench.pages import INDEX, Page, arrow, directions, fmt, listing, table
from relbench.progress import SMOKE
from relbench.protocol import describe
from relbench.tuning import rejoined_parameters
from relbench.provenance import KEYS, sources_page
from relbench.results import ResultStore
from relbench.reuse import reuse_statement
from relbench.rows import TASK_ERROR
from relbench.claims import cell_count, claims_section, filtered
from relbench.uncertainty import fmt_interval
from relbench.task_model import Task

pd = deferred.load("pandas")


#: the sentence every generated page carries (and by which a stale one is recognised)
GENERATED = "Generated from the results store by `relbench leaderboard`; do not edit by hand."


def _remove_stale_pages(out: Path, tasks: set[str]) -> None:
    """Delete pages (and their figures) that relbench generated for tasks the tasks file
    no longer has, so that no page shows a number the file does not produce. Files
    without the generated-page sentence are the user's and stay."""
    for path in out.glob("*.md"):
        if path.stem in tasks or path.name == "README.md":
            continue
        try:
            generated = GENERATED in path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if generated:
            path.unlink()
            shutil.rmtree(out / "figures" / path.stem, ignore_errors=True)


def _remove_stale_figures(page: Page) -> None:
    """Delete the files of a page's figure folder that its new drawing did not write (a
    heatmap of a combination that is no longer the best, a figure of a removed metric):
    the folder is relbench's, and a published figure must come from the current page."""
    folder = page.folder
    keep = {path.name for path in page.written if path.parent == folder}
    for path in folder.iterdir() if folder.is_dir() else ():
        if (path.is_file() or path.is_symlink()) and path.name not in keep:
            path.unlink()


def published_section(kind: TaskKind, df: pd.DataFrame, published: list[dict]) -> str:
    """A table of a paper's numbers (column ``paper``) next to ours (mean over seeds): an
    entry that pins one cell is compared with that cell, one that matches several with
    the mean over the cells the kind compares (for stitching: the stitched pairs). What
    differs from the paper's setting (an entry's ``differs``) is a numbered note below the
    table, the row carrying its number; entries that differ alike share one note."""
    rows, notes = [], []
    for entry in published:
        cell = {c: entry[c] for c in kind.columns if c in entry}
        d = filtered(df[(df["metric"] == entry["metric"]) & (df["status"] == "ok")], cell)
        if cell_count(kind, d) > 1:
            d = kind.claim_rows(d)
        per_seed = d.groupby("seed", dropna=False)["value"].mean()
        ours = per_seed.mean() if len(per_seed) else np.nan
        name = " · ".join(map(str, cell.values())) or "all"
        if entry.get("differs"):
            if entry["differs"] not in notes:
                notes.append(entry["differs"])
            name += f" [{notes.index(entry['differs']) + 1}]"
        rows.append([name, entry["metric"], fmt(entry["value"]),
                     fmt(ours, per_seed.std(ddof=0) if len(per_seed) > 1 else None),
                     fmt(ours - entry["value"]) if not math.isnan(ours) else "not run", entry.get("reference", "")])
    listed = "".join(f"{i}. {note.strip()}\n" for i, note in enumerate(notes, 1))
    return ("\n### Published numbers next to ours\n\n" +
            table(rows, headers=["cell", "metric", "paper", "relbench", "difference", "source"]) + "\n" +
            (f"\nWhat differs here from the paper's setting (the bracketed numbers above):\n\n{listed}"
             if notes else ""))


def _values(df: pd.DataFrame, column: str) -> list[str]:
    if column not in df:
        return []
    return sorted({str(v) for v in df[column].dropna() if str(v)})


def provenance(df: pd.DataFrame) -> str:
    """Where a page's numbers came from: commands, relbench version and revision,
    device, precision (:mod:`relbench.precision`), environment, date of the last run, seeds, how many units were
    taken from a release (:func:`relbench.reuse.reuse_statement`), and every plugin package."""
    runs = _values(df, "run")
    date = runs[-1][:8] if runs else "?"
    date = f"{date[:4]}-{date[4:6]}-{date[6:8]}" if len(date) == 8 else date
    git = ", ".join(_values(df, "git"))
    envs = _values(df, "environment")
    env = f" ({'; '.join(envs)})" if envs else ""
    precisions = _values(df, "precision") if "precision" in df else []
    at = f" at {', '.join(precisions)}" if precisions else ""
    seeds = sorted(int(s) for s in pd.unique(df["seed"].dropna()))
    packages = sorted({p for ps in df.get("packages", pd.Series(dtype=object)).dropna() for p in ps})
    return (f"Produced by `{'`, `'.join(_values(df, 'command'))}` with relbench {', '.join(_values(df, 'relbench'))}"
            f"{f' (git {git})' if git else ''} on {', '.join(_values(df, 'device')) or '?'}{at}{env}, last run {date}; "
            f"seeds {seeds}. {reuse_statement(df)}Only results of the current tasks file are shown. {GENERATED}\n\n"
            f"{listing('Plugins from', packages or ['?'])}\n")


def protocol_section(task: Task, df: pd.DataFrame) -> str:
    """The page's protocol paragraph (:func:`relbench.protocol.describe`) from the task's
    protocol and what its rows recorded: sizes and constants chosen on validation data."""
    if "extra" not in df:
        return describe(task.protocol, task.seeds, [], [])
    units = df.drop_duplicates("unit") if "unit" in df else df  # one record per unit, not per row
    extras = [e for e in units["extra"] if isinstance(e, dict)]
    samples = [e["samples"] for e in extras if isinstance(e.get("samples"), dict)]
    tuned = []
    for _, row in units[units["extra"].map(lambda e: isinstance(e, dict) and bool(e.get("tuned")))].iterrows():
        parameters = rejoined_parameters(row["extra"]["tuned"].get("parameters", {}))  # whole in stores of old reuses
        for name, entry in parameters.items():
            column = name.split(".", 1)[0]
            tuned.append((f"{column} {row.get(column, '?')}", {"parameters": {name: entry}}))
    return describe(task.protocol, task.seeds, samples, tuned)


#: beside the pages: per task, the digest of what its page was drawn from, the files it
#: wrote, its index line and its kind's index cells, so that an unchanged page is not drawn again
MANIFEST = ".pages.json"
#: the page listing where data and models come from (:mod:`relbench.provenance`)
SOURCES = "sources.md"
#: the manifest's entry for the index's critical-difference diagram (no task name starts with "_")
DIAGRAM = "_critical-difference"
#: the flat table of the results the pages show (:mod:`relbench.export`), and its manifest entry
RELEASE = "results.parquet"
RELEASE_ENTRY = "_release"
#: the manifest's entry of each task's companions (:meth:`TaskKind.companion_tasks`): the
#: index is drawn again when they change, though no page does (a kind's presentation
#: parameters, which name them, enter no page's digest)
COMPANIONS_ENTRY = "_companions"


def _digest(store: ResultStore, task: Task, units: list[str]) -> str:
    """What a task's page depends on: its current stored lines (id, run, time), what the
    tasks file says of it, and the renderer's version."""
    lines = store.read(task.name).units
    stored = sorted((uid, lines[uid].run, lines[uid].time) for uid in units if uid in lines)
    return fingerprint({"lines": stored, "kind": task.kind.identity(), "description": task.description,
                        "protocol": task.protocol.identity(), "seeds": task.seeds,
                        "claims": task.claims, "published": task.published, "relbench": __version__})


def suite_provenance(tasks: list[Task]) -> list[tuple[str, str, str, dict]]:
    """``(task, role, label, provenance)`` of every task's data set and encoders (each
    plugin built from its spec; building loads nothing)."""
    out = []
    for task in tasks:
        specs = [("data set", task.dataset.label, task.dataset)] + [("encoder", e.label, e) for e in task.encoders]
        for role, label, spec in specs:
            prov = spec.build().provenance() or {}
            out.append((task.name, role, label, {k: str(v) for k, v in prov.items() if k in KEYS and v}))
    return out


def how_to_cite(date: str | None) -> str:
    """The index's citation line: the relbench version and the date of the results."""
    if date is None:
        return f"No results yet (relbench {__version__}).\n"
    return (f"**How to cite.** These tables are *relbench {__version__}, results of {date}* (the newest result "
            f"shown; each page gives its own provenance). Cite relbench with its `CITATION.cff`, and the papers "
            f"whose methods and data a table measures (named on its page).\n")


def _cross_task(out: Path, ranks: dict, entry: Any, redraw: bool) -> dict:
    """The index's ranking across tasks (``section``, its text) and its critical-difference
    diagram (``link``; None where no pair of combinations can be separated with this many
    tasks, and then no figure is left in the index's folder), computed from the pages'
    rankings only when they (or :data:`crosstask.STATISTICS`) changed since the manifest's
    ``entry`` (``digest``), so that a run that changed no page runs no test and draws no
    figure (importing the statistics alone took a third of such a run); ``relbench
    leaderboard`` (``redraw``) recomputes both."""
    digest = fingerprint({"rankings": ranks, "statistics": crosstask.STATISTICS})
    same = not redraw and isinstance(entry, dict) and entry.get("digest") == digest
    drawn = same and bool(entry.get("link")) and all((out / entry["link"]).with_suffix(ext).is_file()
                                                     for ext in (".png", ".svg"))
    if same and "section" in entry and (drawn or not entry.get("link")):
        return entry
    result = crosstask.rank(ranks)
    link = None
    if result and result.separable:  # drawn again only when the rankings changed or its files are gone
        link = entry["link"] if drawn else Page(out, INDEX).save(crosstask.diagram(result), "critical-difference.png")
    else:
        _remove_stale_figures(Page(out, INDEX))
    return {"digest": digest, "link": link, "section": crosstask.section(result, link)}


def kind_sections(tasks: list[Task], entries: dict[str, dict]) -> list[str]:
    """Each task kind's sections of the index, the kinds in the order the tasks file
    first names them: its own (:meth:`TaskKind.index_section`), given the cells its
    tasks' pages recorded (``entries``: the manifest's entries by task; a task without
    cells is left out, a kind without any gets no call), then right after it its section
    across kinds (:meth:`TaskKind.cross_kind_section`), given also its tasks' companions."""
    cells_by_kind: dict[type, dict[str, list]] = {}
    for task in tasks:
        cells = entries[task.name].get("cells")
        if cells:
            cells_by_kind.setdefault(task.kind.cls, {})[task.name] = cells
    sections = []
    for kind, cells in cells_by_kind.items():
        sections += [kind.index_section(cells), kind.cross_kind_section(cells, companions_of(tasks, entries, kind))]
    return [section for section in sections if section]


def companion_names(tasks: list[Task]) -> set[str]:
    """The tasks that some task of ``tasks`` names as its companion
    (:meth:`TaskKind.companion_tasks`): their pages also record their matrix cells."""
    return {name for task in tasks for name in task.kind.build().companion_tasks()}


def companions_of(tasks: list[Task], entries: dict[str, dict], kind: type) -> dict[str, dict[str, dict]]:
    """Per task of ``kind``, the companions it names that ``tasks`` has, each with its kind,
    matrix axes and the index and matrix cells its page recorded (``entries``)."""
    by_name = {task.name: task for task in tasks}
    out: dict[str, dict[str, dict]] = {}
    for task in (t for t in tasks if t.kind.cls is kind):
        named = [by_name[name] for name in task.kind.build().companion_tasks() if name in by_name]
        if named:
            out[task.name] = {c.name: {"kind": c.kind.name, "axes": list(c.kind.cls.matrix_axes),
                                       "cells": entries[c.name].get("cells"),
                                       "matrix": entries[c.name].get("matrix")} for c in named}
    return out


def _write_release(store: ResultStore, path: Path, tasks: list[Task], current: dict[str, list[str]],
                   kept: set[str]) -> None:
    """The rows of every task's page as one flat parquet table, written a task at a time
    (:func:`~relbench.export.write_stacked_parquet`: memory bounded by one task's rows),
    then moved into place: a task in ``kept`` (its page was kept, :class:`Holding`) keeps
    the rows the existing table holds for it, the others are read from the store."""
    previous = path if kept and path.is_file() else None

    def frames() -> Iterator[pd.DataFrame]:
        for task in tasks:
            if task.name in kept:
                if previous is not None:
                    yield pd.read_parquet(previous, filters=[("task", "==", task.name)])
            else:
                yield flatten(store.load(task.name, units=current.get(task.name, [])))

    partial = path.with_name(f".{path.name}.partial")
    write_stacked_parquet(frames(), partial)
    partial.replace(path)


def _read_manifest(out: Path) -> dict:
    try:
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) else {}


def task_page(out: Path, task: Task, store: ResultStore | None = None) -> Page:
    """The :class:`Page` a task's kind draws into under ``out``, with the task's metric
    plugins to rescore per-sample predictions (what every computation of the page's
    numbers must be given, so that they are the page's)."""
    return Page(out, task.name, store, metrics={m.label: m.build() for m in task.metrics})


def _draw(store: ResultStore, out: Path, task: Task, units: list[str], held: Holding, matrix: bool = False) -> dict:
    """Write one task's page; return its manifest entry (files, index line, ranking,
    the cells of its kind's index section, with ``matrix`` (the task is another's
    companion) its matrix cells, and :meth:`Holding.record`: what the page was drawn
    from)."""
    df = store.load(task.name, units=units)
    kind = task.kind.build()
    page = task_page(out, task, store)
    path = inside(out, task.name, ".md")
    if df.empty:
        atomic_write_bytes(path, (f"# {task.name}\n\n{summary(task, kind, None, 'neutral', empty=True)}\n"
                                  f"{task.description}\n\n_No results of the current tasks file yet: run "
                                  f"`relbench run` on it. {GENERATED}_\n").encode())
        _remove_stale_figures(page)
        return {"files": [path.name], "index": None, "ranking": None, "cells": None, **held.record(store, df, out)}
    try:
        body = kind.page(df, page)
    except OSError:  # e.g. a full disk: a figure half written is no figure
        for figure in page.written:
            figure.unlink(missing_ok=True)
        raise
    if task.claims:
        body = claims_section(kind, df, task.claims, page.metrics) + "\n" + body
    if task.published:
        body += published_section(kind, df, task.published)
    headline = page.headline or kind.headline(df)
    direction = directions(df).get(headline["metric"], "neutral") if headline else "neutral"
    head = (f"# {task.name}\n\n" + held.banner() + summary(task, kind, headline, direction) + "\n"
            + (f"{task.description}\n\n" if task.description else "") + provenance(df) + "\n"
            + protocol_section(task, df))
    atomic_write_bytes(path, (head + "\n" + body).encode())
    _remove_stale_figures(page)
    if headline:
        ref = headline.get("reference", np.nan)
        line = [f"[{task.name}]({task.name}.md)", kind.name, headline["best"], headline["metric"],
                headline_score(headline), fmt(ref), fmt(reference_gap(headline["score"], ref, direction))]
    else:
        line = [f"[{task.name}]({task.name}.md)", kind.name, "see page", "", "", "", ""]
    files = [path.name, *(str(f.relative_to(out)) for f in page.written)]
    matrices = {"matrix": kind.matrix_cells(df, page)} if matrix else {}
    return {"files": files, "index": line, "ranking": kind.ranking(df) or None, "cells": kind.index_cells(df, page),
            **matrices, **held.record(store, df, out)}


def headline_score(headline: dict) -> str:
    """A headline's best score as the index shows it: with its 95 % interval when the
    kind computed one, otherwise ± std over seeds."""
    interval = headline.get("interval") or (np.nan, np.nan)
    if np.isfinite(interval).all():
        return f"{fmt(headline['score'])} {fmt_interval(*interval)}"
    return fmt(headline["score"], headline.get("std"))


def summary(task: Task, kind: TaskKind, headline: dict | None, direction: str, empty: bool = False) -> str:
    """The three lines a task's page opens with: what it measures (the first sentence of
    the task's description), its headline (the best combination and score, as the index
    line has it) and what that means in one plain sentence (:meth:`TaskKind.meaning`);
    ``empty``: the store holds no result of the task yet."""
    measured = first_sentence(task.description) or f"The {kind.name} protocol on {task.dataset.label}."
    if empty:
        return (f"- **Measures:** {measured}\n- **Best:** no results yet.\n"
                f"- **Means:** Nothing is measured yet: run `relbench run` on the tasks file.\n")
    best = "none named by this task's kind (see the tables below)."
    if headline:
        reference = headline.get("reference", np.nan)
        versus = f" (reference {fmt(reference)})" if reference is not None and np.isfinite(reference) else ""
        best = f"{headline['best']}: {arrow(headline['metric'], direction)} {headline_score(headline)}{versus}"
    return f"- **Measures:** {measured}\n- **Best:** {best}\n- **Means:** {kind.meaning(headline, direction)}\n"


def first_sentence(text: str) -> str:
    """The first sentence of a task's description: up to a ``.``, ``!`` or ``?`` followed
    by a space and a capital letter (so that "et al. 2023" does not end it); the whole
    text when it is one sentence. The page shows the whole description below the summary."""
    return re.split(r"(?<=[.!?])\s+(?=[A-Z])", (text or "").strip(), maxsplit=1)[0]


def reference_gap(score: float, reference: float, direction: str) -> float:
    """How far a task's best score falls short of its reference in the metric's better
    ``direction``: positive when the reference is better, negative when the best score
    beats it (NaN without a reference)."""
    if math.isnan(reference):
        return np.nan
    return score - reference if direction == "lower" else reference - score


@dataclass(frozen=True)
class Holding:
    """How much of a task's current plan a results store holds: ``stored`` of its
    ``units`` units (a failed unit counts: it is a result the page shows), and the time
    of the newest.

    The rule that keeps published pages safe: a page drawn from a complete store is
    replaced only by a drawing from a complete store. A run that is interrupted, or a
    fresh clone whose store is empty, leaves such a page, its figures and its rows in
    ``results.parquet`` as they are; a task that has no complete page yet gets a page
    marked partial."""

    stored: int
    units: int
    newest: float | None
    #: the digest of the plan's unit ids (what the tasks file asks for)
    plan: str

    @classmethod
    def of(cls, store: ResultStore, task: str, units: list[str]) -> Holding:
        """What ``store`` holds of ``units`` (the task's current plan)."""
        lines = store.read(task).units
        times = [lines[uid].time for uid in units if uid in lines]
        return cls(len(times), len(units), max(times) if times else None, plan_digest(units))

    @property
    def complete(self) -> bool:
        """Whether every unit of the plan is stored."""
        return self.stored == self.units

    def banner(self) -> str:
        """The warning a partial page opens with (nothing for a complete one)."""
        if self.complete:
            return ""
        return (f"> **Partial results:** the store holds {self.stored} of this task's {self.units} units; every "
                f"number below will change when the rest are computed (run the same command again). Not for "
                f"citation.\n\n")

    def record(self, store: ResultStore, df: pd.DataFrame, out: Path) -> dict:
        """The manifest's account of a drawing into ``out``: complete or not, from which
        store (relative to the folder above ``out`` when inside it) and revisions, and the
        newest result's time."""
        root = Path(os.path.abspath(store.root))
        base = Path(os.path.abspath(out)).parent
        where = root.relative_to(base).as_posix() if root.is_relative_to(base) else str(root)
        return {"complete": self.complete, "stored": self.stored, "units": self.units, "store": where,
                "revisions": _values(df, "git"), "newest": self.newest, "plan": self.plan}


def published(entry: Any) -> bool:
    """Whether a manifest entry is a page drawn from a complete store (entries written
    before completeness was recorded count as complete when they hold results)."""
    return isinstance(entry, dict) and bool(entry.get("complete", entry.get("index") is not None))


def plan_digest(units: list[str]) -> str:
    """The digest of a task's plan: its unit ids, whatever their order."""
    return fingerprint({"units": sorted(units)})


def shown(entry: dict, plan: list[str], out: Path, task: str) -> bool:
    """Whether a page shows the units of ``plan`` (the tasks file's current plan of
    ``task``): an edited tasks file makes a page stale even when no store holds the new
    plan yet. Pages drawn before plans were recorded are checked against the units of
    ``results.parquet``."""
    if "plan" in entry:
        return entry["plan"] == plan_digest(plan)
    try:
        rows = pd.read_parquet(out / RELEASE, columns=["task", "unit"])
    except (OSError, ValueError, KeyError, ImportError):
        return False
    return set(rows.loc[rows["task"] == task, "unit"]) == set(plan)


def origin(entry: dict) -> str:
    """The index's *drawn from* cell: complete or partial, and the revisions of the rows."""
    revisions = ", ".join(entry.get("revisions") or []) or "?"
    if "complete" not in entry:
        return "drawn before completeness was recorded"
    where = f"`{entry.get('store', '?')}`, git {revisions}"
    if entry["complete"]:
        return f"complete ({entry.get('units', '?')} units) in {where}"
    return f"**partial** ({entry.get('stored', '?')} of {entry.get('units', '?')} units) in {where}"


#: the index's opening for pages that are not a release (``relbench run``'s own folder)
NOT_A_RELEASE = ("**Not a release: not for citation.** These pages show the results store of a local run "
                 "(`relbench run`); a smoke or partial suite's numbers are not the benchmark's. The citable "
                 "tables are those drawn by `relbench publish` from a complete store at a clean revision.\n")


def release_section(release: dict) -> str:
    """The index's statement of where a release comes from (:mod:`relbench.publish`)."""
    return (f"**Release.** Drawn by `relbench publish` at git revision `{release['revision']}` (clean tree) from "
            f"`{release['tasks']}` (sha256 `{release['tasks_sha256'][:16]}`), with every unit of every task "
            f"stored; the rows come from revisions {', '.join(f'`{r}`' for r in release['row_revisions'])}.\n")


def render(store: ResultStore, out: Path, tasks: list[Task], current: dict[str, list[str]],
           redraw: bool = False, release: dict | None = None, smoke: bool = False, jobs: int = 1) -> list[Path]:
    """Write one page per task and the index; return the pages drawn (the index first
    when it was written).

    ``current`` maps a task to the unit ids of the current tasks file (its plan, in
    plan order: rows reach the pages in that order); stored lines of other identities
    are history and never shown. Unless ``redraw``, a page whose inputs
    (:func:`_digest`) and files are unchanged since it was drawn is not drawn again
    (``relbench leaderboard`` redraws every page, e.g. after the page code changed). A
    page drawn from a complete store is never replaced by a partial one
    (:class:`Holding`); a rendering that draws no page writes nothing. ``release``: the
    provenance of a release (:mod:`relbench.publish`); without it the index says the
    pages are not one (``smoke``: that they are a smoke suite's). ``jobs``: pages drawn at
    once, each in a worker process (:mod:`relbench.page_pool`). The folder is locked while
    it is written, so runs that share it write it one after the other."""
    try:
        with folder_lock(out):
            return _render(store, out, tasks, current, redraw, release, smoke, jobs)
    except OSError as exc:
        raise OutputNotWritable(
            f"cannot write the leaderboards folder {out} ({exc.strerror or exc}); the results store is untouched and "
            f"no half-written page or figure is left. Free space or choose another folder (--leaderboards DIR), "
            f"then run `relbench leaderboard`.") from None


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``folder`` itself (created if missing) for the
    block: no lock file is left in a published folder, and the system releases the lock
    when its holder ends, however it ends. Where ``fcntl`` is missing nothing is locked."""
    folder.mkdir(parents=True, exist_ok=True)
    if fcntl is None:
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _render(store: ResultStore, out: Path, tasks: list[Task], current: dict[str, list[str]],
            redraw: bool, release: dict | None, smoke: bool, jobs: int) -> list[Path]:
    _remove_stale_pages(out, {task.name for task in tasks})
    manifest = _read_manifest(out)
    entries, written, kept, work, digests = {}, [], set(), [], {}
    companions = companion_names(tasks)
    for task in tasks:
        plan = list(current.get(task.name, ()))
        units = [*plan, TASK_ERROR]
        held = Holding.of(store, task.name, plan)
        digest = _digest(store, task, units)
        entry = manifest.get(task.name)
        files_there = isinstance(entry, dict) and all((out / f).is_file() for f in entry.get("files", []))
        if files_there and not held.complete and published(entry) and shown(entry, plan, out, task.name):
            kept.add(task.name)  # a complete page of this plan stays until a complete store replaces it
        elif redraw or not (files_there and entry.get("digest") == digest and "cells" in entry
                            and (task.name not in companions or "matrix" in entry)):
            work.append((store, out, task, units, held, task.name in companions))
            digests[task.name] = digest
        entries[task.name] = entry
    for (_, _, task, *_), drawn in zip(work, draw_pages(_draw, work, jobs)):
        entries[task.name] = {"digest": digests[task.name], **drawn}
        written.append(out / f"{task.name}.md")
    index = out / "README.md"
    before = {name for name in manifest if not name.startswith("_")}
    named = {task.name: list(task.kind.build().companion_tasks()) for task in tasks}
    if not (written or release) and before == set(entries) and index.is_file() \
            and (out / MANIFEST).is_file() and manifest.get(COMPANIONS_ENTRY) == named:
        return []  # nothing drawn: the folder stays as it is, byte for byte
    index_rows = [[*e["index"], origin(e)] for e in entries.values() if e.get("index")]
    ranks = {name: e["ranking"] for name, e in entries.items() if e.get("ranking")}
    newest = [e["newest"] for e in entries.values() if isinstance(e.get("newest"), (int, float))]
    date = time.strftime("%Y-%m-%d", time.gmtime(max(newest))) if newest else None
    lines = ["# relbench leaderboards\n",
             "Generated by `relbench leaderboard` from the results store (only results of the current tasks "
             "file); do not edit by hand. Each task's page says how its scores are aggregated.\n",
             (how_to_cite(date) + "\n" + release_section(release)) if release else
             (f"**{SMOKE}**\n\n" if smoke else "") + NOT_A_RELEASE,
             f"Where every data set and model comes from, its licence and how to cite it: "
             f"[{SOURCES}]({SOURCES}).\n",
             *kind_sections(tasks, entries),
             "## Tasks\n",
             "*best score*: with its 95 % interval where the task's page computes one (otherwise ± std over "
             "seeds); the page shows which other combinations are indistinguishable from it. Intervals: Student-t "
             "intervals of the mean over seeds (*t-interval*: n − 1 degrees of freedom for n seeds; each seed's "
             "score, on its own test samples, is one independent draw; a bootstrap over five seeds under-covers), "
             "and with one seed a bootstrap over its test samples, conditional on that seed. *reference*: the "
             "score the task's kind compares its best with (its page's **Means** line says what it is; n/a where "
             "the kind names none); *gap*: the reference minus the best score, signed so that a positive gap is how "
             "far the best score falls short of the reference in the metric's better direction and a negative gap "
             "is how far it beats it (n/a without a reference). *drawn from*: whether the store "
             "held every unit of the task's plan when its page was drawn (a complete page is replaced only by "
             "another complete one), and the git revisions of its rows.\n",
             tabulate(index_rows, headers=["task", "kind", "best combination", "metric", "best score",
                                           "reference", "gap", "drawn from"], tablefmt="pipe",
                      disable_numparse=True)]
    if ranks:
        entries[DIAGRAM] = _cross_task(out, ranks, manifest.get(DIAGRAM), redraw)
        lines.append(entries[DIAGRAM]["section"])
    digests = {name: entry["digest"] for name, entry in entries.items() if not name.startswith("_")}
    if redraw or manifest.get(RELEASE_ENTRY) != digests or not (out / RELEASE).is_file():
        _write_release(store, out / RELEASE, tasks, current, kept)
    entries[RELEASE_ENTRY] = digests
    entries[COMPANIONS_ENTRY] = named
    lines.append(f"\n## The results behind these pages\n\n[{RELEASE}]({RELEASE}): every result row the pages "
                 f"show, one per unit and metric, flat (one column per parameter), with its provenance (command, "
                 f"git revision, packages, device, environment, time) and each cell's per-sample predictions "
                 f"(`per_sample.*`, base64; `relbench.samples.read_predictions` decodes them), so an interval or a "
                 f"new metric can be recomputed without running anything. `pandas.read_parquet` reads it.\n")
    atomic_write_bytes(index, ("\n".join(lines) + "\n").encode())
    atomic_write_bytes(out / SOURCES, sources_page(suite_provenance(tasks)).encode())
    atomic_write_bytes(out / MANIFEST, json.dumps(entries, indent=1, default=str).encode())
    return [index, *written]
