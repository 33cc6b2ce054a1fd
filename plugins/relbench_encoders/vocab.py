"""A data set of words shared by several word-vector tables (for neighbourhood tasks)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from relbench.api import Dataset, DatasetData, Split
from relbench_datasets.assets import cached_json
from relbench_encoders import corpus as corpora
from relbench_encoders._common import cache_subdir, params_hash
from relbench_encoders.tables import TABLES, get_table, table_fingerprint

_ALPHA = re.compile(r"^[^\W\d_]+$")


@dataclass
class WordVocab(Dataset):
    """Words shared by the given word-vector tables (one view ``word``, no labels).

    Candidates are GloVe's words in its row order (GloVe rows are sorted by corpus
    frequency), kept when alphabetic and present in every table of ``tables``; the first
    ``top`` candidates form the pool, ``size`` of them are drawn with ``seed`` and listed
    in frequency order. A sample's id is the word itself. The ``train`` and ``test``
    splits hold the same list (neighbourhood tasks compare spaces on one vocabulary).
    Word2Vec/FastText tables are the ``word-vectors`` encoder's defaults (trained once),
    kept under ``$RELBENCH_CACHE_DIR/words`` (default ``~/.cache/relbench/words``); the
    runner sets that variable from the suite's ``cache_dir`` when a tasks file gives one.

    Parameters
    ----------
    tables: tables whose vocabularies must all contain a word (default ``word2vec`` and
        ``fasttext``: the pair of Moschella 2023 §4.1).
    size: number of words (default 2000: our choice).
    top: size of the frequency-ordered candidate pool the words are drawn from
        (default 20000: our choice, keeps rare words out).
    seed: seed of the draw (default 0).
    """

    name: ClassVar[str] = "word-vocab"

    tables: list[str] = field(default_factory=lambda: ["word2vec", "fasttext"])
    size: int = 2000
    top: int = 20000
    seed: int = 0

    def provenance(self) -> dict[str, str]:
        """The vocabulary the word tables share (each table's own row names its source)."""
        return {"what": "words common to the word tables, most frequent first", "licence": "the tables' licences"}

    def __post_init__(self) -> None:
        bad = [t for t in self.tables if t not in TABLES]
        if bad or not self.tables:
            raise ValueError(f"tables must be a non-empty list among {', '.join(TABLES)}, got {self.tables}")
        if not 0 < self.size <= self.top:
            raise ValueError(f"need 0 < size <= top, got size={self.size}, top={self.top}")

    def words(self) -> list[str]:
        """The chosen words, in frequency order (computed once per tables' identity and
        parameters, then read from ``datasets/word-vocab`` in the cache: building it
        loads every table)."""
        default = (corpora.CORPORA, 100, 5, 5, 5, 0)  # get_table's defaults: the tables this list reads
        key = params_hash(dict(params=self.params(), tables=[table_fingerprint(t, *default)
                                                             for t in ["glove", *self.tables]]))
        return cached_json(self.name, key, self._draw)

    def _draw(self) -> list[str]:
        cache = cache_subdir(None, "words")
        tables = [get_table(t, cache) for t in self.tables]
        pool: list[str] = []
        for word in get_table("glove", cache).words:
            if _ALPHA.match(word) and all(word in t for t in tables):
                pool.append(word)
                if len(pool) == self.top:
                    break
        if len(pool) < self.size:
            raise ValueError(f"only {len(pool)} words are shared by {self.tables}; lower size")
        rng = np.random.default_rng(self.seed)
        chosen = np.sort(rng.choice(len(pool), size=self.size, replace=False))
        return [pool[i] for i in chosen]

    def load(self) -> DatasetData:
        """The word list as identical ``train`` and ``test`` splits."""
        words = self.words()
        split = Split(ids=list(words), labels=None, views={"word": list(words)})
        return DatasetData(
            name=self.name,
            splits={"train": split, "test": Split(ids=list(words), labels=None, views={"word": list(words)})},
            class_names=[],
            view_modalities={"word": "word"},
            fingerprint=params_hash(dict(params=self.params(), words=words)),
        )
