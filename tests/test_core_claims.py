"""Claims on a page: sides paired on the units both were measured on, superiority or
non-inferiority within a per-metric margin, and Holm's control over the page's family."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from relbench.claims import claims_section, holm, one_sided_p


def _stitching():
    from relbench_stitching import Stitching

    return Stitching()


def _row(stitcher, source, target, seed, value, similarity="cosine"):
    return {"selector": "random", "similarity": similarity, "stitcher": stitcher, "regularizer": None,
            "source": source, "target": target, "seed": seed, "metric": "accuracy", "value": value,
            "direction": "higher", "status": "ok"}


def _advantage(text: str) -> float:
    return float(re.search(r"advantage ([+-][0-9.]+)", text).group(1))


def test_both_sides_are_compared_on_the_encoder_pairs_both_were_measured_on():
    # relative reaches three pairs, absolute one; on the pair they share relative is worse,
    # though its mean over its own pairs is far higher
    rows = [_row("relative", "a", "b", s, 0.50) for s in range(3)]
    rows += [_row("relative", src, tgt, s, 0.95) for src, tgt in (("b", "a"), ("c", "a")) for s in range(3)]
    rows += [_row("absolute", "a", "b", s, 0.60, similarity=None) for s in range(3)]
    claim = {"claim": "relative beats absolute", "better": {"stitcher": "relative"},
             "worse": {"stitcher": "absolute"}}
    text = claims_section(_stitching(), pd.DataFrame(rows), [claim], {})
    assert _advantage(text) == pytest.approx(-0.10)  # unpaired, it was 0.80 − 0.60 = +0.20
    assert "**does not hold**" in text
    assert "paired on the 1 source/target/held_out values both sides have (of 3 and 1 measured)" not in text
    assert "paired on the 1 source/target values both sides have (of 3 and 1 measured)" in text


def test_sides_that_share_no_unit_are_not_measured():
    rows = [_row("relative", "a", "b", 0, 0.5), _row("absolute", "b", "a", 0, 0.4, similarity=None)]
    claim = {"claim": "x", "better": {"stitcher": "relative"}, "worse": {"stitcher": "absolute"}}
    text = claims_section(_stitching(), pd.DataFrame(rows), [claim], {})
    assert "**not measured** (the sides share no paired unit" in text


@pytest.mark.parametrize("gap, superiority, non_inferiority", [
    (-0.005, "inconclusive", "holds"),          # a little worse, within the margin: at least as good
    (+0.030, "holds", "holds"),
    (-0.050, "does not hold", "does not hold"),  # worse by more than the margin
])
def test_at_least_as_good_is_tested_as_non_inferiority(gap, superiority, non_inferiority):
    rows = [_row("relative", "a", "b", s, 0.700 + gap, similarity="robust") for s in range(5)]
    rows += [_row("relative", "a", "b", s, 0.700) for s in range(5)]
    claim = {"claim": "robust is at least as good", "better": {"similarity": "robust"},
             "worse": {"similarity": "cosine"}}
    sup = claims_section(_stitching(), pd.DataFrame(rows), [claim], {})
    ni = claims_section(_stitching(), pd.DataFrame(rows), [{**claim, "test": "non-inferiority"}], {})
    assert f"**{superiority}**" in sup and ", superiority, margin 0.01" in sup
    assert f"**{non_inferiority}**" in ni and "non-inferiority (holds above −0.01), margin 0.01" in ni


def test_the_margin_is_the_metrics_own_unless_the_claim_sets_one():
    class Correlation:
        claim_margin = 0.05

    rows = [_row("relative", "a", "b", s, 0.73, similarity="robust") for s in range(5)]
    rows += [_row("relative", "a", "b", s, 0.70) for s in range(5)]
    claim = {"claim": "robust beats cosine", "better": {"similarity": "robust"}, "worse": {"similarity": "cosine"}}
    metric_margin = claims_section(_stitching(), pd.DataFrame(rows), [claim], {"accuracy": Correlation()})
    assert "margin 0.05" in metric_margin and "**inconclusive**" in metric_margin  # +0.03 < 0.05
    own = claims_section(_stitching(), pd.DataFrame(rows), [{**claim, "margin": 0.02}], {"accuracy": Correlation()})
    assert "margin 0.02" in own and "**holds**" in own


def test_holm_is_statsmodels_step_down():
    p = [0.01, 0.04, 0.03, 0.2]
    assert holm(p) == list(multipletests(p, alpha=0.05, method="holm")[0])
    assert holm([0.03]) == [True] and holm([0.03, 0.5]) == [False, False]  # 0.03 > 0.05 / 2


def test_one_sided_p_counts_the_observed_draw():
    draws = np.array([0.1, 0.2, -0.1, 0.3])
    assert one_sided_p(draws, 0.0, above=True) == pytest.approx((1 + 1) / (1 + 4))
    assert one_sided_p(draws, 0.0, above=False) == pytest.approx((1 + 3) / (1 + 4))
    assert one_sided_p(np.array([np.nan, 1.0]), 0.0, above=True) == pytest.approx(1 / 2)


def _claims_with_p(rows, claims):
    text = claims_section(_stitching(), pd.DataFrame(rows), claims, {})
    found = re.findall(r"\*\*(holds|does not hold|inconclusive)\*\* — .*?p = ([0-9.e-]+)", text)
    return text, [(v, float(p)) for v, p in found]


def test_the_pages_claims_form_one_family_under_holm():
    # a claim with a weak advantage (seed-level noise) decided alone, then beside a null claim;
    # no per-sample data: a paired t-test over the 8 seeds, p ≈ 0.035 (a bootstrap over these
    # seeds gave ≈ 0.03 for gains 0.0025 smaller, where the t-test's p is 0.053)
    gains = [g - 0.005 for g in (0.05, 0.04, 0.06, 0.02, 0.045, -0.01, 0.055, 0.03)]
    rows = [_row("relative", "a", "b", s, 0.7 + g, similarity="robust") for s, g in enumerate(gains)]
    rows += [_row("relative", "a", "b", s, 0.7) for s in range(len(gains))]
    rows += [_row("relative", "a", "b", s, 0.7 + (0.02 if s % 2 else -0.02), similarity="l1")
             for s in range(len(gains))]
    weak = {"claim": "robust beats cosine", "better": {"similarity": "robust"}, "worse": {"similarity": "cosine"}}
    null = {"claim": "l1 beats cosine", "better": {"similarity": "l1"}, "worse": {"similarity": "cosine"}}
    _, alone = _claims_with_p(rows, [weak])
    text, family = _claims_with_p(rows, [weak, null])
    assert "family is this page's 2 score claims" in text
    p_values = [p for _, p in family]
    assert alone[0][1] == pytest.approx(p_values[0])  # the same test; only the family differs
    assert alone[0][0] == "holds" and 0.025 < p_values[0] < 0.05 and family[0][0] == "inconclusive"
    t_test = stats.ttest_1samp(gains, 0.01, alternative="greater").pvalue  # the margin is the bar
    assert p_values[0] == pytest.approx(2 * t_test, rel=1e-3)
    expected = multipletests(p_values, alpha=0.05, method="holm")[0]
    assert [v != "inconclusive" for v, _ in family] == list(expected)


def test_achievable_claims_are_counts_outside_the_family():
    rows = [_row("irp", "a", "b", 0, 0.5), _row("absolute", "a", "a", 0, 0.9, similarity=None)]
    claim = {"claim": "irp reaches more pairs", "measure": "achievable", "better": {"stitcher": "irp"},
             "worse": {"stitcher": "absolute"}}
    text = claims_section(_stitching(), pd.DataFrame(rows), [claim], {})
    assert "not tested" in text and "family is this page's 0 score claims" in text


def _paper_claim(**extra):
    return {"claim": "relative beats absolute (A et al.)", "better": {"stitcher": "relative"},
            "worse": {"stitcher": "absolute"}, "paper": "A et al. 2023, Table 5; differs: 5 head epochs", **extra}


def _one_pair(relative: float, absolute: float) -> pd.DataFrame:
    rows = [_row("relative", "a", "b", s, relative + 0.001 * s) for s in range(5)]
    rows += [_row("absolute", "a", "b", s, absolute + 0.001 * s, similarity=None) for s in range(5)]
    return pd.DataFrame(rows)


def _note_under(text: str, claim: str) -> list[str]:
    """The indented lines under ``claim``'s verdict line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"- {claim}:"))
    return [line for line in lines[start + 1:] if line.startswith("  - ")][:2]


def test_a_claim_names_the_paper_setting_it_stands_for_under_its_verdict():
    text = claims_section(_stitching(), _one_pair(0.9, 0.5), [_paper_claim()], {})
    assert "**holds**" in text
    notes = _note_under(text, "relative beats absolute (A et al.)")
    assert notes == ["  - *Stands for:* A et al. 2023, Table 5; differs: 5 head epochs"]
    assert "does not hold here" not in text and "*stands for* names the paper" in text
    plain = claims_section(_stitching(), _one_pair(0.9, 0.5), [{k: v for k, v in _paper_claim().items()
                                                                if k != "paper"}], {})
    assert "Stands for" not in plain and "*stands for* names the paper" not in plain


def test_a_failing_papers_claim_is_said_not_to_hold_here_in_its_own_words():
    text = claims_section(_stitching(), _one_pair(0.5, 0.9), [_paper_claim()], {})
    assert "**does not hold**" in text
    stands, fails = _note_under(text, "relative beats absolute (A et al.)")
    assert stands.startswith("  - *Stands for:* A et al. 2023, Table 5")
    assert fails == ("  - **The paper's claim does not hold here:** “relative beats absolute (A et al.)” — "
                     "here its claimed-better side scores below the claimed-worse one by more than the margin.")
    inconclusive = claims_section(_stitching(), _one_pair(0.700, 0.702), [_paper_claim()], {})
    assert "**inconclusive**" in inconclusive and "does not hold here" not in inconclusive


def test_a_failing_achievable_claim_is_said_not_to_hold_in_cells():
    rows = [_row("irp", "a", "b", 0, 0.5), _row("absolute", "a", "b", 0, 0.9, similarity=None)]
    claim = {"claim": "irp reaches more pairs", "measure": "achievable", "better": {"stitcher": "irp"},
             "worse": {"stitcher": "absolute"}, "paper": "B et al. 2024, Table 2"}
    text = claims_section(_stitching(), pd.DataFrame(rows), [claim], {})
    assert "**does not hold**" in text
    assert "**The paper's claim does not hold here:** “irp reaches more pairs” — here its claimed-better side " \
           "reaches no more cells than the claimed-worse one." in text


def test_a_p_near_one_is_read_as_tested_against_the_margins_not_against_zero():
    # an advantage of +0.007 (every seed): clearly above 0, but within the margin of 0.01 on both sides
    rows = [_row("relative", "a", "b", s, 0.707 + 0.001 * (s % 2), similarity="robust") for s in range(5)]
    rows += [_row("relative", "a", "b", s, 0.700) for s in range(5)]
    claim = {"claim": "robust beats cosine", "better": {"similarity": "robust"}, "worse": {"similarity": "cosine"}}
    text = claims_section(_stitching(), pd.DataFrame(rows), [claim], {})
    assert "**inconclusive**" in text and "p = 1" in text  # the t-test against +0.01 and -0.01, not against 0
    assert "tested against its bars, not against 0" in text and "not that it is 0" in text
