"""The trainable adapter in front of a frozen encoder, as a torch module (apart from
:mod:`relbench_relreps.heads` so that registering the relative plugins imports no torch)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


class Adapter(torch.nn.Module):
    """A trainable affine map ``x ↦ W x + b`` in front of a frozen encoder, started at
    the identity (``W = I``, ``b = 0``), so that regularizers acting on the embeddings,
    or on relative features computed from them, have something to move.

    Its constraint is a decay towards the identity: the training adds
    ``adapter_decay · (‖W − I‖²_F + ‖b‖²)`` (:meth:`penalty`) to the loss, so one
    encoder's adapter stays close to the identity map it starts from. An orthogonality
    constraint was the alternative; it would make the term before the projection inert
    (distances, hence death times, are invariant under orthogonal maps and shifts).
    """

    def __init__(self, dim: int):
        super().__init__()
        self.linear = torch.nn.Linear(dim, dim)
        with torch.no_grad():
            self.linear.weight.copy_(torch.eye(dim))
            self.linear.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)

    def penalty(self) -> torch.Tensor:
        """``‖W − I‖²_F + ‖b‖²``: the squared distance of the map's parameters from the identity's."""
        W, b = self.linear.weight, self.linear.bias
        return (W - torch.eye(len(W), device=W.device, dtype=W.dtype)).pow(2).sum() + b.pow(2).sum()

    @contextlib.contextmanager
    def decaying(self, weight: float) -> Iterator[None]:
        """While open, every backward pass that reaches the adapter adds the gradient of
        ``weight · penalty()``, ``2·weight·(W − I)`` and ``2·weight·b``, to the
        parameters' gradients, in place once they are accumulated: the same update as
        adding the penalty to the loss, without building ``W − I`` and its backward
        (two ``d × d`` temporaries) at every step."""
        def decay_weight(W: torch.Tensor) -> None:
            W.grad.add_(W.detach(), alpha=2 * weight)
            W.grad.diagonal().sub_(2 * weight)

        def decay_bias(b: torch.Tensor) -> None:
            b.grad.add_(b.detach(), alpha=2 * weight)

        handles = [self.linear.weight.register_post_accumulate_grad_hook(decay_weight),
                   self.linear.bias.register_post_accumulate_grad_hook(decay_bias)]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    def drift(self) -> float:
        """``‖W − I‖_F / ‖I‖_F``: how far the linear part has moved, relative to the identity."""
        with torch.no_grad():
            W = self.linear.weight
            return float((W - torch.eye(len(W), device=W.device, dtype=W.dtype)).norm() / len(W) ** 0.5)
