"""The suite floor benchmark's pure helpers: machine flags, stage classification of
stored units, dedupe of selector trainings, group FLOPs, the ONNX counter and the encoder
counter on a real (toy) encoder."""

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import suite_floor as sf  # noqa: E402


def test_lscpu_flags_name_bf16_features():
    fields = sf.lscpu_fields("Model name:   AMD EPYC 9000\nFlags: fpu avx2 avx512f avx512_bf16\n")
    isa = sf.isa_features(fields["Flags"])
    assert fields["Model name"] == "AMD EPYC 9000"
    assert isa["AVX-512 BF16"] and isa["AVX-512F"] and not isa["AMX-BF16"]


def _rows():
    # PARAM units: the first unit of a training pays for it, the others record it too
    return pd.DataFrame([
        {"task": "t", "unit": "a", "seconds": 100.0, "selector": "param", "regularizer": None, "seed": 0,
         "held_out": "x", "similarity": "cos", "extra.param_seconds": 98.0, "extra.param_steps": 10},
        {"task": "t", "unit": "b", "seconds": 2.0, "selector": "param", "regularizer": None, "seed": 0,
         "held_out": "x", "similarity": "cos", "extra.param_seconds": 98.0, "extra.param_steps": 10},
        {"task": "t", "unit": "c", "seconds": 3.0, "selector": "random", "regularizer": None, "seed": 0,
         "held_out": "x", "similarity": "cos", "extra.param_seconds": None, "extra.param_steps": None},
        {"task": "t", "unit": "d", "seconds": 30.0, "selector": "random", "regularizer": "topological", "seed": 0,
         "held_out": None, "similarity": "cos", "extra.param_seconds": None, "extra.param_steps": None},
        {"task": "t", "unit": "d", "seconds": 30.0, "selector": "random", "regularizer": "topological", "seed": 0,
         "held_out": None, "similarity": "cos", "extra.param_seconds": None, "extra.param_steps": None},
    ])


def test_stages_dedupe_trainings_and_take_them_out_of_heads():
    units = sf.units_of(_rows())
    trainings = sf.trainings_of(units)
    assert list(units.precision.unique()) == ["fp32"]  # rows without a precision column ran at fp32
    assert len(trainings) == 1 and trainings.stage.iloc[0] == "PARAM" and trainings.selector.iloc[0] == "param"
    assert trainings.seconds.sum() == 98.0
    measured = sf.task_seconds(units, trainings)
    assert measured["t", "adapters"] == 30.0
    assert measured["t", "heads"] == pytest.approx(7.0)  # 100 + 2 + 3 less the 98 s training


def test_restrict_keeps_planned_units_or_says_why_not():
    rows = _rows()
    kept, notes = sf.restrict(rows, {"t": ["a", "c"]})
    assert set(kept.unit) == {"a", "c"} and not notes
    kept, notes = sf.restrict(rows, {"t": ["zzz"], "u": ["y"]})
    assert set(kept.unit) == {"a", "b", "c", "d"} and len(notes) == 2


def test_group_flops_counts_shared_work_once_per_seed():
    # first unit 10 (shared 6 + own 4), second unit 4: 5 seeds, 20 units
    assert sf.group_flops(10.0, 4.0, n=20, seeds=5) == 5 * 6 + 20 * 4
    assert sf.group_flops(10.0, None, n=3, seeds=1) == 30.0
    assert sf.group_flops(10.0, 12.0, n=3, seeds=1) == 30.0  # a marginal above the first is clipped


def test_group_flops_counts_shared_work_once_per_combination_of_each_seed():
    # 5 seeds × 4 combinations, 5 targets each: each combination trains its own decoders
    assert sf.group_flops(10.0, 4.0, n=100, seeds=5, scopes=20) == 20 * 6 + 100 * 4


def _plan(displays):
    from types import SimpleNamespace

    return SimpleNamespace(units=[SimpleNamespace(id=f"u{i}", display=d) for i, d in enumerate(displays)])


def test_groups_split_adapters_by_regularizer_and_count_each_seeds_combinations():
    """A stitching task's units share their decoders per seed and combination, not per
    seed: with two similarities and two regularizers, one seed's shared work is paid four
    times. Counting it once per seed (as the floor did) made the adapters' floor a quarter
    of its work and more, and a same-budget control (one training) stood for a tuned
    regularizer (one per candidate)."""
    displays = [{"seed": seed, "selector": "random", "similarity": sim, "stitcher": "relative",
                 "regularizer": reg, "target": target}
                for seed in (0, 1) for reg in ("adapter", "topological") for sim in ("cosine", "robust-cosine")
                for target in ("a", "b", "c")]
    groups = sf.groups_of(_plan(displays), learned=set())
    assert set(groups) == {("adapters", "relative+adapter"), ("adapters", "relative+topological")}
    g = groups["adapters", "relative+topological"]
    assert g.n == 12 and len(g.seeds) == 2 and len(g.scopes) == 4 and g.shared_sample
    assert g.sample == ["u6", "u7"]  # seed 0, topological · cosine, targets a and b
    # first unit 10 (shared 9 + own 1), second 1: 4 combinations pay 9 each, 12 units 1 each
    assert sf.group_flops(10.0, 1.0, g.n, len(g.seeds), len(g.scopes)) == 4 * 9 + 12 * 1


def test_groups_whose_samples_differ_in_scope_count_shared_work_once_per_seed():
    """Units that differ by more than their sides (a space-similarity measure, a
    reconstruction's model) may still share a seed's work: what the two samples share is
    not known, so it counts once per seed (the lower bound), as before."""
    displays = [{"seed": seed, "model": model, "bottleneck": b} for seed in (0, 1, 2)
                for model in ("ae", "vae") for b in ("absolute", "relative")]
    (g,) = sf.groups_of(_plan(displays), learned=set()).values()
    assert g.n == 12 and len(g.scopes) == 12 and not g.shared_sample
    assert sf.group_flops(10.0, 4.0, g.n, len(g.seeds), None) == 3 * 6 + 12 * 4


def test_unit_group_names_stage_stitcher_and_regularizer():
    assert sf.unit_group({"stitcher": "relative", "regularizer": "none"}) == ("heads", "relative")
    assert sf.unit_group({"stitcher": "relative", "regularizer": "-"}) == ("heads", "relative")
    assert sf.unit_group({"stitcher": "relative", "regularizer": "topological"}) == ("adapters", "relative+topological")
    assert sf.unit_group({"model": "ae"}) == ("heads", "unit")


def test_verdict_judges_both_targets():
    lines = sf.verdict(floor=600.0, wall=2400.0)
    assert "not excluded" in lines[0] and "meets ≤ 45 min" in lines[1] and "misses ≤ 3×" in lines[1]


def test_onnx_counter_counts_gemm_and_conv(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    import numpy as np

    w = numpy_helper.from_array(np.zeros((8, 3, 3, 3), np.float32), "w")
    g = numpy_helper.from_array(np.zeros((8 * 4 * 4, 5), np.float32), "g")
    shape = numpy_helper.from_array(np.array([1, -1], np.int64), "shape")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["c", "shape"], ["r"]),
             helper.make_node("MatMul", ["r", "g"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, g, shape])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    conv = 2 * (8 * 4 * 4) * (3 * 3 * 3)
    matmul = 2 * 5 * (8 * 4 * 4)
    assert sf.onnx_matmul_flops(path, {"x": [1, 3, 4, 4]}) == conv + matmul


def test_store_rows_are_flattened_and_restricted_to_the_plan(tmp_path):
    from relbench.results import ResultStore

    store = ResultStore(tmp_path)
    row = {"task": "t", "kind": "stitching", "dataset": "d", "seed": 0, "metric": "accuracy", "value": 0.5,
           "direction": "max", "status": "ok", "error": None, "seconds": 4.0, "selector": "param",
           "extra": {"param_seconds": 3.0, "param_steps": 7}}
    store.append("t", "new", [row], "run")
    store.append("t", "old", [{**row, "seconds": 9.0}], "run")
    rows = sf.read_store(tmp_path, {"t": ["new"]})
    assert list(rows.unit) == ["new"] and rows["extra.param_seconds"].iloc[0] == 3.0
    assert set(sf.read_store(tmp_path, {"t": ["gone"]}).unit) == {"new", "old"}


def test_best_peaks_never_lower_a_peak():
    from gemm_peaks import Peak

    kept = {}
    fast = {("fp32", 2): Peak("fp32", 2, 64, 100e9, 0.5)}
    slow = {("fp32", 2): Peak("fp32", 2, 64, 40e9, 6.0)}
    assert sf.best_peaks(fast, kept, "cpu")[1] == []
    used, raised = sf.best_peaks(slow, kept, "cpu")
    assert used["fp32", 2].flops == 100e9 and used["fp32", 2].load == 0.5 and len(raised) == 1
    assert sf.best_peaks(slow, kept, "other cpu")[0]["fp32", 2].flops == 40e9


def test_encoder_count_builds_its_context_and_counts_a_real_forward(registry, write_yaml):
    """``count_encoder`` once rebuilt the runner's context with ``dataclasses.replace``,
    which raises on an ``EncoderContext``; it must count a torch encoder's matrix products
    on the task's own samples (16 → 16 orthogonal map: 2·16·16 FLOPs a sample), and the QR
    each encode call draws its map with."""
    from relbench.config import load_suite
    from relbench.runner import Runner

    path = write_yaml("""\
suite: {seeds: [0], num_anchors: 8, output: results, leaderboards: boards}
tasks:
  - name: blobs
    dataset: {name: toy-blobs, params: {classes: 4, train_size: 240}}
    encoders: [{name: toy-rotated, label: a, params: {seed: 1}}, {name: toy-rotated, label: b, params: {seed: 2}}]
    grid: {selectors: [random], similarities: [cosine], stitchers: [absolute]}
    metrics: [accuracy]
""")
    runner = Runner(load_suite(path, registry), registry, quiet=True)
    task_run = runner.plans()[0]
    from decomposition_flops import qr_flops
    from toy_plugins import Rotated

    spec = task_run.task.encoders[0]
    calls = len(Rotated.calls)
    count = sf.count_encoder(task_run, spec, text_samples=8)
    calls = len(Rotated.calls) - calls  # each encode call draws its map by a 16 x 16 QR, counted too
    assert count.width == 16 and calls >= 1
    assert count.flops_per_sample == pytest.approx(2 * 16 * 16 + calls * qr_flops((16, 16)) / 8)
    assert count.how.startswith("torch")


def test_the_floor_counts_decompositions_by_their_lower_bounds():
    import torch

    from decomposition_flops import counter

    A, B = torch.randn(50, 20), torch.randn(20, 3)
    S = A.T @ A + torch.eye(20)
    expected = {  # Golub & Van Loan's leading terms, per matrix
        "svd": (lambda: torch.linalg.svd(A, full_matrices=False), 4 * 50 * 20 ** 2 - 4 * 20 ** 3 // 3),
        "pinv": (lambda: torch.linalg.pinv(A), 4 * 50 * 20 ** 2 - 4 * 20 ** 3 // 3 + 2 * 50 * 20 * 20),
        "eigh": (lambda: torch.linalg.eigh(S), 4 * 20 ** 3 // 3),
        "qr": (lambda: torch.linalg.qr(A), 2 * 50 * 20 ** 2 - 2 * 20 ** 3 // 3),
        "solve": (lambda: torch.linalg.solve(S, B), 2 * 20 ** 3 // 3 + 2 * 20 * 20 * 3),
        "batched svd": (lambda: torch.linalg.svd(torch.randn(4, 50, 20)), 4 * (4 * 50 * 400 - 4 * 8000 // 3)),
    }
    for name, (call, flops) in expected.items():
        with counter() as c:
            call()
        assert c.get_total_flops() == flops, name
    with counter() as c:  # matrix products are still counted as torch counts them
        A.T @ A
    assert c.get_total_flops() == 2 * 20 * 50 * 20
