"""Training many reference heads of one shape at once, against one after another.

The suite trains many heads of one shape on one seed's labels: every target's relative
head of a (seed, selector, similarity) reads ``k`` relative features, and every
candidate of a tuned constant trains the same head again. This script measures what
training ``H`` such heads as one stacked model (``torch.func.stack_module_state`` +
``vmap``; same seed, same batches, Adam over the stacked parameters) gains over
:func:`relbench.training.train_classifier` called ``H`` times, side by side in one
process, and how far the stacked heads' logits and predicted labels are from the
sequential ones. It decides whether stacked training is worth wiring into the harness.

    python benchmarks/stacked_heads.py [--heads 2 4 8] [--rows 4000] [--features 500]
                                       [--epochs 2] [--threads 1] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import copy
import time

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from relbench.reference_head import ReferenceHead
from relbench.training import finish_training, minibatches, predict_logits, seeded_generator, train_classifier

HIDDEN, CLASSES, LR, BATCH, SEED = 256, 10, 1e-4, 32, 0


def fresh_head(features: int, device: torch.device) -> nn.Module:
    """A reference head initialised from the seed, as the stitchers build it."""
    torch.manual_seed(SEED)
    return ReferenceHead(features, HIDDEN, CLASSES).to(device)


def sequential(Xs: list[torch.Tensor], y: torch.Tensor, epochs: int) -> list[nn.Module]:
    """The harness today: one ``train_classifier`` per head."""
    return [train_classifier(fresh_head(X.shape[1], X.device), X, y, epochs=epochs, lr=LR, batch_size=BATCH,
                             seed=SEED) for X in Xs]


def stacked(Xs: list[torch.Tensor], y: torch.Tensor, epochs: int) -> list[nn.Module]:
    """The same heads trained as one stacked model: one forward, backward and Adam step
    per batch for all of them; the batches are the sequential loop's."""
    heads = [fresh_head(X.shape[1], X.device).train() for X in Xs]
    params, buffers = stack_module_state(heads)
    skeleton = copy.deepcopy(heads[0]).to("meta")
    forward = vmap(lambda p, b, x: functional_call(skeleton, (p, b), (x,)))
    X = torch.stack(Xs)
    torch.manual_seed(SEED)
    generator = seeded_generator(SEED)
    optimizer = torch.optim.Adam(list(params.values()), lr=LR, foreach=True)
    for _ in range(epochs):
        for idx in minibatches(len(y), BATCH, generator, y, None):
            if len(idx) < 2:
                continue
            idx = idx.to(X.device)
            logits = forward(params, buffers, X[:, idx])
            per_head = nn.functional.cross_entropy(logits.flatten(0, 1), y[idx].repeat(len(Xs)), reduction="none")
            loss = per_head.view(len(Xs), -1).mean(1).sum()  # each head's gradient is its own loss's
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        for h, head in enumerate(heads):
            for name, p in head.named_parameters():
                p.copy_(params[name][h])
    return [finish_training(head, Xh) for head, Xh in zip(heads, Xs)]


def timed(fn, *args) -> tuple[float, list[nn.Module]]:
    """Seconds of ``fn(*args)`` (synchronised on a GPU) and its result."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn(*args)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heads", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--rows", type=int, default=4000, help="fit rows (the full-scale protocol fits on 4,000)")
    parser.add_argument("--features", type=int, default=500, help="relative features (anchors)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    g = torch.Generator().manual_seed(1)
    y = torch.randint(0, CLASSES, (args.rows,), generator=g).to(device)
    print(f"reference heads {args.features} → {HIDDEN} → {CLASSES}, {args.rows} rows, batch {BATCH}, "
          f"{args.epochs} epochs, {args.threads} thread(s), {device}")
    timed(sequential, [torch.randn(256, args.features, device=device)], y[:256], 1)  # warm-up
    for n in args.heads:
        Xs = [torch.randn(args.rows, args.features, generator=g).to(device) for _ in range(n)]
        t_seq, one_by_one = timed(sequential, Xs, y, args.epochs)
        t_stk, together = timed(stacked, Xs, y, args.epochs)
        logits = [(predict_logits(a, X), predict_logits(b, X)) for a, b, X in zip(one_by_one, together, Xs)]
        gap = max((a - b).abs().max().item() for a, b in logits)
        same = sum(int((a.argmax(1) == b.argmax(1)).sum()) for a, b in logits)
        print(f"  {n} heads: one after another {t_seq:6.2f} s, stacked {t_stk:6.2f} s ({t_seq / t_stk:.2f}×); "
              f"largest logit gap {gap:.1e}; predicted labels equal {same}/{n * args.rows}")


if __name__ == "__main__":
    main()
