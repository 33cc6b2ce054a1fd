"""The PARAM training losses, as pure functions of relative features.

PARAM (Svendsen, Jakobsen et al., §2.2 "Training losses") names four terms but gives no
formulas; each function below states the formula used and where it comes from. The
pairwise terms take the relative features ``ra``, ``rb`` (``n × m``) of the *same*
``n`` samples in two banks, w.r.t. the same ``m`` parallel anchors. Relative feature
scales differ between banks (WIP scores grow with the width), so each term first puts
the features on a common scale, as stated.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from relbench.api import deferred_import

torch = deferred_import("torch")


def standardise_columns(r: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Zero mean, unit variance per feature (column) over the batch."""
    return (r - r.mean(dim=0)) / (r.std(dim=0, unbiased=False) + eps)


def standardise_rows(r: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Zero mean, unit variance per sample (row) over the anchors."""
    return (r - r.mean(dim=1, keepdim=True)) / (r.std(dim=1, unbiased=False, keepdim=True) + eps)


def jaccard_profiles(r: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Anchor-wise activation profiles ``softmax(standardise_rows(r) / T)`` (one per sample)."""
    return torch.softmax(standardise_rows(r) / temperature, dim=1)


def soft_jaccard_profiles(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``1 − mean_x Σ_i min(p_i, q_i) / Σ_i max(p_i, q_i)`` for non-negative profiles."""
    return 1.0 - (torch.minimum(p, q).sum(dim=1) / torch.maximum(p, q).sum(dim=1)).mean()


def soft_jaccard(ra: torch.Tensor, rb: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Soft-Jaccard loss: ``1 − mean_x Σ_i min(p_i, q_i) / Σ_i max(p_i, q_i)``.

    ``p = softmax(standardise_rows(ra) / T)`` and likewise ``q`` are each sample's
    anchor-wise activation profiles; the ratio is the weighted (Ruzicka) Jaccard
    similarity of two non-negative vectors. PARAM: "encouraging similar anchor-wise
    activations across encoders"; the softmax profile and T are our choices.
    """
    return soft_jaccard_profiles(jaccard_profiles(ra, temperature), jaccard_profiles(rb, temperature))


def barlow_twins_standardised(za: torch.Tensor, zb: torch.Tensor, lam: float = 5e-3) -> torch.Tensor:
    """:func:`barlow_twins` on features already standardised per column."""
    n, m = za.shape
    C = za.t() @ zb / n
    diag = torch.diagonal(C)
    on = (1.0 - diag).pow(2).sum()
    off = C.pow(2).sum() - diag.pow(2).sum()
    return (on + lam * off) / m


def barlow_twins(ra: torch.Tensor, rb: torch.Tensor, lam: float = 5e-3) -> torch.Tensor:
    """Barlow Twins (Zbontar et al. 2021), divided by the number of features ``m``.

    ``C = standardise_columns(ra)ᵀ standardise_columns(rb) / n``;
    ``loss = [Σ_i (1 − C_ii)² + λ Σ_{i≠j} C_ij²] / m`` with λ = 5e-3 (their default). The
    division by m (ours) keeps the loss weight independent of the anchor count.
    """
    return barlow_twins_standardised(standardise_columns(ra), standardise_columns(rb), lam)


def hypersphere(r: torch.Tensor) -> torch.Tensor:
    """``normalise_rows(standardise_columns(r))``: relative features on the unit sphere."""
    return torch.nn.functional.normalize(standardise_columns(r), dim=1)


def alignment(fa: torch.Tensor, fb: torch.Tensor) -> torch.Tensor:
    """Wang & Isola (2020) alignment (α = 2): ``mean ‖f_a − f_b‖²``."""
    return (fa - fb).pow(2).sum(dim=1).mean()


def uniformity(f: torch.Tensor, t: float = 2.0) -> torch.Tensor:
    """Wang & Isola (2020) uniformity of unit rows: ``log mean_{i≠j} exp(−t ‖f_i − f_j‖²)``."""
    n = len(f)
    sq = (2.0 - 2.0 * f @ f.t()).clamp_min(0.0)
    diagonal = torch.eye(n, dtype=torch.bool, device=f.device)
    return torch.logsumexp((-t * sq).masked_fill(diagonal, float("-inf")).flatten(), dim=0) - math.log(n * (n - 1))


def align_uniform(ra: torch.Tensor, rb: torch.Tensor, t: float = 2.0) -> torch.Tensor:
    """Alignment + uniformity (Wang & Isola 2020) on the hypersphere.

    ``f = hypersphere(r)``; ``loss = alignment(f_a, f_b) + (uniformity(f_a) +
    uniformity(f_b)) / 2`` (α = 2, t = 2: their defaults). The column standardisation
    (ours) centres the relative features before projecting them on the sphere. Averaged
    over every pair of banks, the uniformity part equals the mean over banks.
    """
    fa, fb = hypersphere(ra), hypersphere(rb)
    return alignment(fa, fb) + 0.5 * (uniformity(fa, t) + uniformity(fb, t))


def anchor_cohesion(weights: torch.Tensor, rows: torch.Tensor, anchors: torch.Tensor | None = None) -> torch.Tensor:
    """Anchor cohesion: the mean spread of each anchor's mixture around the anchor, relative
    to the spread of the points it mixes.

    With anchors ``a_i = Σ_j w_ij z_j`` over the subset's rows ``z_j`` (rows of ``w``
    summing to one): ``mean_i Σ_j w_ij ‖z_j − a_i‖² / s``, computed as
    ``mean_i [Σ_j w_ij ‖z_j‖² − ‖a_i‖²] / s`` (``anchors``, when given, must equal
    ``weights @ rows``), where ``s = mean_j ‖z_j − z̄‖²`` is the subset's variance: the
    term is invariant to translating and rescaling the rows, 0 for single points and 1
    for uniform mixtures. Small when each anchor mixes nearby points (PARAM: "explained
    primarily by nearby points in the whitened space"); the weighted-variance formula
    is ours.
    """
    centre = rows.mean(dim=0)
    a = (weights @ rows if anchors is None else anchors) - centre
    sq = (rows - centre).pow(2).sum(dim=1)
    spread = weights @ sq - a.pow(2).sum(dim=1)
    return spread.mean() / sq.mean().clamp_min(1e-12)


def pairwise_mean(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                  features: Mapping[str, torch.Tensor]) -> torch.Tensor | None:
    """Mean of ``fn`` over every unordered pair of banks; ``None`` with fewer than two."""
    pairs = list(itertools.combinations(sorted(features), 2))
    if not pairs:
        return None
    return torch.stack([fn(features[a], features[b]) for a, b in pairs]).mean()
