"""Reconstruction stitching of autoencoders trained with different seeds (Moschella et
al. 2023, §5.1, Table 3, Figure 4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from relbench.errors import ConfigError
from relbench.interfaces import ResultRow, TaskKind
from relbench.training import seeded_generator
from relbench_relreps.selectors import RandomAnchors
from relbench_relreps.tasks.autoencoder import stitch, train_autoencoder
from relbench_relreps.tasks.common import select_without_banks, specs_or_default, summary_table

FIGURE = "reconstruction.png"
KINDS = ("absolute", "relative")


def _pixels(items, idx: np.ndarray) -> torch.Tensor:
    """Selected images as an ``n × pixels`` float tensor in [0, 1]."""
    arr = np.stack([np.asarray(items[int(i)], dtype=np.float32).reshape(-1) for i in idx])
    return torch.from_numpy(arr / 255.0)


@dataclass
class Reconstruction(TaskKind):
    """Reconstruction stitching: autoencoders with an absolute or a relative (cosine)
    bottleneck are trained once per task seed; every encoder is composed with every
    decoder of its kind and scored by pixel MSE (Moschella et al. 2023, §5.1, Table 3).

    The task trains its own small fully-connected autoencoders on the data set's
    images (the task's ``encoders`` are not used). Anchors: ``num_anchors`` training
    images from the grid's first selector (default random; selectors that need
    embeddings cannot serve here), drawn once with the first seed and shared by every
    model, as stitching requires. Rows: ``mse`` per (source = encoder seed, target =
    decoder seed), ``stitcher`` = absolute / relative, ``extra.stitched``. A PNG grid
    (original, then non-stitched and stitched reconstructions per kind) is written next
    to the leaderboard.

    Parameters
    ----------
    view : str | None, default None
        The image view to reconstruct; None = the data set's first image view.
    latent_dim : int, default 64
        Width of the absolute latent (paper: 500 with conv nets; ours smaller for CPUs).
    hidden : int, default 256
        Hidden width of encoder and decoder (ours).
    epochs : int, default 5
        Training epochs per autoencoder (ours).
    lr : float, default 1e-3
        Adam learning rate (ours).
    batch_size : int, default 64
        Training batch size (ours).
    train_samples : int, default 5000
        Training images used (a fixed seeded subset; ours).
    test_samples : int, default 1000
        Test images scored (a fixed seeded subset; ours).
    figure_samples : int, default 8
        Columns of the reconstruction figure.
    """

    name: ClassVar[str] = "reconstruction"
    uses_encoders: ClassVar[bool] = False
    view: str | None = None
    latent_dim: int = 64
    hidden: int = 256
    epochs: int = 5
    lr: float = 1e-3
    batch_size: int = 64
    train_samples: int = 5000
    test_samples: int = 1000
    figure_samples: int = 8

    def __post_init__(self) -> None:
        for key in ("latent_dim", "hidden", "epochs", "batch_size", "train_samples", "test_samples",
                    "figure_samples"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be positive, got {getattr(self, key)}")
        if self.lr <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")

    def _view(self, data) -> str:
        if self.view is not None:
            if self.view not in data.view_modalities:
                raise ConfigError(f"reconstruction: data set {data.name!r} has no view {self.view!r}; "
                                  f"views: {', '.join(data.views)}.")
            return self.view
        for view, modality in data.view_modalities.items():
            if modality == "image":
                return view
        raise ConfigError(f"reconstruction needs an image data set; {data.name!r} has views {data.views}.")

    def run(self, run: Any) -> None:
        """Train every seed's two autoencoders, score all encoder × decoder pairs, draw the figure."""
        key = {"stitcher": "autoencoders"}
        if run.is_done(key):
            return
        data = run.dataset()
        view = self._view(data)
        train, test = data.splits["train"], data.splits["test"]
        g = seeded_generator(0)
        tr_idx = torch.randperm(len(train), generator=g)[: self.train_samples].numpy()
        te_idx = torch.randperm(len(test), generator=g)[: self.test_samples].numpy()
        device = run.device
        Xtr = _pixels(train.views[view], tr_idx).to(device)
        Xte = _pixels(test.views[view], te_idx).to(device)
        seeds = list(run.task.seeds)
        selector = specs_or_default(run.task.selectors, "selector", RandomAnchors)[0]
        anchors = select_without_banks(selector, train.ids, train.labels, seeds[0], run.task.num_anchors, device)
        position = {sid: i for i, sid in enumerate(train.ids)}
        A = _pixels(train.views[view], np.array([position[s] for s in anchors.ids])).to(device)
        with run.unit(key) as rows:
            models = {(kind, s): train_autoencoder(Xtr, A, relative=kind == "relative", seed=s, hidden=self.hidden,
                                                   latent=self.latent_dim, epochs=self.epochs, lr=self.lr,
                                                   batch_size=self.batch_size)
                      for kind in KINDS for s in run.progress(seeds, desc=f"autoencoders ({kind})")}
            for kind in KINDS:
                for i in seeds:
                    for j in seeds:
                        rec = stitch(models[(kind, i)], models[(kind, j)], Xte, A)
                        mse = float(torch.mean((rec - Xte) ** 2))
                        rows.append(ResultRow(metric="mse", value=mse, source=f"seed{i}", target=f"seed{j}",
                                              stitcher=kind, selector=selector.label,
                                              similarity="cosine" if kind == "relative" else "-",
                                              extra={"stitched": i != j, "seed": i}))
            self._figure(run.figure_path(FIGURE), models, seeds, Xte, A, train.views[view][int(tr_idx[0])])

    def _figure(self, path, models, seeds, Xte, A, example) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        shape = np.asarray(example).shape
        n = min(self.figure_samples, len(Xte))
        x = Xte[:n]
        panels = [("original", x)]
        for kind in KINDS:
            panels.append((f"{kind}, non-stitched", stitch(models[(kind, seeds[0])], models[(kind, seeds[0])], x, A)))
            if len(seeds) > 1:
                panels.append((f"{kind}, stitched (enc seed {seeds[1]} → dec seed {seeds[0]})",
                               stitch(models[(kind, seeds[1])], models[(kind, seeds[0])], x, A)))
        fig, axes = plt.subplots(len(panels), n, figsize=(1.2 * n, 1.3 * len(panels)), squeeze=False)
        for r, (title, imgs) in enumerate(panels):
            for c in range(n):
                ax = axes[r][c]
                ax.imshow(imgs[c].detach().cpu().numpy().reshape(shape), cmap="gray", vmin=0, vmax=1)
                ax.set_xticks([])
                ax.set_yticks([])
            axes[r][0].set_title(title, fontsize=7, loc="left")
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=100)
        plt.close(fig)

    def leaderboard(self, df, page) -> str:
        """Table 3: MSE, non-stitched vs stitched, per bottleneck; and the figure."""
        if df.empty:
            return "_no results yet_"
        df = df.copy()
        df["pairs"] = df["extra"].map(lambda e: "stitched" if (e or {}).get("stitched") else "non-stitched")
        body = summary_table(df, ["stitcher"], "pairs", digits=4)
        path, link = page.figure(FIGURE)
        figure = f"\n\n![reconstructions]({link})\n" if path.exists() else ""
        return ("Pixel MSE of autoencoders composed across training seeds (Moschella et al. 2023, Table 3): "
                "non-stitched = encoder and decoder of the same seed; stitched = all other pairs. Mean ± std "
                "over pairs.\n\n" + body + figure + "\n")
