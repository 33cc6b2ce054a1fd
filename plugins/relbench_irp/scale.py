"""Scale invariance of absolute heads under rescale injection (IRP §4.2, Figure 4)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tabulate import tabulate

from relbench.interfaces import Bank, ResultRow, TaskKind
from relbench.training import predict_logits, train_classifier
from relbench_irp.heads import ACTIVATIONS, mlp_head
from relbench_irp.quality import sample_ids
from relbench_irp.translate import TargetDecoder, centre_normalise


def accuracy(head: torch.nn.Module, X: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of rows of ``X`` the head classifies as ``y``."""
    return float((predict_logits(head, X).argmax(dim=1) == y).float().mean())


def labels_of(bank: Bank, ids: list[str]) -> torch.Tensor:
    """The labels of the given sample ids of a bank."""
    if bank.labels is None:
        raise ValueError(f"encoder {bank.encoder!r}: split {bank.split!r} has no labels")
    index = {sid: i for i, sid in enumerate(bank.ids)}
    return bank.labels[torch.tensor([index[s] for s in ids], device=bank.labels.device)]


@dataclass
class ScaleInvariance(TaskKind):
    """Scale invariance of absolute heads (Maiorca et al. 2024, §4.2): accuracy vs rescale factor α.

    For every seed, target encoder and activation, an MLP with two hidden layers and no
    normalisation is trained on the target's raw training embeddings. *Rescale
    injection*: the test embeddings are L2-normalised and multiplied by α, and the
    head's accuracy is measured at every α (rows ``accuracy``, extra ``alpha``,
    ``activation``, ``input: raw``, and ``mean_norm``, the target's mean training norm:
    the paper's red line); ``accuracy_unscaled`` is the accuracy on the untouched
    embeddings. With ``irp`` and anchor selectors in the grid, every other encoder's
    test embeddings are IRP-translated into the target and injected the same way
    (``input: irp``), showing why IRP may drop the scale. The page plots accuracy vs α.

    Parameters:
        alphas: rescale factors α (the norm given to every input). Default
            [0.1, 0.3, 1, 3, 10, 30, 100] (our log grid: embedding norms vary by encoder).
        activations: MLP activations among cos, relu, tanh. Default all three (paper).
        hidden: width of the two hidden layers. Default 256 (our choice; not given).
        epochs: training epochs. Default 10 (our choice).
        lr: Adam learning rate. Default 1e-3 (our choice).
        batch_size: training batch size. Default 64 (our choice).
        irp: also evaluate IRP-translated sources. Default True.
        omega: IRP subspaces ω. Default 8 (paper).
        delta: IRP pruning threshold δ. Default 0.7 (paper's middle value).
        max_samples: test samples per evaluation (seeded subset; 0 = all). Default 2000.
    """

    name: ClassVar[str] = "scale-invariance"
    alphas: list[float] = field(default_factory=lambda: [0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0])
    activations: list[str] = field(default_factory=lambda: list(ACTIVATIONS))
    hidden: int = 256
    epochs: int = 10
    lr: float = 1e-3
    batch_size: int = 64
    irp: bool = True
    omega: int = 8
    delta: float = 0.7
    max_samples: int = 2000

    def __post_init__(self) -> None:
        if not self.alphas or any(a <= 0 for a in self.alphas):
            raise ValueError(f"scale-invariance: alphas must be a non-empty list of positive numbers, got {self.alphas}")
        bad = [a for a in self.activations if a not in ACTIVATIONS]
        if bad or not self.activations:
            raise ValueError(f"scale-invariance: activations must be among {list(ACTIVATIONS)}, got {self.activations}")
        if self.hidden <= 0 or self.epochs <= 0 or self.lr <= 0 or self.batch_size < 2:
            raise ValueError("scale-invariance: hidden, epochs and lr must be positive and batch_size ≥ 2")
        if self.omega < 1 or not 0.0 <= self.delta <= 1.0 or self.max_samples < 0:
            raise ValueError("scale-invariance: omega ≥ 1, delta in [0, 1] and max_samples ≥ 0 are required")

    def run(self, run) -> None:
        """One unit per (seed, target, activation)."""
        task = run.task
        train, test = run.banks("train"), run.banks("test")
        labels = [e.label for e in task.encoders]
        num_classes = len(run.dataset().class_names)
        todo = [(s, t, a) for s in task.seeds for t in labels for a in self.activations]
        for seed, target, act in run.progress(todo, desc="scale invariance", total=len(todo)):
            key = {"seed": seed, "stitcher": f"mlp-{act}", "target": target}
            if run.is_done(key):
                continue
            with run.unit(key) as rows:
                bank = train[target]
                if bank.labels is None:
                    raise ValueError(f"encoder {target!r}: the training split has no labels")
                torch.manual_seed(seed)
                head = mlp_head(bank.dim, self.hidden, num_classes, act).to(bank.X.device)
                train_classifier(head, bank.X, bank.labels, epochs=self.epochs, lr=self.lr,
                                 batch_size=self.batch_size, seed=seed)
                ids = sample_ids(test[target].ids, self.max_samples, seed)
                y = labels_of(test[target], ids)
                base = {"activation": act, "mean_norm": float(bank.X.norm(dim=1).mean())}
                rows += self._curve(head, test[target].rows(ids), y, target, target, "-", {**base, "input": "raw"})
                if self.irp:
                    for sel in task.selectors:
                        anchors = run.anchors(seed, sel)
                        dec = TargetDecoder.build(run.realise(anchors, target), omega=self.omega, delta=self.delta,
                                                  seed=seed)
                        for source in labels:
                            if source == target:
                                continue
                            centre, maps = dec.maps(run.realise(anchors, source))
                            Y = dec.decode(centre_normalise(test[source].rows(ids), centre),
                                           torch.stack(maps).mean(dim=0))
                            rows += self._curve(head, Y, y, source, target, sel.label, {**base, "input": "irp"})

    def _curve(self, head, X, y, source, target, selector, extra) -> list[ResultRow]:
        unit = F.normalize(X, dim=1)
        rows = [ResultRow(metric="accuracy_unscaled", value=accuracy(head, X, y), source=source, target=target,
                          selector=selector, extra=dict(extra))]
        for alpha in self.alphas:
            rows.append(ResultRow(metric="accuracy", value=accuracy(head, unit * alpha, y), source=source,
                                  target=target, selector=selector, extra={**extra, "alpha": alpha}))
        return rows

    def leaderboard(self, df: pd.DataFrame, page) -> str:
        """Accuracy-vs-α curves per target encoder, and a table, from the rows alone."""
        d = df[(df["status"] == "ok") & df["metric"].isin(["accuracy", "accuracy_unscaled"])].copy()
        if d.empty:
            return "No results yet.\n"
        for k in ("alpha", "activation", "input", "mean_norm"):
            d[k] = d["extra"].map(lambda e, k=k: e.get(k) if isinstance(e, dict) else None)
        return _figure(d, page) + "\n" + _table(d)


def _figure(d: pd.DataFrame, page) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = d[d["metric"] == "accuracy"]
    targets = list(pd.unique(curves["target"]))
    fig, axes = plt.subplots(1, len(targets), figsize=(4.2 * len(targets), 3.4), squeeze=False)
    colours = dict(zip(ACTIVATIONS, ("tab:blue", "tab:orange", "tab:green")))
    for ax, target in zip(axes[0], targets):
        g = curves[curves["target"] == target]
        for (act, inp), h in g.groupby(["activation", "input"], sort=True):
            per_seed = h.groupby(["alpha", "seed"])["value"].mean().groupby("alpha")
            m, s = per_seed.mean(), per_seed.std().fillna(0.0)
            style = "-" if inp == "raw" else "--"
            ax.plot(m.index, m.values, style, color=colours.get(act), label=f"{act} ({inp})")
            ax.fill_between(m.index, (m - s).values, (m + s).values, color=colours.get(act), alpha=0.15)
        ax.axvline(float(g["mean_norm"].mean()), color="red", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("rescale factor α")
        ax.set_ylabel("accuracy")
        ax.set_title(f"head on {target}", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path, link = page.figure("scale_invariance.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return (f"![accuracy vs rescale factor]({link})\n\nSolid: the head's own test embeddings; dashed: other "
            f"encoders IRP-translated into its space; red line: the target's mean embedding norm.\n")


def _table(d: pd.DataFrame) -> str:
    from relbench.leaderboard import fmt

    body, alphas = [], sorted(d.loc[d["metric"] == "accuracy", "alpha"].dropna().unique())
    for (target, act, inp), g in d.groupby(["target", "activation", "input"], sort=False):
        def stat(sub: pd.DataFrame) -> str:
            per_seed = sub.groupby("seed")["value"].mean()
            return fmt(per_seed.mean(), per_seed.std() if len(per_seed) > 1 else np.nan)

        unscaled = stat(g[g["metric"] == "accuracy_unscaled"])
        cells = [stat(g[(g["metric"] == "accuracy") & (g["alpha"] == a)]) for a in alphas]
        body.append([target, act, inp, f"{g['mean_norm'].mean():.2f}", unscaled] + cells)
    headers = ["head on", "activation", "input", "mean norm", "unscaled"] + [f"α={a:g}" for a in alphas]
    return "Accuracy ↑ (mean ± std over seeds; irp rows average the translated sources):\n\n" + \
        tabulate(body, headers=headers, tablefmt="pipe") + "\n"
