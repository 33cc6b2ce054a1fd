"""Latent similarity as a performance proxy (Moschella et al. 2023, §4.2, Figure 3)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import ClassVar

from relbench.api import deferred_import
from relbench.api import (Axis, Bank, Page, PluginSpec, ResultRow, Task, TaskKind, TaskRunAPI, UnitKey, directions,
                          predict_logits, train_classifier)
from relbench_metrics import PearsonR
from relbench_relreps.selectors import RandomAnchors
from relbench_relreps.similarities import Cosine
from relbench_relreps.tasks.common import (best_cell, cell_headline, specs_or_default, summary_table, with_arrows,
                                           without_failures)

pd = deferred_import("pandas")
torch = deferred_import("torch")

FIGURE = "proxy_scatter.png"
#: the hidden activations a proxy model may use (:class:`~relbench_relreps.tasks.small_net.SmallNet`)
ACTIVATIONS = ("relu", "tanh")


@dataclass
class PerformanceProxy(TaskKind):
    """Latent similarity as a performance proxy: many small classifiers of varying
    quality are trained on each encoder's embeddings; the mean cosine between each
    model's relative representation of the test samples and a well-trained reference
    model's predicts its accuracy (Pearson r; Moschella et al. 2023, §4.2).

    Per encoder and seed: a reference :class:`~relbench_relreps.tasks.small_net.SmallNet` (``reference_width``,
    ``reference_epochs``, ReLU) and a sweep over ``epochs × widths × activations ×
    model_seeds`` (model seeds are offset by 1000 × the task seed, so every task seed is
    a fresh replicate), trained once. Per selector and similarity of the grid
    (defaults: random anchors, cosine): both models' latents (the hidden layer) are
    projected on the same anchor samples and compared.

    Columns: ``encoder`` (whose embeddings the models learn from), ``selector``,
    ``similarity`` and ``model`` (a sweep model, e.g. ``e3-w64-relu-s1``). Units: one per
    seed × encoder × selector × similarity. Rows: per model ``accuracy`` (higher is
    better) and ``similarity`` (its mean cosine to the reference: neutral, a predictor
    rather than a score), and per unit ``pearson_r`` (higher is better, no model) over
    the models whose accuracy reaches ``min_accuracy``.

    Parameters
    ----------
    epochs : list[int], default [1, 3, 10]
        Training epochs of the sweep (paper: 10, 30, 50 on Cora).
    widths : list[int], default [16, 64]
        Latent widths of the sweep (paper: 32, 64 layers).
    activations : list[str], default ["relu", "tanh"]
        Hidden activations of the sweep (paper: ReLU, Tanh).
    model_seeds : list[int], default [0, 1]
        Seeds of the sweep (paper: 0–4).
    lr : float, default 1e-3
        Adam learning rate of every model (ours).
    batch_size : int, default 64
        Training batch size (ours).
    reference_epochs : int, default 30
        Epochs of the reference model (ours; paper: 500 on Cora).
    reference_width : int, default 64
        Latent width of the reference model.
    max_train : int, default 3000
        Training rows used per model (the first ones of the bank; ours, for speed).
    min_accuracy : float, default 0.0
        Models below this test accuracy are left out of r (paper: 0.5 on Cora).
    """

    name: ClassVar[str] = "proxy"
    columns: ClassVar[tuple[str, ...]] = ("encoder", "selector", "similarity", "model")
    paired_on: ClassVar[tuple[str, ...]] = ("encoder", "model")  # claims pair their sides on these
    axes: ClassVar[dict[str, Axis]] = {"selectors": Axis("selector"), "similarities": Axis("similarity")}
    epochs: list[int] = field(default_factory=lambda: [1, 3, 10])
    widths: list[int] = field(default_factory=lambda: [16, 64])
    activations: list[str] = field(default_factory=lambda: ["relu", "tanh"])
    model_seeds: list[int] = field(default_factory=lambda: [0, 1])
    lr: float = 1e-3
    batch_size: int = 64
    reference_epochs: int = 30
    reference_width: int = 64
    max_train: int = 3000
    min_accuracy: float = 0.0

    def __post_init__(self) -> None:
        for key in ("epochs", "widths", "activations", "model_seeds"):
            if not getattr(self, key):
                raise ValueError(f"{key} must not be empty")
        if any(e < 1 for e in self.epochs) or any(w < 1 for w in self.widths):
            raise ValueError("epochs and widths must be positive")
        bad = [a for a in self.activations if a not in ACTIVATIONS]
        if bad:
            raise ValueError(f"unknown activations {bad}; choose among {sorted(ACTIVATIONS)}")
        if self.lr <= 0 or self.batch_size < 2 or self.reference_epochs < 1 or self.reference_width < 1:
            raise ValueError("lr, batch_size (≥2), reference_epochs and reference_width must be positive")
        if self.max_train < 2:
            raise ValueError(f"max_train must be at least 2, got {self.max_train}")

    def _train(self, X, y, width, epochs, activation, seed, num_classes) -> torch.nn.Module:
        torch.manual_seed(seed)
        from relbench_relreps.tasks.small_net import SmallNet

        net = SmallNet(X.shape[1], width, num_classes, activation).to(X.device)
        return train_classifier(net, X, y, epochs=epochs, lr=self.lr, batch_size=self.batch_size, seed=seed)

    def _models(self, train: Bank, test: Bank, seed: int, num_classes: int) -> dict[str, dict]:
        """Train the reference and the sweep; name → {net, accuracy, params}."""
        X, y = train.X[: self.max_train], train.labels[: self.max_train].long()
        yt = test.labels.long().to(test.X.device)
        configs = [("reference", self.reference_epochs, self.reference_width, "relu", seed)]
        for e, w, a, s in itertools.product(self.epochs, self.widths, self.activations, self.model_seeds):
            configs.append((f"e{e}-w{w}-{a}-s{s}", e, w, a, 1000 * seed + s))
        out = {}
        for name, e, w, a, s in configs:
            net = self._train(X, y, w, e, a, s, num_classes)
            acc = float((predict_logits(net, test.X).argmax(1) == yt).float().mean())
            out[name] = {"net": net, "accuracy": acc, "params": {"epochs": e, "width": w, "activation": a,
                                                                  "model_seed": s}}
        return out

    def plan(self, task: Task) -> list[UnitKey]:
        """One unit per encoder × seed × selector × similarity (in that order: the models
        of an encoder and seed are trained once for all its units)."""
        selectors = specs_or_default(task.grid["selectors"], "selector", RandomAnchors)
        similarities = specs_or_default(task.grid["similarities"], "similarity", Cosine)
        return [{"seed": seed, "encoder": enc, "selector": sel, "similarity": sim}
                for enc in task.encoders for seed in task.seeds for sel in selectors for sim in similarities]

    def run(self, run: TaskRunAPI) -> None:
        """Per encoder × seed with units to do (on the seed's draw: models fit on the fit
        part, scored on the test draw): train the models once; per unit: score them."""
        todo = [key for key in self.plan(run.task) if not run.is_done(key)]
        if not todo:
            return
        num_classes = len(run.dataset().class_names)
        for (label, seed), keys in itertools.groupby(todo, key=lambda k: (k["encoder"].label, k["seed"])):
            train, test = run.banks("train", seed)[label], run.banks("test", seed)[label]
            models = self._models(train, test, seed, num_classes)
            for key in keys:
                with run.unit(key) as rows:
                    anchors = run.realise(run.anchors(seed, key["selector"]), label)
                    rows += self._score(models, key["similarity"], anchors, train.X[: self.max_train], test.X)

    def _score(self, models: dict[str, dict], sim_spec: PluginSpec, anchors: torch.Tensor, Xtr: torch.Tensor,
               Xte: torch.Tensor) -> list[ResultRow]:
        """Each model's accuracy and similarity to the reference, and their Pearson r."""
        rel = {}
        with torch.no_grad():
            for name, m in models.items():
                m["net"].eval()
                sim = sim_spec.build()
                sim.fit(m["net"].body(Xtr))
                rel[name] = sim.project(m["net"].body(Xte), m["net"].body(anchors))
        ref = rel.pop("reference")
        rows, accs, sims = [], [], []
        for name, r in rel.items():
            score = float(torch.nn.functional.cosine_similarity(r, ref, dim=1).mean())
            acc = models[name]["accuracy"]
            cell, extra = {"model": name}, dict(models[name]["params"])
            rows.append(ResultRow(metric="accuracy", value=acc, direction="higher", cell=cell, extra=extra))
            rows.append(ResultRow(metric="similarity", value=score, direction="neutral", cell=cell, extra=extra))
            if acc >= self.min_accuracy:
                accs.append(acc)
                sims.append(score)
        rows.append(ResultRow(metric=PearsonR.name, value=PearsonR().compute(accs, sims),
                              direction=PearsonR.direction(),
                              extra={"models": len(accs), "reference_accuracy": models["reference"]["accuracy"]}))
        return rows

    def meaning(self, headline: dict | None, direction: str) -> str:
        """How to read the page: the correlation of similarity and accuracy."""
        return ("A Pearson r near 1 means that a model's similarity to the reference, measured without labels, "
                "predicts its accuracy.")

    def headline(self, results: pd.DataFrame) -> dict | None:
        """§4.2's finding: the Pearson r between a model's similarity to the reference and
        its accuracy, for the encoder · selector · similarity (a row of the page) where it
        is highest, with its interval; no reference (the paper compares r with none).
        None without a Pearson r."""
        rows = without_failures(results)[0]
        rows = rows[rows["metric"] == PearsonR.name]
        cells = {f"{encoder} · {selector} · {similarity} (similarity to the reference vs accuracy)": group
                 for (encoder, selector, similarity), group in rows.groupby(["encoder", "selector", "similarity"])}
        best = best_cell(cells, directions(results).get(PearsonR.name, "neutral"))
        return cell_headline(PearsonR.name, *best) if best else None

    def page(self, results: pd.DataFrame, page: Page) -> str:
        """Pearson r per encoder × selector × similarity, and the scatter plot."""
        df, note = without_failures(results)
        if df.empty:
            return "_no results yet_" + note
        table = summary_table(with_arrows(df[df["metric"] == PearsonR.name]), ["encoder", "selector", "similarity"],
                              "metric", bounds=(-1.0, 1.0))
        link = page.save(self._scatter(df), FIGURE, dpi=100)
        return ("Does a model's latent similarity to a reference model predict its accuracy? (Moschella et al. "
                "2023, §4.2.) Similarity: mean cosine between the model's and the reference's relative "
                "representations of the test samples. Pearson r over the sweep: mean over seeds, with the "
                "95 % Student-t interval over seeds, cut at r's range [−1, 1] (no per-sample data is stored for "
                "this score).\n\n"
                + table + note + f"\n\n![similarity vs accuracy]({link})\n")

    @staticmethod
    def _scatter(df: pd.DataFrame):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        points = df[df["metric"].isin(["accuracy", "similarity"]) & (df["status"] == "ok")]
        points = points.rename(columns={"similarity": "projection"})
        wide = points.pivot_table(index=["encoder", "seed", "selector", "projection", "model"], columns="metric",
                                  values="value").reset_index()
        fig, ax = plt.subplots(figsize=(5, 4))
        for (encoder, projection), group in wide.groupby(["encoder", "projection"]):
            r = PearsonR().compute(group["accuracy"].tolist(), group["similarity"].tolist())
            ax.scatter(group["similarity"], group["accuracy"], s=12, alpha=0.7,
                       label=f"{encoder} · {projection} (Pearson r = {r:.2f}, all seeds)")
        ax.set_xlabel("similarity to the reference (relative space)")
        ax.set_ylabel("test accuracy")
        ax.legend(fontsize=7)
        fig.tight_layout()
        return fig
