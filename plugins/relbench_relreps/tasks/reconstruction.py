"""Reconstruction stitching of autoencoders trained with different seeds (Moschella et
al. 2023, §5.1, Table 3, Figure 4)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from relbench.api import deferred_import
from relbench.api import (Axis, Page, ResultRow, Task, TaskKind, TaskRunAPI, UnitKey, arrow, directions,
                          seeded_generator)
from relbench_metrics import MSE
from relbench_relreps.tasks.common import (BOTTLENECKS, best_cell, bottleneck_plan, cell_headline,
                                           check_training_settings, image_rows, image_view, select_without_banks,
                                           summary_table, without_failures)

pd = deferred_import("pandas")
torch = deferred_import("torch")

FIGURE = "reconstruction_{bottleneck}.png"


def _pixels(items, idx: np.ndarray) -> torch.Tensor:
    """Selected images as an ``n × pixels`` float tensor in [0, 1]."""
    arr = np.stack([np.asarray(items[int(i)], dtype=np.float32).reshape(-1) for i in idx])
    return torch.from_numpy(arr / 255.0)


@dataclass
class Reconstruction(TaskKind):
    """Reconstruction stitching: autoencoders with an absolute or a relative (cosine)
    bottleneck, trained with different seeds; every encoder is composed with every
    decoder of its kind and scored by pixel MSE (Moschella et al. 2023, §5.1, Table 3).

    The task trains its own small fully-connected autoencoders on the data set's
    images (the task's ``encoders`` are not used). One unit per (task seed, selector of
    the grid — default random —, bottleneck): the task seed draws ``num_anchors``
    training images with the selector (selectors that need embeddings cannot serve
    here), and one autoencoder is trained per entry of ``model_seeds`` (training seed
    ``1000 · task seed + model seed``, as the performance-proxy task does), all sharing
    those anchors, as stitching requires. Every task seed is thus an independent
    replicate of the experiment, and seeds added later run as new units.

    Columns: ``bottleneck`` (``absolute`` / ``relative``), ``selector``, and
    ``encoder_seed`` / ``decoder_seed``, the training seeds of the model whose encoder
    and of the model whose decoder are composed (stitched when they differ). Rows:
    ``mse`` (lower is better) per such pair. The page reports, per bottleneck and
    selector, the non-stitched and stitched MSE as a mean over task seeds with its
    interval (each seed: the mean over its pairs). Each task seed draws its own training
    and test images (uniformly) and its own anchors from the whole training split. A PNG
    per bottleneck (original, non-stitched and stitched reconstructions of the first task
    seed and selector) is written next to the leaderboard.

    Parameters
    ----------
    view : str | None, default None
        The image view to reconstruct; None = the data set's first image view.
    model_seeds : list[int], default [0, 1]
        Autoencoders trained per task seed and bottleneck (at least two, for stitched
        pairs; ours: the paper trains five per model and data set).
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
        Training images each task seed draws (ours).
    test_samples : int, default 1000
        Test images each task seed draws and scores (ours).
    figure_samples : int, default 8
        Columns of the reconstruction figures.
    """

    name: ClassVar[str] = "reconstruction"
    seeds_vary: ClassVar[str] = (
        "each draws its own {train_samples:,} training and {test_samples:,} test images (uniformly, not "
        "stratified) and its own anchors from the whole training split; the autoencoders train on all of its training "
        "images for {epochs} epochs, one per model seed, initialised from 1000 × seed + model seed (no "
        "validation part: no constant is chosen on data).")
    columns: ClassVar[tuple[str, ...]] = ("bottleneck", "selector", "encoder_seed", "decoder_seed")
    paired_on: ClassVar[tuple[str, ...]] = ("encoder_seed", "decoder_seed")  # claims pair their sides on these
    axes: ClassVar[dict[str, Axis]] = {"selectors": Axis("selector")}
    #: the unit-key columns (besides the seed) that a row of the page's table stands for
    groups: ClassVar[tuple[str, ...]] = ("bottleneck", "selector")
    uses_encoders: ClassVar[bool] = False
    view: str | None = None
    model_seeds: list[int] = field(default_factory=lambda: [0, 1])
    latent_dim: int = 64
    hidden: int = 256
    epochs: int = 5
    lr: float = 1e-3
    batch_size: int = 64
    train_samples: int = 5000
    test_samples: int = 1000
    figure_samples: int = 8

    def __post_init__(self) -> None:
        check_training_settings(self, ("latent_dim", "hidden", "epochs", "batch_size", "train_samples",
                                       "test_samples", "figure_samples"))

    def plan(self, task: Task) -> list[UnitKey]:
        """One unit per task seed × selector × bottleneck."""
        return bottleneck_plan(task)

    def run(self, run: TaskRunAPI) -> None:
        """Per unit: draw the anchors, train the autoencoders, score every encoder ×
        decoder pair; the plan's first seed and selector also draw the figures."""
        plan = self.plan(run.task)
        todo = [key for key in plan if not run.is_done(key)]
        if not todo:
            return
        data = run.dataset()
        view = image_view(self.name, self.view, data)
        train, test = data.splits["train"], data.splits["test"]
        position = {sid: i for i, sid in enumerate(train.ids)}
        drawn: dict[int, tuple] = {}
        for key in run.progress(todo, desc="autoencoders", total=len(todo)):
            seed = key["seed"]
            if seed not in drawn:  # each seed draws its own samples
                drawn = {seed: self._draw(seed, train.views[view], test.views[view], run.device)}
            tr_idx, Xtr, Xte = drawn[seed]
            with run.unit(key) as rows:
                anchors = select_without_banks(key["selector"], train.ids, train.labels, seed, run.task.num_anchors,
                                               run.device)
                A = self._images(train.views[view], np.array([position[s] for s in anchors.ids])).to(run.device)
                models = {1000 * seed + m: self._train(key, Xtr, A, 1000 * seed + m) for m in self.model_seeds}
                for i, j in itertools.product(models, repeat=2):
                    mse = MSE().compute(Xte, self._stitch(models[i], models[j], Xte, A))
                    rows.append(ResultRow(metric=MSE.name, value=mse, direction=MSE.direction(),
                                          cell={"encoder_seed": i, "decoder_seed": j}))
                if (seed, key["selector"]) == (plan[0]["seed"], plan[0]["selector"]):
                    self._figure(run.figure_path(self._figure_name(key)), self._figure_label(key),
                                 list(models.values()), Xte, A, train.views[view][int(tr_idx[0])])

    def _draw(self, seed: int, train_items, test_items, device) -> tuple:
        """The seed's training indices and its training and test images (on ``device``)."""
        g = seeded_generator(seed)
        tr_idx = torch.randperm(len(train_items), generator=g)[: self.train_samples].numpy()
        te_idx = torch.randperm(len(test_items), generator=g)[: self.test_samples].numpy()
        return tr_idx, self._images(train_items, tr_idx).to(device), self._images(test_items, te_idx).to(device)

    def _images(self, items, idx: np.ndarray) -> torch.Tensor:
        """The selected images as the autoencoders read them: flat pixel rows in [0, 1]."""
        return _pixels(items, idx)

    def _train(self, key: UnitKey, X: torch.Tensor, A: torch.Tensor, seed: int):
        """One autoencoder of the unit ``key``, trained on ``X`` with anchors ``A``."""
        from relbench_relreps.tasks.autoencoder import train_autoencoder

        return train_autoencoder(X, A, relative=key["bottleneck"] == "relative", seed=seed, hidden=self.hidden,
                                 latent=self.latent_dim, epochs=self.epochs, lr=self.lr, batch_size=self.batch_size)

    def _stitch(self, encoder, decoder, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """``X`` reconstructed by ``decoder`` from ``encoder``'s code."""
        from relbench_relreps.tasks.autoencoder import stitch

        return stitch(encoder, decoder, X, A)

    def _figure_name(self, key: UnitKey) -> str:
        """The file of the reconstructions figure of the unit ``key``."""
        return FIGURE.format(bottleneck=key["bottleneck"])

    def _figure_label(self, key: UnitKey) -> str:
        """How the figure's panel titles name the unit ``key``."""
        return key["bottleneck"]

    def _figure(self, path, label: str, models: list, Xte, A, example) -> None:
        """Original, non-stitched and stitched reconstructions of the first test images."""
        x = Xte[: min(self.figure_samples, len(Xte))]
        first, second = self.model_seeds[:2]
        panels = [("original", x),
                  (f"{label}, non-stitched (model {first})", self._stitch(models[0], models[0], x, A)),
                  (f"{label}, stitched (encoder model {second} → decoder model {first})",
                   self._stitch(models[1], models[0], x, A))]
        image_rows(path, panels, np.asarray(example).shape)

    def meaning(self, headline: dict | None, direction: str) -> str:
        """How to read the page: stitched against non-stitched reconstruction error (and,
        with a headline that has one, what its reference is)."""
        sentence = ("A stitched MSE close to the non-stitched one means a decoder reconstructs from another model's "
                    "latent space as well as from its own; relative bottlenecks are meant to allow that, absolute "
                    "ones not")
        if headline and np.isfinite(headline.get("reference", np.nan)):
            sentence += " (the reference is the lowest stitched MSE of an absolute bottleneck)"
        return sentence + "."

    def headline(self, results: pd.DataFrame) -> dict | None:
        """Table 3's finding: the selector whose relative bottleneck reaches the lowest
        stitched MSE (the page's cell: mean over seeds of each seed's mean over its
        stitched pairs, with its interval), beside the lowest stitched MSE of an absolute
        bottleneck as reference (NaN without one); None without stitched relative rows."""
        per_seed = per_seed_pairs(without_failures(results)[0], self.groups)
        stitched = per_seed[per_seed["pairs"] == "stitched"]
        direction = directions(results).get(MSE.name, "neutral")

        def cells(bottleneck: str) -> dict[str, pd.DataFrame]:
            rows = stitched[stitched["bottleneck"] == bottleneck]
            return {" · ".join(map(str, keys)) + " · stitched": group
                    for keys, group in rows.groupby(list(self.groups))}

        best = best_cell(cells("relative"), direction)
        if best is None:
            return None
        reference = best_cell(cells("absolute"), direction)
        return cell_headline(MSE.name, *best, reference[1][0] if reference else np.nan)

    def page(self, results: pd.DataFrame, page: Page) -> str:
        """Table 3: MSE, non-stitched vs stitched, per bottleneck and selector (mean over
        seeds with an interval over seeds); and the figures."""
        df, note = without_failures(results)
        ok = df[(df["status"] == "ok") & (df["metric"] == MSE.name)]
        if ok.empty:
            return "_no results yet_" + note
        per_seed = per_seed_pairs(ok, self.groups)
        body = summary_table(per_seed, list(self.groups), "pairs", digits=4)
        figures = ""
        for bottleneck in BOTTLENECKS:
            link = page.stored_figure(FIGURE.format(bottleneck=bottleneck))
            if link:
                figures += f"\n\n![{bottleneck} reconstructions]({link})"
        mse = arrow(MSE.name, directions(ok).get(MSE.name, "neutral"))
        return (f"Pixel MSE ({mse}) of autoencoders composed across training seeds (Moschella et al. 2023, "
                "Table 3): non-stitched = encoder and decoder of the same model; stitched = all other pairs of "
                f"the same task seed (which fixes the anchors). Mean over {per_seed['seed'].nunique()} task "
                "seed(s) of each seed's mean over its pairs, with the 95 % Student-t interval over seeds "
                "(no per-sample data is stored for this score).\n\n" + body + note + figures + "\n")


def per_seed_pairs(rows: pd.DataFrame, groups: tuple[str, ...]) -> pd.DataFrame:
    """The ok MSE rows of ``rows`` as the page tabulates them: per ``groups`` (e.g.
    bottleneck and selector), ``pairs`` (``stitched`` when encoder and decoder come from
    different models, ``non-stitched`` otherwise) and seed, the mean over its encoder ×
    decoder pairs."""
    ok = rows[(rows["status"] == "ok") & (rows["metric"] == MSE.name)]
    pairs = np.where(ok["encoder_seed"] != ok["decoder_seed"], "stitched", "non-stitched")
    per_seed = ok.assign(pairs=pairs).groupby([*groups, "pairs", "seed"])["value"].mean()
    return per_seed.reset_index().assign(status="ok")
