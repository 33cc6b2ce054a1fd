"""Farthest-point sampling with the ``1 − |cos|`` distance (IRP's anchor pruning).

Maiorca et al. 2024, §3.3 "Anchor Pruning": greedy farthest-point sampling (Eldar et
al. 1997) with ``dcos(x, y) = 1 − |x·y| / (‖x‖‖y‖)`` (the absolute value rejects
quasi-colinear vectors of opposite direction), a seeded random start, and a stop when
the largest remaining minimum distance falls below δ. The loop runs over picks only:
each step updates the vector of minimum distances with one matrix-vector product.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from relbench.api import AnchorContext, Anchors, AnchorSelector, deferred_import, seeded_generator

torch = deferred_import("torch")


def greedy_fps(
    n: int,
    distance_to: Callable[[int], torch.Tensor],
    delta: float,
    seed: int,
    max_count: int | None = None,
) -> torch.Tensor:
    """Greedy farthest-point sampling over ``n`` candidates.

    ``distance_to(i)`` returns the distances (length ``n``) from candidate ``i`` to every
    candidate. Starts at a seeded random candidate, then repeatedly adds the candidate
    whose minimum distance to the picks is largest, until that distance is below
    ``delta`` or ``max_count`` candidates are picked. Returns the picked indices (in
    pick order) as a CPU ``long`` tensor.
    """
    if n == 0:
        return torch.zeros(0, dtype=torch.long)
    limit = n if max_count is None else min(int(max_count), n)
    start = int(torch.randint(n, (1,), generator=seeded_generator(seed)))
    picks = [start]
    min_d = distance_to(start).clone()
    min_d[start] = float("-inf")
    while len(picks) < limit:
        best = int(torch.argmax(min_d))
        if float(min_d[best]) < delta:
            break
        picks.append(best)
        min_d = torch.minimum(min_d, distance_to(best))
        min_d[best] = float("-inf")
    return torch.tensor(picks, dtype=torch.long)


def abs_cosine_distance(Xn: torch.Tensor, i: int) -> torch.Tensor:
    """``1 − |cos|`` from row ``i`` of the row-normalised ``Xn`` to every row."""
    return (1.0 - (Xn @ Xn[i]).abs()).clamp_min(0.0)


def fps_indices(X: torch.Tensor, delta: float, seed: int, max_count: int | None = None) -> torch.Tensor:
    """Farthest-point sampling of the rows of ``X`` with distance ``1 − |cos|``.

    The returned rows are pairwise at least ``delta`` apart; the same ``seed`` gives the
    same picks. ``delta = 0`` keeps every row (up to ``max_count``).
    """
    Xn = torch.nn.functional.normalize(X, dim=1)
    return greedy_fps(len(Xn), lambda i: abs_cosine_distance(Xn, i), delta, seed, max_count)


def multi_bank_fps(banks: Sequence[torch.Tensor], delta: float, seed: int, max_count: int | None = None) -> torch.Tensor:
    """FPS over parallel candidate rows of several banks, the distance being the mean of
    the banks' ``1 − |cos|`` distances (one bank gives :func:`fps_indices`)."""
    normed = [torch.nn.functional.normalize(X, dim=1) for X in banks]

    def distance_to(i: int) -> torch.Tensor:
        return torch.stack([abs_cosine_distance(Xn, i).to(normed[0].device) for Xn in normed]).mean(dim=0)

    return greedy_fps(len(normed[0]), distance_to, delta, seed, max_count)


@dataclass
class FPSSelector(AnchorSelector):
    """Farthest-point anchors: greedy FPS with the 1 − |cos| distance (IRP anchor pruning).

    The paper prunes the *decoder-side* anchors (the matrix it inverts). A selector
    returns one recipe for every bank and does not know the decoder, so it runs FPS on
    the mean ``1 − |cos|`` distance over the banks it may see (the held-out encoder of a
    zero-shot evaluation is never among them), or on one named bank. Candidates are
    centred by their mean before the cosine (IRP centres every space, §3.1). It stops at
    ``num_anchors`` picks or when the largest remaining minimum distance is below δ.

    Parameters:
        delta: stop threshold δ on the minimum distance. Default 0.0 (our choice: always
            return ``num_anchors`` anchors, classic FPS); the paper prunes with
            δ ∈ {0.65, 0.70, 0.75} (0.8 cross-modal).
        candidates: size of the seeded random candidate pool drawn from the training
            split; 0 = the whole split. Default 0 (our choice; the paper prunes a random
            set of k = d anchors).
        bank: encoder label whose bank FPS runs on; empty = the mean distance over every
            visible bank. Default "" (our choice).
        center: subtract the candidates' mean before the cosine. Default True (IRP §3.1).
    """

    name: ClassVar[str] = "fps"
    learns_from_banks: ClassVar[bool] = True
    prefix_nested: ClassVar[bool] = True  # greedy picks in order: a prefix is FPS stopped there
    delta: float = 0.0
    candidates: int = 0
    bank: str = ""
    center: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.delta <= 1.0:
            raise ValueError(f"fps: delta must lie in [0, 1] (1 − |cos| distances), got {self.delta}")
        if self.candidates < 0:
            raise ValueError(f"fps: candidates must be ≥ 0 (0 = the whole training split), got {self.candidates}")

    def select(self, ctx: AnchorContext) -> Anchors:
        """FPS picks among the (seeded) candidates, as sample ids."""
        leaked = set(ctx.banks) & set(ctx.excluded)
        if leaked:
            raise ValueError(f"fps: excluded encoders {sorted(leaked)} were passed among the banks")
        if not ctx.banks:
            raise ValueError("fps learns from the banks but none was given (all encoders excluded?)")
        if self.bank and self.bank not in ctx.banks:
            raise ValueError(f"fps: bank {self.bank!r} is not among the visible banks {sorted(ctx.banks)}")
        ids = list(ctx.ids)
        if self.candidates and self.candidates < len(ids):
            perm = torch.randperm(len(ids), generator=seeded_generator(ctx.seed))[: self.candidates]
            ids = [ids[i] for i in sorted(perm.tolist())]
        names = [self.bank] if self.bank else sorted(ctx.banks)
        rows = []
        for name in names:
            X = ctx.banks[name].rows(ids)
            rows.append(X - X.mean(dim=0, keepdim=True) if self.center else X)
        picks = multi_bank_fps(rows, self.delta, ctx.seed, ctx.num_anchors)
        return Anchors(ids=[ids[i] for i in picks.tolist()],
                       info={"fps_banks": names, "fps_candidates": len(ids)})
