"""The ``relbench`` command line.

Exit codes:
    0   everything requested finished
    1   the run finished but some combinations or tasks failed (listed in the summary);
        ``verify``: a finding (integrity, or a recomputed unit outside tolerance)
    2   bad input: tasks file, plugin names or parameters, paths, missing assets
    130 interrupted (Ctrl-C); finished work is stored, the same command resumes
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from relbench import __version__
from relbench.errors import ConfigError, UserError
from relbench.precision import PRECISION_ENV, PRECISIONS, slow_bf16_note

from relbench.run_summary import EXIT_FAILURES, EXIT_INTERRUPTED, EXIT_OK, EXIT_USER  # noqa: F401 - re-exported
from relbench.run_summary import RunSummary
from relbench.threads import fixed_threads


#: the memory one ``-j`` worker may need: the largest task's measured peak (about 2.1 GB) and room
WORKER_BYTES = int(2.5e9)
#: ``export --release`` given without a file: the release beside the tasks file (:func:`_release_path`)
RELEASE_DEFAULT = Path("<the release beside the tasks file>")
#: units the release's own audit recomputes (``relbench release --audit``)
AUDIT_SAMPLE = 30


def auto_jobs(cores: int | None = None, available: int | None = None) -> int:
    """``-j auto``: one worker per CPU core, as many as the available memory holds at
    :data:`WORKER_BYTES` each, at least one."""
    cores = cores or os.cpu_count() or 1
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, OSError, ValueError):  # no sysconf (Windows): cores alone
            available = cores * WORKER_BYTES
    return max(1, min(cores, available // WORKER_BYTES))


def _workers(jobs: int) -> int:
    """A ``-j`` value as a count of worker processes (0: one per CPU core)."""
    return jobs if jobs > 0 else (os.cpu_count() or 1)


def _jobs(text: str) -> int:
    if text == "auto":
        return auto_jobs()
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected `auto` or a whole number of worker processes, got "
                                         f"{text[:40]!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 (one per CPU core) or a positive number, got {value}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text[:40]!r}")
    return value


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or a positive whole number, got {text[:40]!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="relbench",
        description="Benchmark latent space communication methods (relative representations, IRP, PARAM, ...): "
                    "every method is a plugin, every combination is measured the same way.",
        epilog="Exit codes: 0 ok, 1 some combinations failed, 2 bad input, 130 interrupted (resumable).")
    p.add_argument("--version", action="version", version=f"relbench {__version__}")
    p.add_argument("--disable", action="append", default=[], metavar="NAME",
                   help="disable a plugin package (entry-point name) or plugin (name or interface:name); "
                        "repeatable; also RELBENCH_DISABLE_PLUGINS=a,b")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                   help="also load the plugins of this importable module (e.g. my_method for ./my_method.py), "
                        "without installing it; repeatable; also RELBENCH_PLUGINS=a,b")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run the tasks of a tasks file and write leaderboards",
                         description="Encode each data set once per encoder (cached), evaluate every unit of work of "
                                     "every task over the seeds, store results, and render leaderboards. A unit stored "
                                     "with the same identity (everything that produced it) is reused; one whose inputs "
                                     "changed is recomputed, and the summary says why.")
    run.add_argument("tasks", type=Path, help="tasks YAML file, e.g. tasks.yaml")
    run.add_argument("--dry-run", action="store_true",
                     help="validate and print, per task, the units in total, already done, to compute and stale "
                          "(with the changed fields); compute nothing")
    run.add_argument("--json", action="store_true", help="with --dry-run: print the plan as JSON")
    run.add_argument("--force", action="store_true",
                     help="recompute every selected unit (new lines are appended; embeddings stay cached)")
    run.add_argument("--reuse", type=Path, nargs="?", const=RELEASE_DEFAULT, metavar="FILE",
                     help="before running, take into the results store the rows of every planned unit that a "
                          "published release holds with the same identity (the same inputs, plugin versions and "
                          "protocol) and the store does not, marked as taken from the release; compute only the "
                          "rest (default FILE: results.parquet in leaderboards/ at the top of the checkout holding "
                          "the tasks file, the shipped release)")
    run.add_argument("--task", action="append", dest="only", metavar="NAME",
                     help="run only the tasks matching this name or glob pattern, e.g. 'fashion-*' (repeatable)")
    run.add_argument("--output", type=Path, help="results directory (default: suite.output)")
    run.add_argument("--leaderboards", type=Path, help="leaderboards directory (default: suite.leaderboards)")
    run.add_argument("--no-leaderboard", action="store_true", help="do not render leaderboards after the run")
    run.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    run.add_argument("-j", "--jobs", type=_jobs, default=1, metavar="N",
                     help="run tasks in N worker processes (0: one per CPU core; auto: one per core, as many as "
                          "the available memory holds at 2.5 GB each); a task waits while a running one encodes "
                          "an embedding it reads, so each is computed once; idle cores go to the running workers; the pages "
                          "after the run are drawn N at once (default 1; `make run` uses auto)")
    run.add_argument("--threads", type=_positive, metavar="N",
                     help="compute with exactly N torch threads (in each -j worker), never sharing idle cores, so "
                          "that every row names the thread count its sums were split over and can be recomputed "
                          "bit for bit (`relbench release` runs with 1; default: one per core, -j workers share)")
    run.add_argument("--precision", choices=PRECISIONS,
                     help="run every task at this precision, whatever the tasks file says (fp32: the fp32 "
                          "protocol; bf16: heavy loops that opt in run under bf16 autocast); part of every unit's "
                          "identity and shown on the pages")
    run.add_argument("--executor", choices=["local", "ray"],
                     help="where units are computed: this machine (local, with -j N worker processes) or a Ray "
                          "instance (ray: `pip install 'relbench[ray]'`); default suite.executor, else local")
    run.add_argument("--address", metavar="ADDRESS",
                     help="with --executor ray: the cluster to join (`auto`, or HOST:PORT of `ray start --head`); "
                          "without it Ray starts on this machine")

    plugins = sub.add_parser("plugins", help="list installed plugins, or show one in full",
                             description="List every registered implementation per interface, with the package (and "
                                         "version) that provides it and its parameters with defaults; with NAME, show "
                                         "that plugin's documentation and every parameter's type, choices, default and "
                                         "meaning.")
    plugins.add_argument("name", nargs="?", help="a plugin name (or interface:name) to show in full")
    plugins.add_argument("--interface", help="only this interface (dataset, encoder, selector, similarity, stitcher, "
                                             "regularizer, metric, space_measure, task_kind)")
    plugins.add_argument("--json", action="store_true", help="print JSON (for scripts)")

    lb = sub.add_parser("leaderboard", help="rebuild leaderboards from stored results (no computation)",
                        description="Render every task's markdown page and the index from the results store alone; "
                                    "only results of the tasks file's current identities are shown.")
    lb.add_argument("tasks", type=Path, nargs="?", default=Path("tasks.yaml"),
                    help="tasks file whose suite.output/leaderboards folders to use (default tasks.yaml)")
    lb.add_argument("--output", type=Path, help="results directory (overrides the tasks file)")
    lb.add_argument("--leaderboards", type=Path, help="leaderboards directory (overrides the tasks file)")
    lb.add_argument("--precision", choices=PRECISIONS,
                    help="show the results of a `relbench run --precision P` (default: the tasks file's precision)")
    lb.add_argument("--html", type=Path, metavar="DIR",
                    help="write the interactive board into DIR instead of the markdown pages: a static site that "
                         "works offline from the file system (index.html: every page cell, sortable and filterable; "
                         "one page per task with its matrices)")
    lb.add_argument("--include", type=Path, action="append", default=[], metavar="BUNDLE",
                    help="also show the units of a contributor's bundle (`relbench submit`) that the store lacks, "
                         "marked submitted with their verification result; only a bundle that `relbench verify "
                         "BUNDLE` found to agree (its receipt beside it) is taken, and nothing is stored "
                         "(repeatable; a unit the store holds shows the store's rows)")
    lb.add_argument("-j", "--jobs", type=_jobs, default=1, metavar="N",
                    help="draw N pages at once, each in a worker process (0 or auto as for `relbench run`; "
                         "default 1); the pages are the same whatever N")
    lb.add_argument("--release", type=Path, nargs="?", const=RELEASE_DEFAULT, metavar="FILE",
                    help="with --html: draw the board from a release's results table instead of the results store "
                         "(default FILE: results.parquet in leaderboards/ at the top of the checkout holding the "
                         "tasks file, the shipped release)")

    publish = sub.add_parser("publish", help="draw the citable release from a complete store at a clean revision",
                             description="Redraw every page, the index and results.parquet into the release folder, "
                                         "after checking that the tasks file is committed, the checkout is clean, the "
                                         "store holds every unit of every task with none failed, and every row was "
                                         "computed from committed code. `relbench run` never writes the release.")
    publish.add_argument("tasks", type=Path, nargs="?", default=Path("tasks.yaml"),
                         help="the committed tasks file of the release (default tasks.yaml)")
    publish.add_argument("--output", type=Path, help="results directory (overrides the tasks file)")
    publish.add_argument("--to", type=Path, help="release folder (default: leaderboards/ at the top of the checkout "
                                                 "holding the tasks file)")
    publish.add_argument("-j", "--jobs", type=_jobs, default=1, metavar="N",
                         help="draw N pages at once, each in a worker process (0 or auto as for `relbench run`; "
                              "default 1); the pages are the same whatever N")

    release = sub.add_parser("release", help="the whole release in one command: the suite from scratch at a clean "
                                             "revision, then published",
                             description="Refuse a dirty checkout, a tasks file outside it and a CITATION.cff whose "
                                         "version is not relbench's; run the suite into a store of its own for this "
                                         "revision (results-release/REVISION at the top of the checkout: an "
                                         "interrupted release resumes there, nothing of another revision enters "
                                         "it); then draw leaderboards/ and results.parquet from it as `relbench "
                                         "publish` does, refusing rows of any other revision. With --tag, tag the "
                                         "revision results-DATE-REVISION.")
    release.add_argument("tasks", type=Path, nargs="?", default=Path("tasks.yaml"),
                         help="the committed tasks file of the release (default tasks.yaml)")
    release.add_argument("-j", "--jobs", type=_jobs, default=0, metavar="N",
                         help="worker processes, as for `relbench run` (default auto)")
    release.add_argument("--to", type=Path, help="release folder (default: leaderboards/ at the top of the checkout)")
    release.add_argument("--tag", action="store_true", help="tag the revision once the release is drawn")
    release.add_argument("--audit", type=_non_negative, default=AUDIT_SAMPLE, metavar="N",
                         help=f"units the release's own reproduction audit recomputes from scratch once it is drawn, "
                              f"written to AUDIT.md beside the pages (default {AUDIT_SAMPLE}; 0: no audit)")
    release.add_argument("-q", "--quiet", action="store_true", help="no progress bars")

    verify = sub.add_parser("verify", help="audit a release: check its integrity and recompute a sample of its units",
                            description="Check the release's results table against the tasks file (every row from a "
                                        "clean git revision, every planned unit present under the plan's identity, "
                                        "the tasks file's sha256 and the recorded versions the ones here), then "
                                        "recompute N published units drawn with seed S, stratified over task kinds, "
                                        "from scratch in a temporary cache and store (removed afterwards), and print "
                                        "per metric the largest |recomputed - published| and how many rows fall "
                                        "outside tolerance. Exit 0 when everything holds, 1 on any finding.")
    verify.add_argument("tasks", type=Path, nargs="?", default=Path("tasks.yaml"),
                        help="the tasks file of the release (default tasks.yaml), or a contributor's bundle "
                             "(BUNDLE.zip of `relbench submit`): its rows are checked and a sample recomputed the "
                             "same way, and the receipt BUNDLE.zip.verified.json is written beside it (the only "
                             "file written)")
    verify.add_argument("--sample", type=_positive, default=None, metavar="N",
                        help="how many published units to recompute (default 8)")
    verify.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the sample (default 0)")
    verify.add_argument("--release", type=Path, help="the release's results table (default: results.parquet in "
                                                     "leaderboards/ at the top of the checkout holding the tasks file)")
    verify.add_argument("--against", type=Path, metavar="OTHER",
                        help="compare the release with another results table (e.g. the previous release's "
                             "results.parquet) instead of recomputing: every planned unit both hold, row by row, "
                             "bitwise where both computed on the same machine and thread count, else within the "
                             "stated tolerance")
    verify.add_argument("--report", type=Path, metavar="FILE",
                        help="also write what the audit prints to FILE (markdown, headed by the command, revision, "
                             "machine, date and wall time): the audit a release publishes")
    verify.add_argument("-q", "--quiet", action="store_true", help="no progress bars while recomputing")

    export = sub.add_parser("export", help="write the current results as one flat table (parquet, csv, jsonl)",
                            description="One row per (unit, metric) with every parameter as its own column; the "
                                        "file loads in pandas or DuckDB without relbench. --summary: one row per "
                                        "cell of the pages instead (the table behind them). --release: the rows of "
                                        "the shipped release instead of the results store.")
    export.add_argument("tasks", type=Path, nargs="?", default=Path("tasks.yaml"),
                        help="tasks file whose current results to export (default tasks.yaml)")
    export.add_argument("--format", choices=("parquet", "csv", "jsonl"), default="parquet",
                        help="file format (default parquet)")
    export.add_argument("--to", type=Path, help="file to write (default: export.<format> in the results folder)")
    export.add_argument("--output", type=Path, help="results directory (overrides the tasks file)")
    export.add_argument("--precision", choices=PRECISIONS,
                        help="export the results of a `relbench run --precision P` (default: the tasks file's)")
    export.add_argument("--all", action="store_true", help="every stored line, older identities included (history)")
    export.add_argument("--summary", action="store_true",
                        help="one row per page cell: task, the combination's plugins (one column per interface of "
                             "its kind's grid), metric, score, 95 %% interval (low, high), n (seeds), tie group and "
                             "revision, computed as the pages compute them (default file: summary.<format>)")
    export.add_argument("--release", type=Path, nargs="?", const=RELEASE_DEFAULT, metavar="FILE",
                        help="read the rows of a release's results table instead of the results store (default "
                             "FILE: results.parquet in leaderboards/ at the top of the checkout holding the tasks "
                             "file, the shipped release)")

    submit = sub.add_parser("submit", help="write a contributor's bundle: the units computed here, for verification",
                            description="Write one zip file holding the rows of the tasks file's current plan that "
                                        "were computed here (per-sample predictions included; units `relbench run "
                                        "--reuse` took from a release are left out) and a manifest: the tasks "
                                        "file's text and sha256, the plugin packages and versions, the git "
                                        "revisions, the units per task and every member's sha256. Maintainers "
                                        "check it with `relbench verify BUNDLE` and show it with `relbench "
                                        "leaderboard --include BUNDLE`.")
    submit.add_argument("tasks", type=Path, nargs="?", default=Path("tasks.yaml"),
                        help="the tasks file the units were run from (default tasks.yaml)")
    submit.add_argument("--to", type=Path, help="the bundle to write (default: submission.zip in the results folder)")
    submit.add_argument("--output", type=Path, help="results directory (overrides the tasks file)")
    submit.add_argument("--task", action="append", dest="only", metavar="NAME",
                        help="submit only the tasks matching this name or glob pattern (repeatable)")
    submit.add_argument("--precision", choices=PRECISIONS,
                        help="submit the results of a `relbench run --precision P` (default: the tasks file's)")

    cache = sub.add_parser("cache", help="list or clear the embedding cache and the learned anchors",
                           description="The embedding cache lives in $RELBENCH_CACHE_DIR or ~/.cache/relbench.")
    cache.add_argument("action", choices=["ls", "clear"], help="ls: list entries; clear: delete all entries")
    cache.add_argument("--dir", type=Path, help="cache folder (default $RELBENCH_CACHE_DIR or ~/.cache/relbench)")
    return p


def _say(quiet: bool, message: str) -> None:
    if not quiet:
        print(message, file=sys.stderr)


# ----------------------------------------------------------------------------- plugins


def _cmd_plugins(args, registry) -> int:
    from relbench.config import plugin_fields
    from relbench.interfaces import INTERFACES
    from relbench.plugin_docs import describe, format_plugin
    from relbench.plugins import did_you_mean

    if args.interface and args.interface not in INTERFACES:
        raise UserError(f"--interface {args.interface!r} is not an interface; "
                        f"{did_you_mean(args.interface, list(INTERFACES))}")
    chosen = [reg for interface in INTERFACES if not args.interface or interface == args.interface
              for reg in (registry.by_interface[interface][n] for n in registry.names(interface))]
    if args.name:
        chosen = [r for r in registry.find(args.name) if not args.interface or r.cls.interface == args.interface]
        if not chosen:
            names = sorted({n for i in INTERFACES for n in registry.names(i)})
            raise UserError(f"no plugin is called {args.name!r}; {did_you_mean(args.name, names)}")
    if args.json:
        print(json.dumps([describe(reg) for reg in chosen], indent=1))
    elif args.name:
        print("\n\n".join(format_plugin(reg) for reg in chosen))
    else:
        interface = None
        for reg in chosen:
            if reg.cls.interface != interface:
                interface = reg.cls.interface
                print(f"\n{interface}:")
            print(f"  {reg.cls.name:<22} {reg.summary}  [{reg.package}]")
            fields = plugin_fields(reg.cls)
            if fields:
                print("  " + " " * 22 + " params: " + ", ".join(f"{k}={d!r}" for k, (_, d) in fields.items()))
    return EXIT_OK


# ----------------------------------------------------------------------------- run


def _plan_summary(task_run) -> dict:
    """A task's dry-run line; a task that cannot be planned here is counted from its
    kind's plan alone, with the reason."""
    if task_run.unavailable:
        units = len(task_run.kind.plan(task_run.task))
        return {"task": task_run.task.name, "units": units, "done": None, "to_compute": units, "stale": None,
                "stale_reasons": {}, "unavailable": task_run.unavailable}
    return task_run.plan().summary()


def _dry_run(runner, as_json: bool) -> int:
    from tabulate import tabulate

    summaries = [_plan_summary(tr) for tr in runner.plans(lenient=True)]
    if as_json:
        print(json.dumps({"tasks": summaries, "units": sum(s["units"] for s in summaries),
                          "to_compute": sum(s["to_compute"] for s in summaries)}, indent=1))
        return EXIT_OK
    rows = [[s["task"], s["units"], "?" if s["done"] is None else s["done"], s["to_compute"],
             "?" if s["stale"] is None else s["stale"],
             "; ".join(f"{n}: {why}" for why, n in s["stale_reasons"].items())] for s in summaries]
    print(tabulate(rows, headers=["task", "units", "done", "to compute", "stale", "stale because changed"],
                   tablefmt="simple"))
    for s in summaries:
        if s.get("unavailable"):
            print(f"\n{s['task']}: cannot be planned here, so done and stale are unknown: {s['unavailable']}")
    print(f"\n{len(summaries)} tasks, {sum(s['units'] for s in summaries)} units, "
          f"{sum(s['to_compute'] for s in summaries)} to compute.")
    return EXIT_OK


def _cmd_run(args, registry) -> int:
    from relbench.console import set_quiet

    set_quiet(args.quiet)  # and back when done, for callers of main() in one process
    try:
        return _run(args, registry)
    finally:
        set_quiet(False)


def _run(args, registry) -> int:
    from relbench.config import load_suite
    from relbench.results import ensure_writable_dir
    from relbench.runner import Runner

    if args.precision:  # load_suite applies it; worker processes inherit it
        os.environ[PRECISION_ENV] = args.precision
    suite = load_suite(args.tasks, registry)
    leaderboards = args.leaderboards.resolve() if args.leaderboards else suite.leaderboards
    suite.leaderboards = leaderboards
    command = "relbench " + " ".join(sys.argv[1:])
    runner = Runner(suite, registry, force=args.force, quiet=args.quiet, only=args.only, output=args.output,
                    command=command)
    if args.reuse and (args.dry_run or args.force):
        raise UserError(f"--reuse writes a release's rows into the results store before computing the rest; "
                        f"{'--dry-run writes nothing' if args.dry_run else '--force recomputes every unit'}. "
                        f"Leave out one of them.")
    if args.dry_run:
        return _dry_run(runner, args.json)
    from relbench.progress import opening

    _say(args.quiet, opening(runner.tasks(), suite.file, suite.smoke))
    taken = _reuse(args, runner) if args.reuse else RunSummary("")
    if not args.no_leaderboard:
        ensure_writable_dir(leaderboards, "The leaderboards directory",
                            "`suite.leaderboards` in the tasks file or `relbench run --leaderboards DIR`")
    executor = args.executor or suite.executor
    if args.address and executor != "ray":
        raise UserError("--address names a Ray cluster; it goes with `--executor ray` (or `executor: ray` in the "
                        "tasks file's suite:).")
    jobs = _workers(args.jobs)
    if args.threads:
        if executor == "ray":
            raise UserError("--threads fixes the thread count of this machine's processes; Ray's workers choose "
                            "their own. Leave out --threads with `--executor ray`.")
    if executor == "ray" and args.jobs != 1:
        raise UserError("-j N starts local worker processes and --executor ray schedules on Ray's workers; choose "
                        "one (Ray uses every CPU of its cluster).")
    with fixed_threads(args.threads):
        return _execute(args, suite, runner, executor, jobs, command, taken)


def _reuse(args, runner) -> RunSummary:
    """``--reuse``: the release's rows of every planned unit the store lacks, taken into
    the store before any work (:func:`relbench.reuse.reuse_release`; the workers of a
    ``-j`` run then find them done); what was taken, as a summary to add to the run's."""
    from relbench.results import ResultStore
    from relbench.reuse import reuse_release

    runner.store.ensure_writable()
    path = _release_path(args) if args.reuse == RELEASE_DEFAULT else args.reuse
    # written through a store of its own, so that the runner's store sees its files changed and plans again
    taken = reuse_release(runner.plans(), path, ResultStore(runner.store.root))
    _say(args.quiet, f"took {taken.units:,} units from the release {taken.describe()} into {runner.store.root}")
    return RunSummary("", from_release=((taken.describe(), taken.units),))


def _execute(args, suite, runner, executor: str, jobs: int, command: str, taken: RunSummary) -> int:
    """A planned run's work: serial, in ``jobs`` local workers or on Ray; its exit code.
    ``taken``: what ``--reuse`` took from a release before (added to the run's summary)."""
    parallel = executor == "local" and jobs > 1 and len(runner.tasks()) > 1
    _announce(runner, jobs if parallel else 1, args.quiet)
    if parallel:
        return _run_jobs(args, suite, runner, jobs, command, taken)
    interrupted = False
    try:
        if executor == "ray":
            from relbench.ray_executor import run_on_ray

            summary = run_on_ray(runner, args.address, args.quiet)
        else:
            runner.run()
            summary = runner.summary()
    except KeyboardInterrupt:
        interrupted = True
        summary = runner.summary()
    summary = summary.with_peak("the run's own process")
    return _report(args, runner, summary.merge(taken), EXIT_INTERRUPTED if interrupted else None)


def _report(args, runner, summary, code: int | None) -> int:
    """The end of a run, whichever executor ran it: its accounting, then (unless it was
    interrupted: ``code`` 130) the pages and the failures; the run's exit code."""
    from relbench.run_summary import accounting, failure_list, interrupted

    _say(args.quiet, "\n" + accounting(summary))
    if code == EXIT_INTERRUPTED:
        print(interrupted(summary, runner.store.root), file=sys.stderr)
        return code
    if not args.no_leaderboard:
        _render(runner, runner.suite.leaderboards, args.quiet, jobs=_workers(args.jobs))
    if summary.failures:
        print(failure_list(summary), file=sys.stderr)
    return code or (EXIT_FAILURES if summary.failures else EXIT_OK)


def _announce(runner, jobs: int, quiet: bool) -> None:
    """Say what the run will compute and how long its units should take (every task is
    planned here, so user errors still stop the run before any work; nothing when
    ``quiet``)."""
    if quiet:  # the run plans its tasks itself; counting banks and costs is for the user only
        return
    from relbench.progress import estimate

    plans = runner.plans()
    todo = {tr.task.name: len(tr.plan().todo) for tr in plans}
    keys = set()
    for tr in plans:
        if todo[tr.task.name]:
            try:
                keys |= {need.key for need in tr.bank_needs()}
            except UserError:  # a pool that cannot be listed is the units' error, reported by them
                pass
    encodings = sum(not runner.cache.has(key) for key in keys)
    _say(quiet, estimate(runner.store, todo, encodings, jobs, _release_table(runner.suite)))
    slow = slow_bf16_note([tr.task.name for tr in plans if todo[tr.task.name] and tr.task.precision == "bf16"])
    if slow:
        _say(quiet, slow)


def _release_table(suite) -> Path:
    """The results table of the release beside the suite's tasks file, whose recorded
    unit costs estimate and order a run whose store has none."""
    from relbench.leaderboard import RELEASE
    from relbench.publish import default_folder

    return default_folder(suite.file) / RELEASE


def _render(runner, leaderboards: Path, quiet: bool, redraw: bool = False, release: dict | None = None,
            store=None, jobs: int = 1) -> None:
    """Pages of every task of the suite from the store (``store`` when given: the runner's
    store with submitted bundles, :class:`relbench.bundle.WithSubmitted`), current
    identities only (unchanged pages are kept unless ``redraw``; a complete page is never
    replaced by a partial one), ``jobs`` at once."""
    from relbench.leaderboard import render

    runner.only = None
    plans = runner.plans()
    current = {tr.task.name: [u.id for u in tr.plan().units] for tr in plans}
    drawn = render(store or runner.store, leaderboards, [tr.task for tr in plans], current, redraw, release,
                   runner.suite.smoke, jobs)[1:]
    _say(quiet, f"wrote {len(drawn)} changed pages to {leaderboards} ({len(plans) - len(drawn)} kept)")


def _run_jobs(args, suite, runner, jobs: int, command: str, taken: RunSummary) -> int:
    from relbench.parallel import estimated_seconds, run_parallel
    from relbench.plugins import DISABLE_ENV, PLUGINS_ENV
    from relbench.progress import unit_costs
    from relbench.run_summary import merged
    from relbench.worker import WorkerJob

    runner.store.ensure_writable()
    runner.cache.ensure_writable()
    plans = {tr.task.name: tr.plan() for tr in runner.plans()}  # every user error before any work
    todo = [tr.task for tr in runner.plans() if plans[tr.task.name].todo]
    weights = estimated_seconds(todo, {t.name: len(plans[t.name].todo) for t in todo},
                                unit_costs(runner.store, [t.name for t in todo], _release_table(suite)))
    for var, values in ((DISABLE_ENV, args.disable), (PLUGINS_ENV, args.plugin)):
        if values:
            os.environ[var] = ",".join(filter(None, [os.environ.get(var, ""), *values]))
    job = WorkerJob(suite=os.path.abspath(suite.file), command=command, force=args.force, quiet=args.quiet,
                    output=str(args.output.resolve()) if args.output else None)
    runs = {tr.task.name: tr for tr in runner.plans()}
    needs = {t.name: frozenset(need.key for need in runs[t.name].bank_needs()) for t in todo}
    ids, start = {t.name: {u.id for u in plans[t.name].todo} for t in todo}, time.time()

    def stored() -> int:  # the workers store their units (computed or failed): count those of this run
        return sum(sum(uid in lines and lines[uid].time >= start for uid in ids[name])
                   for name in ids for lines in [runner.store.read(name).units])

    units = (sum(map(len, ids.values())), stored)
    code, ran = run_parallel(todo, jobs, job, args.quiet, weights, needs, runner.cache.has, units, args.threads) \
        if todo \
        else (EXIT_OK, RunSummary(""))
    reused = [RunSummary(name, planned=len(plan.units), reused=len(plan.units))
              for name, plan in plans.items() if not plan.todo]  # as a serial run counts them
    summary = merged([*runner.summaries.values(), *reused, ran, taken])  # runner.summaries: tasks failed in planning
    return _report(args, runner, summary.with_peak("the run's own process"), code)


# ----------------------------------------------------------------------------- leaderboard, export


def _stored_suite(args, registry, empty_hint: str = ""):
    """The tasks file's suite and a runner over its results store (for pages and export);
    an empty store is a user error, which ends with ``empty_hint`` when given."""
    from relbench.config import load_suite
    from relbench.runner import Runner

    if not args.tasks.exists():  # anything else there (a folder, a pipe) is named by load_suite
        raise ConfigError(f"{args.tasks}: no such tasks file. Pass the tasks file whose results to use, e.g. "
                          f"`relbench {args.command} tasks.yaml`; pages and exports show the results of its tasks.")
    if getattr(args, "precision", None):
        os.environ[PRECISION_ENV] = args.precision
    suite = load_suite(args.tasks, registry)
    runner = Runner(suite, registry, output=args.output)  # not quiet: damaged lines set aside are said
    if not runner.store.tasks():
        raise UserError(f"No stored results in {runner.store.root}. Run `relbench run {args.tasks}` first, or point "
                        f"--output at the results directory{empty_hint}.")
    return suite, runner


def _cmd_leaderboard(args, registry) -> int:
    if args.include and (args.html or args.release):
        raise UserError("--include merges verified bundles into the markdown pages; leave out --html and --release.")
    if args.html:
        return _board(args, registry)
    if args.release:
        raise UserError("--release draws the interactive board from a release; give the folder to write it to "
                        "with --html DIR (the markdown pages of a release are drawn by `relbench publish`).")
    suite, runner = _stored_suite(args, registry)
    leaderboards = (args.leaderboards or suite.leaderboards).resolve()
    store = None
    if args.include:
        from relbench.bundle import included

        store, merged = included(args.include, runner.plans(), runner.store, str(args.tasks))
        for line in merged:
            _say(False, line)
    _render(runner, leaderboards, quiet=False, redraw=True, store=store, jobs=_workers(args.jobs))
    return EXIT_OK


def _board(args, registry) -> int:
    """``relbench leaderboard --html DIR``: the interactive board, from the results store
    or (``--release``) from a release's results table."""
    from relbench import board

    if args.release:
        runner, rows = _release_rows(args, registry)
        boards = board.release_boards(runner, rows)
    else:
        _, runner = _stored_suite(args, registry)
        boards = board.store_boards(runner)
    files = board.write(args.html, boards)
    print(f"wrote the interactive board ({len(boards)} tasks, {len(files)} files, {board.size(files) / 1e3:.0f} kB) "
          f"to {args.html / 'index.html'}")
    return EXIT_OK


def _release_rows(args, registry):
    """A runner over the tasks file's suite (for its data sets) and the rows of the
    release ``args.release`` (the shipped one by default)."""
    from relbench.runner import Runner

    suite, _, rows, _ = _release_of(args, registry)
    return Runner(suite, registry, output=args.output), rows


def _release_of(args, registry):
    """``(suite, path, rows, tasks)``: the tasks file's suite, the release table
    ``args.release`` (the shipped one by default), its rows and the suite's tasks it
    holds; a user error naming the fix when the tasks file or the table is missing or they
    share no task."""
    from relbench.config import load_suite
    from relbench.reuse import read_release

    if not args.tasks.exists():
        raise ConfigError(f"{args.tasks}: no such tasks file. Pass the tasks file of the release, e.g. "
                          f"`relbench {args.command} tasks.yaml --release`.")
    if args.precision:
        os.environ[PRECISION_ENV] = args.precision
    suite = load_suite(args.tasks, registry)
    path = args.release if args.release != RELEASE_DEFAULT else _release_path(args)
    if not path.is_file():
        raise UserError(f"{path}: no release results table there; pass one, e.g. `--release "
                        f"leaderboards/results.parquet`.")
    rows = read_release(path)
    tasks = [t for t in suite.tasks if t.name in set(rows["task"])]
    if not tasks:
        raise UserError(f"{path} holds no rows of the tasks of {args.tasks}; pass the tasks file of that release.")
    return suite, path, rows, tasks


def _cmd_publish(args, registry, revision: str | None = None) -> int:
    """``relbench publish``; with ``revision``, every row must come from that code revision."""
    from relbench import publish

    suite, runner = _stored_suite(args, registry)
    if suite.smoke:
        raise UserError(f"{args.tasks} is a smoke suite (`smoke: true`): its numbers are never for citation, so "
                        f"`relbench publish` does not draw a release from it. Publish the benchmark's tasks file.")
    folder = (args.to or publish.default_folder(args.tasks)).resolve()
    release = publish.checkout(args.tasks, folder)
    release["row_revisions"] = publish.stored(runner)
    if revision is not None:
        publish.one_revision(release["row_revisions"], revision, runner.store.root)
    _render(runner, folder, quiet=False, redraw=True, release=release, jobs=_workers(args.jobs))
    site = publish.site(runner, folder)
    print(f"published the release of {release['tasks']} at {release['revision']} into {folder} (interactive "
          f"board: {site / 'index.html'})")
    return EXIT_OK


def _cmd_release(args, registry) -> int:
    """``relbench release``: check, run from scratch into the revision's own store, publish, tag."""
    from relbench import publish, unit_store
    from relbench.config import load_suite

    def code_revision() -> str:  # the revision rows record (unit_store.git_revision), read afresh
        getattr(unit_store.git_revision, "cache_clear", lambda: None)()
        return unit_store.git_revision()

    folder = (args.to or publish.default_folder(args.tasks)).resolve()
    checked = publish.checkout(args.tasks, folder)
    code = publish.clean_code(code_revision())
    root = Path(checked["root"])
    publish.citation_matches(root)
    if load_suite(args.tasks, registry).smoke:
        raise UserError(f"{args.tasks} is a smoke suite (`smoke: true`): its numbers are never for citation, so it is "
                        f"never released. Release the benchmark's tasks file.")
    store = publish.release_store(root, code)
    _say(args.quiet, f"release of {checked['tasks']} at {code}: running the suite into {store}")
    jobs = "auto" if args.jobs == 0 else str(args.jobs)
    status = main(["run", str(args.tasks), "--output", str(store), "-j", jobs, "--threads", "1", "--no-leaderboard",
                   *(["-q"] if args.quiet else [])])
    if status != EXIT_OK:
        _say(False, f"the run stopped (exit {status}); nothing was published. `relbench release` again resumes it "
                    f"in {store}.")
        return status
    publish.checkout(args.tasks, folder)  # nothing was committed or edited meanwhile
    if code_revision() != code:
        raise UserError(f"the checkout moved from {code} during the run; release again from one revision.")
    status = _cmd_publish(argparse.Namespace(tasks=args.tasks, output=store, to=folder, jobs=args.jobs), registry,
                          revision=code)
    if status == EXIT_OK and args.tag:
        _say(False, f"tagged {publish.tag(root, checked['revision'])}")
    if status != EXIT_OK or not args.audit:
        return status
    from relbench.audit_report import AUDIT_PAGE

    _say(args.quiet, f"the release's own audit: {args.audit} units recomputed from scratch, into {AUDIT_PAGE}")
    return _cmd_verify(argparse.Namespace(tasks=args.tasks, release=folder / "results.parquet", sample=args.audit,
                                          seed=0, quiet=args.quiet, report=folder / AUDIT_PAGE), registry)


def _cmd_verify(args, registry) -> int:
    from relbench.bundle import SUFFIX, verify_bundle
    from relbench.console import set_quiet
    from relbench.verify import SAMPLE, verify, verify_against

    set_quiet(args.quiet)
    against = getattr(args, "against", None)
    try:
        if against is not None:
            if args.tasks.suffix == SUFFIX:
                raise UserError(f"{args.tasks} is a bundle: --against compares two releases; leave it out.")
            if args.sample is not None:
                raise UserError("--against compares every unit both tables hold and recomputes none; leave out "
                                "--sample.")
            if not against.is_file():
                raise UserError(f"--against {against}: no such file; pass another release's results table, e.g. "
                                f"a checkout of its tag's `leaderboards/results.parquet`.")
            compared = lambda: verify_against(args.tasks, args.release, against, registry, args.quiet)  # noqa: E731
            holds = _reported(args, compared) if args.report else compared()
        elif args.tasks.suffix == SUFFIX:
            if args.release:
                raise UserError(f"{args.tasks} is a bundle: its rows are the ones verified; leave out --release.")
            if args.report:
                raise UserError(f"{args.tasks} is a bundle: its audit is the receipt written beside it; leave out "
                                f"--report.")
            holds = verify_bundle(args.tasks, args.sample or SAMPLE, args.seed, registry, args.quiet)
        elif args.report:
            holds = _reported(args, lambda: verify(args.tasks, args.release, args.sample or SAMPLE, args.seed,
                                                   registry, args.quiet))
        else:
            holds = verify(args.tasks, args.release, args.sample or SAMPLE, args.seed, registry, args.quiet)
    finally:
        set_quiet(False)
    return EXIT_OK if holds else EXIT_FAILURES


def _reported(args, audit) -> bool:
    """Run ``audit`` with what it prints also kept, then write that to ``args.report``
    (:mod:`relbench.audit_report`); the audit's outcome."""
    import contextlib
    import time

    from relbench.audit_report import Tee, report_text
    from relbench.cache import atomic_write_bytes, file_sha256
    from relbench.leaderboard import RELEASE
    from relbench.publish import default_folder
    from relbench.results import environment, git_revision
    from relbench.verify import SAMPLE

    if args.report.is_dir():
        raise UserError(f"--report {args.report} is a folder; name the file to write, e.g. {args.report / 'AUDIT.md'}.")
    tee, start = Tee(sys.stdout), time.monotonic()
    with contextlib.redirect_stdout(tee):
        holds = audit()
    release = f" --release {args.release}" if args.release else ""
    against = getattr(args, "against", None)
    command = f"relbench verify {args.tasks}{release} --against {against}" if against else \
        f"relbench verify {args.tasks} --sample {args.sample or SAMPLE} --seed {args.seed}{release}"
    release_table = args.release or default_folder(args.tasks) / RELEASE
    tables = {str(t): file_sha256(t) for t in (release_table, against) if t is not None and t.is_file()}
    what = "compared it row by row with another results table (nothing recomputed)" if against else \
        "recomputed a sample of its units from scratch (a fresh cache and store)"
    text = report_text(tee.text(), command, git_revision(), environment(), time.monotonic() - start, holds, tables,
                       what)
    atomic_write_bytes(args.report, text.encode())
    print(f"wrote the audit to {args.report}")
    return holds


def _cmd_submit(args, registry) -> int:
    """``relbench submit``: the bundle of the units of the plan computed here (:mod:`relbench.bundle`)."""
    from relbench.bundle import submit

    _, runner = _stored_suite(args, registry)
    runner.only = args.only
    to = args.to or runner.store.root / "submission.zip"
    manifest = submit(runner.plans(), runner.store, args.tasks, to)
    reused = sum(manifest["reused"].values())
    print(f"wrote {to}: {sum(manifest['units'].values())} units of {len(manifest['units'])} tasks computed here "
          f"(revisions {', '.join(manifest['revisions'])}; {reused} units taken from a release left out). Check it: "
          f"`relbench verify {to} --sample 30`.")
    return EXIT_OK


def _cmd_export(args, registry) -> int:
    from relbench.export import write

    if args.all and (args.summary or args.release):
        raise UserError("--all exports every stored line of the results store, older identities included; the "
                        "pages (--summary) and a release (--release) hold only current ones. Leave out --all.")
    if args.release:
        df, what, folder = _release_export(args, registry)
    else:
        df, what, folder = _store_export(args, registry)
    path = write(df, args.to or folder / f"{'summary' if args.summary else 'export'}.{args.format}", args.format)
    print(f"wrote {what} to {path}")
    return EXIT_OK


def _store_export(args, registry):
    """``(rows, what they are, default folder)`` of ``relbench export`` from the results
    store: its current rows (every line with ``--all``), or the pages' cells."""
    import pandas as pd

    from relbench.rows import TASK_ERROR
    from relbench.summary import task_summary

    release = _release_path(args)
    hint = (f", or export the shipped release's rows: `relbench export {args.tasks} --release` (reads {release})"
            if release.is_file() else "")
    _, runner = _stored_suite(args, registry, hint)
    if args.summary:
        frames = {tr.task.name: task_summary(tr.task, runner.store.load(
            tr.task.name, units=[*(u.id for u in tr.plan().units), TASK_ERROR])) for tr in runner.plans()}
        return (*_summarised(frames), runner.store.root)
    frames = [runner.store.load(tr.task.name, units=None if args.all else [u.id for u in tr.plan().units])
              for tr in runner.plans()]
    frames = [f for f in frames if not f.empty]
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return df, f"the {len(df)} result rows of {len(frames)} tasks", runner.store.root


def _release_export(args, registry):
    """``(rows, what they are, default folder)`` of ``relbench export --release``: the
    release's rows of the tasks file's tasks, or the cells of their pages."""
    from relbench.summary import release_rows, task_summary

    suite, path, rows, tasks = _release_of(args, registry)
    folder = args.output or suite.output
    if args.summary:
        frames = {t.name: task_summary(t, release_rows(rows, t.name)) for t in tasks}
        return (*_summarised(frames), folder)
    mine = rows[rows["task"].isin([t.name for t in tasks])].reset_index(drop=True)
    return mine, f"the {len(mine)} result rows of {len(tasks)} tasks of the release {path}", folder


def _summarised(frames: dict):
    """The tasks' summary frames (task → frame or None) as one table, and what it holds,
    naming the tasks that gave no cells (no rows, or a kind that gives no summary)."""
    from relbench.summary import combined

    df = combined(list(frames.values()))
    silent = [name for name, frame in frames.items() if frame is None]
    return df, (f"the {len(df)} page cells of {len(frames) - len(silent)} tasks"
                + (f" (none from {', '.join(silent)}: no rows, or a kind that gives no summary)" if silent else ""))


def _release_path(args) -> Path:
    """The results table of the release beside ``args.tasks`` (leaderboards/results.parquet)."""
    from relbench.leaderboard import RELEASE
    from relbench.publish import default_folder

    return default_folder(args.tasks) / RELEASE


def _cmd_cache(args) -> int:
    from relbench.cache import ArtefactCache, EmbeddingCache, describe

    caches = (EmbeddingCache(args.dir), ArtefactCache(args.dir))  # embeddings, then learned anchors
    if args.action == "clear":
        for cache in caches:
            print(f"removed {cache.clear()} entries from {cache.dir}")
        return EXIT_OK
    for cache in caches:
        entries = cache.entries()
        for e in entries:
            print(describe(e))
        total = sum(e["bytes"] for e in entries) / 1e6
        print(f"{len(entries)} entries, {total:.1f} MB in {cache.dir}")
    return EXIT_OK


def _dispatch(args) -> int:
    if args.command == "cache":
        return _cmd_cache(args)
    from relbench.plugins import load_registry

    registry = load_registry(args.disable, args.plugin)
    for name in registry.unmatched_disables():
        print(f"relbench: warning: --disable {name!r} matches no plugin package or plugin; nothing was switched "
              f"off for it (see `relbench plugins`).", file=sys.stderr)
    commands = {"plugins": _cmd_plugins, "run": _cmd_run, "leaderboard": _cmd_leaderboard, "export": _cmd_export,
                "publish": _cmd_publish, "release": _cmd_release, "verify": _cmd_verify,
                "submit": _cmd_submit}
    return commands[args.command](args, registry)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``relbench`` console script."""
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except UserError as exc:
        print(f"relbench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("\nrelbench: interrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `relbench … | head`: the reader has gone, which is not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
