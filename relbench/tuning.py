"""Choosing tunable constants on validation data: the one mechanism every task kind uses.

A plugin declares which of its parameters are tunable and over which candidates
(:attr:`relbench.interfaces.Plugin.tunable`). A parameter the tasks file sets is fixed;
every other tunable parameter of a unit's plugins is *open*. The kind fits the unit once
per combination of open values (:func:`candidates`), scores each fit on the seed's
validation part and keeps the best (:func:`choose`); the search space, the scores and
the choice go into every row of the unit (:func:`Choice.record`). Test data never enter
the choice: the kind scores on :meth:`StitchSide.bank("validation")` or its own
validation banks only.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from relbench.interfaces import Direction, Tunable
from relbench.task_model import PluginSpec

T = TypeVar("T")


def open_parameters(specs: dict[str, PluginSpec | None]) -> dict[str, Tunable]:
    """``"column.param"`` → :class:`Tunable` for every tunable parameter of the plugins
    in ``specs`` that the tasks file does not fix, in column then declaration order."""
    out: dict[str, Tunable] = {}
    for column, spec in specs.items():
        if spec is None or spec.cls is None:
            continue
        for param, tunable in getattr(spec.cls, "tunable", {}).items():
            if param not in spec.params:
                out[f"{column}.{param}"] = tunable
    return out


@dataclass(frozen=True)
class Candidate:
    """One setting of the open parameters: the specs to build, the values set, and the
    open parameters searched over."""

    specs: dict[str, PluginSpec | None]
    values: dict[str, Any] = field(default_factory=dict)
    space: dict[str, Tunable] = field(default_factory=dict)


def candidates(specs: dict[str, PluginSpec | None], enabled: bool = True) -> list[Candidate]:
    """Every combination of the open parameters' candidate values, the first being each
    parameter's first candidate. With tuning off (``enabled`` false: no validation
    part), the one candidate is ``specs`` as given: each plugin's own defaults."""
    open_ = open_parameters(specs) if enabled else {}
    if not open_:
        return [Candidate(dict(specs))]
    out = []
    for combo in itertools.product(*(t.values for t in open_.values())):
        values = dict(zip(open_, combo))
        new = dict(specs)
        for name, value in values.items():
            column, param = name.split(".", 1)
            spec = new[column]
            new[column] = dataclasses.replace(spec, params={**spec.params, param: value})
        out.append(Candidate(new, values, open_))
    return out


@dataclass
class Choice(Generic[T]):
    """The outcome of tuning one unit: the kept fit, its candidate, and every score."""

    fitted: T
    candidate: Candidate
    space: dict[str, Tunable]
    scores: list[tuple[dict[str, Any], float]]
    metric: str = ""

    def record(self) -> dict[str, Any]:
        """What a row stores: per open parameter its candidates, what it is relative to
        and the chosen value; the validation metric and every candidate's score. Empty
        when nothing was tuned."""
        if not self.space:
            return {}
        return {
            "parameters": {name: {"space": list(t.values), "relative_to": t.relative_to,
                                  "chosen": self.candidate.values[name]} for name, t in self.space.items()},
            "validation_metric": self.metric,
            "validation_scores": [[values, score] for values, score in self.scores],
        }


def rejoined_parameters(parameters: dict[str, Any]) -> dict[str, Any]:
    """A tuning record's ``parameters`` (:meth:`Choice.record`) with its dotted names
    whole again. Names such as ``similarity.threshold_quantile`` hold a dot, so a flat
    table of rows (a release's ``results.parquet``: one column per dotted path) splits
    them into nested records when it is read back; each parameter's own record is the
    one holding ``chosen``. A record that was never split comes back unchanged."""
    whole: dict[str, Any] = {}

    def walk(name: str, node: Any) -> None:
        if not isinstance(node, dict) or "chosen" in node:
            whole[name] = node
            return
        for key, value in node.items():
            walk(f"{name}.{key}" if name else key, value)

    walk("", parameters)
    return whole


def choose(cands: list[Candidate], fit: Callable[[Candidate], T], score: Callable[[T], float],
           direction: Direction, metric: str = "") -> Choice[T]:
    """Fit every candidate and keep the one with the best validation ``score`` (by
    ``direction``; a tie, or a non-finite score, keeps the earlier candidate). With a
    single candidate nothing is scored."""
    space = cands[0].space
    if len(cands) == 1:
        return Choice(fit(cands[0]), cands[0], {}, [], metric)
    sign = -1.0 if direction == "lower" else 1.0
    best: tuple[float, T, Candidate] | None = None
    scores = []
    for cand in cands:
        fitted = fit(cand)
        value = float(score(fitted))
        scores.append((cand.values, value))
        if math.isfinite(value) and (best is None or sign * value > best[0]):
            best = (sign * value, fitted, cand)
    if best is None:
        raise ValueError(f"every candidate of {sorted(space)} scored a non-finite {metric or 'score'} on the "
                         f"validation data; nothing can be chosen")
    return Choice(best[1], best[2], space, scores, metric)
