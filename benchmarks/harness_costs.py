"""What the harness itself costs, by design: E fits and E² cheap evaluations, cache reads.

Synthetic banks (Gaussian blobs behind random rotations) isolate the harness from the
encoders. For E encoders the stitching protocol should fit E decoders and evaluate E²
cells per combination: fit time grows linearly in E, evaluation quadratically but from a
much smaller base. Then the embedding cache: write and verified-read throughput, and the
PARAM anchor selector's training time (4 banks, the default settings with 3 epochs; its
budget is about 20 s at d ≈ 1280 on 2 CPU cores, where the kernel trick makes the steps
independent of d).

    python benchmarks/harness_costs.py [--n 1000] [--dim 512] [--anchors 300]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import torch

from relbench.cache import EmbeddingCache
from relbench.interfaces import AnchorContext, Bank, FitContext, StitchSide
from relbench_param.selector import PARAMSelector
from relbench_relreps.similarities import Cosine
from relbench_relreps.stitchers import RelativeDecoder


def banks(E: int, n: int, dim: int, classes: int = 10) -> tuple[dict[str, Bank], dict[str, Bank]]:
    """Train and test banks of E rotated copies of the same blobs."""
    g = torch.Generator().manual_seed(0)
    centres = torch.randn(classes, dim, generator=g) * 3
    out = []
    for split, size in (("train", n), ("test", n // 2)):
        y = torch.arange(size) % classes
        x = centres[y] + torch.randn(size, dim, generator=g)
        split_banks = {}
        for e in range(E):
            Q, _ = torch.linalg.qr(torch.randn(dim, dim, generator=torch.Generator().manual_seed(e)))
            split_banks[f"enc{e}"] = Bank(f"enc{e}", split, x @ Q * (1 + e), [f"{split}-{i}" for i in range(size)], y)
        out.append(split_banks)
    return out[0], out[1]


def stitching_costs(E: int, n: int, dim: int, k: int) -> tuple[float, float]:
    """Seconds spent fitting E decoders and evaluating E² cells."""
    train, test = banks(E, n, dim)
    ids = train["enc0"].ids[:k]
    sides = {}
    for name in train:
        sim = Cosine()
        sim.fit(train[name].X)
        sides[name] = StitchSide(name, train[name], test[name], train[name].rows(ids), sim)
    ctx = FitContext(seed=0, device=torch.device("cpu"), num_classes=10, modality="image", regularizers=[])
    fit_s = eval_s = 0.0
    for target in train:
        stitcher = RelativeDecoder(epochs=5, lr=1e-3, batch_size=128)
        t0 = time.perf_counter()
        stitcher.fit(sides[target], ctx)
        fit_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        for source in train:
            stitcher.predict(sides[source])
        eval_s += time.perf_counter() - t0
    return fit_s, eval_s


def cache_costs(n: int, dim: int) -> tuple[float, float, float]:
    """MB, write MB/s and verified read MB/s of one n × dim bank."""
    X = torch.randn(n, dim)
    with tempfile.TemporaryDirectory() as tmp:
        cache = EmbeddingCache(Path(tmp))
        t0 = time.perf_counter()
        cache.put("k" * 40, X, {})
        write = time.perf_counter() - t0
        t0 = time.perf_counter()
        assert cache.get("k" * 40) is not None
        read = time.perf_counter() - t0
    mb = X.numel() * 4 / 1e6
    return mb, mb / write, mb / read


def param_costs(n: int, dim: int, k: int, E: int = 4) -> float:
    """Seconds PARAM takes to learn ``k`` anchors over E banks of n × dim (3 epochs)."""
    train, _ = banks(E, n, dim)
    ids = train["enc0"].ids
    ctx = AnchorContext(num_anchors=k, seed=0, ids=ids, labels=None, banks=train, excluded=frozenset(),
                        device=torch.device("cpu"), views={}, pool_banks=lambda name: {})
    t0 = time.perf_counter()
    PARAMSelector(epochs=3).select(ctx)
    return time.perf_counter() - t0


def main() -> None:
    """Print the figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--anchors", type=int, default=300)
    args = p.parse_args()
    print(f"torch threads {torch.get_num_threads()}, n={args.n}, d={args.dim}, k={args.anchors}")
    print(f"{'E':>3} {'fits':>5} {'fit s':>7} {'s/fit':>6} {'cells':>6} {'eval s':>7} {'ms/cell':>8}")
    for E in (2, 4, 8):
        fit_s, eval_s = stitching_costs(E, args.n, args.dim, args.anchors)
        print(f"{E:>3} {E:>5} {fit_s:>7.2f} {fit_s / E:>6.2f} {E * E:>6} {eval_s:>7.2f} {eval_s / E / E * 1e3:>8.1f}")
    for n, dim in ((1500, 1280), (10000, 1280)):
        mb, w, r = cache_costs(n, dim)
        print(f"cache {n}×{dim} ({mb:.0f} MB): write {w:.0f} MB/s, verified read {r:.0f} MB/s")
    for dim in (256, 1280):
        print(f"PARAM anchors: 4 banks × 2000 × {dim}, k={args.anchors}, 3 epochs: "
              f"{param_costs(2000, dim, args.anchors):.1f} s")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
