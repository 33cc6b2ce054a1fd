"""Heads of the translating stitchers (IRP, Procrustes, affine): inductive predictions (a
test sample's prediction never depends on the other test samples), the evaluation option
reaching the head, one head for every stitcher, and the text head's final ReLU of the IRP
reference code as a declared variant."""

import pytest
import torch
from sklearn.datasets import load_digits

from relbench.interfaces import Bank, FitContext, StitchSide
from relbench_irp.stitchers import AffineStitcher, IRPStitcher, ProcrustesStitcher
from relbench_relreps.stitchers import AbsoluteDecoder


def _banks():
    """Two 64-d 'encoders' of 400 digits (pixels and a rotated, rescaled, shifted copy),
    300 training and 100 test samples."""
    digits = load_digits()
    X = torch.tensor(digits.data[:400], dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target[:400])
    Q = torch.linalg.qr(torch.randn(64, 64, generator=torch.Generator().manual_seed(0)))[0]
    ids = [f"d{i}" for i in range(400)]
    return {name: (Bank(name, "train", Z[:300], ids[:300], y[:300]), Bank(name, "test", Z[300:], ids[300:], y[300:]))
            for name, Z in (("pixels", X), ("rotated", 2.0 * X @ Q + 1.0))}


BANKS = _banks()
ANCHOR_IDS = BANKS["pixels"][0].ids[:100]


def side(name, test=None):
    train, full_test = BANKS[name]
    return StitchSide(name, train, full_test if test is None else test, train.rows(ANCHOR_IDS), None)


def ctx(evaluation="inductive", modality="image"):
    return FitContext(seed=0, device=torch.device("cpu"), num_classes=10, modality=modality, regularizers=[],
                      evaluation=evaluation)


def subset(bank, rows, X=None):
    """The test ``rows`` of ``bank`` as a bank of their own (optionally with other features)."""
    return Bank(bank.encoder, "test", bank.X[rows] if X is None else X, [bank.ids[i] for i in rows],
                bank.labels[rows])


STITCHERS = [IRPStitcher(epochs=2, omega=2, delta=0.5), IRPStitcher(epochs=2, omega=2, delta=0.5, completion=True),
             ProcrustesStitcher(epochs=2), AffineStitcher(epochs=2)]


@pytest.mark.parametrize("stitcher", STITCHERS, ids=["irp", "irp-completion", "procrustes", "affine"])
def test_a_test_samples_prediction_never_depends_on_the_other_test_samples(stitcher):
    stitcher.fit(side("pixels"), ctx())
    test = BANKS["rotated"][1]
    whole = stitcher.predict(side("rotated")).logits
    for i in range(3):  # alone
        alone = stitcher.predict(side("rotated", subset(test, [i]))).logits
        assert torch.allclose(alone, whole[i:i + 1], atol=1e-5)
    # the other test samples replaced by far-off data: the first five keep their logits
    X = test.X.clone()
    X[5:] = 10.0 * torch.randn(len(X) - 5, 64, generator=torch.Generator().manual_seed(1)) - 3.0
    moved = stitcher.predict(side("rotated", subset(test, list(range(len(X))), X))).logits
    assert torch.allclose(moved[:5], whole[:5], atol=1e-5)


@pytest.mark.parametrize("cls", [IRPStitcher, ProcrustesStitcher, AffineStitcher])
def test_transductive_evaluation_reaches_the_head(cls):
    """Under ``evaluation: transductive`` the head normalises over the evaluated rows, so a
    sample's logits alone differ from its logits inside the split."""
    stitcher = cls(epochs=2)
    stitcher.fit(side("pixels"), ctx("transductive"))
    test = BANKS["rotated"][1]
    whole = stitcher.predict(side("rotated")).logits
    alone = stitcher.predict(side("rotated", subset(test, [0]))).logits
    assert not torch.allclose(alone, whole[:1], atol=1e-3)


def test_text_relu_is_a_declared_variant_not_the_default():
    """The reference code's ReLU on text logits is an option; by default every stitcher's
    head is the harness's reference head."""
    assert not (IRPStitcher().text_relu or ProcrustesStitcher().text_relu or AffineStitcher().text_relu)
    logits = {}
    for modality, text_relu in (("text", True), ("text", False), ("image", True)):
        stitcher = IRPStitcher(epochs=2, lr=1e-3, omega=2, delta=0.5, text_relu=text_relu)
        stitcher.fit(side("pixels"), ctx(modality=modality))
        pred = stitcher.predict(side("rotated")).logits
        logits[modality, text_relu] = pred
        accuracy = float((pred.argmax(1) == BANKS["rotated"][1].labels).float().mean())
        assert accuracy > 0.6, (modality, text_relu, accuracy)
    relu = logits["text", True]
    assert float(relu.min()) == 0.0  # ReLU on the logits: non-negative, some clipped to zero
    assert float(logits["text", False].min()) < 0 and float(logits["image", True].min()) < 0  # no ReLU


@pytest.mark.parametrize("modality", ["image", "text"])
@pytest.mark.parametrize("cls", [IRPStitcher, ProcrustesStitcher, AffineStitcher])
def test_every_stitcher_decodes_with_the_absolute_baselines_head(cls, modality):
    """One head for all stitchers: with the defaults, a translating stitcher reuses the
    very head the absolute baseline fitted on the same target, seed and settings (so it
    is the same architecture, weights and normalisation); the ReLU variant does not."""
    context = ctx(modality=modality)
    absolute = AbsoluteDecoder(epochs=2)
    absolute.fit(side("pixels"), context)
    stitcher = cls(epochs=2)
    stitcher.fit(side("pixels"), context)
    assert stitcher._head is absolute._head
    variant = cls(epochs=2, text_relu=True)
    variant.fit(side("pixels"), context)
    assert (variant._head is absolute._head) == (modality == "image")
