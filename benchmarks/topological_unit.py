"""Seconds of one `topological` unit of fashion-regularizers, before and after, side by side.

A unit of that task trains the relative decoder with an adapter once per β candidate
(``beta_quantile`` tuned over three values): on average three adapter trainings per
unit, the rest of the unit being small beside them. This script times those three
trainings at the unit's shapes (fit part 4,000 × 1,280, 768 anchors, 10 classes,
class-balanced batches of 8 × 16, 10 epochs) on synthetic banks (the shapes, not the
values, set the cost), with the adapter training of a git revision (``--before``,
the commit before the change) and of the working tree, one after the other in this
one process: both at fp32, then the working tree's under ``bf16``.
It also prints how far the after-trainings' adapted relative features are from the
before-training's (fp32: rounding only).

    python benchmarks/topological_unit.py --before <rev> [--epochs 10] [--similarity cosine robust-cosine]
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from relbench import precision
from relbench.training import head_settings
from relbench_relreps import heads as after_heads
from relbench_relreps.similarities import Cosine
from relbench_topology import RobustCosine, Topological

CANDIDATES = (0.5, 0.25, 0.75)


def load_before(rev: str):
    """The adapter training module as it was at ``rev``."""
    root = Path(__file__).resolve().parents[1]
    text = subprocess.run(["git", "show", f"{rev}:plugins/relbench_relreps/heads.py"], cwd=root, check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "heads_before.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("heads_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def unit(module, sim, X, y, A, epochs: int, prec: str):
    """Seconds of the unit's three candidate trainings, and the last one's fitted result."""
    settings = head_settings("image", epochs, None, 256, 32)
    start = time.perf_counter()
    with precision.running_at(prec):
        for q in CANDIDATES:
            fitted = module.train_relative_with_regularizers("enc", X, y, A, sim, [Topological(beta_quantile=q)],
                                                             settings, 10, 0)
    return time.perf_counter() - start, fitted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="git revision of the adapter training to compare with")
    parser.add_argument("--epochs", type=int, default=10, help="epochs per training (the task's: 10)")
    parser.add_argument("--similarity", nargs="+", default=["cosine", "robust-cosine"])
    args = parser.parse_args()
    before = load_before(args.before)
    torch.manual_seed(0)
    n, d, k = 4000, 1280, 768
    y = torch.randint(0, 10, (n,))
    X = torch.randn(10, d)[y] + torch.randn(n, d)
    A = X[torch.randperm(n)[:k]].clone()
    print(f"{torch.get_num_threads()} threads, {args.epochs} epochs per training, 3 trainings per unit")
    for name in args.similarity:
        sim = Cosine() if name == "cosine" else RobustCosine()
        sim.fit(X)
        t_before, f_before = unit(before, sim, X, y, A, args.epochs, "fp32")
        t_after, f_after = unit(after_heads, sim, X, y, A, args.epochs, "fp32")
        t_bf16, f_bf16 = unit(after_heads, sim, X, y, A, args.epochs, "bf16")
        ref = f_before.relative(X, A)
        print(f"{name}: before {t_before:.1f} s, after fp32 {t_after:.1f} s ({t_before / t_after:.2f}x), "
              f"after bf16 {t_bf16:.1f} s ({t_before / t_bf16:.2f}x); max |Δ relative features| fp32 "
              f"{(f_after.relative(X, A) - ref).abs().max():.1e}, bf16 {(f_bf16.relative(X, A) - ref).abs().max():.1e}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
