"""relbench.testing.check_encoder: every registered encoder passes it on a few items of
its modality, with small settings where it trains or converts something, and broken
ones are caught with a message naming what failed.

Not checked here, and why: ``timm`` with its packaged pretrained weights (the default
``weights: auto``; its first use exports an ONNX graph, about 10 s on the CPU) and the
``onnxruntime`` backends of ``timm`` and ``transformers`` (the same export): the
encoders' code paths up to the weights are checked with random weights and the torch
backend, and the weights themselves in tests/test_encoders_images.py and
tests/test_encoders_onnx_backend.py; ``transformers`` models other than the packaged
all-MiniLM-L6-v2 (downloads)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
import torch

from relbench.interfaces import DatasetData, Encoder, EncoderContext, Split
from relbench.testing import check_encoder
from relbench_datasets.planetoid import Graph, GraphNode

WORDS = ["good", "bad", "film", "movie", "the", "great", "awful", "plot"]
TEXTS = ["a good film", "the plot is awful", "great movie", "bad"]
#: a ring of eight nodes with random features (the gcn encoder's items)
GRAPH = Graph("ring", np.random.default_rng(0).random((8, 5)).astype(np.float32),
              np.array([[i for i in range(8)] + [(i + 1) % 8 for i in range(8)],
                        [(i + 1) % 8 for i in range(8)] + [i for i in range(8)]]))
SMALL_TABLE = {"table": "word2vec", "corpus": ["rotten-tomatoes"], "dim": 16, "epochs": 1}

#: every registered encoder → (its parameters, the view it reads in :func:`context`)
CASES = {
    "toy-rotated": ({"seed": 1}, "vec"),
    "trained": ({"width": 16, "epochs": 1, "image_size": 8}, "image"),
    "precomputed": ({}, "id"),  # path and ids: written by the test
    "word-vectors": ({}, "word"),  # GloVe 6B 50-d, an installed package
    "word-vectors/word2vec": (SMALL_TABLE, "word"),
    "bag-of-vectors": (SMALL_TABLE, "en"),
    "e5": ({}, "en"),
    "use": ({}, "en"),
    "transformers": ({"backend": "torch"}, "en"),
    "timm": ({"weights": "random", "backend": "torch"}, "image"),
    "onnx": ({}, "image"),
    "gcn": ({"width": 8, "epochs": 5}, "node"),
}


def context(view: str, tmp_path) -> EncoderContext:
    """A context over 8 training samples in every view an encoder here reads."""
    rng = np.random.default_rng(0)
    n = len(WORDS)
    views = {"vec": list(rng.normal(size=(n, 16)).astype(np.float32)),
             "image": [rng.integers(0, 256, (8, 8), dtype=np.uint8) for _ in range(n)],
             "word": WORDS, "en": (TEXTS * 2)[:n], "id": [f"s{i}" for i in range(n)],
             "node": [GraphNode(GRAPH, i) for i in range(n)]}
    split = Split(ids=[f"s{i}" for i in range(n)], labels=np.arange(n) % 2, views=views)
    modalities = {"vec": "vector", "image": "image", "word": "word", "en": "text", "id": "id", "node": "graph"}
    data = DatasetData("conformance", {"train": split, "test": split}, ["even", "odd"], modalities, "fp")
    return EncoderContext(torch.device("cpu"), view, data, split, tmp_path)


def test_every_registered_encoder_has_a_case(registry):
    assert set(registry.names("encoder")) == {case.split("/")[0] for case in CASES}


#: the cases that load pretrained weights or train a table (marked slow, as elsewhere)
SLOW = {"word-vectors", "word-vectors/word2vec", "bag-of-vectors", "e5", "use", "transformers", "onnx"}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c for c in CASES])
def test_the_registered_encoder_passes(registry, case, tmp_path):
    params, view = CASES[case]
    if case == "precomputed":
        np.save(tmp_path / "vectors.npy", np.random.default_rng(0).normal(size=(len(WORDS), 5)).astype(np.float32))
        (tmp_path / "ids.txt").write_text("\n".join(f"s{i}" for i in range(len(WORDS))))
        params = {"path": str(tmp_path / "vectors.npy"), "ids": str(tmp_path / "ids.txt")}
    check_encoder(registry.get("encoder", case.split("/")[0])(**params), context(view, tmp_path))


@pytest.mark.slow
def test_a_declared_width_is_checked_and_a_width_parameter_is_not(registry, tmp_path):
    """e5 declares ``dim: ClassVar[int] = 384``; word-vectors' ``dim`` parameter sets the
    width of gensim tables only (GloVe stays 50-d), so it declares nothing."""
    e5 = registry.get("encoder", "e5")
    assert e5.dim == 384
    check_encoder(registry.get("encoder", "word-vectors")(dim=100), context("word", tmp_path))


@dataclass
class Float64(Encoder):
    """Rows as float64 (numpy's default)."""

    name: ClassVar[str] = "float64"

    def encode(self, items, ctx):
        return torch.from_numpy(np.stack(items).astype(np.float64))


@dataclass
class Narrow(Encoder):
    """Declares 16 dimensions and returns 8."""

    name: ClassVar[str] = "narrow"
    dim: ClassVar[int] = 16

    def encode(self, items, ctx):
        return torch.as_tensor(np.stack(items))[:, :8]


@dataclass
class Timestamped(Encoder):
    """A fingerprint that changes once the weights are loaded."""

    name: ClassVar[str] = "timestamped"

    def __post_init__(self):
        self.loaded = False

    def fingerprint(self, ctx):
        return "loaded" if self.loaded else ""

    def setup(self, ctx):
        self.loaded = True

    def encode(self, items, ctx):
        return torch.as_tensor(np.stack(items))


@dataclass
class Ragged(Encoder):
    """One row short."""

    name: ClassVar[str] = "ragged"

    def encode(self, items, ctx):
        return torch.as_tensor(np.stack(items))[1:]


@pytest.mark.parametrize("broken,message", [
    (Float64(), r"Float64 \(encoder 'float64'\): encode\(\) returned torch.float64, not float32 \(on 8 items of "
                r"view 'vec' of data set 'conformance'\). Fix: return a torch.float32 tensor"),
    (Narrow(), "returned width 8, but the encoder declares dim 16"),
    (Timestamped(), "the fingerprint after encode\\(\\) is 'loaded', not ''"),
    (Ragged(), r"returned shape \(7, 16\), not 8 × d"),
])
def test_a_broken_encoder_is_caught(broken, message, tmp_path):
    with pytest.raises(AssertionError, match=message):
        check_encoder(broken, context("vec", tmp_path))
