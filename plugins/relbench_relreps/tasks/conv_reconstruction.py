"""Reconstruction stitching of convolutional AEs and VAEs trained with different seeds
(Moschella et al. 2023, §5.1, Table 3, Figure 4; appendix A.5.4)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from relbench.api import arrow, ConfigError, deferred_import, directions, Page, table, UnitKey
from relbench_metrics import MSE
from relbench_relreps.selectors import RandomAnchors
from relbench_relreps.tasks.common import specs_or_default, summary_table, without_failures
from relbench_relreps.tasks.reconstruction import BOTTLENECKS, Reconstruction, per_seed_pairs

pd = deferred_import("pandas")
torch = deferred_import("torch")

FIGURE = "conv_reconstruction_{model}_{bottleneck}.png"
MODELS = ("ae", "vae")
#: Moschella et al. 2023, Table 3, per data set: (model, bottleneck) → (non-stitched, stitched) MSE
PAPER_TABLE_3 = {
    "MNIST": {("ae", "absolute"): (0.66, 97.79), ("ae", "relative"): (1.18, 2.83),
              ("vae", "absolute"): (1.31, 98.51), ("vae", "relative"): (2.97, 13.43)},
    "F-MNIST": {("ae", "absolute"): (1.57, 120.54), ("ae", "relative"): (3.59, 6.37),
                ("vae", "absolute"): (4.38, 118.96), ("vae", "relative"): (6.81, 24.03)},
}


@dataclass
class ConvReconstruction(Reconstruction):
    """Reconstruction stitching with the paper's model families: convolutional
    autoencoders (``ae``) and variational autoencoders (``vae``) with an absolute or a
    relative (cosine) bottleneck, trained with different seeds; every encoder is
    composed with every decoder of its model and bottleneck and scored by per-pixel MSE
    (Moschella et al. 2023, §5.1, Table 3, Figure 4).

    As the ``reconstruction`` kind (whose sampling, anchors, seeds and rows it shares),
    with one unit per (task seed, selector, model, bottleneck). The networks
    (:mod:`relbench_relreps.tasks.conv_autoencoder`) are two stride-2 convolutions and
    a linear layer to the latent, and their transposes back to the image with a
    sigmoid. A VAE's encoder gives a mean and a log-variance; it decodes a
    reparameterised sample while training and the mean at test and stitching time. Its
    relative bottleneck is the cosine of that sample (the mean at test time) to the
    anchors' latent *means* from the same encoder (our choice: the anchors stay a fixed
    frame). Loss (ours): per-pixel mean squared error, plus for a VAE ``beta`` times the
    KL divergence to N(0, I) of each image's latent divided by its pixel count, i.e. the
    summed-convention negative ELBO divided by the pixel count (``beta = 1``: the plain
    ELBO's weighting). Every arm has the same optimiser, epochs and batches.

    Columns: ``model`` (``ae`` / ``vae``), ``bottleneck``, ``selector``,
    ``encoder_seed``, ``decoder_seed``. Rows: ``mse`` per encoder × decoder pair. The
    page: Table 3's layout (non-stitched and stitched MSE per model and bottleneck, mean
    over task seeds with its interval), the ratio stitched / non-stitched beside the
    paper's (the paper's MSE is on another scale than per-pixel MSE in [0, 1]), and a
    figure per model and bottleneck. Claims compare stitched pairs only.

    Parameters
    ----------
    view : str | None, default None
        The image view to reconstruct (grey images, one channel); None = the data set's
        first image view.
    model_seeds : list[int], default [0, 1]
        Models trained per task seed, model and bottleneck (at least two; ours: the
        paper trains five).
    latent_dim : int, default 64
        Width of the absolute latent (ours, for CPUs; paper: 500, with 500 anchors).
    hidden : int, default 32
        Channels of the first convolution; the second has twice as many (ours).
    epochs : int, default 5
        Training epochs per model (ours).
    lr : float, default 1e-3
        Adam learning rate (ours).
    batch_size : int, default 64
        Training batch size (ours).
    train_samples : int, default 5000
        Training images used (a fixed seeded subset per task seed; ours).
    test_samples : int, default 2000
        Test images scored (a fixed seeded subset per task seed; ours).
    figure_samples : int, default 8
        Columns of the reconstruction figures.
    models : list[str], default ["ae", "vae"]
        The model families trained: ``ae`` and/or ``vae``.
    beta : float, default 1.0
        Weight of a VAE's KL term over the per-pixel convention above (ours).
    """

    name: ClassVar[str] = "conv-reconstruction"
    columns: ClassVar[tuple[str, ...]] = ("model", "bottleneck", "selector", "encoder_seed", "decoder_seed")
    groups: ClassVar[tuple[str, ...]] = ("model", "bottleneck", "selector")
    hidden: int = 32
    test_samples: int = 2000
    models: list[str] = field(default_factory=lambda: list(MODELS))
    beta: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.models or len(set(self.models)) != len(self.models) or set(self.models) - set(MODELS):
            raise ValueError(f"models must list distinct entries of {list(MODELS)}, got {self.models}")
        if self.beta < 0:
            raise ValueError(f"beta must be ≥ 0, got {self.beta}")

    def plan(self, task) -> list[UnitKey]:
        """One unit per task seed × selector × model × bottleneck."""
        selectors = specs_or_default(task.grid["selectors"], "selector", RandomAnchors)
        return [{"seed": seed, "selector": sel, "model": model, "bottleneck": bottleneck}
                for seed in task.seeds for sel in selectors for model in self.models for bottleneck in BOTTLENECKS]

    def _images(self, items, idx: np.ndarray) -> torch.Tensor:
        """The selected grey images as an ``n × 1 × H × W`` tensor in [0, 1]."""
        shape = np.asarray(items[int(idx[0])]).shape
        if len(shape) != 2:
            raise ConfigError(f"{self.name} reconstructs grey images (H × W); this view's images are {shape}.")
        return super()._images(items, idx).reshape(len(idx), 1, *shape)

    def _train(self, key: UnitKey, X: torch.Tensor, A: torch.Tensor, seed: int):
        """One AE or VAE of the unit ``key``, trained on ``X`` with anchors ``A``."""
        from relbench_relreps.tasks.conv_autoencoder import train_conv_autoencoder

        return train_conv_autoencoder(X, A, variational=key["model"] == "vae",
                                      relative=key["bottleneck"] == "relative", seed=seed, latent=self.latent_dim,
                                      channels=self.hidden, epochs=self.epochs, lr=self.lr,
                                      batch_size=self.batch_size, beta=self.beta)

    def _stitch(self, encoder, decoder, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """``X`` reconstructed by ``decoder`` from ``encoder``'s code (latent means)."""
        from relbench_relreps.tasks.conv_autoencoder import stitch

        return stitch(encoder, decoder, X, A)

    def _figure_name(self, key: UnitKey) -> str:
        return FIGURE.format(model=key["model"], bottleneck=key["bottleneck"])

    def _figure_label(self, key: UnitKey) -> str:
        return f"{key['model'].upper()} {key['bottleneck']}"

    def claim_rows(self, results: pd.DataFrame) -> pd.DataFrame:
        """The stitched pairs (encoder and decoder from different models): what a claim
        or a published number of the tasks file compares."""
        return results[results["encoder_seed"] != results["decoder_seed"]]

    def page(self, results: pd.DataFrame, page: Page) -> str:
        """Table 3: MSE, non-stitched vs stitched, per model, bottleneck and selector
        (mean over seeds with an interval over seeds); the ratios beside the paper's; and
        the figures."""
        df, note = without_failures(results)
        ok = df[(df["status"] == "ok") & (df["metric"] == MSE.name)]
        if ok.empty:
            return "_no results yet_" + note
        per_seed = per_seed_pairs(ok, self.groups)
        body = summary_table(per_seed, list(self.groups), "pairs", digits=4)
        mse = arrow(MSE.name, directions(ok).get(MSE.name, "neutral"))
        return (f"Per-pixel MSE ({mse}, pixels in [0, 1]) of convolutional AEs and VAEs composed across training "
                "seeds (Moschella et al. 2023, Table 3): non-stitched = encoder and decoder of the same model; "
                "stitched = all other pairs of the same task seed, model and bottleneck (the seed fixes the "
                f"anchors). Mean over {per_seed['seed'].nunique()} task seed(s) of each seed's mean over its pairs, "
                "with the 95 % Student-t interval over seeds (no per-sample data is stored for this score)."
                "\n\n" + body + note + "\n\n" + beside_paper(per_seed) + self._figures(ok, page) + "\n")

    def _figures(self, ok: pd.DataFrame, page: Page) -> str:
        links = ""
        for model in [m for m in MODELS if m in set(ok["model"])]:
            for bottleneck in BOTTLENECKS:
                link = page.stored_figure(FIGURE.format(model=model, bottleneck=bottleneck))
                if link:
                    links += f"\n\n![{model.upper()} {bottleneck} reconstructions]({link})"
        return links


def _ratio(non_stitched: float, stitched: float, digits: int) -> str:
    return f"{non_stitched:.{digits}f} → {stitched:.{digits}f} ({stitched / non_stitched:.1f}×)"


def beside_paper(per_seed: pd.DataFrame) -> str:
    """Per model, bottleneck and selector: our non-stitched → stitched MSE (means over
    seeds) and their ratio, beside Table 3's MNIST and Fashion-MNIST numbers and ratios."""
    means = per_seed.groupby(["model", "bottleneck", "selector", "pairs"])["value"].mean().unstack("pairs")
    rows = []
    for (model, bottleneck, selector), cell in means.iterrows():
        ours = (_ratio(cell["non-stitched"], cell["stitched"], 4)
                if {"non-stitched", "stitched"} <= set(cell.dropna().index) else "n/a")
        paper = [_ratio(*numbers[(model, bottleneck)], 2) for numbers in PAPER_TABLE_3.values()]
        rows.append([model, bottleneck, selector, ours, *paper])
    headers = ["model", "bottleneck", "selector", "relbench", *(f"paper, {name}" for name in PAPER_TABLE_3)]
    return ("### Beside the paper's Table 3\n\nNon-stitched → stitched MSE (stitched / non-stitched). The paper's "
            "MSE is on another scale than the per-pixel MSE of pixels in [0, 1] above (its scale is not stated), so "
            "compare the ratios, which do not depend on it: stitching multiplies the paper's error by "
            f"{_paper_span('absolute')} with absolute bottlenecks and by {_paper_span('relative')} with relative "
            "ones.\n\n" + table(rows, headers=headers) + "\n")


def _paper_span(bottleneck: str) -> str:
    """The range of Table 3's ratios stitched / non-stitched (MNIST and Fashion-MNIST) for ``bottleneck``."""
    ratios = [stitched / own for numbers in PAPER_TABLE_3.values()
              for (_, kind), (own, stitched) in numbers.items() if kind == bottleneck]
    return f"{min(ratios):.1f}–{max(ratios):.1f}"
