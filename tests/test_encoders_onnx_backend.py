"""The onnxruntime backend of the torch encoders: a tiny timm CNN and a tiny BERT exported,
checked against torch and cached; the cached graph and verdict reused; the fallback to
torch when export or agreement fails; ``backend: torch`` never touching onnxruntime; the
backend outside the encoder's identity; and release."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import skimage.data
import torch

from relbench.interfaces import DatasetData, EncoderContext, Split
from relbench_encoders import ort_backend
from relbench_encoders._common import ensure_torchvision
from relbench_encoders.text import TransformersEncoder
from relbench_encoders.timm_encoder import TimmEncoder

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

IMAGES = [skimage.data.camera()[:64, :64], skimage.data.coffee(), skimage.data.chelsea(), skimage.data.rocket(),
          np.full((20, 30), 200, np.uint8)]
TEXTS = ["the cat sat on the mat", "a dog", "the dog sat on the mat on a cat", "cat", "a cat sat"]


def make_ctx(tmp_path, items, view, modality, batch_size=2):
    split = Split(ids=[str(i) for i in range(len(items))], labels=None, views={view: list(items)})
    data = DatasetData("t", {"train": split}, [], {view: modality}, "fp")
    return EncoderContext(torch.device("cpu"), view, data, split, tmp_path, batch_size=batch_size)


def tiny_cnn(**kw) -> TimmEncoder:
    return TimmEncoder(model="test_efficientnet", weights="random", seed=1, image_size=32, **kw)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A tiny BERT built from a config and a word-level tokenizer, saved locally."""
    ensure_torchvision()
    from transformers import BertConfig, BertModel, BertTokenizer

    root = tmp_path_factory.mktemp("tiny-bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "a", "dog"]
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n")
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=64)
    BertModel(cfg).eval().save_pretrained(root / "model")
    BertTokenizer(str(root / "vocab.txt")).save_pretrained(root / "model")
    return str(root / "model")


def graphs(tmp_path) -> list:
    return sorted((tmp_path / "onnx").glob("*.onnx"))


def record(tmp_path) -> dict:
    (path,) = sorted((tmp_path / "onnx").glob("*.json"))
    return json.loads(path.read_text())


def assert_agree(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.shape == b.shape
    assert float((a - b).abs().max()) <= ort_backend.TOLERANCE * float(b.abs().max())


def test_tiny_cnn_exported_agrees_with_torch_and_records_the_verdict(tmp_path):
    ctx = make_ctx(tmp_path, IMAGES, "image", "image")
    enc = tiny_cnn(backend="onnxruntime")
    X = enc.encode(IMAGES, ctx)
    ref = tiny_cnn(backend="torch").encode(IMAGES, ctx)
    assert enc.backend_used == "onnxruntime" and enc._net is None  # the session replaced the torch net
    assert_agree(X, ref)
    assert len(graphs(tmp_path)) == 1
    verdict = record(tmp_path)
    assert verdict["agrees"] and verdict["max_abs_diff"] <= ort_backend.TOLERANCE * verdict["scale"]
    options = enc._ort.session.get_session_options()
    assert not options.enable_cpu_mem_arena and options.intra_op_num_threads == torch.get_num_threads()


def test_tiny_bert_exported_agrees_with_torch_on_padded_batches(tiny_bert, tmp_path):
    ctx = make_ctx(tmp_path, TEXTS, "en", "text", batch_size=3)
    for pooling in ("mean", "cls", "pooler"):
        enc = TransformersEncoder(model=tiny_bert, pooling=pooling, backend="onnxruntime")
        X = enc.encode(TEXTS, ctx)
        assert enc.backend_used == "onnxruntime"
        assert_agree(X, TransformersEncoder(model=tiny_bert, pooling=pooling, backend="torch").encode(TEXTS, ctx))
    assert len(graphs(tmp_path)) == 2  # mean and cls share the hidden-state graph


def test_graph_traced_without_padding_still_masks(tiny_bert, tmp_path):
    same = ["cat sat", "a dog", "the mat"]  # one length: traced and checked with a padding column added
    ctx = make_ctx(tmp_path, same, "en", "text")
    TransformersEncoder(model=tiny_bert, backend="onnxruntime").encode(same, ctx)
    enc = TransformersEncoder(model=tiny_bert, backend="onnxruntime")
    X = enc.encode(TEXTS, ctx)  # padded batches through the cached graph
    assert enc.backend_used == "onnxruntime"
    assert_agree(X, TransformersEncoder(model=tiny_bert, backend="torch").encode(TEXTS, ctx))


def test_second_setup_reuses_the_graph_and_the_verdict(tmp_path, monkeypatch):
    ctx = make_ctx(tmp_path, IMAGES, "image", "image")
    first = tiny_cnn().encode(IMAGES, ctx)  # auto on the CPU: onnxruntime
    (graph,) = graphs(tmp_path)
    mtime = graph.stat().st_mtime_ns

    def refuse(*args, **kwargs):
        raise AssertionError("exported or checked again")

    monkeypatch.setattr(torch.onnx, "export", refuse)
    monkeypatch.setattr(ort_backend, "_check", refuse)
    enc = tiny_cnn()
    assert torch.equal(enc.encode(IMAGES, ctx), first) and enc.backend_used == "onnxruntime"
    assert graph.stat().st_mtime_ns == mtime


def test_changed_graph_is_checked_again_and_changed_weights_exported_again(tmp_path, monkeypatch):
    import onnx

    ctx = make_ctx(tmp_path, IMAGES, "image", "image")
    tiny_cnn().encode(IMAGES, ctx)
    (graph,) = graphs(tmp_path)
    model = onnx.load(str(graph))
    model.doc_string = "changed"
    onnx.save(model, str(graph))
    checks = []
    real_check = ort_backend._check
    monkeypatch.setattr(ort_backend, "_check", lambda *a: checks.append(1) or real_check(*a))
    assert tiny_cnn().encode(IMAGES, ctx).shape[0] == len(IMAGES)
    assert checks == [1] and record(tmp_path)["agrees"]
    TimmEncoder(model="test_efficientnet", weights="random", seed=2, image_size=32).encode(IMAGES, ctx)
    assert len(graphs(tmp_path)) == 2 and checks == [1, 1]


def test_failed_export_falls_back_to_torch_and_says_why_once(tmp_path, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("unsupported operator")

    monkeypatch.setattr(torch.onnx, "export", broken)
    ctx = make_ctx(tmp_path, IMAGES, "image", "image")
    with caplog.at_level(logging.WARNING):
        enc = tiny_cnn(backend="onnxruntime")
        X = enc.encode(IMAGES, ctx)
        again = tiny_cnn(backend="onnxruntime")
        again.encode(IMAGES, ctx)
    assert enc.backend_used == "torch" and again.backend_used == "torch" and graphs(tmp_path) == []
    assert torch.equal(X, tiny_cnn(backend="torch").encode(IMAGES, ctx))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and not warnings[0].exc_info
    assert "onnxruntime backend is not used" in warnings[0].getMessage()
    assert "RuntimeError: unsupported operator" in warnings[0].getMessage()
    assert "unsupported operator" in record(tmp_path)["export_error"]


def test_disagreeing_graph_falls_back_to_torch(tmp_path, monkeypatch, caplog):
    real_call = ort_backend.OrtForward.__call__
    monkeypatch.setattr(ort_backend.OrtForward, "__call__", lambda self, *x: [y + 1.0 for y in real_call(self, *x)])
    ctx = make_ctx(tmp_path, IMAGES, "image", "image")
    with caplog.at_level(logging.WARNING):
        enc = tiny_cnn()
        X = enc.encode(IMAGES, ctx)
    assert enc.backend_used == "torch"
    assert torch.equal(X, tiny_cnn(backend="torch").encode(IMAGES, ctx))
    assert "differ from torch's" in caplog.text and record(tmp_path)["agrees"] is False


def test_torch_backend_never_touches_onnxruntime(tiny_bert, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # any import of it now fails
    monkeypatch.setitem(sys.modules, "onnx", None)

    def refuse(*args, **kwargs):
        raise AssertionError("the onnxruntime backend was prepared")

    monkeypatch.setattr(ort_backend, "prepare", refuse)
    ctx = make_ctx(tmp_path, IMAGES, "image", "image")
    enc = tiny_cnn(backend="torch")
    assert enc.encode(IMAGES, ctx).shape[0] == len(IMAGES) and enc.backend_used == "torch"
    text = TransformersEncoder(model=tiny_bert, backend="torch")
    assert text.encode(TEXTS, make_ctx(tmp_path, TEXTS, "en", "text")).shape == (5, 16)
    assert text.backend_used == "torch"
    auto = tiny_cnn()  # auto without onnxruntime installed: torch, silently
    auto.encode(IMAGES, ctx)
    assert auto.backend_used == "torch" and not (tmp_path / "onnx").exists()


def test_auto_is_onnxruntime_on_cpu_and_torch_on_cuda():
    assert ort_backend.wanted("auto", torch.device("cpu")) == "onnxruntime"
    assert ort_backend.wanted("auto", torch.device("cuda")) == "torch"
    assert ort_backend.wanted("torch", torch.device("cpu")) == "torch"
    with pytest.raises(ValueError, match="backend must be auto, torch or onnxruntime"):
        TimmEncoder(backend="tensorrt")
    with pytest.raises(ValueError, match="backend must be"):
        TransformersEncoder(backend="cuda")


def test_backend_is_no_part_of_the_identity():
    for cls in (TimmEncoder, TransformersEncoder):
        params = cls(backend="torch").params()
        assert "backend" not in params and params == cls(backend="onnxruntime").params() == cls().params()


def test_release_frees_the_session_and_encode_sets_up_again(tiny_bert, tmp_path):
    ctx = make_ctx(tmp_path, IMAGES, "image", "image")
    enc = tiny_cnn()
    X = enc.encode(IMAGES, ctx)
    enc.release()
    assert enc._net is None and enc._ort is None
    assert torch.equal(enc.encode(IMAGES, ctx), X) and enc.backend_used == "onnxruntime"
    text = TransformersEncoder(model=tiny_bert)
    tctx = make_ctx(tmp_path, TEXTS, "en", "text")
    T = text.encode(TEXTS, tctx)
    text.release()
    assert text._net is None and text._ort is None and text._tok is None
    assert torch.equal(text.encode(TEXTS, tctx), T)



HEAP_KEPT_AFTER_A_FREED_BATCH = """
import sys
import numpy as np
from relbench_encoders.ort_backend import release_freed_memory

def rss_mb():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) / 1024

block = np.ones(12_600_000 // 8)  # one input batch: 64 images of 3 x 128 x 128 float32
del block  # a mapped block: glibc now raises its mmap threshold above a batch
batch = np.ones(12_600_000 // 8)  # so the next batch comes from the heap
del batch
kept = rss_mb()
assert release_freed_memory()
print(kept - rss_mb())  # MB handed back
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_a_freed_batch_on_the_heap_is_handed_back_after_a_run():
    """A batch-sized block freed on the heap (where glibc's raised mmap threshold puts it)
    stays resident until the heap is trimmed, as each onnxruntime run now does."""
    out = subprocess.run([sys.executable, "-c", HEAP_KEPT_AFTER_A_FREED_BATCH], capture_output=True, text=True,
                         check=True)
    assert float(out.stdout.split()[-1]) > 10


def test_every_run_trims_the_heap(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(ort_backend, "release_freed_memory", lambda: calls.append(1) or True)
    graph = tmp_path / "linear.onnx"
    torch.onnx.export(torch.nn.Linear(3, 2).eval(), (torch.ones(1, 3),), str(graph), dynamo=False,
                      input_names=["x"], output_names=["y"])
    forward = ort_backend.OrtForward(graph, torch.device("cpu"), ["x"])
    forward(torch.ones(1, 3))
    forward(torch.zeros(1, 3))
    assert calls == [1, 1]
