"""Any data set that ``datasets.load_dataset`` can read: hub ids or local files."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from relbench.api import ConfigError, DatasetData, MissingAsset
from relbench_datasets.assets import package_version
from relbench_datasets.base import Part, PooledDataset

INSTALL = 'pip install "datasets>=2.18"'


class ColumnView(Sequence):
    """One column of a ``datasets.Dataset``, read row by row (only the rows asked for are
    decoded, so subsampling a large image set decodes just the kept images)."""

    def __init__(self, ds: Any, column: str):
        self._ds = ds.select_columns([column])
        self._column = column

    def __len__(self) -> int:
        return len(self._ds)

    def __getitem__(self, i: int) -> Any:
        return self._ds[int(i)][self._column]


def _encode_labels(splits: dict[str, Any], column: str) -> tuple[dict[str, np.ndarray], list[str]]:
    """Integer labels of every split and the class names: a ``ClassLabel`` feature's names,
    or the sorted distinct values of the column (shared by all splits)."""
    feature = next(iter(splits.values())).features[column]
    if hasattr(feature, "names") and hasattr(feature, "str2int"):
        return {k: np.asarray(ds[column], dtype=np.int64) for k, ds in splits.items()}, list(feature.names)
    values = {k: list(ds[column]) for k, ds in splits.items()}
    distinct = sorted({v for vs in values.values() for v in vs})
    index = {v: i for i, v in enumerate(distinct)}
    return {k: np.array([index[v] for v in vs], dtype=np.int64) for k, vs in values.items()}, [str(v) for v in distinct]


@dataclass
class HFDataset(PooledDataset):
    """A ``datasets.load_dataset`` data set (hub id, or a local parquet/csv/json/imagefolder).

    ``load_dataset(path, config, data_files=..., data_dir=...)`` is called as is, so a
    hub id works where a hub is reachable and local files work anywhere. The image
    column becomes the view ``image`` (PIL images), the text column the view
    ``text_view``, and ``extra_text_columns`` add further text views (e.g. translations).
    Labels come from ``label_column`` (a ``ClassLabel``'s names, or the sorted distinct
    values). Ids are ``id_column``'s values, or ``<id_prefix>-<split>-<row>``. When
    ``split_test`` is null, a fixed stratified partition (seed 0) of ``split_train``
    holds out ``test_fraction``. The fingerprint combines the splits' ``datasets``
    fingerprints (derived from the data files) with the parameters.

    Parameters
    ----------
    path : str, default ""
        First argument of ``load_dataset``: a hub id or a builder such as "parquet",
        "csv", "json", "imagefolder" (required).
    config : str | None, default None
        The configuration name (``load_dataset``'s ``name``).
    data_files : dict | str | None, default None
        ``load_dataset``'s ``data_files`` (e.g. ``{train: a.parquet, test: b.parquet}``).
    data_dir : str | None, default None
        ``load_dataset``'s ``data_dir`` (e.g. the root of an imagefolder).
    split_train : str, default "train"
        Split used as training data.
    split_test : str | None, default "test"
        Split used as test data; null = partition ``split_train``.
    image_column : str | None, default None
        Column of images → view ``image``.
    text_column : str | None, default None
        Column of text → view ``text_view``.
    text_view : str, default "en"
        Name of the text view (its language, for multilingual encoders).
    extra_text_columns : dict, default {}
        Further text views: view name → column (e.g. ``{es: text_es}``).
    label_column : str, default "label"
        Column of class labels.
    id_column : str | None, default None
        Column of stable sample ids (must be unique); null = row numbers.
    id_prefix : str | None, default None
        Prefix of row-number ids; null = the last component of ``path``.
    test_fraction : float, default 0.2
        Share of every class held out when ``split_test`` is null. Our choice.
    train_size : int | None, default None
        Seeded stratified subsample of the training split (``null`` = all).
    test_size : int | None, default None
        Seeded stratified subsample of the test split (``null`` = all).
    seed : int, default 0
        Seed of the subsampling.
    """

    name: ClassVar[str] = "hf"
    path: str = ""
    config: str | None = None
    data_files: dict | str | None = None
    data_dir: str | None = None
    split_train: str = "train"
    split_test: str | None = "test"
    image_column: str | None = None
    text_column: str | None = None
    text_view: str = "en"
    extra_text_columns: dict[str, str] = field(default_factory=dict)
    label_column: str = "label"
    id_column: str | None = None
    id_prefix: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.path:
            raise ValueError("path is required: a hub id or a builder such as 'parquet' or 'imagefolder'")
        if not (self.image_column or self.text_column or self.extra_text_columns):
            raise ValueError("set at least one of image_column, text_column, extra_text_columns")
        views = ["image"] * bool(self.image_column) + [self.text_view] * bool(self.text_column)
        views += list(self.extra_text_columns)
        if len(set(views)) != len(views):
            raise ValueError(f"two columns map to the same view name: {views}")

    def _columns(self) -> dict[str, tuple[str, str]]:
        """view → (column, modality)."""
        out = {}
        if self.image_column:
            out["image"] = (self.image_column, "image")
        if self.text_column:
            out[self.text_view] = (self.text_column, "text")
        out.update({view: (column, "text") for view, column in self.extra_text_columns.items()})
        return out

    def _spec(self) -> str:
        """The ``load_dataset`` arguments, as written in the tasks file."""
        args = {"path": self.path, "config": self.config, "data_files": self.data_files, "data_dir": self.data_dir}
        return "(" + ", ".join(f"{k}: {v!r}" for k, v in args.items() if v is not None) + ")"

    def _load_splits(self) -> dict[str, Any]:
        try:
            import datasets
        except ImportError:
            raise MissingAsset(f"The Python package 'datasets' is not installed. Install it with: {INSTALL}") from None
        try:
            loaded = datasets.load_dataset(self.path, self.config, data_files=self.data_files, data_dir=self.data_dir)
        except OSError as exc:  # missing files (FileNotFoundError) or an unreachable hub (ConnectionError)
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise MissingAsset(
                f"hf data set {self._spec()} could not be loaded: {reason}. Fix: point data_files or data_dir "
                f"at existing local files, or, for a hub id, run with network access and HF_HUB_OFFLINE unset."
            ) from exc
        wanted = {"train": self.split_train, **({"test": self.split_test} if self.split_test else {})}
        missing = [s for s in wanted.values() if s not in loaded]
        if missing:
            raise ConfigError(f"hf data set {self.path!r} has no split {missing[0]!r}; it has {sorted(loaded)}")
        splits = {ours: loaded[theirs] for ours, theirs in wanted.items()}
        needed = [c for c, _ in self._columns().values()] + [self.label_column] + [self.id_column] * bool(self.id_column)
        for ours, ds in splits.items():
            absent = [c for c in needed if c not in ds.column_names]
            if absent:
                raise ConfigError(
                    f"hf data set {self.path!r}, split {wanted[ours]!r}: no column {absent[0]!r}; "
                    f"columns are {ds.column_names}"
                )
        return splits

    def load(self) -> DatasetData:
        """Call ``load_dataset``, map the columns to views, (partition and) subsample."""
        splits = self._load_splits()
        labels, class_names = _encode_labels(splits, self.label_column)
        prefix = self.id_prefix or Path(self.path.rstrip("/")).name
        columns = self._columns()
        parts = {}
        for ours, ds in splits.items():
            ids = [str(v) for v in ds[self.id_column]] if self.id_column else [
                f"{prefix}-{ours}-{i:06d}" for i in range(len(ds))
            ]
            views = {view: ColumnView(ds, column) for view, (column, _) in columns.items()}
            parts[ours] = Part(ids, labels[ours], views)
        if "test" not in parts:
            parts = self.partition(parts["train"])
        all_ids = [i for part in parts.values() for i in part.ids]
        if len(set(all_ids)) != len(all_ids):
            raise ConfigError(f"hf data set {self.path!r}: id_column {self.id_column!r} has duplicate ids")
        source = "|".join([ds._fingerprint for ds in splits.values()] + [package_version("datasets")])
        return self.assemble(parts, class_names, {v: m for v, (_, m) in columns.items()}, source)
