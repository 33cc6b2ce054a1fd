"""PARAM's whitened inner product and losses (formulas checked against direct computations)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from relbench.interfaces import RegularizerBatch
from relbench_param.losses import align_uniform, anchor_cohesion, barlow_twins, soft_jaccard, uniformity
from relbench_param.regularizers import AlignUniformRegularizer, BarlowTwinsRegularizer, SoftJaccardRegularizer
from relbench_param.wip import WhitenedInnerProduct, shrinkage_covariance


def data(n, d, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=torch.float64) @ torch.randn(d, d, generator=g, dtype=torch.float64) + 3


def test_shrinkage_covariance_matches_numpy():
    X = data(50, 6, 0)
    lam, eps = 0.3, 1e-4
    mu, sigma = shrinkage_covariance(X, lam, eps)
    cov = np.cov(X.numpy(), rowvar=False)
    expected = (1 - lam) * cov + lam * np.trace(cov) / 6 * np.eye(6) + eps * np.eye(6)
    assert np.allclose(sigma.numpy(), expected) and np.allclose(mu.numpy(), X.numpy().mean(0))
    wip = WhitenedInnerProduct(lam=lam, eps=eps)
    wip.fit(X)
    A = data(5, 6, 1)
    direct = (X.numpy() - mu.numpy()) @ np.linalg.inv(expected) @ (A.numpy() - mu.numpy()).T
    assert np.allclose(wip.project(X, A).numpy(), direct, rtol=1e-8, atol=1e-8)


def test_wip_is_invariant_to_an_invertible_affine_map_without_shrinkage():
    X, A = data(200, 8, 0), data(10, 8, 1)
    M, b = data(8, 8, 2), torch.arange(8, dtype=torch.float64)
    plain, mapped = WhitenedInnerProduct(lam=0.0, eps=0.0), WhitenedInnerProduct(lam=0.0, eps=0.0)
    plain.fit(X)
    mapped.fit(X @ M + b)
    assert torch.allclose(plain.project(X, A), mapped.project(X @ M + b, A @ M + b), rtol=1e-6, atol=1e-6)
    # with shrinkage the invariance is to rotations and isotropic scaling only
    shrunk = WhitenedInnerProduct(lam=0.5)
    assert not torch.allclose(plain.project(X, A), (shrunk.fit(X), shrunk.project(X, A))[1], atol=1e-3)


def test_wip_is_differentiable_and_validates():
    wip = WhitenedInnerProduct()
    X = data(40, 5, 0).float()
    wip.fit(X)
    A = X[:4].clone().requires_grad_(True)
    wip.project(X, A).sum().backward()
    assert A.grad is not None and torch.isfinite(A.grad).all()
    with pytest.raises(ValueError, match="lam"):
        WhitenedInnerProduct(lam=1.5)
    with pytest.raises(RuntimeError, match="fit"):
        WhitenedInnerProduct().project(X, X)


def feats(seed, n=64, m=20):
    return torch.randn(n, m, generator=torch.Generator().manual_seed(seed))


def test_pairwise_losses_are_minimal_for_identical_features():
    r, other = feats(0), feats(1)
    assert float(soft_jaccard(r, r)) == pytest.approx(0.0, abs=1e-6)
    assert float(soft_jaccard(r, other)) > 0.1
    # Barlow Twins: the diagonal term vanishes for identical features
    assert float(barlow_twins(r, r, lam=0.0)) == pytest.approx(0.0, abs=1e-6)
    assert float(barlow_twins(r, other)) > float(barlow_twins(r, r))
    # positive scaling and shifts of a feature column change nothing (standardised)
    assert float(barlow_twins(r, 3 * r + 1, lam=0.0)) == pytest.approx(0.0, abs=1e-6)
    f = F.normalize(r - r.mean(0), dim=1)
    assert float(align_uniform(r, r)) < float(align_uniform(r, other))
    # uniformity via the Gram matrix equals the pairwise-distance definition
    sq = torch.cdist(f, f).pow(2)
    off = ~torch.eye(len(f), dtype=torch.bool)
    assert float(uniformity(f)) == pytest.approx(float(torch.log(torch.exp(-2 * sq[off]).mean())), abs=1e-5)


def test_anchor_cohesion_is_the_weighted_spread_of_each_mixture():
    g = torch.Generator().manual_seed(0)
    Z = torch.randn(30, 7, generator=g, dtype=torch.float64)
    W = torch.softmax(torch.randn(5, 30, generator=g, dtype=torch.float64), dim=1)
    A = W @ Z
    direct = (W * torch.cdist(A, Z).pow(2)).sum(1).mean() / Z.pow(2).sum(1).mean()
    assert float(anchor_cohesion(W, Z @ Z.t())) == pytest.approx(float(direct), rel=1e-9)
    one_hot = torch.eye(30, dtype=torch.float64)[:5]
    assert float(anchor_cohesion(one_hot, Z @ Z.t())) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("cls", [SoftJaccardRegularizer, BarlowTwinsRegularizer, AlignUniformRegularizer])
def test_regularizers_compare_the_trained_bank_with_each_partner(cls):
    y = torch.zeros(64, dtype=torch.long)
    with pytest.raises(ValueError, match="other encoder"):
        cls().loss(RegularizerBatch(y, {}, {"a": feats(0)}, trained="a"))
    two = RegularizerBatch(y, {}, {"a": feats(0), "b": feats(1)}, trained="a")
    assert float(cls(weight=2.0).loss(two)) == pytest.approx(2 * float(cls().loss(two)))
    # the mean over (trained, partner) pairs; partners are not compared with each other
    three = RegularizerBatch(y, {}, {"a": feats(0), "b": feats(1), "c": feats(2)}, trained="a")
    pair_values = [float(cls().loss(RegularizerBatch(y, {}, {"a": feats(0), p: three.relative[p]}, trained="a")))
                   for p in ("b", "c")]
    assert float(cls().loss(three)) == pytest.approx(np.mean(pair_values), rel=1e-5, abs=1e-6)
    assert cls.needs_adapter and cls.needs_partner_banks