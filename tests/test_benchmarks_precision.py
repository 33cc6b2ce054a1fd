"""The precision comparison benchmark: cells read from pages, |Δ| against the fp32
half-width, claim verdicts and tie groups decide whether bf16 qualifies."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import precision_cells as pc  # noqa: E402

PAGE = """# t

- Claim one: **{verdict}** — a: 0.7 vs b: 0.6

### Ranking by stitched weighted_f1

| #   | similarity   | stitched weighted_f1 ↑ [95 % CI]   | Δ to best [95 % CI]     | own space weighted_f1 ↑ [95 % CI]   |
|:----|:-------------|:-----------------------------------|:------------------------|:------------------------------------|
| 1   | cosine       | **{first} [0.770, 0.790]**         | best                    | 0.800 [0.790, 0.810]                |
| 2   | l1           | {second_bold}0.760 [0.750, 0.770]{second_bold}           | -0.020 [-0.03, -0.01]   | 0.810 [0.800, 0.820]                |
"""


def page(first="0.780", verdict="holds", second_bold=""):
    return PAGE.format(first=first, verdict=verdict, second_bold=second_bold)


def test_every_interval_column_but_the_paired_delta_is_a_cell():
    cells = pc.ranking(page())
    assert len(cells) == 4
    first = cells[("Ranking by stitched weighted_f1", "cosine", "stitched weighted_f1 ↑")]
    assert (first.score, first.low, first.high, first.tied) == (0.78, 0.77, 0.79, True)
    assert pc.verdicts(page()) == {"Claim one": "holds"}


def test_bf16_qualifies_only_within_half_widths_with_the_same_claims_and_groups():
    assert pc.compare("t", page(), page(first="0.789"))[-1].startswith("t: qualifies")
    moved = pc.compare("t", page(), page(first="0.7905"))  # half-width 0.010
    assert "MOVED" in "\n".join(moved) and "1 cell(s) beyond" in moved[-1]
    assert "1 claim verdict(s) changed" in pc.compare("t", page(), page(verdict="inconclusive"))[-1]
    assert "1 tie-group change(s)" in pc.compare("t", page(), page(second_bold="**"))[-1]
