"""Relative decoder vs absolute baseline on a rotated copy of a bank; determinism;
not-achievable cells; every source through its own adapter with the topological
regularizer; a between-bank (PARAM) regularizer."""

import numpy as np
import pytest
import torch

from relbench.interfaces import Bank, FitContext, NotAchievable, RegularizerBatch, StitchSide
from relbench.training import predict_logits
from relbench_metrics import Accuracy
from relbench_param import BarlowTwinsRegularizer
from relbench_relreps import AbsoluteDecoder, Cosine, NonStitched, RelativeDecoder
from relbench_topology import RobustCosine, Topological

D, C = 24, 6



def _clusters(n, seed):
    g = torch.Generator().manual_seed(seed)
    centres = 3 * torch.randn(C, D, generator=torch.Generator().manual_seed(99))
    y = torch.arange(n) % C
    return centres[y] + 1.5 * torch.randn(n, D, generator=g), y


XTR, YTR = _clusters(600, 1)
XTE, YTE = _clusters(240, 2)
ANCHOR_IDX = torch.arange(0, 600, 12)
Q, _ = torch.linalg.qr(torch.randn(D, D, generator=torch.Generator().manual_seed(5)))


def _side(name, transform=lambda X: X, sim=None, d_keep=D):
    Xtr, Xte = transform(XTR)[:, :d_keep], transform(XTE)[:, :d_keep]
    sim = sim if sim is not None else Cosine()
    sim.fit(Xtr)
    ids_tr = [f"tr{i}" for i in range(len(Xtr))]
    return StitchSide(encoder=name,
                      train=Bank(name, "train", Xtr, ids_tr, YTR),
                      test=Bank(name, "test", Xte, [f"te{i}" for i in range(len(Xte))], YTE),
                      anchors=Xtr[ANCHOR_IDX], similarity=sim)


def _ctx(regs=()):
    return FitContext(seed=0, device=torch.device("cpu"), num_classes=C, modality="text", regularizers=list(regs))


def _acc(pred):
    return Accuracy().compute(YTE.numpy(), pred.logits.argmax(1).numpy())


def test_relative_decoder_is_exactly_invariant_to_a_rotation_while_absolute_collapses():
    own, rotated = _side("enc"), _side("enc-rotated", lambda X: X @ Q)
    rel = RelativeDecoder(epochs=3)
    rel.fit(own, _ctx())
    p_own, p_rot = rel.predict(own), rel.predict(rotated)
    assert _acc(p_own) > 0.9
    assert torch.allclose(p_own.logits, p_rot.logits, atol=1e-4)
    assert _acc(p_rot) == _acc(p_own)
    ab = AbsoluteDecoder(epochs=3)
    ab.fit(own, _ctx())
    assert _acc(ab.predict(own)) > 0.9
    assert _acc(ab.predict(rotated)) < _acc(ab.predict(own)) - 0.3


def test_fits_are_deterministic_per_seed():
    side = _side("enc")
    logits = []
    for _ in range(2):
        st = RelativeDecoder(epochs=2)
        st.fit(side, _ctx())
        logits.append(st.predict(side).logits)
    assert torch.equal(logits[0], logits[1])


def test_width_mismatch_is_not_achievable_for_absolute_only():
    own, narrow = _side("enc"), _side("narrow", d_keep=16)
    ab = AbsoluteDecoder(epochs=1)
    ab.fit(own, _ctx())
    with pytest.raises(NotAchievable):
        ab.predict(narrow)
    rel = RelativeDecoder(epochs=1)
    rel.fit(own, _ctx())
    assert rel.predict(narrow).logits.shape == (len(XTE), C)
    ref = NonStitched(epochs=1)
    ref.fit(own, _ctx())
    assert ref.diagonal_only and _acc(ref.predict(own)) > 0.5
    with pytest.raises(NotAchievable):
        ref.predict(_side("other"))


def test_regularized_decoder_feeds_each_source_through_its_own_adapter():
    """The source's own adapter (trained as its own fit trains it, once per side)
    and its refitted similarity project the source into the target's head."""
    own = _side("enc", sim=RobustCosine())
    scaled = _side("enc-scaled", lambda X: X * torch.linspace(0.5, 2.0, D), sim=RobustCosine())
    ctx = _ctx([Topological(classes_per_batch=C, samples_per_class=8)])
    st = RelativeDecoder(epochs=2, lr=1e-3)
    st.fit(own, ctx)
    assert list(own.memo.values()) == [st._fitted]  # the target's own training, kept on its side
    assert _acc(st.predict(own)) > 0.8
    pred = st.predict(scaled)
    (source_own,) = scaled.memo.values()
    assert not torch.allclose(source_own.adapter.linear.weight, torch.eye(D))  # it trained
    torch.testing.assert_close(pred.logits, predict_logits(st._head, source_own.relative(scaled.test.X, scaled.anchors)))
    raw = predict_logits(st._head, scaled.relative("test"))
    assert (pred.logits - raw).abs().max() > 1e-3  # not the raw source
    assert _acc(pred) > 0.8
    assert set(pred.extras) == {"adapter_drift", "beta_before", "beta_after"}
    assert pred.extras["adapter_drift"].value == pytest.approx(source_own.adapter.drift())
    st.predict(scaled)
    assert len(scaled.memo) == 1  # trained once per side
    as_target = RelativeDecoder(epochs=2, lr=1e-3)
    as_target.fit(scaled, ctx)
    assert as_target._fitted is source_own and len(scaled.memo) == 1
    fresh = _side("enc-scaled", lambda X: X * torch.linspace(0.5, 2.0, D), sim=RobustCosine())
    RelativeDecoder(epochs=2, lr=1e-3).fit(fresh, ctx)  # what the source's own fit trains, from scratch
    (fresh_own,) = fresh.memo.values()
    assert torch.equal(fresh_own.adapter.linear.weight, source_own.adapter.linear.weight)


def test_between_bank_regularizer_pulls_the_target_towards_its_partner():
    own = _side("enc")
    partner = _side("other", lambda X: torch.tanh(X @ Q / 4))  # a non-linear distortion: cosine cannot undo it
    reg = BarlowTwinsRegularizer(weight=5.0)
    with pytest.raises(ValueError, match="other encoder"):
        RelativeDecoder(epochs=1).fit(own, _ctx([reg]))
    ctx = _ctx([reg])
    ctx.partners = {"other": partner.relative("train")}
    st = RelativeDecoder(epochs=3, lr=1e-3)
    st.fit(own, ctx)

    def loss(rel):
        return float(reg.loss(RegularizerBatch(YTR, {}, {"enc": rel, "other": partner.relative("train")}, trained="enc")))

    assert loss(st._fitted.relative(XTR, own.anchors)) < 0.9 * loss(own.relative("train"))
    assert _acc(st.predict(own)) > 0.8
    st.predict(partner)  # the partner's own adapter trains against the target's bank
    ((key, _),) = partner.memo.items()
    assert key[-1] == ("enc",)


def test_parameter_validation():
    with pytest.raises(ValueError):
        RelativeDecoder(epochs=0)
    with pytest.raises(ValueError, match="adapter_decay"):
        RelativeDecoder(adapter_decay=0.0)
    with pytest.raises(ValueError):
        AbsoluteDecoder(batch_size=1)
    assert np.isclose(RelativeDecoder().params()["batch_size"], 32)
