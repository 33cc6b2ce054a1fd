"""PARAM's whitened inner product and losses (formulas checked against direct computations)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from relbench.interfaces import RegularizerBatch
from relbench_param.losses import align_uniform, anchor_cohesion, barlow_twins, soft_jaccard, uniformity
from relbench_param.regularizers import AlignUniformRegularizer, BarlowTwinsRegularizer, SoftJaccardRegularizer
from relbench_param.wip import LEDOIT_WOLF, WhitenedInnerProduct, shrinkage_covariance


def data(n, d, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=torch.float64) @ torch.randn(d, d, generator=g, dtype=torch.float64) + 3


def test_shrinkage_covariance_matches_numpy():
    X = data(50, 6, 0)
    lam, eps = 0.3, 1e-4
    mu, sigma = shrinkage_covariance(X, lam, eps)
    cov = np.cov(X.numpy(), rowvar=False)
    s = np.trace(cov) / 6  # the mean variance: shrinkage target and ridge are relative to it
    expected = (1 - lam) * cov + lam * s * np.eye(6) + eps * s * np.eye(6)
    assert np.allclose(sigma.numpy(), expected) and np.allclose(mu.numpy(), X.numpy().mean(0))
    wip = WhitenedInnerProduct(lam=lam, eps=eps)
    wip.fit(X)
    A = data(5, 6, 1)
    direct = (X.numpy() - mu.numpy()) @ np.linalg.inv(expected) @ (A.numpy() - mu.numpy()).T
    assert np.allclose(wip.project(X, A).numpy(), direct, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("lam", [0.0, 0.1, 0.9, LEDOIT_WOLF])
def test_wip_is_invariant_to_rescaling_the_bank(lam):
    # fewer rows than dimensions, as on the suite's banks: Σ̂ is singular, only shrinkage
    # and the ridge make Σλ invertible, and both must scale with the bank
    X, A = data(20, 30, 0), data(4, 30, 1)
    reference = WhitenedInnerProduct(lam=lam, eps=1e-3)
    reference.fit(X)
    for alpha in (1e-4, 1e4):
        scaled = WhitenedInnerProduct(lam=lam, eps=1e-3)
        scaled.fit(alpha * X)
        assert torch.allclose(scaled.project(alpha * X, alpha * A), reference.project(X, A), rtol=1e-8, atol=1e-8)
        assert scaled.fitted_lam == pytest.approx(reference.fitted_lam, rel=1e-9)


def test_ledoit_wolf_lambda_is_sklearns_and_tunable():
    from sklearn.covariance import ledoit_wolf_shrinkage

    X = data(40, 10, 3)
    wip = WhitenedInnerProduct(lam=LEDOIT_WOLF)
    wip.fit(X)
    assert wip.fitted_lam == pytest.approx(ledoit_wolf_shrinkage(X.numpy()), rel=1e-12)
    assert 0.0 < wip.fitted_lam < 1.0
    # with that λ, WIP equals the fixed-λ similarity
    fixed = WhitenedInnerProduct(lam=wip.fitted_lam)
    fixed.fit(X)
    assert torch.allclose(wip.project(X, X[:5]), fixed.project(X, X[:5]))
    candidates = WhitenedInnerProduct.tunable["lam"].values
    assert candidates[0] == WhitenedInnerProduct().lam and LEDOIT_WOLF in candidates
    for value in candidates:  # every candidate is a valid parameter value
        WhitenedInnerProduct(lam=value)


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
    for bad in (1.5, -0.1, "oas"):
        with pytest.raises(ValueError, match="lam"):
            WhitenedInnerProduct(lam=bad)
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


def test_anchor_cohesion_is_the_relative_weighted_spread_of_each_mixture():
    g = torch.Generator().manual_seed(0)
    Z = torch.randn(30, 7, generator=g, dtype=torch.float64)
    W = torch.softmax(torch.randn(5, 30, generator=g, dtype=torch.float64), dim=1)
    A = W @ Z
    variance = (Z - Z.mean(0)).pow(2).sum(1).mean()
    direct = (W * torch.cdist(A, Z).pow(2)).sum(1).mean() / variance
    assert float(anchor_cohesion(W, Z)) == pytest.approx(float(direct), rel=1e-9)
    assert float(anchor_cohesion(W, Z, anchors=A)) == pytest.approx(float(direct), rel=1e-9)
    # invariant to translating and rescaling the rows; 0 for single points, 1 for uniform mixtures
    assert float(anchor_cohesion(W, 4.0 * Z + 7.0)) == pytest.approx(float(direct), rel=1e-9)
    assert float(anchor_cohesion(torch.eye(30, dtype=torch.float64)[:5], Z)) == pytest.approx(0.0, abs=1e-12)
    assert float(anchor_cohesion(torch.full((5, 30), 1 / 30, dtype=torch.float64), Z)) == pytest.approx(1.0)


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