"""Relative projections of the relative-representations family: cosine (optionally
centred), angular, euclidean and L1, and their concatenation."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from relbench.api import deferred_import, Similarity

torch = deferred_import("torch")


def cosine_matrix(X: torch.Tensor, A: torch.Tensor, center: bool = False) -> torch.Tensor:
    """``n × k`` cosine similarities; ``center`` first subtracts the anchor mean from
    both ``X`` and ``A`` (the reference code's centring)."""
    if center:
        mu = A.mean(dim=0, keepdim=True)
        X, A = X - mu, A - mu
    return torch.nn.functional.normalize(X, dim=1) @ torch.nn.functional.normalize(A, dim=1).T


@dataclass
class Cosine(Similarity):
    """Cosine relative projection (Moschella et al. 2023): ``rel = X̂ Âᵀ``.

    Invariant to orthogonal maps and isotropic rescaling of the bank; with ``center``
    also to translations.

    Parameters
    ----------
    center : bool, default False
        Subtract the anchor mean from the embeddings and the anchors before the cosine
        (reference code option; off in the paper's equations).
    """

    name: ClassVar[str] = "cosine"
    #: with ``center`` translations too (not with every parameter value, so not declared)
    invariances: ClassVar[frozenset[str]] = frozenset({"orthogonal", "scale", "permutation"})
    center: bool = False

    def project(self, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """``n × k`` cosine of each row of ``X`` with each anchor."""
        return cosine_matrix(X, A, self.center)


@dataclass
class Angular(Similarity):
    """Angular relative projection: ``1 − arccos(cos)/π`` in ``[0, 1]`` (1 = same
    direction), the angle-based member of the "product of invariances" family
    (Cannistraci et al. 2024). Same invariances as cosine.

    Parameters
    ----------
    center : bool, default False
        Subtract the anchor mean first, as for cosine (our choice, for symmetry).
    eps : float, default 1e-6
        The cosine is clamped to ``[-1+eps, 1-eps]`` so that the gradient of arccos stays
        finite (our choice).
    """

    name: ClassVar[str] = "angular"
    #: with ``center`` translations too (not with every parameter value, so not declared)
    invariances: ClassVar[frozenset[str]] = frozenset({"orthogonal", "scale", "permutation"})
    center: bool = False
    eps: float = 1e-6

    def __post_init__(self) -> None:
        if not 0 < self.eps < 0.1:
            raise ValueError(f"eps must be in (0, 0.1), got {self.eps}")

    def project(self, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """``n × k`` normalised angular similarity."""
        cos = cosine_matrix(X, A, self.center).clamp(-1 + self.eps, 1 - self.eps)
        return 1.0 - torch.arccos(cos) / math.pi


@dataclass
class Euclidean(Similarity):
    """Euclidean relative projection: ``rel_ij = −‖x_i − a_j‖₂`` (negated so that larger
    means closer, like cosine; Cannistraci et al. 2024). Invariant to orthogonal maps
    and translations, not to rescaling.

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "euclidean"
    invariances: ClassVar[frozenset[str]] = frozenset({"orthogonal", "translation", "permutation"})

    def project(self, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """``n × k`` negative Euclidean distances."""
        return -torch.cdist(X, A, p=2.0)


#: elements of the block of differences :func:`l1_distances` sums at a time (4 MiB of
#: float32: it stays in cache, and each block is large next to an operation's overhead)
L1_BLOCK = 1 << 20
#: anchors per block of :func:`l1_distances`
L1_ANCHORS = 64


def l1_distances(X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """``n × k`` L1 distances ``‖x_i − a_j‖₁``: ``torch.cdist(X, A, p=1)`` up to float
    rounding, and about 3× faster on the CPU on one thread (``benchmarks/l1_projection.py``),
    which is also faster than ``cdist`` on two. It runs on one thread whatever the
    process's setting: its blocks are too small for OpenMP, and a second thread on a
    core another process uses made it several times slower than ``cdist``.

    ``cdist`` sums each pair's differences in one dependent chain; this sums blocks of
    at most :data:`L1_BLOCK` differences (``rows × anchors × d``, never ``n × k × d``)
    with vectorised reductions. While autograd records, off the CPU, and for inputs that
    are not two floating-point matrices of one dtype, it is ``cdist`` (whose backward
    keeps memory bounded, and which raises for what it does not accept).
    """
    if (torch.is_grad_enabled() and (X.requires_grad or A.requires_grad)) or not _blockwise(X, A):
        return torch.cdist(X, A, p=1.0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # blocks this small lose to OpenMP's barriers, badly on a shared core
    try:
        return _l1_blocks(X, A)
    finally:
        torch.set_num_threads(threads)


def _l1_blocks(X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """The block loop of :func:`l1_distances` (on the calling thread)."""
    (n, d), k = X.shape, len(A)
    anchors = max(1, min(k, L1_ANCHORS, L1_BLOCK // max(d, 1)))
    rows = max(1, min(n, L1_BLOCK // (anchors * max(d, 1))))
    out = X.new_empty(n, k)
    diff = X.new_empty(rows, anchors, d)
    for j in range(0, k, anchors):
        a = A[j:j + anchors]
        for i in range(0, n, rows):
            x = X[i:i + rows]
            block = diff[:len(x), :len(a)]
            torch.sub(x[:, None], a[None], out=block)
            torch.sum(block.abs_(), dim=2, out=out[i:i + rows, j:j + anchors])
    return out


def _blockwise(X: torch.Tensor, A: torch.Tensor) -> bool:
    """Whether :func:`l1_distances` sums blocks for these inputs: two CPU matrices of one
    floating-point dtype and width."""
    return (X.dim() == A.dim() == 2 and X.shape[1] == A.shape[1] and X.dtype == A.dtype
            and X.is_floating_point() and X.device.type == A.device.type == "cpu")


@dataclass
class L1(Similarity):
    """L1 relative projection: ``rel_ij = −‖x_i − a_j‖₁`` (negated, as euclidean;
    Cannistraci et al. 2024). Invariant to translations, permutations and sign flips of
    the dimensions, not to rotations or rescaling.

    Parameters
    ----------
    (none)
    """

    name: ClassVar[str] = "l1"
    invariances: ClassVar[frozenset[str]] = frozenset({"translation", "permutation"})
    version: ClassVar[str] = "2"  # blockwise sums: cdist's values up to float rounding

    def project(self, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """``n × k`` negative L1 distances."""
        return -l1_distances(X, A)


#: the projections :class:`Concat` can combine
PARTS: dict[str, type[Similarity]] = {"cosine": Cosine, "euclidean": Euclidean, "l1": L1, "angular": Angular}


def _standardise_rows(R: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    mu = R.mean(dim=1, keepdim=True)
    sd = R.std(dim=1, keepdim=True, unbiased=False)
    return (R - mu) / (sd + eps)


@dataclass
class Concat(Similarity):
    """Concatenation of several relative projections ("product of invariances",
    Cannistraci et al. 2024): ``n × (k · len(parts))``; each part keeps its own
    invariances, so a decoder can use whichever is stable across spaces.

    Parameters
    ----------
    parts : list[str], default ["cosine", "euclidean", "l1", "angular"]
        The projections to concatenate, in order (any of cosine, euclidean, l1, angular,
        each with default parameters).
    standardise : bool, default True
        Standardise each part of each row (zero mean, unit variance over its ``k``
        entries, no learned parameters) before concatenating, so that distances (which
        scale with the bank) do not swamp cosines; the paper normalises each space before
        aggregating it (our parameter-free reading). Note that this makes the distance
        parts invariant to isotropic rescaling too.
    """

    name: ClassVar[str] = "concat"
    #: what every choice of parts keeps (each part keeps its own besides)
    invariances: ClassVar[frozenset[str]] = frozenset({"permutation"})
    version: ClassVar[str] = "2"  # its l1 part sums blocks (L1 version 2)
    parts: list[str] = field(default_factory=lambda: ["cosine", "euclidean", "l1", "angular"])
    standardise: bool = True

    def __post_init__(self) -> None:
        if not self.parts:
            raise ValueError("parts must name at least one projection")
        unknown = [p for p in self.parts if p not in PARTS]
        if unknown:
            raise ValueError(f"unknown parts {unknown}; choose among {sorted(PARTS)}")
        if len(set(self.parts)) != len(self.parts):
            raise ValueError(f"parts must not repeat, got {self.parts}")

    def project(self, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """The parts' projections side by side."""
        outs = [PARTS[p]().project(X, A) for p in self.parts]
        if self.standardise:
            outs = [_standardise_rows(o) for o in outs]
        return torch.cat(outs, dim=1)
