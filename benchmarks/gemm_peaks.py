"""This machine's matrix-multiply peaks: fp32 and bf16 GEMM throughput, one thread and every core.

Names the CPU (``lscpu``'s model name) and its core count, then times ``torch.matmul``
of two ``size``² matrices (the best of ``--repeats`` products after a warm-up) in three
ways, on one thread and on every core (``torch.set_num_threads``):

* ``fp32``: float32 tensors;
* ``bf16``: bfloat16 tensors;
* ``bf16-autocast``: float32 tensors under ``torch.autocast("cpu", dtype=torch.bfloat16)``
  (each product casts its operands first, as a model under autocast does).

The machine may be shared: the whole measurement is repeated ``--rounds`` times, the
best figure of each kind is kept, and the load average (one minute) at the time of that
best figure is printed beside it, so that a figure taken on a busy machine says so.

    python benchmarks/gemm_peaks.py [--size 2048] [--repeats 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import time
from contextlib import nullcontext
from dataclasses import dataclass

import torch

from interrupt_run import cpu

#: how each kind of product is set up: operand dtype, and whether autocast wraps it
MODES = {"fp32": (torch.float32, False), "bf16": (torch.bfloat16, False), "bf16-autocast": (torch.float32, True)}


@dataclass
class Peak:
    """The best throughput of one kind of ``size``² product on ``threads`` threads."""

    mode: str
    threads: int
    size: int
    flops: float  # FLOP/s
    load: float  # one-minute load average when it was measured


def gemm_peak(mode: str, threads: int, size: int = 2048, repeats: int = 5) -> float:
    """FLOP/s of the best of ``repeats`` ``size``² products of kind ``mode`` (a key of
    :data:`MODES`) on ``threads`` threads, after one warm-up product."""
    dtype, autocast = MODES[mode]
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
        with torch.autocast("cpu", dtype=torch.bfloat16) if autocast else nullcontext():
            torch.matmul(a, b)  # warm-up
            best = float("inf")
            for _ in range(repeats):
                t0 = time.perf_counter()
                torch.matmul(a, b)
                best = min(best, time.perf_counter() - t0)
    finally:
        torch.set_num_threads(before)
    return 2 * size ** 3 / best


def measure_peaks(size: int = 2048, repeats: int = 5, rounds: int = 3) -> dict[tuple[str, int], Peak]:
    """The best :func:`gemm_peak` of every mode on one thread and on every core over
    ``rounds`` rounds, keyed by ``(mode, threads)``."""
    cores = torch.get_num_threads()
    best: dict[tuple[str, int], Peak] = {}
    for _ in range(rounds):
        for mode in MODES:
            for threads in sorted({1, cores}):
                flops = gemm_peak(mode, threads, size, repeats)
                if (mode, threads) not in best or flops > best[mode, threads].flops:
                    best[mode, threads] = Peak(mode, threads, size, flops, os.getloadavg()[0])
    return best


def describe(peaks: dict[tuple[str, int], Peak], rounds: int) -> str:
    """The CPU, its cores and every peak in GFLOP/s with its load average, one per line."""
    lines = [f"CPU: {cpu()}, {os.cpu_count()} cores (torch uses {torch.get_num_threads()} threads); "
             f"GEMM peaks of {next(iter(peaks.values())).size}² torch.matmul, best of {rounds} rounds:"]
    for mode in MODES:
        cells = [f"{p.flops / 1e9:6.0f} GFLOP/s on {p.threads} thread{'s' * (p.threads > 1)} (load {p.load:.1f})"
                 for (m, _), p in sorted(peaks.items()) if m == mode]
        lines.append(f"  {mode:<13} " + ", ".join(cells))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=2048, help="side of the square matrices (default 2048)")
    parser.add_argument("--repeats", type=int, default=5, help="products timed per measurement (default 5)")
    parser.add_argument("--rounds", type=int, default=3, help="times the whole measurement is repeated (default 3)")
    args = parser.parse_args()
    print(describe(measure_peaks(args.size, args.repeats, args.rounds), args.rounds))


if __name__ == "__main__":
    main()
