"""The conv-reconstruction kind (Moschella et al. 2023, §5.1, Table 3 with convolutional
AEs and VAEs): the VAE's ELBO terms against slow references, the relative bottleneck's
gradient, the decoder's shape, and a tiny run on scikit-learn digits through
relbench.testing.TaskRunDouble."""

import re

import numpy as np
import pandas as pd
import pytest
import torch

from relbench.testing import TaskRunDouble, make_task
from relbench_relreps import ConvReconstruction
from relbench_relreps.similarities import cosine_matrix
from relbench_relreps.tasks.conv_autoencoder import (ConvAutoencoder, gaussian_kl, loss, reparameterise, stitch,
                                                     train_conv_autoencoder)
from test_relreps_tasks import _digits_data, assert_directions, page_of

TINY = dict(latent_dim=8, hidden=8, epochs=2, train_samples=300, test_samples=100, num_anchors=16)


def _moments(n: int = 4, d: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=torch.float64), torch.randn(n, d, generator=g, dtype=torch.float64)


def test_the_closed_form_kl_matches_torch_distributions():
    mean, logvar = _moments()
    posterior = torch.distributions.Normal(mean, (0.5 * logvar).exp())
    prior = torch.distributions.Normal(torch.zeros_like(mean), torch.ones_like(mean))
    expected = torch.distributions.kl_divergence(posterior, prior).sum(-1)
    assert torch.allclose(gaussian_kl(mean, logvar), expected, atol=1e-12)
    assert torch.allclose(gaussian_kl(torch.zeros(2, 5), torch.zeros(2, 5)), torch.zeros(2))  # q = p


def test_the_closed_form_kl_matches_a_monte_carlo_estimate():
    mean, logvar = _moments(n=2, d=3, seed=1)
    logvar = logvar.clamp(-1, 1)  # a moderate spread keeps the estimate's variance small
    g = torch.Generator().manual_seed(2)
    noise = torch.randn(400_000, *mean.shape, generator=g, dtype=torch.float64)
    z = reparameterise(mean, logvar, noise)
    posterior = torch.distributions.Normal(mean, (0.5 * logvar).exp())
    prior = torch.distributions.Normal(0.0, 1.0)
    estimate = (posterior.log_prob(z) - prior.log_prob(z)).sum(-1).mean(0)  # E_q[log q − log p]
    assert torch.allclose(estimate, gaussian_kl(mean, logvar), atol=0.02)


def test_the_reparameterised_sample_has_the_posteriors_mean_and_variance():
    mean = torch.tensor([[1.5, -2.0, 0.0]], dtype=torch.float64)
    logvar = torch.tensor([[0.0, np.log(4.0), np.log(0.25)]], dtype=torch.float64)
    torch.manual_seed(0)
    z = reparameterise(mean.expand(200_000, 3), logvar.expand(200_000, 3))
    assert torch.allclose(z.mean(0), mean[0], atol=0.02)
    assert torch.allclose(z.var(0), logvar[0].exp(), rtol=0.02)
    # exactly mean + σ · noise, differentiable in both moments
    mean.requires_grad_(True)
    logvar.requires_grad_(True)
    noise = torch.tensor([[1.0, -1.0, 2.0]], dtype=torch.float64)
    out = reparameterise(mean, logvar, noise)
    assert torch.allclose(out, torch.tensor([[2.5, -4.0, 1.0]], dtype=torch.float64))
    out.sum().backward()
    assert torch.allclose(logvar.grad, 0.5 * (0.5 * logvar).exp() * noise)


def test_the_loss_is_the_summed_negative_elbo_over_the_pixel_count():
    torch.manual_seed(0)
    model = ConvAutoencoder((1, 8, 8), latent=4, channels=4, relative=False, num_anchors=3, variational=True)
    x, anchors = torch.rand(5, 1, 8, 8), torch.rand(3, 1, 8, 8)
    torch.manual_seed(1)
    got = loss(model, x, anchors, beta=2.0)
    torch.manual_seed(1)
    recon, mean, logvar = model(x, anchors)  # the same sample
    summed = ((recon - x) ** 2).sum(dim=(1, 2, 3)) + 2.0 * gaussian_kl(mean, logvar)
    assert torch.allclose(got, summed.mean() / 64)
    ae = ConvAutoencoder((1, 8, 8), latent=4, channels=4, relative=False, num_anchors=3, variational=False)
    assert torch.allclose(loss(ae, x, anchors, beta=2.0), ((ae(x, anchors)[0] - x) ** 2).mean())  # no KL


def test_a_vae_decodes_a_sample_while_training_and_the_mean_at_test_time():
    torch.manual_seed(0)
    model = ConvAutoencoder((1, 8, 8), latent=4, channels=4, relative=True, num_anchors=3, variational=True)
    x, anchors = torch.rand(5, 1, 8, 8), torch.rand(3, 1, 8, 8)
    assert not torch.equal(model(x, anchors)[0], model(x, anchors)[0])  # training mode: samples
    model.eval()
    mean = model.moments(x)[0]
    expected = model.decoder(cosine_matrix(mean, model.moments(anchors)[0]))  # the anchors' means
    assert torch.equal(model(x, anchors)[0], expected) and torch.allclose(stitch(model, model, x, anchors), expected)


@pytest.mark.parametrize("variational", [False, True])
def test_the_relative_bottlenecks_gradient_matches_finite_differences(variational):
    torch.manual_seed(0)
    model = ConvAutoencoder((1, 8, 8), latent=4, channels=2, relative=True, num_anchors=3,
                            variational=variational).double().eval()
    x = torch.rand(2, 1, 8, 8, dtype=torch.float64, requires_grad=True)
    anchors = torch.rand(3, 1, 8, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, a: model.code(x, a), (x, anchors))
    z = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda z, a: model.project(z, a), (z, anchors))


@pytest.mark.parametrize("shape", [(28, 28), (8, 8), (7, 9)])
@pytest.mark.parametrize("relative, variational", [(False, False), (True, True)])
def test_the_decoder_gives_back_the_input_shape(shape, relative, variational):
    model = ConvAutoencoder((1, *shape), latent=6, channels=4, relative=relative, num_anchors=5,
                            variational=variational)
    x = torch.rand(3, 1, *shape)
    recon, mean, logvar = model(x, torch.rand(5, 1, *shape))
    assert recon.shape == x.shape and mean.shape == (3, 6)
    assert (logvar is None) != variational and ((recon > 0) & (recon < 1)).all()


def test_training_is_deterministic_per_seed_and_lowers_the_error():
    X, anchors = torch.rand(64, 1, 8, 8), torch.rand(4, 1, 8, 8)
    kw = dict(variational=True, relative=True, latent=4, channels=4, lr=1e-2, batch_size=16, beta=1.0)
    untrained = train_conv_autoencoder(X, anchors, seed=3, epochs=0, **kw)
    a, b = (train_conv_autoencoder(X, anchors, seed=3, epochs=3, **kw) for _ in range(2))
    assert torch.equal(stitch(a, a, X, anchors), stitch(b, b, X, anchors))
    error = lambda m: ((stitch(m, m, X, anchors) - X) ** 2).mean()  # noqa: E731
    assert error(a) < error(untrained)


def test_a_tiny_run_gives_rows_for_both_models_and_bottlenecks_and_a_page_beside_the_paper(tmp_path):
    task = make_task(ConvReconstruction, seeds=[0, 1], dataset="mnist", **TINY)
    run = TaskRunDouble(task, {}, dataset=_digits_data(), tmp=tmp_path)
    assert len(run.kind.plan(task)) == 2 * 1 * 2 * 2  # seeds × selectors × models × bottlenecks
    run.run()
    df = run.frame()
    units = df[["seed", "selector", "model", "bottleneck"]].drop_duplicates()
    assert len(units) == 8 and len(df) == 8 * 4  # each unit: 2 × 2 encoder × decoder pairs
    assert_directions(df, {"mse": "lower"})
    assert set(zip(df.model, df.bottleneck)) == {(m, b) for m in ("ae", "vae") for b in ("absolute", "relative")}
    assert set(df[df.seed == 1].encoder_seed) == {1000, 1001} and df.value.between(0, 1).all()
    for model in ("ae", "vae"):
        for bottleneck in ("absolute", "relative"):
            assert (tmp_path / "figures" / f"conv_reconstruction_{model}_{bottleneck}.png").stat().st_size > 1000
    md = run.kind.page(df, page_of(tmp_path))
    assert "figures/t/conv_reconstruction_vae_relative.png" in md and "2 task seed(s)" in md and "mse ↓" in md
    for numbers in ("0.66 → 97.79 (148.2×)", "3.59 → 6.37 (1.8×)", "1.31 → 98.51", "6.81 → 24.03"):
        assert numbers in md
    assert "27.2–148.2 with absolute bottlenecks and by 1.8–4.5 with relative" in md
    stitched = df[df.encoder_seed != df.decoder_seed]
    own = df[df.encoder_seed == df.decoder_seed]
    vae_rel = [frame.query("model == 'vae' and bottleneck == 'relative'").groupby("seed").value.mean().mean()
               for frame in (own, stitched)]
    ratio = f"{vae_rel[0]:.4f} → {vae_rel[1]:.4f} ({vae_rel[1] / vae_rel[0]:.1f}×)"
    assert re.search(rf"\| vae +\| relative +\| random +\| {re.escape(ratio)}", md)


def test_claims_compare_stitched_pairs_and_the_headline_names_the_model():
    rows = [{"seed": 0, "model": m, "bottleneck": b, "selector": "random", "encoder_seed": i, "decoder_seed": j,
             "metric": "mse", "value": (0.02 if b == "relative" else 0.2) + (0.01 if m == "vae" else 0) if i != j
             else 0.001, "direction": "lower", "status": "ok"}
            for m in ("ae", "vae") for b in ("absolute", "relative") for i in (0, 1) for j in (0, 1)]
    df = pd.DataFrame(rows)
    kind = ConvReconstruction()
    kept = kind.claim_rows(df)
    assert len(kept) == 8 and (kept.encoder_seed != kept.decoder_seed).all()
    headline = kind.headline(df)
    assert headline["best"] == "ae · relative · random · stitched" and headline["score"] == pytest.approx(0.02)
    assert headline["reference"] == pytest.approx(0.2)


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="models"):
        ConvReconstruction(models=["ae", "gan"])
    with pytest.raises(ValueError, match="models"):
        ConvReconstruction(models=[])
    with pytest.raises(ValueError, match="beta"):
        ConvReconstruction(beta=-1.0)
    with pytest.raises(ValueError, match="model_seeds"):
        ConvReconstruction(model_seeds=[0])


def _stitching_rows(seeds=range(5)) -> pd.DataFrame:
    """Per seed, model and bottleneck, 2 × 2 encoder × decoder pairs: stitched relative
    pairs score 0.03 (+ noise), stitched absolute ones 0.1; non-stitched pairs score
    0.001 with an absolute bottleneck and 0.5 with a relative one, so that a claim that
    let them in would not hold."""
    g = np.random.default_rng(0)
    stitched = {"relative": 0.03, "absolute": 0.1}
    own = {"relative": 0.5, "absolute": 0.001}
    return pd.DataFrame([
        {"seed": s, "model": m, "bottleneck": b, "selector": "random", "encoder_seed": 1000 * s + i,
         "decoder_seed": 1000 * s + j, "metric": "mse", "direction": "lower", "status": "ok",
         "value": (stitched[b] + g.normal(0, 0.002)) if i != j else own[b]}
        for s in seeds for m in ("ae", "vae") for b in ("absolute", "relative") for i in (0, 1) for j in (0, 1)])


def test_the_experiments_files_claims_and_published_numbers_compare_stitched_pairs():
    from pathlib import Path

    from relbench.claims import claims_section
    from relbench.config import load_suite
    from relbench.leaderboard import published_section
    from relbench.plugins import load_registry
    from relbench.uncertainty import HOLDS

    suite = load_suite(Path(__file__).resolve().parents[1] / "tasks.yaml", load_registry())
    tasks = {t.name: t for t in suite.tasks if t.kind.name == "conv-reconstruction"}
    assert set(tasks) == {"mnist-conv-reconstruction", "fashion-conv-reconstruction"}
    df = _stitching_rows()
    for task in tasks.values():
        assert task.seeds == [0, 1, 2, 3, 4] and task.num_anchors == 500
        kind = task.kind.build()
        text = claims_section(kind, df, task.claims, {})
        assert text.count(f"**{HOLDS}**") == 2 and "paired on the 10 encoder_seed/decoder_seed values" in text
        table = published_section(kind, df, task.published)
        ours = df[(df.model == "ae") & (df.bottleneck == "relative") & (df.encoder_seed != df.decoder_seed)]
        row = next(line for line in table.splitlines() if line.startswith("| ae · relative"))
        assert f"{ours.groupby('seed').value.mean().mean():.3f}"[:5] in row
    assert {p["value"] for p in tasks["mnist-conv-reconstruction"].published} == {97.79, 2.83, 98.51, 13.43}
    assert {p["value"] for p in tasks["fashion-conv-reconstruction"].published} == {120.54, 6.37, 118.96, 24.03}
