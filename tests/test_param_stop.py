"""PARAM's validation stop: the fit rows it sets aside, the ridge-transfer score between
visible banks, the best trained checkpoint, patience, its record, and bf16 training."""

import json
import math

import numpy as np
import pytest
import torch

import relbench.precision
from relbench.interfaces import AnchorContext, Bank
from relbench_param import selector as selector_module
from relbench_param.selector import PARAMSelector
from relbench_param.validation import (
    Checkpoints,
    RidgeClassifier,
    TransferValidation,
    class_codes,
    transfer_score,
    validation_split,
)

N, CLASSES = 300, 6
FAST = dict(subset_size=40, epochs=12, batch_size=100, eval_every=2, patience=2)


def labelled_banks(n=N, d=16, count=3, seed=0, poison=0):
    """Banks sharing a clustered latent (class = row % 6), each its own linear map plus
    noise; ``poison`` extra rows of NaN whose ids are not fit rows."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(CLASSES, 6, generator=g) * 3
    latent = centres[torch.arange(n) % CLASSES] + torch.randn(n, 6, generator=g)
    ids = [f"s{i}" for i in range(n)] + [f"poison{i}" for i in range(poison)]
    banks = {}
    for b in range(count):
        X = latent @ torch.randn(6, d, generator=g) + 0.1 * torch.randn(n, d, generator=g)
        banks[f"e{b}"] = Bank(f"e{b}", "train", torch.cat([X, torch.full((poison, d), math.nan)]), ids)
    return banks


def context(banks, seed=0, labels=True, excluded=frozenset(), pool_banks=lambda name: {}):
    ids = [f"s{i}" for i in range(N)]
    return AnchorContext(num_anchors=8, seed=seed, ids=ids, labels=np.arange(N) % CLASSES if labels else None,
                         banks=banks, excluded=excluded, device=torch.device("cpu"), views={},
                         pool_banks=pool_banks)


def scripted(monkeypatch, scores):
    """Replace the validation score by ``scores`` in order; returns the mixture weights
    each call was given."""
    seen, queue = [], list(scores)

    def score(self, spaces, weights):
        seen.append(weights.clone())
        return queue.pop(0) if queue else 0.0
    monkeypatch.setattr(TransferValidation, "score", score)
    return seen


def test_the_stop_reads_only_fit_rows_of_visible_banks_and_sets_validation_rows_aside(monkeypatch):
    built = []
    build = selector_module.BankSpace.build.__func__

    def spy(cls, bank, train_ids, subset_ids, similarity, device, held_ids=None):
        built.append((train_ids, subset_ids, held_ids))
        return build(cls, bank, train_ids, subset_ids, similarity, device, held_ids)
    monkeypatch.setattr(selector_module.BankSpace, "build", classmethod(spy))

    def no_pools(name):
        raise AssertionError("param must not read other data sets")
    banks = labelled_banks(count=4, poison=50)
    held_out = banks.pop("e3")
    held_out.X.fill_(math.nan)  # the excluded encoder: not among ctx.banks, and poisoned anyway
    anchors = PARAMSelector(**FAST).select(context(banks, excluded=frozenset({"e3"}), pool_banks=no_pools))
    info = anchors.info
    assert torch.isfinite(anchors.weights).all() and all(math.isfinite(s) for _, s in info["param_validation_curve"])
    train, subset, held = built[0]
    fit = {f"s{i}" for i in range(N)}
    assert set(train) | set(subset) | set(held) <= fit
    assert not set(held) & (set(train) | set(subset))  # P never trains on, nor mixes, its validation rows
    assert len(held) == info["param_validation_rows"] == N // 5  # 20 %, stratified: 10 of each class's 50
    assert sorted(np.bincount([int(s[1:]) % CLASSES for s in held]).tolist()) == [10] * CLASSES
    assert not set(anchors.ids) & set(held)


def test_the_chosen_checkpoint_is_the_best_trained_score_even_below_untrained_p(monkeypatch):
    # untrained P scores best; the trained scores peak at epoch 4 (the second evaluation)
    seen = scripted(monkeypatch, [0.9, 0.3, 0.5, 0.4, 0.5, 0.2])
    anchors = PARAMSelector(**FAST).select(context(labelled_banks()))
    info = anchors.info
    assert [e for e, _ in info["param_validation_curve"]] == [0, 2, 4, 6, 8]
    assert info["param_chosen_epoch"] == 4 and info["param_validation_score"] == 0.5  # earliest of the ties
    assert info["param_chosen_steps"] == 4 * 3  # 240 training rows in batches of 100 → 3 steps an epoch
    assert info["param_stop"] == "validation" and info["param_epochs"] == 8
    assert torch.equal(anchors.weights, seen[2])  # the weights scored at epoch 4
    assert not torch.equal(anchors.weights, seen[0])


def test_patience_stops_early_on_a_falling_score(monkeypatch):
    scripted(monkeypatch, [0.9 - 0.01 * i for i in range(100)])
    info = PARAMSelector(**{**FAST, "epochs": 400, "eval_every": 3, "patience": 4}).select(
        context(labelled_banks())).info
    assert info["param_stop"] == "validation"
    assert info["param_epochs"] == 3 * 5 and info["param_chosen_epoch"] == 3  # one best, four misses
    assert len(info["param_loss_curve"]) == 15 and info["param_steps"] == 15 * 3


def test_the_last_epoch_is_scored_when_the_budget_ends_between_evaluations(monkeypatch):
    seen = scripted(monkeypatch, [0.1, 0.2, 0.3, 0.4])
    anchors = PARAMSelector(**{**FAST, "epochs": 5}).select(context(labelled_banks()))
    info = anchors.info
    assert [e for e, _ in info["param_validation_curve"]] == [0, 2, 4, 5]
    assert info["param_stop"] == "budget" and info["param_chosen_epoch"] == 5
    assert torch.equal(anchors.weights, seen[-1])


def test_the_record_of_a_real_validation_run():
    anchors = PARAMSelector(**FAST).select(context(labelled_banks()))
    info = anchors.info
    assert info["param_stop"] in {"validation", "converged", "budget"}
    assert info["param_validation"] == "ridge transfer over 6 ordered pairs of 3 visible banks"
    curve = info["param_validation_curve"]
    assert curve[0][0] == 0 and all(0.0 <= s <= 1.0 for _, s in curve)
    trained = [s for e, s in curve if e > 0]
    assert info["param_validation_score"] == pytest.approx(max(trained), abs=1e-6)
    assert 1 <= info["param_chosen_epoch"] <= info["param_epochs"] == len(info["param_loss_curve"])
    assert info["param_train_samples"] == N - N // 5
    assert json.loads(json.dumps(info)) == info


@pytest.mark.parametrize("case, note", [
    ("one bank", "one visible bank"), ("no labels", "no class labels"), ("fraction 0", "validation_fraction 0")])
def test_without_a_pair_or_labels_the_loss_test_alone_stops(case, note):
    banks = labelled_banks(count=1 if case == "one bank" else 2)
    params = {**FAST, "validation_fraction": 0.0} if case == "fraction 0" else FAST
    anchors = PARAMSelector(**params).select(context(banks, labels=case != "no labels"))
    info = anchors.info
    assert info["param_validation"].startswith("off") and note in info["param_validation"]
    assert info["param_stop"] in {"converged", "budget"} and info["param_validation_curve"] == []
    assert info["param_validation_rows"] == 0 and info["param_train_samples"] == N
    assert info["param_chosen_epoch"] == info["param_epochs"] and info["param_validation_score"] is None


def test_the_choice_is_deterministic_per_seed():
    banks = labelled_banks()

    def run(seed):
        a = PARAMSelector(**FAST).select(context(banks, seed=seed))
        return a.weights, {k: v for k, v in a.info.items() if k != "param_seconds"}
    (w0, i0), (w1, i1), (w2, _) = run(0), run(0), run(1)
    assert torch.equal(w0, w1) and i0 == i1
    assert not torch.equal(w0, w2)


@pytest.mark.parametrize("similarity", ["cosine", "wip"])
def test_bf16_training_runs_finite_and_close_to_fp32(similarity):
    params = {**FAST, "epochs": 3, "similarity": similarity}
    banks = labelled_banks()
    fp32 = PARAMSelector(**params).select(context(banks))
    with relbench.precision.running_at("bf16"):
        bf16 = PARAMSelector(**params).select(context(banks))
    assert all(math.isfinite(v) for v in bf16.info["param_loss_curve"])
    assert not torch.equal(bf16.weights, fp32.weights)  # the loss did run in bfloat16
    assert bf16.info["param_loss_curve"] == pytest.approx(fp32.info["param_loss_curve"], rel=0.02, abs=0.02)
    assert (bf16.weights - fp32.weights).abs().max() < 0.05


def test_a_non_finite_loss_is_an_error():
    banks = labelled_banks(count=2)
    banks["e0"].X[5] = math.inf
    with pytest.raises(ValueError, match="loss is nan|loss is inf"):
        PARAMSelector(**{**FAST, "similarity": "cosine"}).select(context(banks, labels=False))


def test_validation_split_is_stratified_and_seeded():
    codes = np.array([0] * 10 + [1] * 20 + [2] * 5)
    train, held = validation_split(codes, 0.2, torch.Generator().manual_seed(0))
    assert sorted(train + held) == list(range(35)) and not set(train) & set(held)
    assert np.bincount(codes[held]).tolist() == [2, 4, 1]
    assert (train, held) == validation_split(codes, 0.2, torch.Generator().manual_seed(0))
    assert class_codes(np.array(["b", "a", "b"]), 3).tolist() == [1, 0, 1]
    assert class_codes(np.zeros(3), 3) is None and class_codes(None, 3) is None and class_codes(np.arange(4), 3) is None


def test_ridge_classifier_is_centred_ridge_least_squares():
    g = torch.Generator().manual_seed(0)
    F, y = torch.randn(40, 5, generator=g), torch.arange(40) % 3
    ridge = 0.1
    head = RidgeClassifier.fit(F, y, 3, ridge)
    Fc = F.double().numpy() - F.double().numpy().mean(0)
    Y = np.eye(3)[y.numpy()]
    lam = ridge * np.mean(np.diag(Fc.T @ Fc))
    W = np.linalg.solve(Fc.T @ Fc + lam * np.eye(5), Fc.T @ (Y - Y.mean(0)))
    assert np.allclose(head.weights.numpy(), W)
    pred = ((F.double().numpy() - F.double().numpy().mean(0)) @ W + Y.mean(0)).argmax(1)
    assert head.accuracy(F, y) == pytest.approx(float((pred == y.numpy()).mean()))


def test_transfer_score_averages_ordered_pairs_of_different_banks():
    g = torch.Generator().manual_seed(1)
    y = torch.arange(60) % 3
    good = torch.nn.functional.one_hot(y, 3).float() + 0.01 * torch.randn(60, 3, generator=g)
    noise = torch.randn(60, 3, generator=g)
    # a → b transfers perfectly; a → noise and noise → a do not; the diagonal never counts
    both = transfer_score({"a": good, "b": good}, {"a": good, "b": good}, y, y, 3, 1e-3)
    assert both == 1.0
    mixed = transfer_score({"a": good, "n": noise}, {"a": good, "n": noise}, y, y, 3, 1e-3)
    assert mixed < 0.8
    assert math.isnan(transfer_score({"a": good}, {"a": good}, y, y, 3, 1e-3))


def test_checkpoints_never_choose_untrained_p_and_count_misses():
    c = Checkpoints(patience=2)
    P = torch.zeros(2, 2)
    assert not c.record(0, 0, 1.0, P)
    assert not c.record(1, 3, float("nan"), P + 1) and c.best_epoch == 1  # a first trained checkpoint, always
    assert not c.record(2, 6, 0.4, P + 2) and c.best_epoch == 2
    assert not c.record(3, 9, 0.4, P + 3) and c.record(4, 12, 0.3, P + 4)
    assert (c.best_epoch, c.best_steps, c.best_score) == (2, 6, 0.4) and torch.equal(c.best_P, P + 2)


def test_ridge_classifier_equals_scikit_learn_ridge_on_one_hot_labels():
    from sklearn.linear_model import Ridge

    g = torch.Generator().manual_seed(1)
    F, y = torch.randn(60, 7, generator=g), torch.arange(60) % 4
    head = RidgeClassifier.fit(F, y, 4, 0.05)
    X = F.double().numpy()
    Xc = X - X.mean(0)
    alpha = 0.05 * np.mean(np.diag(Xc.T @ Xc))
    reference = Ridge(alpha=alpha, fit_intercept=True, solver="cholesky").fit(X, np.eye(4)[y.numpy()])
    assert np.allclose(head.weights.numpy(), reference.coef_.T)
    assert head.accuracy(F, y) == pytest.approx(float((reference.predict(X).argmax(1) == y.numpy()).mean()))
