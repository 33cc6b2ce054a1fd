"""Fashion-MNIST from the Debian ``dataset-fashion-mnist`` idx files (hub copy as fallback)."""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from relbench.api import DatasetData, MissingAsset
from relbench_datasets.assets import files_digest, package_version, sources_of
from relbench_datasets.base import Part, SampledDataset

DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
INSTALL = "apt-get install dataset-fashion-mnist"
CLASS_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}


def read_idx(path: Path) -> np.ndarray:
    """Parse a gzipped idx file (the MNIST format) into a uint8 array of its shape."""
    with gzip.open(path, "rb") as fh:
        data = fh.read()
    zero, dtype_code, ndim = data[0] * 256 + data[1], data[2], data[3]
    if zero != 0 or dtype_code != 0x08:
        raise ValueError(f"{path} is not an unsigned-byte idx file")
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def _from_hub() -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], str]:
    """Both splits from the hub copy ``fashion_mnist`` (needs a reachable hub or its cache)."""
    try:
        import datasets

        ds = datasets.load_dataset("fashion_mnist")
    except Exception as exc:  # no hub, no cache, or no `datasets`: say how to install offline
        raise MissingAsset(
            f"Fashion-MNIST is not installed: {DEBIAN_DIR} is missing and the hub copy could not be "
            f"loaded ({type(exc).__name__}). Install it with: {INSTALL}"
        ) from None
    out = {}
    for split in ("train", "test"):
        images = np.stack([np.asarray(im, dtype=np.uint8) for im in ds[split]["image"]])
        out[split] = (images, np.asarray(ds[split]["label"], dtype=np.int64))
    source = "hub:" + ds["train"]._fingerprint + ds["test"]._fingerprint + package_version("datasets")
    return out, source


@dataclass
class FashionMNIST(SampledDataset):
    """Fashion-MNIST: 28×28 grey clothing images in 10 classes (original 60k/10k split).

    Read from the Debian package ``dataset-fashion-mnist`` (idx.gz files under
    ``/usr/share/datasets/fashion-mnist``); without it, from the hub copy
    ``datasets.load_dataset("fashion_mnist")``. Ids are ``fmnist-<split>-<index>``
    (index in the original split); the view ``image`` holds 28×28 uint8 arrays.

    Parameters
    ----------
    train_size : int | None, default 5000
        Seeded stratified subsample of the 60,000 training images (``null`` = all).
        Our choice, so that the default suite fits a 2-core CPU.
    test_size : int | None, default 1000
        Seeded stratified subsample of the 10,000 test images (``null`` = all). Our choice.
    seed : int, default 0
        Seed of the subsampling. Our choice.
    """

    name: ClassVar[str] = "fashion-mnist"
    train_size: int | None = 5000
    test_size: int | None = 1000

    def provenance(self) -> dict[str, str]:
        """Fashion-MNIST as Debian ships it."""
        return {"what": "Fashion-MNIST", "debian": "dataset-fashion-mnist", "licence": "MIT",
                "cite": "Xiao et al. (2017): Fashion-MNIST, arXiv:1708.07747"}

    def load(self) -> DatasetData:
        """Read the idx files (or the hub copy) and subsample."""
        if (DEBIAN_DIR / FILES["train"][0]).is_file():
            paths = [DEBIAN_DIR / f for pair in FILES.values() for f in pair]
            for path in paths:
                if not path.is_file():
                    raise MissingAsset(f"{path} is missing. Reinstall it with: {INSTALL}")
            arrays = {
                split: (read_idx(DEBIAN_DIR / images), read_idx(DEBIAN_DIR / labels).astype(np.int64))
                for split, (images, labels) in FILES.items()
            }
            source, sources = files_digest(paths), sources_of(paths)
        else:
            (arrays, source), sources = _from_hub(), None
        parts = {
            split: Part([f"fmnist-{split}-{i:05d}" for i in range(len(labels))], labels, {"image": images})
            for split, (images, labels) in arrays.items()
        }
        return self.assemble(parts, CLASS_NAMES, {"image": "image"}, source, sources=sources)
