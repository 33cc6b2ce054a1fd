"""Class-level parallel anchors (relbench_param.class_parallel): matched by class across
encoders, never by sample, seeded; and the per-encoder anchor ids they rely on."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from relbench.errors import ConfigError
from relbench.interfaces import AnchorContext, Anchors, Bank
from relbench_param.class_parallel import ClassParallelAnchors, class_offset
from relbench_relreps import RandomAnchors

IDS = [f"s{i}" for i in range(120)]
LABELS = np.array([i % 5 for i in range(120)])  # 24 samples per class
CLASS_OF = dict(zip(IDS, LABELS.tolist()))


def _ctx(k=20, seed=0, encoders=("src", "tgt"), labels=LABELS, ids=IDS):
    return AnchorContext(num_anchors=k, seed=seed, ids=list(ids), labels=labels, banks={}, excluded=frozenset(),
                         device=torch.device("cpu"), views={e: "x" for e in encoders},
                         pool_banks=lambda name: {})


@pytest.mark.parametrize("seed", [0, 1, 7])
@pytest.mark.parametrize("encoders", [("src", "tgt"), ("a", "b", "c", "d")])
def test_every_anchor_has_one_class_and_a_different_sample_in_each_space(seed, encoders):
    anchors = ClassParallelAnchors().select(_ctx(k=30, seed=seed, encoders=encoders))
    assert sorted(anchors.encoder_ids) == sorted(encoders)
    for a, b in itertools.combinations(encoders, 2):
        src, tgt = anchors.ids_for(a), anchors.ids_for(b)
        assert [CLASS_OF[i] for i in src] == [CLASS_OF[i] for i in tgt]
        assert all(i != j for i, j in zip(src, tgt))
    assert anchors.info["class_parallel_shared_pairs"] == 0
    for e in encoders:
        assert len(set(anchors.ids_for(e))) == 30  # no sample twice within one space


def test_spaces_share_no_sample_at_all_when_every_class_has_enough():
    # 4 encoders × at most 24/4 anchors a class: the four anchor sets are disjoint
    anchors = ClassParallelAnchors().select(_ctx(k=20, encoders=("a", "b", "c", "d")))
    sets = [set(anchors.ids_for(e)) for e in "abcd"]
    assert all(not (x & y) for x, y in itertools.combinations(sets, 2))


def test_the_first_encoder_reads_the_random_draw():
    ctx = _ctx(k=25, seed=3)
    anchors = ClassParallelAnchors().select(ctx)
    assert anchors.ids == anchors.ids_for("src") == RandomAnchors().select(ctx).ids
    assert anchors.ids_for("tgt") != anchors.ids


def test_deterministic_per_seed_and_different_across_seeds():
    first = ClassParallelAnchors().select(_ctx(seed=4))
    torch.manual_seed(123)
    again = ClassParallelAnchors().select(_ctx(seed=4))
    assert (again.ids, again.encoder_ids) == (first.ids, first.encoder_ids)
    assert ClassParallelAnchors().select(_ctx(seed=5)).encoder_ids != first.encoder_ids


def test_a_class_with_two_samples_still_pairs_different_samples_and_a_singleton_is_counted():
    ids = ["a0", "a1", "b0"] + [f"c{i}" for i in range(10)]
    labels = np.array([0, 0, 1] + [2] * 10)
    anchors = ClassParallelAnchors().select(_ctx(k=len(ids), ids=ids, labels=labels))
    src, tgt = anchors.ids_for("src"), anchors.ids_for("tgt")
    pairs = dict(zip(src, tgt))
    assert pairs["a0"] == "a1" and pairs["a1"] == "a0"  # the two-sample class swaps its samples
    assert pairs["b0"] == "b0"  # a one-sample class cannot do otherwise ...
    assert anchors.info["class_parallel_shared_pairs"] == 1  # ... and is counted


def test_offsets_are_distinct_when_a_class_has_as_many_samples_as_encoders():
    for encoders in range(2, 6):
        for members in range(encoders, 30):
            offsets = [class_offset(j, encoders, members) for j in range(encoders)]
            assert len(set(offsets)) == encoders and max(offsets) < members


def test_each_bank_realises_its_own_samples():
    anchors = ClassParallelAnchors().select(_ctx(k=10))
    X = torch.arange(len(IDS), dtype=torch.float32).unsqueeze(1)
    for encoder in ("src", "tgt"):
        A = anchors.realise(Bank(encoder, "train", X, list(IDS)))
        assert A.squeeze(1).tolist() == [float(IDS.index(i)) for i in anchors.ids_for(encoder)]


def test_it_refuses_a_kind_that_names_fewer_than_two_encoders_or_unlabelled_data():
    with pytest.raises(ConfigError, match="names no two encoders"):
        ClassParallelAnchors().select(_ctx(encoders=()))
    with pytest.raises(ConfigError, match="labelled data set"):
        ClassParallelAnchors().select(_ctx(labels=None))
    with pytest.raises(ConfigError, match="between 1 and 120 anchors"):
        ClassParallelAnchors().select(_ctx(k=121))


def test_anchors_refuse_encoder_ids_of_another_length():
    with pytest.raises(ValueError, match=r"encoder_ids of \['b'\] do not hold one id per entry"):
        Anchors(ids=["x", "y"], encoder_ids={"a": ["x", "y"], "b": ["x"]})
    assert Anchors(ids=["x"]).ids_for("any") == ["x"]


def test_learned_recipes_keep_each_encoders_ids_in_the_cache(tmp_path):
    from relbench.cache import ArtefactCache, identity_key
    from relbench.sharing import _learn, _read_anchors

    class Learned(ClassParallelAnchors):
        learns_from_banks = True

    cache, ctx, identity = ArtefactCache(tmp_path), _ctx(k=8), {"anchors": "a recipe"}
    learned = _learn(cache, identity_key(identity), identity, Learned(), ctx)
    read = _read_anchors(cache, identity_key(identity), identity, ctx)
    assert read is not None and (read.ids, read.encoder_ids) == (learned.ids, learned.encoder_ids)
    assert read.ids_for("tgt") != read.ids


def test_a_stitching_task_runs_with_class_parallel_anchors(registry, write_yaml, tmp_path):
    from relbench.config import load_suite
    from relbench.results import ResultStore
    from relbench.runner import Runner

    path = write_yaml("""\
        suite: {seeds: [0], num_anchors: 16, output: results}
        tasks:
          - name: blobs
            dataset: {name: toy-blobs, params: {classes: 4}}
            encoders:
              - {name: toy-rotated, label: a, params: {seed: 1}}
              - {name: toy-rotated, label: b, params: {seed: 2, scale: 3.0}}
            grid:
              selectors: [parallel, class-parallel]
              similarities: [cosine]
              stitchers: [{name: relative, params: {epochs: 2}}]
            metrics: [accuracy]
        """)
    stats = Runner(load_suite(path, registry), registry, quiet=True).run()
    assert not stats.failures, stats.failures
    df = ResultStore(tmp_path / "results").load("blobs")
    ours = df[df["selector"] == "class-parallel"]
    assert set(zip(ours["source"], ours["target"])) == {("a", "a"), ("a", "b"), ("b", "a"), ("b", "b")}
    assert all(e["class_parallel_shared_pairs"] == 0 for e in ours["extra"])
