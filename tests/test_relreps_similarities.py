"""Relative projections: the invariance table, concatenation and vector quantisation."""

import numpy as np
import pytest
import torch

from relbench_relreps import L1, Angular, Concat, Cosine, Euclidean, VQCosine
from relbench_topology import RobustCosine

D = 12


def _bank(seed=0, n=240):
    g = torch.Generator().manual_seed(seed)
    centres = 4 * torch.randn(6, D, generator=g, dtype=torch.float64) + 2.0  # off-centre clusters
    return centres[torch.arange(n) % 6] + torch.randn(n, D, generator=g, dtype=torch.float64)


def _orthogonal(seed=1):
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(D, D, generator=g, dtype=torch.float64))
    return q


_G = torch.Generator().manual_seed(2)
PERTURBATIONS = {
    "orthogonal": lambda X, _q=_orthogonal(): X @ _q,
    "isotropic-scale": lambda X: 3.7 * X,
    "translation": lambda X, _t=5 * torch.randn(D, generator=_G, dtype=torch.float64): X + _t,
    "per-dim-scale": lambda X, _s=torch.exp(torch.randn(D, generator=_G, dtype=torch.float64)): X * _s,
    "dim-permutation": lambda X, _p=torch.randperm(D, generator=_G): X[:, _p],
}

# (similarity, perturbation, invariant?) — the perturbation is applied to bank and anchors alike
TABLE = [
    (Cosine(), "orthogonal", True),
    (Cosine(), "isotropic-scale", True),
    (Cosine(), "dim-permutation", True),
    (Cosine(), "translation", False),
    (Cosine(), "per-dim-scale", False),
    (Cosine(center=True), "translation", True),
    (Cosine(center=True), "orthogonal", True),
    (Cosine(center=True), "isotropic-scale", True),
    (Angular(), "orthogonal", True),
    (Angular(), "isotropic-scale", True),
    (Angular(), "translation", False),
    (RobustCosine(eps=1e-12), "per-dim-scale", True),
    (RobustCosine(eps=1e-12), "translation", True),
    (RobustCosine(eps=1e-12), "dim-permutation", True),
    (RobustCosine(eps=1e-12), "isotropic-scale", True),
    (RobustCosine(eps=1e-12), "orthogonal", False),
    (RobustCosine(statistics="batch", eps=1e-12), "per-dim-scale", True),
    (RobustCosine(statistics="batch", eps=1e-12), "translation", True),
    (Euclidean(), "orthogonal", True),
    (Euclidean(), "translation", True),
    (Euclidean(), "dim-permutation", True),
    (Euclidean(), "isotropic-scale", False),
    (L1(), "translation", True),
    (L1(), "dim-permutation", True),
    (L1(), "orthogonal", False),
    (L1(), "isotropic-scale", False),
    (Concat(), "dim-permutation", True),
    (Concat(), "orthogonal", False),
    (Concat(), "translation", False),
    (Concat(parts=["euclidean", "l1"], standardise=False), "translation", True),
    (VQCosine(), "orthogonal", True),
    (VQCosine(), "isotropic-scale", True),
    (VQCosine(normalise=False), "isotropic-scale", True),  # the threshold is measured on the bank
    (VQCosine(normalise=False), "translation", False),
]


# float64 throughout; the tolerance covers cdist's matrix-product evaluation
def _rel(sim, X, A):
    sim.fit(X)
    return sim.project(X, A)


@pytest.mark.parametrize("sim, perturbation, invariant", TABLE,
                         ids=[f"{s.name}{'-' + str(s.params()) if s.params() else ''}-{p}" for s, p, _ in TABLE])
def test_invariance_table(sim, perturbation, invariant):
    X = _bank()
    anchors = torch.arange(0, 240, 8)  # anchors are rows of the bank
    T = PERTURBATIONS[perturbation]
    before = _rel(sim, X, X[anchors])
    TX = T(X)
    after = _rel(sim, TX, TX[anchors])
    gap = (before - after).abs().max().item()
    if invariant:
        assert gap < 1e-5, f"{sim.name} should be invariant to {perturbation} (max change {gap:.2e})"
    else:
        assert gap > 1e-2, f"{sim.name} should change under {perturbation} (max change {gap:.2e})"


def test_values_and_shapes():
    X = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    A = torch.tensor([[1.0, 1.0]])
    assert torch.allclose(Cosine().project(X, A), torch.tensor([[2 ** -0.5], [2 ** -0.5]]))
    assert torch.allclose(Angular().project(X, A), torch.tensor([[0.75], [0.75]]), atol=1e-5)
    assert torch.allclose(Euclidean().project(X, A), -torch.tensor([[1.0], [2 ** 0.5]]))
    assert torch.allclose(L1().project(X, A), -torch.tensor([[1.0], [2.0]]))
    out = Concat(parts=["cosine", "l1"]).project(torch.randn(5, 3), torch.randn(4, 3))
    assert out.shape == (5, 8)


def test_projections_are_differentiable():
    X = torch.randn(10, 4, requires_grad=True)
    A = torch.randn(3, 4)
    for sim in (Cosine(center=True), Angular(), Euclidean(), L1(), Concat(), RobustCosine(statistics="batch")):
        X.grad = None
        sim.project(X, A).sum().backward()
        assert torch.isfinite(X.grad).all() and X.grad.abs().sum() > 0, sim.name
    vq = VQCosine()
    vq.fit(X.detach())
    X.grad = None
    vq.project(X, A).sum().backward()  # straight-through estimator
    assert torch.isfinite(X.grad).all()


def test_vq_cosine_quantises_to_centroids():
    X = _bank()
    coarse, fine = VQCosine(threshold_quantile=0.5), VQCosine(threshold_quantile=0.01)
    coarse.fit(X)
    fine.fit(X)
    assert 1 <= coarse.num_centroids < fine.num_centroids <= len(X)
    # rows of a cluster share their relative representation
    rel = coarse.project(X, X[:20])
    assert len(torch.unique(rel.round(decimals=6), dim=0)) <= coarse.num_centroids < len(X)


def test_vq_threshold_is_the_quantile_of_pairwise_distances_and_leaves_real_clusters():
    X = _bank()  # 240 rows around 6 centres
    Z = torch.nn.functional.normalize(X, dim=1)
    d = torch.pdist(Z)
    counts = {}
    for q in VQCosine.tunable["threshold_quantile"].values:
        vq = VQCosine(threshold_quantile=q)
        vq.fit(X)
        assert vq.threshold == pytest.approx(float(torch.quantile(d, q)), rel=1e-6)  # fit clusters in float32
        counts[q] = vq.num_centroids
    # every candidate quantises (neither one cluster per row nor one cluster in all), the
    # default into clusters of several rows, and the coarsest finds the 6 centres
    assert all(2 <= c <= len(X) // 2 for c in counts.values()), counts
    assert counts[0.05] > counts[0.1] > counts[0.2] == 6
    default = VQCosine()
    assert default.threshold_quantile == VQCosine.tunable["threshold_quantile"].values[0]
    default.fit(X)
    assert default.num_centroids == counts[0.1] <= len(X) // 4


def test_vq_cluster_count_is_scale_free_without_normalisation():
    X = _bank()
    counts, thresholds = [], []
    for alpha in (1e-3, 1.0, 1e3):
        vq = VQCosine(normalise=False)
        vq.fit(alpha * X)
        counts.append(vq.num_centroids)
        thresholds.append(vq.threshold / alpha)
    assert len(set(counts)) == 1 and 2 <= counts[0] <= len(X) // 4
    assert thresholds == pytest.approx([thresholds[1]] * 3, rel=1e-6)  # fit clusters in float32


def test_parameter_validation():
    with pytest.raises(ValueError):
        Concat(parts=["cosine", "nope"])
    for q in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="threshold_quantile"):
            VQCosine(threshold_quantile=q)
    with pytest.raises(ValueError):
        RobustCosine(statistics="running")
    with pytest.raises(RuntimeError):
        RobustCosine().project(torch.randn(3, 2), torch.randn(2, 2))


def test_every_builtin_similarity_declares_whether_a_row_depends_on_the_other_rows(registry):
    """A similarity is transductive exactly when projecting a row alone differs from
    projecting it among other rows; every built-in one says which it is."""
    X, others = _bank(seed=0, n=60), _bank(seed=3, n=60) * 2.0 + 1.0
    anchors = X[:10]
    sims = [reg.cls() for reg in registry.by_interface["similarity"].values()] + [RobustCosine(statistics="batch")]
    assert {s.name for s in sims} >= {"cosine", "angular", "euclidean", "l1", "concat", "vq-cosine", "robust-cosine",
                                      "wip"}
    for sim in sims:
        sim.fit(X)
        alone = sim.project(X[20:30], anchors)
        among = sim.project(torch.cat([X[20:30], others]), anchors)[:10]
        depends = not torch.allclose(alone, among, atol=1e-9)
        assert sim.transductive() == depends, (sim.name, sim.params())
    assert RobustCosine(statistics="batch").inductive_alternative() == "statistics: train"


def _l1_reference(X, A):
    return -torch.cdist(X, A, p=1.0)


def test_l1_matches_cdist_on_real_width_data():
    g = torch.Generator().manual_seed(0)
    X, A = torch.randn(301, 1280, generator=g), torch.randn(100, 1280, generator=g)  # partial blocks both ways
    torch.testing.assert_close(L1().project(X, A), _l1_reference(X, A), rtol=1e-5, atol=0)
    ints = torch.randint(-8, 9, (401, 1280), generator=g).float()  # every sum exact in float32
    assert torch.equal(L1().project(ints[:301], ints[301:]), _l1_reference(ints[:301], ints[301:]))


@pytest.mark.parametrize("n, k, d, dtype", [(1, 5, 7, torch.float32), (9, 1, 7, torch.float32),
                                            (0, 5, 7, torch.float32), (9, 0, 7, torch.float32),
                                            (9, 5, 0, torch.float32), (70, 130, 33, torch.float64)],
                         ids=["one-row", "one-anchor", "no-rows", "no-anchors", "no-dims", "float64"])
def test_l1_edge_cases_as_cdist(n, k, d, dtype):
    g = torch.Generator().manual_seed(1)
    X, A = torch.randn(n, d, generator=g, dtype=dtype), torch.randn(k, d, generator=g, dtype=dtype)
    rel = L1().project(X, A)
    assert rel.shape == (n, k) and rel.dtype == dtype
    torch.testing.assert_close(rel, _l1_reference(X, A), rtol=1e-12 if dtype == torch.float64 else 1e-5, atol=0)


def test_l1_in_small_blocks_matches_cdist(monkeypatch):
    """Blocks smaller than a row pair, than the anchors, and than the rows: same values."""
    from relbench_relreps import similarities

    g = torch.Generator().manual_seed(2)
    X, A = torch.randint(-8, 9, (23, 40), generator=g).double(), torch.randint(-8, 9, (11, 40), generator=g).double()
    for block in (7, 100, 1000):
        monkeypatch.setattr(similarities, "L1_BLOCK", block)
        assert torch.equal(L1().project(X, A), _l1_reference(X, A)), block
    monkeypatch.setattr(similarities, "L1_ANCHORS", 3)
    assert torch.equal(L1().project(X[:, ::2], A[:, ::2]), _l1_reference(X[:, ::2], A[:, ::2]))  # strided input


def test_l1_gradient_and_refusals_as_cdist():
    g = torch.Generator().manual_seed(3)
    X, A = torch.randn(20, 6, generator=g, requires_grad=True), torch.randn(4, 6, generator=g)
    L1().project(X, A).sum().backward()
    grad, X.grad = X.grad, None
    _l1_reference(X, A).sum().backward()
    torch.testing.assert_close(grad, X.grad)
    with torch.no_grad():
        torch.testing.assert_close(L1().project(X, A), _l1_reference(X, A), rtol=1e-6, atol=0)
    for X2, A2 in ((torch.randn(3, 6), torch.randn(4, 5)), (torch.randn(3, 6), torch.randn(4, 6).double()),
                   (torch.ones(3, 6, dtype=torch.long), torch.ones(4, 6, dtype=torch.long))):
        with pytest.raises(RuntimeError):
            _l1_reference(X2, A2)
        with pytest.raises(RuntimeError):
            L1().project(X2, A2)


def test_l1_blocks_run_on_one_thread_and_restore_the_setting():
    from relbench_relreps.similarities import l1_distances

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen = []
        original = torch.sum

        def spy(*args, **kwargs):
            seen.append(torch.get_num_threads())
            return original(*args, **kwargs)

        torch.sum = spy
        try:
            X, A = torch.randn(50, 16), torch.randn(7, 16)
            out = l1_distances(X, A)
        finally:
            torch.sum = original
        assert seen and set(seen) == {1}
        assert torch.get_num_threads() == 2
        torch.testing.assert_close(out, torch.cdist(X, A, p=1.0))
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("linkage", ["average", "complete", "single", "ward"])
def test_vq_tree_cuts_equal_a_fresh_clustering_at_each_threshold(linkage):
    from scipy.spatial.distance import pdist
    from sklearn.cluster import AgglomerativeClustering
    from sklearn.metrics import adjusted_rand_score

    from relbench_relreps.vq import Dendrogram

    rows = np.random.default_rng(0).normal(size=(300, 12))
    tree = Dendrogram(rows, linkage)
    for q in (0.05, 0.1, 0.2, 0.5):
        t = float(np.quantile(pdist(rows), q))
        expected = AgglomerativeClustering(n_clusters=None, distance_threshold=t, linkage=linkage).fit_predict(rows)
        got = tree.cut(t)
        assert adjusted_rand_score(expected, got) == 1.0 and got.max() + 1 == len(set(expected))


def test_vq_candidates_share_one_tree_per_bank(monkeypatch):
    from relbench_relreps import vq

    built = []
    original = vq.Dendrogram.__init__
    monkeypatch.setattr(vq.Dendrogram, "__init__", lambda self, *a: built.append(1) or original(self, *a))
    vq._TREES.clear()
    X = torch.randn(200, 8, generator=torch.Generator().manual_seed(3))
    sizes = []
    for q in VQCosine.tunable["threshold_quantile"].values:
        sim = VQCosine(threshold_quantile=q)
        sim.fit(X)
        sizes.append(sim.num_centroids)
    assert len(built) == 1 and len(set(sizes)) == 3
    VQCosine().fit(X + 1.0)  # other rows: another tree
    assert len(built) == 2
