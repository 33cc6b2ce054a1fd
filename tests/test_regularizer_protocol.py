"""The regularized training protocol: the adapter's decay towards the identity, β
measured on the first epoch's batches, inert regularizers refused at fit, inductive
heads and decoders that pass the evaluation mode on, robust cosine's training
statistics (a test row projects alone as inside its split), PARAM weights."""

from dataclasses import dataclass, field
from typing import ClassVar

import pytest
import torch

from relbench.interfaces import Bank, FitContext, Regularizer, RegularizerBatch, StitchSide
from relbench.reference_head import FeatureNorm
from relbench.training import head_settings, minibatches, predict_logits, seeded_generator
from relbench_param import SoftJaccardRegularizer
from relbench_relreps import AbsoluteDecoder, Cosine, RelativeDecoder
from relbench_relreps.adapter import Adapter
from relbench_relreps.heads import train_relative_with_regularizers
from relbench_topology import AdapterControl, RobustCosine, Topological
from relbench_topology.persistence import class_death_times

N, D, C = 192, 8, 4
G = torch.Generator().manual_seed(0)
Y = torch.arange(N) % C
X = 4 * torch.randn(C, D, generator=G)[Y] + torch.randn(N, D, generator=G)
A = X[:12]
SETTINGS = head_settings("text", 2, 1e-2, 16, 16)



def _topological(**params):
    return Topological(classes_per_batch=C, samples_per_class=8, **params)


def _train(regs, **kwargs):
    return train_relative_with_regularizers("e", X, Y, A, Cosine(), regs, SETTINGS, C, 0, **kwargs)


def test_adapter_penalty_is_the_squared_distance_from_the_identity():
    adapter = Adapter(3)
    assert adapter.penalty().item() == 0.0 and adapter.drift() == 0.0
    with torch.no_grad():
        adapter.linear.weight += torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
        adapter.linear.bias += torch.tensor([0.0, 0.5, 0.0])
    assert adapter.penalty().item() == pytest.approx(1 + 4 + 0.25)
    assert adapter.drift() == pytest.approx(5 ** 0.5 / 3 ** 0.5)


def test_the_decay_holds_the_adapter_near_the_identity():
    loose = _train([_topological()], adapter_decay=1e-4).adapter.drift()
    tight = _train([_topological()], adapter_decay=10.0).adapter.drift()
    assert 0 < tight < loose / 3


def test_beta_is_measured_on_the_first_epoch_batches_through_the_identity_adapter():
    fitted = _train([_topological(beta_quantile=0.25)])
    sim = Cosine()
    first = list(minibatches(N, SETTINGS.batch_size, seeded_generator(0), Y, (C, 8)))
    before = torch.cat([class_death_times(X[idx], Y[idx]) for idx in first]).double()
    after = torch.cat([class_death_times(sim.project(X[idx], A), Y[idx]) for idx in first]).double()
    got = {k: d.value for k, d in fitted.regularizers[0].diagnostics().items()}
    assert got["beta_before"] == pytest.approx(float(torch.quantile(before, 0.25)), rel=1e-5)
    assert got["beta_after"] == pytest.approx(float(torch.quantile(after, 0.25)), rel=1e-5)


@dataclass
class _OnFixedFeatures(Regularizer):
    """A regularizer that reads the relative features but asks for no adapter."""

    name: ClassVar[str] = "fixed-features"

    def loss(self, batch: RegularizerBatch) -> torch.Tensor:
        return batch.relative[batch.trained].pow(2).mean()


def test_a_regularizer_with_no_trainable_path_is_refused_at_fit():
    with pytest.raises(ValueError, match="trains nothing"):
        _train([_OnFixedFeatures()])


@dataclass
class _SeenBatches:
    """Records the labels of every training batch a regularizer's loss is given."""

    seen: list[torch.Tensor] = field(default_factory=list)

    def loss(self, batch: RegularizerBatch) -> torch.Tensor:
        self.seen.append(batch.labels.clone())
        return super().loss(batch)


@dataclass
class _RecordingControl(_SeenBatches, AdapterControl):
    """The control, recording its batches."""


@dataclass
class _RecordingTopological(_SeenBatches, Topological):
    """Topological densification, recording its batches (its prepared copies share the list)."""


def test_the_control_trains_an_adapter_on_class_balanced_batches_with_the_head_loss_only():
    control = _RecordingControl(classes_per_batch=2, samples_per_class=8)
    fitted = _train([control])
    seen = control.seen
    assert fitted.adapter is not None and fitted.adapter.drift() > 0  # trained, by the head's loss
    assert len(seen) == SETTINGS.epochs * (N // 16)
    for labels in seen:  # 2 classes × 8 samples each, never the plain batches' mix of all 4 classes
        assert sorted(torch.bincount(labels, minlength=C).tolist()) == [0, 0, 8, 8]
    assert _train([]).adapter is None  # without the control: no adapter


def test_the_control_sees_exactly_the_batches_topological_trains_on():
    control = _RecordingControl(classes_per_batch=C, samples_per_class=8)
    topological = _RecordingTopological(classes_per_batch=C, samples_per_class=8)
    _train([control])
    _train([topological])
    assert len(control.seen) == len(topological.seen) > 0
    assert all(torch.equal(a, b) for a, b in zip(control.seen, topological.seen))


@dataclass
class _PlainZeroControl(Regularizer):
    """A control whose zero carries no graph."""

    name: ClassVar[str] = "plain-zero-control"
    needs_adapter: ClassVar[bool] = True
    adds_loss: ClassVar[bool] = False

    def loss(self, batch: RegularizerBatch) -> torch.Tensor:
        return torch.zeros(())


@dataclass
class _LossyControl(_PlainZeroControl):
    """Declares it adds no loss, but adds the spread of the relative features."""

    name: ClassVar[str] = "lossy-control"

    def loss(self, batch: RegularizerBatch) -> torch.Tensor:
        return batch.relative[batch.trained].std()


def test_a_control_needs_no_trainable_path_but_must_add_exactly_zero():
    assert _train([_PlainZeroControl()]).adapter is not None
    with pytest.raises(ValueError, match="declares adds_loss = False but returned a loss of"):
        _train([_LossyControl()])


def test_param_regularizers_refuse_a_zero_weight():
    with pytest.raises(ValueError, match="weight must be positive"):
        SoftJaccardRegularizer(weight=0.0)


@pytest.mark.parametrize("evaluation", ["inductive", "transductive"])
def test_a_regularized_head_predicts_as_the_evaluation_mode_says(evaluation):
    fitted = _train([_topological()], evaluation=evaluation)
    feats = fitted.relative(X, A)
    alone = predict_logits(fitted.head, feats[:1])
    together = predict_logits(fitted.head, feats)[:1]
    assert torch.allclose(alone, together, atol=1e-5) == (evaluation == "inductive")


def _side():
    sim = Cosine()
    sim.fit(X)
    ids = [str(i) for i in range(N)]
    return StitchSide("e", Bank("e", "train", X, ids, Y), Bank("e", "test", X, ids, Y), A, sim)


@pytest.mark.parametrize("stitcher", [RelativeDecoder, AbsoluteDecoder])
def test_decoders_pass_the_evaluation_mode_to_their_heads(stitcher):
    for evaluation in ("inductive", "transductive"):
        st = stitcher(epochs=1)
        st.fit(_side(), FitContext(seed=0, device=torch.device("cpu"), num_classes=C, modality="text",
                                   regularizers=[], evaluation=evaluation))
        norms = [m for m in st._head.modules() if isinstance(m, FeatureNorm)]
        assert norms and all(m.transductive == (evaluation == "transductive") for m in norms)
        assert all(bool(m.fixed) for m in norms)  # statistics fixed on the training features


def test_robust_cosine_projects_a_test_row_alone_as_inside_its_split_by_default():
    test = 3 * torch.randn(20, D, generator=G) + 1
    default = RobustCosine()
    default.fit(X)  # statistics of the training bank
    torch.testing.assert_close(default.project(test[:1], A), default.project(test, A)[:1])
    per_batch = RobustCosine(statistics="batch")  # transductive: statistics of the projected rows
    assert not torch.allclose(per_batch.project(test[:2], A), per_batch.project(test, A)[:2], atol=1e-3)
