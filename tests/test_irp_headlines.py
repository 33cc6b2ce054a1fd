"""The index lines (headlines) of the translation-quality and scale-invariance task kinds,
on small hand-built result frames whose right answers are known."""

import math
from itertools import product

import numpy as np
import pandas as pd
import pytest

from relbench_irp.quality import TranslationQuality
from relbench_irp.scale import ScaleInvariance

SEEDS = (0, 1)


def quality_rows(validation: bool = True, encoders=("x", "y")) -> pd.DataFrame:
    """Two selectors over ω ∈ {1, 2} × δ ∈ {0.5, 0.8}. On the validation part selector
    ``b`` at (2, 0.5) is best; on the test draw (1, 0.8) is best for both selectors, so a
    headline that chose its cell on the test rows would name another one. Test cosines:
    inter-space 0.6 + 0.01 · seed + cell bonus, intra-space 0.2 higher."""
    rows = []
    for seed, sel, src, tgt, omega, delta in product(SEEDS, "ab", encoders, encoders, (1, 2), (0.5, 0.8)):
        cell = dict(seed=seed, selector=sel, source=src, target=tgt, omega=omega, delta=delta, status="ok",
                    direction="higher")
        bonus = 0.1 if (omega, delta) == (1, 0.8) else 0.0
        test = 0.6 + 0.01 * seed + bonus + (0.2 if src == tgt else 0.0) + (0.05 if sel == "b" else 0.0)
        rows.append({**cell, "metric": "reconstruction_cosine", "value": test})
        if validation:
            chosen = (sel, omega, delta) == ("b", 2, 0.5)
            rows.append({**cell, "metric": "validation_reconstruction_cosine", "value": 0.9 if chosen else 0.5})
    return pd.DataFrame(rows)


def test_translation_headline_is_the_validation_chosen_cell_against_intra_space():
    h = TranslationQuality().headline(quality_rows())
    assert h["metric"] == "reconstruction_cosine"
    assert h["best"] == "b · ω = 2 · δ = 0.5"
    # inter-space test cosine at the chosen cell: 0.65 + 0.01 · seed, mean over the two seeds
    assert h["score"] == pytest.approx(0.655)
    assert h["std"] == pytest.approx(np.std([0.65, 0.66], ddof=1))
    assert h["interval"][0] <= h["score"] <= h["interval"][1]
    assert h["reference"] == pytest.approx(0.855)  # intra-space at the same cell: a space into itself
    assert h["edges"] == ["ω", "δ"]  # ω = 2 and δ = 0.5 end the grids (1, 2) and (0.5, 0.8)
    assert "The chosen ω and δ are ends of the grid swept" in TranslationQuality().meaning(h, "higher")
    assert "grid swept" not in TranslationQuality().meaning({**h, "edges": []}, "higher")


def test_translation_headline_matches_the_page_table(tmp_path):
    """The score is the inter-space ω × δ table's cell at the per-pair table's (ω, δ)."""
    from relbench.pages import Page

    rows = quality_rows()
    cosines = rows[rows["metric"] == "reconstruction_cosine"]
    diagnostics = [cosines.assign(metric="condition_number", direction="lower", value=10.0 + cosines["omega"]),
                   cosines.assign(metric="anchors_kept", direction="neutral", value=100.0 * cosines["delta"])]
    rows = pd.concat([rows, *diagnostics], ignore_index=True)
    page = TranslationQuality().page(rows[rows["selector"] == "b"], Page(tmp_path, "t"))
    assert "Per pair at ω = 2, δ = 0.5" in page
    inter = page[page.index("inter-space"):]
    assert "| 2       | 0.655" in inter


def test_translation_headline_without_validation_or_second_encoder():
    assert TranslationQuality().headline(quality_rows(validation=False)) is None
    kind = TranslationQuality()
    assert kind.meaning(None, "higher").startswith("A reconstruction cosine near 1")
    single = kind.headline(quality_rows(encoders=("x",)))
    assert single["score"] == pytest.approx(0.855) and math.isnan(single["reference"])  # intra only, no reference
    assert kind.meaning(single, "higher").startswith("A reconstruction cosine near 1")


def test_translation_meaning_states_the_headline():
    kind = TranslationQuality()
    text = kind.meaning(kind.headline(quality_rows()), "higher")
    assert "b · ω = 2 · δ = 0.5" in text and "0.655" in text and "0.855" in text and "into itself" in text


def scale_rows(irp: bool = True) -> pd.DataFrame:
    """Heads with relu and cos on targets x and y, at α ∈ {1, 10}. At α = 10 the IRP
    input reaches 0.7 + 0.1 · seed with relu and 0.3 with cos; at α = 1 cos is the better
    one (so the largest α decides). Raw inputs score 0.9 everywhere; unscaled IRP relu
    0.75, unscaled IRP cos 0.2."""
    inputs = ("raw", "irp") if irp else ("raw",)
    rows = []
    for seed, act, target, fed in product(SEEDS, ("relu", "cos"), ("x", "y"), inputs):
        cell = dict(seed=seed, activation=act, target=target, input=fed, source="z" if fed == "irp" else target,
                    status="ok", direction="higher")
        for alpha in (1.0, 10.0):
            if fed == "raw":
                value = 0.9 - (0.1 if act == "cos" else 0.0)
            elif alpha == 10.0:
                value = 0.7 + 0.1 * seed if act == "relu" else 0.3
            else:
                value = 0.2 if act == "relu" else 0.6
            rows.append({**cell, "metric": "accuracy", "alpha": alpha, "value": value})
        unscaled = 0.9 if fed == "raw" else (0.75 if act == "relu" else 0.2)
        rows.append({**cell, "metric": "accuracy_unscaled", "alpha": np.nan, "value": unscaled})
    return pd.DataFrame(rows)


def test_scale_headline_is_irp_at_the_largest_alpha_against_unscaled():
    h = ScaleInvariance().headline(scale_rows())
    assert h["metric"] == "accuracy" and h["best"] == "relu · irp · α = 10"
    assert h["score"] == pytest.approx(0.75)  # mean over seeds of 0.7 and 0.8
    assert h["std"] == pytest.approx(np.std([0.7, 0.8], ddof=1))
    assert h["interval"][0] <= h["score"] <= h["interval"][1] and h["interval"][0] < h["interval"][1]
    assert h["reference"] == pytest.approx(0.75)  # the same inputs unscaled


def test_scale_headline_falls_back_to_raw_inputs_and_none_without_rows():
    h = ScaleInvariance().headline(scale_rows(irp=False))
    assert h["best"] == "relu · raw · α = 10" and h["score"] == pytest.approx(0.9)
    assert h["reference"] == pytest.approx(0.9)
    rows = scale_rows()
    assert ScaleInvariance().headline(rows[rows["metric"] != "accuracy"]) is None


def test_scale_meaning_states_the_headline():
    kind = ScaleInvariance()
    text = kind.meaning(kind.headline(scale_rows()), "higher")
    assert "relu · irp · α = 10" in text and "0.750" in text and "unscaled" in text
    assert "the best head on IRP-translated inputs" in text  # picked among those only: raw heads may score more
    raw = kind.meaning(kind.headline(scale_rows(irp=False)), "higher")
    assert "the best head on raw inputs" in raw
    assert kind.meaning(None, "higher").startswith("A curve that stays flat")


def _with_absolute(rows: pd.DataFrame, value: float = 0.0) -> pd.DataFrame:
    """``rows`` with the untranslated cosine of every (seed, selector, source, target)."""
    cells = rows.drop_duplicates(["seed", "selector", "source", "target"])
    absolute = cells.assign(metric="absolute_cosine", omega=np.nan, delta=np.nan,
                            value=[value + 0.001 * s for s in cells["seed"]])
    return pd.concat([rows, absolute], ignore_index=True)


def test_claim_rows_are_irp_at_the_validation_chosen_cell_beside_no_translation():
    rows = _with_absolute(quality_rows())
    claimed = TranslationQuality().claim_rows(rows)
    assert set(claimed["metric"]) == {"reconstruction_cosine"}  # both sides under one metric
    assert (claimed["source"] != claimed["target"]).all()  # inter-space pairs only
    irp = claimed[(claimed["translation"] == "irp") & (claimed["selector"] == "b")]
    assert set(zip(irp["omega"], irp["delta"])) == {(2, 0.5)}  # chosen on validation, not the test's (1, 0.8)
    assert len(irp) == 2 * 2  # two seeds × the two inter-space pairs
    none = claimed[(claimed["translation"] == "none") & (claimed["selector"] == "b")]
    assert len(none) == 4 and none["value"].max() < 0.01
    assert TranslationQuality().claim_rows(_with_absolute(quality_rows(validation=False))).empty


def test_a_claim_that_irp_beats_no_translation_is_paired_on_the_pairs_and_holds():
    from relbench.claims import claims_section

    rows = _with_absolute(quality_rows())
    claim = {"claim": "IRP reconstructs better than no translation", "metric": "reconstruction_cosine",
             "better": {"selector": "b", "translation": "irp"}, "worse": {"selector": "b", "translation": "none"}}
    text = claims_section(TranslationQuality(), rows, [claim], {})
    line = next(ln for ln in text.splitlines() if ln.startswith("- IRP reconstructs"))
    assert "**holds**" in line and "advantage +0.655" in line  # (0.65, 0.66) against (0.000, 0.001) by seed
    assert "paired on the 2 target/source values both sides have" in line
