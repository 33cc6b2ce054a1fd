"""The claims a tasks file asks about, checked on stored rows as one family of tests.

A claim names two sides by filters on the kind's columns (``better`` and ``worse``) and
asks whether the first scores higher than the second (``test: superiority``, the
default) or at least as high within a margin (``test: non-inferiority``: "at least as
good"). Every claim is judged on what both sides share:

- **Paired units.** Each side is restricted to the values of the kind's
  :attr:`~relbench.interfaces.TaskKind.paired_on` columns (for stitching: the encoder
  pair) and seeds that the other side was also measured on, so that the difference is
  paired on the same encoder pairs, seeds and test samples; the line says how many of
  each side's pairs that leaves.
- **One margin per metric.** The smallest difference that counts is the claim's
  ``margin`` if given, else the one the metric plugin declares (``claim_margin``: a share
  of an F1 score is not a share of a correlation), else :data:`MARGIN`.
- **One family.** The page's score claims form the family. Each gets a p-value against
  its bars, not against 0: twice the smaller of the one-sided p-values of "the advantage
  lies above the claim's bar" and "it lies below minus the margin" (the equal-tailed value,
  so that a single claim reduces to "the 95 % interval clears the bar"; the page says so,
  as a p near 1 is no claim that the advantage is 0), and Holm's step-down procedure
  (``statsmodels``) holds the chance of any false verdict on the page at 5 %. Claims that
  count achievable cells are fixed by design, not tested.
- **Over seeds.** With two seeds or more, a claim takes a paired t-test over seeds and
  the Student-t interval of the per-seed differences (:mod:`relbench.uncertainty`: each
  seed's score on its own test samples is one independent draw); with one seed, a
  bootstrap over its test samples, conditional on that seed. The line says which.

Intervals are conditional on the encoder pairs, which are not resampled (the page says
so).

A claim may say which paper and setting it stands for and what differs here
(``paper``): the page shows that under its verdict, and when the verdict is *does not
hold*, says in the claim's own words (the paper's) that the paper's claim does not hold
here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from relbench import deferred
from relbench.interfaces import TaskKind
from relbench.pages import arrow, directions, fmt
from relbench.uncertainty import (FAILS, HOLDS, INCONCLUSIVE, LEVEL, MARGIN, Draws, bootstrap_columns,
                                  fmt_interval, method_note, t_p_value, with_samples)

pd = deferred.load("pandas")

#: how a claim or a published entry names an empty part (a column a row does not use)
EMPTY = "-"
#: the family-wise error rate the page's score claims are held to (Holm)
FAMILY_ALPHA = 1 - LEVEL


def filtered(df: pd.DataFrame, filters: dict) -> pd.DataFrame:
    """Rows whose columns hold the given values (``-`` or null: the column is empty)."""
    for col, value in filters.items():
        column = df[col] if col in df else pd.Series(None, index=df.index, dtype=object)
        empty = column.isna() | (column == EMPTY)
        df = df[empty if value in (EMPTY, None) else column == value]
    return df


def cell_count(kind: TaskKind, df: pd.DataFrame) -> int:
    """Distinct cells (the kind's columns) among ``df``'s rows."""
    cols = [c for c in kind.columns if c in df]
    return len(df.drop_duplicates(cols)) if cols else len(df)


def margin_of(claim: dict, metric: Any) -> float:
    """The claim's margin: its own, else the metric plugin's ``claim_margin``, else :data:`MARGIN`."""
    if "margin" in claim:
        return float(claim["margin"])
    return float(getattr(metric, "claim_margin", MARGIN))


def paired(kind: TaskKind, better: pd.DataFrame, worse: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Both sides restricted to the (paired-on columns, seed) values they share, and a
    phrase saying what that kept of each side (empty when it kept everything)."""
    # a column one side leaves empty throughout (a deterministic baseline stored without a
    # seed) pairs with every value of the other side's
    keys = [c for c in (*kind.paired_on, "seed")
            if all(c in d and d[c].notna().any() for d in (better, worse))]
    if not keys:
        return better, worse, ""

    def key_of(d: pd.DataFrame) -> pd.Series:
        return d.reindex(columns=keys).astype(str).agg("\x1f".join, axis=1) if len(d) else pd.Series(dtype=str)

    kb, kw = key_of(better), key_of(worse)
    common = set(kb) & set(kw)
    kept_b, kept_w = better[kb.isin(common)], worse[kw.isin(common)]
    units = [c for c in kind.paired_on if c in keys]
    if not units:
        return kept_b, kept_w, ""

    def count(d: pd.DataFrame) -> int:
        return len(d.reindex(columns=units).drop_duplicates()) if len(d) else 0

    before, after = (count(better), count(worse)), (count(kept_b), count(kept_w))
    what = "/".join(units)
    if before == after:
        return kept_b, kept_w, f"paired on the {after[0]} {what} values both sides have"
    return kept_b, kept_w, (f"paired on the {after[0]} {what} values both sides have (of {before[0]} and "
                            f"{before[1]} measured)")


@dataclass
class Tested:
    """One score claim's paired difference: its point, interval and one-sided p-values."""

    claim: str  #: the claim's text
    details: str  #: what follows the verdict: the sides, the advantage, the test, the pairing
    p_holds: float  #: one-sided p-value of "the advantage is above the claim's bar"
    p_fails: float  #: one-sided p-value of "the advantage is below minus the margin"

    @property
    def p(self) -> float:
        """The claim's two-sided p-value: twice the smaller one-sided one (at most 1)."""
        return min(1.0, 2 * min(self.p_holds, self.p_fails))


def one_sided_p(draws: np.ndarray, bar: float, above: bool) -> float:
    """Bootstrap p-value of "the statistic lies above ``bar``" (``above``) or below it:
    the share of draws on the wrong side of the bar, counting the observed one
    (``(1 + #wrong) / (1 + R)``: never 0)."""
    draws = draws[np.isfinite(draws)]
    wrong = int((draws <= bar).sum() if above else (draws >= bar).sum())
    return (1 + wrong) / (1 + len(draws))


def bar_of(test: str, margin: float) -> float:
    """The advantage a claim must clear to hold: ``+margin`` for superiority, ``−margin``
    for non-inferiority."""
    return margin if test == "superiority" else -margin


def holm(p_values: list[float], alpha: float = FAMILY_ALPHA) -> list[bool]:
    """Which hypotheses Holm's step-down procedure rejects at family-wise level ``alpha``."""
    if not p_values:
        return []
    from statsmodels.stats.multitest import multipletests

    return [bool(r) for r in multipletests(p_values, alpha=alpha, method="holm")[0]]


def claims_section(kind: TaskKind, df: pd.DataFrame, claims: list[dict], metrics: dict[str, Any]) -> str:
    """Each claimed ordering, checked on the rows the kind compares, as one family:
    paired sides, the test and margin each claim states, Holm over the page's score
    claims (see the module docstring). ``metrics``: the task's metric plugins by label,
    to rescore the stored per-sample predictions."""
    scored = kind.claim_rows(df)
    direction = {**directions(df), **directions(scored)}  # claim rows may add metrics of their own
    names = [m for m in pd.unique(df["metric"]) if m != "error"]
    entries: list[tuple[dict, str | Tested, str | None]] = []  # (claim, its line or test, its verdict)
    for claim in claims:
        metric = claim.get("metric") or (names[0] if names else "")
        sides = [filtered(scored[scored["metric"] == metric], claim[k]) for k in ("better", "worse")]
        labels = [", ".join(f"{k}={v}" for k, v in claim[s].items()) for s in ("better", "worse")]
        if claim.get("measure", "score") == "achievable":
            values = [cell_count(kind, d[d["status"] == "ok"]) for d in sides]
            outcome = HOLDS if values[0] > values[1] else FAILS
            entries.append((claim, f"- {claim['claim']}: **{outcome}** — {labels[0]}: {values[0]}/"
                                   f"{cell_count(kind, sides[0])} cells vs {labels[1]}: {values[1]}/"
                                   f"{cell_count(kind, sides[1])} cells (achievable cells: a count, fixed by design, "
                                   f"not tested).", outcome))
            continue
        entries.append((claim, _tested(kind, df, claim, metric, sides, labels, metrics.get(metric), direction), None))
    family = [e for _, e, _ in entries if isinstance(e, Tested)]
    rejected = dict(zip(map(id, family), holm([e.p for e in family])))
    lines = [_preamble(kind, len(family), any("paper" in claim for claim in claims))]
    for claim, entry, outcome in entries:
        if isinstance(entry, Tested):
            outcome = (HOLDS if entry.p_holds <= entry.p_fails else FAILS) if rejected[id(entry)] else INCONCLUSIVE
            entry = f"- {entry.claim}: **{outcome}** — {entry.details}"
        lines.append(entry + paper_note(claim, outcome))
    return "\n".join(lines) + "\n"


#: the words a page uses when a paper's claim is contradicted by the rows
PAPER_FAILS = "The paper's claim does not hold here"


def paper_note(claim: dict, outcome: str | None) -> str:
    """The indented lines under a claim's verdict: the paper and setting it stands for and
    what differs here (the claim's ``paper``; nothing without one), and, when the verdict
    is *does not hold*, :data:`PAPER_FAILS` with the claim in its own words, which are the
    paper's. ``outcome`` is None for a claim that could not be measured."""
    if not claim.get("paper"):
        return ""
    note = f"\n  - *Stands for:* {claim['paper'].strip()}"
    if outcome == FAILS:
        shown = ("its claimed-better side reaches no more cells than the claimed-worse one"
                 if claim.get("measure", "score") == "achievable" else
                 "its claimed-better side scores below the claimed-worse one by more than the margin")
        note += f"\n  - **{PAPER_FAILS}:** “{claim['claim']}” — here {shown}."
    return note


def _tested(kind: TaskKind, df: pd.DataFrame, claim: dict, metric: str, sides: list[pd.DataFrame],
            labels: list[str], scorer: Any, direction: dict[str, str]) -> str | Tested:
    """A score claim's paired test (a finished line when it cannot be measured)."""
    test = claim.get("test", "superiority")
    margin = margin_of(claim, scorer)
    sides = [d[d["status"] == "ok"] for d in sides]
    better, worse, pairing = paired(kind, *sides)
    rows = pd.concat([better, worse])
    rows = rows[~rows.index.duplicated()]
    columns = {side: pd.Series(rows.index.isin(d.index), index=rows.index)
               for side, d in zip(("better", "worse"), (better, worse))}
    draws = bootstrap_columns(with_samples(rows, df, kind.columns), columns, scorer) if len(better) and len(worse) \
        else None
    if draws is None or not all(np.isfinite(draws.point)):
        why = "no results for one side" if not (len(sides[0]) and len(sides[1])) else \
            "the sides share no paired unit"
        return f"- {claim['claim']}: **not measured** ({why}: {labels[0]} / {labels[1]})."
    sign = -1.0 if direction.get(metric) == "lower" else 1.0
    i, j = draws.column("better"), draws.column("worse")
    advantage = sign * (draws.draws[:, i] - draws.draws[:, j])
    diff, low, high = draws.difference("better", "worse")
    if sign < 0:
        diff, low, high = -diff, -high, -low
    bar = bar_of(test, margin)
    if draws.over_seeds:  # a paired t-test over seeds (see relbench.uncertainty)
        per_seed, constant = draws.seed_differences("better", "worse")
        if len(per_seed):
            how = f"; paired t-test over {len(per_seed)} seeds" if len(per_seed) > 1 else "; one seed: not tested"
        else:  # both sides stored without a seed: the difference is exact
            per_seed, how = np.array([constant, constant]), "; both sides deterministic: an exact difference"
        p_holds, p_fails = t_p_value(sign * per_seed, bar, above=True), t_p_value(sign * per_seed, -margin, above=False)
    else:
        p_holds, p_fails = one_sided_p(advantage, bar, above=True), one_sided_p(advantage, -margin, above=False)
        how = "; one seed: a bootstrap over its test samples" + (
            "" if draws.sample_level else ", some cells stored without per-sample data")
    what = "superiority" if test == "superiority" else f"non-inferiority (holds above −{margin:g})"
    p = min(1.0, 2 * min(p_holds, p_fails))
    details = (f"{labels[0]}: {_side(draws, 'better')} vs {labels[1]}: {_side(draws, 'worse')} "
               f"({arrow(metric, direction.get(metric, 'neutral'))}); advantage {diff:+.3f} "
               f"{fmt_interval(low, high, signed=True)}, {what}, margin {margin:g}, p = {p:.3g}"
               f"{f'; {pairing}' if pairing else ''}{how}.")
    return Tested(claim["claim"], details, p_holds, p_fails)


def _side(draws: Draws, label: str) -> str:
    """A side's score with its interval, or, for a side stored without a seed, the score
    and what it is: a constant enters every seed's difference, and its zero-width
    interval would read as a precise measurement."""
    score = fmt(draws.point[draws.column(label)])
    if draws.seedless(label):
        return f"{score} (stored without a seed: one value for every seed)"
    return f"{score} {fmt_interval(*draws.interval(label))}"


def _preamble(kind: TaskKind, family: int, papers: bool) -> str:
    """What the claims section tests and how (the family and its control); ``papers``:
    some claim names the paper setting it stands for."""
    pairs = f" on the same {'/'.join(kind.paired_on)} and seeds (those both sides were measured on)" \
        if kind.paired_on else " on the same seeds"
    return ("\n### Orderings reported by the papers, checked here\n\n"
            "Each claim compares its two sides paired" + pairs + ": the advantage is the claimed-better side's "
            "score minus the claimed-worse side's, in the metric's better direction, each side the mean over seeds "
            "of the mean over its cells. *Superiority* holds when the advantage is shown above the margin; "
            "*non-inferiority* (\"at least as good\") holds when it is shown above minus the margin. A claim "
            "*does not hold* when the advantage is shown below minus the margin, and is *inconclusive* otherwise. "
            f"The family is this page's {family} score claim{'s' if family != 1 else ''}. Each is tested against "
            f"its bars, not against 0: one one-sided test that the advantage lies above the claim's bar (the "
            f"margin; minus the margin for non-inferiority) and one that it lies below minus the margin (a paired "
            f"t-test over seeds; with one seed, a bootstrap over its test samples; the line says which); its p is "
            f"twice the smaller of the two (at most 1), so a p near 1 means the advantage is shown on neither side "
            f"of the margins, not that it is 0. Holm's step-down procedure keeps the chance of any false verdict "
            f"among them at {FAMILY_ALPHA:.0%}. Margins are per metric (the metric plugin's, unless the claim sets "
            f"one). "
            + method_note(None) + " Intervals are conditional on the encoder pairs measured (pairs are not "
            "resampled)." + (" Under a claim, *stands for* names the paper, table and setting it comes from and what "
                             "differs here; where such a claim does not hold, the line says so in the paper's words."
                             if papers else "") + "\n")
