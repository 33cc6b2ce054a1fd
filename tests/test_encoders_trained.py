"""Encoders trained per seed and precomputed embeddings."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.numpy import save_file
from sklearn.datasets import load_digits

from relbench.interfaces import DatasetData, EncoderContext, Split
from relbench_encoders.precomputed import MissingIds, PrecomputedEncoder
from relbench_encoders.trained import TrainedEncoder



def digits_ctx(tmp_path, n=600):
    d = load_digits()
    imgs = [(x * 255 / 16).astype(np.uint8) for x in d.images[:n]]  # 8×8 uint8 grey
    split = Split(ids=[str(i) for i in range(n)], labels=d.target[:n], views={"image": imgs})
    data = DatasetData("digits", {"train": split}, [str(c) for c in range(10)], {"image": "image"}, "digits-fp")
    return EncoderContext(torch.device("cpu"), "image", data, split, tmp_path), imgs, d.target[:n]


def nearest_centroid_accuracy(X: torch.Tensor, y: np.ndarray) -> float:
    y = torch.as_tensor(y)
    centroids = torch.stack([X[y == c].mean(0) for c in range(10)])
    return float((torch.cdist(X, centroids).argmin(1) == y).float().mean())


@pytest.mark.parametrize("arch", ["mlp", "cnn"])
def test_trained_encoder_is_seeded_and_learns(arch, tmp_path):
    ctx, imgs, y = digits_ctx(tmp_path)
    kw = dict(arch=arch, width=32, epochs=4, image_size=8)
    a = TrainedEncoder(seed=0, **kw).encode(imgs, ctx)
    b = TrainedEncoder(seed=0, **kw).encode(imgs, ctx)
    c = TrainedEncoder(seed=1, **kw).encode(imgs, ctx)
    assert a.shape == (600, 32) and a.dtype == torch.float32 and torch.isfinite(a).all()
    assert torch.equal(a, b) and not torch.allclose(a, c)
    assert nearest_centroid_accuracy(a, y) > 0.7  # chance is 0.1
    fp = TrainedEncoder(seed=0, **kw).fingerprint(ctx)
    assert fp == TrainedEncoder(seed=0, **kw).fingerprint(ctx) != TrainedEncoder(seed=1, **kw).fingerprint(ctx)


def test_trained_encoder_accepts_feature_vectors(tmp_path):
    d = load_digits()
    feats = [row.astype(np.float32) for row in d.data[:300]]
    split = Split(ids=[str(i) for i in range(300)], labels=d.target[:300], views={"f": feats})
    ctx = EncoderContext(torch.device("cpu"), "f", DatasetData("x", {"train": split}, [], {"f": "image"}, "fp"),
                         split, tmp_path)
    X = TrainedEncoder(width=16, epochs=5).encode(feats, ctx)
    assert X.shape == (300, 16) and nearest_centroid_accuracy(X, d.target[:300]) > 0.7
    with pytest.raises(ValueError, match="cnn"):
        TrainedEncoder(arch="cnn").encode(feats, ctx)


def test_trained_encoder_empty_input_has_width_columns(tmp_path):
    ctx, _, _ = digits_ctx(tmp_path, n=50)
    X = TrainedEncoder(width=12, epochs=1, image_size=8).encode([], ctx)
    assert X.shape == (0, 12) and X.dtype == torch.float32


def test_precomputed_reads_npy_safetensors_parquet(tmp_path):
    ids = ["a", "b", "c", "dé"]
    X = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.save(tmp_path / "e.npy", X)
    (tmp_path / "ids.txt").write_text("\n".join(ids), encoding="utf-8")
    raw = [s.encode("utf-8") for s in ids]
    id_bytes = np.zeros((4, max(map(len, raw))), np.uint8)
    for i, r in enumerate(raw):
        id_bytes[i, : len(r)] = np.frombuffer(r, np.uint8)
    save_file({"embeddings": X, "ids": id_bytes}, str(tmp_path / "e.safetensors"))
    pd.DataFrame({"id": ids, "embedding": list(X)}).to_parquet(tmp_path / "e.parquet")
    query = ["dé", "a", "c"]
    ctx = EncoderContext(torch.device("cpu"), "id", None, None, tmp_path)
    for enc in (PrecomputedEncoder(path=str(tmp_path / "e.npy"), ids=str(tmp_path / "ids.txt")),
                PrecomputedEncoder(path=str(tmp_path / "e.safetensors")),
                PrecomputedEncoder(path=str(tmp_path / "e.parquet"))):
        out = enc.encode(query, ctx)
        assert out.dtype == torch.float32 and torch.equal(out, torch.from_numpy(X[[3, 0, 2]]))
        assert enc.fingerprint(ctx)
        with pytest.raises(MissingIds):
            enc.encode(["zz"], ctx)


def test_trained_encoder_reports_its_own_accuracy(tmp_path):
    ctx, imgs, y = digits_ctx(tmp_path, n=900)
    train = Split(ids=ctx.train.ids[:600], labels=y[:600], views={"image": imgs[:600]})
    test = Split(ids=ctx.train.ids[600:], labels=y[600:], views={"image": imgs[600:]})
    data = DatasetData("digits", {"train": train, "test": test}, [str(c) for c in range(10)], {"image": "image"}, "fp")
    ctx = EncoderContext(torch.device("cpu"), "image", data, train, tmp_path)
    enc = TrainedEncoder(width=32, epochs=15, image_size=8)
    assert enc.report() == {}  # nothing measured before training
    enc.setup(ctx)
    report = enc.report()
    assert set(report) == {"epochs", "train_accuracy", "test_accuracy"} and report["epochs"] == 15
    assert 0.9 < report["train_accuracy"] <= 1.0 and 0.8 < report["test_accuracy"] <= 1.0  # chance is 0.1
    only_train = DatasetData("digits", {"train": train}, [str(c) for c in range(10)], {"image": "image"}, "fp")
    enc2 = TrainedEncoder(width=32, epochs=15, image_size=8)
    enc2.setup(EncoderContext(torch.device("cpu"), "image", only_train, train, tmp_path))
    assert enc2.report() == {"epochs": 15, "train_accuracy": report["train_accuracy"]}  # same seed, same network


REPORT_TASKS = """\
suite: {seeds: [0], num_anchors: 12, output: results, leaderboards: boards}
tasks:
  - name: digits-trained
    dataset: {name: digits, params: {train_size: 300, test_size: 150}}
    encoders:
      - {name: trained, label: mlp-0, params: {arch: mlp, seed: 0, epochs: 2}}
      - {name: trained, label: mlp-1, params: {arch: mlp, seed: 1, epochs: 2}}
    grid:
      selectors: [random]
      similarities: [cosine]
      stitchers: [relative]
    metrics: [accuracy]
"""


def test_trained_encoders_accuracy_reaches_the_page_and_survives_the_cache(registry, cli_main, write_yaml):
    from relbench.config import load_suite
    from relbench.runner import Runner

    path = write_yaml(REPORT_TASKS)
    first = Runner(load_suite(path, registry), registry, quiet=True)
    assert first.run().encoded == 4

    def reports(runner):
        extras = runner.store.load("digits-trained")["extra"]
        found = {json.dumps(e["encoder_reports"], sort_keys=True) for e in extras}
        assert len(found) == 1
        return json.loads(found.pop())

    before = reports(first)
    assert set(before) == {"mlp-0", "mlp-1"} and all(0 < r["test_accuracy"] <= 1 for r in before.values())
    assert cli_main(["leaderboard", str(path)]) == 0
    page = (path.parent / "boards" / "digits-trained.md").read_text()
    assert "Encoders trained here" in page and "test accuracy" in page

    again = Runner(load_suite(path, registry), registry, quiet=True, force=True)
    stats = again.run()
    assert stats.encoded == 0 and stats.cached == 4  # the banks, and their reports, come from the cache
    assert reports(again) == before
