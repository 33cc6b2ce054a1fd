"""The ``hf`` data set plugin on local files (parquet and imagefolder), offline."""

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from relbench.errors import ConfigError, MissingAsset
from relbench_datasets.hf import HFDataset


@pytest.fixture()
def parquet_files(tmp_path):
    """A tiny parallel en/es corpus with string labels, as train and test parquet files."""
    rows = [(f"s{i}", f"sentence {i}", f"frase {i}", ["neg", "pos", "mid"][i % 3]) for i in range(30)]
    frame = pd.DataFrame(rows, columns=["sid", "text", "text_es", "label"])
    frame[:24].to_parquet(tmp_path / "train.parquet")
    frame[24:].to_parquet(tmp_path / "test.parquet")
    return {"train": str(tmp_path / "train.parquet"), "test": str(tmp_path / "test.parquet")}


def test_parquet_text_views_ids_labels(parquet_files):
    spec = dict(path="parquet", data_files=parquet_files, text_column="text",
                extra_text_columns={"es": "text_es"}, id_column="sid")
    data = HFDataset(**spec).load()
    assert data.class_names == ["mid", "neg", "pos"]  # sorted distinct values
    assert data.view_modalities == {"en": "text", "es": "text"}
    train, test = data.splits["train"], data.splits["test"]
    assert (len(train), len(test)) == (24, 6)
    assert train.ids[5] == "s5" and train.views["en"][5] == "sentence 5" and train.views["es"][5] == "frase 5"
    assert train.labels[5] == 0 and test.labels.tolist() == [1, 2, 0, 1, 2, 0]
    assert HFDataset(**spec).load().fingerprint == data.fingerprint
    small = HFDataset(**spec, train_size=9).load()
    assert len(small.splits["train"]) == 9 and np.bincount(small.splits["train"].labels).tolist() == [3, 3, 3]
    assert small.fingerprint != data.fingerprint
    assert all(small.splits["train"].views["es"][k] == "frase " + sid[1:] for k, sid in enumerate(small.splits["train"].ids))


def test_parquet_partition_when_no_test_split(parquet_files):
    data = HFDataset(path="parquet", data_files={"train": parquet_files["train"]}, text_column="text",
                     split_test=None, id_prefix="toy", test_fraction=0.25).load()
    train, test = data.splits["train"], data.splits["test"]
    assert (len(train), len(test)) == (18, 6) and set(train.ids).isdisjoint(test.ids)
    assert train.ids[0].startswith("toy-train-")


def test_parquet_bad_columns_and_params(parquet_files):
    with pytest.raises(ConfigError, match="no column 'body'"):
        HFDataset(path="parquet", data_files=parquet_files, text_column="body").load()
    with pytest.raises(ConfigError, match="no split 'validation'"):
        HFDataset(path="parquet", data_files=parquet_files, text_column="text", split_test="validation").load()
    with pytest.raises(ValueError, match="at least one"):
        HFDataset(path="parquet")
    with pytest.raises(ValueError, match="path is required"):
        HFDataset(text_column="text")


def test_imagefolder_images_and_class_label(tmp_path):
    colours = {"red": (255, 0, 0), "blue": (0, 0, 255)}
    for split, n in (("train", 4), ("test", 2)):
        for name, rgb in colours.items():
            folder = tmp_path / split / name
            folder.mkdir(parents=True)
            for i in range(n):
                Image.new("RGB", (8, 8), rgb).save(folder / f"{i}.png")
    data = HFDataset(path="imagefolder", data_dir=str(tmp_path), image_column="image").load()
    assert data.class_names == ["blue", "red"] and data.view_modalities == {"image": "image"}
    train = data.splits["train"]
    assert len(train) == 8 and len(data.splits["test"]) == 4
    for image, label in zip(train.views["image"], train.labels):
        assert image.size == (8, 8)
        assert np.asarray(image.convert("RGB"))[0, 0].tolist() == list(colours[data.class_names[label]])
    assert train.ids[0] == "imagefolder-train-000000"


def test_missing_local_file_is_a_user_error(tmp_path):
    absent = str(tmp_path / "nope.parquet")
    with pytest.raises(MissingAsset) as info:
        HFDataset(path="parquet", data_files={"train": absent}, text_column="text", split_test=None).load()
    message = str(info.value)
    assert "path: 'parquet'" in message and "nope.parquet" in message and "\n" not in message
    assert "local files" in message


def test_unreachable_hub_is_a_user_error(monkeypatch):
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # both libraries read it once, at import
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    with pytest.raises(MissingAsset, match=r"path: 'relbench-test/no-such-dataset'.*HF_HUB_OFFLINE unset"):
        HFDataset(path="relbench-test/no-such-dataset", text_column="text").load()
