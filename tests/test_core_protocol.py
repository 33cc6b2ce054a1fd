"""The evaluation protocol: per-seed draws, the validation part, and constants chosen on
validation data only (relbench.protocol, relbench.tuning, the stitching kind)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
import torch

from relbench.interfaces import Bank, DatasetData, Similarity, Tunable
from relbench.protocol import EvaluationProtocol, draw
from relbench.testing import TaskRunDouble, make_task, spec
from relbench.tuning import candidates, choose, open_parameters
from relbench_metrics import Accuracy
from relbench_relreps import RandomAnchors, RelativeDecoder
from relbench_stitching.kind import Stitching

LABELS = np.repeat(np.arange(5), 200)  # 1,000 training samples, 5 balanced classes
TEST_LABELS = np.repeat(np.arange(5), 80)


def test_each_seed_draws_its_own_stratified_samples_and_a_disjoint_validation_part():
    protocol = EvaluationProtocol(train_size=500, test_size=100, validation=0.2)
    draws = [draw(protocol, LABELS, len(LABELS), TEST_LABELS, len(TEST_LABELS), seed) for seed in range(3)]
    for d in draws:
        assert len(d.fit) + len(d.validation) == 500 and len(d.test) == 100
        assert not set(d.fit) & set(d.validation)
        assert np.bincount(LABELS[d.validation]).tolist() == [20] * 5  # stratified: 20 % of 100 per class
        assert np.bincount(TEST_LABELS[d.test]).tolist() == [20] * 5
    assert not np.array_equal(draws[0].fit, draws[1].fit) and not np.array_equal(draws[0].test, draws[1].test)
    again = draw(protocol, LABELS, len(LABELS), TEST_LABELS, len(TEST_LABELS), 1)
    assert np.array_equal(again.fit, draws[1].fit) and np.array_equal(again.validation, draws[1].validation)


def test_without_sizes_every_seed_reads_the_whole_pool_and_validation_zero_holds_nothing_out():
    d = draw(EvaluationProtocol(validation=0.0), LABELS, len(LABELS), None, 400, 7)
    assert len(d.fit) == 1000 and len(d.validation) == 0 and len(d.test) == 400


# ----------------------------------------------------------------------------- tuning


@dataclass
class NoisyCosine(Similarity):
    """Cosine plus seeded noise of a given size: a similarity with a constant worth tuning."""

    name: ClassVar[str] = "noisy-cosine"
    tunable: ClassVar[dict] = {"noise": Tunable((5.0, 0.0), relative_to="absolute")}
    noise: float = 5.0

    def project(self, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        rel = torch.nn.functional.normalize(X, dim=1) @ torch.nn.functional.normalize(A, dim=1).T
        g = torch.Generator().manual_seed(len(X))
        return rel + self.noise * torch.randn(rel.shape, generator=g)


def _banks(seed: int = 0, poison_test: bool = False) -> dict:
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(5, 16, generator=g) * 3
    Q = torch.linalg.qr(torch.randn(16, 16, generator=g))[0]  # encoder b: a rotation of a
    out = {}
    for split, n in (("train", 300), ("validation", 100), ("test", 150)):
        y = torch.arange(n) % 5
        base = centres[y] + torch.randn(n, 16, generator=g)
        if poison_test and split == "test":
            base = torch.randn(n, 16, generator=g) * 50
        ids = [f"{split}{i}" for i in range(n)]
        out[split] = {"a": Bank("a", split, base, ids, y), "b": Bank("b", split, base @ Q, ids, y)}
    return out


DATA = DatasetData("blobs", {}, [str(i) for i in range(5)], {"x": "image"}, "x")


def _run(tmp_path, similarity, poison_test=False):
    task = make_task(Stitching, encoders=["a", "b"], metrics=[spec(Accuracy)],
                     grid={"selectors": [spec(RandomAnchors)], "similarities": [similarity],
                           "stitchers": [spec(RelativeDecoder, epochs=8, batch_size=32)]},
                     protocol=EvaluationProtocol(validation=0.25))
    run = TaskRunDouble(task, banks=_banks(poison_test=poison_test), dataset=DATA, tmp=tmp_path)
    run.run()
    return run.frame()


def test_an_open_constant_is_chosen_on_validation_data_and_recorded(tmp_path):
    df = _run(tmp_path, spec(NoisyCosine))
    tuned = df["extra"].iloc[0]["tuned"]
    assert tuned["parameters"]["similarity.noise"] == {"space": [5.0, 0.0], "relative_to": "absolute", "chosen": 0.0}
    scores = dict((v["similarity.noise"], s) for v, s in tuned["validation_scores"])
    assert scores[0.0] > scores[5.0] and tuned["validation_metric"] == "accuracy"
    assert df["extra"].iloc[0]["evaluation"] == "inductive"
    assert df["extra"].iloc[0]["samples"] == {"fit": 300, "validation": 100, "test": 150}


def test_poisoning_the_test_split_does_not_change_the_choice(tmp_path):
    clean = _run(tmp_path / "a", spec(NoisyCosine))
    poisoned = _run(tmp_path / "b", spec(NoisyCosine), poison_test=True)
    pick = lambda df: [e["tuned"]["parameters"]["similarity.noise"]["chosen"] for e in df["extra"]]
    scores = lambda df: [e["tuned"]["validation_scores"] for e in df["extra"]]
    assert pick(clean) == pick(poisoned) and scores(clean) == scores(poisoned)
    acc = lambda df: df[df["metric"] == "accuracy"]["value"].mean()
    assert acc(clean) > acc(poisoned) + 0.3  # the test split did change what is reported


def test_a_value_fixed_in_the_tasks_file_switches_tuning_off(tmp_path):
    df = _run(tmp_path, spec(NoisyCosine, noise=5.0))
    assert df["extra"].iloc[0]["tuned"] == {}
    assert open_parameters({"similarity": spec(NoisyCosine, noise=5.0)}) == {}
    assert open_parameters({"similarity": spec(NoisyCosine)}) == {"similarity.noise": NoisyCosine.tunable["noise"]}


def test_an_open_constant_enters_the_identity_by_its_candidates():
    open_, fixed = spec(NoisyCosine).identity(), spec(NoisyCosine, noise=5.0).identity()
    assert open_["params"]["noise"] == {"tuned_over": [5.0, 0.0], "relative_to": "absolute"}
    assert fixed["params"]["noise"] == 5.0


def test_choose_keeps_the_earlier_candidate_on_a_tie_and_respects_direction():
    cands = candidates({"similarity": spec(NoisyCosine)})
    assert [c.values for c in cands] == [{"similarity.noise": 5.0}, {"similarity.noise": 0.0}]
    tie = choose(cands, lambda c: c, lambda c: 1.0, "higher")
    assert tie.candidate.values == {"similarity.noise": 5.0}
    lower = choose(cands, lambda c: c, lambda c: c.values["similarity.noise"], "lower")
    assert lower.candidate.values == {"similarity.noise": 0.0}
    with pytest.raises(ValueError, match="non-finite"):
        choose(cands, lambda c: c, lambda c: float("nan"), "higher")
    assert candidates({"similarity": spec(NoisyCosine)}, enabled=False)[0].values == {}
