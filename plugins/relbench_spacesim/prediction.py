"""Which similarity measure predicts stitching? The index's section across kinds: each
space-similarity task beside its companion stitching task (``stitching_task``), per
encoder pair the measures' values and each stitching method's stitched score, ranked by
Spearman's ρ over pairs, per method and pooled over tasks, with percentile intervals of a
cluster bootstrap; and two trivial predictors as controls, each compared with the best
measure paired.

* ρ is *aligned*: both variables are oriented first so that higher means more similar
  (a distance is negated) and better stitching (a lower-is-better metric is negated), so a
  positive ρ always means "more similar pairs stitch better".
* A stratum is one (task, method) with at least 3 encoder pairs and a ρ on them (neither
  variable constant). Pooled ρ (over a method's tasks, a task's methods, or every task and
  method) is the pair-weighted mean of the strata's ρ, which is the Pearson
  correlation of within-stratum standardised ranks: pairs are only ever ranked against
  pairs of their own stratum.
* Intervals come from a cluster bootstrap (:func:`cluster_draws`): the unit is an
  encoder pair of a task, both directions together (they share the two encoders, and a
  symmetric measure gives them one value), the strata are the tasks. Each resample draws
  every task's pairs with replacement, once, and applies that draw to every method and
  predictor of the task, since all of them share the task's encoder pairs and predictor
  values; a method that lacks a drawn pair lacks it in the resample too. A resampled
  stratum's ρ is Spearman's ρ of the sample holding each pair as often as it was drawn
  (:func:`rank_correlation`), weighted by how many of its pairs were drawn; a stratum constant
  in either variable in a resample carries no weight there, and a resample where every
  stratum is (ρ undefined) is left out of the percentiles.
* Controls, per method: ``own score (worse of the pair)``: the worse of the two encoders'
  own scores (the method's decoder on its own encoder: the stitching matrix's diagonal);
  ``same architecture``: 1 when the two encoders share an architecture, else 0, where an
  architecture is the encoder plugin's class with its parameters other than ``seed`` (as
  the space-similarity rows record them; missing when they do not).
* The best measure is compared with each control paired (:func:`paired_difference`): on
  the strata and ordered pairs where both predictors have a value, Δρ = ρ(measure) −
  ρ(control), both pooled as above, with the percentile interval of the same resampled
  pairs for both. Its verdict: ``better`` (interval above 0), ``worse`` (below 0) or
  ``inconclusive`` (it contains 0).
"""

from __future__ import annotations

import json
import math
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


def cluster_draws(pairs: pd.DataFrame, resamples: int = RESAMPLES, seed: int = 0) -> dict[str, tuple[dict, np.ndarray]]:
    """The cluster bootstrap's draws, per task of ``pairs``: its ordered encoder pairs
    (``(source, target)`` → column, both directions of a pair one column) and the columns'
    weights, (1 + ``resamples``) × unordered pairs: row 0 holds every pair once (the data),
    each further row how many times one resample drew each pair (as many draws, with
    replacement, as the task has unordered pairs; a drawn pair brings both its directions).
    Every method and predictor of a task is resampled with the same rows; tasks are drawn
    independently."""
    rng = np.random.default_rng(seed)
    draws = {}
    for task, group in pairs.groupby("task", sort=False):
        ordered = list(dict.fromkeys(zip(group["source"], group["target"])))
        units = list(dict.fromkeys(tuple(sorted(pair)) for pair in ordered))
        column = {unit: i for i, unit in enumerate(units)}
        n = len(units)
        weights = np.vstack([np.ones((1, n)), rng.multinomial(n, np.full(n, 1.0 / n), size=resamples)])
        draws[task] = ({pair: column[tuple(sorted(pair))] for pair in ordered}, weights)
    return draws


def centred_ranks(values: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``weights`` (rows × pairs), in the sample holding pair ``j``'s value
    ``weights[r, j]`` times: each pair's average rank (ties share theirs) less the sample's
    mean rank, and the sample's sum of squared deviations (0: constant, or empty). A pair of
    weight 0 takes no part, whatever its value."""
    values = np.asarray(values, float)
    below = (values[:, None] < values[None, :]).astype(float)  # [k, j]: pair k's value below pair j's
    tied = (values[:, None] == values[None, :]).astype(float)
    ranks = weights @ below + (weights @ tied + 1) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        deviation = ranks - (weights * ranks).sum(axis=1, keepdims=True) / weights.sum(axis=1, keepdims=True)
    return deviation, np.nan_to_num((weights * deviation * deviation).sum(axis=1))


def rank_correlation(x: tuple[np.ndarray, np.ndarray], y: tuple[np.ndarray, np.ndarray],
                     weights: np.ndarray) -> np.ndarray:
    """Spearman's ρ per row of ``weights`` from the two variables' :func:`centred_ranks`
    under those weights (all ones: Spearman's ρ of the pairs); NaN where either variable is
    constant."""
    (dx, sx), (dy, sy) = x, y
    den = np.sqrt(sx * sy)
    with np.errstate(invalid="ignore"):
        return np.where(den > 0, (weights * dx * dy).sum(axis=1) / np.where(den > 0, den, 1.0), np.nan)


def stratum_rhos(pairs: pd.DataFrame, draws: dict[str, tuple[dict, np.ndarray]]) -> list[dict]:
    """Per (``predictor``, ``task``, ``method``) of ``pairs`` that is a stratum (at least 3
    pairs, a ρ on them): its ``rho`` and ``n`` (pairs drawn) per row of its task's
    :func:`cluster_draws` (row 0: the data), and its ``units`` (ordered encoder pairs). The
    ranks of a variable on a task's pairs are computed once and shared by every stratum
    with the same values on the same pairs (a method's scores across predictors)."""
    ranked: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    def ranks(task: str, column: np.ndarray, values: np.ndarray, drawn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = (task, column.tobytes(), values.tobytes())
        if key not in ranked:
            ranked[key] = centred_ranks(values, drawn)
        return ranked[key]

    strata = []
    for (predictor, task, method), group in pairs.groupby(["predictor", "task", "method"], sort=False):
        units = list(zip(group["source"].tolist(), group["target"].tolist()))
        if len(units) < 3:
            continue
        columns, weights = draws[task]
        column = np.array([columns[unit] for unit in units])
        drawn = weights[:, column]
        x, y = group["x"].to_numpy(float), group["y"].to_numpy(float)
        rho = rank_correlation(ranks(task, column, x, drawn), ranks(task, column, y, drawn), drawn)
        if math.isfinite(rho[0]):
            strata.append({"predictor": predictor, "task": task, "method": method, "rho": rho,
                           "n": drawn.sum(axis=1), "units": units})
    return strata


def pooled(strata: Sequence[dict], level: float = LEVEL) -> dict[str, Any]:
    """The pair-weighted mean of the ``strata``'s ``rho`` (of :func:`stratum_rhos`; a stratum
    whose ρ is undefined in a resample carries no weight there): ``rho`` (the data's),
    ``low`` and ``high`` (percentile interval of the resamples, those where it is undefined
    left out), and what it is measured on: ``encoder_pairs`` (distinct ordered pairs of a
    task), ``tasks``, ``scores`` (pair-method scores) and ``strata``."""
    if not strata:
        return {"rho": math.nan, "low": math.nan, "high": math.nan, "encoder_pairs": 0, "tasks": 0, "scores": 0,
                "strata": 0}
    rho, n = np.stack([s["rho"] for s in strata]), np.stack([s["n"] for s in strata])
    weight = np.where(np.isfinite(rho), n, 0.0)
    total = weight.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (weight * np.nan_to_num(rho)).sum(axis=0) / np.where(total > 0, total, 1.0)
    values = np.where(total > 0, mean, np.nan)
    drawn = values[1:][np.isfinite(values[1:])]
    low, high = np.percentile(drawn, [50 * (1 - level), 50 * (1 + level)]) if len(drawn) else (math.nan, math.nan)
    return {"rho": float(values[0]), "low": float(low), "high": float(high),
            "encoder_pairs": len({(s["task"], *unit) for s in strata for unit in s["units"]}),
            "tasks": len({s["task"] for s in strata}), "scores": sum(len(s["units"]) for s in strata),
            "strata": len(strata)}


def correlations(pairs: pd.DataFrame, strata: Sequence[dict], by: Sequence[str] = ()) -> pd.DataFrame:
    """Per predictor of ``pairs`` (and group of its ``by`` columns): ``control`` and
    :func:`pooled` over its ``strata`` (of :func:`stratum_rhos`) in that group."""
    grouped: dict[tuple, list[dict]] = {}
    for s in strata:
        grouped.setdefault((s["predictor"], *(s[k] for k in by)), []).append(s)
    rows = []
    for key, group in pairs.groupby(["predictor", *by], sort=False):
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(["predictor", *by], key)), "control": bool(group["control"].iloc[0]),
                     **pooled(grouped.get(key, []))})
    return pd.DataFrame.from_records(rows)


def paired_difference(pairs: pd.DataFrame, draws: dict[str, tuple[dict, np.ndarray]], measure: str, control: str,
                      level: float = LEVEL) -> dict[str, Any]:
    """Δρ = ρ(``measure``) − ρ(``control``) on the strata and ordered pairs of ``pairs``
    where both have a value (a stratum counts where both have a ρ), each pooled as
    :func:`pooled` pools: ``delta``, ``low`` and ``high`` (the percentile interval of Δρ
    over the same resampled pairs, ``draws``, for both), ``verdict`` (``better``: the
    interval above 0, ``worse``: below 0, ``inconclusive``: it contains 0; None: no shared
    stratum) and :func:`pooled`'s counts of what was compared."""
    keys = ["task", "method", "source", "target"]
    shared = pairs[pairs["predictor"] == measure].merge(pairs.loc[pairs["predictor"] == control, [*keys, "x"]],
                                                        on=keys, suffixes=("", "_control"))
    theirs = {(s["task"], s["method"]): s["rho"] for s in stratum_rhos(shared.assign(x=shared["x_control"]), draws)}
    differences = [{**s, "rho": s["rho"] - theirs[(s["task"], s["method"])]} for s in stratum_rhos(shared, draws)
                   if (s["task"], s["method"]) in theirs]
    got = pooled(differences, level)
    verdict = ("better" if got["low"] > 0 else "worse" if got["high"] < 0 else "inconclusive") if differences else None
    return {"delta": got.pop("rho"), **got, "verdict": verdict}


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
    draws = cluster_draws(pairs)
    strata = stratum_rhos(pairs, draws)
    overall = correlations(pairs, strata).set_index("predictor")
    overall = overall.sort_values("rho", ascending=False, na_position="last")
    measures = overall[~overall["control"] & overall["rho"].notna()]
    controls = list(overall.index[overall["control"]])
    versus = {control: paired_difference(pairs, draws, measures.index[0], control, family_level(len(controls)))
              for control in controls} if not measures.empty else {}
    per_method = correlations(pairs, strata, ["method"])
    per_task = correlations(pairs, strata, ["task"])
    tasks = list(dict.fromkeys(pairs["task"]))
    links = ", ".join(f"[{t}]({t}.md) ↔ [{c}]({c}.md)" for t in tasks for c in companions.get(t, {}))
    return (f"## Which similarity measure predicts stitching?\n\n{summary_lines(overall, versus)}\n"
            f"Each space-similarity task beside its stitching task ({links}): Spearman's ρ over encoder pairs "
            f"between a predictor and a method's stitched score, aligned so that a positive ρ means that more "
            f"similar pairs stitch better (a distance and a lower-is-better metric are negated first). Pooled ρ: the "
            f"pair-weighted mean of the ρ within each task and method (of at least 3 encoder pairs). Intervals: "
            f"{int(LEVEL * 100)} % percentile intervals of a cluster bootstrap ({RESAMPLES} resamples) that draws "
            f"each task's encoder pairs (both directions of a pair together) with replacement, once per resample and "
            f"task, and applies that draw "
            f"to every method and predictor of the task (they all share its encoder pairs and predictor values, so "
            f"a task's methods are not independent evidence); tasks are drawn independently. The best measure is "
            f"compared with each control paired: Δρ = ρ(measure) − ρ(control) on the tasks, methods and encoder "
            f"pairs where both have a value, its interval from the same resampled pairs for both; better or worse "
            f"where the interval excludes 0, else inconclusive. Controls (*italic*): the worse of the two encoders' "
            f"own scores (the method's decoder on its own encoder), and whether the two encoders share an "
            f"architecture (the same encoder plugin with the same parameters but `seed`).\n\n"
            f"{_table(overall, per_method, 'method')}\nPer task, pooled over its methods:\n\n"
            f"{_table(overall, per_task, 'task', tasks)}")


def family_level(comparisons: int, level: float = LEVEL) -> float:
    """The confidence level of each of ``comparisons`` paired intervals of one family
    (Bonferroni: the family's error rate is at most 1 − ``level``)."""
    return 1 - (1 - level) / max(1, comparisons)


def summary_lines(overall: pd.DataFrame, versus: dict[str, dict]) -> str:
    """The section's three lines: the best measure (and those tied with it at the shown
    precision), the controls, and the best measure paired with each control (``versus``:
    per control its :func:`paired_difference`)."""
    measures = overall[~overall["control"] & overall["rho"].notna()]
    controls = overall[overall["control"]]
    if measures.empty:
        return "- **Best measure:** none has a ρ.\n- **Controls:** —\n- **Means:** nothing to compare yet.\n"
    best_name, best = measures.index[0], measures.iloc[0]
    tied = [name for name, r in measures.iloc[1:].iterrows() if f"{r['rho']:+.2f}" == f"{best['rho']:+.2f}"]
    named = f"{best_name} (tied with {', '.join(tied)} at {best['rho']:+.2f})" if tied else best_name
    said = "; ".join(f"{name} ρ = {_rho(r)}" + (f" {_counted(r)}" if r["strata"] else "")
                     for name, r in controls.iterrows()) or "none measured"
    if versus:
        level = family_level(len(versus))
        means = (f"paired with each control where both have a value, Δρ = ρ({best_name}) − ρ(control) with its "
                 f"{level:.1%} interval (the family: the best measure against each of the {len(versus)} controls, "
                 f"Bonferroni; the best measure is picked on these same pairs, which no interval accounts for): "
                 .replace("%", " %") + "; ".join(f"{name} {_compared(best_name, name, v)}"
                                                for name, v in versus.items()) + ".")
    else:
        means = f"{best_name} ranks first; no control could be measured on these pairs."
    return (f"- **Best measure:** {named}, pooled ρ = {_rho(best)} {_counted(best)}.\n"
            f"- **Controls:** {said}.\n- **Means:** {means}\n")


def _counted(r: dict | pd.Series) -> str:
    """What a pooled ρ or Δρ is measured on: its distinct encoder pairs, tasks and scores."""
    return (f"over {r['encoder_pairs']} encoder pairs of {r['tasks']} task{'s' if r['tasks'] != 1 else ''} "
            f"({r['scores']} pair-method scores)")


def _compared(measure: str, control: str, v: dict) -> str:
    """One control's paired comparison with the best measure, and its verdict."""
    if v["verdict"] is None:
        return "not compared: no task and method with 3 encoder pairs where both have a ρ"
    verdict = {"better": f"{measure} predicts stitching better", "worse": f"{control} predicts stitching better",
               "inconclusive": "inconclusive (the interval contains 0)"}[v["verdict"]]
    return f"Δρ = {_rho({'rho': v['delta'], 'low': v['low'], 'high': v['high']})} {_counted(v)}: {verdict}"


def _rho(r: dict | pd.Series) -> str:
    if not math.isfinite(r["rho"]):
        return "n/a"
    interval = f"[{r['low']:+.2f}, {r['high']:+.2f}]" if math.isfinite(r["low"]) else "[n/a]"
    return f"{r['rho']:+.2f} {interval}"


def _table(overall: pd.DataFrame, per: pd.DataFrame, column: str, order: Sequence[str] | None = None) -> str:
    """Predictors (in ``overall``'s order) × the values of ``column``, each cell ρ [interval],
    with the pooled ρ over everything first."""
    values = list(order or dict.fromkeys(per[column]))
    cells = {(r["predictor"], r[column]): r for _, r in per.iterrows()}
    body = []
    for name, r in overall.iterrows():
        label = f"*{name}*" if r["control"] else name
        body.append([label, _rho(r)] + [_rho(cells[(name, v)]) if (name, v) in cells else "—" for v in values])
    return table(body, headers=["predictor", "pooled"] + values, keep=1) + "\n"
