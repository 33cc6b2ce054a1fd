"""PARAM's validation stop: the fit rows split for it, the ridge-transfer score and the
checkpoint record (see :class:`relbench_param.selector.PARAMSelector`, "Budget and stop")."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from relbench.api import deferred_import

torch = deferred_import("torch")


def class_codes(labels: object, n: int) -> np.ndarray | None:
    """Labels as class codes ``0 … C−1`` (sorted class order), one per fit row, or None
    when they cannot score a classifier: absent, not one label per row, or one class."""
    if labels is None:
        return None
    values = np.asarray(labels)
    if values.size != n or (values.ndim > 1 and max(values.shape) != n):
        return None
    classes, codes = np.unique(values.reshape(-1), return_inverse=True)
    return codes.astype(np.int64) if len(classes) >= 2 else None


def validation_split(codes: np.ndarray, fraction: float, gen: torch.Generator) -> tuple[list[int], list[int]]:
    """Positions (ascending) of the P-training and the P-validation rows, stratified: in
    each class (ascending), a seeded permutation of its rows, the first
    ``round(fraction · class size)`` to validation."""
    held: list[int] = []
    for c in range(int(codes.max()) + 1):
        rows = np.flatnonzero(codes == c)
        order = torch.randperm(len(rows), generator=gen).numpy()
        held.extend(rows[order[: round(fraction * len(rows))]].tolist())
    chosen = set(held)
    return [i for i in range(len(codes)) if i not in chosen], sorted(held)


@dataclass
class RidgeClassifier:
    """Least squares on centred one-hot labels with a ridge, closed form: ``W =
    (F_cᵀF_c + λI)⁻¹ F_cᵀ(Y − Ȳ)``, ``λ = ridge ·`` the mean diagonal of ``F_cᵀF_c``
    (relative, so the same constant fits cosine's and WIP's scales). Solved in float64."""

    mean: torch.Tensor
    weights: torch.Tensor
    bias: torch.Tensor

    @classmethod
    def fit(cls, F: torch.Tensor, y: torch.Tensor, classes: int, ridge: float) -> RidgeClassifier:
        """Fit on features ``F`` (n × m) and class codes ``y``."""
        F = F.double()
        mean = F.mean(dim=0)
        Fc = F - mean
        Y = torch.nn.functional.one_hot(y, classes).double()
        bias = Y.mean(dim=0)
        gram = Fc.t() @ Fc
        lam = ridge * float(gram.diagonal().mean().clamp_min(1e-12))
        eye = torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device)
        return cls(mean, torch.linalg.solve(gram + lam * eye, Fc.t() @ (Y - bias)), bias)

    def accuracy(self, F: torch.Tensor, y: torch.Tensor) -> float:
        """Share of rows of ``F`` whose highest score is their class ``y``."""
        scores = (F.double() - self.mean) @ self.weights + self.bias
        return float((scores.argmax(dim=1) == y).double().mean())


def transfer_score(fit: dict[str, torch.Tensor], held: dict[str, torch.Tensor], y_fit: torch.Tensor,
                   y_held: torch.Tensor, classes: int, ridge: float) -> float:
    """Mean accuracy over ordered pairs (a, b), a ≠ b: a :class:`RidgeClassifier` fitted
    on bank a's features ``fit[a]`` of the fit rows, scored on bank b's features
    ``held[b]`` of the held rows. NaN when there is no pair."""
    heads = {a: RidgeClassifier.fit(F, y_fit, classes, ridge) for a, F in fit.items()}
    scores = [heads[a].accuracy(F, y_held) for a in heads for b, F in held.items() if b != a]
    return sum(scores) / len(scores) if scores else float("nan")


def _rank(score: float) -> float:
    """A score for comparisons: NaN ranks below every number."""
    return float("-inf") if math.isnan(score) else score


@dataclass
class Checkpoints:
    """The validation record of one training of P: the score of untrained P (epoch 0,
    recorded, never chosen), then of every evaluated epoch; keeps the best trained
    checkpoint (the earliest among equal scores; a NaN score ranks below any other, and
    the first trained checkpoint is kept until one beats it) and counts the evaluations
    since it."""

    patience: int
    curve: list[tuple[int, float]] = field(default_factory=list)
    best_epoch: int = 0
    best_steps: int = 0
    best_score: float = float("-inf")
    best_P: torch.Tensor | None = None
    stale: int = 0

    def record(self, epoch: int, steps: int, score: float, P: torch.Tensor) -> bool:
        """Record P's ``score`` after ``epoch`` epochs (``steps`` Adam steps); True once
        ``patience`` evaluations in a row have not beaten the best trained score."""
        self.curve.append((epoch, score))
        if epoch == 0:
            return False
        if self.best_P is None or _rank(score) > _rank(self.best_score):
            self.best_epoch, self.best_steps, self.best_score = epoch, steps, score
            self.best_P, self.stale = P.detach().clone(), 0
        else:
            self.stale += 1
        return self.stale >= self.patience

    @property
    def last_epoch(self) -> int:
        """The last epoch scored (0 when only untrained P was)."""
        return self.curve[-1][0] if self.curve else 0


@dataclass
class TransferValidation:
    """P's validation score during training: :func:`transfer_score` between the visible
    banks, the classifiers fitted on the relative features of ``fit_idx`` (positions
    among each space's training rows, labels ``y_fit``) and scored on those of the
    spaces' held rows (labels ``y_held``), at fp32 whatever the task's precision."""

    fit_idx: torch.Tensor
    y_fit: torch.Tensor
    y_held: torch.Tensor
    classes: int
    ridge: float

    def score(self, spaces: dict, weights: torch.Tensor) -> float:
        """The score of the mixture ``weights`` (softmax(P/τ)) over ``spaces``
        (:class:`~relbench_param.selector.BankSpace` by bank)."""
        with torch.no_grad(), torch.autocast(weights.device.type, enabled=False):
            anchors = {b: weights @ space.subset for b, space in spaces.items()}
            fit = {b: space.relative(self.fit_idx, anchors[b]) for b, space in spaces.items()}
            held = {b: space.held_relative(anchors[b]) for b, space in spaces.items()}
        return transfer_score(fit, held, self.y_fit, self.y_held, self.classes, self.ridge)
