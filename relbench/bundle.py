"""Contributor submission bundles: ``relbench submit``, ``relbench verify BUNDLE`` and
``relbench leaderboard --include BUNDLE``.

A bundle is one zip file (the standard library's :mod:`zipfile`) of two members:

- ``rows.parquet``: the contributor's result rows of the tasks file's current plan, flat
  as a release's ``results.parquet`` (:func:`relbench.export.flatten`; per-sample
  predictions included), only those computed locally: rows ``relbench run --reuse``
  took from a release are the release's, audited by ``relbench verify tasks.yaml``, and
  are left out (the manifest counts them);
- ``manifest.json``: the format version (:data:`FORMAT`), relbench's version, the tasks
  file's name, sha256 and text (so that a verifier plans the same units), the plugin
  packages and versions the rows name, their git revisions, the unit count per task,
  the units reused per task, and the sha256 of every other member.

:func:`read_bundle` refuses, with a :class:`UserError` naming the file and what to do, a
file that is not a whole zip (damaged), a member whose digest is not the manifest's
(damaged or edited), a manifest of another format, an unsafe member name (an absolute
path, ``..``), a member larger than :data:`MEMBER_LIMIT` (checked in the zip's directory
and again while reading, so memory stays bounded), and rows that do not match the
manifest (tasks, unit counts, revisions, the tasks text's digest). Nothing is extracted:
members are read into memory. :func:`check_plan` refuses rows of units outside a plan.

``relbench verify BUNDLE`` (:func:`verify_bundle`) audits the rows as a release's are
(:func:`relbench.verify.audit`), planned from the tasks text the bundle holds (written
into a temporary folder that is removed), and writes one file, the receipt
``BUNDLE.verified.json`` beside the bundle (:func:`receipt_path`). A forged bundle, its
rows edited and its digests recomputed, passes :func:`read_bundle` and is caught there:
the recomputed units disagree. ``relbench leaderboard --include`` (:func:`included`)
takes a bundle only with a receipt of this very bundle (its sha256) whose verdict is
:data:`AGREES`.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from relbench import deferred
from relbench import __version__
from relbench.errors import UserError
from relbench.result_index import StoredUnit, TaskLines
from relbench.results import ResultStore
from relbench.reuse import ORIGIN, SUBMITTED_PREFIX, VERIFIED, by_unit, nested, stored_rows, taken_from_release

pd = deferred.load("pandas")

#: the bundle format this relbench writes and reads
FORMAT = 1
#: the members of a bundle
MANIFEST, ROWS = "manifest.json", "rows.parquet"
#: the most bytes one member may hold once uncompressed
MEMBER_LIMIT = 512 * 2**20
#: the suffix of a bundle's file, and of its verification receipt beside it
SUFFIX, RECEIPT_SUFFIX = ".zip", ".verified.json"
#: the verdicts of a receipt
AGREES, DISAGREES = "agrees", "disagrees"
#: the columns every bundle's rows have
REQUIRED = ("task", "unit", "metric", "value", "status", "run", "git")


def sha256_bytes(data: bytes) -> str:
    """The hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def file_digest(path: Path) -> str:
    """The hex sha256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


# ----------------------------------------------------------------------------- writing


def submitted_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows a contributor submits: those computed locally (no :data:`ORIGIN`: not
    taken from a release, nor from another bundle)."""
    return rows[~taken_from_release(rows)].drop(columns=[ORIGIN], errors="ignore").reset_index(drop=True)


def clean_revisions(rows: pd.DataFrame, store: Path) -> list[str]:
    """The sorted git revisions ``rows`` name; :class:`UserError` when one is unknown or
    names a checkout with uncommitted changes (a verifier could not check out that code)."""
    revisions = sorted({str(r) if isinstance(r, str) else "" for r in rows["git"]})
    dirty = [r or "no revision" for r in revisions if not r or r.endswith("-dirty")]
    if dirty:
        raise UserError(f"rows of {store} were computed from a checkout with uncommitted changes or none "
                        f"({', '.join(dirty)}); a bundle is recomputed from committed code. Commit your plugin, run "
                        f"the tasks again into a fresh store (--output DIR), then submit.")
    return revisions


def manifest_of(rows: pd.DataFrame, flat_rows: bytes, tasks_file: Path, reused: dict[str, int]) -> dict:
    """The manifest of a bundle holding ``rows`` (written as ``flat_rows``) of the plan of
    ``tasks_file``; ``reused``: per task, the units taken from a release and left out."""
    from relbench.rows import packages

    text = tasks_file.read_text(encoding="utf-8")
    return {"format": FORMAT, "relbench": __version__,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "tasks": {"name": tasks_file.name, "sha256": sha256_bytes(text.encode("utf-8")), "text": text},
            "packages": packages(rows["inputs"].tolist()) if "inputs" in rows else [],
            "revisions": sorted(set(rows["git"].astype(str))),
            "units": {str(t): int(n) for t, n in rows.groupby("task")["unit"].nunique().items()},
            "reused": {t: n for t, n in sorted(reused.items()) if n},
            "members": {ROWS: sha256_bytes(flat_rows)}}


def flat_parquet(rows: pd.DataFrame) -> bytes:
    """``rows`` flat (:func:`relbench.export.flatten`) as parquet bytes, as
    :func:`relbench.export.write` writes a release's table."""
    from relbench.export import write

    with tempfile.TemporaryDirectory(prefix="relbench-submit-") as folder:
        return write(rows, Path(folder) / ROWS, "parquet").read_bytes()


def write_bundle(path: Path, members: dict[str, bytes]) -> Path:
    """Write ``members`` (name → bytes) as the zip ``path``: whole into a hidden file
    beside it, then moved into place, so that a bundle is never half written."""
    partial = path.with_name(f".{path.name}.partial")
    try:
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name, data in members.items():
                archive.writestr(name, data)
        partial.replace(path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise UserError(f"cannot write the bundle {path} ({exc.strerror or exc}); choose another --to.") from None
    return path


def submit(task_runs: list, store, tasks_file: Path, to: Path) -> dict:
    """Write the bundle ``to`` of the locally computed rows ``store`` holds of the
    current plans ``task_runs`` of ``tasks_file``; return its manifest. :class:`UserError`
    when there is nothing to submit, a row's revision is not clean, or the tasks file
    includes others (the bundle holds one tasks file's text)."""
    import yaml

    if to.suffix != SUFFIX:
        raise UserError(f"{to}: a bundle is a {SUFFIX} file; pass e.g. `--to submission{SUFFIX}`.")
    raw = yaml.safe_load(tasks_file.read_text(encoding="utf-8"))
    if isinstance(raw, dict) and raw.get("include"):
        raise UserError(f"{tasks_file} includes other tasks files; a bundle holds one tasks file's text. Submit a "
                        f"tasks file without `include:` (copy the included tasks into it).")
    frames, reused = [], {}
    for task_run in task_runs:
        rows = store.load(task_run.task.name, units=[u.id for u in task_run.plan().units])
        if rows.empty:
            continue
        taken = taken_from_release(rows)
        reused[task_run.task.name] = int(rows.loc[taken, "unit"].nunique())
        frames.append(submitted_rows(rows))
    frames = [f for f in frames if not f.empty]
    if not frames:
        raise UserError(f"nothing to submit: {store.root} holds no unit of the plan of {tasks_file} computed "
                        f"locally (units taken from a release by `--reuse` are the release's). Run your plugin's "
                        f"units with `relbench run {tasks_file}` first.")
    rows = pd.concat(frames, ignore_index=True)
    clean_revisions(rows, store.root)
    flat = flat_parquet(rows)
    manifest = manifest_of(rows, flat, tasks_file, reused)
    write_bundle(to, {MANIFEST: json.dumps(manifest, indent=1).encode("utf-8"), ROWS: flat})
    return manifest


# ----------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Bundle:
    """A bundle read and checked by :func:`read_bundle`: its file, the file's sha256,
    the manifest and the rows (flat, as a release's)."""

    path: Path
    sha256: str
    manifest: dict
    rows: pd.DataFrame

    @property
    def tasks_text(self) -> str:
        """The text of the tasks file the rows were computed from."""
        return self.manifest["tasks"]["text"]

    @property
    def origin(self) -> str:
        """The :data:`~relbench.reuse.ORIGIN` its rows carry on the pages: ``submitted:<name>@<revisions>``."""
        return f"{SUBMITTED_PREFIX}{self.path.name}@{','.join(self.manifest['revisions'])}"


def _refuse(path: Path, problem: str, fix: str = "ask the contributor for a fresh bundle (`relbench submit`)"
            ) -> UserError:
    return UserError(f"{path}: {problem}; {fix}.")


def _safe_name(name: str) -> bool:
    """Whether a member name stays inside any folder it could be extracted into."""
    posix = PurePosixPath(name)
    return bool(name) and "\\" not in name and not posix.is_absolute() and ".." not in posix.parts \
        and ":" not in posix.parts[0]


def _member(archive: zipfile.ZipFile, name: str, path: Path) -> bytes:
    """A member's bytes, at most :data:`MEMBER_LIMIT` of them whatever the directory says."""
    with archive.open(name) as fh:
        data = fh.read(MEMBER_LIMIT + 1)
    if len(data) > MEMBER_LIMIT:
        raise _refuse(path, f"member {name} holds more than {MEMBER_LIMIT:,} bytes")
    return data


def _members(path: Path) -> dict[str, bytes]:
    """Every member of the zip ``path``, checked for safe names and sizes before any is read."""
    if not path.is_file():
        raise UserError(f"{path}: no such bundle; pass the {SUFFIX} file `relbench submit` wrote.")
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            unsafe = [i.filename for i in infos if not _safe_name(i.filename)]
            if unsafe:
                raise _refuse(path, f"unsafe member names {', '.join(map(repr, unsafe[:3]))} (a forged bundle)")
            large = [i.filename for i in infos if i.file_size > MEMBER_LIMIT]
            if large:
                raise _refuse(path, f"member {large[0]} holds more than {MEMBER_LIMIT:,} bytes")
            if len({i.filename for i in infos}) != len(infos):
                raise _refuse(path, "a member name occurs twice (an edited bundle)")
            return {i.filename: _member(archive, i.filename, path) for i in infos}
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
        raise _refuse(path, f"not a whole bundle, damaged or cut short ({exc})") from None


def _manifest(path: Path, members: dict[str, bytes]) -> dict:
    """The checked manifest: JSON of a known format, listing every other member with its sha256."""
    try:
        manifest = json.loads(members[MANIFEST].decode("utf-8"))
    except KeyError:
        raise _refuse(path, f"no {MANIFEST} (not a bundle of `relbench submit`)") from None
    except ValueError:
        raise _refuse(path, f"{MANIFEST} is not JSON (damaged or edited)") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        version = manifest.get("format") if isinstance(manifest, dict) else None
        raise _refuse(path, f"bundle format {version!r}, this relbench reads format {FORMAT}",
                      "write it again with this relbench's `relbench submit`, or verify it with the relbench that "
                      "wrote it")
    listed = manifest.get("members")
    if not isinstance(listed, dict) or set(listed) != set(members) - {MANIFEST}:
        raise _refuse(path, f"its members ({', '.join(sorted(members))}) are not the ones its manifest lists "
                            f"(damaged or edited)")
    for name, digest in listed.items():
        if sha256_bytes(members[name]) != digest:
            raise _refuse(path, f"member {name} does not have the sha256 its manifest states (damaged or edited "
                                f"after `relbench submit`)")
    return manifest


def _check_rows(path: Path, manifest: dict, rows: pd.DataFrame) -> None:
    """Refuse rows that are not the ones the manifest describes (a mismatched bundle)."""
    lacking = [c for c in REQUIRED if c not in rows]
    if lacking:
        raise _refuse(path, f"its rows have no column {', '.join(lacking)} (not rows of `relbench submit`)")
    tasks = manifest.get("tasks") if isinstance(manifest.get("tasks"), dict) else {}
    text = tasks.get("text")
    if not isinstance(text, str) or sha256_bytes(text.encode("utf-8")) != tasks.get("sha256"):
        raise _refuse(path, "the tasks file text it holds does not have the sha256 its manifest states (mismatched)")
    units = {str(t): int(n) for t, n in rows.groupby("task")["unit"].nunique().items()}
    if units != manifest.get("units"):
        raise _refuse(path, f"its rows hold units {units}, its manifest states {manifest.get('units')} (mismatched)")
    if sorted(set(rows["git"].astype(str))) != manifest.get("revisions"):
        raise _refuse(path, "its rows name other git revisions than its manifest (mismatched)")


def read_bundle(path: Path) -> Bundle:
    """The bundle ``path``, read in memory and checked (see the module docstring);
    :class:`UserError` naming the file and the fix when it is damaged, edited, of another
    format or mismatched."""
    path = Path(path)
    members = _members(path)
    manifest = _manifest(path, members)
    if ROWS not in members:
        raise _refuse(path, f"no {ROWS} (not a bundle of `relbench submit`)")
    try:
        rows = pd.read_parquet(io.BytesIO(members[ROWS]))
    except (OSError, ValueError) as exc:
        raise _refuse(path, f"{ROWS} is not a parquet table ({exc})") from None
    _check_rows(path, manifest, rows)
    return Bundle(path, file_digest(path), manifest, rows)


def check_plan(bundle: Bundle, task_runs: list, against: str) -> None:
    """Refuse a bundle whose rows are not all of planned units of ``task_runs`` (the plan
    of the tasks file ``against`` names): it was computed from other inputs."""
    planned = {tr.task.name: {u.id for u in tr.plan().units} for tr in task_runs}
    stray = {(t, u) for t, u in zip(bundle.rows["task"], bundle.rows["unit"]) if u not in planned.get(t, ())}
    if stray:
        tasks = sorted({t for t, _ in stray})
        raise _refuse(bundle.path, f"{len(stray)} of its units ({', '.join(tasks)}) are not in the plan of {against} "
                                   f"(the bundle was computed from another tasks file, sha256 "
                                   f"{bundle.manifest['tasks']['sha256'][:16]}, or other inputs)",
                      "pass the tasks file the bundle was made from (its text is in the bundle's manifest.json)")


# ----------------------------------------------------------------------------- verifying


def receipt_path(path: Path) -> Path:
    """Where ``relbench verify BUNDLE`` writes its receipt: ``BUNDLE.verified.json`` beside it."""
    return path.with_name(path.name + RECEIPT_SUFFIX)


def verify_bundle(path: Path, size: int, seed: int, registry, quiet: bool = False) -> bool:
    """Audit the bundle ``path`` (:func:`relbench.verify.audit`): its rows' integrity
    (:func:`relbench.verify.submission_integrity`) and ``size`` of its units drawn with
    ``seed`` recomputed, planned from the tasks text it holds; write the receipt
    (:func:`receipt_path`, the only file written); return whether it agrees."""
    from relbench.results import environment
    from relbench.verify import SUBMISSION_CHECKS, audit, submission_integrity, unit_count

    bundle = read_bundle(path)

    def findings(task_runs: list) -> list[str]:
        check_plan(bundle, task_runs, "the tasks file it holds")
        return submission_integrity(task_runs, bundle.rows)

    with tempfile.TemporaryDirectory(prefix="relbench-bundle-") as folder:
        tasks = Path(folder) / "tasks.yaml"
        tasks.write_text(bundle.tasks_text, encoding="utf-8")
        result = audit(tasks, bundle.rows, path, size, seed, registry, quiet, findings, SUBMISSION_CHECKS)
    receipt = {"format": FORMAT, "bundle": path.name, "bundle_sha256": bundle.sha256, "sample": size, "seed": seed,
               "units_recomputed": unit_count(result.table), "units_agree": result.units(True),
               "units_disagree": result.units(False), "findings": result.findings,
               "verdict": AGREES if result.holds else DISAGREES, "relbench": __version__,
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "machine": environment()}
    write_receipt(receipt_path(path), receipt)
    print(f"\nverdict: the bundle {receipt['verdict']} ({receipt['units_agree']} of {receipt['units_recomputed']} "
          f"recomputed units agree, {len(result.findings)} findings); wrote the receipt {receipt_path(path)}")
    return result.holds


def write_receipt(path: Path, receipt: dict) -> None:
    """Write ``receipt`` as JSON to ``path``, whole or not at all."""
    from relbench.cache import atomic_write_bytes

    try:
        atomic_write_bytes(path, json.dumps(receipt, indent=1).encode("utf-8"))
    except OSError as exc:
        raise UserError(f"cannot write the receipt {path} ({exc.strerror or exc}); verify a bundle in a folder you "
                        f"can write.") from None


# ----------------------------------------------------------------------------- including


class WithSubmitted(ResultStore):
    """The results store at ``root`` as the pages read it, with the lines of submitted
    units (task → unit id → line, :func:`submitted_lines`) the store does not hold shown
    beside its own. Read only: ``relbench leaderboard --include`` writes no line."""

    def __init__(self, root: Path, submitted: dict[str, dict[str, dict]]):
        super().__init__(root)
        self.submitted = submitted

    def read(self, task: str) -> TaskLines:
        """The store's lines of ``task`` and the submitted ones (which lie in no file)."""
        lines = TaskLines()
        for entry in super().read(task).units.values():
            lines.add(entry)
        for line in self.submitted.get(task, {}).values():
            lines.add(StoredUnit.of(line, -1, 0))
        return lines

    def tasks(self) -> list[str]:
        """The tasks with a results file or submitted units."""
        return sorted({*super().tasks(), *(t for t, units in self.submitted.items() if units)})

    def load(self, task: str | None = None, units=None, all_runs: bool = False) -> pd.DataFrame:
        """The store's rows (:meth:`ResultStore.load`) and the submitted units' rows, in
        the order of ``units`` when it is a list or tuple (a task's plan)."""
        stored = super().load(task, units, all_runs)
        extra = [{**row, "unit": line["unit"], "run": line["run"], "inputs": line["inputs"]}
                 for name in ([task] if task else list(self.submitted))
                 for uid, line in self.submitted.get(name, {}).items() if units is None or uid in units
                 for row in line["rows"]]
        if not extra:
            return stored
        df = pd.concat([stored, pd.DataFrame.from_records(extra)], ignore_index=True)
        if isinstance(units, (list, tuple)):
            order = {uid: i for i, uid in enumerate(units)}
            df = df.iloc[df["unit"].map(order).argsort(kind="stable")].reset_index(drop=True)
        return df

    def append(self, *args, **kwargs) -> None:
        """Refused: the submitted units are shown, never stored."""
        raise TypeError("a store showing submitted bundles is read only")



def verified(bundle: Bundle) -> dict:
    """The receipt of ``bundle``: :class:`UserError` when there is none, it is of another
    bundle (another sha256) or its verdict is not :data:`AGREES`."""
    path = receipt_path(bundle.path)
    verify = f"run `relbench verify {bundle.path} --sample 30` first"
    try:
        receipt = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _refuse(bundle.path, f"not verified: no receipt {path.name} beside it", verify) from None
    except (OSError, ValueError):
        raise _refuse(bundle.path, f"its receipt {path.name} cannot be read", verify) from None
    if not isinstance(receipt, dict) or receipt.get("bundle_sha256") != bundle.sha256:
        raise _refuse(bundle.path, f"the receipt {path.name} is of another bundle (its sha256 is not this file's)",
                      verify)
    if receipt.get("verdict") != AGREES:
        raise _refuse(bundle.path, f"its verification {receipt.get('verdict', 'gave no verdict')} (receipt "
                                   f"{path.name}: {receipt.get('units_disagree', '?')} recomputed units disagree, "
                                   f"{len(receipt.get('findings') or [])} findings); it is not merged",
                      "fix the bundle, then " + verify)
    return receipt


def verification_text(receipt: dict) -> str:
    """How a page states a bundle's verification: ``relbench verify``'s agreement, seed and date."""
    return (f"`relbench verify`: {receipt['units_agree']} of {receipt['units_recomputed']} sampled units recomputed "
            f"alike, seed {receipt['seed']}, {str(receipt['date'])[:10]}")


def submitted_lines(bundle: Bundle, receipt: dict, task_runs: list) -> dict[str, dict[str, dict]]:
    """Per task, per unit id, the store line of each of the bundle's units (under the
    plan's id, displayed key and inputs), its rows marked with the bundle's origin and
    verification (:data:`~relbench.reuse.VERIFIED`)."""
    planned = {tr.task.name: {u.id: u for u in tr.plan().units} for tr in task_runs}
    kinds = {tr.task.name: tr.kind for tr in task_runs}
    created = datetime.datetime.fromisoformat(bundle.manifest.get("created", "1970-01-01T00:00:00+00:00"))
    lines: dict[str, dict[str, dict]] = {}
    for task, rows in bundle.rows.groupby("task", sort=False):
        for uid, group in by_unit(nested(rows)).items():
            unit = planned[task][uid]
            marked = [{**row, VERIFIED: verification_text(receipt)} for row in
                      stored_rows(group, kinds[task], bundle.origin)]
            lines.setdefault(str(task), {})[uid] = {"unit": uid, "key": unit.display, "inputs": unit.inputs,
                                                    "run": str(group["run"].iloc[0]), "time": created.timestamp(),
                                                    "rows": marked}
    return lines


def included(paths: list[Path], task_runs: list, store, against: str) -> tuple[Any, list[str]]:
    """``(a store showing the bundles, what was merged)``: the verified bundles ``paths``
    (:func:`verified`, :func:`check_plan` against the plan ``task_runs`` of ``against``)
    read over ``store`` (:class:`WithSubmitted`; nothing is written). A unit the store
    holds keeps the store's rows, and one of two bundles the first's."""
    bundles = [read_bundle(path) for path in paths]
    lines: dict[str, dict[str, dict]] = {}
    said = []
    for bundle in bundles:
        receipt = verified(bundle)
        check_plan(bundle, task_runs, against)
        merged = held = 0
        for task, units in submitted_lines(bundle, receipt, task_runs).items():
            stored = store.read(task).units
            for uid, line in units.items():
                if uid in stored or uid in lines.get(task, {}):
                    held += 1
                else:
                    lines.setdefault(task, {})[uid] = line
                    merged += 1
        said.append(f"merged {merged} units of {bundle.path} ({verification_text(receipt)})"
                    + (f"; {held} of its units are shown from the store (or an earlier bundle) instead, which wins"
                       if held else ""))
    return WithSubmitted(store.root, lines), said
