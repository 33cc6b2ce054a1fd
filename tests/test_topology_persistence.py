"""Topological densification: death times against scipy's MST, differentiability,
the loss decreasing under optimisation, and the regularizer's weighting."""

import numpy as np
import pytest
import torch
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.spatial.distance import cdist

from relbench.interfaces import RegularizerBatch
from relbench_topology import Topological
from relbench_topology.persistence import class_death_times, death_times, mst_edges
from relbench_topology.regularizer import densification_loss


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_death_times_equal_scipy_mst_edge_lengths(seed):
    pts = np.random.default_rng(seed).normal(size=(17, 5))
    expected = np.sort(minimum_spanning_tree(cdist(pts, pts)).data)
    got = np.sort(death_times(torch.tensor(pts)).numpy())
    assert got.shape == (16,)
    np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_class_death_times_are_per_class():
    pts = torch.tensor([[0.0], [1.0], [3.0], [100.0], [102.0]])
    labels = torch.tensor([0, 0, 0, 1, 1])
    assert sorted(class_death_times(pts, labels).tolist()) == [1.0, 2.0, 2.0]


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
    opt = torch.optim.SGD([pts], lr=0.05)
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


def test_regularizer_weights_before_and_after():
    emb = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 5.0], [0.0, 6.0]])
    rel = torch.tensor([[0.0], [1.0], [0.0], [4.0]])
    labels = torch.tensor([0, 0, 1, 1])
    batch = RegularizerBatch(labels=labels, embeddings={"e": emb}, relative={"e": rel})
    reg = Topological(weight_before=0.1, weight_after=0.9, beta=1.0, lam=0.5)
    before = abs(2 - 1) + abs(1 - 1)
    after = abs(1 - 1) + abs(4 - 1)
    assert reg.loss(batch).item() == pytest.approx(0.5 * (0.1 * before + 0.9 * after))
    assert Topological().batch_shape() == (8, 16)
    with pytest.raises(ValueError):
        Topological(samples_per_class=1)


def test_adapter_only_when_the_term_before_the_projection_is_active():
    assert Topological().needs_adapter is True
    assert Topological(weight_before=0.0).needs_adapter is False
    assert Topological(weight_before=1e-3, weight_after=0.0).needs_adapter is True


def test_relative_decoder_inserts_an_adapter_only_for_a_term_before_the_projection():
    from relbench.training import head_settings
    from relbench_relreps.heads import train_relative_with_regularizers
    from relbench_relreps.similarities import Cosine

    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(64, 6, generator=g), torch.arange(64) % 4
    settings = head_settings("image", 1, 1e-3, 8, 16)
    fitted = {w: train_relative_with_regularizers("e", X, y, X[:10], Cosine(), [Topological(weight_before=w,
                                                  classes_per_batch=4, samples_per_class=4)], settings, 4, 0)
              for w in (0.0, 0.1)}
    assert fitted[0.0].adapter is None
    assert fitted[0.1].adapter is not None and fitted[0.1].adapter.linear.weight.shape == (6, 6)
