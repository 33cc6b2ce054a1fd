"""The symmetry kind: each group's fit recovers a planted map of its group, the fits are
ordered as the groups are nested, the scaled Procrustes and the dimension assignment match
their references, and a run on toy banks yields rows and a page."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.linalg
import torch

from relbench.api import Bank, Page, TaskRunDouble, make_task, spec
from relbench.protocol import EvaluationProtocol
from relbench_relreps.selectors import RandomAnchors
from relbench_stitching.groups import (GROUPS, fit_groups, matched_dimensions, orthogonal_diagonal_fit,
                                       permutation_diagonal_fit, relative_residual, scaled_orthogonal_fit)
import relbench_stitching.symmetry as symmetry_module
from relbench_stitching.symmetry import Symmetry, smallest_group
from test_conformance_task_kind import CLASSES
from test_core_sharing import _banks as blob_banks  # encoders a and b (a rotation of a), 4 classes in 12 dims

D = 6


def _generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _gaussian(rows: int, cols: int, g: torch.Generator) -> torch.Tensor:
    return torch.randn(rows, cols, generator=g, dtype=torch.float64)


def _orthogonal(d: int, g: torch.Generator) -> torch.Tensor:
    return torch.linalg.qr(_gaussian(d, d, g))[0]


def _planted() -> dict:
    """Source anchors and held-out rows, and a member of each group with a translation."""
    g = _generator()
    X, X_new = _gaussian(80, D, g) * torch.linspace(0.5, 3.0, D, dtype=torch.float64), _gaussian(30, D, g)
    Q, bias = _orthogonal(D, g), _gaussian(1, D, g)
    scales = torch.tensor([2.0, -1.0, 0.5, 3.0, -1.5, 0.8], dtype=torch.float64)
    permutation = torch.eye(D, dtype=torch.float64)[[3, 1, 5, 0, 2, 4]]
    maps = {"scaled-orthogonal": 2.5 * Q, "permutation-diagonal": permutation * scales,
            "orthogonal-diagonal": Q * scales, "affine": _gaussian(D, D, g)}
    return {"X": X, "X_new": X_new, "bias": bias, "maps": maps}


@pytest.mark.parametrize("group", GROUPS)
def test_each_fit_recovers_a_planted_member_of_its_group(group):
    p = _planted()
    M, bias = p["maps"][group], p["bias"]
    fitted = fit_groups(p["X"], p["X"] @ M + bias, iterations=25)[group]
    probe = torch.cat([torch.eye(D, dtype=torch.float64), torch.zeros(1, D, dtype=torch.float64)])
    recovered = fitted(probe)  # the images of the unit vectors and of 0: the linear part and the bias
    assert torch.allclose(recovered[-1], bias[0], atol=1e-6)
    assert torch.allclose(recovered[:-1] - recovered[-1], M, atol=1e-6)
    assert torch.allclose(fitted(p["X_new"]), p["X_new"] @ M + bias, atol=1e-6)


@pytest.mark.parametrize("group", ["scaled-orthogonal", "permutation-diagonal", "orthogonal-diagonal"])
def test_a_smaller_group_does_not_explain_a_larger_groups_map(group):
    """The planted affine map is no member of the smaller groups: their fits leave a residual."""
    p = _planted()
    Y = p["X"] @ p["maps"]["affine"] + p["bias"]
    assert relative_residual(fit_groups(p["X"], Y, iterations=25)[group](p["X"]), Y) > 0.05


@pytest.mark.parametrize("widths", [(6, 6), (4, 7), (7, 4)])
@pytest.mark.parametrize("seed", range(4))
def test_the_fits_are_ordered_as_the_groups_are_nested(widths, seed):
    """On random data, on the anchors fitted on: (c) ≤ (a), (c) ≤ (b) and (d) ≤ (c)."""
    g = _generator(seed)
    X, Y = _gaussian(40, widths[0], g) + 1.0, _gaussian(40, widths[1], g) @ _gaussian(widths[1], widths[1], g)
    residual = {name: relative_residual(f(X), Y) for name, f in fit_groups(X, Y, iterations=5).items()}
    slack = 1e-12
    assert residual["orthogonal-diagonal"] <= residual["scaled-orthogonal"] + slack
    assert residual["orthogonal-diagonal"] <= residual["permutation-diagonal"] + slack
    assert residual["affine"] <= residual["orthogonal-diagonal"] + slack
    assert residual["affine"] < residual["scaled-orthogonal"]  # random data: the general map fits strictly better


def test_more_alternating_iterations_never_raise_the_orthogonal_diagonal_residual():
    g = _generator(3)
    X, Y = _gaussian(50, 5, g), _gaussian(50, 5, g) @ _gaussian(5, 5, g)
    residuals = [relative_residual(orthogonal_diagonal_fit(X, Y, n)(X), Y) for n in (0, 1, 2, 5, 20, 80)]
    assert all(later <= earlier + 1e-12 for earlier, later in zip(residuals, residuals[1:]))
    assert residuals[-1] < residuals[0]  # and the iterations do descend from the start


def test_the_kinds_majorisation_stops_short_of_the_groups_fit_on_anisotropic_anchors():
    """What the page says of (c): on anisotropic spaces (as embeddings are) 25 steps leave
    anchor loss that further steps remove, so (c)'s row is not the group's least-squares
    fit. Should a solver ever converge here, the page's note must change."""
    g = _generator(4)
    spectrum = torch.arange(1, 41, dtype=torch.float64) ** -1.5  # eigenvalues of XᵀX spread by 40³
    X = _gaussian(120, 40, g) * spectrum
    Y = X @ torch.linalg.qr(_gaussian(40, 40, g))[0] * (1 + _gaussian(1, 40, g)) + 0.05 * _gaussian(120, 40, g)
    at = {n: relative_residual(orthogonal_diagonal_fit(X, Y, n)(X), Y) for n in (25, 400)}
    assert at[400] < at[25] - 1e-3


def test_the_page_says_how_group_cs_steps_were_chosen(tmp_path):
    rows = _run().frame()
    page = Symmetry(iterations=3, patience=2).page(rows, Page(tmp_path, "t"))
    assert "chosen on the seed's validation samples" in page and "stopping 2 steps after it (at most 3)" in page
    assert "benchmarks/symmetry_fit.py" in page
    c = rows[(rows["group"] == "orthogonal-diagonal") & (rows["metric"] == "residual")]
    report = c["extra"].tolist()
    assert report and all({"steps", "chosen_step", "validation_residual"} <= set(r) for r in report)
    assert all(r["chosen_step"] <= r["steps"] <= 3 for r in report)


def _noisy_pair(seed: int, n: int = 60):
    g = _generator(seed)
    X = _gaussian(n, 6, g) * torch.logspace(0, 1.5, 6, dtype=torch.float64)
    Y = X @ _orthogonal(6, g) * torch.linspace(0.3, 3.0, 6, dtype=torch.float64) + 0.5 * _gaussian(n, 6, g)
    return X, Y


def test_group_cs_steps_are_those_with_the_lowest_validation_residual():
    """The kept map is the step whose validation residual is lowest among those taken, and
    the steps stop ``patience`` after it (or at ``iterations``)."""
    for seed in range(4):
        X, Y = _noisy_pair(seed)
        Xv, Yv = _noisy_pair(seed + 10)
        fit = orthogonal_diagonal_fit(X, Y, 40, validation=(Xv, Yv), patience=3)
        steps, chosen = int(fit.report["steps"]), int(fit.report["chosen_step"])
        path = [relative_residual(orthogonal_diagonal_fit(X, Y, n)(Xv), Yv) for n in range(steps + 1)]
        assert fit.report["validation_residual"] == pytest.approx(min(path), rel=1e-12)
        assert path[chosen] == pytest.approx(min(path), rel=1e-12)
        assert steps == 40 or steps == chosen + 3
        assert torch.allclose(fit(Xv), orthogonal_diagonal_fit(X, Y, chosen)(Xv), atol=1e-10)


def test_patience_below_one_is_refused():
    with pytest.raises(ValueError, match="patience must be ≥ 1"):
        Symmetry(patience=0)


def test_the_scaled_procrustes_is_scipys_rotation_with_the_closed_form_scale():
    g = _generator(1)
    X, Y = _gaussian(30, 5, g), _gaussian(30, 5, g)
    Xc, Yc = (A - A.mean(dim=0) for A in (X, Y))
    R, singular_sum = scipy.linalg.orthogonal_procrustes(Xc.numpy(), Yc.numpy())
    scale = singular_sum / float((Xc * Xc).sum())
    fitted = scaled_orthogonal_fit(X, Y)
    assert np.allclose(fitted.M.numpy(), scale * R, atol=1e-10)
    assert torch.allclose(fitted.offset - fitted.shift @ fitted.M, Y.mean(dim=0) - X.mean(dim=0) @ fitted.M)


@pytest.mark.parametrize("widths", [(2, 2), (3, 3), (4, 4), (5, 5), (3, 5), (5, 4)])
def test_the_permutation_fit_is_the_least_squares_optimum_over_every_assignment(widths):
    # targets of unequal variances: the largest absolute correlations are not the least-squares matching
    g = _generator(sum(widths))
    X = _gaussian(25, widths[0], g)
    Y = _gaussian(25, widths[1], g) * torch.linspace(0.2, 3.0, widths[1], dtype=torch.float64)
    Xc, Yc = X - X.mean(dim=0), Y - Y.mean(dim=0)
    n = min(widths)

    def residual(pairs) -> float:  # each matched target column at its least-squares scale, the rest at its mean
        fitted = torch.zeros_like(Yc)
        for i, j in pairs:
            fitted[:, j] = Xc[:, i] * float(Xc[:, i] @ Yc[:, j]) / float(Xc[:, i] @ Xc[:, i])
        return float(((Yc - fitted) ** 2).sum())

    best = min(residual(list(zip(r, c))) for r in itertools.combinations(range(widths[0]), n)
               for c in itertools.permutations(range(widths[1]), n))
    assert float(((permutation_diagonal_fit(X, Y)(X) - Y) ** 2).sum()) == pytest.approx(best, rel=1e-9)
    assert residual(list(zip(*matched_dimensions(Xc, Yc)))) == pytest.approx(best, rel=1e-9)


def test_matching_by_the_largest_correlations_would_leave_a_larger_residual():
    # two target columns of very different variances: |r| prefers the cross matching, least squares the diagonal
    g = _generator(11)
    X, noise = _gaussian(400, 2, g), _gaussian(400, 2, g)
    Y = torch.stack([10 * (0.6 * X[:, 0] + 0.3 * X[:, 1] + 0.7 * noise[:, 0]),
                     0.1 * (0.9 * X[:, 0] + 0.1 * X[:, 1] + 0.4 * noise[:, 1])], dim=1)
    Xc, Yc = X - X.mean(dim=0), Y - Y.mean(dim=0)
    assert sorted(zip(*matched_dimensions(Xc, Yc))) == [(0, 0), (1, 1)]  # not x0 → y1, where |r| is largest


def test_the_permutation_fit_scales_each_matched_dimension_by_least_squares():
    g = _generator(4)
    X = _gaussian(60, 3, g)
    Y = torch.stack([-2.0 * X[:, 2], 0.5 * X[:, 0], 4.0 * X[:, 1]], dim=1) + 0.01 * _gaussian(60, 3, g)
    fitted = permutation_diagonal_fit(X, Y)
    assert (fitted.M != 0).sum() == 3
    Xc, Yc = X - X.mean(dim=0), Y - Y.mean(dim=0)
    for i, j in ((2, 0), (0, 1), (1, 2)):
        assert float(fitted.M[i, j]) == pytest.approx(float(Xc[:, i] @ Yc[:, j] / (Xc[:, i] @ Xc[:, i])))


GA, GB, GC, GD = "scaled-orthogonal", "permutation-diagonal", "orthogonal-diagonal", "affine"


def _seeds(*values: float) -> dict[int, float]:
    return dict(enumerate(values))


@pytest.mark.parametrize("residuals,expected", [
    # (a) differs from affine by seed noise, up and down: not shown worse, the smallest group explains the pair
    ({GA: _seeds(0.11, 0.09, 0.12), GB: _seeds(0.5, 0.4, 0.6), GC: _seeds(0.105, 0.1, 0.11),
      GD: _seeds(0.1, 0.1, 0.1)}, GA),
    # (a) worse on every seed by far, (b) not shown worse
    ({GA: _seeds(0.3, 0.25, 0.35), GB: _seeds(0.12, 0.09, 0.12), GC: _seeds(0.11, 0.1, 0.12),
      GD: _seeds(0.1, 0.1, 0.11)}, GB),
    # (c) worse than affine by 0.015 on every seed: the seeds' common variation cancels in the paired
    # differences, so (c) is shown worse although its mean lies inside affine's interval over seeds
    ({GA: _seeds(0.6, 0.6, 0.6), GB: _seeds(0.7, 0.7, 0.7), GC: _seeds(0.265, 0.285, 0.305),
      GD: _seeds(0.25, 0.27, 0.29)}, GD),
    # the best is not affine (an affine fit that overfits the anchors): measured against the best
    ({GA: _seeds(0.3, 0.3, 0.3), GB: _seeds(0.4, 0.4, 0.4), GC: _seeds(0.2, 0.19, 0.21), GD: _seeds(0.6, 0.6, 0.6)},
     GC),
    # differences below float32's resolution are ties
    ({GA: _seeds(4e-7, 4e-7), GB: _seeds(0.4, 0.4), GC: _seeds(2e-7, 2e-7), GD: _seeds(1e-8, 1e-8)}, GA),
    # one seed: no interval, the difference itself
    ({GA: _seeds(0.2), GD: _seeds(0.1)}, GD),
    ({GA: _seeds(float("nan"))}, None),
])
def test_the_smallest_group_is_the_first_not_shown_worse_than_the_best_paired_over_seeds(residuals, expected):
    assert smallest_group(residuals) == expected


def _task(seeds=(0, 1)):
    return make_task(Symmetry, encoders=["a", "b"], seeds=list(seeds), num_anchors=30,
                     grid={"selectors": [spec(RandomAnchors)]}, epochs=2, iterations=3, max_samples=60,
                     protocol=EvaluationProtocol(validation=0.2))  # group (c)'s steps: on the banks' validation rows


def _run(seeds=(0, 1)) -> TaskRunDouble:
    run = TaskRunDouble(_task(seeds), blob_banks(), dataset=CLASSES)
    run.run()
    return run


def test_a_run_gives_every_group_of_every_pair_and_a_rotation_is_explained_by_the_smallest_group(tmp_path):
    """Encoder b is a rotation of a: scaled orthogonal maps it exactly, and the target's
    head reads the mapped source as well as its own space."""
    run = _run()
    rows = run.frame()
    ok = rows[rows["status"] == "ok"]
    assert set(ok["metric"]) == {"residual", "anchor_residual", "accuracy", "own_accuracy"}
    per_group = ok[ok["metric"] == "residual"]
    assert len(per_group) == 2 * 2 * len(GROUPS)  # 2 seeds × 2 ordered pairs × 4 groups
    assert set(per_group["group"]) == set(GROUPS)
    exact = per_group[per_group["group"] == "scaled-orthogonal"]["value"]
    assert (exact < 1e-5).all()
    accuracy = ok[(ok["metric"] == "accuracy") & (ok["group"] == "scaled-orthogonal")].set_index(["seed", "target"])
    own = ok[ok["metric"] == "own_accuracy"].set_index(["seed", "target"])
    assert np.allclose(accuracy["value"].sort_index(), own["value"].sort_index())
    page = run.kind.page(rows, Page(tmp_path, "t"))
    assert re.search(r"\| \(a\) scaled-orthogonal +\| 2 +\|", page)  # both pairs, in the summary
    assert len(re.findall(r"\| \(a\) scaled-orthogonal +\|\n", page)) == 2  # each pair's smallest group


@pytest.mark.skipif(not torch.cuda.is_available(), reason="platform guard: needs a CUDA GPU")
def test_on_a_gpu_the_maps_are_fitted_on_the_cpu_and_give_the_cpus_residuals(monkeypatch):
    """Banks on the GPU: every group is still fitted on CPU float64 tensors, so the
    residuals equal a CPU run's bit for bit (fitted on the GPU they differed by up to 1e-3)."""
    on_cpu = _run().frame()
    fitted_on = []
    fit = symmetry_module.fit_groups
    monkeypatch.setattr(symmetry_module, "fit_groups", lambda As, At, *args, **kw: fitted_on.append(
        {As.device.type, At.device.type, *(t.device.type for t in kw["validation"])}) or fit(As, At, *args, **kw))
    gpu_banks = {split: {label: Bank(b.encoder, b.split, b.X.cuda(), b.ids, b.labels.cuda())
                         for label, b in banks.items()} for split, banks in blob_banks().items()}
    run = TaskRunDouble(_task(), gpu_banks, dataset=CLASSES)
    run.device = torch.device("cuda")
    run.run()
    on_gpu = run.frame()
    assert fitted_on and all(devices == {"cpu"} for devices in fitted_on)
    keys = ["seed", "source", "target", "group", "metric"]
    residuals = [frame[frame["metric"].isin(["residual", "anchor_residual"])].set_index(keys)["value"].sort_index()
                 for frame in (on_cpu, on_gpu)]
    assert np.array_equal(residuals[0].to_numpy(), residuals[1].to_numpy())
    assert residuals[0].index.equals(residuals[1].index)


def test_the_index_cells_name_each_pairs_smallest_group_as_the_page_does(tmp_path):
    rows = _run().frame()
    cells = Symmetry().index_cells(rows, Page(tmp_path, "t"))
    assert sorted((c["source"], c["target"], c["group"]) for c in cells) == [
        ("a", "b", "scaled-orthogonal"), ("b", "a", "scaled-orthogonal")]
    assert all(c["residual"] < 1e-5 for c in cells)
    assert Symmetry().index_cells(rows.iloc[0:0], Page(tmp_path, "t")) is None


def test_the_index_section_counts_each_groups_pairs_per_task_and_over_all_tasks():
    def cell(group):
        return {"selector": "random", "source": "x", "target": "y", "group": group, "residual": 0.1}

    section = Symmetry.index_section({
        "first": [cell("scaled-orthogonal"), cell("affine"), cell("affine")],
        "second": [cell("permutation-diagonal"), cell(None)],
        "empty": [cell(None)],
    })
    assert section.startswith("## Symmetry between encoders")
    assert "Over 2 tasks and 4 ordered encoder pairs" in section
    assert "most often (d) affine (2 of 4)" in section
    assert "explains 1 of 4 pairs; 2 need a general affine map" in section
    assert re.search(r"\| \[first\]\(first\.md\) +\| +3 +\| +1 +\| +0 +\| +0 +\| +2 +\|", section)
    assert re.search(r"\| \*\*all tasks\*\* +\| +4 +\| +1 +\| +1 +\| +0 +\| +2 +\|", section)
    assert "empty" not in section
    assert Symmetry.index_section({"t": [cell(None)]}) is None


def test_the_plan_has_one_unit_per_seed_selector_and_ordered_pair():
    task = make_task(Symmetry, encoders=["a", "b", "c"], seeds=[0, 1], grid={"selectors": [spec(RandomAnchors)]})
    keys = Symmetry().plan(task)
    assert len(keys) == 2 * 3 * 2
    assert all(k["source"].label != k["target"].label for k in keys)


@pytest.mark.parametrize("settings,message", [
    ({"encoders": ["a"], "grid": {"selectors": [spec(RandomAnchors)]}}, "at least two encoders"),
    ({"encoders": ["a", "b"]}, "at least one anchor selector"),
])
def test_a_task_it_cannot_run_is_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        Symmetry().validate(make_task(Symmetry, **settings))


def test_the_page_without_rows_says_so(tmp_path):
    empty = pd.DataFrame(columns=["status", "metric", "value", "seed", "selector", "source", "target", "group"])
    assert Symmetry().page(empty, Page(tmp_path, "t")) == "No results yet.\n"


#: symmetry task of tasks.yaml → the tasks.yaml task whose data set and encoders it copies
COPIES = {"mnist-symmetry": "mnist-cross-seed", "fashion-symmetry": "fashion-translation-quality",
          "rotten-tomatoes-symmetry": "rotten-tomatoes-cross-arch"}


@pytest.mark.parametrize("name", COPIES)
def test_each_experiment_reads_the_banks_of_a_default_suite_task(name):
    from relbench.config import load_suite
    from relbench.plugins import load_registry

    root = Path(__file__).resolve().parents[1]
    registry = load_registry()
    default = {t.name: t for t in load_suite(root / "tasks.yaml", registry).tasks}
    new = {t.name: t for t in load_suite(root / "tasks.yaml", registry).tasks}[name]
    old = default[COPIES[name]]
    assert new.kind.name == "symmetry" and [s.name for s in new.grid["selectors"]] == ["random"]
    assert new.dataset.identity() == old.dataset.identity()
    assert [(e.label, e.view, e.identity()) for e in new.encoders] == \
        [(e.label, e.view, e.identity()) for e in old.encoders]
    assert len(new.seeds) >= 3 and new.num_anchors <= 2560


def test_a_task_without_a_validation_part_is_refused_before_any_work():
    task = make_task(Symmetry, encoders=["a", "b"], grid={"selectors": [spec(RandomAnchors)]},
                     protocol=EvaluationProtocol(validation=0.0))
    with pytest.raises(ValueError, match="validation part"):
        Symmetry().validate(task)
