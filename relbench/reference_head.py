"""The reference relative-decoder head and its inductive batch normalisation, as torch
modules. They live apart from :mod:`relbench.training` so that planning a run, which
imports the training helpers' names but trains nothing, never imports torch."""

from __future__ import annotations

import torch


class FeatureNorm(torch.nn.Module):
    """Normalise each feature across the batch while training (InstanceNorm1d applied
    to the transposed batch, as in the reference relative decoder), with a learned
    per-feature scale and shift.

    At prediction time the reference code normalises over the evaluated batch, so a
    sample's prediction depends on the other test samples (*transductive*). relbench's
    default is *inductive*: :func:`~relbench.training.fix_statistics` fixes each feature's mean and
    variance on the head's own training data once training ends, and prediction uses
    those, so predicting a sample alone equals predicting it inside its split.
    :func:`~relbench.training.set_evaluation` switches a head to the transductive reading.

    The affine scale and shift are our choice: the paper does not describe the head's
    normalisation parameters (torch's InstanceNorm1d defaults to ``affine=False``).
    """

    def __init__(self, width: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(width))
        self.bias = torch.nn.Parameter(torch.zeros(width))
        self.register_buffer("mean", torch.zeros(width))
        self.register_buffer("var", torch.ones(width))
        self.register_buffer("fixed", torch.tensor(False))
        self.transductive = False
        self._collect = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training or self.transductive or self._collect:
            mean, var = x.mean(0), x.var(0, unbiased=False)
            if self._collect:
                self.mean.copy_(mean)
                self.var.copy_(var)
                self.fixed.fill_(True)
        else:
            if not bool(self.fixed):
                raise RuntimeError("an inductive head predicts with statistics fixed on its training data: call "
                                   "relbench.training.fix_statistics(model, X_train) after training")
            mean, var = self.mean, self.var
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


class ReferenceHead(torch.nn.Module):
    """The reference relative-decoder head for frozen encoders.

    ``LayerNorm(k) → Linear(k, h) → act → FeatureNorm → Linear(h, C)`` (the reference's
    InstanceNorm across the batch, inductive at prediction: see :class:`FeatureNorm`);
    ``blocks=2`` repeats the middle (text variant, with SiLU).
    """

    def __init__(self, in_dim: int, hidden: int, num_classes: int, activation: str = "tanh", blocks: int = 1):
        super().__init__()
        act = {"tanh": torch.nn.Tanh, "silu": torch.nn.SiLU, "relu": torch.nn.ReLU}[activation]
        layers: list[torch.nn.Module] = [torch.nn.LayerNorm(in_dim)]
        width = in_dim
        for _ in range(blocks):
            layers += [torch.nn.Linear(width, hidden), act(), FeatureNorm(hidden)]
            width = hidden
        layers.append(torch.nn.Linear(width, num_classes))
        self.net = torch.nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
