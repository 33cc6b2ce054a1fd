"""``relbench publish``: the release, drawn from one complete store at a clean revision.

``relbench run`` draws pages into its own folder (``suite.leaderboards``); the citable
folder is written only here, after three checks that a reviewer of a published number
would make, each refused with exit 2 and what to do:

1. the tasks file is tracked by the git checkout that holds the release folder, and the
   checkout has no uncommitted change to a tracked file (the release folder itself
   aside: it is this command's output);
2. the store holds every unit of every task of the tasks file's current plan, and none
   of them failed;
3. every row was computed from a clean checkout (its ``git`` revision is known and not
   ``-dirty``).

The index then names the revision, the tasks file and its digest, and the revisions the
rows come from (:func:`relbench.leaderboard.release_section`).
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from relbench.errors import UserError

#: how many names a refusal lists before counting the rest
SHOWN = 8


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        raise UserError(f"`relbench publish` needs git to check the checkout ({exc}); install git.") from None


def listed(names: list[str]) -> str:
    """The first :data:`SHOWN` of ``names``, comma-separated, then how many more."""
    return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def default_folder(tasks_file: Path) -> Path:
    """The release folder: ``leaderboards/`` at the top of the git checkout that holds
    ``tasks_file`` (beside the tasks file outside a checkout, which :func:`checkout`
    then refuses)."""
    top = _git(tasks_file.resolve().parent, "rev-parse", "--show-toplevel")
    root = Path(top.stdout.strip()) if top.returncode == 0 else tasks_file.resolve().parent
    return root / "leaderboards"


def checkout(tasks_file: Path, folder: Path) -> dict:
    """Check 1: ``{"revision", "tasks", "tasks_sha256"}`` of a clean checkout whose
    tracked files include ``tasks_file``; raise :class:`UserError` otherwise."""
    tasks_file = tasks_file.resolve()
    top = _git(tasks_file.parent, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise UserError(f"{tasks_file} is not in a git checkout; a release is drawn from a committed tasks file. "
                        f"Commit it in the relbench checkout, then run `relbench publish` there.")
    root = Path(top.stdout.strip()).resolve()
    if not folder.resolve().is_relative_to(root):
        raise UserError(f"the release folder {folder} is outside the checkout {root}; publish into a folder of the "
                        f"checkout (default: {root / 'leaderboards'}).")
    relative = tasks_file.relative_to(root).as_posix()
    if _git(root, "ls-files", "--error-unmatch", relative).returncode != 0:
        raise UserError(f"{relative} is not committed; a release must name a tasks file anyone can check out. "
                        f"`git add {relative}` and commit it first.")
    aside = folder.resolve().relative_to(root).as_posix()
    status = _git(root, "status", "--porcelain", "--untracked-files=no", "--", ".",
                  f":(exclude){aside}" if aside != "." else ".")
    changed = [line[3:] for line in status.stdout.splitlines() if line.strip()]
    if changed:
        raise UserError(f"the checkout {root} has uncommitted changes ({listed(changed)}); a release comes from one "
                        f"clean revision. Commit or stash them, run the suite again if code changed, then publish.")
    revision = _git(root, "rev-parse", "--short", "HEAD").stdout.strip()
    return {"revision": revision, "root": str(root), "tasks": relative,
            "tasks_sha256": hashlib.sha256(tasks_file.read_bytes()).hexdigest()}


def stored(runner) -> list[str]:
    """Checks 2 and 3 on ``runner``'s store: the sorted git revisions of the rows of the
    current plan; raise :class:`UserError` naming what is missing, failed or dirty."""
    partial, failed, revisions = [], [], set()
    for task_run in runner.plans():
        plan = [u.id for u in task_run.plan().units]
        lines = runner.store.read(task_run.task.name)
        missing = [uid for uid in plan if uid not in lines.units]
        if missing:
            partial.append(f"{task_run.task.name} ({len(plan) - len(missing)} of {len(plan)} units)")
            continue
        df = runner.store.load(task_run.task.name, units=plan)
        if (df["status"] == "error").any():
            failed.append(f"{task_run.task.name} ({df.loc[df['status'] == 'error', 'unit'].nunique()} units)")
        revisions |= {str(v) for v in df.get("git", [])}
    if partial:
        raise UserError(f"the store {runner.store.root} does not hold every unit of {listed(partial)}; a release "
                        f"shows complete tasks only. Run `relbench run` on the same tasks file until it finishes, "
                        f"then publish.")
    if failed:
        raise UserError(f"units failed in {listed(failed)}; a release shows no failed unit. See the failures on the "
                        f"run's pages (`relbench run` lists them), fix them and run again, then publish.")
    dirty = sorted(r for r in revisions if not r or r.endswith("-dirty"))
    if dirty:
        raise UserError(f"rows of {runner.store.root} were computed from a checkout with uncommitted changes or none "
                        f"({listed([r or 'unknown' for r in dirty])}); a release is drawn from committed code. "
                        f"Run the suite again into a fresh store (--output DIR) from a clean checkout.")
    return sorted(revisions)


#: where ``relbench release`` keeps the store of a revision, under the checkout's top
RELEASE_STORES = "results-release"


def clean_code(revision: str) -> str:
    """``revision`` (relbench's own source tree, :func:`relbench.results.git_revision`)
    when it is a clean checkout; raise :class:`UserError` before any work otherwise."""
    if not revision or revision.endswith("-dirty"):
        raise UserError(f"relbench's source tree is {'not a git checkout' if not revision else 'modified'} "
                        f"({revision or 'no revision'}); a release is computed by committed code. Commit or stash "
                        f"the changes and release again.")
    return revision


def citation_matches(root: Path) -> str:
    """The version ``CITATION.cff`` at the checkout's top names, when it is relbench's
    own (the release index cites that version); raise :class:`UserError` otherwise."""
    import re

    from relbench import __version__

    path = Path(root) / "CITATION.cff"
    try:
        found = re.search(r'^version:\s*"?([^"\n]+?)"?\s*$', path.read_text(encoding="utf-8"), re.M)
    except OSError:
        found = None
    if found is None or found.group(1) != __version__:
        raise UserError(f"{path} {'names version ' + repr(found.group(1)) if found else 'names no version'}, but "
                        f"relbench is {__version__}; a release is cited by the version its index states. Set "
                        f'`version: "{__version__}"` in CITATION.cff, commit it, and release again.')
    return __version__


def release_store(root: Path, revision: str) -> Path:
    """The store ``relbench release`` fills at ``revision``: its own folder, so that an
    interrupted release resumes there and no row of another revision enters it."""
    return Path(root) / RELEASE_STORES / revision


def one_revision(revisions: list[str], revision: str, store: Path) -> None:
    """Refuse a release whose rows do not all come from ``revision``."""
    others = [r for r in revisions if r != revision]
    if others:
        raise UserError(f"rows of {store} come from revisions {listed(others)} besides {revision}; a release is "
                        f"computed by one revision. Remove {store} and release again.")


def tag(root: Path, revision: str) -> str:
    """Tag ``revision`` ``results-YYYYMMDD-REVISION`` (today's date, UTC), once; the tag's name."""
    import datetime

    name = f"results-{datetime.datetime.now(datetime.timezone.utc):%Y%m%d}-{revision}"
    if _git(Path(root), "rev-parse", "-q", "--verify", f"refs/tags/{name}").returncode != 0:
        done = _git(Path(root), "tag", name, revision)
        if done.returncode != 0:
            raise UserError(f"git could not tag {revision} as {name}: {done.stderr.strip()}")
    return name


#: the folder of a release's interactive board (:mod:`relbench.board`), inside the release folder
SITE = "site"


def site(runner, folder: Path) -> Path:
    """Write the interactive board of the release drawn from ``runner``'s store into
    ``folder``/:data:`SITE`, from the same rows and by the same computation as
    ``relbench export --summary``; return the board's folder."""
    from relbench import board

    board.write(folder / SITE, board.store_boards(runner))
    return folder / SITE
