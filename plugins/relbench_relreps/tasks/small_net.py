"""The performance proxy's small classifier, as a torch module (apart from
:mod:`relbench_relreps.tasks.proxy` so that registering the task kind imports no torch)."""

from __future__ import annotations

import torch


class SmallNet(torch.nn.Module):
    """``Linear(d, width) → act`` (the latent) ``→ Linear(width, C)``."""

    def __init__(self, in_dim: int, width: int, num_classes: int, activation: str):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(in_dim, width), {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh}[activation]())
        self.out = torch.nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.body(x))
