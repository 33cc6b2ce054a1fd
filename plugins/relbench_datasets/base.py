"""Base classes holding the parameters every data set shares, and the assembly of splits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from relbench.api import DataSources, Dataset, DatasetData, Split
from relbench_datasets.assets import fingerprint
from relbench_datasets.sampling import require_two_classes, stratified_split, stratified_subsample

#: the seed of the fixed train/test partition of data sets that ship without one: every
#: subsampling seed is then evaluated on the same held-out samples (our choice)
PARTITION_SEED = 0


@dataclass
class Part:
    """The samples of one split before subsampling: ids, labels and aligned views."""

    ids: list[str]
    labels: np.ndarray | None
    views: dict[str, Sequence[Any]]

    def take(self, idx: np.ndarray) -> Part:
        """The samples at ``idx`` (views as lists, or arrays when they were arrays)."""
        views = {
            name: items[idx] if isinstance(items, np.ndarray) else [items[i] for i in idx]
            for name, items in self.views.items()
        }
        labels = None if self.labels is None else self.labels[idx]
        return Part([self.ids[i] for i in idx], labels, views)


@dataclass
class SampledDataset(Dataset):
    """A data set with seeded stratified subsampling of its train and test splits."""

    train_size: int | None = None
    test_size: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        for field_name in ("train_size", "test_size"):
            value = getattr(self, field_name)
            if value is not None and value < 2:
                raise ValueError(f"{field_name} must be at least 2 (or null for all samples), got {value}")

    def assemble(
        self,
        parts: dict[str, Part],
        class_names: list[str],
        view_modalities: dict[str, str],
        source: str,
        ordinal: bool = False,
        sources: DataSources | None = None,
    ) -> DatasetData:
        """Subsample each part, check it keeps two classes, and build the :class:`DatasetData`.

        ``source`` is the digest of the raw bytes read; with the parameters it makes
        the fingerprint. ``sources`` names what was read (every file, every distribution
        whose version enters ``source``), so a run can plan without loading the data set
        (:class:`~relbench.interfaces.DataSources`); leave it out when the data come from
        elsewhere (a hub).
        """
        sizes = {"train": self.train_size, "test": self.test_size}
        splits = {}
        for split, part in parts.items():
            idx = stratified_subsample(part.labels, len(part.ids), sizes.get(split), self.seed)
            sub = part.take(idx)
            require_two_classes(self.name, split, sub.labels, class_names)
            labels = None if sub.labels is None else sub.labels.astype(np.int64)
            splits[split] = Split(ids=sub.ids, labels=labels, views=sub.views)
        return DatasetData(
            name=self.name,
            splits=splits,
            class_names=list(class_names),
            view_modalities=dict(view_modalities),
            fingerprint=fingerprint(self.name, source, self.params()),
            ordinal=ordinal,
            sources=sources,
        )


@dataclass
class PooledDataset(SampledDataset):
    """A data set without an official split: a fixed stratified train/test partition."""

    test_fraction: float = 0.2

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 < self.test_fraction < 1.0:
            raise ValueError(f"test_fraction must be strictly between 0 and 1, got {self.test_fraction}")

    def partition(self, pool: Part) -> dict[str, Part]:
        """Split one pool into train and test parts (stratified, seed :data:`PARTITION_SEED`)."""
        train_idx, test_idx = stratified_split(pool.labels, len(pool.ids), self.test_fraction, PARTITION_SEED)
        return {"train": pool.take(train_idx), "test": pool.take(test_idx)}
