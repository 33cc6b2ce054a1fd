"""PARAM anchors: the mixture recipe, training on the visible banks only, the grid's projection,
the training budget and its convergence record."""

import json
import math

import pytest
import torch

from relbench.interfaces import AnchorContext, Bank
from relbench_param.selector import BankSpace, PARAMSelector, has_converged, mixture_size
from relbench_param.wip import WhitenedInnerProduct
from relbench_relreps.similarities import Cosine


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


def ctx(banks, excluded=frozenset(), seed=0, k=16, similarity=None):
    ids = next(iter(banks.values())).ids
    return AnchorContext(num_anchors=k, seed=seed, ids=ids, labels=None, banks=banks, excluded=excluded,
                         device=torch.device("cpu"), views={}, pool_banks=lambda n: {}, similarity=similarity)


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
    info = sel.select(ctx(banks)).info
    assert info["param_loss_last_epoch"] < info["param_loss_first_epoch"] - 1e-3
    assert info["param_similarity"] == similarity and info["param_similarity_source"] == "selector"


@pytest.mark.parametrize("lam", [0.1, 0.9])
def test_bank_space_equals_the_wip_projection_of_mixture_anchors(lam):
    bank = toy_banks(count=1)["e0"]
    ids = bank.ids
    space = BankSpace.build(bank, ids[:200], ids[200:260], WhitenedInnerProduct(lam=lam), torch.device("cpu"))
    assert space.subset.shape[1] <= 24  # coordinates in the subset's span, not wider than the bank
    S = torch.softmax(torch.randn(10, 60, generator=torch.Generator().manual_seed(0)), dim=1)
    wip = WhitenedInnerProduct(lam=lam)
    wip.fit(bank.rows(ids[:200]))
    direct = wip.project(bank.rows(ids[:50]), S @ bank.rows(ids[200:260]))
    assert torch.allclose(space.relative(torch.arange(50), S @ space.subset), direct, rtol=1e-3, atol=1e-3)


def test_the_grid_similarity_and_its_parameters_are_used():
    banks = toy_banks(count=3)
    SHORT = {**FAST, "epochs": 4}
    grid = WhitenedInnerProduct(lam=0.9)
    from_grid = PARAMSelector(**SHORT).select(ctx(banks, similarity=grid))
    assert grid.chol is None  # a copy was fitted, not the grid's instance
    info = from_grid.info
    assert (info["param_similarity"], info["param_similarity_source"]) == ("wip", "grid")
    assert info["param_similarity_params"] == {"lam": 0.9, "eps": 1e-6}
    # the selector's own lam (0.1) is overridden: the same anchors as a selector set to 0.9
    own = PARAMSelector(lam=0.9, **SHORT).select(ctx(banks))
    assert torch.equal(from_grid.weights, own.weights) and own.info["param_similarity_source"] == "selector"
    default = PARAMSelector(**SHORT).select(ctx(banks))
    assert not torch.allclose(from_grid.weights, default.weights, atol=1e-3)
    # any similarity of the grid: here cosine, overriding the selector's wip
    cosine = PARAMSelector(**SHORT).select(ctx(banks, similarity=Cosine()))
    assert cosine.info["param_similarity"] == "cosine"
    assert torch.equal(cosine.weights, PARAMSelector(similarity="cosine", **SHORT).select(ctx(banks)).weights)


@pytest.mark.parametrize("budget", [dict(epochs=0), dict(lr=0.0), dict(lr=1e-9)])
def test_a_training_that_does_not_move_p_is_an_error(budget):
    params = {**FAST, **budget}
    with pytest.raises(ValueError, match="did not move the anchor mixture weights"):
        PARAMSelector(**params).select(ctx(toy_banks(count=2)))


def test_a_loss_independent_of_p_is_an_error():
    one_bank = {"e0": toy_banks(count=1)["e0"]}  # no pair of banks, and cohesion off
    with pytest.raises(ValueError, match="did not move"):
        PARAMSelector(w_cohesion=0.0, **FAST).select(ctx(one_bank))


def test_training_stops_once_converged_and_records_its_curve():
    banks = toy_banks(count=3)
    anchors = PARAMSelector(subset_size=60, batch_size=100, window=5).select(ctx(banks))
    info = anchors.info
    curve = info["param_loss_curve"]
    assert info["param_converged"] is True and len(curve) == info["param_epochs"] < 400  # stopped early
    assert info["param_steps"] == 4 * info["param_epochs"]  # 400 rows in batches of 100
    assert has_converged(curve, 5, 0.02) and not has_converged(curve[:-1], 5, 0.02)
    assert curve[-1] < curve[0] and info["param_loss_last_epoch"] == pytest.approx(curve[-1], rel=1e-5)
    assert info["param_max_logit_change"] > 1e-3
    assert info["param_mixture_size"] == pytest.approx(mixture_size(anchors.weights), rel=1e-6)
    assert 1.0 <= info["param_mixture_size"] <= 60 and info["param_mixture_size_initial"] >= 1.0
    assert json.loads(json.dumps(info)) == info  # stored with the result rows as JSON


def test_default_budget_is_at_least_the_reference_codes():
    sel = PARAMSelector()
    # anchors_in_relreps, experiments/zs_classification.py: 400 steps, lr 1e-2, τ 0.2, 10,000-row mixtures
    assert sel.epochs >= 400 and sel.lr == 1e-2 and sel.temperature == 0.2 and sel.subset_size >= 10_000


def test_convergence_criterion():
    geometric = [0.5 ** (e / 10) for e in range(400)]
    stop = next(e for e in range(1, 401) if has_converged(geometric[:e], 10, 0.02))
    # window means fall by half per window: after n epochs the last drop is x/2 with
    # x = 0.5^((n-20)/10) (first window's mean 1), the total drop 1 - x/2; x/2 ≤ 0.02 (1 - x/2)
    # ⇔ x ≤ 0.02/0.51 ⇔ n ≥ 20 + 10·log2(25.5) = 66.7
    assert stop == 67
    assert not has_converged(geometric[:19], 10, 0.02)  # fewer than two windows
    assert has_converged([1.0] * 20, 10, 0.02) and has_converged([float(e) for e in range(20)], 10, 0.02)
    assert not has_converged([-float(e) for e in range(20)], 10, 0.02)  # still falling steadily


def test_mixture_size_is_the_perplexity_of_each_row():
    assert mixture_size(torch.eye(5)) == pytest.approx(1.0)
    assert mixture_size(torch.full((3, 8), 1 / 8)) == pytest.approx(8.0)
    w = torch.tensor([[0.5, 0.5, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]])
    assert mixture_size(w) == pytest.approx((2 + 4) / 2)
    entropy = -(0.9 * math.log(0.9) + 0.1 * math.log(0.1))
    assert mixture_size(torch.tensor([[0.9, 0.1]])) == pytest.approx(math.exp(entropy))
