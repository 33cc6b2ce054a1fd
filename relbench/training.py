"""Training utilities shared by plugins that fit heads: seeded batches and one loop.

These are harness services, not methods: a stitcher decides *what* it trains (which
module, on which features, with which regularizers); this module only runs the loop the
same way for everyone, so that heads are comparable across methods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import torch
from torch import nn


def seeded_generator(seed: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with ``seed`` (use it for every random draw)."""
    g = torch.Generator()
    g.manual_seed(int(seed))
    return g


def minibatches(
    n: int,
    batch_size: int,
    generator: torch.Generator,
    labels: torch.Tensor | None = None,
    balanced: tuple[int, int] | None = None,
) -> Iterator[torch.Tensor]:
    """Index batches for one epoch.

    Plain: a seeded permutation cut into ``batch_size`` chunks. ``balanced=(C, b)``:
    batches of ``C`` classes × ``b`` samples each (as topological densification needs),
    drawn without replacement within the epoch where a class has enough samples;
    ``n // (C·b)`` batches per epoch.
    """
    if balanced is None or labels is None:
        perm = torch.randperm(n, generator=generator)
        yield from perm.split(batch_size)
        return
    n_cls, per_cls = balanced
    labels = labels.cpu()
    classes = torch.unique(labels)
    pools = {int(c): torch.nonzero(labels == c).flatten() for c in classes}
    pools = {c: idx for c, idx in pools.items() if len(idx) >= 2}
    if not pools:
        raise ValueError("class-balanced batches need at least one class with two samples")
    n_cls = min(n_cls, len(pools))
    keys = list(pools)
    for _ in range(max(1, n // (n_cls * per_cls))):
        chosen = torch.randperm(len(keys), generator=generator)[:n_cls]
        parts = []
        for ci in chosen.tolist():
            idx = pools[keys[ci]]
            take = torch.randperm(len(idx), generator=generator)[: min(per_cls, len(idx))]
            parts.append(idx[take])
        yield torch.cat(parts)


def train_classifier(
    model: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    epochs: int,
    lr: float,
    batch_size: int,
    seed: int,
    extra_loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    balanced: tuple[int, int] | None = None,
    weight_decay: float = 0.0,
) -> nn.Module:
    """Train ``model`` (``X[idx] → logits``) with Adam and cross-entropy.

    ``extra_loss(idx, logits)`` adds a term per batch (regularizers); ``balanced``
    switches to class-balanced batches. The model is left in eval mode. Deterministic
    for a fixed seed on CPU.
    """
    torch.manual_seed(seed)
    gen = seeded_generator(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    model.train()
    y = y.to(X.device)
    for _ in range(epochs):
        for idx in minibatches(len(X), batch_size, gen, y, balanced):
            idx = idx.to(X.device)
            if len(idx) < 2:  # batch statistics (InstanceNorm over the batch) need two rows
                continue
            logits = model(X[idx])
            loss = nn.functional.cross_entropy(logits, y[idx])
            if extra_loss is not None:
                loss = loss + extra_loss(idx, logits)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    model.eval()
    return model


@torch.inference_mode()
def predict_logits(model: nn.Module, X: torch.Tensor, batch_size: int = 4096) -> torch.Tensor:
    """Logits of ``model`` on ``X`` in eval mode, batched (batch statistics layers see
    large batches, as the reference code's evaluation does)."""
    model.eval()
    return torch.cat([model(chunk) for chunk in X.split(batch_size)]) if len(X) else X.new_zeros((0, 0))


class BatchInstanceNorm(nn.Module):
    """Normalise each feature across the batch (InstanceNorm1d applied to the
    transposed batch, as in the reference relative decoder): no running statistics."""

    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.InstanceNorm1d(width, affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # (n, h) → (1, h, n): per feature, normalise over the n rows of the batch
        return self.norm(x.t().unsqueeze(0)).squeeze(0).t()


class ReferenceHead(nn.Module):
    """The reference relative-decoder head for frozen encoders.

    ``LayerNorm(k) → Linear(k, h) → act → InstanceNorm across the batch → Linear(h, C)``;
    ``blocks=2`` repeats the middle (text variant, with SiLU).
    """

    def __init__(self, in_dim: int, hidden: int, num_classes: int, activation: str = "tanh", blocks: int = 1):
        super().__init__()
        act = {"tanh": nn.Tanh, "silu": nn.SiLU, "relu": nn.ReLU}[activation]
        layers: list[nn.Module] = [nn.LayerNorm(in_dim)]
        width = in_dim
        for _ in range(blocks):
            layers += [nn.Linear(width, hidden), act(), BatchInstanceNorm(hidden)]
            width = hidden
        layers.append(nn.Linear(width, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """Detach, move to CPU and convert."""
    return t.detach().cpu().numpy()
