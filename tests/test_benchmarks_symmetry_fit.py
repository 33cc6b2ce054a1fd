"""The symmetry-fit benchmark's other majorisation of group (c): it never raises the loss,
and with equal scales it is the orthogonal Procrustes fit."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from symmetry_fit import scale_side_step  # noqa: E402

from relbench_stitching import groups  # noqa: E402


def _anisotropic_pair(seed: int) -> groups.OrthogonalDiagonal:
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(60, 8, generator=g, dtype=torch.float64) * torch.logspace(0, 2, 8, dtype=torch.float64)
    Q, _ = torch.linalg.qr(torch.randn(8, 8, generator=g, dtype=torch.float64))
    Y = X @ Q * torch.linspace(0.2, 3.0, 8, dtype=torch.float64) + 0.3 * torch.randn(60, 8, generator=g,
                                                                                   dtype=torch.float64)
    return groups.OrthogonalDiagonal.of(X, Y)


def test_the_scale_side_step_never_raises_the_loss_and_keeps_q_orthogonal():
    for seed in range(5):
        problem = _anisotropic_pair(seed)
        Q = problem.start()
        D = problem.scales(Q)
        losses = [problem.loss(Q, D)]
        for _ in range(10):
            Q = scale_side_step(problem, Q, D)
            D = problem.scales(Q)
            losses.append(problem.loss(Q, D))
        assert all(b <= a * (1 + 1e-12) for a, b in zip(losses, losses[1:]))
        assert losses[-1] < losses[0]
        assert torch.allclose(Q.t() @ Q, torch.eye(8, dtype=torch.float64), atol=1e-10)


def test_with_equal_scales_the_step_is_the_procrustes_fit_of_the_cross_covariance():
    problem = _anisotropic_pair(0)
    Q = torch.linalg.qr(torch.randn(8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1)))[0]
    D = torch.full((8,), 1.7, dtype=torch.float64)
    assert torch.allclose(scale_side_step(problem, Q, D), groups.polar_factor(problem.C), atol=1e-10)
