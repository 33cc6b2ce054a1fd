"""IRP, Procrustes and affine stitchers on a small real data set (sklearn digits), and
the translation-quality and scale-invariance task kinds against a stand-in TaskRun."""

from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.datasets import load_digits

from relbench.config import PluginSpec
from relbench.interfaces import AnchorContext, Bank, DatasetData, FitContext, StitchSide
from relbench_irp import FPSSelector
from relbench_irp.quality import TranslationQuality
from relbench_irp.scale import ScaleInvariance
from relbench_irp.stitchers import AffineStitcher, IRPStitcher, ProcrustesStitcher
from relbench_relreps import RandomAnchors


def _encoders():
    """Three 'encoders' of the digits: pixels (64-d), a rotated wider copy (80-d) and a
    nonlinear random feature map (96-d)."""
    digits = load_digits()
    X = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target)
    g = torch.Generator().manual_seed(0)
    Q = torch.linalg.qr(torch.randn(80, 80, generator=g))[0][:64]
    W = torch.randn(64, 96, generator=g) / 4
    spaces = {"pixels": X, "rotated": 2.5 * X @ Q + 1.0, "tanh": torch.tanh(X @ W)}
    ids = [f"d{i}" for i in range(len(X))]
    n_train = 1200
    banks = {split: {} for split in ("train", "test")}
    for name, Z in spaces.items():
        banks["train"][name] = Bank(name, "train", Z[:n_train], ids[:n_train], y[:n_train])
        banks["test"][name] = Bank(name, "test", Z[n_train:], ids[n_train:], y[n_train:])
    return banks


BANKS = _encoders()


def side(name, anchor_ids, banks=BANKS):
    tr = banks["train"][name]
    return StitchSide(name, tr, banks["test"][name], tr.rows(anchor_ids), None)


def fit_ctx():
    return FitContext(seed=0, device=torch.device("cpu"), num_classes=10, modality="image", regularizers=[])


ANCHORS = BANKS["train"]["pixels"].ids[:200]


@pytest.mark.parametrize("cls,params", [(IRPStitcher, {"delta": 0.5}), (ProcrustesStitcher, {}),
                                        (AffineStitcher, {})])
def test_translating_stitchers_reach_every_pair(cls, params):
    stitcher = cls(epochs=15, lr=1e-3, **params)
    stitcher.fit(side("pixels", ANCHORS), fit_ctx())
    accs = {}
    for source in ("pixels", "rotated", "tanh"):
        pred = stitcher.predict(side(source, ANCHORS))
        y = BANKS["test"][source].labels
        accs[source] = float((pred.logits.argmax(1) == y).float().mean())
        assert 0.0 <= pred.extras["reconstruction_cosine"] <= 1.0 + 1e-6
    assert accs["pixels"] > 0.85
    assert accs["rotated"] > 0.8  # an isometric copy of another width is stitched
    assert accs["tanh"] > 0.3  # a nonlinear space, far above chance (0.1)


def test_irp_extras_and_reconstruction_cosine_is_matched_by_id():
    stitcher = IRPStitcher(epochs=2, omega=4, delta=0.5)
    stitcher.fit(side("rotated", ANCHORS), fit_ctx())
    pred = stitcher.predict(side("pixels", ANCHORS))
    assert set(pred.extras) == {"reconstruction_cosine", "condition_number", "anchors_kept",
                                "irp_singular_anchor_sets", "irp_initial_anchors"}
    assert pred.extras["reconstruction_cosine"] > 0.9
    assert 1 <= pred.extras["anchors_kept"] <= len(ANCHORS) and pred.extras["condition_number"] >= 1
    assert pred.extras["irp_singular_anchor_sets"] == 0 and pred.extras["irp_initial_anchors"] == len(ANCHORS)
    # the same samples in another order give the same cosine (alignment by id, not position)
    test = BANKS["test"]["pixels"]
    perm = torch.randperm(len(test.ids), generator=torch.Generator().manual_seed(0))
    shuffled = Bank("pixels", "test", test.X[perm], [test.ids[i] for i in perm.tolist()], test.labels[perm])
    src = StitchSide("pixels", BANKS["train"]["pixels"], shuffled, BANKS["train"]["pixels"].rows(ANCHORS), None)
    assert stitcher.predict(src).extras["reconstruction_cosine"] == pytest.approx(pred.extras["reconstruction_cosine"],
                                                                                 abs=1e-5)
    with pytest.raises(ValueError, match="omega"):
        IRPStitcher(omega=0)


def _rank_deficient_banks():
    """Two 12-d spaces (one a rotation of the other) whose 20 anchors span 5 dimensions."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(200, 12, generator=g)
    y = torch.arange(200) % 4
    A = torch.randn(20, 5, generator=g) @ torch.randn(5, 12, generator=g)
    Q = torch.linalg.qr(torch.randn(12, 12, generator=g))[0]
    ids = [f"s{i}" for i in range(200)]
    sides = {}
    for name, T in (("a", torch.eye(12)), ("b", Q)):
        sides[name] = StitchSide(name, Bank(name, "train", X[:150] @ T, ids[:150], y[:150]),
                                 Bank(name, "test", X[150:] @ T, ids[150:], y[150:]), A @ T, None)
    return sides


def test_irp_counts_singular_anchor_sets_instead_of_dropping_them():
    sides = _rank_deficient_banks()
    full = IRPStitcher(epochs=1, omega=3, delta=0.0)  # no pruning: 20 anchors of rank 5 in 12-d
    full.fit(sides["b"], fit_ctx())
    extras = full.predict(sides["a"]).extras
    assert extras["irp_singular_anchor_sets"] == 3 and np.isnan(extras["condition_number"])
    assert extras["anchors_kept"] == 20
    pruned = IRPStitcher(epochs=1, omega=3, delta=0.5)  # pruning keeps at most 5 anchors: invertible
    pruned.fit(sides["b"], fit_ctx())
    extras = pruned.predict(sides["a"]).extras
    assert extras["irp_singular_anchor_sets"] == 0 and 1 <= extras["condition_number"] < 10
    assert extras["anchors_kept"] <= 5


def test_irp_can_start_from_as_many_anchors_as_the_target_has_dimensions():
    wide_anchors = BANKS["train"]["pixels"].ids[:300]
    for start, expected in (("task", 300), ("dim", 80)):  # the target "rotated" is 80-d
        stitcher = IRPStitcher(epochs=1, omega=2, delta=0.5, initial_anchors=start)
        stitcher.fit(side("rotated", wide_anchors), fit_ctx())
        extras = stitcher.predict(side("pixels", wide_anchors)).extras
        assert extras["irp_initial_anchors"] == expected and extras["anchors_kept"] <= expected
        assert extras["reconstruction_cosine"] > 0.8
    with pytest.raises(ValueError, match="initial_anchors"):
        IRPStitcher(initial_anchors="all")


def test_procrustes_reports_the_anchor_rank_against_the_width():
    pixels = BANKS["train"]["pixels"]
    for anchors in (pixels.ids[:20], ANCHORS):
        stitcher = ProcrustesStitcher(epochs=1)
        stitcher.fit(side("tanh", anchors), fit_ctx())  # 96-d target, 64-d source: width 96
        extras = stitcher.predict(side("pixels", anchors)).extras
        assert extras["procrustes_width"] == 96
        # centred anchors lose one dimension; constant pixels (always blank) span none
        centred = pixels.rows(anchors) - pixels.rows(anchors).mean(dim=0)
        assert extras["procrustes_rank"] == int(torch.linalg.matrix_rank(centred)) < 96
    assert extras["procrustes_rank"] > 19  # 200 anchors span more than 20 do


# ----------------------------------------------------------------------------- task kinds


def spec(cls, interface, **params):
    return PluginSpec(interface, cls.name, params, cls.name, cls)


class StandInRun:
    """Just enough of relbench.runner.TaskRun for these task kinds."""

    def __init__(self, tmp: Path, selectors, seeds=(0,)):
        self.task = SimpleNamespace(name="t", seeds=list(seeds), num_anchors=150, selectors=list(selectors),
                                    encoders=[SimpleNamespace(label=k) for k in BANKS["train"]])
        self.device = torch.device("cpu")
        self.tmp, self.rows, self.done = tmp, [], []

    def dataset(self):
        return DatasetData("digits", {}, [str(i) for i in range(10)], {"image": "image"}, "x")

    def banks(self, split):
        return BANKS[split]

    def anchors(self, seed, selector_spec, excluded=frozenset()):
        train = BANKS["train"]
        ids = train["pixels"].ids
        ctx = AnchorContext(num_anchors=self.task.num_anchors, seed=seed, ids=ids,
                            labels=train["pixels"].labels.numpy(), banks=train, excluded=excluded,
                            device=self.device, views={}, pool_banks=lambda n: {})
        return selector_spec.build().select(ctx)

    def realise(self, anchors, label):
        return anchors.realise(BANKS["train"][label])

    def is_done(self, key):
        return key in self.done

    @contextmanager
    def unit(self, key):
        rows = []
        yield rows
        self.done.append(key)
        for r in rows:
            rec = {**key, **{k: v for k, v in vars(r).items() if k not in key or v not in ("-", None)}}
            self.rows.append(rec)

    def progress(self, iterable, desc="", total=None):
        return iterable

    def frame(self):
        df = pd.DataFrame(self.rows)
        for col in ("selector", "similarity", "stitcher", "regularizer", "source", "target"):
            if col not in df:
                df[col] = "-"
        df["task"], df["error"] = "t", ""
        return df


class Page:
    def __init__(self, root):
        self.root = root

    def figure(self, filename):
        return self.root / filename, f"figures/{filename}"


def test_translation_quality_grid_and_page(tmp_path):
    run = StandInRun(tmp_path, [spec(RandomAnchors, "selector")])
    kind = TranslationQuality(omegas=[1, 4], deltas=[0.3, 0.6], max_samples=300)
    kind.run(run)
    df = run.frame()
    cos = df[df["metric"] == "reconstruction_cosine"]
    assert len(cos) == 3 * 3 * 2 * 2  # sources × targets × ω × δ
    assert set(df["metric"]) == {"reconstruction_cosine", "condition_number", "anchors_kept", "absolute_cosine"}
    grid = cos.assign(omega=cos["extra"].map(lambda e: e["omega"]), delta=cos["extra"].map(lambda e: e["delta"]))
    intra = grid[(grid["source"] == grid["target"])]
    inter_rot = grid[(grid["source"] == "pixels") & (grid["target"] == "rotated")]
    assert intra["value"].min() > 0.75 and inter_rot["value"].min() > 0.75
    cond = df[df["metric"] == "condition_number"]
    cond = cond.assign(delta=cond["extra"].map(lambda e: e["delta"]))
    assert cond[cond["delta"] == 0.6]["value"].mean() < cond[cond["delta"] == 0.3]["value"].mean()
    singular = cond.assign(n=cond["extra"].map(lambda e: e["singular_anchor_sets"]), omega=cond["extra"].map(
        lambda e: e["omega"]))
    # the digits' always-blank pixels leave the 64-d and 80-d anchor sets rank-deficient unless pruned hard
    mild = singular[(singular["delta"] == 0.3) & (singular["target"] != "tanh")]
    assert (mild["n"] == mild["omega"]).all() and mild["value"].isna().all()
    assert (singular[singular["target"] == "tanh"]["n"] == 0).all()
    run.is_done = lambda key: True  # resume: nothing recomputed
    kind.run(run)
    assert len(run.rows) == len(df)
    page = kind.leaderboard(df, Page(tmp_path))
    assert "![" in page and "ω \\ δ" in page and "IRP cosine" in page
    assert "ω = 4, δ = 0.3: 8 of 12" in page  # 2 of 3 targets × 4 subspaces singular
    assert (tmp_path / "omega_delta_random.png").stat().st_size > 1000


def test_scale_invariance_curves_and_page(tmp_path):
    run = StandInRun(tmp_path, [spec(FPSSelector, "selector")])
    kind = ScaleInvariance(alphas=[0.01, 1.0, 10.0, 1000.0], activations=["relu", "cos"], epochs=5, hidden=64,
                           omega=2, delta=0.3, max_samples=300)
    kind.run(run)
    df = run.frame()
    acc = df[df["metric"] == "accuracy"]
    acc = acc.assign(alpha=acc["extra"].map(lambda e: e["alpha"]), act=acc["extra"].map(lambda e: e["activation"]),
                     inp=acc["extra"].map(lambda e: e["input"]))
    raw_relu = acc[(acc["inp"] == "raw") & (acc["act"] == "relu") & (acc["target"] == "pixels")]
    by_alpha = dict(zip(raw_relu["alpha"], raw_relu["value"]))
    norm = float(BANKS["train"]["pixels"].X.norm(dim=1).mean())
    assert 1.0 < norm < 10.0
    # a ReLU MLP classifies well once inputs are rescaled to (or above) the data's scale
    assert by_alpha[10.0] > 0.8 and by_alpha[1000.0] > 0.7
    assert set(acc["inp"]) == {"raw", "irp"}
    irp_rows = acc[acc["inp"] == "irp"]
    assert (irp_rows["source"] != irp_rows["target"]).all()
    page = kind.leaderboard(df, Page(tmp_path))
    assert "α=1000" in page and (tmp_path / "scale_invariance.png").exists()
    assert np.isfinite(acc["value"]).all()
