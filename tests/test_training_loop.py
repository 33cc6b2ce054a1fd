"""relbench.training: seeded epoch batches (plain and class-balanced) and one-pass
prediction through the batch-statistics head."""

import pytest
import torch

from relbench.reference_head import FeatureNorm, ReferenceHead
from relbench.training import (minibatches, predict_logits, seeded_generator,
                               set_evaluation, train_classifier)


@pytest.mark.parametrize("n, batch_size", [(100, 32), (97, 32), (65, 32), (31, 32), (64, 16)])
def test_plain_epoch_sees_every_sample_exactly_once(n, batch_size):
    gen = seeded_generator(0)
    for _ in range(3):  # several epochs from one generator, as train_loop draws them
        batches = list(minibatches(n, batch_size, gen))
        seen = torch.cat(batches)
        assert torch.equal(torch.bincount(seen, minlength=n), torch.ones(n, dtype=torch.long))
        assert all(2 <= len(b) <= batch_size + 1 for b in batches)


def test_plain_last_single_sample_joins_the_previous_batch():
    sizes = [len(b) for b in minibatches(65, 32, seeded_generator(0))]
    assert sizes == [32, 33]


def test_plain_batches_are_deterministic_per_seed():
    first = [b.tolist() for b in minibatches(50, 8, seeded_generator(3))]
    again = [b.tolist() for b in minibatches(50, 8, seeded_generator(3))]
    other = [b.tolist() for b in minibatches(50, 8, seeded_generator(4))]
    assert first == again and first != other


def test_balanced_batches_shape_and_no_repeat_within_a_class_pass():
    labels = torch.arange(96) % 6  # 6 classes × 16 samples
    batches = list(minibatches(96, 32, seeded_generator(1), labels, balanced=(3, 4)))
    assert len(batches) == 96 // 12
    drawn = {c: [] for c in range(6)}
    for b in batches:
        assert len(b) == 12
        counts = torch.bincount(labels[b], minlength=6)
        assert sorted(counts.tolist()) == [0, 0, 0, 4, 4, 4]
        for i in b.tolist():
            drawn[int(labels[i])].append(i)
    for c, samples in drawn.items():  # consecutive passes of 16 draws hold 16 distinct samples
        for start in range(0, len(samples), 16):
            block = samples[start:start + 16]
            assert len(set(block)) == len(block)


def test_balanced_small_class_cycles_through_all_its_samples():
    labels = torch.tensor([0] * 5 + [1] * 40)
    batches = list(minibatches(45, 32, seeded_generator(0), labels, balanced=(2, 4)))
    small = [i for b in batches for i in b.tolist() if i < 5]
    assert len(small) == 4 * len(batches) and len(batches) == 5
    for start in range(0, len(small), 5):  # 20 draws = 4 passes, each over the whole class
        assert sorted(small[start:start + 5]) == [0, 1, 2, 3, 4]


def _trained_head(evaluation="inductive"):
    torch.manual_seed(0)
    X, y = torch.randn(300, 20), torch.randint(0, 5, (300,))
    head = ReferenceHead(20, 64, 5)
    return train_classifier(head, X, y, epochs=2, lr=1e-3, batch_size=32, seed=0, evaluation=evaluation)


def test_an_inductive_prediction_does_not_depend_on_the_other_test_samples():
    head = _trained_head()
    X_test = torch.randn(400, 20) * 3 + 1  # a test split with its own statistics
    inside = predict_logits(head, X_test)
    alone = torch.cat([predict_logits(head, X_test[i:i + 1]) for i in range(0, 400, 37)])
    assert torch.allclose(alone, inside[::37], atol=1e-5)
    assert torch.allclose(predict_logits(head, X_test[:7]), inside[:7], atol=1e-5)


def test_transductive_evaluation_is_an_explicit_option_that_depends_on_the_split():
    head = _trained_head("transductive")
    X_test = torch.randn(400, 20) * 3 + 1
    inside = predict_logits(head, X_test)
    part = predict_logits(head, X_test[:50])
    assert not torch.allclose(part, inside[:50], atol=1e-3)
    set_evaluation(head, "inductive")
    assert torch.allclose(predict_logits(head, X_test[:50]), predict_logits(head, X_test)[:50], atol=1e-5)


def test_inductive_statistics_are_those_of_the_training_data():
    head = _trained_head()
    norm = next(m for m in head.modules() if isinstance(m, FeatureNorm))
    torch.manual_seed(0)
    X = torch.randn(300, 20)
    hidden = head.net[:3](X)  # LayerNorm → Linear → act: the norm's input on the training rows
    assert torch.allclose(norm.mean, hidden.mean(0), atol=1e-5)
    assert torch.allclose(norm.var, hidden.var(0, unbiased=False), atol=1e-5)


def test_a_head_whose_statistics_were_never_fixed_refuses_to_predict():
    head = ReferenceHead(20, 64, 5).eval()
    with pytest.raises(RuntimeError, match="fix_statistics"):
        predict_logits(head, torch.randn(10, 20))


def test_prediction_of_4097_rows_equals_the_single_pass():
    head = _trained_head()
    X = torch.randn(4097, 20)
    with torch.no_grad():
        single = head(X)
    got = predict_logits(head, X)
    assert got.shape == (4097, 5)
    assert torch.equal(got, single)
