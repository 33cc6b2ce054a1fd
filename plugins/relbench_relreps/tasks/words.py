"""Word-embedding neighbourhoods across spaces (Moschella et al. 2023, §4.1, Table 1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from relbench.interfaces import ResultRow, TaskKind
from relbench.training import seeded_generator
from relbench_metrics import jaccard_at_k, mrr
from relbench_relreps.selectors import RandomAnchors
from relbench_relreps.similarities import Cosine
from relbench_relreps.tasks.common import specs_or_default, summary_table


@dataclass
class WordNeighbourhoods(TaskKind):
    """Word neighbourhoods: do two word-vector tables agree on each word's neighbours,
    in absolute and in relative coordinates? (Moschella et al. 2023, §4.1, Table 1.)

    For every ordered pair of encoders (source, target) — both directions and each
    encoder with itself — over a shared word sample: Jaccard@k between each word's top-k
    neighbours in the target and the top-k target neighbours of its *source* vector
    (cosine search of the source vector in the target space, as in the reference code),
    and MRR@k of the word itself in that cross search. Absolute spaces are compared once
    (no seeds or anchors) and only when their widths agree (otherwise *not achievable*);
    relative spaces for every seed × selector × similarity of the grid (default: random
    anchors, cosine). Rows carry the representation in the ``stitcher`` column
    (``absolute`` / ``relative``).

    Parameters
    ----------
    k : int, default 10
        Neighbourhood size (paper: 10).
    max_words : int, default 5000
        Words compared, drawn from the words every table holds (paper: 20,000; fewer keep
        a CPU run within seconds).
    word_seed : int, default 0
        Seed of that draw, fixed across run seeds as in the paper.
    """

    name: ClassVar[str] = "word-neighbourhoods"
    k: int = 10
    max_words: int = 5000
    word_seed: int = 0

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be at least 1, got {self.k}")
        if self.max_words <= self.k:
            raise ValueError(f"max_words must exceed k={self.k}, got {self.max_words}")

    @property
    def metric_names(self) -> list[str]:
        """The two metrics' row names, e.g. ``jaccard@10`` and ``mrr@10``."""
        return [f"jaccard@{self.k}", f"mrr@{self.k}"]

    def _metrics(self, source: torch.Tensor, target: torch.Tensor) -> dict[str, float]:
        jac, rr = self.metric_names
        return {jac: jaccard_at_k(source, target, self.k), rr: mrr(source, target, self.k)}

    def _words(self, banks: dict) -> list[str]:
        first = next(iter(banks.values()))
        held = [set(b.ids) for b in banks.values()]
        shared = [w for w in first.ids if all(w in h for h in held)]
        if len(shared) <= self.max_words:
            return shared
        pick = torch.randperm(len(shared), generator=seeded_generator(self.word_seed))[: self.max_words]
        return [shared[i] for i in sorted(pick.tolist())]

    def run(self, run: Any) -> None:
        """Absolute comparison once, then relative comparisons per seed × selector × similarity."""
        banks = run.banks("train")
        labels = list(banks)
        words = self._words(banks)
        absolute = {lbl: banks[lbl].rows(words) for lbl in labels}
        key = {"stitcher": "absolute"}
        if not run.is_done(key):
            with run.unit(key) as rows:
                for s in labels:
                    for t in labels:
                        if absolute[s].shape[1] != absolute[t].shape[1]:
                            for metric in self.metric_names:
                                rows.append(ResultRow(metric=metric, value=None, source=s, target=t,
                                                      stitcher="absolute", status="not_achievable",
                                                      error=f"widths differ: {absolute[s].shape[1]} vs "
                                                            f"{absolute[t].shape[1]}"))
                            continue
                        for metric, value in self._metrics(absolute[s], absolute[t]).items():
                            rows.append(ResultRow(metric=metric, value=value, source=s, target=t, stitcher="absolute",
                                                  extra={"words": len(words)}))
        selectors = specs_or_default(run.task.selectors, "selector", RandomAnchors)
        similarities = specs_or_default(run.task.similarities, "similarity", Cosine)
        for seed in run.task.seeds:
            for sel in selectors:
                for sim_spec in similarities:
                    key = {"seed": seed, "selector": sel.label, "similarity": sim_spec.label, "stitcher": "relative"}
                    if run.is_done(key):
                        continue
                    with run.unit(key) as rows:
                        anchors = run.anchors(seed, sel)
                        rel = {}
                        for lbl in labels:
                            sim = sim_spec.build()
                            sim.fit(banks[lbl].X)
                            with torch.no_grad():
                                rel[lbl] = sim.project(absolute[lbl], run.realise(anchors, lbl))
                        for s in labels:
                            for t in labels:
                                for metric, value in self._metrics(rel[s], rel[t]).items():
                                    rows.append(ResultRow(metric=metric, value=value, source=s, target=t,
                                                          stitcher="relative", extra={"words": len(words),
                                                                                      "anchors": len(anchors)}))

    def leaderboard(self, df, page) -> str:
        """Table 1: Jaccard@k and MRR@k per representation, selector, similarity and pair."""
        if df.empty:
            return "_no results yet_"
        df = df.copy()
        for col in ("selector", "similarity"):
            df[col] = df[col].fillna("-")
        body = summary_table(df, ["stitcher", "selector", "similarity", "source", "target"], "metric")
        return ("Neighbourhood agreement between word-vector tables (Moschella et al. 2023, Table 1): for "
                "each word, its top-k neighbours in the target space against the top-k target neighbours "
                "of its source vector (Jaccard) and the rank of the word itself there (MRR). Mean ± std "
                "over seeds; `n/a`: absolute spaces of different widths cannot be compared.\n\n" + body + "\n")
