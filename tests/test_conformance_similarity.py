"""relbench.testing.check_similarity: every built-in similarity passes it (with the
parameter settings that change what it declares or how it fits), and broken ones are
caught with a message naming what failed; the declared invariances are documentation
only, never part of a plugin's identity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch

from relbench.interfaces import INVARIANCES, Similarity
from relbench.testing import check_similarity, spec
from relbench_relreps.similarities import L1, Cosine

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "relbench-plugin-example"

#: every registered similarity → the parameter settings checked (each a separate case)
CASES = {
    "cosine": [{}, {"center": True}],
    "angular": [{}, {"center": True}],
    "euclidean": [{}],
    "l1": [{}],
    "concat": [{}, {"parts": ["l1"], "standardise": False}],
    "vq-cosine": [{}, {"normalise": False}],
    "robust-cosine": [{}, {"statistics": "batch"}],
    "wip": [{}, {"lam": 0.0}],
}


def test_every_registered_similarity_has_a_case(registry):
    assert set(registry.names("similarity")) == set(CASES)


@pytest.mark.parametrize("name,params", [(n, p) for n, settings in CASES.items() for p in settings])
def test_the_builtin_similarity_passes(registry, name, params):
    check_similarity(registry.get("similarity", name)(**params))


def test_the_builtins_declare_only_known_invariances(registry):
    declared = {name: registry.get("similarity", name).invariances for name in CASES}
    assert all(set(d) <= set(INVARIANCES) for d in declared.values())
    assert declared["cosine"] == {"orthogonal", "scale", "permutation"}
    assert declared["l1"] == {"translation", "permutation"}


def test_invariances_are_not_part_of_a_plugin_identity_or_its_listed_parameters(registry, cli_main, capsys):
    identity = spec(Cosine).identity()
    assert "invariances" not in identity["params"] and "invariances" not in str(identity)
    assert cli_main(["plugins", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert not [entry["name"] for entry in listed
                if "invariances" in entry or "invariances" in [p["name"] for p in entry["parameters"]]]


@dataclass
class RotationBlindL1(L1):
    """L1 distances claiming cosine's invariances (a broken plugin)."""

    invariances: ClassVar[frozenset[str]] = frozenset({"orthogonal", "translation"})


def test_a_declared_invariance_that_does_not_hold_is_named_in_a_table():
    with pytest.raises(AssertionError) as caught:
        check_similarity(RotationBlindL1())
    message = str(caught.value)
    assert "RotationBlindL1 (similarity 'l1'): declares invariance to orthogonal but" in message
    assert "remove orthogonal from RotationBlindL1.invariances" in message
    table = dict(line.split(None, 1) for line in message.splitlines()[1:])
    assert table["transform"].split() == ["declared", "max", "|Δ|", "result"]
    assert table["orthogonal"].split()[0::2] == ["yes", "FAILED"]
    assert table["translation"].split()[0::2] == ["yes", "ok"]
    assert table["scale"].split()[0::2] == ["no", "-"]


@dataclass
class Misnamed(Cosine):
    """Cosine declaring an invariance the kit does not know."""

    invariances: ClassVar[frozenset[str]] = frozenset({"rotation"})


def test_an_unknown_invariance_is_refused_with_the_known_names():
    with pytest.raises(AssertionError, match=r"unknown invariances \['rotation'\].*orthogonal, scale, translation"):
        check_similarity(Misnamed())


@dataclass
class BatchCentred(Similarity):
    """Cosine after centring on the projected rows, not declared transductive."""

    name: ClassVar[str] = "batch-centred"

    def project(self, X, A):
        mu = X.mean(dim=0, keepdim=True)
        return torch.nn.functional.normalize(X - mu, dim=1) @ torch.nn.functional.normalize(A - mu, dim=1).T


@dataclass
class DeclaredBatchCentred(BatchCentred):
    """The same, declared transductive: the inductive check does not apply."""

    def transductive(self) -> bool:
        return True


def test_an_undeclared_transductive_similarity_is_caught_and_a_declared_one_passes():
    with pytest.raises(AssertionError, match="a row's features change with the other rows projected with it.*"
                                             "declare transductive"):
        check_similarity(BatchCentred())
    check_similarity(DeclaredBatchCentred())


@dataclass
class Noisy(Cosine):
    """Cosine plus fresh noise on every call."""

    def project(self, X, A):
        return super().project(X, A) + 1e-3 * torch.rand(len(X), len(A))


@dataclass
class Accumulating(Cosine):
    """Cosine on rows centred by the mean of every fit so far (state that accumulates)."""

    def __post_init__(self):
        self.seen: list[torch.Tensor] = []

    def fit(self, X):
        self.seen.append(X)

    def project(self, X, A):
        mu = torch.cat(self.seen).mean(dim=0)
        return super().project(X - mu, A - mu)


@dataclass
class Wrong(Cosine):
    """Cosine transposed (``k × n``)."""

    def project(self, X, A):
        return super().project(X, A).T


@pytest.mark.parametrize("broken,message", [
    (Noisy(), "two projections of the same input differ.*generator of its own"),
    (Accumulating(), "after fit\\(\\) on other rows and fit\\(\\) on the training rows again"),
    (Wrong(), r"returned shape \(6, 40\), not 40 × 6"),
])
def test_a_broken_similarity_is_caught(broken, message):
    with pytest.raises(AssertionError, match=message):
        check_similarity(broken)


def test_the_example_package_runs_the_kit_in_its_own_tests_as_the_readme_shows():
    readme = (EXAMPLE.parents[1] / "README.md").read_text()
    own = (EXAMPLE / "tests" / "test_conformance.py").read_text()
    assert own in readme
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(EXAMPLE.parents[1]), str(EXAMPLE)]),
           "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE / "tests")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "3 passed" in done.stdout, done.stdout + done.stderr
