"""relbench.testing.check_dataset: every registered data set passes it (subsampled where
it has the parameters; ``hf`` on local parquet files), and broken ones are caught with a
message naming what failed.

Not checked here, and why: ``word-vocab`` (building it trains two gensim tables on the
full shipped corpora, about a minute on the CPU; it is tested in
tests/test_encoders_words.py); ``hf`` on the hub (downloads)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest
from planetoid_files import tiny_graph, write_planetoid

from relbench.interfaces import Dataset, DatasetData, Split
from relbench.testing import check_dataset

SMALL = {"train_size": 60, "test_size": 30}

#: every registered data set → its parameters (None: not checked, see the module)
CASES = {
    "toy-blobs": {"train_size": 40, "test_size": 20},
    "toy-file-blobs": {},  # path: written by the test
    "digits": SMALL,
    "fashion-mnist": SMALL,
    "mnist": SMALL,
    "rotten-tomatoes": SMALL,
    "bible-en-es": SMALL,
    "ui-strings": {},
    "emoji": {},
    "hf": {},  # local parquet files: written by the test
    "planetoid": {"graph": "pubmed"},  # root: Planetoid-format files written by the test
    "word-vocab": None,
}


def test_every_registered_dataset_has_a_case(registry):
    assert set(registry.names("dataset")) == set(CASES)


@pytest.mark.parametrize("name", [n for n, params in CASES.items() if params is not None])
def test_the_registered_dataset_passes(registry, name, tmp_path):
    params = dict(CASES[name])
    if name == "toy-file-blobs":
        np.save(tmp_path / "centres.npy", np.eye(3, 16) * 5)
        params["path"] = str(tmp_path / "centres.npy")
    if name == "hf":
        rows = pd.DataFrame({"text": [f"sentence {i}" for i in range(30)], "label": ["neg", "pos", "mid"] * 10})
        rows[:24].to_parquet(tmp_path / "train.parquet")
        rows[24:].to_parquet(tmp_path / "test.parquet")
        params = {"path": "parquet", "text_column": "text",
                  "data_files": {"train": str(tmp_path / "train.parquet"), "test": str(tmp_path / "test.parquet")}}
    if name == "planetoid":
        write_planetoid(tmp_path, "pubmed", tiny_graph())
        params["root"] = str(tmp_path)
    check_dataset(registry.get("dataset", name)(**params))


@dataclass
class Tiny(Dataset):
    """Three samples per split, two classes (a base for the broken data sets)."""

    name: ClassVar[str] = "tiny"

    def labels(self) -> np.ndarray:
        return np.array([0, 1, 0])

    def fingerprint(self) -> str:
        return "tiny-1"

    def load(self) -> DatasetData:
        splits = {s: Split(ids=[f"{s}{i}" for i in range(3)], labels=self.labels(), views={"en": ["a", "b", "c"]})
                  for s in ("train", "test")}
        return DatasetData(self.name, splits, ["no", "yes"], {"en": "text"}, self.fingerprint())


class OutOfRange(Tiny):
    """A label 2 with two class names."""

    def labels(self) -> np.ndarray:
        return np.array([0, 1, 2])


class Drifting(Tiny):
    """A fingerprint that changes with every load."""

    loads: ClassVar[list] = []

    def fingerprint(self) -> str:
        Drifting.loads.append(1)
        return f"tiny-{len(Drifting.loads)}"


class Unlabelled(Tiny):
    """Labels as strings."""

    def labels(self) -> np.ndarray:
        return np.array(["no", "yes", "no"])


class Undeclared(Tiny):
    """A view missing from view_modalities."""

    def load(self) -> DatasetData:
        data = super().load()
        data.view_modalities = {"es": "text"}
        return data


def test_a_well_formed_dataset_passes():
    check_dataset(Tiny())


@pytest.mark.parametrize("broken,message", [
    (OutOfRange(), r"OutOfRange \(dataset 'tiny'\): labels span 0…2 with 2 class names \(on split 'train' of "
                   r".*\)\. Fix: use class indices 0 … len\(class_names\)−1"),
    (Drifting(), "a second load's fingerprint is 'tiny-2', not 'tiny-1'.*make load\\(\\) deterministic"),
    (Unlabelled(), "3 labels of dtype <U3 for 3 ids.*one integer label per id"),
    (Undeclared(), r"the views are \['en'\], the declared ones \['es'\]"),
])
def test_a_broken_dataset_is_caught(broken, message):
    with pytest.raises(AssertionError, match=message):
        check_dataset(broken)
