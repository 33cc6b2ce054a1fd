"""tasks.yaml validation: every error names file, line, key path and a fix."""

from __future__ import annotations

import pytest

from relbench.config import load_suite
from relbench.errors import ConfigError

GOOD = """\
suite:
  seeds: [0, 1]
  num_anchors: 8
tasks:
  - name: blobs
    dataset: toy-blobs
    encoders:
      - {name: toy-rotated, label: a, params: {seed: 1}}
      - {name: toy-rotated, label: b, params: {seed: 2, scale: 3.0}}
    grid:
      selectors: [random]
      similarities: [cosine]
      stitchers: [relative, absolute]
    metrics: [accuracy]
"""


def _error(registry, write_yaml, text, name="tasks.yaml") -> str:
    with pytest.raises(ConfigError) as err:
        load_suite(write_yaml(text, name), registry)
    return str(err.value)


def test_good_file_validates(registry, write_yaml):
    suite = load_suite(write_yaml(GOOD), registry)
    (task,) = suite.tasks
    assert task.seeds == [0, 1] and task.num_anchors == 8
    assert [e.label for e in task.encoders] == ["a", "b"]
    assert task.encoders[1].params == {"seed": 2, "scale": 3.0}
    assert [s.label for s in task.grid["stitchers"]] == ["relative", "absolute"]


def test_malformed_yaml_names_line(registry, write_yaml):
    msg = _error(registry, write_yaml, "tasks:\n  - name: [unclosed\n")
    assert "tasks.yaml:" in msg and "malformed YAML" in msg


def test_unknown_top_level_key(registry, write_yaml):
    msg = _error(registry, write_yaml, "suit:\n  seeds: [0]\n" + GOOD.split("\n", 3)[3])
    assert "tasks.yaml:1" in msg and "'suit'" in msg and "did you mean 'suite'" in msg


def test_unknown_plugin_name_suggests(registry, write_yaml):
    msg = _error(registry, write_yaml, GOOD.replace("similarities: [cosine]", "similarities: [cosin]"))
    assert "tasks.yaml:12" in msg and "tasks[0].grid.similarities[0]" in msg and "'cosine'" in msg


def test_wrong_parameter_type(registry, write_yaml):
    msg = _error(registry, write_yaml, GOOD.replace("scale: 3.0", "scale: big"))
    assert "tasks.yaml:9" in msg and "scale" in msg and "expects float" in msg


def test_unknown_parameter(registry, write_yaml):
    msg = _error(registry, write_yaml, GOOD.replace("scale: 3.0", "scael: 3.0"))
    assert "no parameter 'scael'" in msg and "did you mean 'scale'" in msg


def test_missing_required_and_bad_seeds(registry, write_yaml):
    assert "required key `dataset`" in _error(registry, write_yaml, GOOD.replace("    dataset: toy-blobs\n", ""))
    assert "integer seeds" in _error(registry, write_yaml, GOOD.replace("[0, 1]", "[zero]"))


def test_include_composes_tasks(registry, write_yaml):
    write_yaml(GOOD.replace("name: blobs", "name: other").split("tasks:", 1)[0] + "tasks:" +
               GOOD.replace("name: blobs", "name: other").split("tasks:", 1)[1], "more.yaml")
    suite = load_suite(write_yaml(GOOD + "include: [more.yaml]\n"), registry)
    assert [t.name for t in suite.tasks] == ["blobs", "other"]
    assert suite.tasks[1].seeds == [0, 1]  # the including file's suite defaults apply


def test_duplicate_task_names(registry, write_yaml):
    body = GOOD.split("tasks:\n", 1)[1]
    assert "duplicate task names" in _error(registry, write_yaml, GOOD + body)


def test_claims_and_published_are_validated(registry, write_yaml):
    msg = _error(registry, write_yaml, GOOD + "    claims:\n      - {claim: x, better: {stitcher: relative}}\n")
    assert "needs `worse`" in msg and "tasks[0].claims[0]" in msg
    msg = _error(registry, write_yaml, GOOD + "    claims:\n      - {claim: x, better: {stiched: a}, worse: {}}\n")
    assert "'stiched'" in msg and "did you mean 'stitcher'" in msg
    msg = _error(registry, write_yaml, GOOD + "    claims:\n      - {claim: x, better: {stitcher: a}, worse: {}, "
                                              "test: equivalence}\n")
    assert "tasks[0].claims[0].test" in msg and "superiority, non-inferiority" in msg
    msg = _error(registry, write_yaml, GOOD + "    published:\n      - {metric: accuracy, value: high}\n")
    assert "expected a number" in msg


def test_a_claims_paper_and_a_published_entrys_differs_are_text(registry, write_yaml):
    claim = "    claims:\n      - {claim: x, better: {stitcher: relative}, worse: {stitcher: absolute}, paper: %s}\n"
    entry = "    published:\n      - {stitcher: relative, metric: accuracy, value: 0.9, differs: %s}\n"
    suite = load_suite(write_yaml(GOOD + claim % '"A 2023, Table 5"' + entry % '"five epochs"'), registry)
    (task,) = suite.tasks
    assert task.claims[0]["paper"] == "A 2023, Table 5" and task.published[0]["differs"] == "five epochs"
    msg = _error(registry, write_yaml, GOOD + claim % "[Table, 5]")
    assert "tasks.yaml:16" in msg and "tasks[0].claims[0].paper" in msg and "expected a string" in msg
    msg = _error(registry, write_yaml, GOOD + entry % "{epochs: 5}")
    assert "tasks.yaml:16" in msg and "tasks[0].published[0].differs" in msg and "expected a string" in msg


def test_a_claim_may_filter_on_the_columns_a_kinds_claim_rows_add(registry, write_yaml):
    quality = ("suite: {seeds: [0]}\ntasks:\n  - name: q\n    kind: translation-quality\n    dataset: toy-blobs\n"
               "    encoders: [{name: toy-rotated, label: a}, {name: toy-rotated, label: b, params: {seed: 2}}]\n"
               "    grid: {selectors: [random]}\n"
               "    claims:\n      - {claim: x, better: {translation: irp}, worse: {translation: none}}\n")
    suite = load_suite(write_yaml(quality), registry)
    assert suite.tasks[0].claims[0]["better"] == {"translation": "irp"}
    msg = _error(registry, write_yaml, quality.replace("worse: {translation", "worse: {translaton"))
    assert "'translaton'" in msg and "did you mean 'translation'" in msg
