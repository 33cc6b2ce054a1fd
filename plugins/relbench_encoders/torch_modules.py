"""The torch modules (and the image dataset) the packaged encoders build when they encode:
kept apart from the encoder classes so that registering and planning those encoders
imports no torch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from relbench_encoders._common import to_pil_rgb


class NamedOutputs(torch.nn.Module):
    """The model called with the tokenizer's tensors (positional, in ``names`` order),
    returning the named ``outputs`` as a tuple (the form the export takes)."""

    def __init__(self, net: torch.nn.Module, names: Sequence[str], outputs: Sequence[str], model: str):
        super().__init__()
        self.net, self.names, self.outputs, self.model = net, tuple(names), tuple(outputs), model

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from relbench_encoders.text_forward import pick_outputs

        return pick_outputs(self.net(**dict(zip(self.names, inputs))), self.outputs, self.model)


class ImageItems(torch.utils.data.Dataset):
    """Items → preprocessed tensors (decoding/resizing runs in DataLoader workers)."""

    def __init__(self, items: Sequence[Any], transform: Any):
        self.items, self.transform = items, transform

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.transform(to_pil_rgb(self.items[i]))


class FeaturesTuple(torch.nn.Module):
    """The net with its features as a one-element tuple (the form the export takes)."""

    def __init__(self, net: torch.nn.Module):
        super().__init__()
        self.net = net

    def forward(self, pixels: torch.Tensor) -> tuple[torch.Tensor]:
        return (self.net(pixels),)


class TrainedBody(torch.nn.Module):
    """The feature extractor of a trained encoder (output: the penultimate layer)."""

    def __init__(self, arch: str, in_shape: tuple[int, ...], width: int):
        super().__init__()
        if arch == "cnn":
            if len(in_shape) != 3:
                raise ValueError("arch: cnn needs images; got feature vectors (use arch: mlp)")
            self.net = torch.nn.Sequential(
                torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(),
                torch.nn.Linear(32 * 16, width), torch.nn.ReLU(),
            )
        else:
            n_in = int(np.prod(in_shape))
            self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(n_in, 256), torch.nn.ReLU(), torch.nn.Linear(256, width), torch.nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class GCN(torch.nn.Module):
    """``layers`` graph convolutions (``Â H W + b``, ReLU, dropout before each) to ``width``,
    then a linear classifier; :meth:`embed` returns the last convolution's output."""

    def __init__(self, in_dim: int, hidden: int, width: int, layers: int, classes: int, dropout: float):
        super().__init__()
        dims = [in_dim] + [hidden] * (layers - 1) + [width]
        self.convs = torch.nn.ModuleList(torch.nn.Linear(a, b, bias=False) for a, b in zip(dims, dims[1:]))
        self.biases = torch.nn.ParameterList(torch.nn.Parameter(torch.zeros(b)) for b in dims[1:])
        self.classifier = torch.nn.Linear(width, classes)
        self.dropout = dropout

    def embed(self, x: torch.Tensor, adjacency: torch.Tensor) -> torch.Tensor:
        """Node embeddings ``n × width``."""
        for conv, bias in zip(self.convs, self.biases):
            x = torch.nn.functional.dropout(x, self.dropout, self.training)
            x = torch.relu(torch.sparse.mm(adjacency, conv(x)) + bias)
        return x

    def forward(self, x: torch.Tensor, adjacency: torch.Tensor) -> torch.Tensor:
        """Class logits of every node."""
        return self.classifier(self.embed(x, adjacency))
