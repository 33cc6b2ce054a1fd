"""What a contributor pays to rank a new similarity against the release: `relbench run
TASKS --reuse RELEASE` on the default suite with one toy similarity added to every grid
that lists similarities, or (``--in KEY``) to the lists of the tasks file that grids
share, as a contributor adds a method to the main table's grids with one line.

The toy similarity (``bench-signed-cosine``, the sign of the cosine projection, written
to a temporary module and loaded with ``--plugin``) is added to a copy of the tasks file
in a temporary folder; the run writes into a temporary store and leaderboards folder
(the published ones stay untouched) from a cold start: every unit of the unmodified
suite is taken from the release (:mod:`relbench.reuse`), and only the toy similarity's
units are computed. The script prints the wall and CPU seconds and peak resident memory
of that one process, the units the plan adds, and the run's accounting line.

Then it takes the contributor's path to its end, each step timed the same way: `relbench
submit` bundles the toy's units, `relbench verify BUNDLE --sample N` recomputes N of them
from scratch (``--verify-sample``; 0 skips it and the merge), and `relbench leaderboard
--include BUNDLE` draws the pages with the bundle's units marked submitted. Submitting
needs rows of a clean checkout: run it in a clean clone.

It checks the release first and stops, before any timing, when the release is not the
tasks file's (a planned unit of the unmodified suite without rows under its identity:
other inputs, plugin versions or protocol), and afterwards when the run computed other
units than the toy similarity's: both would time a recomputation of the suite, not the
reuse.

    python benchmarks/reuse_release.py [tasks.yaml] [--release leaderboards/results.parquet] [-j N]
        [--in KEY]... [--verify-sample N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

#: the toy similarity's name and its plugin module (loaded with --plugin from the temporary folder)
TOY, TOY_MODULE = "bench-signed-cosine", "bench_toy_similarity"
TOY_SOURCE = f'''\
"""A toy similarity for benchmarks/reuse_release.py: the sign of the cosine projection."""
from dataclasses import dataclass
from typing import ClassVar

import torch

from relbench.api import Similarity, hookimpl


@dataclass
class SignedCosine(Similarity):
    """The sign of each cosine between an embedding and an anchor (a toy, for benchmarks)."""

    name: ClassVar[str] = "{TOY}"
    invariances: ClassVar[frozenset[str]] = frozenset({{"orthogonal", "scale", "permutation"}})

    def project(self, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """``n × k`` signs of the cosines of each row of ``X`` with each anchor."""
        unit = torch.nn.functional.normalize
        return torch.sign(unit(X, dim=1) @ unit(A, dim=1).T)


@hookimpl
def relbench_similarities():
    return [SignedCosine]
'''


def with_toy(tasks: Path, lists: list[str]) -> tuple[Path, int]:
    """A copy of ``tasks`` beside it (a hidden file, so that its relative paths mean
    what they mean there) with the toy similarity added, and how many grids got it: to
    the top-level lists named in ``lists`` (e.g. ``x-core-similarities``: every grid that
    names one through a YAML alias gets it, as a contributor's one-line edit does), or,
    without ``lists``, to every task grid that lists similarities."""
    suite = yaml.safe_load(tasks.read_text(encoding="utf-8"))
    grids = [t["grid"] for t in suite.get("tasks", []) if isinstance(t.get("grid"), dict)
             and isinstance(t["grid"].get("similarities"), list)]
    if lists:
        missing = [key for key in lists if not isinstance(suite.get(key), list)]
        if missing:
            sys.exit(f"error: {tasks} has no top-level list {', '.join(missing)} (--in names a list of similarities "
                     f"that grids alias, e.g. x-core-similarities)")
        shared = [suite[key] for key in lists]
        grids = [g for g in grids if any(g["similarities"] is lst for lst in shared)]
        for lst in shared:
            lst.append(TOY)  # in place: the aliasing grids hold this very list
    else:
        for grid in grids:
            grid["similarities"] = [*grid["similarities"], TOY]  # a new list: grids may share one (a YAML alias)
    fd, name = tempfile.mkstemp(prefix=".reuse-bench-", suffix=".yaml", dir=tasks.parent)
    with open(fd, "w", encoding="utf-8") as out:
        out.write(yaml.safe_dump(suite, sort_keys=False))
    return Path(name), len(grids)


def planned(tasks: Path, plugin: str | None = None) -> dict[str, set[str]]:
    """Per task of ``tasks``, its planned unit ids (``plugin``: a module to load too)."""
    from relbench.config import load_suite
    from relbench.plugins import load_registry
    from relbench.runner import Runner

    registry = load_registry(modules=[plugin] if plugin else [])
    runner = Runner(load_suite(tasks, registry), registry, quiet=True, output=Path(tempfile.mkdtemp()))
    return {tr.task.name: {u.id for u in tr.plan().units} for tr in runner.plans()}


def check_release(tasks: Path, release: Path) -> int:
    """The number of units of ``tasks``'s plan; exits when ``release`` lacks any of them."""
    from relbench.errors import UserError
    from relbench.reuse import read_release

    try:
        rows = read_release(release)
    except UserError as exc:
        sys.exit(f"error: {exc}")
    published = set(rows["unit"])
    plan = planned(tasks)
    lacking = {task: ids - published for task, ids in plan.items() if ids - published}
    if lacking:
        first = next(iter(lacking))
        sys.exit(f"error: {release} is not the release of {tasks}: {sum(map(len, lacking.values()))} planned units "
                 f"have no rows under their identity (other inputs, plugin versions or protocol), in tasks "
                 f"{', '.join(sorted(lacking))} (e.g. {first}: unit {sorted(lacking[first])[0][:12]}). Time it "
                 f"against the tasks file's own release (`relbench release`).")
    return sum(map(len, plan.values()))


def timed(args: list[str], env: dict[str, str]) -> tuple[float, float, float, int, str]:
    """Wall seconds, CPU seconds, peak RSS (MB), exit code and stderr of one `relbench` process."""
    t0 = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", sys.executable, "-m", "relbench.cli", *args],
                          env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    lines = proc.stderr.replace("\r", "\n").strip().splitlines()
    user, system, rss_kb = lines[-1].split()
    return wall, float(user) + float(system), int(rss_kb) / 1024, proc.returncode, "\n".join(lines[:-1])


def origins(store: Path) -> tuple[int, int]:
    """(lines taken from a release, lines computed) of a results store."""
    taken = computed = 0
    for path in store.glob("*.jsonl"):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                if '"origin": "release@' in line:
                    taken += 1
                else:
                    computed += 1
    return taken, computed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="?", default="tasks.yaml", type=Path)
    parser.add_argument("--release", type=Path, default=Path("leaderboards/results.parquet"))
    parser.add_argument("-j", "--jobs", default="1",
                        help="worker processes of the timed run, and pages drawn at once by it and the merge (default 1)")
    parser.add_argument("--in", dest="lists", action="append", default=[], metavar="KEY",
                        help="add the toy to this top-level list of the tasks file (repeatable; e.g. "
                             "x-core-similarities): the grids that alias it get it; default: every grid")
    parser.add_argument("--verify-sample", type=int, default=2, metavar="N",
                        help="units `relbench verify` recomputes from the bundle (default 2; 0: no verify, no merge)")
    args = parser.parse_args()
    tasks, release = args.tasks.resolve(), args.release.resolve()
    units = check_release(tasks, release)
    folder = Path(tempfile.mkdtemp(prefix="relbench-reuse-bench-"))
    (folder / f"{TOY_MODULE}.py").write_text(TOY_SOURCE, encoding="utf-8")
    sys.path.insert(0, str(folder))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))}
    copy, grids = with_toy(tasks, args.lists)
    try:
        added = sum(map(len, planned(copy, TOY_MODULE).values())) - units
        print(f"{tasks}: {units} units in the release {release}; {TOY} added to {grids} grids adds {added} units")
        err = step("relbench run --reuse", ["run", str(copy), "--reuse", str(release), "--output",
                                            str(folder / "results"), "--leaderboards", str(folder / "boards"),
                                            "-j", args.jobs], env)
        print(next((line for line in err.splitlines() if line.startswith("encoded ")), "(no accounting printed)"))
        taken, computed = origins(folder / "results")
        if (taken, computed) != (units, added):
            sys.exit(f"error: {taken} units were taken from the release and {computed} computed, not {units} and "
                     f"the {added} of {TOY}: the release does not match the suite.")
        if args.verify_sample > 0:
            contribute(copy, tasks, release, folder, args.verify_sample, env, args.jobs)
    finally:
        copy.unlink()
    print(f"(results, bundle and pages in {folder})")


def step(what: str, args: list[str], env: dict[str, str]) -> str:
    """Time ``relbench --plugin TOY ARGS``, print its figures, stop on a failure; its stderr."""
    wall, cpu, rss, code, err = timed(["--plugin", TOY_MODULE, *args], env)
    if code != 0:
        sys.exit(f"error: {what} exited {code}:\n{err[-2000:]}")
    print(f"{what}: wall {wall:.1f} s, cpu {cpu:.1f} s, peak RSS {rss:.0f} MB")
    return err


def contribute(tasks: Path, original: Path, release: Path, folder: Path, sample: int, env: dict[str, str],
               jobs: str) -> None:
    """The rest of the contributor's path, timed: submit the toy's units of ``tasks`` (the
    copy with the toy), verify the bundle, and merge it into the pages of a maintainer's
    store that holds ``release``'s rows of ``original`` and nothing else (drawn ``jobs``
    pages at once, as the run's)."""
    bundle = folder / "toy.zip"
    step("relbench submit", ["submit", str(tasks), "--output", str(folder / "results"), "--to", str(bundle)], env)
    print(f"  bundle: {bundle.stat().st_size / 1e6:.1f} MB")
    step(f"relbench verify BUNDLE --sample {sample}", ["verify", str(bundle), "--sample", str(sample), "-q"], env)
    receipt = json.loads(bundle.with_name(bundle.name + ".verified.json").read_text())
    print(f"  verdict: {receipt.get('verdict')}")
    # the maintainer's store holds the release only; the bundle brings the toy's units
    step("maintainer: relbench run --reuse (the release alone)",
         ["run", str(original), "--reuse", str(release), "--output", str(folder / "maintainer"), "--no-leaderboard"],
         env)
    err = step("maintainer: relbench leaderboard --include BUNDLE",
               ["leaderboard", str(tasks), "--output", str(folder / "maintainer"), "--leaderboards",
                str(folder / "maintainer-boards"), "--include", str(bundle), "-j", jobs], env)
    print("\n".join(f"  {line}" for line in err.splitlines() if bundle.name in line) or
          "  (the command named no bundle)")


if __name__ == "__main__":
    main()
