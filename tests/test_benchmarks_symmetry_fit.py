"""Group (c)'s two majorisations: the kind's step (on the scales' side) and version 1's
(an eigenvalue shift, kept in the symmetry-fit benchmark for comparison). Neither raises
the loss and both keep ``Q`` orthogonal; the kind's is the orthogonal Procrustes fit when
the scales are equal."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from symmetry_fit import eigen_shift_step  # noqa: E402

from relbench_stitching import groups  # noqa: E402


def _anisotropic_pair(seed: int) -> groups.OrthogonalDiagonal:
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(60, 8, generator=g, dtype=torch.float64) * torch.logspace(0, 2, 8, dtype=torch.float64)
    Q, _ = torch.linalg.qr(torch.randn(8, 8, generator=g, dtype=torch.float64))
    Y = X @ Q * torch.linspace(0.2, 3.0, 8, dtype=torch.float64) + 0.3 * torch.randn(60, 8, generator=g,
                                                                                   dtype=torch.float64)
    return groups.OrthogonalDiagonal.of(X, Y)


def _losses(problem, step, steps=10):
    Q = problem.start()
    D = problem.scales(Q)
    losses = [problem.loss(Q, D)]
    for _ in range(steps):
        Q = step(Q, D)
        D = problem.scales(Q)
        losses.append(problem.loss(Q, D))
    return Q, losses


def test_both_steps_never_raise_the_loss_and_keep_q_orthogonal():
    for seed in range(5):
        problem = _anisotropic_pair(seed)
        for step in (lambda Q, D: problem.step(Q, D)[0], lambda Q, D: eigen_shift_step(problem, Q, D)):
            Q, losses = _losses(problem, step)
            assert all(b <= a * (1 + 1e-12) for a, b in zip(losses, losses[1:]))
            assert torch.allclose(Q.t() @ Q, torch.eye(8, dtype=torch.float64), atol=1e-10)
        assert _losses(problem, lambda Q, D: problem.step(Q, D)[0])[1][-1] < losses[0]


def test_with_equal_scales_the_step_is_the_procrustes_fit_of_the_cross_covariance():
    problem = _anisotropic_pair(0)
    Q = torch.linalg.qr(torch.randn(8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1)))[0]
    D = torch.full((8,), 1.7, dtype=torch.float64)
    assert torch.allclose(problem.step(Q, D)[0], groups.polar_factor(problem.C), atol=1e-10)
