"""A floor under the whole suite that cannot flatter itself: counted FLOPs per stage at the
precision each stage ran, against this machine's measured GEMM peaks.

One run prints:

* **The machine**: the CPU (``lscpu``'s model name, its AMX / AVX-512 BF16 / AVX-512F
  flags), its cores and load average, and the fp32, bf16 and bf16-autocast GEMM peaks on
  one thread and on every core (:mod:`gemm_peaks`).
* **Measured seconds per stage** (worker time: what the units record, summed), from a
  results store (``--store results``: the JSON-lines folder ``relbench run`` writes) or a
  release (``--release leaderboards/results.parquet``), restricted to the tasks file's
  current plan where the stored identities match it (else to its task names, and said so):

  - *encoding*: the ``seconds`` the embedding cache's metadata records for every bank the
    plan reads (each bank once, however many tasks share it); a bank the cache lacks is
    reported as not measured;
  - *PARAM* (any selector that trains: rows that record ``extra.<name>_seconds`` and
    ``extra.<name>_steps``): one training per (task, seed, held-out encoder, similarity),
    its recorded seconds;
  - *adapters*: units with a regularizer (topological densification);
  - *heads*: every other unit's seconds, PARAM units' less their training.

* **Counted FLOPs per stage** (``torch.utils.flop_counter.FlopCounterMode``: matrix
  products and convolutions, and the matrix decompositions' lower bounds of
  :mod:`decomposition_flops` (SVD, eigh, QR, solves, Cholesky); element-wise work is not
  counted, so every count is a lower bound on the work):

  - *encoding*: FLOPs per sample of each encoder on real samples of its data (the torch
    forward: images a batch of 4, texts one at a time so no padding is counted, up to
    ``--text-samples`` of them, so the sequence lengths are the data's), times the rows of
    every bank; an encoder that trains (``setup``) has that training counted too. ONNX
    graphs are counted from the graph (Conv, Gemm, MatMul, with shapes from
    ``onnx.shape_inference``). Encoders whose engine torch cannot see (numpy ones) count
    0 and are listed as not counted;
  - *PARAM*: per-step FLOPs × recorded steps (:func:`compute_floor.count_trainings`);
  - *adapters*, *heads*: two units of the first seed per (task, stage, stitcher) run
    together through the runner into a temporary results folder on **synthetic banks** of the
    real shapes (random rows of each encoder's width; matrix-product FLOPs depend on
    shapes only, up to data-dependent pruning), the count split at each unit's store
    append: the first unit carries the shared work it triggers (anchors, shared head
    fits), the second only its own, so a group counts shared work once per sharing scope
    (each seed and combination, where the two samples share one; else once per seed) and
    each unit's own work once (:func:`group_flops`). Adapter groups are kept apart by
    regularizer (a tuned one trains once per candidate). Shared work reused across groups
    is counted once per group, so this part can overcount it. Learned-selector units are
    represented by non-learned units of the same stitcher (their training is PARAM's).

* **The table**: stage, units or trainings, TFLOP, precision, measured seconds, floor
  seconds (FLOPs / all-core GEMM peak of that precision; bf16 uses the better of bf16
  and bf16-autocast) and measured/floor; then the suite's TFLOP, its floor (wall, every
  core busy at peak) and, with ``--wall SECONDS`` (the measured cold wall time of the
  run), the measured/floor ratio, against the targets (≤ 45 min, ≤ 3× the floor).

Counting the representative units and the encoders takes minutes; the counts are kept
in ``floor-counts.json`` beside the store or release, and ``--quick`` reuses them
(counting nothing new: what was never counted is reported as not counted).

    python benchmarks/suite_floor.py [tasks.yaml] (--release leaderboards/results.parquet | --store results)
                                     [--wall SECONDS] [--task NAME]... [--quick] [--rounds 2]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from decomposition_flops import counter as flop_counter
from gemm_peaks import describe, measure_peaks

#: the stages of the table, in order (a training selector's stage is named by its prefix, upper-cased)
ENCODING, ADAPTERS, HEADS = "encoding", "adapters", "heads"
#: the targets of the issue: the whole suite's cold wall time, and its ratio to the floor
TARGET_SECONDS, TARGET_RATIO = 45 * 60, 3.0
#: ISA features that decide the bf16 peak, as ``lscpu`` names the flags
ISA_FLAGS = {"AMX-BF16": "amx_bf16", "AMX-TILE": "amx_tile", "AVX-512 BF16": "avx512_bf16",
             "AVX-512F": "avx512f", "AVX2": "avx2"}
COUNTS_FILE = "floor-counts.json"


# ------------------------------------------------------------------ the machine

def lscpu_fields(text: str) -> dict[str, str]:
    """``lscpu``'s ``Key: value`` lines as a dict."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def isa_features(flags: str) -> dict[str, bool]:
    """Which of :data:`ISA_FLAGS` a ``Flags`` line lists."""
    present = set(flags.split())
    return {name: flag in present for name, flag in ISA_FLAGS.items()}


def machine_line() -> str:
    """The CPU, its ISA features, cores and load average on one line."""
    try:
        fields = lscpu_fields(subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout)
    except (OSError, subprocess.SubprocessError):
        fields = {}
    isa = isa_features(fields.get("Flags", ""))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"CPU: {fields.get('Model name', 'unknown')}; " + ", ".join(f"{k} {'yes' if v else 'no'}"
                                                                      for k, v in isa.items())
            + f"; {os.cpu_count()} cores, torch {torch.get_num_threads()} threads; load average {load}")


# ------------------------------------------------------------------ measured seconds

#: per-unit columns kept (those present)
UNIT_COLUMNS = ["task", "unit", "seconds", "selector", "regularizer", "stitcher", "seed", "held_out", "similarity",
                "precision"]
_TRAINING = re.compile(r"^extra\.(\w+)_steps$")


def training_prefixes(columns) -> list[str]:
    """Selectors that train and record it: ``extra.<p>_steps`` with ``extra.<p>_seconds``."""
    cols = set(columns)
    return [m.group(1) for c in cols if (m := _TRAINING.match(c)) and f"extra.{m.group(1)}_seconds" in cols]


def _training_columns(prefix: str) -> list[str]:
    return [f"extra.{prefix}_{x}" for x in ("seconds", "steps", "banks", "train_samples")]


def read_release(path: Path) -> pd.DataFrame:
    """The rows of a results release (parquet), only the columns this script reads."""
    import pyarrow.parquet as pq

    names = pq.read_schema(path).names
    prefixes = training_prefixes(names)
    wanted = UNIT_COLUMNS + [c for p in prefixes for c in _training_columns(p)]
    return pd.read_parquet(path, columns=[c for c in wanted if c in names])


def read_store(path: Path, plan: dict[str, list[str]] | None) -> pd.DataFrame:
    """The rows of a results store, flattened (``extra.x`` columns), newest line per unit;
    only the plan's units where ``plan`` (task → unit ids) is given and its ids are stored."""
    from relbench.results import ResultStore

    store = ResultStore(path)
    frames = []
    for task in store.tasks():
        ids = (plan or {}).get(task)
        df = store.load(task, units=ids) if ids else pd.DataFrame()
        if df.empty and (plan is None or task in plan):
            df = store.load(task)
        if not df.empty:
            frames.append(pd.json_normalize(df.drop(columns=["inputs"], errors="ignore").to_dict("records")))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=UNIT_COLUMNS)


def restrict(rows: pd.DataFrame, plan: dict[str, list[str]]) -> tuple[pd.DataFrame, list[str]]:
    """``rows`` of the plan's tasks; of a task, only its planned units where any are
    stored (else every stored unit of the task, named in the returned notes)."""
    kept, notes = [], []
    for task, ids in plan.items():
        of_task = rows[rows.task == task]
        if of_task.empty:
            notes.append(f"{task}: no stored units")
            continue
        planned = of_task[of_task.unit.isin(set(ids))]
        if planned.empty:
            notes.append(f"{task}: stored identities differ from the plan; all {of_task.unit.nunique()} stored units "
                         f"counted")
            planned = of_task
        kept.append(planned)
    return (pd.concat(kept, ignore_index=True) if kept else rows.iloc[:0]), notes


def units_of(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (task, unit), with ``precision`` (fp32 where not recorded) and the
    unit's ``stage``: adapters where a regularizer is set, heads otherwise."""
    units = rows.drop_duplicates(["task", "unit"]).copy()
    if "precision" not in units:
        units["precision"] = None
    units["precision"] = units["precision"].fillna("fp32")
    reg = units["regularizer"] if "regularizer" in units else pd.Series(None, index=units.index)
    units["stage"] = [ADAPTERS if isinstance(r, str) and r not in ("", "-", "none") else HEADS for r in reg]
    units["seconds"] = pd.to_numeric(units["seconds"], errors="coerce").fillna(0.0)
    return units


def trainings_of(units: pd.DataFrame) -> pd.DataFrame:
    """One row per recorded selector training: stage, task, selector (label), seed, held_out, similarity,
    seconds, steps, banks, rows, precision (deduplicated: every unit that uses a training
    records it, the first pays for it)."""
    out = []
    for prefix in training_prefixes(units.columns):
        seconds, steps, banks, rows = _training_columns(prefix)
        got = units.dropna(subset=[seconds, steps])
        if got.empty:
            continue
        keys = [c for c in ("task", "seed", "held_out", "similarity") if c in got]
        got = got.drop_duplicates(keys)
        out.append(pd.DataFrame({
            "stage": prefix.upper(), "task": got.task, "selector": got.get("selector"), "seed": got.get("seed"), "held_out": got.get("held_out"),
            "similarity": got.get("similarity"), "seconds": got[seconds].astype(float),
            "steps": got[steps].astype(int), "banks": got.get(banks), "rows": got.get(rows),
            "precision": got.precision}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(
        columns=["stage", "task", "selector", "seed", "held_out", "similarity", "seconds", "steps", "banks", "rows", "precision"])


# ------------------------------------------------------------------ counting FLOPs

def onnx_matmul_flops(path: Path, inputs: dict[str, list[int]] | None = None) -> float:
    """Matrix-product FLOPs of one run of an ONNX graph (Conv, ConvTranspose, Gemm,
    MatMul: 2 × multiply-adds), shapes from ``onnx.shape_inference`` after fixing every
    dynamic input dimension (``inputs`` name → shape, else every dynamic dim 1)."""
    import onnx
    from onnx import shape_inference

    model = onnx.load(str(path))
    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        fixed = (inputs or {}).get(value.name)
        for i, d in enumerate(dims):
            if fixed is not None:
                d.dim_value = fixed[i]
            elif not d.dim_value:
                d.dim_value = 1
    model = shape_inference.infer_shapes(model)
    shapes = {}
    for v in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        dims = v.type.tensor_type.shape.dim
        if dims and all(d.dim_value for d in dims):
            shapes[v.name] = [d.dim_value for d in dims]
    for init in model.graph.initializer:
        shapes[init.name] = list(init.dims)
    total = 0.0
    for node in model.graph.node:
        total += _node_flops(node, shapes)
    return total


def _node_flops(node, shapes: dict[str, list[int]]) -> float:
    """2 × multiply-adds of one Conv / ConvTranspose / Gemm / MatMul node (0 when a shape is unknown)."""
    ins = [shapes.get(n) for n in node.input]
    out = shapes.get(node.output[0]) if node.output else None
    if node.op_type in ("Conv", "ConvTranspose") and out and ins[1]:
        group = next((a.i for a in node.attribute if a.name == "group"), 1) or 1
        w = ins[1]  # Conv: (out, in/group, kh, kw); ConvTranspose: (in, out/group, kh, kw)
        per_output = (w[1] if node.op_type == "Conv" else w[0] // group) * _prod(w[2:])
        return 2.0 * _prod(out) * per_output
    if node.op_type in ("Gemm", "MatMul") and out and ins[0]:
        trans_a = next((a.i for a in node.attribute if a.name == "transA"), 0)
        k = ins[0][-2] if trans_a else ins[0][-1]
        return 2.0 * _prod(out) * k
    return 0.0


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= int(x)
    return p


@dataclass
class EncoderCount:
    """The counted work of one encoder on one data set view: FLOPs per sample (its
    forward), FLOPs of its ``setup`` (training, for encoders that learn), output width,
    and how it was counted."""

    flops_per_sample: float
    setup_flops: float
    width: int
    how: str


def count_encoder(task_run, spec, text_samples: int = 128) -> EncoderCount:
    """Count encoder ``spec`` of ``task_run`` on real samples of its view (see the module
    docstring). Forces the torch backend where the encoder offers one."""
    from relbench.descriptions import loaded

    data = loaded(task_run.dataset())
    view = task_run.encoder_view(spec.label)
    split = data.splits["train"]
    modality = data.view_modalities.get(view, "")
    k = 4 if modality == "image" else text_samples
    items = list(split.views[view][:k])
    ctx = task_run.encodings.context(spec, data, view)
    ctx.batch_size = 4 if modality == "image" else 1
    encoder = spec.build()
    if hasattr(encoder, "backend"):
        encoder.backend = "torch"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with flop_counter() as setup_counter:
            encoder.setup(ctx)
        with flop_counter() as counter:
            X = encoder.encode(items[:4], ctx)  # an engine torch cannot see shows here, cheaply
            if counter.get_total_flops() and len(items) > 4:
                encoder.encode(items[4:], ctx)
        counted = len(items) if counter.get_total_flops() else len(items[:4])
        per_sample, how = counter.get_total_flops() / counted, f"torch, {counted} samples"
        graph = getattr(encoder, "graph_path", None)
        if per_sample == 0 and graph is not None:
            shape = [1, encoder.crop, encoder.crop, 3] if encoder.layout == "nhwc" else [1, 3, encoder.crop,
                                                                                        encoder.crop]
            per_sample, how = onnx_matmul_flops(graph(), {_first_input(graph()): shape}), f"ONNX graph {shape}"
        elif per_sample == 0:
            how = "not counted (no torch matrix products: lookups or a numpy engine)"
    finally:
        torch.set_num_threads(threads)
        getattr(encoder, "release", lambda: None)()
    return EncoderCount(per_sample, setup_counter.get_total_flops(), int(X.shape[1]), how)


def _first_input(path: Path) -> str:
    import onnx

    return onnx.load(str(path), load_external_data=False).graph.input[0].name


def synthetic_banks(widths: dict[str, int], seed: int = 0):
    """A context in which the runner reads random banks of the given encoder widths (the
    real rows and ids) instead of the embedding cache or the encoders."""
    from relbench.encoding import TaskEncodings

    def entry(self, spec, data, view, split):
        n = len(data.splits[split])
        gen = torch.Generator().manual_seed(seed)
        return torch.randn(n, widths[spec.label], generator=gen), {"n": n, "report": {}}

    def ahead(self):
        self._ahead = {}

    @contextlib.contextmanager
    def patched():
        saved = TaskEncodings.entry, TaskEncodings.encode_ahead
        TaskEncodings.entry, TaskEncodings.encode_ahead = entry, ahead
        try:
            yield
        finally:
            TaskEncodings.entry, TaskEncodings.encode_ahead = saved
    return patched()


def unit_group(display: dict) -> tuple[str, str]:
    """(stage, kind of unit) of a planned unit: adapters where a regularizer is set; the
    kind is its stitcher (or ``unit`` for kinds without one), and in the adapters stage
    its regularizer too (a same-budget control trains once where a tuned regularizer
    trains once per candidate, so one could not stand for the other)."""
    reg = display.get("regularizer")
    kind = str(display.get("stitcher") or "unit")
    if isinstance(reg, str) and reg not in ("", "-", "none"):
        return ADAPTERS, f"{kind}+{reg}"
    return HEADS, kind


#: the display columns that tell apart units sharing work: a kind shares fits between
#: the units of one scope (a stitching unit's decoders and trained sources, per seed and
#: combination, serve every target; a symmetry pair's head serves every source)
UNIT_SIDES = ("source", "target")


def sharing_scope(display: dict) -> tuple:
    """The scope whose units share work: the unit's display without its sides."""
    return tuple(sorted((k, str(v)) for k, v in display.items() if k not in UNIT_SIDES))


@dataclass
class Group:
    """The units of one (stage, kind of unit) of a task's plan: how many, over how many
    seeds and sharing scopes (:func:`sharing_scope`), and up to two units of its first
    seed whose selector does not train, with their scopes."""

    n: int = 0
    seeds: set = dataclasses.field(default_factory=set)
    scopes: set = dataclasses.field(default_factory=set)
    sample: list = dataclasses.field(default_factory=list)
    sample_scopes: list = dataclasses.field(default_factory=list)

    @property
    def shared_sample(self) -> bool:
        """True when the two sample units share a scope (the second's count is then its own work only)."""
        return len(set(self.sample_scopes)) == 1


def groups_of(plan, learned: set[str]) -> dict[tuple[str, str], Group]:
    """The plan's units by (stage, kind of unit), each with its sample to count: the
    first two units of the first seed whose selector does not train."""
    seeds = sorted({u.display.get("seed") for u in plan.units if u.display.get("seed") is not None})
    first = seeds[0] if seeds else None
    groups: dict[tuple[str, str], Group] = {}
    for u in plan.units:
        g = groups.setdefault(unit_group(u.display), Group())
        scope = sharing_scope(u.display)
        g.n += 1
        g.seeds.add(u.display.get("seed"))
        g.scopes.add(scope)
        if len(g.sample) < 2 and u.display.get("seed") == first and u.display.get("selector") not in learned:
            g.sample.append(u.id)
            g.sample_scopes.append(scope)
    return groups


def group_flops(first: float, second: float | None, n: int, seeds: int, scopes: int | None = None) -> float:
    """A group's FLOPs from its first unit run alone (``first``: its own work and the
    shared work it triggered) and the FLOPs of a second unit run after it (its own work
    only, the shared work being done): each sharing scope pays the shared work once,
    each of the ``n`` units its own.

    ``scopes``: how many scopes the group's units fall in, when its two sample units
    share one (:attr:`Group.shared_sample`: the shared work the first unit triggered is
    then known to be that scope's, e.g. a stitching combination's trained decoders, and
    every combination of every seed pays it); otherwise ``None``, and the shared work is
    counted once per seed (where the samples' scopes differ, what they share is not
    known, and once per seed is the lower bound). Without a second unit, every unit
    counts as the first."""
    if second is None:
        return first * n
    marginal = min(max(second, 0.0), first)
    return (scopes or seeds) * (first - marginal) + n * marginal


def count_units(suite, registry, task, unit_ids: list[str], widths: dict[str, int]) -> list[float] | None:
    """Matrix-product FLOPs of ``unit_ids`` of ``task`` run together on synthetic banks
    into a temporary results folder, split at each unit's store append (the first unit
    also carries the shared work it triggered); None when the task failed."""
    from relbench.runner import Runner

    with tempfile.TemporaryDirectory() as out, synthetic_banks(widths):
        runner = Runner(dataclasses.replace(suite, tasks=[task]), registry, force=True, quiet=True, output=Path(out))
        (task_run,) = runner.plans()
        task_run.restrict(set(unit_ids))
        marks: list[float] = []
        append = runner.store.append

        def marked(name, unit, *args, **kwargs):
            append(name, unit, *args, **kwargs)
            if unit in unit_ids:
                marks.append(float(counter.get_total_flops()))

        runner.store.append = marked
        with flop_counter() as counter:
            runner.compute(task_run)
        if runner.stats.failures or not marks:
            return None
        return [b - a for a, b in zip([0.0, *marks], marks)]


# ------------------------------------------------------------------ the floor and the table

def best_peaks(peaks: dict, kept: dict, cpu: str) -> tuple[dict, list[str]]:
    """``peaks`` with each figure raised to the best kept for this ``cpu`` (``kept``:
    ``"cpu|mode|threads"`` → [FLOP/s, load], updated in place with the new bests), and
    the figures so raised, described."""
    out, raised = dict(peaks), []
    for (mode, threads), peak in peaks.items():
        key = f"{cpu}|{mode}|{threads}"
        best, load = kept.get(key, (0.0, 0.0))
        if best > peak.flops:
            out[mode, threads] = dataclasses.replace(peak, flops=best, load=load)
            raised.append(f"{mode} {threads} thread{'s' * (threads > 1)} {best / 1e9:.0f} GFLOP/s (load {load:.1f})")
        else:
            kept[key] = [peak.flops, peak.load]
    return out, raised


def peak_of(peaks, precision: str, cores: int) -> float:
    """All-core FLOP/s at ``precision``: fp32, or the better of bf16 and bf16-autocast."""
    if precision == "bf16":
        return max(peaks["bf16", cores].flops, peaks["bf16-autocast", cores].flops)
    return peaks["fp32", cores].flops


def verdict(floor: float, wall: float | None) -> list[str]:
    """The target lines: the floor against 45 min, the measured wall against 45 min and 3× the floor."""
    lines = [f"target ≤ {TARGET_SECONDS // 60} min: floor {floor / 60:.1f} min — "
             + ("cannot be met on this machine" if floor > TARGET_SECONDS else "not excluded by the floor")]
    if wall is not None:
        ratio = wall / floor if floor else float("inf")
        ok_time, ok_ratio = wall <= TARGET_SECONDS, ratio <= TARGET_RATIO
        lines.append(f"measured cold wall {wall / 60:.1f} min: {'meets' if ok_time else 'misses'} ≤ "
                     f"{TARGET_SECONDS // 60} min; measured/floor {ratio:.1f}× — {'meets' if ok_ratio else 'misses'} "
                     f"≤ {TARGET_RATIO:.0f}×")
    return lines


def table(stages: list[dict], peaks, cores: int) -> tuple[str, float, float]:
    """The stage table, and the suite's FLOPs and all-core floor seconds."""
    from tabulate import tabulate

    rows, flops_all, floor_all = [], 0.0, 0.0
    for s in stages:
        floor = s["flops"] / peak_of(peaks, s["precision"], cores) if s["flops"] else 0.0
        flops_all += s["flops"]
        floor_all += floor
        compared = s.get("ratio_flops", s["flops"]) / peak_of(peaks, s["precision"], cores)  # what was timed
        timed = s.get("ratio_seconds", s["seconds"])
        ratio = f"{timed / compared:.1f}×" if compared and timed is not None else "-"
        rows.append([s["stage"], s["count"], f"{s['flops'] / 1e12:.2f}", s["precision"],
                     "-" if s["seconds"] is None else f"{s['seconds']:.0f}", f"{floor:.1f}", ratio, s["note"]])
    headers = ["stage", "units / trainings", "TFLOP", "precision", "measured s", "floor s", "measured/floor",
               "counted"]
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True), flops_all, floor_all


# ------------------------------------------------------------------ main

def _counts_path(args) -> Path:
    """Where the counts are kept: ``--counts``, else in the store or beside the release."""
    if args.counts:
        return Path(args.counts)
    return Path(args.store) / COUNTS_FILE if args.store else Path(args.release).resolve().parent / COUNTS_FILE


def encoding_stage(runner, plans, counts: dict, quick: bool, text_samples: int) -> tuple[list[dict], dict[str, int]]:
    """Stage rows for encoding (one per precision: always fp32) and every encoder's width."""
    needs, by_ident, ident_of = {}, {}, {}  # each bank once; each encoder on each data view once
    for tr in plans:
        for need in tr.bank_needs():
            needs.setdefault(need.key, (tr, need))
            ident = json.dumps({k: need.identity[k] for k in ("encoder", "params", "data", "view")}, sort_keys=True,
                               default=str)
            by_ident.setdefault(ident, (tr, need))
            ident_of.setdefault((tr.task.name, need.label), ident)
    encoders = counts.setdefault("encoders", {})
    for ident, (tr, need) in by_ident.items():
        if ident not in encoders and not quick:
            try:
                encoders[ident] = dataclasses.asdict(count_encoder(tr, tr.encodings.spec(need.label), text_samples))
            except Exception as exc:  # noqa: BLE001 - reported, never fatal
                encoders[ident] = {"flops_per_sample": 0.0, "setup_flops": 0.0, "width": 0, "how": f"failed: {exc}"}
    widths: dict[str, dict[str, int]] = {}
    for (task, label), ident in ident_of.items():
        if encoders.get(ident, {}).get("width"):
            widths.setdefault(task, {})[label] = encoders[ident]["width"]
    flops, flops_measured, seconds, measured, missing, uncounted = 0.0, 0.0, 0.0, 0, set(), set()
    setups_done = set()
    for key, (tr, need) in needs.items():
        ident = ident_of[tr.task.name, need.label]
        got = encoders.get(ident)
        bank = 0.0
        if got is None or not got["flops_per_sample"]:
            uncounted.add(need.label)
        else:
            bank = got["flops_per_sample"] * need.n
            if ident not in setups_done:
                bank += got["setup_flops"]
                setups_done.add(ident)
        flops += bank
        try:
            seconds += float(json.loads((runner.cache.dir / f"{key}.json").read_text())["seconds"])
            measured += 1
            flops_measured += bank
        except (OSError, ValueError, KeyError):
            missing.add(need.label)
    note = f"ratio over the {measured} banks with a recorded time"
    if missing:
        note += f"; no recorded time: {', '.join(sorted(missing))}"
    if uncounted:
        note += f"; FLOPs not counted (lookups, numpy engines): {', '.join(sorted(uncounted))}"
    stage = {"stage": ENCODING, "count": f"{len(needs)} banks", "flops": flops, "precision": "fp32",
             "seconds": seconds if measured else None, "ratio_flops": flops_measured, "note": note}
    return [stage], widths


def training_stages(plans, trainings: pd.DataFrame, widths: dict, counts: dict, quick: bool) -> list[dict]:
    """Stage rows for the selectors' trainings (PARAM), per precision."""
    from compute_floor import count_trainings

    stages = []
    by_task = {tr.task.name: tr for tr in plans}
    for (stage, precision), part in trainings.groupby(["stage", "precision"]):
        flops, notes = 0.0, []
        for (task, _), rows in part.groupby(["task", "selector"]):
            key = f"{stage}|{task}|{set(rows.selector)}|{precision}|{len(rows)}|{int(rows.steps.sum())}"
            got = counts.setdefault("trainings", {}).get(key)
            tr = by_task.get(task)
            if got is None and not quick and tr is not None and task in widths:
                (label,) = set(rows.selector)
                selector = next(s for s in tr.task.grid["selectors"] if s.label == label).build()
                sims = {s.label: s for s in tr.task.grid["similarities"]}
                _, got, _ = count_trainings(selector, sims, tr.task.num_anchors, widths[task], rows)
                counts["trainings"][key] = got
            if got is None:
                notes.append(f"{task} not counted")
            else:
                flops += got
        stages.append({"stage": stage, "count": f"{len(part)} trainings, {int(part.steps.sum()):,} steps",
                       "flops": flops, "precision": precision, "seconds": float(part.seconds.sum()),
                       "note": "; ".join(notes) or "per-step count × recorded steps"})
    return stages


def task_seconds(units: pd.DataFrame, trainings: pd.DataFrame) -> dict[tuple[str, str], float]:
    """Measured seconds per (task, stage) of the units, heads less the trainings inside them."""
    out = units.groupby(["task", "stage"]).seconds.sum().to_dict()
    for task, part in trainings.groupby("task"):
        out[task, HEADS] = max(out.get((task, HEADS), 0.0) - float(part.seconds.sum()), 0.0)
    return out


def unit_stages(suite, registry, plans, units: pd.DataFrame, trainings: pd.DataFrame, widths: dict,
                counts: dict, quick: bool, save=lambda: None) -> list[dict]:
    """Stage rows for adapters and heads, one per (stage, precision): representative units
    counted × units of their kind; the measured/floor ratio is taken over the tasks whose
    every group was counted. ``save`` is called after each count (the counts survive an
    interrupted run)."""
    learned = set(trainings.selector.dropna())
    seconds = task_seconds(units, trainings)
    rows: dict[tuple[str, str], dict] = {}
    for tr in plans:
        stored = units[units.task == tr.task.name].precision
        precision = stored.mode().iloc[0] if len(stored) else getattr(tr.task, "precision", "fp32")
        for stage, part in _by_stage(tr, learned).items():
            flops, missing = 0.0, []
            for kind, g in part.items():
                key = f"{tr.task.name}|{stage}|{kind}"
                got = counts.setdefault("units", {}).get(key)
                if got is None and not quick and g.sample:
                    got = count_units(suite, registry, tr.task, g.sample, widths.get(tr.task.name, {}))
                    counts["units"][key] = got
                    save()
                if got:
                    flops += group_flops(got[0], got[1] if len(got) > 1 else None, g.n, len(g.seeds),
                                         len(g.scopes) if g.shared_sample else None)
                else:
                    missing.append(kind)
            row = rows.setdefault((stage, precision), {"stage": stage, "precision": precision, "n": 0, "flops": 0.0,
                                                       "seconds": 0.0, "ratio_flops": 0.0, "ratio_seconds": 0.0,
                                                       "missing": []})
            row["n"] += sum(g.n for g in part.values())
            row["flops"] += flops
            row["seconds"] += seconds.get((tr.task.name, stage), 0.0)
            if missing:
                row["missing"].append(f"{tr.task.name} ({', '.join(missing)})")
            else:
                row["ratio_flops"] += flops
                row["ratio_seconds"] += seconds.get((tr.task.name, stage), 0.0)
    out = []
    for (stage, _), row in sorted(rows.items()):
        note = "2 units counted per (task, stitcher[, regularizer]), shared work once per seed and combination"
        if row["missing"]:
            note += f"; ratio without the tasks not counted: {'; '.join(row.pop('missing'))}"
        row.pop("missing", None)
        out.append({**row, "count": f"{row.pop('n')} units", "note": note})
    return out


def _by_stage(task_run, learned: set[str]) -> dict[str, dict[str, Group]]:
    """A task's :func:`groups_of` as stage → kind of unit → group."""
    out: dict[str, dict[str, Group]] = {}
    for (stage, kind), g in groups_of(task_run.plan(), learned).items():
        out.setdefault(stage, {})[kind] = g
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="?", default="tasks.yaml")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--release", default="leaderboards/results.parquet", help="a results release (parquet)")
    source.add_argument("--store", help="a results store folder (what `relbench run` writes)")
    parser.add_argument("--wall", type=float, help="the measured cold wall time of the run, in seconds")
    parser.add_argument("--task", action="append", default=[], help="only these tasks (repeatable; default all)")
    parser.add_argument("--quick", action="store_true", help=f"count nothing new: reuse {COUNTS_FILE}")
    parser.add_argument("--counts", help=f"where the counts are kept (default {COUNTS_FILE} in the store, or beside "
                                         f"the release)")
    parser.add_argument("--rounds", type=int, default=2, help="times the peak measurement is repeated (default 2)")
    parser.add_argument("--text-samples", type=int, default=128, help="texts counted per text encoder (default 128)")
    args = parser.parse_args()

    from relbench.config import load_suite
    from relbench.plugins import load_registry
    from relbench.runner import Runner

    machine = machine_line()
    print(machine)
    peaks = measure_peaks(rounds=args.rounds)
    print(describe(peaks, args.rounds))
    cores = torch.get_num_threads()
    counts_path = _counts_path(args)
    counts = json.loads(counts_path.read_text()) if counts_path.exists() else {}
    peaks, kept = best_peaks(peaks, counts.setdefault("peaks", {}), machine.split(";")[0])
    if kept:
        print("  used instead, the best measured here before (a peak measured low on a loaded machine would make "
              "every floor high and every ratio flatter): " + ", ".join(kept))

    registry = load_registry()
    suite = load_suite(Path(args.tasks), registry)
    with tempfile.TemporaryDirectory() as empty:
        runner = Runner(suite, registry, quiet=True, only=args.task or None, output=Path(empty))
        plans = runner.plans()
        plan = {tr.task.name: [u.id for u in tr.plan().units] for tr in plans}
        rows = read_store(Path(args.store), plan) if args.store else read_release(Path(args.release))
        rows, notes = restrict(rows, plan)
        units = units_of(rows)
        trainings = trainings_of(units)

        def save() -> None:
            with contextlib.suppress(OSError):
                counts_path.write_text(json.dumps(counts, indent=1, sort_keys=True))

        stages, widths = encoding_stage(runner, plans, counts, args.quick, args.text_samples)
        stages += training_stages(plans, trainings, widths, counts, args.quick)
        save()
        stages += unit_stages(suite, registry, plans, units, trainings, widths, counts, args.quick, save)
    save()

    print(f"\nresults: {args.store or args.release}; {units.unit.nunique()} units of {len(plan)} tasks"
          + "".join(f"\n  {n}" for n in notes))
    text, flops_all, floor_all = table(stages, peaks, cores)
    print(text)
    worker = sum(s["seconds"] or 0.0 for s in stages)
    print(f"\nsuite: {flops_all / 1e12:.1f} TFLOP (matrix products: a lower bound); floor {floor_all / 60:.1f} min wall "
          f"on {cores} cores at each stage's GEMM peak; measured worker time {worker / 60:.1f} min, "
          f"{worker / floor_all:.1f}× the floor" if floor_all else "suite: nothing counted")
    for line in verdict(floor_all, args.wall) if floor_all else []:
        print("  " + line)


if __name__ == "__main__":
    main()
