"""Seeded stratified splitting/subsampling and the two-class check of the data set plugins."""

import numpy as np
import pytest

from relbench.errors import ConfigError, UserError
from relbench_datasets.base import Part, SampledDataset
from relbench_datasets.sampling import require_two_classes, stratified_split, stratified_subsample


def test_split_is_stratified_disjoint_and_seeded():
    labels = np.repeat(np.arange(4), [50, 30, 15, 1])
    train, test = stratified_split(labels, len(labels), 0.2, seed=0)
    assert set(train).isdisjoint(test) and len(train) + len(test) == len(labels)
    assert np.bincount(labels[test], minlength=4).tolist() == [10, 6, 3, 0]  # singleton stays in train
    again = stratified_split(labels, len(labels), 0.2, seed=0)
    assert np.array_equal(again[1], test)
    assert not np.array_equal(stratified_split(labels, len(labels), 0.2, seed=1)[1], test)


def test_subsample_proportions_presence_and_order():
    labels = np.repeat(np.arange(3), [600, 300, 100])
    idx = stratified_subsample(labels, len(labels), 100, seed=3)
    assert len(idx) == 100 and np.all(np.diff(idx) > 0)  # sorted, unique
    counts = np.bincount(labels[idx], minlength=3)
    assert np.all(np.abs(counts - [60, 30, 10]) <= 1)
    rare = np.array([0] * 997 + [1, 2, 2])
    assert set(rare[stratified_subsample(rare, 1000, 3, seed=0)]) == {0, 1, 2}
    assert np.array_equal(stratified_subsample(labels, 1000, None, 0), np.arange(1000))
    assert np.array_equal(stratified_subsample(None, 10, 4, 0), stratified_subsample(None, 10, 4, 0))


def test_one_class_split_raises_a_config_error():
    with pytest.raises(ConfigError, match="at least two"):
        require_two_classes("toy", "train", np.zeros(5, dtype=int), ["only"])
    require_two_classes("toy", "train", None, [])  # unlabelled pools are fine

    class Toy(SampledDataset):
        name = "toy"

        def load(self):
            part = Part(["a", "b"], np.array([0, 0]), {"en": ["x", "y"]})
            return self.assemble({"train": part}, ["c0", "c1"], {"en": "text"}, "src")

    with pytest.raises(UserError, match="'toy'.*'train' split has 1 class"):
        Toy().load()
    with pytest.raises(ValueError, match="train_size"):
        Toy(train_size=1)
