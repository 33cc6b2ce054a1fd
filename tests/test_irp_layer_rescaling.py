"""The layer-rescaling kind (IRP Figure 2) on a tiny local BERT: the hook's arithmetic,
its removal, the relative form's exact invariance to a rescaled last layer (linear
pooling, no normalisation after it) where the absolute form moves, and a unit run."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from relbench.interfaces import DatasetData, Split
from relbench.pages import Page
from relbench.testing import TaskRunDouble, make_task, spec
from relbench_encoders._common import ensure_torchvision
from relbench_irp.layer_hooks import TextModel, agreement, relative, rescalable_modules, rescaled
from relbench_irp.layers import LayerRescaling
from relbench_relreps import RandomAnchors

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

EXPERIMENTS = Path(__file__).resolve().parents[1] / "tasks.yaml"
WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog"]


def save_tiny_bert(root: Path) -> Path:
    """A tiny BERT (2 layers, 16-d) and a word-level tokenizer saved as a hub folder."""
    ensure_torchvision()  # transformers imports torchvision
    from transformers import BertConfig, BertModel, BertTokenizer

    root.mkdir(parents=True, exist_ok=True)
    (root / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=12, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                     max_position_embeddings=64)
    BertModel(cfg).eval().save_pretrained(root / "model")
    BertTokenizer(str(root / "vocab.txt")).save_pretrained(root / "model")
    return root / "model"


def sentences(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(2, 7))) for _ in range(n)]


def text_data(n_train: int = 60, n_test: int = 30) -> DatasetData:
    """Sentences labelled by whether they hold 'cat' (a learnable two-class task)."""
    def split(name: str, texts: list[str]) -> Split:
        labels = np.array([int("cat" in t.split()) for t in texts])
        return Split(ids=[f"{name}{i}" for i in range(len(texts))], labels=labels, views={"en": texts})

    splits = {"train": split("tr", sentences(n_train, 1)), "test": split("te", sentences(n_test, 2))}
    return DatasetData("sentences", splits, ["other", "cat"], {"en": "text"}, "sentences")


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="module")
def text(tiny_bert) -> TextModel:
    return TextModel(tiny_bert, "mean", 32, False, torch.device("cpu"))


def test_pooling_matches_the_transformers_encoder(tiny_bert, text, tmp_path):
    from relbench.interfaces import EncoderContext
    from relbench_encoders.text import TransformersEncoder

    texts = sentences(7, 3)
    split = Split(ids=[str(i) for i in range(len(texts))], labels=None, views={"en": texts})
    ctx = EncoderContext(torch.device("cpu"), "en", DatasetData("t", {"train": split}, [], {"en": "text"}, "fp"),
                         split, tmp_path, batch_size=3)
    expected = TransformersEncoder(model=str(tiny_bert), max_length=32, backend="torch").encode(texts, ctx)
    assert torch.allclose(text.encode(texts, batch_size=3), expected, atol=1e-5)


@pytest.mark.parametrize("layer", [0, 1, 2])
def test_a_scale_of_one_leaves_the_embeddings_bitwise_unchanged(text, layer):
    texts = sentences(9, 4)
    before = text.encode(texts)
    with rescaled(text.model, layer, 1.0):
        assert torch.equal(text.encode(texts), before)


def test_the_hook_scales_the_layer_output_and_is_removed_after_use(text):
    texts = sentences(5, 5)
    module = rescalable_modules(text.model)[2]
    seen = []
    probe = module.register_forward_hook(lambda m, i, out: seen.append(out[0] if isinstance(out, tuple) else out))
    try:
        text.encode(texts)
        with rescaled(text.model, 2, 3.0):
            assert len(module._forward_hooks) == 2
            rescaled_last = text.encode(texts)
    finally:
        probe.remove()
    assert len(module._forward_hooks) == 0  # ours is gone too
    assert torch.allclose(rescaled_last, 3.0 * text.encode(texts), atol=1e-5)  # mean pooling is linear
    with pytest.raises(RuntimeError), rescaled(text.model, 1, 5.0):
        raise RuntimeError("inside")
    assert all(len(m._forward_hooks) == 0 for m in rescalable_modules(text.model))  # removed on errors
    with pytest.raises(ValueError, match="0 … 2"):
        with rescaled(text.model, 3, 2.0):
            pass


def test_the_relative_form_is_invariant_to_a_rescaled_last_layer_where_the_absolute_is_not(text):
    """Mean pooling is linear and nothing normalises after the last layer, so scaling its
    output by s scales every embedding and anchor by s: cosines to anchors do not move
    (bitwise for a power of two), while the absolute embedding moves by |s − 1|."""
    texts, anchor_texts = sentences(20, 6), sentences(8, 7)
    X, A = text.encode(texts), text.encode(anchor_texts)
    for scale in (2.0, 3.0, 0.1):
        with rescaled(text.model, text.num_layers, scale):
            Xs, As = text.encode(texts), text.encode(anchor_texts)
        cosine, error = agreement(relative(Xs, As), relative(X, A))
        assert cosine == pytest.approx(1.0, abs=1e-6) and error < 1e-5
        if scale == 2.0:
            assert torch.equal(relative(Xs, As), relative(X, A))
        assert agreement(Xs, X)[1] == pytest.approx(abs(scale - 1.0), rel=1e-4)
    with rescaled(text.model, 1, 10.0):  # an inner layer: attention and LayerNorm follow, not a common factor
        Xs, As = text.encode(texts), text.encode(anchor_texts)
    assert agreement(relative(Xs, As), relative(X, A))[1] > 1e-5  # small (LayerNorm absorbs most), not rounding


def test_a_unit_reports_every_layer_and_scale_in_both_forms(tiny_bert, tmp_path):
    task = make_task(LayerRescaling, grid={"selectors": [spec(RandomAnchors)]}, num_anchors=10, seeds=[0],
                     model=str(tiny_bert), max_length=32, layers=[0, 2], scales=[1.0, 4.0], max_samples=40, epochs=2)
    run = TaskRunDouble(task, {}, dataset=text_data(), tmp=tmp_path, modality="text")
    run.run()
    df = run.frame()
    assert len(df[df["metric"] == "accuracy_unscaled"]) == 2
    scaled = df[df["metric"] != "accuracy_unscaled"].set_index(["representation", "layer", "scale", "metric"])["value"]
    assert len(scaled) == 2 * 2 * 2 * 3
    unscaled = df[df["metric"] == "accuracy_unscaled"].set_index("representation")["value"]
    for r in ("absolute", "relative"):
        for layer in (0, 2):
            assert scaled[r, layer, 1.0, "cosine"] == pytest.approx(1.0) and scaled[r, layer, 1.0, "error"] == 0.0
            assert scaled[r, layer, 1.0, "accuracy"] == unscaled[r]
    assert scaled["relative", 2, 4.0, "error"] < 1e-5 < scaled["absolute", 2, 4.0, "error"]
    assert scaled["absolute", 2, 4.0, "error"] == pytest.approx(3.0, rel=1e-4)
    page = run.kind.page(df, Page(tmp_path / "board", "t"))
    assert "layer_rescaling.png" in page and "| random" in page
    assert run.kind.page(df.iloc[:0], Page(tmp_path, "t")) == "No results yet.\n"


def test_layer_rescaling_refuses_bad_parameters():
    for bad, match in [({"layers": [-1]}, "layers"), ({"scales": [0.0]}, "scales"), ({"pooling": "pooler"}, "pooling")]:
        with pytest.raises(ValueError, match=match):
            LayerRescaling(**bad)


def test_the_experiments_task_reads_minilm_as_tasks_yaml_spells_it():
    from relbench.config import load_suite
    from relbench.plugins import load_registry

    task = {t.name: t for t in load_suite(EXPERIMENTS, load_registry()).tasks}["rotten-tomatoes-layer-rescaling"]
    kind = task.kind.build()
    assert task.kind.name == "layer-rescaling" and kind.model == "all-MiniLM-L6-v2"
    assert task.dataset.name == "rotten-tomatoes" and kind.max_samples <= 2000
    assert max(kind.layers) <= 6  # MiniLM-L6


def test_the_page_says_the_absolute_head_discards_a_common_factor_as_its_layer_norm_does():
    import torch

    from relbench.reference_head import ReferenceHead
    from relbench_irp.layers import LayerRescaling

    from relbench.training import fix_statistics

    torch.manual_seed(0)
    head = ReferenceHead(8, 16, 3)
    x = torch.randn(5, 8)
    fix_statistics(head, torch.randn(20, 8))
    head.eval()
    with torch.no_grad():
        assert torch.allclose(head(x), head(10 * x), atol=1e-4)  # what the page now states
    assert "LayerNorm" in LayerRescaling().meaning(None, "higher")
