"""A small fully-connected autoencoder with an absolute or a relative (cosine)
bottleneck, trained end to end (Moschella et al. 2023, §5.1, scaled down for CPUs)."""

from __future__ import annotations

import torch
from torch import nn

from relbench.api import seeded_generator
from relbench_relreps.similarities import cosine_matrix


class Autoencoder(nn.Module):
    """``x → MLP → z`` (absolute latent); with ``relative`` the decoder reads
    ``cos(z, z_anchors)`` instead, the anchors being encoded by the same encoder.
    Decoder: ``LayerNorm → Linear → ReLU → Linear → Sigmoid`` (pixels in [0, 1])."""

    def __init__(self, in_dim: int, hidden: int, latent: int, relative: bool, num_anchors: int):
        super().__init__()
        self.relative = relative
        self.encoder = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, latent))
        width = num_anchors if relative else latent
        self.decoder = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, hidden), nn.ReLU(),
                                     nn.Linear(hidden, in_dim), nn.Sigmoid())

    def code(self, x: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
        """What the decoder reads: the latent, or its cosine to the encoded anchors."""
        z = self.encoder(x)
        return cosine_matrix(z, self.encoder(anchors)) if self.relative else z

    def forward(self, x: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.code(x, anchors))


def train_autoencoder(X: torch.Tensor, anchors: torch.Tensor, *, relative: bool, seed: int, hidden: int,
                      latent: int, epochs: int, lr: float, batch_size: int) -> Autoencoder:
    """Train an :class:`Autoencoder` with Adam and per-pixel MSE, deterministically for
    ``seed``; returned in eval mode."""
    torch.manual_seed(seed)
    model = Autoencoder(X.shape[1], hidden, latent, relative, len(anchors)).to(X.device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = seeded_generator(seed)
    model.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(X), generator=gen).split(batch_size):
            xb = X[idx.to(X.device)]
            loss = nn.functional.mse_loss(model(xb, anchors), xb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return model.eval()


@torch.no_grad()
def stitch(encoder: Autoencoder, decoder: Autoencoder, X: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    """Reconstruct ``X`` with ``encoder``'s code (anchors encoded by that same encoder)
    fed to ``decoder``'s decoder."""
    return decoder.decoder(encoder.code(X, anchors))
