"""Training with absolute vs relative representations (Moschella et al. 2023, §4.3,
Table 2), the zero-shot stitching of the networks so trained, and their latent similarity
to a reference over the epochs (§4.2, Figure 3 right)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import ClassVar

import numpy as np

from relbench.api import deferred_import
from relbench.api import (Axis, Page, ResultRow, Task, TaskKind, TaskRunAPI, UnitKey, directions, metric_row,
                          per_sample_predictions, seeded_generator)
from relbench_metrics import Accuracy, PearsonR, WeightedF1
from relbench_relreps.tasks.common import (best_cell, bottleneck_plan, cell_headline,
                                           check_training_settings, image_view, select_without_banks, summary_table,
                                           with_arrows, without_failures)

pd = deferred_import("pandas")
torch = deferred_import("torch")

FIGURE = "relative_training_epochs.png"
SIMILARITY = "latent_similarity"
#: Table 2's image columns: weighted F1 × 100 ± std over 6 seeds, (relative, absolute)
PAPER = {"MNIST": ("97.91 ± 0.07", "97.95 ± 0.10"), "F-MNIST": ("90.19 ± 0.27", "90.32 ± 0.21"),
         "CIFAR-10": ("87.70 ± 0.09", "87.85 ± 0.06"), "CIFAR-100": ("66.72 ± 0.35", "68.88 ± 0.14")}


def _images(items, idx: np.ndarray) -> torch.Tensor:
    """Selected images as an ``n × channels × height × width`` float tensor in [0, 1]."""
    arr = np.stack([np.asarray(items[int(i)], dtype=np.float32) for i in idx]) / 255.0
    arr = arr[:, None] if arr.ndim == 3 else arr.transpose(0, 3, 1, 2)
    return torch.from_numpy(np.ascontiguousarray(arr))


def _pairs(i: int, j: int) -> str:
    return "non-stitched" if i == j else "stitched"


@dataclass
class RelativeTraining(TaskKind):
    """Training with absolute vs relative representations: small CNN classifiers trained
    from scratch with an absolute or a relative (cosine-to-anchors) bottleneck before a
    linear head, scored by weighted F1 (Moschella et al. 2023, §4.3, Table 2), every
    encoder composed with every head of its kind (zero-shot stitching across training
    seeds), and each net's latent similarity to a reference net over the epochs (§4.2).

    The task trains its own nets on the data set's images (its ``encoders`` are not used).
    One unit per (task seed, selector of the grid — default random —, bottleneck): the
    task seed draws the training and test images (as the reconstruction kind does) and
    ``num_anchors`` training images with the selector; one net per entry of
    ``model_seeds`` is trained (seed ``1000 · task seed + model seed``), all sharing those
    anchors. Both bottlenecks have the same encoder, optimiser, epochs and batch size (the
    paper: "comparable in architecture, number of parameters and hyperparameters"); the
    relative head reads ``num_anchors`` cosines instead of ``latent_dim`` coordinates.

    Columns: ``bottleneck``, ``selector``, ``encoder_seed`` / ``decoder_seed`` (the nets
    whose encoder and whose head are composed), ``pairs`` (``non-stitched`` when they are
    one net, ``stitched`` otherwise) and ``epoch``. Rows: ``weighted_f1`` per encoder ×
    head pair, with per-sample predictions; per net and epoch (0 = initialisation)
    ``accuracy``, and for every net but the reference (the first model seed, after its last
    epoch) ``latent_similarity`` (neutral: the mean cosine of the two nets' relative
    representations of the test images on the unit's anchors, §4.2's measure, for either
    bottleneck) and ``pearson_r`` of similarity and accuracy over the epochs.

    Parameters
    ----------
    view : str | None, default None
        The image view to train on; None = the data set's first image view.
    model_seeds : list[int], default [0, 1]
        Nets trained per task seed and bottleneck (at least two, for stitched pairs; the
        first is the reference of the latent similarity).
    latent_dim : int, default 64
        Width of the absolute latent (ours).
    epochs : int, default 5
        Training epochs per net (ours; the paper's deep CNN trains longer).
    lr : float, default 1e-3
        Adam learning rate (ours).
    batch_size : int, default 128
        Training batch size (ours).
    train_samples : int, default 5000
        Training images drawn per task seed (ours; the paper uses the full training set).
    test_samples : int, default 2000
        Test images drawn per task seed (ours).
    """

    name: ClassVar[str] = "relative-training"
    seeds_vary: ClassVar[str] = (
        "each draws its own {train_samples:,} training and {test_samples:,} test images (uniformly, not "
        "stratified) and its own anchors from the whole training split; the networks train on all of its training "
        "images for {epochs} epochs, one per model seed, initialised from 1000 × seed + model seed (no "
        "validation part: no constant is chosen on data).")
    columns: ClassVar[tuple[str, ...]] = ("bottleneck", "selector", "encoder_seed", "decoder_seed", "pairs", "epoch")
    paired_on: ClassVar[tuple[str, ...]] = ("encoder_seed", "decoder_seed")  # claims pair their sides on these
    axes: ClassVar[dict[str, Axis]] = {"selectors": Axis("selector")}
    uses_encoders: ClassVar[bool] = False
    view: str | None = None
    model_seeds: list[int] = field(default_factory=lambda: [0, 1])
    latent_dim: int = 64
    epochs: int = 5
    lr: float = 1e-3
    batch_size: int = 128
    train_samples: int = 5000
    test_samples: int = 2000

    def __post_init__(self) -> None:
        check_training_settings(self, ("latent_dim", "epochs", "batch_size", "train_samples", "test_samples"))

    def plan(self, task: Task) -> list[UnitKey]:
        """One unit per task seed × selector × bottleneck."""
        return bottleneck_plan(task)

    def run(self, run: TaskRunAPI) -> None:
        """Per unit: draw the anchors, train the nets, score every encoder × head pair."""
        todo = [key for key in self.plan(run.task) if not run.is_done(key)]
        if not todo:
            return
        data = run.dataset()
        view = image_view(self.name, self.view, data)
        drawn: dict[int, SimpleNamespace] = {}
        for key in run.progress(todo, desc="relative training", total=len(todo)):
            if key["seed"] not in drawn:  # each seed draws its own samples
                drawn = {key["seed"]: self._draw(data, view, key["seed"], run.device)}
            with run.unit(key) as rows:
                rows += self._unit(key, drawn[key["seed"]], run)

    def _draw(self, data, view: str, seed: int, device) -> SimpleNamespace:
        train, test = data.splits["train"], data.splits["test"]
        g = seeded_generator(seed)
        tr = torch.randperm(len(train), generator=g)[: self.train_samples].numpy()
        te = torch.randperm(len(test), generator=g)[: self.test_samples].numpy()
        return SimpleNamespace(
            train=train, view=view, Xtr=_images(train.views[view], tr).to(device),
            ytr=torch.as_tensor(np.asarray(train.labels)[tr]).long().to(device),
            Xte=_images(test.views[view], te).to(device), yte=np.asarray(test.labels)[te],
            test_ids=[test.ids[int(i)] for i in te], num_classes=len(data.class_names))

    def _unit(self, key: UnitKey, draw: SimpleNamespace, run: TaskRunAPI) -> list[ResultRow]:
        from relbench_relreps.tasks.bottleneck_cnn import predict

        anchors = select_without_banks(key["selector"], draw.train.ids, draw.train.labels, key["seed"],
                                       run.task.num_anchors, run.device)
        position = {sid: i for i, sid in enumerate(draw.train.ids)}
        A = _images(draw.train.views[draw.view], np.array([position[s] for s in anchors.ids])).to(run.device)
        nets, curves = self._train(draw, A, key["seed"], key["bottleneck"] == "relative")
        rows = []
        for i, j in itertools.product(nets, repeat=2):
            pred = predict(nets[i], nets[j], draw.Xte, A).cpu().numpy()
            rows.append(metric_row(WeightedF1.name, WeightedF1(), draw.yte, pred,
                                   cell={"encoder_seed": i, "decoder_seed": j, "pairs": _pairs(i, j)},
                                   per_sample=per_sample_predictions(draw.test_ids, draw.yte, pred)))
        return rows + [row for seed, curve in curves.items() for row in self._curve_rows(seed, curve, next(iter(nets)))]

    def _train(self, draw: SimpleNamespace, A, seed: int, relative: bool) -> tuple[dict, dict]:
        """The nets by training seed, the reference first, and each one's ``[(epoch,
        accuracy, latent similarity to the trained reference or NaN)]``."""
        from relbench_relreps.tasks.bottleneck_cnn import (latent_similarity, predict, relative_view,
                                                           train_bottleneck_cnn)

        nets, curves, reference = {}, {}, None
        for s in (1000 * seed + m for m in self.model_seeds):
            curve = curves.setdefault(s, [])

            def record(epoch, net, curve=curve, reference=reference):
                accuracy = Accuracy().compute(draw.yte, predict(net, net, draw.Xte, A).cpu().numpy())
                similarity = np.nan if reference is None else latent_similarity(net, reference, draw.Xte, A)
                curve.append((epoch, accuracy, similarity))

            nets[s] = train_bottleneck_cnn(draw.Xtr, draw.ytr, A, relative=relative, seed=s, latent=self.latent_dim,
                                           num_classes=draw.num_classes, epochs=self.epochs, lr=self.lr,
                                           batch_size=self.batch_size, after_epoch=record)
            reference = relative_view(nets[s], draw.Xte, A) if reference is None else reference
        return nets, curves

    @staticmethod
    def _curve_rows(seed: int, curve: list[tuple], reference: int) -> list[ResultRow]:
        """A net's per-epoch accuracy rows, and (but the reference's) its similarity rows and their Pearson r."""
        rows = [ResultRow(metric=Accuracy.name, value=acc, direction=Accuracy.direction(),
                          cell={"encoder_seed": seed, "decoder_seed": seed, "pairs": "non-stitched", "epoch": epoch})
                for epoch, acc, _ in curve]
        if seed == reference:
            return rows
        extra = {"reference_seed": reference}
        rows += [ResultRow(metric=SIMILARITY, value=sim, direction="neutral", extra=extra,
                           cell={"encoder_seed": seed, "epoch": epoch}) for epoch, _, sim in curve]
        r = PearsonR().compute([acc for _, acc, _ in curve], [sim for _, _, sim in curve])
        return rows + [ResultRow(metric=PearsonR.name, value=r if np.isfinite(r) else None,
                                 direction=PearsonR.direction(), cell={"encoder_seed": seed},
                                 status="ok" if np.isfinite(r) else "not_achievable", extra=extra)]

    def meaning(self, headline: dict | None, direction: str) -> str:
        """How to read the page: relative against absolute training (and, with a headline
        that has one, what its reference is)."""
        sentence = ("A relative weighted F1 close to the absolute one means that training through the relative "
                    "bottleneck costs no accuracy (Table 2); stitched rows say whether independently trained nets "
                    "read each other's latents zero-shot")
        if headline and np.isfinite(headline.get("reference", np.nan)):
            sentence += " (the reference is the best non-stitched weighted F1 of an absolute bottleneck)"
        return sentence + "."

    def headline(self, results: pd.DataFrame) -> dict | None:
        """Table 2's finding: the selector whose relative bottleneck reaches the highest
        non-stitched weighted F1 (the page's cell, with its interval), beside the best
        absolute one as reference (NaN without one); None without relative rows."""
        rows = without_failures(results)[0]
        rows = rows[(rows["metric"] == WeightedF1.name) & (rows["pairs"] == "non-stitched")]
        direction = directions(results).get(WeightedF1.name, "neutral")

        def cells(bottleneck: str) -> dict[str, pd.DataFrame]:
            mine = rows[rows["bottleneck"] == bottleneck]
            return {f"{bottleneck} · {selector} · non-stitched": group
                    for selector, group in mine.groupby("selector")}

        best = best_cell(cells("relative"), direction)
        if best is None:
            return None
        reference = best_cell(cells("absolute"), direction)
        return cell_headline(WeightedF1.name, *best, reference[1][0] if reference else np.nan)

    def page(self, results: pd.DataFrame, page: Page) -> str:
        """Table 2 (weighted F1 × 100, non-stitched and stitched, beside the paper's), the
        Pearson r of similarity and accuracy over the epochs, and their curves."""
        df, note = without_failures(results)
        f1 = df[df["metric"] == WeightedF1.name]
        if f1.empty:
            return "_no results yet_" + note
        table = summary_table(f1.assign(value=f1["value"] * 100), ["bottleneck", "selector"], "pairs", digits=2,
                              bounds=(0.0, 100.0))
        paper = "\n".join(f"| {name} | {rel} | {absolute} |" for name, (rel, absolute) in PAPER.items())
        text = ("Weighted F1 × 100 (↑) of CNNs trained from scratch with an absolute or a relative bottleneck "
                "(Moschella et al. 2023, §4.3, Table 2): non-stitched = each net's own encoder and head; stitched = "
                "one net's encoder read by another's head, zero-shot (same task seed, hence the same anchors). "
                f"Mean over {f1['seed'].nunique()} task seed(s) of each seed's mean over its pairs, with the 95 % "
                "Student-t interval over seeds, cut at the score's range [0, 100].\n\n" + table + note +
                "\n\nThe paper's Table 2 (non-stitched; weighted F1 × 100 ± std over 6 seeds, a standard deep CNN "
                "on the full training sets):\n\n| data set | relative | absolute |\n|---|---|---|\n" + paper +
                "\n\nWhat differs here: a two-layer CNN trained for a few epochs on a few thousand images per seed "
                "(see the kind's parameters), so both bottlenecks score below the paper's; the comparison between "
                "them is the point.\n")
        r = df[df["metric"] == PearsonR.name]
        if r.empty:
            return text
        text += ("\n### Latent similarity to the reference as a proxy of accuracy over the epochs (§4.2)\n\n"
                 "Per net but the reference (the first model seed, trained): the Pearson r across epochs (0 = "
                 "initialisation) of its test accuracy and its latent similarity to the reference (mean cosine of "
                 "the two nets' relative representations of the test images). Mean over seeds and nets, with the "
                 "95 % Student-t interval over seeds, cut at r's range [−1, 1].\n\n")
        text += summary_table(with_arrows(r), ["bottleneck", "selector"], "metric", bounds=(-1.0, 1.0))
        return text + f"\n\n![accuracy and latent similarity over epochs]({page.save(_figure(df), FIGURE, dpi=100)})\n"


def _figure(df: pd.DataFrame):
    """Test accuracy and latent similarity to the reference per epoch, per bottleneck
    (mean over seeds and nets)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = df[df["status"] == "ok"]
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    for ax, metric, label in zip(axes, (Accuracy.name, SIMILARITY), ("test accuracy", "similarity to the reference")):
        rows = ok[ok["metric"] == metric]
        for bottleneck, group in rows.groupby("bottleneck"):
            curve = group.groupby("epoch")["value"].mean()
            ax.plot(curve.index, curve.values, marker="o", label=bottleneck)
        ax.set_xlabel("epoch")
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
