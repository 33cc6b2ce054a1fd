"""The adapter training's cheaper formulation: it trains the same adapter as the
straightforward one (decay in the loss, batch and anchors adapted separately, the
similarity refitted every epoch) to float tolerance; a similarity without per-bank
statistics is not refitted; under a ``bf16`` task the steps run in bfloat16 and the
topological loss stays float32."""

from dataclasses import dataclass

import pytest
import torch
from torch import nn

from relbench import precision
from relbench.interfaces import RegularizerBatch
from relbench.training import finish_training, head_settings, minibatches, seeded_generator, train_loop
from relbench_relreps import Cosine
from relbench_relreps.adapter import Adapter
from relbench_relreps.heads import train_relative_with_regularizers
from relbench_topology import RobustCosine, Topological

N, D, K, C = 256, 24, 10, 4
G = torch.Generator().manual_seed(0)
Y = torch.arange(N) % C
X = 3 * torch.randn(C, D, generator=G)[Y] + torch.randn(N, D, generator=G)
A = X[:K].clone()
SETTINGS = head_settings("image", 2, 1e-2, 16, 32)
DECAY = 0.1


def _topological():
    return Topological(classes_per_batch=C, samples_per_class=8)


def _reference(sim, reg):
    """The straightforward training the optimised one replaces (the formulation before it)."""
    torch.manual_seed(0)
    adapter, sim = Adapter(D), sim
    head = SETTINGS.build(K, C, X.device)
    balanced = reg.batch_shape()

    def refit():
        with torch.no_grad():
            sim.fit(adapter(X))

    def batch_of(idx):
        emb = adapter(X[idx])
        return RegularizerBatch(labels=Y[idx], embeddings={"e": emb}, relative={"e": sim.project(emb, adapter(A))},
                                trained="e")

    refit()
    first = [i for i in minibatches(N, SETTINGS.batch_size, seeded_generator(0), Y, balanced) if len(i) >= 2]
    with torch.no_grad():
        reg = reg.prepared([batch_of(i) for i in first], SETTINGS.epochs * len(first))

    def step_loss(idx):
        batch = batch_of(idx)
        return (nn.functional.cross_entropy(head(batch.relative["e"]), batch.labels) + DECAY * adapter.penalty()
                + reg.loss(batch))

    head.train()
    train_loop(list(head.parameters()) + list(adapter.parameters()), N, step_loss, epochs=SETTINGS.epochs,
               lr=SETTINGS.lr, batch_size=SETTINGS.batch_size, seed=0, labels=Y, balanced=balanced, on_epoch=refit)
    refit()
    finish_training(head, sim.project(adapter(X), adapter(A)).detach())
    return adapter, head, sim


def _fitted_sim(sim):
    sim.fit(X)
    return sim


def test_decaying_adds_the_penalty_gradient():
    adapter = Adapter(5)
    with torch.no_grad():
        adapter.linear.weight.add_(torch.randn(5, 5, generator=G))
        adapter.linear.bias.add_(torch.randn(5, generator=G))
    x = torch.randn(7, 5, generator=G)
    (adapter(x).pow(2).sum() + 0.3 * adapter.penalty()).backward()
    expected = [p.grad.clone() for p in adapter.parameters()]
    adapter.zero_grad()
    with adapter.decaying(0.3):
        adapter(x).pow(2).sum().backward()
    for p, e in zip(adapter.parameters(), expected):
        torch.testing.assert_close(p.grad, e)
    adapter.zero_grad()
    adapter(x).pow(2).sum().backward()  # the hooks are gone once the block closes
    assert not torch.allclose(adapter.linear.weight.grad, expected[0])


@pytest.mark.parametrize("make_sim", [Cosine, RobustCosine])
def test_optimised_training_equals_the_straightforward_one(make_sim):
    ref_adapter, ref_head, ref_sim = _reference(_fitted_sim(make_sim()), _topological())
    fitted = train_relative_with_regularizers("e", X, Y, A, _fitted_sim(make_sim()), [_topological()], SETTINGS, C, 0,
                                              adapter_decay=DECAY)
    torch.testing.assert_close(fitted.adapter.linear.weight, ref_adapter.linear.weight, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fitted.adapter.linear.bias, ref_adapter.linear.bias, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        ref = ref_sim.project(ref_adapter(X), ref_adapter(A))
    torch.testing.assert_close(fitted.relative(X, A), ref, rtol=1e-4, atol=1e-4)


@dataclass
class CountingCosine(Cosine):
    """Cosine with a ``fit`` of its own that changes nothing (counts its calls)."""

    def fit(self, X):
        type(self).fits += 1


def test_a_similarity_without_statistics_is_not_refitted_and_nothing_changes(monkeypatch):
    whole_bank = []
    forward = Adapter.forward
    monkeypatch.setattr(Adapter, "forward", lambda self, x: whole_bank.append(len(x) == N) or forward(self, x))
    train_relative_with_regularizers("e", X, Y, A, Cosine(), [_topological()], SETTINGS, C, 0)
    assert sum(whole_bank) == 1  # the final features only: no refit of a similarity without statistics
    monkeypatch.undo()
    CountingCosine.fits = 0
    refitted = train_relative_with_regularizers("e", X, Y, A, CountingCosine(), [_topological()], SETTINGS, C, 0)
    assert CountingCosine.fits == SETTINGS.epochs + 2  # before training, every epoch, at the end
    plain = train_relative_with_regularizers("e", X, Y, A, Cosine(), [_topological()], SETTINGS, C, 0)
    torch.testing.assert_close(plain.adapter.linear.weight, refitted.adapter.linear.weight, rtol=0, atol=0)


def test_bf16_task_trains_in_bfloat16_and_the_topological_loss_stays_float32():
    fp32 = train_relative_with_regularizers("e", X, Y, A, Cosine(), [_topological()], SETTINGS, C, 0)
    with precision.running_at("bf16"):
        bf16 = train_relative_with_regularizers("e", X, Y, A, Cosine(), [_topological()], SETTINGS, C, 0)
    assert bf16.adapter.linear.weight.dtype == torch.float32  # parameters stay fp32
    assert torch.isfinite(bf16.relative(X, A)).all()
    assert not torch.equal(bf16.adapter.linear.weight, fp32.adapter.linear.weight)  # the products were bf16
    reg = _topological().calibrated(1.0, 0.5)
    cloud = (X[:32] / 7).bfloat16()
    as_bf16 = RegularizerBatch(labels=Y[:32], embeddings={"e": cloud}, relative={"e": cloud[:, :K]}, trained="e")
    as_fp32 = RegularizerBatch(labels=Y[:32], embeddings={"e": cloud.float()}, relative={"e": cloud[:, :K].float()},
                               trained="e")
    assert torch.equal(reg.loss(as_bf16), reg.loss(as_fp32))  # death times of bf16 clouds computed in float32
