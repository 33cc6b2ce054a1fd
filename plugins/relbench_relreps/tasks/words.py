"""Word-embedding neighbourhoods across spaces (Moschella et al. 2023, §4.1, Table 1)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from relbench.api import deferred_import
from relbench.api import (Axis, Bank, Metric, Page, ResultRow, Task, TaskKind, TaskRunAPI, UnitKey, directions,
                          per_sample_values, seeded_generator)
from relbench_metrics import MRR, JaccardAtK, neighbour_rankings
from relbench_relreps.selectors import RandomAnchors
from relbench_relreps.similarities import Cosine
from relbench_relreps.tasks.common import (best_cell, cell_estimate, cell_headline, specs_or_default, summary_table,
                                           with_arrows, without_failures)

pd = deferred_import("pandas")
torch = deferred_import("torch")


@dataclass
class WordNeighbourhoods(TaskKind):
    """Word neighbourhoods: do two word-vector tables agree on each word's neighbours,
    in absolute and in relative coordinates? (Moschella et al. 2023, §4.1, Table 1.)

    For every ordered pair of encoders (source, target) — both directions and each
    encoder with itself — over a shared word sample: Jaccard@k between each word's top-k
    neighbours in the target and the top-k target neighbours of its *source* vector
    (cosine search of the source vector in the target space, as in the reference code),
    and MRR@k of the word itself in that cross search (both higher is better). Absolute
    spaces are compared once (no seeds or anchors) and only when their widths agree
    (otherwise *not achievable*); relative spaces for every seed × selector × similarity
    of the grid (default: random anchors, cosine).

    Columns: ``representation`` (``absolute`` / ``relative``), ``selector`` and
    ``similarity`` (empty for absolute), ``source`` and ``target`` (encoder labels).
    Units: ``{representation: absolute}`` once, and one per seed × selector ×
    similarity with ``representation: relative``; each holds every (source, target) pair.

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
    columns: ClassVar[tuple[str, ...]] = ("representation", "selector", "similarity", "source", "target")
    paired_on: ClassVar[tuple[str, ...]] = ("source", "target")  # claims pair their sides on these
    axes: ClassVar[dict[str, Axis]] = {"selectors": Axis("selector"), "similarities": Axis("similarity")}
    seeds_vary: ClassVar[str] = (
        "each draws its own anchors from the words of the data set's pool; every seed compares the same words "
        "(drawn once with `word_seed` from the words every table holds), nothing is trained, and no constant is "
        "chosen. The absolute comparison has no seed (no anchors): its interval is a bootstrap over words.")
    #: 2: rows store their per-word values (page intervals)
    version: ClassVar[str] = "2"
    k: int = 10
    max_words: int = 5000
    word_seed: int = 0

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be at least 1, got {self.k}")
        if self.max_words <= self.k:
            raise ValueError(f"max_words must exceed k={self.k}, got {self.max_words}")

    @property
    def row_metrics(self) -> dict[str, Metric]:
        """The two ranking metrics by row name, ``jaccard@k`` and ``mrr@k``."""
        return {f"{metric.name}@{self.k}": metric for metric in (JaccardAtK(), MRR())}

    def _words(self, banks: dict[str, Bank]) -> list[str]:
        first = next(iter(banks.values()))
        held = [set(b.ids) for b in banks.values()]
        shared = [w for w in first.ids if all(w in h for h in held)]
        if len(shared) <= self.max_words:
            return shared
        pick = torch.randperm(len(shared), generator=seeded_generator(self.word_seed))[: self.max_words]
        return [shared[i] for i in sorted(pick.tolist())]

    def plan(self, task: Task) -> list[UnitKey]:
        """The absolute comparison, then one relative unit per seed × selector × similarity."""
        selectors = specs_or_default(task.grid["selectors"], "selector", RandomAnchors)
        similarities = specs_or_default(task.grid["similarities"], "similarity", Cosine)
        return [{"representation": "absolute"}] + [
            {"seed": seed, "representation": "relative", "selector": sel, "similarity": sim}
            for seed in task.seeds for sel in selectors for sim in similarities]

    def run(self, run: TaskRunAPI) -> None:
        """Compare every ordered encoder pair in each unit not yet stored."""
        todo = [key for key in self.plan(run.task) if not run.is_done(key)]
        if not todo:
            return
        banks = run.banks("train")
        words = self._words(banks)
        absolute = {lbl: bank.rows(words) for lbl, bank in banks.items()}
        for key in todo:
            with run.unit(key) as rows:
                if key["representation"] == "absolute":
                    rows += self._compare(absolute, words, {"words": len(words)})
                    continue
                anchors = run.anchors(key["seed"], key["selector"])
                relative = {}
                for lbl, bank in banks.items():
                    sim = key["similarity"].build()
                    sim.fit(bank.X)
                    with torch.no_grad():
                        relative[lbl] = sim.project(absolute[lbl], run.realise(anchors, lbl))
                rows += self._compare(relative, words, {"words": len(words), "anchors": len(anchors)})

    def _compare(self, spaces: dict[str, torch.Tensor], words: list[str], extra: dict) -> list[ResultRow]:
        """Jaccard@k and MRR@k of every ordered pair of spaces, scored on the target and
        the cross neighbours of each word (:func:`~relbench_metrics.neighbour_rankings`);
        pairs of different widths are not achievable. Each row stores its per-word values
        (:func:`relbench.samples.values`), from which the page's intervals come."""
        rows = []
        for s, t in itertools.product(spaces, repeat=2):
            cell = {"source": s, "target": t}
            if spaces[s].shape[1] != spaces[t].shape[1]:
                rows += [ResultRow(metric=m, value=None, direction=metric.direction(), cell=cell,
                                   status="not_achievable",
                                   error=f"widths differ: {spaces[s].shape[1]} vs {spaces[t].shape[1]}")
                         for m, metric in self.row_metrics.items()]
                continue
            own, cross = neighbour_rankings(spaces[s], spaces[t], self.k)
            relevant = {JaccardAtK.name: own, MRR.name: np.arange(len(cross))}  # word i's target neighbours; i
            for m, metric in self.row_metrics.items():
                values = metric.per_sample(relevant[metric.name], cross)
                rows.append(ResultRow(metric=m, value=float(values.mean()), direction=metric.direction(), cell=cell,
                                      extra=extra, per_sample=per_sample_values(words, values)))
        return rows

    def claim_rows(self, results: pd.DataFrame) -> pd.DataFrame:
        """Cross-space pairs only: a table compared with itself agrees trivially."""
        return results[results["source"] != results["target"]]

    def meaning(self, headline: dict | None, direction: str) -> str:
        """How to read the page: agreement of neighbourhoods across tables (and, with a
        headline that has one, what its reference is)."""
        sentence = ("Higher Jaccard and MRR mean that two independently trained word tables agree on each word's "
                    "neighbours; relative representations are meant to agree more than absolute ones")
        if headline and np.isfinite(headline.get("reference", np.nan)):
            sentence += " (the reference is the absolute comparison of the same two tables)"
        return sentence + "."

    def headline(self, results: pd.DataFrame) -> dict | None:
        """Table 1's finding: the relative comparison of two different tables (selector ·
        similarity · source → target: a cell of the page) with the highest Jaccard@k, with
        its interval, beside the absolute comparison of the same two tables as reference
        (NaN where their widths differ); None without relative cross-table rows."""
        metric = next(iter(self.row_metrics))  # jaccard@k
        rows = self.claim_rows(without_failures(results)[0])
        rows = rows[rows["metric"] == metric]
        keys = ["selector", "similarity", "source", "target"]
        relative = rows[rows["representation"] == "relative"]
        cells = {f"relative · {selector} · {similarity} · {source} → {target}": group
                 for (selector, similarity, source, target), group in relative.groupby(keys)}
        best = best_cell(cells, directions(results).get(metric, "neutral"))
        if best is None:
            return None
        source, target = cells[best[0]][["source", "target"]].iloc[0]
        absolute = rows[(rows["representation"] == "absolute") & (rows["source"] == source)
                        & (rows["target"] == target)]
        return cell_headline(metric, *best, cell_estimate(absolute)[0])

    def page(self, results: pd.DataFrame, page: Page) -> str:
        """Table 1: Jaccard@k and MRR@k per representation, selector, similarity and pair."""
        df, note = without_failures(results)
        if df.empty:
            return "_no results yet_" + note
        df = with_arrows(df).fillna({"selector": "-", "similarity": "-"})
        body = summary_table(df, list(self.columns), "metric")
        return ("Neighbourhood agreement between word-vector tables (Moschella et al. 2023, Table 1): for "
                "each word, its top-k neighbours in the target space against the top-k target neighbours "
                "of its source vector (Jaccard) and the rank of the word itself there (MRR). Mean over seeds "
                "with its 95 % interval (Student-t over seeds; the absolute comparison has no seed: a bootstrap "
                "over words, from the per-word values each row stores); `n/a`: absolute spaces of different "
                "widths cannot be compared.\n\n" + body + note + "\n")
