"""Topological densification: death times against scipy's MST, differentiability, the
loss averaged over classes, β as a quantile of measured death times, the cyclical λ
schedule and the refusal of inert configurations."""

import numpy as np
import pytest
import torch
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.spatial.distance import cdist

from relbench.interfaces import RegularizerBatch
from relbench_topology import Topological
from relbench_topology.persistence import class_death_times, death_times, death_times_per_class, mst_edges
from relbench_topology.regularizer import cyclical_schedule, densification_loss



@pytest.mark.parametrize("seed", [0, 1, 2])
def test_death_times_equal_scipy_mst_edge_lengths(seed):
    pts = np.random.default_rng(seed).normal(size=(17, 5))
    expected = np.sort(minimum_spanning_tree(cdist(pts, pts)).data)
    got = np.sort(death_times(torch.tensor(pts)).numpy())
    assert got.shape == (16,)
    np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_class_death_times_are_per_class():
    pts = torch.tensor([[0.0], [1.0], [3.0], [100.0], [102.0], [7.0]])
    labels = torch.tensor([0, 0, 0, 1, 1, 2])  # class 2 has a single point: no edge
    assert sorted(class_death_times(pts, labels).tolist()) == [1.0, 2.0, 2.0]
    per_class = death_times_per_class(pts, labels)
    assert [sorted(d.tolist()) for d in per_class] == [[1.0, 2.0], [2.0]]


@pytest.mark.parametrize("seed", [0, 1])
def test_equal_size_classes_share_one_batched_mst_matching_scipy(seed):
    """Four classes of nine points, shuffled together: one batched Prim run (C = 4)."""
    rng = np.random.default_rng(seed)
    pts = rng.normal(size=(36, 3)) * rng.uniform(0.5, 3.0, size=(36, 1))
    labels = rng.permutation(np.repeat(np.arange(4), 9))
    got = class_death_times(torch.tensor(pts), torch.tensor(labels))
    assert got.shape == (4 * 8,)
    for c, per_class in enumerate(got.reshape(4, 8)):  # classes in sorted order, 8 edges each
        members = pts[labels == c]
        expected = np.sort(minimum_spanning_tree(cdist(members, members)).data)
        np.testing.assert_allclose(np.sort(per_class.numpy()), expected, rtol=1e-10)
    groups = torch.tensor(pts[np.argsort(labels, kind="stable")]).reshape(4, 9, 3)
    batched = mst_edges(torch.cdist(groups, groups))
    assert batched.shape == (4, 8, 2)
    for c in range(4):  # each graph of the batch gets its own spanning tree over its 9 nodes
        assert set(batched[c].flatten().tolist()) == set(range(9))


def test_loss_is_differentiable_and_decreases_when_optimising_points():
    g = torch.Generator().manual_seed(0)
    pts = (3 * torch.randn(40, 3, generator=g)).requires_grad_(True)
    labels = torch.arange(40) % 4
    opt = torch.optim.SGD([pts], lr=0.2)
    losses = []
    for _ in range(150):
        loss = densification_loss(pts, labels, beta=0.5)
        opt.zero_grad()
        loss.backward()
        assert torch.isfinite(pts.grad).all()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    d = class_death_times(pts.detach(), labels)
    assert (d - 0.5).abs().median() < 0.2  # most death times pulled to beta


@pytest.mark.parametrize("classes", [1, 2, 8])
def test_loss_is_the_mean_over_classes_so_invariant_to_their_number(classes):
    """Identical per-class clouds (translated far apart): the loss, and the gradient
    each point receives, do not depend on how many classes share the batch."""
    cloud = torch.randn(16, 5, generator=torch.Generator().manual_seed(3))
    one_class = (death_times(cloud) - 0.7).abs().sum()
    pts = torch.cat([cloud + 100.0 * c for c in range(classes)]).requires_grad_(True)
    labels = torch.arange(classes).repeat_interleave(16)
    loss = densification_loss(pts, labels, beta=0.7)
    assert loss.item() == pytest.approx(one_class.item(), rel=1e-5)
    loss.backward()
    first = cloud.clone().requires_grad_(True)
    (death_times(first) - 0.7).abs().sum().backward()
    torch.testing.assert_close(pts.grad[:16] * classes, first.grad, rtol=1e-4, atol=1e-6)


def _batch(emb, rel, labels):
    return RegularizerBatch(labels=labels, embeddings={"e": emb}, relative={"e": rel}, trained="e")


def test_weights_before_and_after_with_absolute_betas():
    emb = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 5.0], [0.0, 6.0]])
    rel = torch.tensor([[0.0], [1.0], [0.0], [4.0]])
    labels = torch.tensor([0, 0, 1, 1])
    reg = Topological(weight_before=0.1, weight_after=0.9, lam=0.5).calibrated(beta_before=1.0, beta_after=2.0)
    before = (abs(2 - 1) + abs(1 - 1)) / 2  # mean over the two classes
    after = (abs(1 - 2) + abs(4 - 2)) / 2
    assert reg.loss(_batch(emb, rel, labels)).item() == pytest.approx(0.5 * (0.1 * before + 0.9 * after))
    assert Topological().batch_shape() == (8, 16)
    with pytest.raises(RuntimeError, match="not measured"):
        Topological().loss(_batch(emb, rel, labels))


def test_beta_is_the_quantile_of_each_space_death_times_measured_on_the_fit_batches():
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(4).repeat_interleave(8)
    batches = [_batch(20 * torch.randn(32, 6, generator=g), 0.1 * torch.randn(32, 3, generator=g), labels)
               for _ in range(3)]
    before = torch.cat([class_death_times(b.embeddings["e"], labels) for b in batches]).double()
    after = torch.cat([class_death_times(b.relative["e"], labels) for b in batches]).double()
    for q in (0.25, 0.5, 0.75):
        reg = Topological(beta_quantile=q).prepared(batches, steps=10)
        got = {k: d.value for k, d in reg.diagnostics().items()}
        assert got["beta_before"] == pytest.approx(float(torch.quantile(before, q)))
        assert got["beta_after"] == pytest.approx(float(torch.quantile(after, q)))
    assert got["beta_before"] > 50 * got["beta_after"]  # one β per space, each in its own units
    only_after = Topological(weight_before=0.0).prepared(batches, steps=10)
    assert set(only_after.diagnostics()) == {"beta_after"}
    assert "beta_quantile" in Topological.tunable and Topological.tunable["beta_quantile"].values[0] == 0.5


def test_a_term_with_nothing_to_measure_is_refused():
    labels = torch.arange(2).repeat_interleave(4)
    no_relative = RegularizerBatch(labels=labels, embeddings={"e": torch.randn(8, 3)}, relative={}, trained="e")
    with pytest.raises(ValueError, match="weight_after"):
        Topological().prepared([no_relative], steps=5)
    assert set(Topological(weight_after=0.0).prepared([no_relative], steps=5).diagnostics()) == {"beta_before"}


def test_cyclical_schedule_matches_the_reference_shape():
    # 8 steps, 4 cycles of 2, rising by 1/(0.75·2) per step while ≤ 1
    assert cyclical_schedule(8, 4, 0.75) == pytest.approx([0, 2 / 3] * 4)
    # 12 steps, 2 cycles of 6, ramp 0.5: rise 1/3 per step, then hold 1
    assert cyclical_schedule(12, 2, 0.5) == pytest.approx([0, 1 / 3, 2 / 3, 1, 1, 1] * 2)
    emb = torch.tensor([[0.0], [1.0], [5.0], [7.0]])
    labels = torch.tensor([0, 0, 1, 1])
    constant = Topological(lam=1.0).calibrated(0.5, 0.5)
    cyclic = Topological(lam=1.0, lam_schedule="cyclical", lam_cycles=2, lam_ramp=0.5).calibrated(0.5, 0.5, steps=12)
    full = constant.loss(_batch(emb, emb, labels)).item()
    got = [cyclic.loss(_batch(emb, emb, labels)).item() / full for _ in range(13)]
    assert got == pytest.approx([0, 1 / 3, 2 / 3, 1, 1, 1] * 2 + [1])  # past the end: held
    with pytest.raises(ValueError, match="steps"):
        Topological(lam_schedule="cyclical").calibrated(1.0, 1.0)


@pytest.mark.parametrize("params", [{"lam": 0.0}, {"weight_before": 0.0, "weight_after": 0.0}])
def test_inert_configurations_are_refused_at_construction(params):
    with pytest.raises(ValueError, match="adds nothing"):
        Topological(**params)


def test_parameter_validation_and_the_adapter_for_every_active_term():
    for bad in ({"beta_quantile": 1.5}, {"samples_per_class": 1}, {"lam_schedule": "cosine"}, {"lam_ramp": 0.0}):
        with pytest.raises(ValueError):
            Topological(**bad)
    # the term after the projection reaches the trainable parameters only through the adapter
    assert Topological(weight_before=0.0).needs_adapter and Topological(weight_after=0.0).needs_adapter
