"""The cosine activation of IRP's non-monotone heads, as a torch module (apart from
:mod:`relbench_irp.heads` so that registering the IRP plugins imports no torch)."""

from __future__ import annotations

import torch


class Cos(torch.nn.Module):
    """Element-wise cosine activation (IRP Figure 4's non-monotone case)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cos(x)
