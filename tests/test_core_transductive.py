"""Transductive similarities (a prediction depends on the other test samples) under the
evaluation protocol: refused by the inductive protocol when the tasks file is validated,
accepted by the transductive one, whose rows then say so."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch

from relbench.config import load_suite
from relbench.export import flatten
from relbench.interfaces import Similarity
from relbench.protocol import EvaluationProtocol
from relbench.runner import Runner
from relbench.testing import make_task, spec
from relbench_stitching.kind import Stitching

TASKS = """\
suite:
  seeds: [0]
  num_anchors: 16
  output: results
  leaderboards: boards
  protocol: {{evaluation: {evaluation}}}
tasks:
  - name: blobs
    dataset: {{name: toy-blobs, params: {{classes: 4}}}}
    encoders:
      - {{name: toy-rotated, label: a, params: {{seed: 1}}}}
      - {{name: toy-rotated, label: b, params: {{seed: 2, scale: 3.0}}}}
    grid:
      selectors: [random]
      similarities: [cosine, {{name: robust-cosine, label: robust-batch, params: {{statistics: batch}}}}]
      stitchers: [relative]
    metrics: [accuracy]
"""


def test_the_inductive_protocol_refuses_a_transductive_similarity_at_dry_run(cli_main, write_yaml, capsys):
    path = write_yaml(TASKS.format(evaluation="inductive"))
    assert cli_main(["run", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:8: at `tasks[0]`" in err  # the task's line
    assert "task 'blobs'" in err and "similarity 'robust-batch'" in err
    assert "`params: {statistics: train}`" in err and "`protocol: {evaluation: transductive}`" in err
    assert "Traceback" not in err


def test_the_transductive_protocol_accepts_it_and_its_rows_say_so_in_a_boolean_column(registry, write_yaml):
    runner = Runner(load_suite(write_yaml(TASKS.format(evaluation="transductive")), registry), registry, quiet=True)
    assert not runner.run().failures
    flat = flatten(runner.store.load("blobs"))
    assert str(flat["extra.transductive_similarity"].dtype) == "boolean"
    marked = flat.groupby("similarity")["extra.transductive_similarity"].agg(set).to_dict()
    assert marked == {"cosine": {False}, "robust-batch": {True}}
    assert set(flat["extra.evaluation"]) == {"transductive"}


@dataclass
class BatchCentred(Similarity):
    """Cosine after subtracting the mean of the projected rows (a third-party
    transductive similarity with no inductive setting)."""

    name: ClassVar[str] = "batch-centred"

    def transductive(self) -> bool:
        return True

    def project(self, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        mu = X.mean(dim=0, keepdim=True)
        return torch.nn.functional.normalize(X - mu, dim=1) @ torch.nn.functional.normalize(A - mu, dim=1).T


def test_any_similarity_declaring_itself_transductive_is_refused_only_under_the_inductive_protocol():
    from relbench.protocol import check_similarities

    similarities = [spec(BatchCentred, label="centred")]
    with pytest.raises(ValueError, match="'centred' is transductive.*choose another one.*evaluation: transductive"):
        check_similarities(make_task(Stitching, grid={"similarities": similarities}))
    check_similarities(make_task(Stitching, grid={"similarities": similarities},
                                 protocol=EvaluationProtocol(evaluation="transductive")))
