"""Scale invariance of absolute heads under rescale injection (IRP §4.2, Figure 4)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from relbench.api import deferred_import
from relbench.api import (USES, Axis, Bank, Page, ResultRow, Task, TaskKind, TaskRunAPI, UnitKey, arrow, directions,
                          fmt, fmt_interval, lower_is_better, predict_logits, seed_interval, table, train_classifier)
from relbench_irp.heads import ACTIVATIONS, mlp_head
from relbench_irp.quality import sample_ids
from relbench_irp.translate import TargetDecoder, centre_normalise

pd = deferred_import("pandas")
torch = deferred_import("torch")


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

    Columns: ``activation`` and ``target`` (the unit: one per seed, target encoder and
    activation of the head), ``input`` (``raw``: the target's own test embeddings;
    ``irp``: another encoder's, IRP-translated into the target), ``source`` (the
    encoder whose test embeddings are fed), ``selector`` (the anchors of an ``irp``
    input) and ``alpha`` (the rescale factor).

    In every unit an MLP with two hidden layers and no normalisation is trained on the
    target's raw training embeddings. *Rescale injection*: the test embeddings are
    L2-normalised and multiplied by α, and the head's accuracy is measured at every α
    (rows ``accuracy`` ↑); ``accuracy_unscaled`` ↑ is the accuracy on the untouched
    embeddings, and ``mean_norm`` (neutral, no cell) the target's mean training norm:
    the paper's red line. With ``irp`` and anchor selectors in the grid, every other
    encoder's test embeddings are IRP-translated into the target and injected the same
    way, showing why IRP may drop the scale. The page plots accuracy vs α.

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
    columns: ClassVar[tuple[str, ...]] = ("activation", "target", "input", "source", "selector", "alpha")
    paired_on: ClassVar[tuple[str, ...]] = ("target", "input", "source")  # claims pair their sides on these
    axes: ClassVar[dict[str, Axis]] = {"selectors": Axis("selector")}
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
            raise ValueError(f"scale-invariance: alphas must be a non-empty list of positive numbers, got "
                             f"{self.alphas}")
        bad = [a for a in self.activations if a not in ACTIVATIONS]
        if bad or not self.activations:
            raise ValueError(f"scale-invariance: activations must be among {list(ACTIVATIONS)}, got {self.activations}")
        if self.hidden <= 0 or self.epochs <= 0 or self.lr <= 0 or self.batch_size < 2:
            raise ValueError("scale-invariance: hidden, epochs and lr must be positive and batch_size ≥ 2")
        if self.omega < 1 or not 0.0 <= self.delta <= 1.0 or self.max_samples < 0:
            raise ValueError("scale-invariance: omega ≥ 1, delta in [0, 1] and max_samples ≥ 0 are required")

    def plan(self, task: Task) -> list[UnitKey]:
        """One unit per (seed, target, activation): raw and IRP inputs at every α. A unit
        also uses the grid's selectors (its IRP rows name theirs), so changing them
        recomputes it."""
        uses = {"selectors": list(task.grid["selectors"]) if self.irp else []}
        return [{"seed": seed, "activation": act, "target": target, USES: uses}
                for seed in task.seeds for target in task.encoders for act in self.activations]

    def run(self, run: TaskRunAPI) -> None:
        """Compute the planned units not yet stored, each on its seed's draw (heads fit
        on the fit part, curves on the test draw)."""
        task = run.task
        todo = [key for key in self.plan(task) if not run.is_done(key)]
        if not todo:
            return
        labels = [e.label for e in task.encoders]
        num_classes = len(run.dataset().class_names)
        for key in run.progress(todo, desc="scale invariance", total=len(todo)):
            seed, act, target = key["seed"], key["activation"], key["target"].label
            train, test = run.banks("train", seed), run.banks("test", seed)
            with run.unit(key) as rows:
                bank = train[target]
                if bank.labels is None:
                    raise ValueError(f"encoder {target!r}: the training split has no labels")
                torch.manual_seed(seed)
                head = mlp_head(bank.dim, self.hidden, num_classes, act).to(bank.X.device)
                train_classifier(head, bank.X, bank.labels, epochs=self.epochs, lr=self.lr,
                                 batch_size=self.batch_size, seed=seed, evaluation=task.protocol.evaluation)
                ids = sample_ids(test[target].ids, self.max_samples, seed)
                y = labels_of(test[target], ids)
                rows.append(ResultRow(metric="mean_norm", value=float(bank.X.norm(dim=1).mean()), direction="neutral"))
                rows += self._curve(head, test[target].rows(ids), y, {"input": "raw", "source": target})
                if self.irp:
                    for sel in task.grid["selectors"]:
                        anchors = run.anchors(seed, sel)
                        dec = TargetDecoder.build(run.realise(anchors, target), omega=self.omega, delta=self.delta,
                                                  seed=seed)
                        for source in labels:
                            if source == target:
                                continue
                            centre, maps = dec.maps(run.realise(anchors, source))
                            Y = dec.decode(centre_normalise(test[source].rows(ids), centre),
                                           torch.stack(maps).mean(dim=0))
                            rows += self._curve(head, Y, y, {"input": "irp", "source": source, "selector": sel.label})

    def _curve(self, head, X, y, cell: dict) -> list[ResultRow]:
        """``accuracy_unscaled`` on ``X`` and ``accuracy`` at every α, in ``cell``."""
        unit = torch.nn.functional.normalize(X, dim=1)
        rows = [ResultRow(metric="accuracy_unscaled", value=accuracy(head, X, y), direction="higher", cell=cell)]
        rows += [ResultRow(metric="accuracy", value=accuracy(head, unit * alpha, y), direction="higher",
                           cell={**cell, "alpha": alpha}) for alpha in self.alphas]
        return rows

    def headline(self, results: pd.DataFrame) -> dict | None:
        """The head activation whose accuracy on IRP-translated inputs (on the raw inputs
        when the task translates none) is best at the largest α, with that accuracy as the
        page's table computes a cell (mean within a seed, then over seeds with its 95 %
        interval), here over every target encoder's row of that activation and input; the
        reference is the same rows' ``unscaled`` accuracy, so the gap is what rescaling
        to that α costs; ``input`` names the inputs it was picked among. None without
        accuracy rows."""
        ok = results[results["status"] == "ok"]
        acc = ok[ok["metric"] == "accuracy"]
        if acc.empty:
            return None
        fed = "irp" if (acc["input"] == "irp").any() else "raw"
        alpha = acc["alpha"].max()
        at = acc[(acc["input"] == fed) & (acc["alpha"] == alpha)]
        stats = {act: _seed_stat(g) for act, g in at.groupby("activation", sort=False)}
        sign = -1 if lower_is_better(directions(acc)["accuracy"]) else 1
        act = max(stats, key=lambda a: sign * stats[a][0])
        mean, std, low, high = stats[act]
        unscaled = ok[(ok["metric"] == "accuracy_unscaled") & (ok["input"] == fed) & (ok["activation"] == act)]
        return {"metric": "accuracy", "best": f"{act} · {fed} · α = {alpha:g}", "score": float(mean),
                "std": float(std), "interval": (float(low), float(high)), "reference": float(_seed_stat(unscaled)[0]),
                "input": fed}

    def meaning(self, headline: dict | None, direction: str) -> str:
        """The headline in the protocol's terms: accuracy at the largest α beside the same
        inputs unscaled; without a headline, how to read the curves."""
        if headline is None or not np.isfinite(headline["reference"]):
            return ("A curve that stays flat as α changes means the head ignores the scale of its input; one that "
                    "falls means rescaling the embeddings breaks it.")
        fed = "IRP-translated" if headline.get("input") == "irp" else "raw"
        return (f"At the largest α, the best head on {fed} inputs ({headline['best']}: activation · input · α; "
                f"mean over target encoders; the table below has every input) classifies the rescaled inputs with "
                f"accuracy {fmt(headline['score'])}, against "
                f"{fmt(headline['reference'])} for the same inputs unscaled, the reference: the closer the two, the "
                f"less the head depends on the scale of its input.")

    def page(self, results: pd.DataFrame, page: Page) -> str:
        """Accuracy-vs-α curves per target encoder, and a table, from the rows alone."""
        ok = results[results["status"] == "ok"]
        d = ok[ok["metric"].isin(["accuracy", "accuracy_unscaled"])]
        if d.empty:
            return "No results yet.\n"
        norms = ok[ok["metric"] == "mean_norm"].groupby("target")["value"].mean()
        return _figure(d, norms, page) + "\n" + _table(d, norms, directions(d)["accuracy"])


def _seed_stat(rows: pd.DataFrame) -> tuple[float, float, float, float]:
    """Mean of ``value`` within each seed, then the mean and std over seeds and the 95 %
    interval over seeds (NaNs without rows)."""
    per_seed = rows.groupby("seed")["value"].mean()
    return (per_seed.mean(), per_seed.std(), *seed_interval(per_seed))


def _figure(d: pd.DataFrame, norms: pd.Series, page: Page) -> str:
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
            m = per_seed.mean()
            bounds = np.array([seed_interval(v) for _, v in per_seed])
            style = "-" if inp == "raw" else "--"
            ax.plot(m.index, m.values, style, color=colours.get(act), label=f"{act} ({inp})")
            ax.fill_between(m.index, bounds[:, 0], bounds[:, 1], color=colours.get(act), alpha=0.15)
        ax.axvline(float(norms.get(target, np.nan)), color="red", lw=1, label="mean embedding norm")
        ax.set_xscale("log")
        ax.set_xlabel("rescale factor α")
        ax.set_ylabel("accuracy")
        ax.set_title(f"head on {target}", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    link = page.save(fig, "scale_invariance.png")
    return (f"![accuracy vs rescale factor]({link})\n\nSolid: the head's own test embeddings; dashed: other "
            f"encoders IRP-translated into its space; shaded: 95 % t-interval over seeds; red line: the target's mean "
            f"embedding norm.\n")


def _table(d: pd.DataFrame, norms: pd.Series, direction: str) -> str:
    body, alphas = [], sorted(d.loc[d["metric"] == "accuracy", "alpha"].dropna().unique())
    for (target, act, inp), g in d.groupby(["target", "activation", "input"], sort=False):
        def stat(sub: pd.DataFrame) -> str:
            mean, _, low, high = _seed_stat(sub)
            return f"{fmt(mean)} {fmt_interval(low, high)}" if len(sub) else "n/a"

        unscaled = stat(g[g["metric"] == "accuracy_unscaled"])
        cells = [stat(g[(g["metric"] == "accuracy") & (g["alpha"] == a)]) for a in alphas]
        body.append([target, act, inp, f"{norms.get(target, np.nan):.2f}", unscaled] + cells)
    headers = ["head on", "activation", "input", "mean norm", "unscaled"] + [f"α={a:g}" for a in alphas]
    return f"{arrow('Accuracy', direction)} (mean over seeds [95 % t-interval over seeds]; irp rows average the " \
        f"translated sources; a table too wide for a screen continues below, its rows named again):\n\n" + \
        table(body, headers=headers, keep=3) + "\n"
