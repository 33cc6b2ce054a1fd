"""scikit-learn's bundled 8×8 handwritten digits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from relbench.api import DatasetData
from relbench_datasets.assets import files_digest, package_file, sources_of
from relbench_datasets.base import Part, PooledDataset

INSTALL = "pip install scikit-learn"


@dataclass
class Digits(PooledDataset):
    """Digits: scikit-learn's 1,797 8×8 handwritten digits (10 classes) as uint8 images.

    ``sklearn.datasets.load_digits()`` gives 4-bit intensities 0–16; they are rescaled
    to 0–255 (``round(v × 255 / 16)``). No official split: a fixed stratified partition
    (seed 0) holds out ``test_fraction`` of every class. Ids are ``digits-<row>``.

    Parameters
    ----------
    test_fraction : float, default 0.2
        Share of every class held out for the test split (fixed partition, seed 0). Our choice.
    train_size : int | None, default None
        Seeded stratified subsample of the training partition (``null`` = all 1,438).
    test_size : int | None, default None
        Seeded stratified subsample of the test partition (``null`` = all 359).
    seed : int, default 0
        Seed of the subsampling. Our choice.
    """

    name: ClassVar[str] = "digits"

    def provenance(self) -> dict[str, str]:
        """scikit-learn's copy of the UCI optical digits."""
        return {"what": "UCI optical recognition of handwritten digits (8×8)", "package": "scikit-learn",
                "licence": "as distributed with scikit-learn",
                "cite": "Alpaydin and Kaynak (1998): Optical Recognition of Handwritten Digits, UCI ML Repository"}

    def load(self) -> DatasetData:
        """Load the bundled digits, rescale, partition and subsample."""
        path = package_file("sklearn", "datasets/data/digits.csv.gz", INSTALL)
        from sklearn.datasets import load_digits

        bunch = load_digits()
        images = np.rint(bunch.images * (255.0 / 16.0)).astype(np.uint8)
        labels = bunch.target.astype(np.int64)
        ids = [f"digits-{i:04d}" for i in range(len(labels))]
        parts = self.partition(Part(ids, labels, {"image": images}))
        class_names = [str(c) for c in bunch.target_names]
        return self.assemble(parts, class_names, {"image": "image"}, files_digest([path]),
                             sources=sources_of([path], ["scikit-learn"]))
