"""The relative-training task kind (Moschella et al. 2023, §4.3 Table 2, §4.2 Figure 3
right): its bottleneck's gradient and invariances, and a tiny run on scikit-learn digits
through relbench.testing.TaskRunDouble."""

import numpy as np
import pandas as pd
import pytest
import torch

from relbench.leaderboard import published_section
from relbench.testing import TaskRunDouble, make_task
from relbench_relreps import RelativeTraining
from relbench_relreps.tasks.bottleneck_cnn import bottleneck
from test_relreps_tasks import _digits_data, assert_directions, page_of

SMALL = dict(latent_dim=16, epochs=3, lr=3e-3, train_samples=1000, test_samples=300, num_anchors=24)


def test_relative_bottleneck_gradient_matches_finite_differences():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(5, 4, dtype=torch.float64, generator=g, requires_grad=True)
    za = torch.randn(3, 4, dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: bottleneck(a, b, relative=True), (z, za))


def test_relative_bottleneck_is_invariant_to_rotation_and_rescaling_absolute_is_not():
    g = torch.Generator().manual_seed(1)
    z, za = torch.randn(20, 6, generator=g), torch.randn(7, 6, generator=g)
    Q = torch.linalg.qr(torch.randn(6, 6, generator=g))[0]
    for moved, moved_anchors in ((z @ Q, za @ Q), (3.5 * z, 3.5 * za)):
        torch.testing.assert_close(bottleneck(moved, moved_anchors, True), bottleneck(z, za, True))
        assert (bottleneck(moved, moved_anchors, False) - bottleneck(z, za, False)).abs().max() > 0.1
    assert bottleneck(z, za, True).shape == (20, 7) and bottleneck(z, za, False).shape == (20, 6)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rt")
    run = TaskRunDouble(make_task(RelativeTraining, seeds=[0, 1], **SMALL), {}, dataset=_digits_data(), tmp=tmp)
    run.run()
    return run, run.frame(), tmp


def test_a_tiny_run_stores_every_pair_and_epoch(tiny_run):
    run, df, _ = tiny_run
    assert len(run.computed) == run.planned() == 2 * 2  # seeds × bottlenecks
    assert_directions(df, {"weighted_f1": "higher", "accuracy": "higher", "latent_similarity": "neutral",
                           "pearson_r": "higher"})
    f1 = df[df.metric == "weighted_f1"]
    assert len(f1) == 2 * 2 * 4 and f1.per_sample.notna().all()  # seeds × bottlenecks × (2 × 2 pairs)
    assert set(f1[f1.seed == 1].encoder_seed) == {1000, 1001} == set(f1[f1.seed == 1].decoder_seed)
    assert ((f1.encoder_seed == f1.decoder_seed) == (f1.pairs == "non-stitched")).all()
    assert f1[f1.pairs == "non-stitched"].value.min() > 0.3  # trained: well above chance (0.1)
    acc = df[df.metric == "accuracy"]
    assert len(acc) == 2 * 2 * 2 * 4 and set(acc.epoch) == {0, 1, 2, 3}  # seeds × bottlenecks × nets × epochs
    # the reference (the first model seed) has no similarity to itself; the other net one per epoch
    sim = df[df.metric == "latent_similarity"]
    assert set(sim.encoder_seed) == {1, 1001} and len(sim) == 2 * 2 * 4 and sim.value.between(-1, 1).all()
    assert (sim.extra.map(lambda e: e["reference_seed"]) == sim.encoder_seed - 1).all()
    r = df[df.metric == "pearson_r"]
    assert len(r) == 2 * 2 and (r.status == "ok").all()
    one = df[(df.seed == 0) & (df.bottleneck == "absolute") & (df.encoder_seed == 1)]
    curve = one[one.metric.isin(["accuracy", "latent_similarity"])].pivot_table(
        index="epoch", columns="metric", values="value")
    expected = np.corrcoef(curve["accuracy"], curve["latent_similarity"])[0, 1]
    assert r[(r.seed == 0) & (r.bottleneck == "absolute")].value.item() == pytest.approx(expected)


def test_the_page_shows_table_2_beside_the_paper_and_the_epoch_figure(tiny_run):
    run, df, tmp = tiny_run
    md = run.kind.page(df, page_of(tmp))
    own = df[(df.metric == "weighted_f1") & (df.pairs == "non-stitched") & (df.bottleneck == "relative")]
    assert f"{own.groupby('seed').value.mean().mean() * 100:.2f} [" in md
    for number in ("97.91", "97.95", "90.19", "90.32"):
        assert number in md
    assert "What differs here" in md and "pearson_r ↑" in md and "figures/t/relative_training_epochs.png" in md
    assert (tmp / "boards" / "figures" / "t" / "relative_training_epochs.svg").exists()
    published = [{"bottleneck": "relative", "pairs": "non-stitched", "metric": "weighted_f1", "value": 0.9791,
                  "differs": "a small CNN"}]
    section = published_section(run.kind, df, published)
    assert "0.979" in section and "relative · non-stitched [1]" in section and "1. a small CNN" in section


def test_the_headline_is_the_relative_non_stitched_f1_beside_the_absolute(tiny_run):
    run, df, _ = tiny_run
    headline = run.kind.headline(df)
    own = df[(df.metric == "weighted_f1") & (df.pairs == "non-stitched")]
    means = own.groupby(["bottleneck", "seed"]).value.mean().groupby("bottleneck").mean()
    assert headline["best"] == "relative · random · non-stitched" and headline["metric"] == "weighted_f1"
    assert headline["score"] == pytest.approx(means["relative"])
    assert headline["reference"] == pytest.approx(means["absolute"])
    assert "reference is the best non-stitched weighted F1 of an absolute" in run.kind.meaning(headline, "higher")
    assert run.kind.headline(df[df.bottleneck == "absolute"]) is None


def test_settings_are_checked():
    with pytest.raises(ValueError, match="model_seeds"):
        RelativeTraining(model_seeds=[3])
    with pytest.raises(ValueError, match="epochs"):
        RelativeTraining(epochs=0)


def test_the_experiments_claim_is_checked_on_the_non_stitched_pairs(tiny_run):
    from relbench.claims import claims_section

    run, df, _ = tiny_run
    claim = {"claim": "not detrimental", "metric": "weighted_f1", "test": "non-inferiority",
             "better": {"bottleneck": "relative", "pairs": "non-stitched"},
             "worse": {"bottleneck": "absolute", "pairs": "non-stitched"}}
    line = claims_section(run.kind, df, [claim], {})
    assert "not detrimental: **" in line and "not measured" not in line and "non-inferiority" in line
    assert "paired on the 4 encoder_seed/decoder_seed values both sides have" in line  # 2 seeds × 2 own pairs


def test_table_2_s_intervals_stay_inside_the_score_s_range(tmp_path):
    # stitched weighted F1 of 0.00, 0.00 and 0.20 over three seeds: the t-interval of 6.67 reaches below 0
    rows = [{"metric": "weighted_f1", "value": v, "status": "ok", "bottleneck": "absolute", "selector": "random",
             "pairs": "stitched", "seed": s, "direction": "higher", "epoch": None}
            for s, v in enumerate((0.0, 0.0, 0.2))]
    text = RelativeTraining().page(pd.DataFrame(rows), page_of(tmp_path))
    assert "6.67 [0.00, " in text and "cut at the score's range [0, 100]" in text
