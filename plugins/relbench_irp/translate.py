"""Inverse relative projection (IRP, Maiorca et al. 2024): the pure mathematics.

Source → target translation, §4 "Experimental setting":

1. centre each space by its anchor mean and L2-normalise rows (samples and anchors);
2. relative encoding with the source anchors, ``rel = X̂_s Â_sᵀ``;
3. relative decoding with the target anchors, ``Ŷ = rel · pinv(Â_tᵀ)`` (eq. 2);
4. rescale each row to the target's mean norm and add back the target's centre.

Stability (§3.3): the target anchors are pruned with farthest-point sampling to δ,
ω times with different seeds ("anchor subspaces" S_i); the ω decodings are averaged
(eq. 5). Since every step before the rescale is linear, the whole decoding is one
``d_s × d_t`` map ``M = (1/ω) Σ_i Â_s[S_i]ᵀ pinv(Â_t[S_i]ᵀ)`` applied to ``X̂_s``.

Anchor completion (§3.3): encode the identity (the source's canonical basis) and decode
it: ``B = I · M = M``; the canonical basis becomes the source anchors and the rows of B
the target anchors. The paper says "decode with the anchor set A_y"; the identity
encoded with a pruned subset can only be decoded with the matching target subset, so we
decode with the same ω-subspace ensemble. The paper describes the result as "the
estimation of the rotation and reflection matrix that transforms X into Y", so we
decode with the orthogonal (polar) factor of B, ``Ŷ = X̂_s · U Vᵀ`` from ``B = U Σ Vᵀ``
(:func:`orthogonal_factor`). Decoding literally through the new anchors,
``X̂_s · pinv(B̂ᵀ)``, agrees with it only when B is orthogonal. For a target that is an
isometric copy ``X R`` of the source and subspaces of fewer than d anchors,
``B = P̄ R`` with ``P̄ = (1/ω) Σ_i P_i`` (``P_i`` the projector on subspace i's span):
the pseudo-inverse route decodes with ``P̄⁺ R`` (up to B's row norms) and amplifies the directions few
subspaces cover (small eigenvalues of P̄), while ``U Vᵀ = R`` exactly once the subspaces
together span the space.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from relbench.api import deferred_import, Diagnostic
from relbench_irp.fps import fps_indices

torch = deferred_import("torch")

PinvKind = Literal["plain", "ridge"]


def centre_normalise(X: torch.Tensor, centre: torch.Tensor) -> torch.Tensor:
    """Step 1: subtract ``centre`` and L2-normalise each row."""
    return torch.nn.functional.normalize(X - centre, dim=1)


def centred_anchors(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Step 1 on a space's anchors: their mean and the anchors centred on it and
    L2-normalised (a source's part of the decoding maps, the same for every target)."""
    centre = A.mean(dim=0)
    return centre, centre_normalise(A, centre)


def pseudo_inverse(A: torch.Tensor, kind: PinvKind = "plain", ridge_alpha: float = 0.01) -> tuple[torch.Tensor, float]:
    """``pinv(Aᵀ)`` (``k × d`` for ``A`` of ``k × d``) and the condition number of ``A``.

    From ``A = U Σ Vᵀ``: ``pinv(Aᵀ) = U f(Σ) Vᵀ`` with ``f(σ) = 1/σ`` above numpy's
    default cut-off ``max(k, d)·eps·σ_max`` (``plain``) or ``f(σ) = σ / (σ² + α)``
    (``ridge``, Tikhonov). The condition number is ``σ_max / σ_min`` over the
    ``min(k, d)`` singular values of the matrix being inverted, and ``inf`` when the
    matrix is numerically singular: ``σ_min`` at or below that same cut-off (numpy's
    ``matrix_rank`` tolerance; below it, ``plain`` drops the direction).
    """
    U, S, Vh = torch.linalg.svd(A, full_matrices=False)
    smax = S.max() if len(S) else S.new_tensor(0.0)
    cutoff = max(A.shape) * torch.finfo(A.dtype).eps * smax
    if kind == "plain":
        inv = torch.where(S > cutoff, 1.0 / S.clamp_min(torch.finfo(A.dtype).tiny), torch.zeros_like(S))
    else:
        inv = S / (S * S + ridge_alpha)
    smin = S.min() if len(S) else S.new_tensor(0.0)
    cond = float(smax / smin) if float(smin) > float(cutoff) else float("inf")
    return (U * inv) @ Vh, cond


def orthogonal_factor(M: torch.Tensor) -> torch.Tensor:
    """The orthogonal (polar) factor ``U Vᵀ`` of ``M = U Σ Vᵀ`` (``d_s × d_t``): the
    rotation/reflection ``M`` estimates, the closest matrix with orthonormal rows or
    columns to ``M`` in Frobenius norm.

    Directions with a singular value at or below numpy's rank cut-off
    (``max(d_s, d_t)·eps·σ_max``, eps of ``M``'s dtype) are ones no anchor determined:
    they are dropped (sent to zero) rather than completed with an arbitrary rotation,
    as the Procrustes map does outside its anchors' span.
    """
    U, S, Vh = torch.linalg.svd(M, full_matrices=False)
    if not len(S):
        return torch.zeros_like(M)
    keep = S > max(M.shape) * torch.finfo(M.dtype).eps * S.max()
    return U[:, keep] @ Vh[keep]


def condition_summary(conds: list[float]) -> tuple[float, int]:
    """Mean condition number over the non-singular matrices (``nan`` when all are
    singular) and the number of singular ones (non-finite condition number), so that a
    singular anchor set is counted rather than averaged into ``inf`` or dropped."""
    finite = [c for c in conds if math.isfinite(c)]
    return (sum(finite) / len(finite) if finite else float("nan")), len(conds) - len(finite)


@dataclass
class TargetDecoder:
    """The decoder side of IRP: a target's anchors, pruned subspaces and inverses.

    Built once per target (:meth:`build`); :meth:`maps` then gives, for any source's
    parallel anchors, one ``d_s × d_t`` decoding map per subspace.
    """

    centre: torch.Tensor  # (d_t,) target anchor mean
    anchors: torch.Tensor  # (k, d_t) centred, normalised target anchors
    subspaces: list[torch.Tensor]  # ω index tensors into the k anchors
    inverses: list[torch.Tensor]  # ω × (|S_i|, d_t) pinv(Â_t[S_i]ᵀ)
    conds: list[float]  # condition number of each Â_t[S_i]
    scale: float  # target mean norm used in step 4

    @classmethod
    def build(
        cls,
        At: torch.Tensor,
        *,
        omega: int = 8,
        delta: float = 0.7,
        seed: int = 0,
        pinv: PinvKind = "plain",
        ridge_alpha: float = 0.01,
        scale: float | None = None,
    ) -> TargetDecoder:
        """Prune the target anchors ω times (seeds ``seed·1000 + i``) and invert each subset.

        ``scale`` is the norm decoded rows are given (step 4); default: the mean norm of
        the centred target anchors.
        """
        centre = At.mean(dim=0)
        Ahat = centre_normalise(At, centre)
        subspaces, inverses, conds = [], [], []
        for i in range(omega):
            idx = fps_indices(Ahat, delta, seed * 1000 + i).to(At.device)
            W, cond = pseudo_inverse(Ahat.index_select(0, idx), pinv, ridge_alpha)
            subspaces.append(idx)
            inverses.append(W)
            conds.append(cond)
        if scale is None:
            scale = float((At - centre).norm(dim=1).mean())
        return cls(centre, Ahat, subspaces, inverses, conds, scale)

    def maps(self, As: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Source centre and one decoding map ``Â_s[S_i]ᵀ pinv(Â_t[S_i]ᵀ)`` per subspace."""
        centre, Ahat = centred_anchors(As)
        return centre, self.subspace_maps(Ahat.to(self.anchors.dtype))

    def subspace_maps(self, Ahat: torch.Tensor) -> list[torch.Tensor]:
        """One decoding map ``Â_s[S_i]ᵀ pinv(Â_t[S_i]ᵀ)`` per subspace, for the source's
        centred, normalised anchors ``Â_s`` (:func:`centred_anchors`, in this decoder's
        dtype)."""
        if len(Ahat) != len(self.anchors):
            raise ValueError(f"IRP needs parallel anchors: the source has {len(Ahat)}, the target {len(self.anchors)}")
        return [Ahat.index_select(0, idx).t() @ W for idx, W in zip(self.subspaces, self.inverses)]

    def decode(self, Xs_hat: torch.Tensor, M: torch.Tensor, completion: bool = False) -> torch.Tensor:
        """Steps 3–4 for centred, normalised source rows and an (averaged) map ``M``;
        with ``completion``, decode with the orthogonal factor of ``M`` instead (anchor
        completion, see the module docstring). Each row is decoded on its own."""
        if completion:
            M = orthogonal_factor(M)
        Y = Xs_hat @ M
        return torch.nn.functional.normalize(Y, dim=1) * self.scale + self.centre

    def anchors_kept(self) -> list[int]:
        """Anchors left in each subspace after pruning."""
        return [len(s) for s in self.subspaces]

    def diagnostics(self, omega: int | None = None) -> dict[str, Diagnostic]:
        """Per-cell diagnostics of the first ``omega`` subspaces (default all):
        ``condition_number`` (mean over the non-singular pruned anchor matrices; lower
        is better; left out when every one is singular, which the next count says, since
        there is then no condition number to average), ``irp_singular_anchor_sets`` (how
        many were singular; lower is better) and ``anchors_kept`` (mean anchors left after
        pruning; neutral, it describes the pruning)."""
        cond, singular = condition_summary(self.conds[:omega])
        kept = self.anchors_kept()[:omega]
        condition = {"condition_number": Diagnostic(cond, "lower")} if math.isfinite(cond) else {}
        return {**condition, "irp_singular_anchor_sets": Diagnostic(float(singular), "lower"),
                "anchors_kept": Diagnostic(sum(kept) / len(kept), "neutral")}


def irp_translate(
    Xs: torch.Tensor,
    As: torch.Tensor,
    At: torch.Tensor,
    *,
    omega: int = 8,
    delta: float = 0.7,
    seed: int = 0,
    pinv: PinvKind = "plain",
    ridge_alpha: float = 0.01,
    completion: bool = False,
    scale: float | None = None,
) -> tuple[torch.Tensor, dict[str, Diagnostic]]:
    """Translate source rows ``Xs`` into the target space given parallel anchors.

    Returns the translated rows (``n × d_t``, target coordinates) and the diagnostics
    of :meth:`TargetDecoder.diagnostics`. See the module docstring for the steps.
    """
    dec = TargetDecoder.build(At, omega=omega, delta=delta, seed=seed, pinv=pinv,
                              ridge_alpha=ridge_alpha, scale=scale)
    centre, maps = dec.maps(As)
    M = torch.stack(maps).mean(dim=0)
    Y = dec.decode(centre_normalise(Xs, centre), M, completion)
    return Y, dec.diagnostics()
