"""Resident memory of encoding through onnxruntime, with and without trimming the heap
after each run (`relbench_encoders.ort_backend.release_freed_memory`), side by side.

Each variant is a fresh process that encodes N synthetic 28×28 grey images (the shape of
Fashion-MNIST) with a packaged timm CNN at 128² through the onnxruntime backend, in one
`encode` call as the runner makes it, and prints the resident memory after the call, the
peak (`ru_maxrss`) and the wall time. The exported graph is taken from the real cache
(`$RELBENCH_CACHE_DIR` or ~/.cache/relbench; exported there on first use) and copied into
a temporary cache, so no variant exports. Without trimming, glibc's raised mmap threshold
puts each input batch on a heap that is not handed back: the process grows by about a
batch per call.

    python benchmarks/ort_heap.py [--images 10000] [--model tf_efficientnet_lite0]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from relbench.cache import default_cache_root

ENCODE = """
import resource, sys, time
import numpy as np, torch
from relbench.interfaces import DatasetData, EncoderContext, Split
from relbench_encoders import ort_backend
from relbench_encoders.timm_encoder import TimmEncoder

model, n, cache, trim = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "trim"
if not trim:
    ort_backend.release_freed_memory = lambda: False
rng = np.random.default_rng(0)
items = [rng.integers(0, 255, (28, 28), dtype=np.uint8) for _ in range(n)]
split = Split(ids=[str(i) for i in range(n)], labels=None, views={"image": items})
ctx = EncoderContext(torch.device("cpu"), "image", DatasetData("t", {"train": split}, [], {"image": "image"}, "fp"),
                     split, __import__("pathlib").Path(cache), batch_size=64)
encoder = TimmEncoder(model=model, image_size=128, backend="onnxruntime")
encoder.setup(ctx)
start = time.perf_counter()
X = encoder.encode(items, ctx)
wall = time.perf_counter() - start
rss = int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) / 1024
print(encoder.backend_used, tuple(X.shape), f"{rss:.0f}", f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}",
      f"{wall:.1f}")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=10_000)
    parser.add_argument("--model", default="tf_efficientnet_lite0")
    args = parser.parse_args()
    real = default_cache_root()
    with tempfile.TemporaryDirectory(prefix="relbench-ort-heap-") as tmp:
        for folder in ("weights", "onnx"):
            if (real / folder).is_dir():
                shutil.copytree(real / folder, Path(tmp) / folder)
        print(f"{args.images} images, {args.model} at 128², onnxruntime, one encode call")
        for variant in ("no trim", "trim"):
            out = subprocess.run([sys.executable, "-c", ENCODE, args.model, str(args.images), tmp,
                                  variant.replace(" ", "-")], capture_output=True, text=True, check=True)
            backend, *_, rss, peak, wall = out.stdout.split()
            print(f"  {variant:<8} backend {backend:<12} RSS after {rss:>5} MB  peak {peak:>5} MB  wall {wall:>6} s")


if __name__ == "__main__":
    main()
