"""Relative decoder vs absolute baseline on a rotated copy of a bank; determinism;
not-achievable cells; training with the topological regularizer's adapter and with a
between-bank (PARAM) regularizer."""

import numpy as np
import pytest
import torch

from relbench.interfaces import Bank, FitContext, NotAchievable, RegularizerBatch, StitchSide
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


def test_topological_regularizer_trains_an_adapter_used_only_on_its_own_encoder():
    own = _side("enc", sim=RobustCosine())
    reg = Topological(classes_per_batch=C, samples_per_class=8)
    st = RelativeDecoder(epochs=2, lr=1e-3)
    st.fit(own, _ctx([reg]))
    adapter = st._adapter
    assert adapter is not None
    assert not torch.allclose(adapter.linear.weight, torch.eye(D))  # it trained
    assert _acc(st.predict(own)) > 0.8
    # another encoder (here: a per-dimension rescaled copy) is fed without the adapter
    scaled = _side("enc-scaled", lambda X: X * torch.linspace(0.5, 2.0, D), sim=RobustCosine())
    assert _acc(st.predict(scaled)) > 0.8


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

    with torch.no_grad():
        adapted = st._fitted.similarity.project(st._adapter(XTR), st._adapter(own.anchors))
    assert loss(adapted) < 0.9 * loss(own.relative("train"))
    assert _acc(st.predict(own)) > 0.8


def test_parameter_validation():
    with pytest.raises(ValueError):
        RelativeDecoder(epochs=0)
    with pytest.raises(ValueError):
        AbsoluteDecoder(batch_size=1)
    assert np.isclose(RelativeDecoder().params()["batch_size"], 32)
