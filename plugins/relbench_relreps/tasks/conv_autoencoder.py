"""Small convolutional autoencoders and variational autoencoders with an absolute or a
relative (cosine) bottleneck, trained end to end (Moschella et al. 2023, §5.1 and
appendix A.5.4: "simple convolutions, deconvolutions and mean squared error"; scaled
down for CPUs).

Encoder: ``Conv(1 → c, 3×3, stride 2) → ReLU → Conv(c → 2c, 3×3, stride 2) → ReLU →
flatten → Linear`` to the latent (a VAE's: to its mean and log-variance). Decoder:
``LayerNorm → Linear → ReLU →`` the two convolutions transposed ``→ Sigmoid``, back to
the input's height and width (pixels in [0, 1]). Any grey image size works: each
stride-2 convolution maps a side ``n`` to ``⌈n / 2⌉`` and its transpose maps it back.
"""

from __future__ import annotations

import torch
from torch import nn

from relbench.api import seeded_generator
from relbench_relreps.similarities import cosine_matrix


def gaussian_kl(mean: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """Per row, ``KL(N(mean, diag(exp(logvar))) ‖ N(0, I))`` in closed form:
    ``½ Σ (exp(logvar) + mean² − 1 − logvar)`` over the last dimension."""
    return 0.5 * (logvar.exp() + mean ** 2 - 1.0 - logvar).sum(dim=-1)


def reparameterise(mean: torch.Tensor, logvar: torch.Tensor, noise: torch.Tensor | None = None) -> torch.Tensor:
    """A sample of ``N(mean, diag(exp(logvar)))`` as ``mean + exp(logvar / 2) · noise``,
    differentiable in ``mean`` and ``logvar``; ``noise`` standard normal (default: drawn
    from torch's global generator)."""
    noise = torch.randn_like(mean) if noise is None else noise
    return mean + (0.5 * logvar).exp() * noise


def _halved(side: int) -> int:
    """A side's length after a 3×3 convolution with stride 2 and padding 1: ``⌈side / 2⌉``."""
    return (side + 1) // 2


def _up(in_ch: int, out_ch: int, height: int, width: int) -> nn.ConvTranspose2d:
    """The transpose of a stride-2 3×3 convolution that maps ``⌈height / 2⌉ × ⌈width / 2⌉``
    back to ``height × width`` (output padding 1 along an even side, 0 along an odd one)."""
    return nn.ConvTranspose2d(in_ch, out_ch, 3, stride=2, padding=1, output_padding=(1 - height % 2, 1 - width % 2))


class ConvAutoencoder(nn.Module):
    """A convolutional AE (``variational=False``) or VAE of ``1 × H × W`` images.

    The decoder reads the latent (absolute bottleneck) or, with ``relative``, its cosine
    to the anchors' latents from the same encoder. A VAE's latent is its mean at test
    and stitching time (:meth:`code`) and a reparameterised sample while training
    (:meth:`forward` in training mode); its relative bottleneck then projects that
    sample onto the anchors' *means* (our choice: the anchors are a fixed reference
    frame, and sampling them too would only add noise to the frame)."""

    def __init__(self, shape: tuple[int, int, int], latent: int, channels: int, relative: bool,
                 num_anchors: int, variational: bool):
        super().__init__()
        _, height, width = shape
        self.relative, self.variational, self.latent = relative, variational, latent
        small = (2 * channels, _halved(_halved(height)), _halved(_halved(width)))
        flat = small[0] * small[1] * small[2]
        self.encoder = nn.Sequential(
            nn.Conv2d(1, channels, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(channels, 2 * channels, 3, stride=2, padding=1), nn.ReLU(),
            nn.Flatten(), nn.Linear(flat, 2 * latent if variational else latent))
        width_in = num_anchors if relative else latent
        self.decoder = nn.Sequential(
            nn.LayerNorm(width_in), nn.Linear(width_in, flat), nn.ReLU(), nn.Unflatten(1, small),
            _up(2 * channels, channels, _halved(height), _halved(width)), nn.ReLU(),
            _up(channels, 1, height, width), nn.Sigmoid())

    def moments(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The latent's mean and log-variance (None for a plain AE, whose latent is the mean)."""
        out = self.encoder(x)
        if not self.variational:
            return out, None
        return out[:, : self.latent], out[:, self.latent:]

    def project(self, z: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
        """What the decoder reads of latents ``z``: ``z`` itself, or with a relative
        bottleneck its cosine to the latent means of the ``anchors`` images."""
        return cosine_matrix(z, self.moments(anchors)[0]) if self.relative else z

    def code(self, x: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
        """The decoder's input at test and stitching time (from the latent mean)."""
        return self.project(self.moments(x)[0], anchors)

    def forward(self, x: torch.Tensor, anchors: torch.Tensor):
        """``(reconstruction, mean, logvar)``; a VAE in training mode decodes a
        reparameterised sample, otherwise the mean is decoded."""
        mean, logvar = self.moments(x)
        z = reparameterise(mean, logvar) if self.variational and self.training else mean
        return self.decoder(self.project(z, anchors)), mean, logvar


def loss(model: ConvAutoencoder, x: torch.Tensor, anchors: torch.Tensor, beta: float) -> torch.Tensor:
    """Per-pixel mean squared error, plus for a VAE ``beta`` times the Gaussian KL of each
    image's latent divided by its pixel count, averaged over the batch: the negative
    ELBO of a Gaussian decoder with the squared error summed over pixels, divided by the
    pixel count (so ``beta = 1`` weighs the KL as a summed ELBO does; our convention)."""
    recon, mean, logvar = model(x, anchors)
    mse = nn.functional.mse_loss(recon, x)
    if logvar is None:
        return mse
    return mse + beta * gaussian_kl(mean, logvar).mean() / x[0].numel()


def train_conv_autoencoder(X: torch.Tensor, anchors: torch.Tensor, *, variational: bool, relative: bool, seed: int,
                           latent: int, channels: int, epochs: int, lr: float, batch_size: int,
                           beta: float) -> ConvAutoencoder:
    """Train a :class:`ConvAutoencoder` on ``n × 1 × H × W`` images with Adam and
    :func:`loss`, deterministically for ``seed``; returned in eval mode."""
    torch.manual_seed(seed)
    model = ConvAutoencoder(tuple(X.shape[1:]), latent, channels, relative, len(anchors), variational).to(X.device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = seeded_generator(seed)
    model.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(X), generator=gen).split(batch_size):
            batch_loss = loss(model, X[idx.to(X.device)], anchors, beta)
            opt.zero_grad(set_to_none=True)
            batch_loss.backward()
            opt.step()
    return model.eval()


@torch.no_grad()
def stitch(encoder: ConvAutoencoder, decoder: ConvAutoencoder, X: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    """Reconstruct ``X`` with ``encoder``'s code (latent means; anchors encoded by that
    same encoder) fed to ``decoder``'s decoder."""
    return decoder.decoder(encoder.code(X, anchors))
