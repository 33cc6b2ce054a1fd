"""Pages state their protocol, and the stitching page keeps cross-seed pairs apart."""

from __future__ import annotations

import pandas as pd

from relbench.protocol import EvaluationProtocol, describe
from relbench.pages import Page
from relbench_stitching.page import pair_kind_section, pair_kinds, stitching_page


def test_the_protocol_paragraph_states_sizes_validation_evaluation_and_chosen_constants():
    record = {"parameters": {"similarity.shrinkage": {"space": [0.1, 0.5], "relative_to": "", "chosen": 0.5}}}
    text = describe(EvaluationProtocol(train_size=5000, test_size=2000, validation=0.2), [0, 1, 2, 3, 4],
                    [{"fit": 4000, "validation": 1000, "test": 2000}],
                    [("similarity wip", record), ("similarity wip", record)])
    assert "5 seeds [0, 1, 2, 3, 4]" in text and "5,000 training and 2,000 test" in text
    assert "20% of the training draw" in text and "fit 4,000, validation 1,000, test 2,000" in text
    assert "Every seed draws from the same pool" in text and "encoder pairs are not resampled" in text
    assert "**inductive**" in text and "similarity wip: `shrinkage` over [0.1, 0.5]: chosen 0.5 ×2" in text
    assert "transductive" in describe(EvaluationProtocol(evaluation="transductive", validation=0.0), [0], [], [])


def test_a_task_testing_on_the_whole_pool_says_every_seed_tests_on_the_same_samples():
    whole = describe(EvaluationProtocol(train_size=None, test_size=None, validation=0.2), [0, 1, 2], [], [])
    assert "the same test samples in every seed" in whole and "draws its own samples" not in whole
    drawn = describe(EvaluationProtocol(train_size=5000, test_size=2000, validation=0.2), [0, 1, 2], [], [])
    assert "the same test samples" not in drawn


def test_kinds_that_draw_their_own_samples_state_them_with_their_parameters():
    from relbench.leaderboard import protocol_section
    from relbench.testing import make_task
    from relbench_irp.layers import LayerRescaling
    from relbench_relreps.tasks.conv_reconstruction import ConvReconstruction
    from relbench_relreps.tasks.training import RelativeTraining

    frame = pd.DataFrame({"extra": [{}], "unit": ["u"]})
    training = protocol_section(make_task(RelativeTraining, name="t", train_samples=300), frame)
    assert "each draws its own 300 training and 2,000 test images (uniformly, not stratified)" in training
    conv = protocol_section(make_task(ConvReconstruction, name="c"), frame)
    assert "5,000 training and 2,000 test images" in conv and "the autoencoders train on all" in conv
    layers = protocol_section(make_task(LayerRescaling, name="l", encoders=["a"]), frame)
    assert "its own 1,000 training and 1,000 test texts (stratified by class)" in layers
    for text in (training, conv, layers):
        assert "validation part: no constant is chosen on data" in text and "20%" not in text


def test_a_constant_chosen_most_often_at_an_end_of_its_grid_is_flagged():
    def chose(value):
        return ("similarity wip", {"parameters": {"similarity.lam": {"space": [0.1, 0.5, 0.9], "relative_to": "",
                                                                      "chosen": value}}})

    protocol = EvaluationProtocol(train_size=5000, test_size=2000, validation=0.2)
    edge = describe(protocol, [0, 1], [], [chose(0.9), chose(0.9), chose(0.5)])
    assert "chosen 0.9 ×2, 0.5 ×1 (units); the value chosen most often, 0.9, is an end of the grid" in edge
    inside = describe(protocol, [0, 1], [], [chose(0.5), chose(0.5), chose(0.9)])
    assert "an end of the grid" not in inside
    tied = describe(protocol, [0, 1], [], [chose(0.9), chose(0.5)])  # a tie with a value inside: no flag
    assert "an end of the grid" not in tied
    ends = describe(protocol, [0, 1], [], [chose(0.9), chose(0.1)])
    assert "the values chosen most often, 0.9 and 0.1, are ends of the grid" in ends


def _rows():
    identity = lambda arch, seed: {"class": "m:Trained", "params": {"arch": arch, "seed": seed}, "view": "image"}
    inputs = {"encoders": {"mlp-s0": identity("mlp", 0), "mlp-s1": identity("mlp", 1), "cnn-s0": identity("cnn", 0)}}
    rows = []
    for (s, t), v in {("mlp-s0", "mlp-s1"): 0.9, ("mlp-s1", "mlp-s0"): 0.8, ("cnn-s0", "mlp-s0"): 0.3,
                      ("mlp-s0", "cnn-s0"): 0.5}.items():
        rows.append({"selector": "random", "similarity": "cosine", "stitcher": "relative", "regularizer": "-",
                     "source": s, "target": t, "seed": 0, "metric": "accuracy", "value": v, "status": "ok",
                     "inputs": inputs})
    return pd.DataFrame(rows)


def test_pairs_that_differ_only_in_the_encoder_seed_are_reported_apart(tmp_path):
    df = _rows()
    kinds = pair_kinds(df)
    assert kinds[("mlp-s0", "mlp-s1")] == "cross-seed" and kinds[("cnn-s0", "mlp-s0")] == "cross-architecture"
    section = pair_kind_section(df, kinds, "accuracy", "higher")
    assert "| random · cosine · relative | 0.850" in section and "| 0.400" in section
    assert pair_kind_section(df, pair_kinds(df.assign(inputs=[{"encoders": {}}] * 4)), "accuracy", "higher") == ""
    # the page computes the kinds from the full rows (the stored inputs), before narrowing them
    page = stitching_page(df.assign(direction="higher", extra=[{}] * 4, error=None), Page(tmp_path, "t"))
    assert "### Cross-seed and cross-architecture pairs" in page


def test_every_installed_kind_s_seeds_vary_formats_with_its_default_parameters():
    from relbench.plugins import load_registry

    registry = load_registry()
    stated = 0
    for name in registry.names("task_kind"):
        kind = registry.get("task_kind", name)()
        if kind.seeds_vary:
            text = kind.seeds_vary.format(**kind.params())
            assert "{" not in text and text.endswith("."), name
            stated += 1
    assert stated >= 4  # words, layer rescaling, relative training, (conv) reconstruction
