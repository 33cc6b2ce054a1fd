"""Django's user-interface strings in five languages: an out-of-domain parallel anchor pool."""

from __future__ import annotations

import gettext
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from relbench.api import DatasetData
from relbench_datasets.assets import files_digest, package_dir, sources_of
from relbench_datasets.base import Part, PooledDataset

INSTALL = 'pip install --no-deps "django>=5.2,<6"'
LANGUAGES = ("es", "fr", "de", "ja")
CONTEXT_SEPARATOR = "\x04"


def catalogue_files(django_dir: Path, lang: str, include_contrib: bool) -> list[Path]:
    """The ``django.mo`` catalogues of one language: core first, then contrib apps by name."""
    files = [django_dir / "conf" / "locale" / lang / "LC_MESSAGES" / "django.mo"]
    if include_contrib:
        files += sorted(django_dir.glob(f"contrib/*/locale/{lang}/LC_MESSAGES/django.mo"))
    return [f for f in files if f.is_file()]


def read_catalogue(paths: list[Path]) -> dict[str, str]:
    """msgid → translation over ``paths`` (the first file defining a msgid wins).

    Read with :class:`gettext.GNUTranslations`; plural entries, the header and empty
    translations are skipped. A msgid with a context (``ctx\\x04msgid``) keeps its key.
    """
    out: dict[str, str] = {}
    for path in paths:
        with open(path, "rb") as fh:
            catalog = gettext.GNUTranslations(fh)._catalog  # the parsed .mo table
        for msgid, text in catalog.items():
            if isinstance(msgid, str) and msgid and text:
                out.setdefault(msgid, text)
    return out


@dataclass
class UIStrings(PooledDataset):
    """UI strings: Django's interface messages translated into en, es, fr, de and ja (no labels).

    Every msgid of Django's ``django.mo`` catalogues (core ``conf/locale``, plus the
    contrib apps' catalogues when ``include_contrib``) that has a translation in all
    of es, fr, de and ja; English is the msgid itself (a message context, if any, is
    dropped from the text; duplicates of one English text keep the first in id order).
    Placeholders such as ``%(name)s`` are kept. Unlabelled: meant as an out-of-domain
    parallel anchor pool. Ids are ``ui-<sha256(msgid)[:12]>``, sorted; a fixed random
    partition (seed 0) holds out ``test_fraction``. Core alone gives 315 strings; with
    the contrib apps 734 (they add admin, auth, gis … messages).

    Parameters
    ----------
    include_contrib : bool, default True
        Also read the contrib apps' catalogues (more than doubles the pool). Our choice.
    test_fraction : float, default 0.2
        Share held out for the test split (fixed random partition, seed 0). Our choice.
    train_size : int | None, default None
        Seeded random subsample of the training partition (``null`` = all).
    test_size : int | None, default None
        Seeded random subsample of the test partition (``null`` = all).
    seed : int, default 0
        Seed of the subsampling. Our choice.
    """

    name: ClassVar[str] = "ui-strings"
    include_contrib: bool = True

    def provenance(self) -> dict[str, str]:
        """Django's translated interface strings."""
        return {"what": "Django's user-interface strings and their translations", "package": "django",
                "licence": "BSD-3-Clause", "cite": "The Django project's translations (djangoproject.com)"}

    def load(self) -> DatasetData:
        """Read the catalogues, keep the msgids translated everywhere, partition and subsample."""
        django_dir = package_dir("django", INSTALL)
        files = {lang: catalogue_files(django_dir, lang, self.include_contrib) for lang in LANGUAGES}
        catalogues = {lang: read_catalogue(paths) for lang, paths in files.items()}
        common = set.intersection(*(set(c) for c in catalogues.values()))
        keyed = sorted((hashlib.sha256(m.encode()).hexdigest()[:12], m) for m in common)
        ids, views, seen = [], {"en": [], **{lang: [] for lang in LANGUAGES}}, set()
        for key, msgid in keyed:
            english = msgid.split(CONTEXT_SEPARATOR)[-1]
            if english in seen:
                continue
            seen.add(english)
            ids.append(f"ui-{key}")
            views["en"].append(english)
            for lang in LANGUAGES:
                views[lang].append(catalogues[lang][msgid])
        parts = self.partition(Part(ids, None, views))
        modalities = {view: "text" for view in views}
        read = [p for paths in files.values() for p in paths]
        return self.assemble(parts, [], modalities, files_digest(read), sources=sources_of(read))
