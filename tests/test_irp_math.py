"""IRP mathematics: FPS, the inverse relative projection, Procrustes and affine maps."""

import math

import pytest
import torch
import torch.nn.functional as F

from relbench.interfaces import AnchorContext, Bank
from relbench_irp import fps_indices, irp_translate
from relbench_irp.fps import FPSSelector
from relbench_irp.maps import affine_fit, procrustes_fit
from relbench_irp.translate import (TargetDecoder, centre_normalise, condition_summary, orthogonal_factor,
                                    pseudo_inverse)


def gaussian(n, d, seed, shift=0.5):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=torch.float64) + shift


def orthogonal(d, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))[0]


def anisotropic(n, d, seed):
    """Correlated data: a low-rank signal plus noise (anchors prone to colinearity)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, generator=g, dtype=torch.float64) @ torch.randn(4, d, generator=g, dtype=torch.float64) \
        + 0.3 * torch.randn(n, d, generator=g, dtype=torch.float64)


def cos(a, b):
    return float(F.cosine_similarity(a, b, dim=1).mean())


def test_intra_space_inversion_is_exact_with_enough_anchors():
    d = 32
    X, A = gaussian(400, d, 0), gaussian(2 * d, d, 1)
    Y, info = irp_translate(X, A, A, omega=1, delta=0.0)
    assert info["anchors_kept"].value == 2 * d
    centre = A.mean(dim=0)
    # the direction around the anchor mean is recovered exactly; only the per-row norm is lost
    assert cos(Y - centre, X - centre) > 1 - 1e-9
    assert cos(Y, X) > 0.99


def test_inter_space_recovers_a_rotated_rescaled_translated_copy_of_another_width():
    d, wide = 32, 40
    X, A = gaussian(400, d, 0), gaussian(2 * d, d, 1)
    embed = orthogonal(wide, 2)[:d]  # isometric embedding into a wider space, then rotation
    T = lambda Z: 3.0 * Z @ embed + 2.0  # noqa: E731
    for delta in (0.0, 0.5):
        Y, _ = irp_translate(X, A, T(A), omega=8, delta=delta, seed=3)
        assert Y.shape == (400, wide)
        assert cos(Y, T(X)) > 0.99
    # the default paper setting (δ = 0.7) prunes this 2d-anchor set hard; still a useful map
    Y, info = irp_translate(X, A, T(A), omega=8, delta=0.7)
    assert info["anchors_kept"].value < 2 * d and cos(Y, T(X)) > 0.85


def test_subspaces_average_and_completion_is_exact_for_orthogonal_maps():
    d = 24
    X, A = gaussian(300, d, 0), gaussian(3 * d, d, 1)
    R = orthogonal(d, 5)
    plain, _ = irp_translate(X, A, A @ R, omega=4, delta=0.0)
    completed, _ = irp_translate(X, A, A @ R, omega=4, delta=0.0, completion=True)
    assert torch.allclose(plain, completed, atol=1e-8)
    ridge, _ = irp_translate(X, A, A @ R, omega=1, delta=0.0, pinv="ridge", ridge_alpha=1e-3)
    assert cos(ridge, X @ R) > 0.99


def decaying(n, d, seed, decay):
    """Anisotropic data: dimension j has standard deviation decay**j, plus an offset."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=torch.float64) * decay ** torch.arange(d, dtype=torch.float64) + 0.5


def completion_setting(k, delta, decay, d=32, omega=8):
    """X, its rotated copy XQ and what IRP completion needs, from k anchors pruned to δ."""
    X, A, Q = decaying(400, d, 0, decay), decaying(k, d, 1, decay), orthogonal(d, 2)
    dec = TargetDecoder.build(A @ Q, omega=omega, delta=delta)
    centre, maps = dec.maps(A)
    return X, Q, dec, centre_normalise(X, centre), torch.stack(maps).mean(dim=0)


def pinv_completion(dec, Xs_hat, M):
    """The former completion: decode through the new anchors, pinv of the row-normalised map."""
    return F.normalize(Xs_hat @ pseudo_inverse(F.normalize(M, dim=1))[0], dim=1) * dec.scale + dec.centre


def test_orthogonal_factor_is_the_polar_factor_and_drops_undetermined_directions():
    from scipy.linalg import polar

    M = gaussian(12, 12, 0)
    R = orthogonal_factor(M)
    assert torch.allclose(R, torch.from_numpy(polar(M.numpy())[0]), atol=1e-10)
    assert torch.allclose(R @ R.t(), torch.eye(12, dtype=M.dtype), atol=1e-10)
    wide = gaussian(8, 20, 1)  # different widths: orthonormal rows
    assert torch.allclose(orthogonal_factor(wide) @ orthogonal_factor(wide).t(), torch.eye(8, dtype=M.dtype),
                          atol=1e-10)
    # rank 5 of 12: a partial isometry on M's row and column spaces, zero on its null space
    low = gaussian(12, 5, 2) @ gaussian(5, 12, 3)
    R = orthogonal_factor(low)
    assert torch.allclose(torch.linalg.svdvals(R), torch.tensor([1.0] * 5 + [0.0] * 7, dtype=M.dtype), atol=1e-10)
    null = torch.linalg.svd(low)[0][:, 5:]  # left null space of `low`
    assert torch.allclose(null.t() @ R, torch.zeros(7, 12, dtype=M.dtype), atol=1e-10)


def test_completion_recovers_an_isometry_exactly_from_subspaces_of_fewer_than_d_anchors():
    """Each of the ω pruned subspaces keeps far fewer than d anchors, but together they span
    the space: the averaged map is ``P̄ Q`` (P̄ a mean of projectors) and its polar factor
    is Q itself, whereas the pseudo-inverse decoding amplified the poorly covered
    directions."""
    X, Q, dec, Xs_hat, M = completion_setting(k=64, delta=0.7, decay=0.9)
    assert max(dec.anchors_kept()) < 32 and int(torch.linalg.matrix_rank(M)) == 32
    assert torch.allclose(orthogonal_factor(M), Q, atol=1e-8)
    Y = dec.decode(Xs_hat, M, completion=True)
    truth = X @ Q
    assert cos(Y - dec.centre, Xs_hat @ Q) > 1 - 1e-9  # the direction around the centre, exactly
    assert cos(Y, truth) > 0.99 > cos(dec.decode(Xs_hat, M), truth)
    assert cos(pinv_completion(dec, Xs_hat, M) - dec.centre, Xs_hat @ Q) < 0.2


@pytest.mark.parametrize("k,delta", [(32, 0.7), (16, 0.5)])
def test_completion_recovers_XQ_when_fewer_than_d_anchors_are_kept(k, delta):
    """k ≤ d anchors pruned to fewer than d: the anchors' span misses the low-variance
    directions; completion still recovers XQ closely and beats plain IRP, while the
    pseudo-inverse decoding fell far below both."""
    X, Q, dec, Xs_hat, M = completion_setting(k=k, delta=delta, decay=0.8)
    assert max(dec.anchors_kept()) < 32 and int(torch.linalg.matrix_rank(M)) < 32
    Y = dec.decode(Xs_hat, M, completion=True)
    assert cos(Y - dec.centre, Xs_hat @ Q) > 0.97
    assert cos(Y, X @ Q) > 0.97
    assert cos(Y, X @ Q) > cos(dec.decode(Xs_hat, M), X @ Q)
    assert cos(pinv_completion(dec, Xs_hat, M) - dec.centre, Xs_hat @ Q) < 0.5


def test_pseudo_inverse_matches_torch_and_reports_the_condition_number():
    A = gaussian(20, 12, 4)
    W, cond = pseudo_inverse(A)
    assert torch.allclose(W, torch.linalg.pinv(A.t()), atol=1e-10)
    assert cond == pytest.approx(float(torch.linalg.cond(A)), rel=1e-9)


def test_singular_anchor_matrices_are_counted_not_averaged():
    g = torch.Generator().manual_seed(0)
    low_rank = torch.randn(20, 5, generator=g, dtype=torch.float64) @ torch.randn(5, 12, generator=g,
                                                                                 dtype=torch.float64)
    _, cond = pseudo_inverse(low_rank)  # 20 × 12 of rank 5: σ_6..σ_12 are rounding noise
    assert cond == float("inf")
    assert condition_summary([2.0, float("inf"), 4.0, float("inf")]) == (3.0, 2)
    mean, singular = condition_summary([float("inf")])
    assert math.isnan(mean) and singular == 1
    X = gaussian(50, 12, 1)
    Y, info = irp_translate(X, low_rank, low_rank, omega=4, delta=0.0)
    # every set singular: no condition number to average, so none is reported (a NaN row
    # failed the whole unit: the harness never scores a non-finite number); the count says why
    assert info["irp_singular_anchor_sets"].value == 4 and "condition_number" not in info
    assert {n: d.direction for n, d in info.items()} == {"irp_singular_anchor_sets": "lower", "anchors_kept": "neutral"}
    assert all(math.isfinite(d.value) for d in info.values())
    assert torch.isfinite(Y).all()
    full_rank = gaussian(20, 12, 2)
    _, info = irp_translate(X, full_rank, full_rank, omega=4, delta=0.0)
    assert info["irp_singular_anchor_sets"].value == 0 and math.isfinite(info["condition_number"].value)


def test_fps_picks_are_at_least_delta_apart_and_deterministic():
    X = anisotropic(300, 16, 0)
    for delta in (0.3, 0.6):
        idx = fps_indices(X, delta, seed=7)
        Xn = F.normalize(X[idx], dim=1)
        dist = 1 - (Xn @ Xn.t()).abs()
        off = ~torch.eye(len(idx), dtype=torch.bool)
        assert len(idx) > 1 and float(dist[off].min()) >= delta - 1e-9
        assert torch.equal(idx, fps_indices(X, delta, seed=7))
        assert len(set(idx.tolist())) == len(idx)
    assert not torch.equal(fps_indices(X, 0.3, seed=1), fps_indices(X, 0.3, seed=2))
    assert len(fps_indices(X, 0.0, seed=0)) == 300
    assert len(fps_indices(X, 0.0, seed=0, max_count=10)) == 10


def test_condition_number_drops_and_anchors_shrink_as_delta_rises():
    A = anisotropic(200, 32, 1)
    conds, kept = [], []
    for delta in (0.0, 0.3, 0.5, 0.7):
        dec = TargetDecoder.build(A, omega=4, delta=delta, seed=0)
        conds.append(sum(dec.conds) / 4)
        kept.append(sum(dec.anchors_kept()) / 4)
    assert all(a > b for a, b in zip(conds, conds[1:])), conds
    assert all(a >= b for a, b in zip(kept, kept[1:])), kept


def test_decoder_uses_target_statistics():
    A = gaussian(50, 8, 0, shift=4.0)
    dec = TargetDecoder.build(A, omega=2, delta=0.0)
    assert torch.allclose(dec.centre, A.mean(dim=0))
    assert dec.scale == pytest.approx(float((A - A.mean(dim=0)).norm(dim=1).mean()))
    centre, maps = dec.maps(A)
    Y = dec.decode(centre_normalise(A, centre), maps[0])
    assert torch.allclose((Y - dec.centre).norm(dim=1), torch.full((50,), dec.scale, dtype=A.dtype))
    with pytest.raises(ValueError, match="parallel anchors"):
        dec.maps(A[:10])


def test_procrustes_recovers_a_known_rotation_exactly():
    d = 16
    X, A = gaussian(100, d, 0), gaussian(40, d, 1)
    R = orthogonal(d, 3)
    assert torch.allclose(procrustes_fit(A, A @ R, "none")(X), X @ R, atol=1e-9)
    assert torch.allclose(procrustes_fit(A, A @ R + 5.0, "center")(X), X @ R + 5.0, atol=1e-9)
    # standard scaling: exact for rotations that commute with the per-dimension scaling
    P = torch.eye(d, dtype=torch.float64)[torch.randperm(d, generator=torch.Generator().manual_seed(0))]
    assert torch.allclose(procrustes_fit(A, A @ P * 2.0 + 1.0)(X), X @ P * 2.0 + 1.0, atol=1e-9)
    # different widths: zero padding, the narrower target keeps its own coordinates
    wide = orthogonal(24, 4)[:d]
    assert torch.allclose(procrustes_fit(A, A @ wide, "none")(X), X @ wide, atol=1e-9)


def test_affine_recovers_a_known_affine_map():
    X, A = gaussian(100, 10, 0), gaussian(30, 10, 1)
    g = torch.Generator().manual_seed(2)
    M, b = torch.randn(10, 14, generator=g, dtype=torch.float64), torch.randn(14, generator=g, dtype=torch.float64)
    assert torch.allclose(affine_fit(A, A @ M + b)(X), X @ M + b, atol=1e-8)


def _ctx(banks, excluded=frozenset(), k=12, seed=0):
    ids = next(iter(banks.values())).ids
    return AnchorContext(num_anchors=k, seed=seed, ids=ids, labels=None, banks=banks, excluded=excluded,
                         device=torch.device("cpu"), views={}, pool_banks=lambda n: {})


def test_fps_selector_is_deterministic_spread_and_respects_exclusion():
    ids = [f"s{i}" for i in range(200)]
    X = anisotropic(200, 16, 0).float()
    banks = {"a": Bank("a", "train", X, ids), "b": Bank("b", "train", X @ orthogonal(16, 1).float(), ids)}
    sel = FPSSelector()
    first = sel.select(_ctx(banks))
    assert len(first) == 12 and first.ids == sel.select(_ctx(banks)).ids
    # a rotation does not change cosines: the mean over both banks equals one bank's FPS
    assert first.ids == FPSSelector(bank="a").select(_ctx(banks)).ids
    spread = FPSSelector(delta=0.5).select(_ctx(banks, k=200))
    Xc = X - X.mean(dim=0)
    rows = F.normalize(Xc[[ids.index(i) for i in spread.ids]], dim=1)
    off = ~torch.eye(len(spread), dtype=torch.bool)
    assert float((1 - (rows @ rows.t()).abs())[off].min()) >= 0.5 - 1e-6
    with pytest.raises(ValueError, match="excluded"):
        sel.select(_ctx(banks, excluded=frozenset({"b"})))
    with pytest.raises(ValueError, match="delta"):
        FPSSelector(delta=1.5)


def test_procrustes_with_fewer_anchors_than_dimensions_matches_full_svd_on_the_span():
    """The anchor-span solution translates every anchor-span vector exactly as the
    reference full-SVD solution does, sends the rest to zero, and recovers a rotation
    restricted to that span."""
    g = torch.Generator().manual_seed(3)
    k, w = 20, 64
    Xs = torch.randn(k, w, generator=g, dtype=torch.float64)
    Q, _ = torch.linalg.qr(torch.randn(w, w, generator=g, dtype=torch.float64))
    Yt = Xs @ Q
    U, _, Vh = torch.linalg.svd(Xs.t() @ Yt)
    full, thin = U @ Vh, procrustes_fit(Xs, Yt, "none")
    assert thin.rank == k and thin.width == w
    probe = torch.randn(5, k, generator=g, dtype=torch.float64) @ Xs  # vectors in the anchors' span
    assert torch.allclose(thin(probe), probe @ full, atol=1e-8)
    assert torch.allclose(thin(Xs), Yt, atol=1e-8)
    assert F.cosine_similarity(thin(probe), probe @ Q, dim=1).min() > 1 - 1e-10
    outside = torch.randn(5, w, generator=g, dtype=torch.float64)
    outside -= outside @ torch.linalg.pinv(Xs) @ Xs  # orthogonal to the anchors' span
    assert thin(outside).abs().max() < 1e-10
