"""The held-out guarantee end to end: an encoder that is evaluated never shaped the
anchors (fps, PARAM) or the between-bank regularizers of the decoder it is evaluated with."""

from __future__ import annotations

import pytest
import toy_plugins

from relbench.config import load_suite
from relbench.errors import ConfigError
from relbench.runner import Runner

ENCODERS = """\
    encoders:
      - {name: toy-rotated, label: a, params: {seed: 1}}
      - {name: toy-rotated, label: b, params: {seed: 2, scale: 3.0}}
      - {name: toy-rotated, label: c, params: {seed: 3, scale: 0.5}}
"""


def _suite(kind: str, selectors: str, regularizers: str = "[none]") -> str:
    return f"""\
suite: {{seeds: [0, 1], num_anchors: 16, output: results, leaderboards: boards}}
tasks:
  - name: blobs
    kind: {kind}
    dataset: {{name: toy-blobs, params: {{classes: 4}}}}
{ENCODERS}    grid:
      selectors: {selectors}
      similarities: [cosine]
      stitchers: [{{name: relative, params: {{epochs: 2}}}}]
      regularizers: {regularizers}
"""


def _run(registry, path):
    runner = Runner(load_suite(path, registry), registry, quiet=True)
    stats = runner.run()
    assert not stats.failures, stats.failures
    return runner.store.load("blobs")


def test_a_learning_selector_never_sees_the_encoder_it_is_evaluated_on(registry, write_yaml):
    toy_plugins.SpySelector.calls.clear()
    df = _run(registry, write_yaml(_suite("stitching", "[toy-spy]")))
    calls = toy_plugins.SpySelector.calls
    assert calls, "the selector was never asked"
    for _, banks, excluded in calls:
        assert excluded and not set(excluded) & set(banks)
    assert {tuple(e) for _, _, e in calls} == {("a",), ("b",), ("c",)}
    # every evaluated cell names its source as held out
    cells = df[df["metric"] == "accuracy"]
    assert len(cells) == 2 * 3 * 3
    assert all(row.held_out == row.source for row in cells.itertuples())


def test_held_out_protocol_keeps_the_source_out_of_param_and_partner_banks(registry, write_yaml):
    text = _suite("{name: stitching, params: {protocol: held-out}}",
                  "[{name: param, params: {epochs: 2, subset_size: 60}}]",
                  "[{name: soft-jaccard, params: {weight: 0.5}}]")
    df = _run(registry, write_yaml(text))
    cells = df[df["metric"] == "accuracy"]
    assert len(cells) == 2 * 3 * 2  # seeds × held-out sources × the other targets
    for row in cells.itertuples():
        extra = row.extra
        assert row.source not in extra["param_banks"] and row.source not in extra["partner_banks"]
        assert row.target not in extra["partner_banks"] and extra["partner_banks"]
        assert row.needs_both_spaces is True and "needs_both_spaces" not in extra


@pytest.mark.parametrize("kind", ["translation-quality", "scale-invariance"])
def test_task_kinds_that_do_not_hold_out_refuse_learning_selectors(registry, write_yaml, kind):
    grid = _suite(kind, "[fps]").split("      similarities:")[0]  # these kinds declare the selectors axis alone
    path = write_yaml(grid)
    with pytest.raises(ConfigError, match=r"tasks.yaml:\d+: at `tasks\[0\]\.grid\.selectors\[0\]`.*learns from"):
        load_suite(path, registry)
