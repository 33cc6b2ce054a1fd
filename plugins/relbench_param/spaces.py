"""The coordinates PARAM trains in: one bank's training, subset and held rows, and the
projection that turns them into relative features."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

from relbench.api import Bank, deferred_import, Similarity
from relbench_param.wip import WhitenedInnerProduct

torch = deferred_import("torch")


def inner_product(X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """``X Aᵀ``: WIP on rows that are already whitened."""
    return X @ A.t()


@dataclass
class BankSpace:
    """One bank as P's training sees it: its training rows, the shared subset's rows and
    the held rows of the validation stop, in the coordinates the projection works in,
    and the projection.

    WIP is an inner product after the affine whitening ``z = L⁻¹(x − μ)``; since the
    rows of ``S = softmax(P/τ)`` sum to one, the whitened anchors are ``S Z_sub``. Rows
    are whitened once and expressed in an orthonormal basis of the subset's span (at
    most ``min(k, d)`` coordinates), which leaves every inner product with an anchor
    unchanged, so a step costs the same at any embedding width. Any other similarity is
    used as it is, fitted on the bank's training rows: ``rel = project(X[idx], S X_sub)``.
    Anchor cohesion is measured on ``subset``: whitened rows for WIP, raw rows otherwise.
    """

    train: torch.Tensor
    subset: torch.Tensor
    project: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    held: torch.Tensor

    @classmethod
    def build(cls, bank: Bank, train_ids: list[str], subset_ids: list[str], similarity: Similarity,
              device: torch.device, held_ids: list[str] | None = None) -> BankSpace:
        """Fit a copy of ``similarity`` on the bank's training rows and prepare its
        coordinates, and those of the rows ``held_ids`` (none by default)."""
        X = bank.rows(train_ids).to(device)
        Xs = bank.rows(subset_ids).to(device)
        Xh = bank.rows(held_ids).to(device) if held_ids else X[:0]
        sim = copy.deepcopy(similarity)
        sim.fit(X)
        if isinstance(sim, WhitenedInnerProduct):
            Z, Zs, Zh = sim.whiten(X), sim.whiten(Xs), sim.whiten(Xh)
            basis = torch.linalg.qr(Zs.t()).Q
            return cls(Z @ basis, Zs @ basis, inner_product, Zh @ basis)
        return cls(X, Xs, sim.project, Xh)

    def relative(self, idx: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
        """Relative features of training rows ``idx`` w.r.t. ``anchors = S · subset``."""
        return self.project(self.train.index_select(0, idx), anchors)

    def held_relative(self, anchors: torch.Tensor) -> torch.Tensor:
        """Relative features of the held rows w.r.t. ``anchors``."""
        return self.project(self.held, anchors)
