"""The task kinds of relbench_relreps, run against a small stand-in for the runner's
TaskRun (banks, anchors, units, figures) built here."""

from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.datasets import load_digits

from relbench.config import PluginSpec
from relbench.interfaces import AnchorContext, Bank, DatasetData, Split
from relbench_relreps import PerformanceProxy, RandomAnchors, Reconstruction, WordNeighbourhoods
from relbench_relreps.tasks.common import select_without_banks


def spec(cls, interface, **params):
    return PluginSpec(interface, cls.name, params, cls.name, cls)


class StandInRun:
    """Just enough of relbench.runner.TaskRun for task kinds: rows end up in ``self.rows``."""

    def __init__(self, tmp: Path, banks: dict, data=None, seeds=(0,), num_anchors=20, selectors=(), sims=()):
        self.task = SimpleNamespace(seeds=list(seeds), num_anchors=num_anchors, selectors=list(selectors),
                                    similarities=list(sims))
        self.device = torch.device("cpu")
        self._banks, self._data, self._tmp = banks, data, tmp
        self.rows, self.done = [], []

    def dataset(self):
        return self._data

    def banks(self, split):
        return self._banks[split]

    def anchors(self, seed, selector_spec, excluded=frozenset()):
        train = self._banks["train"]
        first = next(iter(train.values()))
        labels = None if first.labels is None else first.labels.numpy()
        ctx = AnchorContext(num_anchors=self.task.num_anchors, seed=seed, ids=first.ids, labels=labels, banks=train,
                            excluded=excluded, device=self.device, views={}, pool_banks=lambda n: {})
        return selector_spec.build().select(ctx)

    def realise(self, anchors, label):
        return anchors.realise(self._banks["train"][label])

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

    def figure_path(self, name):
        return self._tmp / name

    def progress(self, iterable, desc="", total=None):
        return iterable

    def frame(self):
        df = pd.DataFrame(self.rows)
        for col in ("seed", "selector", "similarity", "stitcher", "source", "target"):
            if col not in df:
                df[col] = None
        return df


class Page:
    def __init__(self, tmp):
        self.tmp = tmp

    def figure(self, name):
        return self.tmp / name, f"figures/{name}"

    def stored_figure(self, name):
        return f"figures/{name}" if (self.tmp / name).exists() else None


def test_word_neighbourhoods_relative_survives_rotation_absolute_does_not(tmp_path):
    g = torch.Generator().manual_seed(0)
    words = [f"w{i}" for i in range(400)]
    X = torch.randn(400, 20, generator=g)
    Q, _ = torch.linalg.qr(torch.randn(20, 20, generator=g))
    banks = {"a": Bank("a", "train", X, words), "b": Bank("b", "train", X @ Q, words),
             "wide": Bank("wide", "train", torch.randn(400, 30, generator=g), words)}
    run = StandInRun(tmp_path, {"train": banks}, seeds=(0, 1), num_anchors=40)
    task = WordNeighbourhoods(k=5, max_words=300)
    task.run(run)
    df = run.frame()
    rel = df[(df.stitcher == "relative") & (df.source == "a") & (df.target == "b")]
    assert len(rel) == 4 and np.allclose(rel.value, 1.0)  # 2 seeds × (jaccard, mrr)
    ab = df[(df.stitcher == "absolute") & (df.source == "a") & (df.target == "b")]
    assert (ab.value < 0.2).all()
    same = df[(df.stitcher == "absolute") & (df.source == "wide") & (df.target == "wide")]
    assert np.allclose(same.value, 1.0)
    na = df[(df.stitcher == "absolute") & (df.source == "a") & (df.target == "wide")]
    assert (na.status == "not_achievable").all() and len(na) == 2
    run.rows.clear()
    task.run(run)  # everything is done: nothing recomputed
    assert run.rows == []
    md = task.leaderboard(df.assign(status=df.get("status", "ok")).fillna({"status": "ok"}), Page(tmp_path))
    assert "jaccard@5" in md and "n/a" in md


def _digits_data():
    d = load_digits()
    images = (d.images * 255 / 16).astype(np.uint8)
    ids = [f"d{i}" for i in range(len(images))]
    split = lambda sl: Split(ids=ids[sl], labels=d.target[sl], views={"image": list(images[sl])})
    return DatasetData(name="digits", splits={"train": split(slice(0, 1400)), "test": split(slice(1400, None))},
                       class_names=[str(i) for i in range(10)], view_modalities={"image": "image"},
                       fingerprint="digits")


def test_reconstruction_units_per_seed_and_bottleneck(tmp_path, monkeypatch):
    import relbench_relreps.tasks.reconstruction as rec

    drawn = []

    def recording(spec_, ids, labels, seed, num_anchors, device):
        drawn.append(seed)
        return select_without_banks(spec_, ids, labels, seed, num_anchors, device)

    monkeypatch.setattr(rec, "select_without_banks", recording)
    run = StandInRun(tmp_path, {}, data=_digits_data(), seeds=(0,), num_anchors=32)
    task = Reconstruction(latent_dim=16, hidden=64, epochs=8, train_samples=1000, test_samples=300)
    task.run(run)
    assert len(run.done) == 2 and drawn == [0, 0]  # (seed 0) × (absolute, relative), anchors drawn with seed 0
    run.task.seeds = [0, 1]  # a seed added later runs as new units; seed 0 is not recomputed
    task.run(run)
    assert run.done[2:] == [{"seed": 1, "stitcher": "absolute"}, {"seed": 1, "stitcher": "relative"}]
    assert drawn == [0, 0, 1, 1]
    df = run.frame()
    assert len(df) == 2 * 2 * 4 and (df.metric == "mse").all()  # seeds × kinds × (2 × 2 model pairs)
    assert sorted(df.seed.unique()) == [0, 1]
    assert set(df[df.seed == 1].extra.map(lambda e: e["encoder_seed"])) == {1000, 1001}
    stitched = df[df.source != df.target].groupby(["seed", "stitcher"]).value.mean().unstack()
    assert (stitched["relative"] < stitched["absolute"]).all()  # in every replicate
    for kind in ("absolute", "relative"):
        assert (tmp_path / f"reconstruction_{kind}.png").stat().st_size > 1000
    md = task.leaderboard(df.assign(status="ok"), Page(tmp_path))
    per_seed = df[df.source != df.target].groupby(["stitcher", "seed"]).value.mean()["relative"]
    assert f"{per_seed.mean():.4f} ± {per_seed.std(ddof=0):.4f}" in md
    assert "2 task seed(s)" in md and "figures/reconstruction_relative.png" in md
    pooled = df.iloc[:1].assign(seed=None, value=99.0)  # a row of the former one-unit layout: no task seed
    assert task.leaderboard(pd.concat([df, pooled]).assign(status="ok"), Page(tmp_path)) == md
    with pytest.raises(ValueError, match="model_seeds"):
        Reconstruction(model_seeds=[3])


def test_proxy_correlates_similarity_and_accuracy(tmp_path):
    d = load_digits()
    X, y = torch.tensor(d.data / 16, dtype=torch.float32), torch.tensor(d.target)
    ids = [f"d{i}" for i in range(len(X))]
    banks = {"train": {"pix": Bank("pix", "train", X[:1200], ids[:1200], y[:1200])},
             "test": {"pix": Bank("pix", "test", X[1200:], ids[1200:], y[1200:])}}
    data = SimpleNamespace(class_names=[str(i) for i in range(10)])
    run = StandInRun(tmp_path, banks, data=data, num_anchors=50, selectors=[spec(RandomAnchors, "selector")])
    task = PerformanceProxy(epochs=[1, 2, 8], widths=[8, 32], activations=["relu"], model_seeds=[0],
                            reference_epochs=15, lr=3e-3)
    task.run(run)
    df = run.frame()
    r = df[df.metric == "pearson_r"].value.iloc[0]
    assert np.isfinite(r) and r > 0.3
    assert (df.metric == "accuracy").sum() == 6
    md = task.leaderboard(df.assign(status="ok"), Page(tmp_path))
    assert "pearson_r" in md and (tmp_path / "proxy_scatter.png").exists()
