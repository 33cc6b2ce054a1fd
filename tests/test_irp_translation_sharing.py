"""Translation stitchers: the Procrustes rank and its anchor-order invariance, and the
per-side work kept in ``StitchSide.memo`` (a warm memo gives the cells a cold one does,
bit for bit)."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from scipy.linalg import orthogonal_procrustes

from relbench.interfaces import Bank, FitContext, StitchSide
from relbench_irp import irp_translate
from relbench_irp.maps import ScaledAnchors, _scaler, affine_fit, procrustes_fit
from relbench_irp.stitchers import AffineStitcher, IRPStitcher, ProcrustesStitcher


def randn(*shape, seed, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def related(As, dt, seed):
    """Target anchors that depend on the source ones nonlinearly, plus noise."""
    return torch.tanh(As @ randn(As.shape[1], dt, seed=seed, dtype=As.dtype) / 4) \
        + 0.1 * randn(len(As), dt, seed=seed + 1, dtype=As.dtype)


def padded(A, scaling, width):
    shift, scale = _scaler(A, scaling)
    return F.pad((A - shift) / scale, (0, width - A.shape[1]))


def relative(a, b):
    return float((a - b).norm() / b.norm())


# ----------------------------------------------------------------------------- Procrustes


def _rank_cases():
    low = randn(60, 5, seed=3) @ randn(5, 40, seed=4)  # rank 5
    blank = randn(30, 20, seed=5)
    blank[:, 7:] = 1.0  # constant columns: nothing left after centring
    return [
        ("k < w", randn(20, 64, seed=0) + 0.5, "none", 64),
        ("k < w, centred", randn(20, 64, seed=0) + 0.5, "center", 64),
        ("k ≥ w", randn(100, 32, seed=1), "standard", 32),
        ("k ≥ w, padded", randn(100, 32, seed=1), "standard", 48),
        ("k = w, centred", randn(32, 32, seed=2), "standard", 32),
        ("rank-deficient", low, "none", 40),
        ("rank-deficient, padded", low, "center", 70),
        ("constant columns", blank, "standard", 20),
        ("float32", randn(50, 40, seed=6, dtype=torch.float32), "center", 40),
        ("float32, k < w", randn(30, 40, seed=7, dtype=torch.float32), "standard", 64),
    ]


@pytest.mark.parametrize("A, scaling, width", [c[1:] for c in _rank_cases()], ids=[c[0] for c in _rank_cases()])
def test_procrustes_rank_is_matrix_rank_of_the_padded_scaled_anchors(A, scaling, width):
    expected = int(torch.linalg.matrix_rank(padded(A, scaling, width)))
    assert ScaledAnchors.fit(A, scaling).rank(width) == expected
    target = randn(len(A), width, seed=9, dtype=A.dtype)
    assert procrustes_fit(A, target, scaling).rank == expected


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("scaling", ["center", "standard"])
@pytest.mark.parametrize("k, ds, dt", [(40, 64, 64), (64, 64, 64), (24, 48, 32)], ids=["k<w", "k=w", "k<w, padded"])
def test_procrustes_does_not_depend_on_the_anchor_order(k, ds, dt, scaling, dtype):
    """The scaling subtracts the anchor mean, so k anchors have rank k − 1 < w: the null
    direction is dropped rather than rotated as rounding left it."""
    As = randn(k, ds, seed=0, dtype=dtype) + 0.3
    At = related(As, dt, seed=1)
    X = randn(200, ds, seed=2, dtype=dtype)
    fitted = procrustes_fit(As, At, scaling)
    assert fitted.rank == k - 1 < fitted.width
    for seed in range(3):
        p = torch.randperm(k, generator=torch.Generator().manual_seed(seed))
        assert relative(procrustes_fit(As[p], At[p], scaling)(X), fitted(X)) < 1e-5


@pytest.mark.parametrize("ds, dt", [(32, 32), (24, 32), (32, 24)])
def test_procrustes_with_full_rank_anchors_is_scipys_orthogonal_procrustes(ds, dt):
    As = randn(120, ds, seed=0) + 0.3
    At = related(As, dt, seed=1)
    X = randn(50, ds, seed=2)
    width = max(ds, dt)
    fitted = procrustes_fit(As, At, "standard")
    assert fitted.rank == min(ds, width) and fitted.width == width
    R, _ = orthogonal_procrustes(padded(As, "standard", width).numpy(), padded(At, "standard", width).numpy())
    s_shift, s_scale = _scaler(As, "standard")
    t_shift, t_scale = _scaler(At, "standard")
    Xs = F.pad((X - s_shift) / s_scale, (0, width - ds))
    expected = (Xs @ torch.from_numpy(R))[:, :dt] * t_scale + t_shift
    assert torch.allclose(fitted(X), expected, atol=1e-10)


def test_procrustes_directions_outside_the_anchor_span_go_to_zero():
    As = randn(20, 64, seed=0)
    At = related(As, 64, seed=1)
    fitted = procrustes_fit(As, At, "center")
    centred = As - As.mean(dim=0)
    outside = randn(5, 64, seed=2)
    outside -= outside @ torch.linalg.pinv(centred) @ centred
    shift = _scaler(At, "center")[0]
    assert torch.allclose(fitted(outside + As.mean(dim=0)), shift.expand(5, -1), atol=1e-10)


# ----------------------------------------------------------------------------- per-side memo


def _side(name, d, seed, k=48, n_train=120, n_test=40, n_val=30):
    n = n_train + n_test + n_val
    Z = (randn(n, 6, seed=seed) @ randn(6, d, seed=seed + 1) + 0.3 * randn(n, d, seed=seed + 2)).float()
    ids = [f"s{i}" for i in range(n)]
    y = torch.arange(n) % 4

    def bank(split, lo, hi):
        return Bank(name, split, Z[lo:hi], ids[lo:hi], y[lo:hi])

    tr = bank("train", 0, n_train)
    return StitchSide(name, tr, bank("test", n_train, n_train + n_test), Z[:k], None,
                      validation=bank("validation", n_train + n_test, n))


def _ctx():
    return FitContext(seed=0, device=torch.device("cpu"), num_classes=4, modality="image", regularizers=[])


def _cell(stitcher, source):
    prediction = stitcher.predict(source)
    return prediction.logits, {k: v.value for k, v in prediction.extras.items()}


STITCHERS = [
    lambda: IRPStitcher(epochs=1, omega=3, delta=0.3),
    lambda: IRPStitcher(epochs=1, omega=3, delta=0.3, completion=True, initial_anchors="dim"),
    lambda: IRPStitcher(epochs=1, omega=2, delta=0.3, pinv="ridge", mean_norm="train"),
    lambda: ProcrustesStitcher(epochs=1),
    lambda: ProcrustesStitcher(epochs=1, scaling="center"),
    lambda: AffineStitcher(epochs=1),
]


@pytest.mark.parametrize("make", STITCHERS, ids=["irp", "irp-completion-dim", "irp-ridge-train", "procrustes",
                                                 "procrustes-center", "affine"])
def test_a_warm_source_memo_gives_the_cells_of_a_cold_one_bit_for_bit(make):
    targets = [_side("t32", 32, 10), _side("t24", 24, 20), _side("t40", 40, 30)]
    stitchers = []
    for target in targets:
        stitchers.append(make())
        stitchers[-1].fit(target, _ctx())
    warm = _side("src", 36, 0)
    entries = []
    for stitcher in stitchers:
        logits, extras = _cell(stitcher, warm)
        cold_logits, cold_extras = _cell(stitcher, _side("src", 36, 0))
        assert torch.equal(logits, cold_logits) and extras == cold_extras
        entries.append(len(warm.memo))
    if getattr(stitchers[0], "initial_anchors", "task") == "task":  # the same source work for every target
        assert entries == [entries[0]] * len(stitchers) and entries[0] > 0
    for stitcher in stitchers:
        _cell(stitcher, warm)
    assert len(warm.memo) == entries[-1]  # nothing recomputed


@pytest.mark.parametrize("make", STITCHERS[::3] + STITCHERS[-1:], ids=["irp", "procrustes", "affine"])
def test_a_side_evaluated_on_validation_is_not_served_the_test_rows(make):
    target, source = _side("t32", 32, 10), _side("src", 36, 0)
    on_test, stitcher = make(), make()
    on_test.fit(target, _ctx())
    _cell(on_test, source)  # the memo now holds work on the test rows
    stitcher.fit(target.evaluated_on("validation"), _ctx())
    on_validation = source.evaluated_on("validation")
    fresh = dataclasses.replace(_side("src", 36, 0), test=source.validation, memo={})
    logits, extras = _cell(stitcher, on_validation)
    expected_logits, expected_extras = _cell(stitcher, fresh)
    assert logits.shape[0] == len(source.validation.ids)
    assert torch.equal(logits, expected_logits) and extras == expected_extras


def _translated(stitcher, source):
    with torch.no_grad():
        return stitcher._translate(source)[0]


def test_irp_and_affine_translations_are_the_direct_computations_bit_for_bit():
    target, source = _side("t32", 32, 10), _side("src", 36, 0)
    irp, affine = IRPStitcher(epochs=1, omega=3, delta=0.3), AffineStitcher(epochs=1)
    for stitcher in (irp, affine):
        stitcher.fit(target, _ctx())
        _translated(stitcher, source)  # warm the memo
    direct, _ = irp_translate(source.test.X, source.anchors, target.anchors, omega=3, delta=0.3, seed=0)
    assert torch.equal(_translated(irp, source), direct)
    assert torch.equal(_translated(affine, source), affine_fit(source.anchors, target.anchors)(source.test.X))
