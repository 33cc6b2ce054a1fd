"""How PARAM divides a task's fit rows: P's training rows, the shared subset it mixes,
the rows set aside to score P (with the rule that decides whether any are), and the
bank coordinates and validation built on them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from relbench.api import AnchorContext, deferred_import, Similarity
from relbench_param.spaces import BankSpace
from relbench_param.validation import TransferValidation, class_codes, validation_split

torch = deferred_import("torch")


def validation_codes(ctx: AnchorContext, fraction: float) -> tuple[np.ndarray | None, str]:
    """The class codes of the fit rows that score P, or None, and the validation rule
    in words (why it is off, when it is); ``fraction``: the share set aside."""
    if not fraction:
        return None, "off (validation_fraction 0): loss test only"
    if len(ctx.banks) < 2:
        return None, "off (one visible bank, no pair to transfer between): loss test only"
    codes = class_codes(ctx.labels, len(ctx.ids))
    if codes is None:
        return None, "off (no class labels of two or more classes): loss test only"
    pairs = len(ctx.banks) * (len(ctx.banks) - 1)
    return codes, f"ridge transfer over {pairs} ordered pairs of {len(ctx.banks)} visible banks"


@dataclass
class FitRows:
    """Positions in the fit rows ``ids``: the ``pool`` P may learn from, the ``held``
    rows that score it, the shared ``subset`` and P's ``train`` rows (both drawn from
    the pool); ``codes`` are the fit rows' class codes when a validation stop runs
    (None otherwise) and ``rule`` says which stop runs and why."""

    ids: list[str]
    pool: list[int]
    held: list[int]
    subset: list[int]
    train: list[int]
    codes: np.ndarray | None
    rule: str

    @classmethod
    def draw(cls, ctx: AnchorContext, subset_size: int, max_samples: int, validation_fraction: float,
             gen: torch.Generator) -> FitRows:
        """Set ``validation_fraction`` of the fit rows aside (stratified, when the
        validation stop can run), then draw the subset (at most ``subset_size``) and the
        training rows (at most ``max_samples``, 0: all) from the rest, seeded by ``gen``."""
        ids = list(ctx.ids)
        codes, rule = validation_codes(ctx, validation_fraction)
        pool, held = validation_split(codes, validation_fraction, gen) if codes is not None else (
            list(range(len(ids))), [])
        if codes is not None and not held:
            codes, rule = None, "off (too few fit rows to set any aside): loss test only"
        subset = [pool[i] for i in torch.randperm(len(pool), generator=gen)[: subset_size].tolist()]
        train_perm = torch.randperm(len(pool), generator=gen)
        if max_samples:
            train_perm = train_perm[: max_samples].sort().values
        train = [pool[i] for i in train_perm.tolist()]
        return cls(ids, pool, held, subset, train, codes, rule)

    @property
    def train_ids(self) -> list[str]:
        """The ids of P's training rows."""
        return [self.ids[i] for i in self.train]

    @property
    def subset_ids(self) -> list[str]:
        """The ids of the shared subset's rows."""
        return [self.ids[i] for i in self.subset]

    def spaces(self, ctx: AnchorContext, similarity: Similarity) -> dict[str, BankSpace]:
        """Every visible bank's coordinates of these rows (:meth:`BankSpace.build`)."""
        train_ids, subset_ids = self.train_ids, self.subset_ids
        return {b: BankSpace.build(ctx.banks[b], train_ids, subset_ids, similarity, ctx.device,
                                   [self.ids[i] for i in self.held]) for b in sorted(ctx.banks)}

    def validation(self, device: torch.device, gen: torch.Generator, fit_rows: int,
                   ridge: float) -> TransferValidation | None:
        """The transfer score of P on the held rows, its classifiers fitted on at most
        ``fit_rows`` seeded training rows (None when no validation stop runs)."""
        if self.codes is None:
            return None
        fit_idx = torch.randperm(len(self.train), generator=gen)[: fit_rows].sort().values
        y = torch.as_tensor(self.codes, device=device)
        return TransferValidation(fit_idx.to(device), y[torch.tensor(self.train)[fit_idx].to(device)],
                                  y[torch.tensor(self.held, dtype=torch.long, device=device)],
                                  int(self.codes.max()) + 1, ridge)
