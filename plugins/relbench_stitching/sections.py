"""The stitching page's smaller tables: cross-seed against cross-architecture pairs,
what encoders reported, per-cell diagnostics, and the failed combinations."""

from __future__ import annotations

import json

import numpy as np

from relbench.api import arrow, deferred_import, fmt, listing, table
from relbench_stitching.intervals import COMBO
from relbench_stitching.scores import combo_label

pd = deferred_import("pandas")


def pair_kinds(df: pd.DataFrame) -> dict[tuple[str, str], str]:
    """``(source, target)`` → ``cross-seed`` when the two encoders are the same plugin
    with the same parameters but their ``seed``, else ``cross-architecture`` (from the
    encoder identities stored with the rows; empty when they are not there)."""
    if "inputs" not in df:
        return {}
    encoders: dict[str, dict] = {}
    for inputs in df["inputs"].dropna():
        if isinstance(inputs, dict):
            encoders.update(inputs.get("encoders", {}))
            break

    def recipe(label: str):
        e = encoders.get(label, {})
        params = {k: v for k, v in (e.get("params") or {}).items() if k != "seed"}
        return e.get("class"), json.dumps(params, sort_keys=True, default=str), e.get("view")

    out = {}
    for a in encoders:
        for b in encoders:
            if a != b:
                same = recipe(a) == recipe(b) and "seed" in (encoders[a].get("params") or {})
                out[(a, b)] = "cross-seed" if same else "cross-architecture"
    return out


def pair_kind_section(df: pd.DataFrame, kinds: dict[tuple[str, str], str], metric: str, direction: str) -> str:
    """Stitched means over cross-seed pairs apart from cross-architecture pairs
    (``kinds``: :func:`pair_kinds`), when a task has both (same architecture, different
    training seed vs different networks)."""
    if len(set(kinds.values())) < 2:
        return ""
    d = df[(df["metric"] == metric) & (df["status"] == "ok") & (df["source"] != df["target"])].copy()
    d["pairs"] = [kinds.get((s, t), "?") for s, t in zip(d["source"], d["target"])]
    rows = []
    for combo, g in d.groupby(COMBO, sort=False, dropna=False):
        cells = []
        for kind in ("cross-seed", "cross-architecture"):
            per_seed = g[g["pairs"] == kind].groupby("seed")["value"].mean()
            cells.append(fmt(per_seed.mean(), per_seed.std(ddof=0) if len(per_seed) > 1 else np.nan)
                         if len(per_seed) else "-")
        rows.append([combo_label(dict(zip(COMBO, combo))), *cells])
    seed_pairs = sorted(f"{a}→{b}" for (a, b), k in kinds.items() if k == "cross-seed")
    return (f"\n### Cross-seed and cross-architecture pairs ({arrow(metric, direction)})\n\n"
            f"Cross-seed pairs differ only in the encoder's training seed; every other pair is cross-architecture. "
            f"Mean over the pairs of each kind, mean ± std over seeds.\n\n{listing('Cross-seed pairs', seed_pairs)}"
            f"\n\n" + table(rows, headers=["combination", "cross-seed", "cross-architecture"]) + "\n")


def encoder_report_section(df: pd.DataFrame) -> str:
    """What encoders reported about themselves (:meth:`Encoder.report`, e.g. the own
    accuracy of networks trained here), one line per encoder, a column per reported key in
    name order (not the order a record kept: a release's flat table sorts its columns, so
    rows taken from it by ``relbench run --reuse`` hold the keys in another order); empty
    when none did."""
    reports: dict[str, dict] = {}
    for extra in df["extra"]:
        if isinstance(extra, dict):
            for label, report in (extra.get("encoder_reports") or {}).items():
                reports.setdefault(label, report)
    if not reports:
        return ""
    keys = sorted({k for r in reports.values() for k in r})
    rows = [[label, *(fmt(r[k]) if isinstance(r.get(k), float) else r.get(k, "-") for k in keys)]
            for label, r in sorted(reports.items())]
    return ("\n### Encoders trained here\n\nWhat each encoder reported after training (accuracy of its own "
            "classifier on the data set's training and test pools).\n\n"
            + table(rows, headers=["encoder", *(k.replace("_", " ") for k in keys)]) + "\n")


def diagnostics_section(df: pd.DataFrame, methods: pd.DataFrame, extras: list[str], direction: dict) -> str:
    """Per-cell diagnostics that only some stitchers emit (e.g. IRP's condition number),
    mean over stitched pairs and seeds per combination; empty when none has any."""
    rows = []
    for _, r in methods.iterrows():
        vals = []
        for m in extras:
            d = df[(df["metric"] == m) & (df["status"] == "ok") & (df["source"] != df["target"])]
            for c in COMBO:
                d = d[d[c] == r[c]]
            vals.append(fmt(d["value"].mean()) if len(d) else "-")
        if any(v != "-" for v in vals):
            rows.append([combo_label(r), *vals])
    if not rows:
        return ""
    return ("\n### Translation diagnostics (mean over stitched pairs and seeds)\n\n"
            + table(rows, headers=["combination"] + [arrow(m, direction[m]) for m in extras]))


def failures_section(df: pd.DataFrame) -> str:
    """The failed combinations, one line each with the first line of its error (free
    text: a list, not a table column), folded when there are many; empty when none failed."""
    errors = df[df["status"] == "error"]
    if not len(errors):
        return ""
    failed = [f"{combo_label(r)} → {r['target']}: {str(r['error']).splitlines()[0][:160]}"
              for _, r in errors.drop_duplicates(COMBO + ["target"]).iterrows()]
    return (f"\n### Failed combinations ({len(errors)})\n\n"
            + listing("Combination → target: error", failed, lines=True) + "\n")
