"""Lower bounds on the FLOPs of the matrix decompositions that
``torch.utils.flop_counter.FlopCounterMode`` does not count (it counts matrix products
and convolutions only), so that a floor over units made mostly of SVDs and solves (the
symmetry kind's fits, Procrustes, IRP's pseudo-inverses, PARAM's whitening) counts their
work too.

Each formula is the leading term of the cheapest standard algorithm's first phase, which
every LAPACK driver for that decomposition performs (Golub & Van Loan, *Matrix
Computations*, 4th ed., §5.1–5.4, §8.3; Trefethen & Bau, Lectures 10, 20, 31), so each
count stays a lower bound on the work, as the matrix-product counts are:

* SVD (and ``svdvals``) of an m × n matrix, p = max(m, n), q = min(m, n): Householder
  bidiagonalisation, 4pq² − 4q³/3; the pseudo-inverse adds its product V Σ⁺ Uᵀ, 2mnq;
* symmetric eigendecomposition of n × n: tridiagonalisation, 4n³/3;
* QR of m × n (m ≥ n; else of the transpose's shape), and least squares through it:
  Householder QR, 2pq² − 2q³/3;
* solve with an n × n matrix and k right-hand sides: LU, 2n³/3, and two triangular
  solves, 2n²k; inverse: 2n³; Cholesky: n³/3; one triangular solve: n²k.

Batched inputs multiply by their batch size. :data:`DECOMPOSITIONS` is the
``custom_mapping`` of :class:`FlopCounterMode` (:func:`counter`).
"""

from __future__ import annotations

import math

import torch
from torch.utils.flop_counter import FlopCounterMode

aten = torch.ops.aten


def _batch(shape) -> int:
    """The number of matrices of a (batched) matrix shape."""
    return math.prod(shape[:-2])


def _sides(shape) -> tuple[int, int]:
    """``(p, q)``: the larger and the smaller side of a matrix shape."""
    m, n = shape[-2:]
    return max(m, n), min(m, n)


def svd_flops(a_shape, *args, **kwargs) -> int:
    """Householder bidiagonalisation of ``a_shape``: 4pq² − 4q³/3 per matrix."""
    p, q = _sides(a_shape)
    return _batch(a_shape) * (4 * p * q * q - 4 * q ** 3 // 3)


def pinv_flops(a_shape, *args, **kwargs) -> int:
    """The SVD's bidiagonalisation and the product V Σ⁺ Uᵀ (2mnq) per matrix."""
    m, n = a_shape[-2:]
    return svd_flops(a_shape) + _batch(a_shape) * 2 * m * n * min(m, n)


def eigh_flops(a_shape, *args, **kwargs) -> int:
    """Tridiagonalisation of a symmetric n × n matrix: 4n³/3 per matrix."""
    n = a_shape[-1]
    return _batch(a_shape) * (4 * n ** 3 // 3)


def qr_flops(a_shape, *args, **kwargs) -> int:
    """Householder QR of ``a_shape``: 2pq² − 2q³/3 per matrix (least squares too)."""
    p, q = _sides(a_shape)
    return _batch(a_shape) * (2 * p * q * q - 2 * q ** 3 // 3)


def solve_flops(a_shape, b_shape, *args, **kwargs) -> int:
    """LU of the n × n matrix (2n³/3) and two triangular solves (2n²k) per system."""
    n = a_shape[-1]
    k = 1 if len(b_shape) == len(a_shape) - 1 else b_shape[-1]
    return _batch(a_shape) * (2 * n ** 3 // 3 + 2 * n * n * k)


def inverse_flops(a_shape, *args, **kwargs) -> int:
    """Inverse of an n × n matrix: 2n³ per matrix."""
    return _batch(a_shape) * 2 * a_shape[-1] ** 3


def cholesky_flops(a_shape, *args, **kwargs) -> int:
    """Cholesky factor of an n × n matrix: n³/3 per matrix."""
    return _batch(a_shape) * (a_shape[-1] ** 3 // 3)


def triangular_flops(a_shape, b_shape, *args, **kwargs) -> int:
    """One triangular solve with k right-hand sides: n²k per system."""
    n = a_shape[-1]
    k = b_shape[-1] if kwargs.get("left", True) else b_shape[-2]
    return max(_batch(a_shape), _batch(b_shape)) * n * n * k


#: the decompositions' aten operators (as torch.linalg dispatches them) and their lower bounds
DECOMPOSITIONS = {
    aten._linalg_svd: svd_flops,
    aten.linalg_pinv: pinv_flops,
    aten._linalg_eigh: eigh_flops,
    aten.linalg_qr: qr_flops,
    aten.linalg_lstsq: qr_flops,
    aten._linalg_solve_ex: solve_flops,
    aten.linalg_inv_ex: inverse_flops,
    aten.linalg_cholesky_ex: cholesky_flops,
    aten.linalg_solve_triangular: triangular_flops,
}


def counter() -> FlopCounterMode:
    """A silent :class:`FlopCounterMode` that counts matrix products, convolutions and the
    :data:`DECOMPOSITIONS`."""
    return FlopCounterMode(display=False, custom_mapping=DECOMPOSITIONS)
