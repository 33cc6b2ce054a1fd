"""Shared work (relbench.sharing): one head fit per (target, seed, settings), reused by
every stitcher and selector that trains it, and results identical to units computed
apart."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from relbench.interfaces import Bank, DatasetData
from relbench.protocol import EvaluationProtocol
from relbench.sharing import SharedWork
from relbench.testing import TaskRunDouble, make_task, spec
from relbench_irp.stitchers import AffineStitcher, IRPStitcher, ProcrustesStitcher
from relbench_metrics import Accuracy
from relbench_relreps import AbsoluteDecoder, NonStitched, RandomAnchors, StratifiedAnchors
from relbench_relreps.similarities import Cosine
from relbench_stitching.kind import Stitching

DATA = DatasetData("blobs", {}, [str(i) for i in range(4)], {"x": "image"}, "x")
HEAD = {"epochs": 3, "batch_size": 32}


def _banks() -> dict:
    g = torch.Generator().manual_seed(0)
    centres = torch.randn(4, 12, generator=g) * 3
    Q = torch.linalg.qr(torch.randn(12, 12, generator=g))[0]
    out = {}
    for split, n in (("train", 160), ("validation", 40), ("test", 80)):
        y = torch.arange(n) % 4
        base = centres[y] + torch.randn(n, 12, generator=g)
        ids = [f"{split}{i}" for i in range(n)]
        out[split] = {"a": Bank("a", split, base, ids, y), "b": Bank("b", split, base @ Q, ids, y)}
    return out


STITCHERS = [spec(AbsoluteDecoder, **HEAD), spec(NonStitched, **HEAD), spec(IRPStitcher, omega=2, **HEAD),
             spec(ProcrustesStitcher, **HEAD), spec(AffineStitcher, **HEAD)]
SELECTORS = [spec(RandomAnchors), spec(StratifiedAnchors)]


def _run(stitchers, selectors, seeds=(0, 1)) -> TaskRunDouble:
    task = make_task(Stitching, encoders=["a", "b"], metrics=[spec(Accuracy)], seeds=list(seeds), num_anchors=16,
                     grid={"selectors": selectors, "similarities": [spec(Cosine)], "stitchers": stitchers},
                     protocol=EvaluationProtocol(validation=0.2))
    run = TaskRunDouble(task, banks=_banks(), dataset=DATA)
    run.run()
    return run


def _numbers(run: TaskRunDouble) -> pd.DataFrame:
    df = run.frame()
    cols = ["seed", "selector", "stitcher", "target", "source", "metric"]
    df = df[cols + ["value"]].astype({c: object for c in cols})
    return df.sort_values(cols, key=lambda c: c.astype(str)).reset_index(drop=True)


def test_the_absolute_head_is_fitted_once_per_target_and_seed_and_reused_by_every_stitcher_and_selector():
    run = _run(STITCHERS, SELECTORS)
    for seed, work in run.shared_log:
        # per target, 8 units train the same image head: the absolute and non-stitched
        # references (no anchors: one unit each) and IRP, Procrustes, affine × 2 selectors
        assert work.computed["head"] == 2, seed
        assert work.reused["head"] == 2 * (2 + 3 * 2 - 1), seed
    assert [seed for seed, _ in run.shared_log] == [0, 1]  # one memo per seed, never shared across seeds


def test_units_computed_together_give_the_numbers_they_give_computed_apart():
    """Sharing changes no number: every (stitcher, selector) run alone, with nothing to
    share, gives bit-identical values to the whole grid run together."""
    together = _numbers(_run(STITCHERS, SELECTORS))
    apart = pd.concat([_numbers(_run([st], [sel])) for st in STITCHERS for sel in SELECTORS])
    # the references use no anchors: each selector's run computes them once more
    apart = apart.drop_duplicates().sort_values(list(apart.columns[:-1]), key=lambda c: c.astype(str))
    apart = apart.reset_index(drop=True)
    pd.testing.assert_frame_equal(together, apart, check_exact=True)


def test_a_key_must_name_what_it_computes_and_different_keys_never_share():
    work = SharedWork()
    assert work.get(("head", "a", 1), lambda: [1]) == [1]
    assert work.get(("head", "a", 2), lambda: [2]) == [2]
    assert work.get(("head", "a", 1), lambda: [3]) == [1]
    assert (work.computed["head"], work.reused["head"]) == (2, 1)
    with pytest.raises(TypeError, match="starts with the name"):
        work.get((1, "a"), lambda: None)
