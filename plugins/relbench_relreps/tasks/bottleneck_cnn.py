"""A small CNN classifier with an absolute or a relative (cosine) bottleneck, trained end
to end from scratch (Moschella et al. 2023, §4.3, scaled down for CPUs); apart from
:mod:`relbench_relreps.tasks.training` so that registering the task kind imports no torch."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from relbench.api import seeded_generator
from relbench_relreps.similarities import cosine_matrix

#: images per forward pass when evaluating (bounds memory; no layer mixes samples)
CHUNK = 1024


def bottleneck(z: torch.Tensor, z_anchors: torch.Tensor, relative: bool) -> torch.Tensor:
    """What the classifier head reads: the absolute latent ``z`` itself, or (``relative``)
    its cosine to each anchor's latent ``z_anchors``, ``n × anchors``."""
    return cosine_matrix(z, z_anchors) if relative else z


class BottleneckCNN(nn.Module):
    """``conv 3×3 (16) → ReLU → max-pool 2 → conv 3×3 (32) → ReLU → max-pool 2 → Linear``
    (the absolute latent) ``→`` :func:`bottleneck` ``→ LayerNorm → Linear`` (class logits).
    The anchors are encoded by the same encoder in the same forward pass, so the relative
    bottleneck is trained through them. Absolute and relative nets differ only in the
    head's input width (latent vs number of anchors)."""

    def __init__(self, shape: tuple[int, int, int], latent: int, relative: bool, num_anchors: int,
                 num_classes: int):
        super().__init__()
        channels, height, width = shape
        self.relative = relative
        self.encoder = nn.Sequential(
            nn.Conv2d(channels, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * (height // 4) * (width // 4), latent))
        size = num_anchors if relative else latent
        self.head = nn.Sequential(nn.LayerNorm(size), nn.Linear(size, num_classes))

    def forward(self, x: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
        return self.head(bottleneck(self.encoder(x), self.encoder(anchors), self.relative))


def train_bottleneck_cnn(X: torch.Tensor, y: torch.Tensor, anchors: torch.Tensor, *, relative: bool, seed: int,
                         latent: int, num_classes: int, epochs: int, lr: float, batch_size: int,
                         after_epoch: Callable[[int, BottleneckCNN], None]) -> BottleneckCNN:
    """Train a :class:`BottleneckCNN` from scratch with Adam and cross-entropy,
    deterministically for ``seed``; ``after_epoch(epoch, model)`` is called in eval mode
    at initialisation (epoch 0) and after each epoch. Returned in eval mode."""
    torch.manual_seed(seed)
    model = BottleneckCNN(tuple(X.shape[1:]), latent, relative, len(anchors), num_classes).to(X.device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = seeded_generator(seed)
    after_epoch(0, model.eval())
    for epoch in range(1, epochs + 1):
        model.train()
        for idx in torch.randperm(len(X), generator=gen).split(batch_size):
            idx = idx.to(X.device)
            loss = nn.functional.cross_entropy(model(X[idx], anchors), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        after_epoch(epoch, model.eval())
    return model.eval()


@torch.no_grad()
def latents(model: BottleneckCNN, X: torch.Tensor) -> torch.Tensor:
    """The absolute latents of ``X``, ``n × latent``."""
    return torch.cat([model.encoder(chunk) for chunk in X.split(CHUNK)])


@torch.no_grad()
def predict(encoder: BottleneckCNN, head: BottleneckCNN, X: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    """Class predictions of ``head``'s classifier reading ``encoder``'s bottleneck (its
    anchors encoded by ``encoder``): non-stitched when both are one net, zero-shot
    stitching otherwise."""
    code = bottleneck(latents(encoder, X), latents(encoder, anchors), encoder.relative)
    return head.head(code).argmax(1)


@torch.no_grad()
def latent_similarity(model: BottleneckCNN, reference: torch.Tensor, X: torch.Tensor,
                      anchors: torch.Tensor) -> float:
    """§4.2's measure: the mean cosine between ``model``'s relative representation of
    ``X`` (its latents' cosine to its own latents of ``anchors``, whatever its bottleneck)
    and ``reference``, another net's relative representation of the same samples."""
    return float(nn.functional.cosine_similarity(relative_view(model, X, anchors), reference, dim=1).mean())


@torch.no_grad()
def relative_view(model: BottleneckCNN, X: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    """``model``'s relative representation of ``X`` on ``anchors`` (the reference of
    :func:`latent_similarity`)."""
    return cosine_matrix(latents(model, X), latents(model, anchors))
