"""relbench.testing.check_task_kind: every registered task kind, on tiny banks with small
settings, plans unique units and computes each exactly once; broken kinds are caught
with a message naming what failed."""

from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from relbench.interfaces import Bank, DatasetData, ResultRow, Split, TaskKind
from relbench.protocol import EvaluationProtocol
from relbench.testing import check_task_kind, spec
from test_core_sharing import _banks as blob_banks  # encoders a and b (a rotation of a), 4 classes in 12 dims

CLASSES = DatasetData("blobs", {}, [f"c{i}" for i in range(4)], {"x": "image"}, "blobs")


def word_banks() -> dict[str, dict[str, Bank]]:
    """Training banks of 120 words: ``a`` and a rotation ``b``."""
    g = torch.Generator().manual_seed(0)
    X, words = torch.randn(120, 10, generator=g), [f"w{i}" for i in range(120)]
    Q = torch.linalg.qr(torch.randn(10, 10, generator=g))[0]
    return {"train": {"a": Bank("a", "train", X, words), "b": Bank("b", "train", X @ Q, words)}}


def digit_images() -> DatasetData:
    d = load_digits()
    images = list((d.images * 255 / 16).astype(np.uint8))
    ids = [f"d{i}" for i in range(len(images))]
    split = lambda part: Split(ids=ids[part], labels=d.target[part], views={"image": images[part]})  # noqa: E731
    return DatasetData("digits", {"train": split(slice(0, 300)), "test": split(slice(300, 400))},
                       [str(i) for i in range(10)], {"image": "image"}, "digits")


def layer_rescaling_text() -> DatasetData:
    """The layer-rescaling tests' labelled sentences."""
    from test_irp_layer_rescaling import text_data

    return text_data()


@functools.cache
def tiny_bert_folder():
    """The layer-rescaling tests' tiny BERT, saved once per session."""
    from test_irp_layer_rescaling import save_tiny_bert

    return save_tiny_bert(Path(tempfile.mkdtemp(prefix="tiny-bert-")))


def cases(registry) -> dict[str, tuple]:
    """Every registered kind → (banks, dataset, task settings), small enough for seconds."""
    selectors = {"selectors": [spec(registry.get("selector", "random"))]}
    common = {"grid": selectors, "num_anchors": 16, "seeds": [0, 1]}
    similarities = {**selectors, "similarities": [spec(registry.get("similarity", "cosine"))]}
    return {
        "stitching": (blob_banks(), CLASSES, dict(
            common, metrics=[spec(registry.get("metric", "accuracy"))],
            grid={**similarities, "stitchers": [spec(registry.get("stitcher", name), epochs=2)
                                                for name in ("relative", "absolute")]})),
        "anchor-budget": (blob_banks(), CLASSES, dict(
            common, metrics=[spec(registry.get("metric", "accuracy"))], budgets=[4, 16],
            grid={**similarities, "stitchers": [spec(registry.get("stitcher", name), epochs=2)
                                                for name in ("relative", "non-stitched")]})),
        "word-neighbourhoods": (word_banks(), None, dict(common, k=5, max_words=100)),
        "reconstruction": ({}, digit_images(), dict(common, encoders=[], latent_dim=8, hidden=32, epochs=1,
                                                    train_samples=100, test_samples=50)),
        "relative-training": ({}, digit_images(), dict(common, encoders=[], latent_dim=8, epochs=1,
                                                       train_samples=100, test_samples=50)),
        "conv-reconstruction": ({}, digit_images(), dict(common, encoders=[], latent_dim=4, hidden=4, epochs=1,
                                                         train_samples=60, test_samples=20, num_anchors=8)),
        "proxy": (blob_banks(), CLASSES, dict(common, encoders=["a"], grid=similarities, epochs=[1], widths=[8],
                                              activations=["relu"], model_seeds=[0, 1], reference_epochs=1)),
        "translation-quality": (blob_banks(), CLASSES, dict(common, omegas=[1], deltas=[0.3], max_samples=60)),
        "scale-invariance": (blob_banks(), CLASSES, dict(common, alphas=[1.0, 10.0], activations=["relu"], epochs=1,
                                                         hidden=16, omega=1, delta=0.3, max_samples=60)),
        "embedding-norms": (blob_banks(), CLASSES, dict(seeds=[0, 1], bins=5)),
        "space-similarity": (blob_banks(), CLASSES, dict(seeds=[0, 1], max_samples=30, grid={"measures": [
            spec(registry.get("space_measure", name)) for name in ("linear-cka", "cknna", "procrustes-distance")]})),
        "symmetry": (blob_banks(), CLASSES, dict(common, epochs=1, iterations=2, max_samples=60,
                                                 protocol=EvaluationProtocol(validation=0.2))),
        "death-times": (blob_banks(), CLASSES, dict(
            common, grid={**similarities, "regularizers": [None, spec(registry.get("regularizer", "topological"))]},
            epochs=1, group_size=4, bins=5)),
        "layer-rescaling": ({}, layer_rescaling_text(), dict(common, encoders=[], model=str(tiny_bert_folder()),
                                                              max_length=16, layers=[0, 2], scales=[2.0],
                                                              max_samples=30, epochs=1)),
    }


def test_every_registered_task_kind_has_a_case(registry):
    assert set(registry.names("task_kind")) == set(cases(registry))


@pytest.mark.parametrize("name", ["stitching", "anchor-budget", "word-neighbourhoods", "reconstruction",
                                  "conv-reconstruction", "relative-training", "proxy", "translation-quality", "scale-invariance",
                                  "embedding-norms", "death-times", "layer-rescaling", "space-similarity",
                                  "symmetry"])
def test_the_registered_task_kind_passes(registry, name, tmp_path):
    banks, dataset, task = cases(registry)[name]
    run = check_task_kind(registry.get("task_kind", name), banks, dataset=dataset, tmp=tmp_path, **task)
    assert run.computed and len(run.computed) == run.planned()


@dataclass
class PerEncoder(TaskKind):
    """One unit per (seed, encoder), one row each (a base for the broken kinds)."""

    name: ClassVar[str] = "per-encoder"
    columns: ClassVar[tuple[str, ...]] = ("encoder",)

    def plan(self, task):
        return [{"seed": s, "encoder": e.label} for s in task.seeds for e in task.encoders]

    def todo(self, run):
        return [key for key in self.plan(run.task) if not run.is_done(key)]

    def run(self, run):
        for key in self.todo(run):
            with run.unit(key) as rows:
                rows.append(ResultRow("score", 1.0, "higher"))

    def page(self, results, page):
        return ""


class Repeating(PerEncoder):
    def plan(self, task):
        return super().plan(task) * 2

    def todo(self, run):
        return super().plan(run.task)


class Forgetful(PerEncoder):
    """Computes every unit on every run, stored or not."""

    def todo(self, run):
        return self.plan(run.task)


class Unplanned(PerEncoder):
    """Also computes a unit for a seed the task does not have."""

    def todo(self, run):
        return super().todo(run) + [{"seed": 99, "encoder": "a"}]


class Lazy(PerEncoder):
    """Computes the first seed only."""

    def todo(self, run):
        return [key for key in super().todo(run) if key["seed"] == run.task.seeds[0]]


class MisdeclaredMatrix(PerEncoder):
    """Declares a matrix over a column it does not have."""

    matrix_axes: ClassVar[tuple[str, ...]] = ("encoder", "target")


class PointlessCurve(PerEncoder):
    """Declares a curve axis its curve cells do not carry."""

    curve_axis: ClassVar[str] = "budget"

    def curve_cells(self, results, page):
        return [{"metric": "m", "score": 1.0, "n": 1}]


class UnknownPresentation(PerEncoder):
    """Declares a presentation parameter it does not have."""

    presentation_params: ClassVar[tuple[str, ...]] = ("companion_task",)


def test_a_well_formed_kind_passes():
    run = check_task_kind(PerEncoder, blob_banks(), seeds=[0, 1])
    assert run.computed == [{"seed": s, "encoder": e} for s in (0, 1) for e in ("a", "b")]


@pytest.mark.parametrize("broken,message", [
    (Repeating, r"Repeating \(task_kind 'per-encoder'\): plan\(\) lists units more than once: "
                r"\['{\"encoder\":\"a\",\"seed\":0}'.*\(on task 't' of kind 'per-encoder' with seeds \[0, 1\] and "
                r"encoders \['a', 'b'\]\)\. Fix: give every unit a distinct key"),
    (Forgetful, r"the second run broke the runner's contract: unit {'seed': 0, 'encoder': 'a'} computed twice .*"
                r"skipping those run.is_done\(key\) reports"),
    (Unplanned, r"the first run broke the runner's contract: unit {'seed': 99, 'encoder': 'a'} is not in the "
                r"kind's plan\(\)"),
    (Lazy, r"run\(\) left planned units uncomputed: \['{\"encoder\":\"a\",\"seed\":1}'"),
    (MisdeclaredMatrix, r"matrix_axes \('encoder', 'target'\) are not two of its columns"),
    (PointlessCurve, r"curve_cells gives points without curve_axis 'budget'"),
    (UnknownPresentation, r"presentation_params names \['companion_task'\], which are not its parameters"),
])
def test_a_broken_kind_is_caught(broken, message):
    with pytest.raises(AssertionError, match=message):
        check_task_kind(broken, blob_banks(), seeds=[0, 1])
