"""PARAM anchors: the mixture recipe, training on the visible banks only, determinism."""

import pytest
import torch

from relbench.interfaces import AnchorContext, Bank
from relbench_param.selector import BankSpace, PARAMSelector
from relbench_param.wip import WhitenedInnerProduct


def toy_banks(n=400, d=24, count=4, seed=0):
    """Banks sharing a clustered latent, each a different invertible linear map plus noise."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(6, 8, generator=g) * 3
    latent = centres[torch.arange(n) % 6] + torch.randn(n, 8, generator=g)
    ids = [f"s{i}" for i in range(n)]
    banks = {}
    for b in range(count):
        M = torch.randn(8, d, generator=g)
        banks[f"e{b}"] = Bank(f"e{b}", "train", latent @ M + 0.1 * torch.randn(n, d, generator=g) + b, ids)
    return banks


def ctx(banks, excluded=frozenset(), seed=0, k=16):
    ids = next(iter(banks.values())).ids
    return AnchorContext(num_anchors=k, seed=seed, ids=ids, labels=None, banks=banks, excluded=excluded,
                         device=torch.device("cpu"), views={}, pool_banks=lambda n: {})


FAST = dict(subset_size=60, epochs=15, batch_size=100)


def test_recipe_rows_are_convex_and_realise_in_the_held_out_bank():
    banks = toy_banks()
    visible = {k: v for k, v in banks.items() if k != "e3"}
    anchors = PARAMSelector(**FAST).select(ctx(visible, excluded=frozenset({"e3"})))
    W = anchors.weights
    assert W.shape == (16, 60) and len(anchors) == 16 and len(anchors.ids) == 60
    assert torch.allclose(W.sum(dim=1), torch.ones(16), atol=1e-5) and (W >= 0).all()
    held_out = banks["e3"]
    assert torch.allclose(anchors.realise(held_out), W @ held_out.rows(anchors.ids), atol=1e-5)
    assert anchors.info["param_banks"] == ["e0", "e1", "e2"]


def test_an_excluded_encoder_among_the_banks_is_refused():
    banks = toy_banks()
    with pytest.raises(ValueError, match="held-out"):
        PARAMSelector(**FAST).select(ctx(banks, excluded=frozenset({"e1"})))


@pytest.mark.parametrize("similarity", ["wip", "cosine"])
def test_training_decreases_the_loss(similarity):
    banks = toy_banks()
    sel = PARAMSelector(similarity=similarity, **FAST)
    anchors = sel.select(ctx(banks))
    assert anchors.info["param_loss_last_epoch"] < anchors.info["param_loss_first_epoch"] - 1e-3


def test_bank_space_kernel_equals_the_wip_projection_of_mixture_anchors():
    bank = toy_banks(count=1)["e0"]
    ids = bank.ids
    space = BankSpace.build(bank, ids[:200], ids[200:260], "wip", 0.1, 1e-6, torch.device("cpu"))
    S = torch.softmax(torch.randn(10, 60, generator=torch.Generator().manual_seed(0)), dim=1)
    wip = WhitenedInnerProduct(lam=0.1)
    wip.fit(bank.rows(ids[:200]))
    direct = wip.project(bank.rows(ids[:50]), S @ bank.rows(ids[200:260]))
    assert torch.allclose(space.relative(torch.arange(50), S), direct, rtol=1e-3, atol=1e-3)
