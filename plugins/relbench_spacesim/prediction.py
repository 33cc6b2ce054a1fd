"""Which similarity measure predicts stitching? The index's section across kinds: each
space-similarity task beside its companion stitching task (``stitching_task``), per
encoder pair the measures' values and each stitching method's stitched score, ranked by
Spearman's ρ over pairs with a percentile bootstrap interval over pairs, per method and
pooled over tasks; and two trivial predictors as controls.

* ρ is *aligned*: both variables are oriented first so that higher means more similar
  (a distance is negated) and better stitching (a lower-is-better metric is negated), so a
  positive ρ always means "more similar pairs stitch better".
* Pooled ρ (over tasks, or over every task and method: "all methods") is the pair-weighted
  mean of the strata's ρ (a stratum: one task, or one (task, method)), which is the Pearson
  correlation of within-stratum standardised ranks: pairs are only ever ranked against
  pairs of their own stratum. Its interval comes from a stratified bootstrap (each
  stratum's pairs resampled on their own, :func:`scipy.stats.bootstrap` with one sample
  per stratum, unpaired); a stratum whose resample is constant in either variable carries
  no weight in that resample, and a resample where every stratum is (ρ undefined) is left
  out of the percentiles.
* Controls, per method: ``own score (worse of the pair)``: the worse of the two encoders'
  own scores (the method's decoder on its own encoder: the stitching matrix's diagonal);
  ``same architecture``: 1 when the two encoders share an architecture, else 0, where an
  architecture is the encoder plugin's class with its parameters other than ``seed`` (as
  the space-similarity rows record them; missing when they do not).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from relbench.api import deferred_import, table

pd = deferred_import("pandas")

#: the controls' names, as the section's rows show them
OWN, SAME = "own score (worse of the pair)", "same architecture"
CONTROLS = (OWN, SAME)
#: the keys of a matrix cell that are not its method's columns (the axes are the companion's)
VALUE_KEYS = frozenset({"metric", "score", "low", "high", "n"})
#: the pooled column over every method
ALL = "all methods"
RESAMPLES = 1999
LEVEL = 0.95


def family(identity: Any) -> str | None:
    """An encoder's architecture: its plugin class and its parameters other than ``seed``
    (JSON, keys sorted), from the identity a row's ``inputs`` records; None without one."""
    if not isinstance(identity, dict) or "class" not in identity:
        return None
    params = {k: v for k, v in (identity.get("params") or {}).items() if k != "seed"}
    return json.dumps({"class": identity["class"], "params": params}, sort_keys=True, default=str)


def encoder_families(results: pd.DataFrame) -> dict[str, str | None]:
    """Each encoder's :func:`family`, from the first row whose ``inputs`` name the encoders."""
    for inputs in results["inputs"].dropna() if "inputs" in results else ():
        if isinstance(inputs, dict) and isinstance(inputs.get("encoders"), dict):
            return {label: family(identity) for label, identity in inputs["encoders"].items()}
    return {}


def measure_cells(results: pd.DataFrame) -> list[dict]:
    """The space-similarity task's index cells: per measure and ordered pair of distinct
    encoders its mean over seeds (``value``), its ``direction`` and ``n`` (seeds); and per
    encoder its ``family`` (None where the rows do not record it)."""
    ok = results[(results["status"] == "ok") & (results["source"] != results["target"])]
    cells = []
    for (metric, source, target), g in ok.groupby(["metric", "source", "target"], sort=False):
        per_seed = g.groupby("seed")["value"].mean()
        cells.append({"measure": metric, "direction": str(g["direction"].iloc[0]), "source": source,
                      "target": target, "value": float(per_seed.mean()), "n": int(len(per_seed))})
    cells += [{"encoder": label, "family": fam} for label, fam in encoder_families(results).items()]
    return cells


def method_label(cell: dict, axes: Sequence[str]) -> str:
    """A matrix cell's method: its method columns' values that are set, ``·``-joined."""
    return " · ".join(str(v) for k, v in cell.items() if k not in VALUE_KEYS and k not in axes and v is not None)


def metric_direction(companion: dict, metric: str) -> str:
    """The direction of the companion's ``metric`` as its index cells record it (``higher``
    when they do not)."""
    for cell in companion.get("cells") or ():
        if cell.get("metric") == metric and cell.get("direction") in ("higher", "lower"):
            return cell["direction"]
    return "higher"


def pair_frame(task: str, own: list[dict], companion: dict) -> pd.DataFrame:
    """Per (method, predictor, ordered pair) of one task: ``x`` (the predictor's value) and
    ``y`` (the method's stitched score), both aligned (higher: more similar, better
    stitching); columns ``task``, ``method``, ``predictor``, ``control``, ``source``,
    ``target``, ``x``, ``y``. Empty without measures or stitched pairs."""
    axes = list(companion.get("axes") or ("source", "target"))
    matrix = companion.get("matrix") or []
    if len(axes) != 2 or not matrix:
        return pd.DataFrame()
    measures = [c for c in own if "measure" in c]
    families = {c["encoder"]: c["family"] for c in own if "encoder" in c}
    sign = 1.0 if metric_direction(companion, matrix[0]["metric"]) == "higher" else -1.0
    records = []
    for method, cells in _by_method(matrix, axes).items():
        own_score = {c[axes[0]]: c["score"] for c in cells if c[axes[0]] == c[axes[1]]}
        for c in (c for c in cells if c[axes[0]] != c[axes[1]]):
            pair, y = (c[axes[0]], c[axes[1]]), sign * c["score"]
            predictors = {m["measure"]: (1.0 if m["direction"] != "lower" else -1.0) * m["value"]
                          for m in measures if (m["source"], m["target"]) == pair}
            if pair[0] in own_score and pair[1] in own_score:
                predictors[OWN] = min(sign * own_score[pair[0]], sign * own_score[pair[1]])
            if families.get(pair[0]) and families.get(pair[1]):
                predictors[SAME] = float(families[pair[0]] == families[pair[1]])
            records += [{"task": task, "method": method, "predictor": p, "control": p in CONTROLS,
                         "source": pair[0], "target": pair[1], "x": float(x), "y": float(y)}
                        for p, x in predictors.items() if x is not None and math.isfinite(x)]
    return pd.DataFrame.from_records(records)


def _by_method(matrix: list[dict], axes: Sequence[str]) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for cell in matrix:
        if cell.get("score") is not None and math.isfinite(cell["score"]):
            grouped.setdefault(method_label(cell, axes), []).append(cell)
    return grouped


def rank_rho(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's ρ along the last axis (average ranks of ties); NaN where either is constant."""
    from scipy.stats import rankdata

    rx, ry = rankdata(x, axis=-1), rankdata(y, axis=-1)
    rx = rx - rx.mean(axis=-1, keepdims=True)
    ry = ry - ry.mean(axis=-1, keepdims=True)
    den = np.sqrt((rx * rx).sum(axis=-1) * (ry * ry).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (rx * ry).sum(axis=-1) / np.where(den > 0, den, 1.0), np.nan)


def pooled_rho(strata: Sequence[tuple[np.ndarray, np.ndarray]], picks: Sequence[np.ndarray]) -> np.ndarray:
    """The pair-weighted mean of the strata's ρ, each stratum's pairs taken at ``picks``
    (index arrays, any leading batch shape); a stratum with NaN ρ carries no weight."""
    rhos = [rank_rho(x[idx], y[idx]) for (x, y), idx in zip(strata, picks)]
    weights = [np.where(np.isfinite(r), idx.shape[-1], 0) for r, idx in zip(rhos, picks)]
    total = sum(weights)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, sum(w * np.nan_to_num(r) for w, r in zip(weights, rhos)) / total, np.nan)


def pooled_spearman(strata: Sequence[tuple[np.ndarray, np.ndarray]], resamples: int = RESAMPLES, seed: int = 0,
                    level: float = LEVEL) -> dict[str, float]:
    """``rho`` (:func:`pooled_rho`), ``low`` and ``high`` (percentile interval of a
    bootstrap that resamples each stratum's pairs on their own; the resamples whose ρ is
    undefined, every stratum constant in a variable, are left out), ``pairs`` and ``strata``
    (those of at least 3 pairs, the only ones used). One stratum: Spearman's ρ of its
    pairs with a bootstrap interval over them."""
    from scipy.stats import bootstrap

    strata = [(np.asarray(x, float), np.asarray(y, float)) for x, y in strata if len(x) >= 3]
    pairs = sum(len(x) for x, _ in strata)
    if not strata:
        return {"rho": math.nan, "low": math.nan, "high": math.nan, "pairs": 0, "strata": 0}
    identity = [np.arange(len(x)) for x, _ in strata]
    rho = float(pooled_rho(strata, identity))
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy's own interval of a distribution with NaNs; ours leaves them out
        drawn = bootstrap(identity, lambda *picks, axis=-1: pooled_rho(strata, picks), paired=False,
                          vectorized=True, n_resamples=resamples, confidence_level=level, method="percentile",
                          random_state=np.random.default_rng(seed)).bootstrap_distribution
    drawn = drawn[np.isfinite(drawn)]
    low, high = (np.percentile(drawn, [50 * (1 - level), 50 * (1 + level)]) if len(drawn) else (math.nan, math.nan))
    return {"rho": rho, "low": float(low), "high": float(high), "pairs": pairs, "strata": len(strata)}


def correlations(pairs: pd.DataFrame, by: Sequence[str], strata: Sequence[str]) -> pd.DataFrame:
    """:func:`pooled_spearman` per group of ``by`` columns (with ``predictor``), each
    group's strata its values of the ``strata`` columns."""
    rows = []
    for key, group in pairs.groupby(["predictor", *by], sort=False):
        cut = [(g["x"].to_numpy(), g["y"].to_numpy()) for _, g in group.groupby(list(strata), sort=False)]
        rows.append({**dict(zip(["predictor", *by], key if isinstance(key, tuple) else (key,))),
                     "control": bool(group["control"].iloc[0]), **pooled_spearman(cut)})
    return pd.DataFrame.from_records(rows)


def section(cells_by_task: dict[str, list[dict]], companions: dict[str, dict[str, dict]]) -> str | None:
    """The index's section: a three-line summary, the predictors ranked by their pooled ρ
    over every task and method with a column per method, and per task its ρ pooled over its
    methods; None where no task has both its measures and its companion's matrix cells."""
    frames = [pair_frame(task, cells, companion) for task, cells in cells_by_task.items()
              for companion in companions.get(task, {}).values()]
    pairs = pd.concat([f for f in frames if not f.empty], ignore_index=True) if any(
        not f.empty for f in frames) else pd.DataFrame()
    if pairs.empty:
        return None
    overall = correlations(pairs.assign(all=ALL), ["all"], ["task", "method"]).set_index("predictor")
    overall = overall.sort_values("rho", ascending=False, na_position="last")
    per_method = correlations(pairs, ["method"], ["task"])
    per_task = correlations(pairs, ["task"], ["method"])
    tasks = list(dict.fromkeys(pairs["task"]))
    links = ", ".join(f"[{t}]({t}.md) ↔ [{c}]({c}.md)" for t in tasks for c in companions.get(t, {}))
    return (f"## Which similarity measure predicts stitching?\n\n{summary_lines(overall)}\n"
            f"Each space-similarity task beside its stitching task ({links}): Spearman's ρ over encoder pairs "
            f"between a predictor and a method's stitched score, aligned so that a positive ρ means that more "
            f"similar pairs stitch better (a distance and a lower-is-better metric are negated first), with its "
            f"{int(LEVEL * 100)} % percentile bootstrap interval over pairs ({RESAMPLES} resamples). Pooled ρ: the "
            f"pair-weighted mean of the ρ within each task (and method), its interval from a bootstrap that "
            f"resamples each task's pairs on their own. Controls (*italic*): the worse of the two encoders' own "
            f"scores (the method's decoder on its own encoder), and whether the two encoders share an "
            f"architecture (the same encoder plugin with the same parameters but `seed`).\n\n"
            f"{_table(overall, per_method, 'method')}\nPer task, pooled over its methods:\n\n"
            f"{_table(overall, per_task, 'task', tasks)}")


def summary_lines(overall: pd.DataFrame) -> str:
    """The section's three lines: the best measure, the controls, and what that means."""
    measures = overall[~overall["control"] & overall["rho"].notna()]
    controls = overall[overall["control"]]
    if measures.empty:
        return "- **Best measure:** none has a ρ.\n- **Controls:** —\n- **Means:** nothing to compare yet.\n"
    best_name, best = measures.index[0], measures.iloc[0]
    said = "; ".join(f"{name} ρ = {_rho(r)}" for name, r in controls.iterrows()) or "none measured"
    beaten = [name for name, r in controls.iterrows() if math.isfinite(r["high"]) and best["low"] > r["high"]]
    close = [name for name, r in controls.iterrows() if name not in beaten and math.isfinite(r["rho"])]
    if close:
        means = (f"{best_name} is not shown to predict stitching better than {' or '.join(close)}: the intervals "
                 f"overlap, so a trivial predictor does as well on these pairs.")
    elif beaten:
        means = f"{best_name} predicts stitching better than every control (its interval lies above theirs)."
    else:
        means = f"{best_name} ranks first; no control could be measured on these pairs."
    return (f"- **Best measure:** {best_name}, pooled ρ = {_rho(best)} over {best['pairs']} pairs of every task "
            f"and method.\n- **Controls:** {said}.\n- **Means:** {means}\n")


def _rho(r: pd.Series) -> str:
    if not math.isfinite(r["rho"]):
        return "n/a"
    interval = f"[{r['low']:+.2f}, {r['high']:+.2f}]" if math.isfinite(r["low"]) else "[n/a]"
    return f"{r['rho']:+.2f} {interval}"


def _table(overall: pd.DataFrame, per: pd.DataFrame, column: str, order: Sequence[str] | None = None) -> str:
    """Predictors (in ``overall``'s order) × the values of ``column``, each cell ρ [interval]
    (pairs), with the pooled ρ over everything first."""
    values = list(order or dict.fromkeys(per[column]))
    cells = {(r["predictor"], r[column]): r for _, r in per.iterrows()}
    body = []
    for name, r in overall.iterrows():
        label = f"*{name}*" if r["control"] else name
        body.append([label, _rho(r)] + [_rho(cells[(name, v)]) if (name, v) in cells else "—" for v in values])
    return table(body, headers=["predictor", "pooled"] + values, keep=1) + "\n"
