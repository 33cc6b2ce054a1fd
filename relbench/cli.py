"""The ``relbench`` command line.

Exit codes:
    0   everything requested finished
    1   the run finished but some combinations or tasks failed (listed in the summary)
    2   bad input: tasks file, plugin names or parameters, paths, missing assets
    130 interrupted (Ctrl-C); finished work is stored, the same command resumes
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from relbench import __version__
from relbench.errors import UserError

EXIT_OK, EXIT_FAILURES, EXIT_USER, EXIT_INTERRUPTED = 0, 1, 2, 130


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
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run the tasks of a tasks file and write leaderboards",
                         description="Encode each data set once per encoder (cached), evaluate every combination "
                                     "of the grid over the seeds, append results, and render leaderboards. "
                                     "Finished combinations are skipped, so a killed run resumes.")
    run.add_argument("tasks", type=Path, help="tasks YAML file, e.g. tasks.yaml")
    run.add_argument("--dry-run", action="store_true", help="validate and print the expanded grid; compute nothing")
    run.add_argument("--force", action="store_true",
                     help="recompute finished combinations (new rows are appended; embeddings stay cached)")
    run.add_argument("--task", action="append", dest="only", metavar="NAME", help="run only this task (repeatable)")
    run.add_argument("--output", type=Path, help="results directory (default: suite.output)")
    run.add_argument("--leaderboards", type=Path, help="leaderboards directory (default: suite.leaderboards)")
    run.add_argument("--no-leaderboard", action="store_true", help="do not render leaderboards after the run")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress bars or messages")
    run.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                     help="run tasks in N worker processes (0: one per CPU core); tasks over the same data set "
                          "stay in one worker so each embedding is computed once (default 1)")

    sub.add_parser("plugins", help="list installed plugins per interface, with package and parameters",
                   description="List every registered implementation per interface, with the package (and version) "
                               "that provides it and its parameters with defaults.").add_argument(
        "--interface", help="only this interface (dataset, encoder, selector, similarity, stitcher, regularizer, "
                            "metric, task_kind)")

    lb = sub.add_parser("leaderboard", help="rebuild leaderboards from stored results (no computation)",
                        description="Render every task's markdown page and the index from the results store alone.")
    lb.add_argument("tasks", type=Path, nargs="?", default=Path("tasks.yaml"),
                    help="tasks file whose suite.output/leaderboards folders to use (default tasks.yaml)")
    lb.add_argument("--output", type=Path, help="results directory (overrides the tasks file)")
    lb.add_argument("--leaderboards", type=Path, help="leaderboards directory (overrides the tasks file)")

    cache = sub.add_parser("cache", help="list or clear the embedding cache",
                           description="The embedding cache lives in $RELBENCH_CACHE_DIR or ~/.cache/relbench.")
    cache.add_argument("action", choices=["ls", "clear"], help="ls: list entries; clear: delete all entries")
    cache.add_argument("--dir", type=Path, help="cache folder (default $RELBENCH_CACHE_DIR or ~/.cache/relbench)")
    return p


def _cmd_plugins(args, registry) -> int:
    from relbench.config import plugin_fields
    from relbench.interfaces import INTERFACES
    from relbench.plugins import did_you_mean

    if args.interface and args.interface not in INTERFACES:
        raise UserError(f"--interface {args.interface!r} is not an interface; "
                        f"{did_you_mean(args.interface, list(INTERFACES))}")
    for interface in INTERFACES:
        if args.interface and interface != args.interface:
            continue
        print(f"\n{interface}:")
        for name in registry.names(interface):
            reg = registry.by_interface[interface][name]
            print(f"  {name:<22} {reg.summary}  [{reg.package}]")
            fields = plugin_fields(reg.cls)
            if fields:
                print("  " + " " * 22 + " params: " +
                      ", ".join(f"{k}={d!r}" for k, (_, d) in fields.items()))
    return EXIT_OK


def _dry_run(suite) -> int:
    from collections import Counter

    from tabulate import tabulate

    from relbench.stitching import expand_grid

    total = 0
    for task in suite.tasks:
        n_enc = len(task.encoders)
        print(f"\ntask {task.name} ({task.kind.label}) on {task.dataset.label}: {n_enc} encoders "
              f"[{', '.join(e.label for e in task.encoders)}], seeds {task.seeds}, {task.num_anchors} anchors")
        if task.kind.name == "stitching":
            plan = task.kind.build().plan(task)
            fits = Counter(tuple(c.key().values()) for _, c, _, _, _ in plan)
            cells = Counter(tuple(c.key().values()) for _, c, _, sources, _ in plan for _ in sources)
            rows = [[*c.key().values(), fits[tuple(c.key().values())] // len(task.seeds),
                     cells[tuple(c.key().values())] // len(task.seeds)] for c in expand_grid(task)]
            print(tabulate(rows, headers=["selector", "similarity", "stitcher", "regularizer", "fits/seed",
                                          "cells/seed"], tablefmt="simple"))
            print(f"  {len(rows)} combinations × {len(task.seeds)} seeds: {len(plan)} units (decoder fits), "
                  f"{sum(cells.values())} evaluated cells")
            total += len(plan)
        else:
            print(f"  task kind {task.kind.label} with params {task.kind.full_params()}")
            total += 1
    print(f"\n{len(suite.tasks)} tasks, {total} units of work (before skipping finished ones).")
    return EXIT_OK


def _cmd_run(args, registry) -> int:
    from relbench.interfaces import set_quiet

    set_quiet(args.quiet)  # and back when done, for callers of main() in one process
    try:
        return _run(args, registry)
    finally:
        set_quiet(False)


def _run(args, registry) -> int:
    from relbench.config import load_suite
    from relbench.parallel import COMMAND_ENV
    from relbench.results import ensure_writable_dir
    from relbench.runner import Runner

    suite = load_suite(args.tasks, registry)
    if args.dry_run:
        return _dry_run(suite)
    leaderboards = args.leaderboards.resolve() if args.leaderboards else suite.leaderboards
    suite.leaderboards = leaderboards
    if not args.no_leaderboard:
        ensure_writable_dir(leaderboards, "The leaderboards directory",
                            "`suite.leaderboards` in the tasks file or `relbench run --leaderboards DIR`")
    command = os.environ.get(COMMAND_ENV) or "relbench " + " ".join(sys.argv[1:])
    runner = Runner(suite, registry, force=args.force, quiet=args.quiet, only=args.only, output=args.output,
                    command=command)
    jobs = args.jobs if args.jobs > 0 else (os.cpu_count() or 1)
    if jobs > 1 and len(runner.tasks()) > 1:
        return _run_jobs(args, suite, runner, registry, jobs, command)
    interrupted = False
    try:
        stats = runner.run()
    except KeyboardInterrupt:
        interrupted = True
        stats = runner.stats
    print(f"\nencoded {stats.encoded} (encoder, split) banks, reused {stats.cached} from the cache; "
          f"ran {stats.units_done} units, skipped {stats.units_skipped} already finished"
          f"{' (use --force to recompute them)' if stats.units_skipped else ''}.", file=sys.stderr)
    if stats.not_achievable:
        print(f"{stats.not_achievable} cells are not achievable by design (recorded as such).", file=sys.stderr)
    if not args.no_leaderboard:
        _render(suite, runner.store, leaderboards, registry,
                tasks=[t.name for t in suite.tasks if t.name in runner.store.tasks()])
    if interrupted:
        print(f"\ninterrupted: {stats.units_done} units finished in this run are stored in {runner.store.root}; "
              f"run the same command again to resume.", file=sys.stderr)
        return EXIT_INTERRUPTED
    if stats.failures:
        print(f"\n{len(stats.failures)} failures:", file=sys.stderr)
        for failure in stats.failures:
            print(f"  - {failure.splitlines()[0]}", file=sys.stderr)
        return EXIT_FAILURES
    return EXIT_OK


def _render(suite, store, leaderboards, registry, tasks=None) -> None:
    from relbench.leaderboard import render

    written = render(store, leaderboards, registry, {t.name: t.description for t in suite.tasks},
                     tasks=tasks, published={t.name: t.published for t in suite.tasks},
                     claims={t.name: t.claims for t in suite.tasks})
    print(f"wrote {len(written)} leaderboard pages to {leaderboards}", file=sys.stderr)


def _run_jobs(args, suite, runner, registry, jobs: int, command: str) -> int:
    from relbench.parallel import run_parallel
    from relbench.plugins import DISABLE_ENV

    runner.store.ensure_writable()
    runner.cache.ensure_writable()
    if args.disable:
        os.environ[DISABLE_ENV] = ",".join(filter(None, [os.environ.get(DISABLE_ENV, ""), *args.disable]))
    extra = (["--force"] if args.force else []) + (["--output", str(args.output)] if args.output else [])
    code = run_parallel(suite, runner.tasks(), jobs, extra, command)
    if not args.no_leaderboard and code != EXIT_INTERRUPTED:
        _render(suite, runner.store, suite.leaderboards, registry,
                tasks=[t.name for t in suite.tasks if t.name in runner.store.tasks()])
    if code == EXIT_INTERRUPTED:
        print("\ninterrupted: finished units are stored; run the same command again to resume.", file=sys.stderr)
    return code


def _cmd_leaderboard(args, registry) -> int:
    from relbench.config import load_suite
    from relbench.leaderboard import render
    from relbench.results import ResultStore

    descriptions, published, claims, order = {}, {}, {}, []
    output, leaderboards = args.output, args.leaderboards
    if args.tasks.exists():
        suite = load_suite(args.tasks, registry)
        output = output or suite.output
        leaderboards = leaderboards or suite.leaderboards
        descriptions = {t.name: t.description for t in suite.tasks}
        published = {t.name: t.published for t in suite.tasks}
        claims = {t.name: t.claims for t in suite.tasks}
        order = [t.name for t in suite.tasks]
    output, leaderboards = output or Path("results"), leaderboards or Path("leaderboards")
    store = ResultStore(output)
    if not store.tasks():
        raise UserError(f"No stored results in {output}. Run `relbench run tasks.yaml` first, or point "
                        f"--output at the results directory.")
    stored = store.tasks()  # the tasks file's order first (as `run` writes them), then any others
    tasks = [t for t in order if t in stored] + [t for t in stored if t not in order]
    written = render(store, leaderboards, registry, descriptions, tasks=tasks, published=published, claims=claims)
    print(f"wrote {len(written)} pages to {leaderboards}")
    return EXIT_OK


def _cmd_cache(args) -> int:
    from relbench.cache import EmbeddingCache

    cache = EmbeddingCache(args.dir)
    if args.action == "clear":
        print(f"removed {cache.clear()} entries from {cache.dir}")
        return EXIT_OK
    entries = cache.entries()
    for e in entries:
        print(f"{e['key']}  {e.get('label', e.get('encoder')):<20} {e.get('dataset', '?')}/{e.get('split')}/"
              f"{e.get('view')}  {e['shape'][0]}×{e['shape'][1]}  {e['bytes'] / 1e6:.1f} MB")
    total = sum(e["bytes"] for e in entries) / 1e6
    print(f"{len(entries)} entries, {total:.1f} MB in {cache.dir}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``relbench`` console script."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "cache":
            return _cmd_cache(args)
        from relbench.plugins import load_registry

        registry = load_registry(args.disable)
        if args.command == "plugins":
            return _cmd_plugins(args, registry)
        if args.command == "run":
            return _cmd_run(args, registry)
        return _cmd_leaderboard(args, registry)
    except UserError as exc:
        print(f"relbench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("\nrelbench: interrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
