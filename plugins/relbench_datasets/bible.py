"""Verse-aligned English–Spanish Bible from Debian's SWORD modules, read with pysword.

The English text is the World English Bible (``sword-text-web``, module
``engWEB2015eb``, NRSVA versification, with deuterocanonical books), the Spanish the
Reina-Valera 1909 (``sword-text-sparv``, module ``spaRV1909eb``, KJV versification).
Each is read once with pysword (``clean=False``; footnotes, titles and markup are
stripped here, because pysword's own cleaning glues the words around a footnote) and
cached as JSON keyed by its module files' hash and the pysword version. The English text
alone (:func:`english_verses`) is also the ``bible`` corpus of the word-vector tables.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np

from relbench.api import DatasetData, MissingAsset
from relbench_datasets.assets import EXTRACTION_VERSION, cached_json, files_digest, package_version, sources_of
from relbench_datasets.base import Part, PooledDataset

#: the SWORD library folder (``$SWORD_PATH``, default Debian's)
SWORD_DIR = Path(os.environ.get("SWORD_PATH", "/usr/share/sword"))
PYSWORD_INSTALL = "pip install pysword==0.2.8"
#: language → (SWORD module key, Debian package)
MODULES = {"en": ("engWEB2015eb", "sword-text-web"), "es": ("spaRV1909eb", "sword-text-sparv")}

#: book group → OSIS names of its books (the 66 books of the Protestant canon, in order)
BOOK_GROUPS: dict[str, list[str]] = {
    "Law": ["Gen", "Exod", "Lev", "Num", "Deut"],
    "History": ["Josh", "Judg", "Ruth", "1Sam", "2Sam", "1Kgs", "2Kgs", "1Chr", "2Chr", "Ezra", "Neh", "Esth"],
    "Poetry/Wisdom": ["Job", "Ps", "Prov", "Eccl", "Song"],
    "Prophets": ["Isa", "Jer", "Lam", "Ezek", "Dan", "Hos", "Joel", "Amos", "Obad", "Jonah", "Mic", "Nah",
                 "Hab", "Zeph", "Hag", "Zech", "Mal"],
    "Gospels/Acts": ["Matt", "Mark", "Luke", "John", "Acts"],
    "Epistles": ["Rom", "1Cor", "2Cor", "Gal", "Eph", "Phil", "Col", "1Thess", "2Thess", "1Tim", "2Tim",
                 "Titus", "Phlm", "Heb", "Jas", "1Pet", "2Pet", "1John", "2John", "3John", "Jude"],
    "Apocalypse": ["Rev"],
}
BOOKS = [book for books in BOOK_GROUPS.values() for book in books]

_DROPPED = re.compile(r"<(note|speaker)\b[^>]*>.*?</\1>", re.S)
_WORD_TAG = re.compile(r"</?w\b[^>]*>")
_TAG = re.compile(r"<[^>]*>")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?])")
_GLOSSARY = re.compile(r'<div\b[^>]*type="glossary"')


def clean_verse(raw: str) -> str:
    """Plain text of one OSIS verse: footnotes, titles and speaker labels removed, word
    tags dropped, other tags turned into spaces, whitespace collapsed (and a glossary
    appended after the last verse cut off)."""
    glossary = _GLOSSARY.search(raw)
    if glossary:
        raw = raw[: glossary.start()]
    text = _DROPPED.sub(" ", raw)
    text = _WORD_TAG.sub("", text)
    text = _TAG.sub(" ", text)
    text = " ".join(text.split())
    return _SPACE_BEFORE_PUNCT.sub(r"\1", text)


def module_files(lang: str) -> list[Path]:
    """The conf and data files of one language's SWORD module (``MissingAsset`` if absent)."""
    key, package = MODULES[lang]
    conf = SWORD_DIR / "mods.d" / f"{key}.conf"
    data = SWORD_DIR / "modules" / "texts" / "ztext" / key
    files = sorted(data.glob("*")) if data.is_dir() else []
    if not conf.is_file() or not files:
        raise MissingAsset(
            f"The SWORD module {key} ({'English' if lang == 'en' else 'Spanish'} Bible) is not installed "
            f"under {SWORD_DIR}. Install it with: apt-get install {package}"
        )
    return [conf, *files]


def read_module(lang: str) -> list[list]:
    """Every verse of one module as ``[osis_book, chapter, verse, text]`` (text may be empty)."""
    try:
        from pysword.modules import SwordModules
    except ImportError:
        raise MissingAsset(f"The Python package 'pysword' is not installed. Install it with: {PYSWORD_INSTALL}") from None
    key, _ = MODULES[lang]
    modules = SwordModules(str(SWORD_DIR))
    modules.parse_modules()
    bible = modules.get_bible_from_module(key)
    # pysword decompresses a whole block for every verse it reads; remembering the last
    # blocks makes reading a Bible take under a second instead of about a minute
    bible._decompressed_text = functools.lru_cache(maxsize=4)(bible._decompressed_text)
    verses = []
    for books in bible.get_structure().get_books().values():
        for book in books:
            texts = list(bible.get_iter(books=[book.name], clean=False))
            refs = [(c + 1, v + 1) for c, n in enumerate(book.chapter_lengths) for v in range(n)]
            if len(texts) != len(refs):
                raise RuntimeError(f"{key} {book.osis_name}: {len(texts)} texts for {len(refs)} verse slots")
            verses.extend([book.osis_name, c, v, clean_verse(t)] for (c, v), t in zip(refs, texts))
    return verses


def language_digest(lang: str) -> str:
    """Hash of one language's module files, the pysword version and the extraction version."""
    blob = "|".join([files_digest(module_files(lang)), package_version("pysword"), str(EXTRACTION_VERSION)])
    return hashlib.sha256(blob.encode()).hexdigest()


def source_digest() -> str:
    """Hash of both modules' files, the pysword version and the extraction version."""
    parts = [files_digest(module_files(lang)) for lang in MODULES]
    blob = "|".join([*parts, package_version("pysword"), str(EXTRACTION_VERSION)])
    return hashlib.sha256(blob.encode()).hexdigest()


@functools.lru_cache(maxsize=len(MODULES))
def _extracted(lang: str, digest: str) -> list[list]:
    return cached_json(f"bible-{lang}", digest, lambda: read_module(lang))


def extracted(lang: str) -> list[list]:
    """Every verse of one language's module (see :func:`read_module` for the format), from
    the disk cache when present; only that language's module needs to be installed."""
    return _extracted(lang, language_digest(lang))


def english_verses() -> list[str]:
    """Every non-empty verse of the World English Bible (deuterocanonical books included),
    in canonical order, as plain text (cached)."""
    return [text for *_, text in extracted("en") if text]


def _misaligned(refs: list[tuple[str, int, int]], english: list[str], spanish: list[str]) -> set[int]:
    """Indices of verse pairs that fail the alignment check.

    The two versifications sometimes number a chapter differently (Hebrew vs English
    numbering, e.g. Num 13, Hos 12, Jonah 2), which shifts every verse by one. Verse
    lengths of true translations correlate, so a chapter (of at least 4 verses) whose
    log-lengths correlate better when shifted by one verse (by more than 0.2) and
    poorly unshifted (below 0.5) is dropped whole; so is any single pair whose length
    ratio is more than e^0.9 ≈ 2.5 times off the median ratio (a verse merged into its
    neighbour, or an appended subscription).
    """
    log_ratio = np.log([len(s) / len(e) for e, s in zip(english, spanish)])
    bad = set(np.flatnonzero(np.abs(log_ratio - np.median(log_ratio)) > 0.9).tolist())
    chapters: dict[tuple[str, int], list[int]] = {}
    for i, (book, chapter, _) in enumerate(refs):
        chapters.setdefault((book, chapter), []).append(i)
    for idx in chapters.values():
        if len(idx) < 4:
            continue
        a = np.log([len(english[i]) for i in idx])
        b = np.log([len(spanish[i]) for i in idx])
        same = np.corrcoef(a, b)[0, 1]
        shifted = max(np.corrcoef(a[1:], b[:-1])[0, 1], np.corrcoef(a[:-1], b[1:])[0, 1])
        if same < 0.5 and shifted > same + 0.2:
            bad.update(idx)
    return bad


def aligned_verses() -> tuple[list[tuple[str, int, int]], list[str], list[str], dict[str, int]]:
    """Verses present, non-empty and passing the alignment check in both languages, in
    canonical order of the 66 books.

    Returns ``(refs, english, spanish, counts)``; ``counts`` reports how many verses each
    side has, how many were dropped for being missing or empty in the other, and how
    many failed :func:`_misaligned`.
    """
    en = {(b, c, v): t for b, c, v, t in extracted("en")}
    es = {(b, c, v): t for b, c, v, t in extracted("es")}
    order = {book: i for i, book in enumerate(BOOKS)}
    refs = sorted((r for r in en if r[0] in order and en[r] and es.get(r)), key=lambda r: (order[r[0]], r[1], r[2]))
    bad = _misaligned(refs, [en[r] for r in refs], [es[r] for r in refs])
    counts = {
        "en_verses": sum(1 for t in en.values() if t),
        "es_verses": sum(1 for t in es.values() if t),
        "en_only": sum(1 for r, t in en.items() if t and r[0] in order and not es.get(r)),
        "es_only": sum(1 for r, t in es.items() if t and not en.get(r)),
        "both": len(refs),
        "misaligned": len(bad),
        "aligned": len(refs) - len(bad),
    }
    refs = [r for i, r in enumerate(refs) if i not in bad]
    return refs, [en[r] for r in refs], [es[r] for r in refs], counts


@dataclass
class BibleEnEs(PooledDataset):
    """Bible verses aligned English–Spanish (WEB / Reina-Valera 1909), labelled by book group or book.

    Verses are aligned on (book, chapter, verse) across the two versifications; a verse
    missing or empty in either language is dropped, and so are pairs failing the
    alignment check of :func:`_misaligned` (chapters numbered differently, length
    outliers): of 31,077 verses present in both, 30,926 remain. Deuterocanonical books
    have no Spanish side. Labels: ``groups`` = Law (Gen–Deut),
    History (Josh–Esth), Poetry/Wisdom (Job–Song), Prophets (Isa–Mal), Gospels/Acts
    (Matt–Acts), Epistles (Rom–Jude), Apocalypse (Rev) — see ``BOOK_GROUPS``; ``books`` =
    the 66 books (OSIS names). Views ``en`` and ``es``; ids ``bible-<Book>.<chapter>.<verse>``.
    A fixed stratified partition (seed 0) holds out ``test_fraction`` of every class.

    Parameters
    ----------
    labels : "groups" | "books", default "groups"
        Seven book groups or the 66 books as classes. Our choice of grouping.
    test_fraction : float, default 0.2
        Share of every class held out for the test split (fixed partition, seed 0). Our choice.
    train_size : int | None, default 5000
        Seeded stratified subsample of the training partition (``null`` = all). Our choice.
    test_size : int | None, default 1000
        Seeded stratified subsample of the test partition (``null`` = all). Our choice.
    seed : int, default 0
        Seed of the subsampling. Our choice.
    """

    name: ClassVar[str] = "bible-en-es"
    train_size: int | None = 5000
    test_size: int | None = 1000
    labels: Literal["groups", "books"] = "groups"

    def provenance(self) -> dict[str, str]:
        """The two SWORD modules Debian ships (English WEB, Spanish SpaRV)."""
        return {"what": "The Bible, English (World English Bible) and Spanish (SpaRV) SWORD modules",
                "debian": "sword-text-web, sword-text-sparv", "licence": "public domain",
                "cite": "World English Bible; Reina-Valera (SWORD module SpaRV), CrossWire Bible Society"}

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.labels not in ("groups", "books"):
            raise ValueError(f"labels must be 'groups' or 'books', got {self.labels!r}")

    def load(self) -> DatasetData:
        """Align the cached extraction, label it, partition and subsample."""
        refs, english, spanish, _ = aligned_verses()
        if self.labels == "groups":
            class_names = list(BOOK_GROUPS)
            of_book = {book: i for i, books in enumerate(BOOK_GROUPS.values()) for book in books}
        else:
            class_names = list(BOOKS)
            of_book = {book: i for i, book in enumerate(BOOKS)}
        labels = np.array([of_book[b] for b, _, _ in refs], dtype=np.int64)
        ids = [f"bible-{b}.{c}.{v}" for b, c, v in refs]
        parts = self.partition(Part(ids, labels, {"en": english, "es": spanish}))
        read = [p for lang in MODULES for p in module_files(lang)]
        return self.assemble(parts, class_names, {"en": "text", "es": "text"}, source_digest(),
                             sources=sources_of(read, ["pysword"]))
