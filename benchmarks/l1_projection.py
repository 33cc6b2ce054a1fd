"""Exact L1 relative projection, candidates side by side against ``torch.cdist(X, A, p=1)``.

Times, on random float32 data of the full-scale shapes (``X`` 7,000 × 1,280 and ``A``
768 × 1,280 by default), on one thread and on every core, the best of ``--repeats`` runs
after a warm-up of:

* ``cdist``: ``torch.cdist(X, A, p=1)``, the reference;
* ``broadcast rows``: ``(X[i:j, None, :] - A[None]).abs().sum(-1)`` over row chunks of
  about ``L1_BLOCK`` differences;
* ``blocks, abs+sum``: the differences of a block of rows and anchors written into one
  buffer and reduced by ``abs_`` and ``sum``
  (``relbench_relreps.similarities.l1_distances``, what the ``l1`` similarity uses; the
  same blocks reduced by ``torch.linalg.vector_norm(ord=1)`` took 1.4× cdist's time on
  one thread and were dropped);
* ``compiled``: ``torch.compile(dynamic=True)`` of the broadcast over row chunks (needs a
  C++ compiler; its compile time is printed apart; ``--no-compile`` leaves it out).

Each line gives the seconds, the ratio to ``cdist`` on the same thread count, the largest
relative deviation from ``cdist`` and the one-minute load average when it was measured.

    python benchmarks/l1_projection.py [--rows 7000] [--anchors 768] [--dim 1280]
                                       [--repeats 2] [--no-compile]
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from relbench_relreps.similarities import L1_BLOCK, l1_distances


def cdist(X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    return torch.cdist(X, A, p=1.0)


def _broadcast(X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    return (X[:, None, :] - A[None]).abs().sum(-1)


def row_chunks(fn):
    """``fn`` applied to chunks of rows of ``X`` of about ``L1_BLOCK`` differences each."""
    def chunked(X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        rows, out = max(1, L1_BLOCK // (A.numel() or 1)), X.new_empty(len(X), len(A))
        for i in range(0, len(X), rows):
            out[i:i + rows] = fn(X[i:i + rows], A)
        return out
    return chunked


def best_seconds(fn, X, A, repeats: int) -> tuple[float, torch.Tensor]:
    """The best of ``repeats`` timed calls after a warm-up, and the result."""
    out = fn(X, A)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(X, A)
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=7000)
    parser.add_argument("--anchors", type=int, default=768)
    parser.add_argument("--dim", type=int, default=1280)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-compile", action="store_true", help="leave the torch.compile candidate out")
    args = parser.parse_args()

    gen = torch.Generator().manual_seed(0)
    X = torch.randn(args.rows, args.dim, generator=gen)
    A = torch.randn(args.anchors, args.dim, generator=gen)
    candidates = {"cdist": cdist, "broadcast rows": row_chunks(_broadcast),
                  "blocks, abs+sum": l1_distances}
    if not args.no_compile:
        compiled = row_chunks(torch.compile(_broadcast, dynamic=True))
        t0 = time.perf_counter()
        try:
            compiled(X[:2], A[:2])
            candidates["compiled"] = compiled
            print(f"torch.compile: {time.perf_counter() - t0:.1f} s to compile (cache: TORCHINDUCTOR_CACHE_DIR)")
        except Exception as error:  # no compiler, unsupported platform: say so and go on
            print(f"torch.compile unavailable: {type(error).__name__}: {str(error)[:200]}")

    cores = torch.get_num_threads()
    print(f"X {args.rows:,} × {args.dim:,}, A {args.anchors:,} × {args.dim:,}, float32; "
          f"best of {args.repeats} after a warm-up")
    for threads in sorted({1, cores}):
        torch.set_num_threads(threads)
        reference = None
        for name, fn in candidates.items():
            seconds, out = best_seconds(fn, X, A, args.repeats)
            if reference is None:
                reference, base = out, seconds
            deviation = ((out - reference).abs() / reference.abs().clamp_min(1e-30)).max().item()
            print(f"  {threads} thread{'s' * (threads > 1)}  {name:<16} {seconds:7.3f} s  {seconds / base:5.2f}× cdist  "
                  f"max relative deviation {deviation:.1e}  (load {os.getloadavg()[0]:.1f})", flush=True)
    torch.set_num_threads(cores)


if __name__ == "__main__":
    main()
