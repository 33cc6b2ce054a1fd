"""What a stitcher is on the pages comes from typed row columns its class declares
(``role``, ``needs_both_spaces``), written on new rows and derived from the stored
classes on rows that lack them (the release's flat rows, older stores); never from the
label a tasks file gives the stitcher, nor from ``extra``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import SimpleNamespace
from typing import ClassVar

import pandas as pd
import pytest
import toy_plugins

from relbench.api import ResultRow, hookimpl
from relbench.config import load_suite
from relbench.export import flatten
from relbench.pages import Page
from relbench.plugins import Registry, _discover
from relbench.rows import flat_row
from relbench.runner import Runner
from relbench_relreps.stitchers import AbsoluteDecoder
from relbench_stitching import Stitching
from relbench_stitching.declared import DECLARED, declared_columns
from relbench_stitching.page import held_out_section


@dataclass
class AnchorFreeMethod(AbsoluteDecoder):
    """A method that uses no anchors (an absolute head standing in for one): ranked,
    because its class says so, although it needs no anchors."""

    name: ClassVar[str] = "toy-anchor-free"
    role: ClassVar[str] = "method"


SUITE = """\
suite: {seeds: [0], num_anchors: 16, output: results, leaderboards: boards}
tasks:
  - name: blobs
    kind: {name: stitching, params: {protocol: held-out}}
    dataset: {name: toy-blobs, params: {classes: 4}}
    encoders:
      - {name: toy-rotated, label: a, params: {seed: 1}}
      - {name: toy-rotated, label: b, params: {seed: 2, scale: 3.0}}
      - {name: toy-rotated, label: c, params: {seed: 3, scale: 0.5}}
    grid:
      selectors: [random]
      similarities: [cosine]
      stitchers: [{name: relative, label: relative, params: {epochs: 2}},
                  {name: absolute, label: absolute, params: {epochs: 2}},
                  {name: non-stitched, label: own-head, params: {epochs: 2}},
                  {name: toy-anchor-free, label: toy-anchor-free, params: {epochs: 2}}]
      regularizers: [none, {name: soft-jaccard, label: soft-jaccard, params: {weight: 0.5}}]
    metrics: [accuracy]
"""

ROLES = {"relative": "method", "absolute": "reference", "own-head": "own-head", "toy-anchor-free": "method"}
OWN_LINE = "own absolute head (reference)"


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> pd.DataFrame:
    """The rows a held-out run of the suite above stores (non-stitched labelled ``own-head``)."""
    folder = tmp_path_factory.mktemp("roles")
    (folder / "tasks.yaml").write_text(SUITE)
    extra = SimpleNamespace(relbench_stitchers=hookimpl(lambda: [AnchorFreeMethod]))
    registry = Registry(_discover() + [("toy", toy_plugins, "tests 0"), ("roles", extra, "tests 0")])
    runner = Runner(load_suite(folder / "tasks.yaml", registry), registry, quiet=True)
    stats = runner.run()
    assert not stats.failures, stats.failures
    return runner.store.load("blobs")


def _without_columns(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` as a store written before the columns existed holds them."""
    return rows.drop(columns=list(DECLARED))


def _release(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` as the committed release holds them: flat (``extra.*``, ``inputs.*``,
    ``per_sample.*``; no ``extra`` dict), without the columns."""
    return flatten(_without_columns(rows))


def test_new_rows_carry_the_role_and_both_spaces_columns_and_extra_neither(stored):
    assert {s: set(g) for s, g in stored.groupby("stitcher")["role"]} == {s: {r} for s, r in ROLES.items()}
    partners = stored["regularizer"] == "soft-jaccard"
    assert partners.any() and stored["needs_both_spaces"].equals(partners)  # the unit's partners, not the class
    assert not any("role" in e or "needs_both_spaces" in e for e in stored["extra"])


@pytest.mark.parametrize("form", [_without_columns, _release], ids=["older-store", "release"])
def test_rows_without_the_columns_get_them_from_their_stored_classes(stored, form):
    derived = declared_columns(form(stored))
    assert derived.equals(stored[list(DECLARED)].astype({"role": str, "needs_both_spaces": bool}))


@pytest.mark.parametrize("form", [lambda rows: rows, _without_columns, _release], ids=["new", "older-store", "release"])
def test_a_relabelled_own_head_draws_the_held_out_reference_line(stored, form, tmp_path):
    rows = form(stored)
    text = Stitching(protocol="held-out").page(rows, Page(tmp_path, "blobs"))
    own = next(line for line in text.splitlines() if line.startswith(f"| {OWN_LINE}"))
    # a score for each held-out encoder; one seed and no metric plugin to rescore the predictions: no interval
    assert len(re.findall(r"\| [01]\.[0-9]{3} n/a", own)) == 3
    assert own == next(line for line in held_out_section(stored, "accuracy", Page(tmp_path, "again")).splitlines()
                       if line.startswith(f"| {OWN_LINE}"))
    listed = text.split("Combinations that need both spaces")[1].split("</details>")[0]
    assert "soft-jaccard" in listed  # the combination whose regularizer reads the partner banks, by its label
    assert all("soft-jaccard" in line for line in listed.splitlines() if "relative" in line)  # not every relative


def test_a_headline_whose_combination_reads_both_spaces_is_not_called_zero_shot():
    from relbench_stitching.scores import meaning

    headline = {"metric": "accuracy", "score": 0.8, "best": "random · cosine · relative · soft-jaccard",
                "reference": 0.9}
    assert "zero-shot" in meaning({**headline, "both_spaces": False}, "higher")
    both = meaning({**headline, "both_spaces": True}, "higher")
    assert "zero-shot" not in both and "fitted with both encoders' spaces" in both


@pytest.mark.parametrize("form", [lambda rows: rows, _release], ids=["new", "release"])
def test_the_ranking_holds_the_declared_methods_only(stored, form):
    ranking = Stitching(protocol="held-out").ranking(form(stored))
    assert "toy-anchor-free" in ranking  # no anchors, yet a method: its class says so
    assert not {"absolute", "own-head"} & set(ranking)


def test_a_row_field_of_another_type_is_refused():
    task, kind = SimpleNamespace(name="t", dataset=SimpleNamespace(label="d")), Stitching()
    row = flat_row(task, kind, ResultRow("accuracy", 0.5, "higher", cell={"source": "a", "role": "method",
                                                                              "needs_both_spaces": False}), {}, {})
    assert (row["role"], row["needs_both_spaces"]) == ("method", False)
    with pytest.raises(TypeError, match=r"\{'needs_both_spaces': 'str'\}"):
        flat_row(task, kind, ResultRow("accuracy", 0.5, "higher", cell={"needs_both_spaces": "no"}), {}, {})
    with pytest.raises(TypeError, match=r"nor `row_fields` \('role', 'needs_both_spaces'\)"):
        flat_row(task, kind, ResultRow("accuracy", 0.5, "higher", cell={"colour": "red"}), {}, {})
