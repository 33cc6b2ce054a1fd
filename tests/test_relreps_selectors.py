"""Anchor selectors: counts, determinism, class coverage, shared ids, OOD pools, errors."""

import numpy as np
import pytest
import torch

from relbench.errors import ConfigError
from relbench.interfaces import AnchorContext, Bank
from relbench_relreps import OODAnchors, ParallelAnchors, RandomAnchors, StratifiedAnchors

IDS = [f"s{i}" for i in range(100)]
LABELS = np.array([i % 7 for i in range(100)])


def _bank(name, ids, d=4):
    return Bank(encoder=name, split="train", X=torch.randn(len(ids), d), ids=list(ids))


def _ctx(k=20, seed=0, banks=None, pool=None):
    return AnchorContext(num_anchors=k, seed=seed, ids=IDS, labels=LABELS, banks=banks or {},
                         excluded=frozenset(), device=torch.device("cpu"), views={},
                         pool_banks=pool or (lambda name: {}))


@pytest.mark.parametrize("selector", [RandomAnchors(), StratifiedAnchors(), ParallelAnchors()])
def test_count_uniqueness_and_determinism(selector):
    a = selector.select(_ctx(seed=3))
    assert len(a) == 20 and len(set(a.ids)) == 20 and set(a.ids) <= set(IDS)
    assert selector.select(_ctx(seed=3)).ids == a.ids
    assert selector.select(_ctx(seed=4)).ids != a.ids


def test_stratified_covers_every_class_evenly():
    ids = StratifiedAnchors().select(_ctx(k=21)).ids
    counts = np.bincount([LABELS[IDS.index(i)] for i in ids], minlength=7)
    assert counts.tolist() == [3] * 7
    ids = StratifiedAnchors().select(_ctx(k=9)).ids
    assert set(LABELS[IDS.index(i)] for i in ids) == set(range(7))


def test_parallel_anchors_are_the_same_ids_in_every_bank():
    banks = {"en": _bank("en", IDS), "es": _bank("es", IDS[::2] + IDS[1:40:2], d=6)}
    anchors = ParallelAnchors().select(_ctx(k=30, banks=banks))
    held = set(IDS[::2] + IDS[1:40:2])
    assert set(anchors.ids) <= held
    rows = {name: anchors.realise(bank) for name, bank in banks.items()}
    for name, bank in banks.items():  # row j of every bank's anchors is sample ids[j]
        idx = [bank.ids.index(i) for i in anchors.ids]
        assert torch.equal(rows[name], bank.X[idx])


def test_ood_anchors_come_from_the_pool():
    pool_ids = [f"ui{i}" for i in range(50)]
    pool = {"en": _bank("en", pool_ids), "fr": _bank("fr", pool_ids[5:])}
    anchors = OODAnchors(dataset="ui-strings").select(_ctx(k=10, pool=lambda name: pool if name == "ui-strings"
                                                           else {}))
    assert anchors.pool == "ui-strings" and set(anchors.ids) <= set(pool_ids[5:])


def test_too_many_anchors_is_a_config_error_with_numbers():
    for selector in (RandomAnchors(), StratifiedAnchors(), ParallelAnchors()):
        with pytest.raises(ConfigError, match=r"needs 500 anchors .* only 100 .*num_anchors"):
            selector.select(_ctx(k=500))
    pool = {"en": _bank("en", ["a", "b", "c"])}
    with pytest.raises(ConfigError, match="only 3"):
        OODAnchors().select(_ctx(k=5, pool=lambda name: pool))
