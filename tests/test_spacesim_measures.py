"""The space measures of relbench_spacesim agree with references to 1e-6: literal
transcriptions of the platonic-representation code's metrics.py (mutual k-NN, CKNNA, CKA),
a literal HSIC-based CKA (Kornblith et al. 2019; Song et al. 2012's unbiased HSIC),
SciPy's Procrustes, and CCA by covariance (and scikit-learn's CCA) for SVCCA; and each
passes the conformance check of its declarations."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from relbench.interfaces import SpaceMeasure
from relbench.testing import check_space_measure
from relbench_spacesim.measures import CKNNA, MEASURES, SVCCA, DebiasedCKA, LinearCKA, MutualKNN, ProcrustesDistance

# ------------------------------------------------------------------ the platonic-representation code, literally
# (metrics.py of the platonic-rep repository: compute_nearest_neighbors, mutual_knn, hsic_unbiased,
# hsic_biased, cka, cknna; features L2-normalised first, as its measure_alignment.compute_score does)


def compute_nearest_neighbors(feats, topk=1):
    assert feats.ndim == 2, f"Expected feats to be 2D, got {feats.ndim}"
    knn = (
        (feats @ feats.T).fill_diagonal_(-1e8).argsort(dim=1, descending=True)[:, :topk]
    )
    return knn


def mutual_knn(feats_A, feats_B, topk):
    knn_A = compute_nearest_neighbors(feats_A, topk)
    knn_B = compute_nearest_neighbors(feats_B, topk)
    n = knn_A.shape[0]
    topk = knn_A.shape[1]
    range_tensor = torch.arange(n, device=knn_A.device).unsqueeze(1)
    lvm_mask = torch.zeros(n, n, device=knn_A.device)
    llm_mask = torch.zeros(n, n, device=knn_A.device)
    lvm_mask[range_tensor, knn_A] = 1.0
    llm_mask[range_tensor, knn_B] = 1.0
    acc = (lvm_mask * llm_mask).sum(dim=1) / topk
    return acc.mean().item()


def hsic_unbiased(K, L):
    m = K.shape[0]
    K_tilde = K.clone().fill_diagonal_(0)
    L_tilde = L.clone().fill_diagonal_(0)
    HSIC_value = (
        (torch.sum(K_tilde * L_tilde.T))
        + (torch.sum(K_tilde) * torch.sum(L_tilde) / ((m - 1) * (m - 2)))
        - (2 * torch.sum(torch.mm(K_tilde, L_tilde)) / (m - 2))
    )
    HSIC_value /= m * (m - 3)
    return HSIC_value


def hsic_biased(K, L):
    H = torch.eye(K.shape[0], dtype=K.dtype, device=K.device) - 1 / K.shape[0]
    return torch.trace(K @ H @ L @ H)


def platonic_cka(feats_A, feats_B, unbiased=False):
    K = torch.mm(feats_A, feats_A.T)
    L = torch.mm(feats_B, feats_B.T)
    hsic_fn = hsic_unbiased if unbiased else hsic_biased
    hsic_kk = hsic_fn(K, K)
    hsic_ll = hsic_fn(L, L)
    hsic_kl = hsic_fn(K, L)
    cka_value = hsic_kl / (torch.sqrt(hsic_kk * hsic_ll) + 1e-6)
    return cka_value.item()


def cknna(feats_A, feats_B, topk=None, distance_agnostic=False, unbiased=True):
    n = feats_A.shape[0]
    if topk < 2:
        raise ValueError("CKNNA requires topk >= 2")
    K = feats_A @ feats_A.T
    L = feats_B @ feats_B.T
    device = feats_A.device

    def similarity(K, L, topk):
        if unbiased:
            K_hat = K.clone().fill_diagonal_(float("-inf"))
            L_hat = L.clone().fill_diagonal_(float("-inf"))
        else:
            K_hat, L_hat = K, L
        _, topk_K_indices = torch.topk(K_hat, topk, dim=1)
        _, topk_L_indices = torch.topk(L_hat, topk, dim=1)
        mask_K = torch.zeros(n, n, device=device).scatter_(1, topk_K_indices, 1)
        mask_L = torch.zeros(n, n, device=device).scatter_(1, topk_L_indices, 1)
        mask = mask_K * mask_L
        if distance_agnostic:
            sim = mask * 1.0
        else:
            if unbiased:
                sim = hsic_unbiased(mask * K, mask * L)
            else:
                sim = hsic_biased(mask * K, mask * L)
        return sim

    sim_kl = similarity(K, L, topk)
    sim_kk = similarity(K, K, topk)
    sim_ll = similarity(L, L, topk)
    return sim_kl.item() / (torch.sqrt(sim_kk * sim_ll) + 1e-6).item()


# ------------------------------------------------------------------ Kornblith et al. 2019, literally (HSIC-based CKA)


def centering(n):
    return np.eye(n) - np.ones((n, n)) / n


def hsic_biased_np(K, L):
    """HSIC of Gretton et al. 2005, up to its constant: tr(K H L H) / (n − 1)²."""
    H = centering(len(K))
    return np.trace(K @ H @ L @ H) / (len(K) - 1) ** 2


def hsic_song(K, L):
    """Song et al. 2012's unbiased HSIC (equation 5), written with the full matrix product."""
    n = len(K)
    Kt, Lt = K - np.diag(np.diag(K)), L - np.diag(np.diag(L))
    one = np.ones(n)
    return (np.trace(Kt @ Lt) + (one @ Kt @ one) * (one @ Lt @ one) / ((n - 1) * (n - 2))
            - 2 / (n - 2) * one @ Kt @ Lt @ one) / (n * (n - 3))


def cka_reference(X, Y, hsic):
    K, L = X @ X.T, Y @ Y.T
    return hsic(K, L) / np.sqrt(hsic(K, K) * hsic(L, L))


# ------------------------------------------------------------------ data


def spaces(n=80, dx=12, dy=20, seed=0):
    """A space and a noisy linear image of it (of another width), float64."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, dx)) * np.linspace(3, 0.3, dx) + rng.normal(size=dx)
    Y = np.tanh(X @ rng.normal(size=(dx, dy))) + 0.5 * rng.normal(size=(n, dy))
    return X, Y


def normalised(X):
    return F.normalize(torch.from_numpy(X), p=2, dim=-1)


SEEDS = [0, 1, 2]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("topk", [1, 5, 10])
def test_mutual_knn_is_platonic_reps(seed, topk):
    X, Y = spaces(seed=seed)
    assert MutualKNN(topk=topk).measure(X, Y) == pytest.approx(mutual_knn(normalised(X), normalised(Y), topk),
                                                               abs=1e-6)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("topk", [2, 5, 10])
def test_cknna_is_platonic_reps(seed, topk):
    X, Y = spaces(seed=seed)
    ours = CKNNA(topk=topk).measure(X, Y)
    assert ours == pytest.approx(cknna(normalised(X), normalised(Y), topk=topk), abs=1e-6)
    assert ours != pytest.approx(CKNNA(topk=topk).measure(Y, X), abs=1e-9)  # not symmetric, as declared


def test_mutual_knn_without_normalisation_uses_raw_inner_products():
    X, Y = spaces(seed=3)
    raw = mutual_knn(torch.from_numpy(X), torch.from_numpy(Y), 5)
    assert MutualKNN(topk=5, normalize=False).measure(X, Y) == pytest.approx(raw, abs=1e-6)
    assert raw != pytest.approx(MutualKNN(topk=5).measure(X, Y), abs=1e-3)


@pytest.mark.parametrize("seed", SEEDS)
def test_linear_cka_is_the_biased_hsic_ratio_and_platonic_reps(seed):
    X, Y = spaces(seed=seed)
    ours = LinearCKA().measure(X, Y)
    assert ours == pytest.approx(cka_reference(X, Y, hsic_biased_np), abs=1e-6)
    assert ours == pytest.approx(platonic_cka(torch.from_numpy(X), torch.from_numpy(Y)), abs=1e-6)


@pytest.mark.parametrize("seed", SEEDS)
def test_debiased_cka_is_the_unbiased_hsic_ratio_and_platonic_reps(seed):
    X, Y = spaces(seed=seed)
    ours = DebiasedCKA().measure(X, Y)
    assert ours == pytest.approx(cka_reference(X, Y, hsic_song), abs=1e-6)
    assert ours == pytest.approx(platonic_cka(torch.from_numpy(X), torch.from_numpy(Y), unbiased=True), abs=1e-6)
    assert ours != pytest.approx(LinearCKA().measure(X, Y), abs=1e-3)


def test_debiased_cka_removes_linear_ckas_bias_on_unrelated_wide_spaces():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(40, 200)), rng.normal(size=(40, 200))
    assert LinearCKA().measure(X, Y) > 0.5 and abs(DebiasedCKA().measure(X, Y)) < 0.05


def scipy_procrustes_distance(X, Y):
    """From scipy.spatial.procrustes (which also scales): disparity = 1 − ‖Xᵀ Y‖²_*, so the
    distance without scaling is 2 − 2 sqrt(1 − disparity); the narrower space padded with zeros."""
    from scipy.spatial import procrustes

    width = max(X.shape[1], Y.shape[1])
    pad = lambda A: np.hstack([A, np.zeros((len(A), width - A.shape[1]))])  # noqa: E731
    return 2 - 2 * np.sqrt(1 - procrustes(pad(X), pad(Y))[2])


def scipy_orthogonal_procrustes_distance(X, Y):
    """The least ‖X R − Y‖²_F over orthogonal R, by scipy.linalg.orthogonal_procrustes, of
    the centred unit-norm spaces (zero-padded to one width)."""
    from scipy.linalg import orthogonal_procrustes

    width = max(X.shape[1], Y.shape[1])
    prep = lambda A: np.hstack([A - A.mean(0), np.zeros((len(A), width - A.shape[1]))])  # noqa: E731
    X, Y = prep(X), prep(Y)
    X, Y = X / np.linalg.norm(X), Y / np.linalg.norm(Y)
    R, _ = orthogonal_procrustes(X, Y)
    return np.linalg.norm(X @ R - Y) ** 2


@pytest.mark.parametrize("seed", SEEDS)
def test_procrustes_distance_is_scipys(seed):
    X, Y = spaces(seed=seed)
    ours = ProcrustesDistance().measure(X, Y)
    assert ours == pytest.approx(scipy_orthogonal_procrustes_distance(X, Y), abs=1e-6)
    assert ours == pytest.approx(scipy_procrustes_distance(X, Y), abs=1e-6)
    assert ProcrustesDistance().measure(X, X @ np.linalg.qr(np.random.default_rng(seed).normal(size=(12, 12)))[0]
                                        * 3 + 1) == pytest.approx(0, abs=1e-9)


def svd_reduced(X, dims):
    """Raghu et al. 2017's first step, literally: the centred space projected on its top
    ``dims`` right singular vectors (its scores), by numpy's SVD."""
    Xc = X - X.mean(0)
    _, _, Vt = np.linalg.svd(Xc, full_matrices=False)
    return Xc @ Vt[:dims].T


def cca_correlations_by_covariance(A, B):
    """Canonical correlations: the square roots of the eigenvalues of Σaa⁻¹ Σab Σbb⁻¹ Σba."""
    A, B = A - A.mean(0), B - B.mean(0)
    Saa, Sbb, Sab = A.T @ A, B.T @ B, A.T @ B
    eig = np.linalg.eigvals(np.linalg.solve(Saa, Sab) @ np.linalg.solve(Sbb, Sab.T))
    return np.sqrt(np.clip(np.sort(eig.real)[::-1][: min(A.shape[1], B.shape[1])], 0, 1))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dims", [3, 10])
def test_svcca_is_svd_then_cca(seed, dims):
    from sklearn.cross_decomposition import CCA

    X, Y = spaces(seed=seed)
    A, B = svd_reduced(X, dims), svd_reduced(Y, dims)
    ours = SVCCA(dims=dims).measure(X, Y)
    assert ours == pytest.approx(cca_correlations_by_covariance(A, B).mean(), abs=1e-6)
    a, b = CCA(n_components=dims, max_iter=5000, tol=1e-12, scale=False).fit(A, B).transform(A, B)
    sklearn_mean = np.mean([np.corrcoef(a[:, i], b[:, i])[0, 1] for i in range(dims)])
    assert ours == pytest.approx(sklearn_mean, abs=1e-4)  # scikit-learn's CCA is iterative


@pytest.mark.parametrize("cls", MEASURES, ids=lambda c: c.name)
def test_every_measure_conforms(cls):
    check_space_measure(cls())


def test_measures_of_other_parameters_conform():
    for measure in (MutualKNN(topk=3, normalize=False), CKNNA(topk=3), SVCCA(dims=2)):
        check_space_measure(measure)


class FalselyInvariant(LinearCKA):
    """Linear CKA without centring, declared translation-invariant all the same."""

    def measure(self, X, Y):
        return float(np.linalg.norm(Y.T @ X) ** 2 / (np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y)))


class WrongDirection(ProcrustesDistance):
    """A distance declared as a similarity."""

    higher_is_similar = True


class FalselySymmetric(CKNNA):
    """CKNNA declared symmetric."""

    symmetric = True


@pytest.mark.parametrize("measure, message", [(FalselyInvariant(), "declares invariance to translation"),
                                              (WrongDirection(), "check higher_is_similar"),
                                              (FalselySymmetric(), "declares symmetric")])
def test_the_check_catches_a_false_declaration(measure, message):
    with pytest.raises(AssertionError, match=message):
        check_space_measure(measure)


def test_interface_declares_direction():
    assert LinearCKA.direction() == "higher" and ProcrustesDistance.direction() == "lower"
    assert issubclass(LinearCKA, SpaceMeasure)
