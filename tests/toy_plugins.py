"""Tiny, fast plugins for the harness tests: Gaussian blobs seen through random
orthogonal maps (so relative representations can stitch them and absolute ones cannot)."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import torch

from relbench import hookimpl
from relbench.interfaces import (AnchorContext, AnchorSelector, Anchors, Dataset, DatasetData, DataSources, Encoder,
                                 ResultRow, Split, TaskKind)
from relbench.console import progress_bar


@dataclass
class Blobs(Dataset):
    """Gaussian class blobs in 16 dimensions (a test fixture)."""

    name: ClassVar[str] = "toy-blobs"
    classes: int = 4
    train_size: int = 240
    test_size: int = 120
    seed: int = 0

    def load(self) -> DatasetData:
        rng = np.random.default_rng(self.seed)
        centres = rng.normal(size=(self.classes, 16)) * 3
        splits = {}
        for split, n in (("train", self.train_size), ("test", self.test_size)):
            y = np.arange(n) % self.classes
            x = centres[y] + rng.normal(size=(n, 16))
            splits[split] = Split(ids=[f"{split}-{i}" for i in range(n)], labels=y,
                                  views={"vec": list(x.astype(np.float32))})
        fp = hashlib.sha256(repr(self.params()).encode()).hexdigest()[:16]
        return DatasetData(name=self.name, splits=splits, class_names=[f"c{i}" for i in range(self.classes)],
                           view_modalities={"vec": "vector"}, fingerprint=fp)


@dataclass
class FileBlobs(Blobs):
    """The blobs of a ``.npy`` file (``classes × 16`` centres), declaring the file as its
    source, so a run can plan from its description (a test fixture)."""

    name: ClassVar[str] = "toy-file-blobs"
    path: str = ""
    loads: ClassVar[list] = []

    def load(self) -> DatasetData:
        FileBlobs.loads.append(self.path)
        centres = np.load(self.path)
        data = Blobs(classes=len(centres), train_size=self.train_size, test_size=self.test_size).load()
        for split in data.splits.values():
            split.views["vec"] = [(centres[y] + x / 3).astype(np.float32)
                                  for x, y in zip(split.views["vec"], split.labels)]
        fp = hashlib.sha256(centres.tobytes() + repr(self.params()).encode()).hexdigest()[:16]
        return DatasetData(name=self.name, splits=data.splits, class_names=data.class_names,
                           view_modalities=data.view_modalities, fingerprint=fp,
                           sources=DataSources(files=(self.path,)))


@dataclass
class Rotated(Encoder):
    """The blobs through a seeded random orthogonal map and scale (a test fixture)."""

    name: ClassVar[str] = "toy-rotated"
    seed: int = 0
    scale: float = 1.0
    nan_rows: list[int] | None = None
    calls: ClassVar[list] = []

    def encode(self, items, ctx):
        with progress_bar(total=len(items), desc=f"toy-rotated {self.seed}") as bar:  # as real encoders do
            bar.update(len(items))
        Rotated.calls.append(self.seed)
        g = torch.Generator().manual_seed(self.seed)
        Q, _ = torch.linalg.qr(torch.randn(16, 16, generator=g))
        X = torch.as_tensor(np.stack(items)) @ Q * self.scale
        for r in self.nan_rows or []:
            X[r] = float("nan")
        return X


@dataclass
class SpySelector(AnchorSelector):
    """Random anchors from a selector that claims to learn from the banks, recording
    which banks and held-out encoders every call was given (a test fixture): in
    ``calls``, and as a line of file ``log`` when set (calls in other processes); each
    call takes ``sleep`` seconds at least."""

    name: ClassVar[str] = "toy-spy"
    learns_from_banks: ClassVar[bool] = True
    calls: ClassVar[list] = []
    log: str = ""
    sleep: float = 0.0

    def select(self, ctx: AnchorContext) -> Anchors:
        SpySelector.calls.append((ctx.seed, sorted(ctx.banks), sorted(ctx.excluded)))
        if self.log:
            with open(self.log, "a") as fh:
                fh.write(json.dumps([ctx.seed, sorted(ctx.excluded)]) + "\n")
        time.sleep(self.sleep)
        order = np.random.default_rng(ctx.seed).permutation(len(ctx.ids))[: ctx.num_anchors]
        return Anchors(ids=[ctx.ids[i] for i in order])


@dataclass
class Tally(TaskKind):
    """Two items per seed, each scored ``seed + offset``, with an index section listing
    its tasks' cells (a test fixture): ``cells_calls`` records the task of every
    :meth:`index_cells` call, ``section_calls`` the argument of every :meth:`index_section`
    call."""

    name: ClassVar[str] = "toy-tally"
    columns: ClassVar[tuple[str, ...]] = ("item",)
    uses_encoders: ClassVar[bool] = False
    cells_calls: ClassVar[list] = []
    section_calls: ClassVar[list] = []
    offset: float = 0.0

    def plan(self, task):
        return [{"seed": seed, "item": item} for seed in task.seeds for item in ("x", "y")]

    def run(self, run):
        for key in self.plan(run.task):
            if not run.is_done(key):
                with run.unit(key) as rows:
                    rows.append(ResultRow("score", key["seed"] + self.offset, "higher"))

    def page(self, results, page):
        return "a tally\n"

    def index_cells(self, results, page):
        Tally.cells_calls.append(page.task)
        return [{"item": item, "score": float(group["value"].mean())}
                for item, group in results.groupby("item", sort=True)]

    @classmethod
    def index_section(cls, cells_by_task):
        cls.section_calls.append((cls.name, cells_by_task))
        return f"## Section of {cls.name}\n\n" + json.dumps(cells_by_task, sort_keys=True) + "\n"


@dataclass
class OtherTally(Tally):
    """Another kind with the same section (a test fixture)."""

    name: ClassVar[str] = "toy-other-tally"


#: registers the tally kinds where a test adds it to its registry (kept out of the toy
#: plugins' own hooks: the conformance tests give every registered kind a case)
TALLIES = SimpleNamespace(relbench_task_kinds=hookimpl(lambda: [Tally, OtherTally]))


@hookimpl
def relbench_anchor_selectors():
    return [SpySelector]


@hookimpl
def relbench_datasets():
    return [Blobs, FileBlobs]


@hookimpl
def relbench_encoders():
    return [Rotated]
