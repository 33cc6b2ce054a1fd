"""Rescaling injected layer by layer inside a transformer (IRP §3.4, Figure 2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np

from relbench.api import deferred_import
from relbench.api import (Axis, ConfigError, Page, ResultRow, Task, TaskKind, TaskRunAPI, UnitKey, fmt, fmt_interval,
                          head_settings, predict_logits, seed_interval, stratified_subsample, table, train_classifier,
                          validate_head_params)

pd = deferred_import("pandas")
torch = deferred_import("torch")

REPRESENTATIONS = ("absolute", "relative")
METRICS = {"cosine": "higher", "error": "lower", "accuracy": "higher"}


@dataclass
class LayerRescaling(TaskKind):
    """Rescaling injected inside a transformer (Maiorca et al. 2024, §3.4, Figure 2): the
    hidden states one layer outputs are multiplied by a factor, and the change is followed
    to the output embedding and to a downstream head, in absolute and relative form.

    The model is read from its local files (the ``transformers`` encoder's ``model``:
    ``all-MiniLM-L6-v2`` is the packaged copy) and pooled as that encoder pools it; a
    forward hook on layer ``l`` (0: the embedding layer, ``l``: the ``l``-th encoder
    layer) multiplies its output by ``s``. One unit per (seed, selector): a seeded,
    stratified draw of ``max_samples`` training and test texts, anchors drawn from the
    training texts by the selector. Heads (the reference head) are trained on the
    unrescaled training embeddings (``absolute``) and on their cosines to the anchors
    (``relative``). Then, for every (layer, scale), the test texts *and the anchors* are
    embedded by the rescaled model, and each representation reports ``cosine`` ↑ (mean
    cosine to the unrescaled one), ``error`` ↓ (mean ``‖new − old‖ / ‖old‖``) and
    ``accuracy`` ↑ (its head on the rescaled test rows); ``accuracy_unscaled`` ↑ is each
    head on the unrescaled test rows. Columns: ``selector``, ``representation``, ``layer``
    and ``scale``.

    The paper trains a classifier on RoBERTa's last layer and rescales every layer 0–12
    of a fine-tuned model; here a frozen sentence encoder with a trained head. Its §4.2
    "rescale injection" sets a norm (normalise, then α); Figure 2's caption rescales by
    α, which is what the hook does.

    Parameters:
        model, pooling, max_length, normalize: the ``transformers`` encoder's (defaults
            ``all-MiniLM-L6-v2``, ``mean``, 256, false); ``pooling`` is ``mean`` or ``cls``.
        view: the text view read (default: the data set's first text view).
        layers: the layers rescaled (0: embeddings). Default [0, 2, 4, 6] (MiniLM's six).
        scales: the factors. Default [0.1, 0.5, 2, 10] (our choice).
        max_samples: training and test texts drawn per seed. Default 1000 (our choice).
        epochs, lr, hidden, batch_size: the heads' training. Defaults 5, 1e-3, 256, 32
            (the reference head's text settings).
    """

    name: ClassVar[str] = "layer-rescaling"
    seeds_vary: ClassVar[str] = (
        "each draws its own {max_samples:,} training and {max_samples:,} test texts (stratified by class) and its "
        "own anchors from the training draw; the heads train on all of its training texts for {epochs} epochs (no "
        "validation part: no constant is chosen on data).")
    columns: ClassVar[tuple[str, ...]] = ("selector", "representation", "layer", "scale")
    paired_on: ClassVar[tuple[str, ...]] = ("selector", "layer", "scale")
    axes: ClassVar[dict[str, Axis]] = {"selectors": Axis("selector")}
    uses_encoders: ClassVar[bool] = False
    model: str = "all-MiniLM-L6-v2"
    pooling: Literal["mean", "cls"] = "mean"
    max_length: int = 256
    normalize: bool = False
    view: str | None = None
    layers: list[int] = field(default_factory=lambda: [0, 2, 4, 6])
    scales: list[float] = field(default_factory=lambda: [0.1, 0.5, 2.0, 10.0])
    max_samples: int = 1000
    epochs: int = 5
    lr: float = 1e-3
    hidden: int = 256
    batch_size: int = 32

    def __post_init__(self) -> None:
        if self.pooling not in ("mean", "cls"):
            raise ValueError(f"layer-rescaling: pooling must be mean or cls, got {self.pooling!r}")
        if not self.layers or any(layer < 0 for layer in self.layers):
            raise ValueError(f"layer-rescaling: layers must be a non-empty list of indices ≥ 0, got {self.layers}")
        if not self.scales or any(s <= 0 for s in self.scales):
            raise ValueError(f"layer-rescaling: scales must be a non-empty list of positive factors, got {self.scales}")
        if self.max_samples < 2 or self.max_length < 2:
            raise ValueError("layer-rescaling: max_samples and max_length must be at least 2")
        validate_head_params(self.epochs, self.lr, self.hidden, self.batch_size)

    def validate(self, task: Task) -> None:
        """The grid needs an anchor selector (the relative form's anchors)."""
        if not task.grid["selectors"]:
            raise ValueError("layer-rescaling: set grid.selectors (the anchors of the relative form)")

    def plan(self, task: Task) -> list[UnitKey]:
        """One unit per (seed, selector): every layer and scale."""
        return [{"seed": seed, "selector": sel} for seed in task.seeds for sel in task.grid["selectors"]]

    def run(self, run: TaskRunAPI) -> None:
        """Load the model once, then compute every unit not yet stored."""
        todo = [key for key in self.plan(run.task) if not run.is_done(key)]
        if not todo:
            return
        from relbench_irp.layer_hooks import TextModel

        data = run.dataset()
        view = self._view(data)
        text = TextModel(self._folder(), self.pooling, self.max_length, self.normalize, run.device)
        too_deep = [layer for layer in self.layers if layer > text.num_layers]
        if too_deep:
            raise ConfigError(f"layer-rescaling: {self.model!r} has layers 0 … {text.num_layers}; {too_deep} are not")
        for key in run.progress(todo, desc="layer rescaling", total=len(todo)):
            with run.unit(key) as rows:
                rows += self._unit(key, data, view, text, run)

    def _folder(self):
        """The model's local folder, resolved as the ``transformers`` encoder resolves it."""
        from relbench_encoders._common import ensure_torchvision
        from relbench_encoders.text import TransformersEncoder

        ensure_torchvision()  # transformers imports torchvision
        folder = TransformersEncoder(model=self.model).local_dir()
        if folder is None:
            raise ConfigError(f"layer-rescaling reads local model files; {self.model!r} is no local folder and no "
                              f"packaged model")
        return folder

    def _view(self, data) -> str:
        if self.view is not None:
            if data.view_modalities.get(self.view) != "text":
                raise ConfigError(f"layer-rescaling: data set {data.name!r} has no text view {self.view!r}")
            return self.view
        for name, modality in data.view_modalities.items():
            if modality == "text":
                return name
        raise ConfigError(f"layer-rescaling needs a text data set; {data.name!r} has views {data.views}")

    def _draw(self, split, view: str, seed: int) -> tuple[list[str], list[str], np.ndarray]:
        """A seeded stratified draw of ``max_samples`` rows: ids, texts, labels."""
        labels = np.asarray(split.labels)
        picked = stratified_subsample(labels, len(split), self.max_samples, seed)
        return [split.ids[i] for i in picked], [str(split.views[view][i]) for i in picked], labels[picked]

    def _unit(self, key: UnitKey, data, view: str, text, run: TaskRunAPI) -> list[ResultRow]:
        from relbench_irp.layer_hooks import agreement, relative, rescaled
        from relbench_relreps.tasks.common import select_without_banks

        seed = key["seed"]
        train_ids, train_texts, ytr = self._draw(data.splits["train"], view, seed)
        _, test_texts, yte = self._draw(data.splits["test"], view, seed)
        anchors = select_without_banks(key["selector"], train_ids, ytr, seed, run.task.num_anchors, run.device)
        position = {sid: i for i, sid in enumerate(train_ids)}
        anchor_texts = [train_texts[position[s]] for s in anchors.ids]
        Xtr, X, A = (text.encode(t) for t in (train_texts, test_texts, anchor_texts))
        y = torch.as_tensor(yte).long()
        train = {"absolute": Xtr, "relative": relative(Xtr, A)}
        original = {"absolute": X, "relative": relative(X, A)}
        heads = {r: self._head(train[r], torch.as_tensor(ytr).long(), len(data.class_names), seed, run)
                 for r in REPRESENTATIONS}
        rows = [ResultRow(metric="accuracy_unscaled", value=_accuracy(heads[r], original[r], y), direction="higher",
                          cell={"representation": r}) for r in REPRESENTATIONS]
        for layer in self.layers:
            for scale in self.scales:
                with rescaled(text.model, layer, scale):
                    Xs, As = text.encode(test_texts), text.encode(anchor_texts)
                new = {"absolute": Xs, "relative": relative(Xs, As)}
                for r in REPRESENTATIONS:
                    cell = {"representation": r, "layer": layer, "scale": scale}
                    cosine, error = agreement(new[r], original[r])
                    values = {"cosine": cosine, "error": error, "accuracy": _accuracy(heads[r], new[r], y)}
                    rows += [ResultRow(metric=m, value=v, direction=METRICS[m], cell=cell) for m, v in values.items()]
        return rows

    def _head(self, X, y, num_classes: int, seed: int, run: TaskRunAPI):
        settings = head_settings("text", self.epochs, self.lr, self.hidden, self.batch_size)
        torch.manual_seed(seed)
        head = settings.build(X.shape[1], num_classes, X.device)
        return train_classifier(head, X, y, epochs=settings.epochs, lr=settings.lr, batch_size=settings.batch_size,
                                seed=seed, evaluation=run.task.protocol.evaluation)

    def meaning(self, headline: dict | None, direction: str) -> str:
        """How to read the page."""
        return ("A cosine near 1 and an accuracy near the unscaled one mean the rescaled layer leaves that "
                "representation unchanged; the relative form (cosines to anchors embedded by the same rescaled "
                "model) discards any rescaling that reaches the output as one common factor. Both heads are the "
                "reference head, which opens with a LayerNorm of its input: the absolute head too discards a common "
                "factor by construction (the paper's §4.2 heads have no normalisation layer), so only the cosine "
                "and error columns show what the rescaling does to the absolute embeddings.")

    def page(self, results: pd.DataFrame, page: Page) -> str:
        """A heatmap of accuracy over layer × scale per representation (mean over seeds),
        and a table of every metric."""
        ok = results[(results["status"] == "ok") & results["metric"].isin(list(METRICS) + ["accuracy_unscaled"])]
        if ok.empty:
            return "No results yet.\n"
        return _figure(ok, page) + "\n" + _table(ok)


def _accuracy(head, X, y) -> float:
    return float((predict_logits(head, X).argmax(dim=1).cpu() == y).float().mean())


def _seed_mean(rows: pd.DataFrame) -> str:
    per_seed = rows.groupby("seed")["value"].mean()
    return f"{fmt(per_seed.mean())} {fmt_interval(*seed_interval(per_seed))}" if len(per_seed) else "n/a"


def _figure(ok: pd.DataFrame, page: Page) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    acc = ok[ok["metric"] == "accuracy"]
    fig, axes = plt.subplots(1, len(REPRESENTATIONS), figsize=(4.4 * len(REPRESENTATIONS), 3.4), squeeze=False)
    for ax, r in zip(axes[0], REPRESENTATIONS):
        grid = acc[acc["representation"] == r].groupby(["scale", "layer"])["value"].mean().unstack("layer")
        image = ax.imshow(grid.values, vmin=0, vmax=1, aspect="auto", origin="lower", cmap="viridis")
        ax.set_xticks(range(grid.shape[1]), [f"{c:g}" for c in grid.columns])
        ax.set_yticks(range(grid.shape[0]), [f"{s:g}" for s in grid.index])
        ax.set_xlabel("rescaled layer")
        ax.set_ylabel("rescaling factor")
        ax.set_title(f"{r} head", fontsize=9)
        fig.colorbar(image, ax=ax, label="accuracy")
    fig.tight_layout()
    link = page.save(fig, "layer_rescaling.png")
    return (f"![accuracy over rescaled layer and factor]({link})\n\nAccuracy, mean over seeds (as the paper's "
            f"Figure 2).\n")


def _table(ok: pd.DataFrame) -> str:
    body = []
    unscaled = ok[ok["metric"] == "accuracy_unscaled"]
    scaled = ok[ok["metric"] != "accuracy_unscaled"]
    for (sel, r, layer, scale), g in scaled.groupby(["selector", "representation", "layer", "scale"], sort=True):
        base = unscaled[(unscaled["selector"] == sel) & (unscaled["representation"] == r)]
        body.append([sel, r, f"{layer:g}", f"{scale:g}", *(_seed_mean(g[g["metric"] == m]) for m in METRICS),
                     _seed_mean(base)])
    headers = ["selector", "representation", "layer", "scale", "cosine ↑", "error ↓", "accuracy ↑",
               "unscaled ↑"]
    return ("Mean over seeds [95 % t-interval over seeds] (a table too wide for a screen continues below, its rows "
            "named again):\n\n" + table(body, headers=headers, keep=4) + "\n")
