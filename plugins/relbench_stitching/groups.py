"""Least-squares maps between two spaces within nested symmetry groups, fitted on parallel anchors.

Every map sends source rows ``X`` (``n × d_s``) to target coordinates (``n × d_t``). The
groups, from the relative representation's assumption to the most general:

* ``scaled-orthogonal`` (a): ``x ↦ s·(x − μ_s) Q + μ_t``: an isometry up to scale, what
  the cosine relative representation is invariant to;
* ``permutation-diagonal`` (b): ``x ↦ (x − μ_s) P D + μ_t``, a permutation ``P`` and a
  diagonal ``D`` of signed scales (a signed permutation with a positive scale per
  dimension): the intertwiner group of ReLU-like activations (García-Castellanos et al.);
* ``orthogonal-diagonal`` (c): ``x ↦ (x − μ_s) Q D + μ_t``: an orthogonal map with a free
  scale per target dimension (no closed form: majorisation steps from the best of three
  starts, up to a cap, the step kept the one with the lowest residual on validation rows,
  see :func:`orthogonal_diagonal_fit`);
* ``affine`` (d): ``x ↦ [x, 1] W``, the least-squares affine map.

Every group contains the translations: the means ``μ`` are the anchors' (for a fixed
linear part they are the least-squares translation, so centring both spaces and fitting
the linear part on the centred anchors is the group's exact optimum). (a) ⊂ (c) and (b) ⊂
(c) ⊂ (d); (a) and (b) contain neither the other. On the anchors, the fits are ordered
as the groups are: (c) starts from the best of (a), (b) and the orthogonal–diagonal
factors of the least-squares linear map and only descends, and (d) is the global
least-squares optimum.

Different widths: the narrower space is zero-padded to ``w = max(d_s, d_t)``. (a) takes
the orthogonal factor of the padded cross-covariance (Maiorca et al. 2023's padding), keeps
its ``d_s × d_t`` block and fits the scale by least squares on the target's own
columns; (b) assigns ``min(d_s, d_t)`` dimensions (an unmatched target dimension gets its
mean, as a padded zero column would give it); (c) fits ``Q`` in ``w × w`` and the scales of
the target's columns (a padded target column gets scale 0).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from relbench.api import deferred_import
from relbench_irp.maps import affine_fit

torch = deferred_import("torch")

#: the groups, smallest first (the order the page reads them in)
GROUPS = ("scaled-orthogonal", "permutation-diagonal", "orthogonal-diagonal", "affine")


@dataclass
class CentredLinear:
    """A fitted map ``x ↦ (x − shift) M + offset``, callable on source rows."""

    shift: torch.Tensor
    M: torch.Tensor  # d_s × d_t
    offset: torch.Tensor
    #: how the map was fitted, for display (group (c): its steps and validation residual)
    report: dict[str, float] = field(default_factory=dict)

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        """Source rows ``X`` (``n × d_s``) in target coordinates (``n × d_t``)."""
        return (X - self.shift) @ self.M + self.offset


def relative_residual(Y_hat: torch.Tensor, Y: torch.Tensor) -> float:
    """``‖Ŷ − Y‖_F / ‖Y‖_F`` (NaN when ``Y`` is zero)."""
    Y = Y.to(Y_hat.dtype)
    norm = float(torch.linalg.matrix_norm(Y))
    return float(torch.linalg.matrix_norm(Y_hat - Y)) / norm if norm > 0 else float("nan")


def _centred(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean of the rows of ``A`` and ``A`` centred on it."""
    mean = A.mean(dim=0)
    return mean, A - mean


def _padded(A: torch.Tensor, width: int) -> torch.Tensor:
    """``A`` with zero columns appended up to ``width``."""
    return torch.nn.functional.pad(A, (0, width - A.shape[1]))


def polar_factor(M: torch.Tensor) -> torch.Tensor:
    """The orthogonal factor ``U Vᵀ`` of a square ``M = U Σ Vᵀ``: the orthogonal matrix
    nearest to ``M``, and the maximiser of ``tr(Qᵀ M)`` over orthogonal ``Q``."""
    U, _, Vh = torch.linalg.svd(M)
    return U @ Vh


def _least_squares_scale(Z: torch.Tensor, Y: torch.Tensor) -> float:
    """The ``s`` minimising ``‖s Z − Y‖_F`` (0 when ``Z`` is zero)."""
    energy = float((Z * Z).sum())
    return float((Z * Y).sum()) / energy if energy > 0 else 0.0


def scaled_orthogonal_fit(X: torch.Tensor, Y: torch.Tensor) -> CentredLinear:
    """Group (a): scaled Procrustes. ``Q`` is the orthogonal factor of the padded
    ``X̂ᵀŶ`` (centred anchors ``X̂``, ``Ŷ``), cut to its ``d_s × d_t`` block, and
    ``s = ⟨X̂Q, Ŷ⟩ / ‖X̂Q‖²``: with equal widths (or a narrower source) this is
    ``tr Σ / ‖X̂‖²``, the closed-form scale of the SVD ``X̂ᵀŶ = U Σ Vᵀ``."""
    (mx, Xc), (my, Yc) = _centred(X), _centred(Y)
    width = max(Xc.shape[1], Yc.shape[1])
    Q = polar_factor(_padded(Xc, width).t() @ _padded(Yc, width))[: Xc.shape[1], : Yc.shape[1]]
    return CentredLinear(mx, _least_squares_scale(Xc @ Q, Yc) * Q, my)


def explained_energy(Xc: torch.Tensor, Yc: torch.Tensor) -> torch.Tensor:
    """The ``d_s × d_t`` reduction of the squared residual of target dimension ``j`` when
    source dimension ``i`` is matched to it with its least-squares scale,
    ``(x_iᵀ y_j)² / ‖x_i‖²`` (centred ``Xc``, ``Yc``; 0 for a constant source dimension)."""
    energy = (Xc * Xc).sum(dim=0)
    gain = (Xc.t() @ Yc) ** 2
    return torch.where(energy[:, None] > 0, gain / torch.where(energy > 0, energy, 1.0)[:, None], 0.0)


def matched_dimensions(Xc: torch.Tensor, Yc: torch.Tensor) -> tuple[list[int], list[int]]:
    """The least-squares assignment of ``min(d_s, d_t)`` source dimensions to distinct
    target dimensions: the one maximising the summed :func:`explained_energy`
    (``scipy.optimize.linear_sum_assignment``), since a matched target dimension's
    residual is its energy less that term and an unmatched one keeps its energy: source
    ``rows[i]`` → target ``cols[i]``."""
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(explained_energy(Xc, Yc).cpu().numpy(), maximize=True)
    return rows.tolist(), cols.tolist()


def permutation_diagonal_fit(X: torch.Tensor, Y: torch.Tensor) -> CentredLinear:
    """Group (b): a signed permutation with a scale per dimension. Dimensions are matched
    by :func:`matched_dimensions`; each matched target dimension gets the least-squares
    (signed) scale of its source dimension, an unmatched one its anchor mean."""
    (mx, Xc), (my, Yc) = _centred(X), _centred(Y)
    rows, cols = matched_dimensions(Xc, Yc)
    M = Xc.new_zeros((Xc.shape[1], Yc.shape[1]))
    for i, j in zip(rows, cols):
        M[i, j] = _least_squares_scale(Xc[:, i], Yc[:, j])
    return CentredLinear(mx, M, my)


def _full_permutation(rows: list[int], cols: list[int], width: int) -> torch.Tensor:
    """The ``width × width`` permutation matrix sending ``rows[i]`` to ``cols[i]``, the
    unmatched rows to the unmatched columns in order."""
    free_rows = [i for i in range(width) if i not in set(rows)]
    free_cols = [j for j in range(width) if j not in set(cols)]
    P = torch.zeros((width, width), dtype=torch.float64)
    P[rows + free_rows, cols + free_cols] = 1.0
    return P


@dataclass
class OrthogonalDiagonal:
    """The padded problem of group (c): minimise ``‖X Q D − Y‖²`` over orthogonal ``Q``
    and diagonal ``D`` (``X``, ``Y``: centred, padded anchors), through the Gram
    matrices ``A = XᵀX`` and ``C = XᵀY``; the anchors' means (unpadded) turn a ``Q`` back
    into a map of source rows (:meth:`map`). :meth:`of` builds it from raw anchors."""

    X: torch.Tensor
    Y: torch.Tensor
    source_mean: torch.Tensor
    target_mean: torch.Tensor

    def __post_init__(self) -> None:
        self.A, self.C = self.X.t() @ self.X, self.X.t() @ self.Y

    @classmethod
    def of(cls, X: torch.Tensor, Y: torch.Tensor) -> OrthogonalDiagonal:
        """The problem for parallel anchors ``X`` (source) and ``Y`` (target): both
        centred on their means and zero-padded to the wider width."""
        (mx, Xc), (my, Yc) = _centred(X), _centred(Y)
        width = max(Xc.shape[1], Yc.shape[1])
        return cls(_padded(Xc, width), _padded(Yc, width), mx, my)

    def start(self) -> torch.Tensor:
        """Whichever of three orthogonal ``Q`` (each with its best ``D``) fits the anchors
        best: that of (a), the permutation of (b), and the orthogonal factor of the
        least-squares linear map (exact when the anchors come from an orthogonal–diagonal map)."""
        ds, dt = len(self.source_mean), len(self.target_mean)
        rows, cols = matched_dimensions(self.X[:, :ds], self.Y[:, :dt])
        starts = [polar_factor(torch.linalg.pinv(self.X) @ self.Y), polar_factor(self.C),
                  _full_permutation(rows, cols, self.X.shape[1]).to(self.X)]
        return min(starts, key=lambda start: self.loss(start, self.scales(start)))

    def map(self, Q: torch.Tensor, D: torch.Tensor | None = None) -> CentredLinear:
        """The map ``x ↦ (x − μ_s) Q D + μ_t`` of ``Q`` with its best ``D`` (given, or
        computed), cut to the source's and target's widths."""
        ds, dt = len(self.source_mean), len(self.target_mean)
        D = self.scales(Q) if D is None else D
        return CentredLinear(self.source_mean, (Q * D)[:ds, :dt], self.target_mean)

    def scales(self, Q: torch.Tensor) -> torch.Tensor:
        """The best ``D`` for ``Q``: column ``j`` of ``XQ`` regressed on column ``j`` of ``Y``."""
        fit = (Q * self.C).sum(dim=0)
        energy = (Q * (self.A @ Q)).sum(dim=0)
        return torch.where(energy > 0, fit / torch.where(energy > 0, energy, torch.ones_like(energy)),
                           torch.zeros_like(energy))

    def loss(self, Q: torch.Tensor, D: torch.Tensor) -> float:
        """``‖X Q D − Y‖²``."""
        return float(((self.X @ Q) * D - self.Y).square().sum())

    def step(self, Q: torch.Tensor, D: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A majorisation step: a ``Q`` no worse than ``Q`` for ``D``, and its exact ``D``.

        The loss is ``tr(QᵀAQB) − 2 tr(QᵀCD) + const`` with ``B = D²``. For orthogonal
        ``Q``, ``tr(QᵀAQ) = tr A`` is constant, so ``tr(QᵀAQB) = tr(QᵀAQ(B − βI)) + β tr A``
        with ``β`` the largest ``d_j²``; the first term is concave in ``Q`` and lies below
        its tangent at ``Q``, and the bound is minimised by the orthogonal factor of
        ``C D − A Q (B − βI)``, so the loss never rises. The bound is tight when the
        scales are equal (the step is then the Procrustes fit of ``C``). The other
        majorisation, which shifts ``A`` by its largest eigenvalue instead, is tight only
        for isotropic anchors and descends far more slowly on real embeddings
        (``benchmarks/symmetry_fit.py`` compares them)."""
        B = D * D
        Q = polar_factor(self.C * D - (self.A @ Q) * (B - B.max()))
        return Q, self.scales(Q)


def orthogonal_diagonal_fit(X: torch.Tensor, Y: torch.Tensor, iterations: int,
                            validation: tuple[torch.Tensor, torch.Tensor] | None = None,
                            patience: int = 5) -> CentredLinear:
    """Group (c): an orthogonal map with a free scale per target dimension, ``Q D``.

    Starts from whichever of three orthogonal ``Q`` fits the anchors best
    (:meth:`OrthogonalDiagonal.start`), then takes majorisation steps
    (:meth:`OrthogonalDiagonal.step`, each with the exact ``D``), so the anchors' loss
    never rises: the fit is at least as good as (a)'s and (b)'s on the anchors. The steps
    do not reach the group's least-squares fit in any fixed number (on real embeddings the
    anchor residual still falls after hundreds), and closer fits to the anchors can
    generalise worse, so the number of steps is chosen on ``validation`` rows (source,
    target: other samples than the anchors, never the test rows): the map kept is the one
    of the step with the lowest validation residual, stopping ``patience`` steps after
    it or after ``iterations`` steps. Without ``validation``, all ``iterations`` steps
    are taken and the last map kept.

    The map's ``report``: ``steps`` taken, ``chosen_step`` and, with validation rows,
    ``validation_residual``."""
    problem = OrthogonalDiagonal.of(X, Y)
    Q = problem.start()
    D = problem.scales(Q)

    def residual(Q: torch.Tensor, D: torch.Tensor) -> float:
        return relative_residual(problem.map(Q, D)(validation[0]), validation[1])

    best = (residual(Q, D), 0, Q, D) if validation is not None else None
    taken = 0
    while taken < iterations and (best is None or taken - best[1] < patience):
        Q, D = problem.step(Q, D)
        taken += 1
        if best is not None and (score := residual(Q, D)) < best[0]:
            best = (score, taken, Q, D)
    if best is None:
        return dataclasses.replace(problem.map(Q, D), report={"steps": float(taken), "chosen_step": float(taken)})
    score, chosen, Q, D = best
    return dataclasses.replace(problem.map(Q, D), report={"steps": float(taken), "chosen_step": float(chosen),
                                                          "validation_residual": score})


def fit_groups(X: torch.Tensor, Y: torch.Tensor, iterations: int,
               validation: tuple[torch.Tensor, torch.Tensor] | None = None,
               patience: int = 5) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """Every group's map fitted on the parallel anchors ``X`` (source) and ``Y`` (target),
    by :data:`GROUPS` name; group (d) is :func:`relbench_irp.maps.affine_fit` (minimum-norm
    least squares through the pseudo-inverse), group (c) :func:`orthogonal_diagonal_fit`
    (``iterations``, ``validation`` and ``patience`` are its). The maps take rows of the
    anchors' dtype (fit in float64 for exact recovery)."""
    return {"scaled-orthogonal": scaled_orthogonal_fit(X, Y), "permutation-diagonal": permutation_diagonal_fit(X, Y),
            "orthogonal-diagonal": orthogonal_diagonal_fit(X, Y, iterations, validation, patience),
            "affine": affine_fit(X, Y)}
