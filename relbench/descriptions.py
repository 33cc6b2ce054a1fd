"""Descriptions of loaded data sets, so that a run plans without loading them.

Planning a task needs of its data set the fingerprint, the classes, the views and, per
split, the sample ids and labels (for the seeds' draws) — never the images or texts.
When a data set declares what it was made from (:class:`~relbench.interfaces.DataSources`),
the runner keeps those facts in ``<cache>/descriptions/<key>.json`` with a *stamp*: the
size and modification time of every source file, the version of every source
distribution, the relbench version, and the size and modification time of every Python
file in the folder of the data set plugin's module (its loader code). A later run whose
stamp agrees builds the :class:`~relbench.interfaces.DatasetData` from the description;
each view is an :class:`UnloadedView` of the right length that loads the data set the
first time an item is read (an encoder computing embeddings, a kind drawing a figure).
The loaded data must have the described fingerprint, else the run stops with an error
rather than mix identities. :class:`DataSets` holds a run's data sets, each loaded (or
described) once.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import inspect
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from relbench import __version__
from relbench.cache import atomic_write_bytes
from relbench.errors import ConfigError
from relbench.interfaces import DatasetData, DataSources, Split

if TYPE_CHECKING:
    from relbench.task_model import PluginSpec

#: bump when the description's layout changes
DESCRIPTION_VERSION = 1


class UnloadedView(Sequence):
    """The items of one view of one split of a described data set: its length is known,
    reading an item loads the data set (once per run) and reads it there."""

    def __init__(self, length: int, split: str, view: str, load: Callable[[], DatasetData]):
        self._length, self._split, self._view, self._load = length, split, view, load

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: Any) -> Any:
        return self.loaded()[index]

    def loaded(self) -> Sequence[Any]:
        """The view's items in the loaded data set."""
        return self.dataset().splits[self._split].views[self._view]

    def dataset(self) -> DatasetData:
        """The loaded data set this view describes."""
        return self._load()


def loaded(data: DatasetData) -> DatasetData:
    """``data`` itself when it is loaded, else the data set its description stands for."""
    for split in data.splits.values():
        for items in split.views.values():
            if isinstance(items, UnloadedView):
                return items.dataset()
    return data


def stamp(sources: DataSources, plugin: type) -> dict[str, Any] | None:
    """The stamp of a data set's sources and loader code; None when a source is missing."""
    try:
        files = {path: _file_stamp(Path(path)) for path in sources.files}
        packages = {dist: importlib.metadata.version(dist) for dist in sources.packages}
        code_dir = Path(inspect.getfile(plugin)).parent
    except (OSError, TypeError, importlib.metadata.PackageNotFoundError):
        return None
    code = {str(p): _file_stamp(p) for p in sorted(code_dir.glob("*.py"))}
    return {"version": DESCRIPTION_VERSION, "relbench": __version__, "files": files, "packages": packages,
            "code": code}


def _file_stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


class Descriptions:
    """The descriptions kept under ``root`` (one JSON file per data set choice)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _file(self, key: str) -> Path:
        return self.root / f"{hashlib.sha256(key.encode()).hexdigest()[:40]}.json"

    def get(self, key: str, plugin: type, load: Callable[[], DatasetData]) -> DatasetData | None:
        """The data set choice ``key`` built from its description, with views that call
        ``load`` when read; None when there is no description or its stamp disagrees."""
        try:
            kept = json.loads(self._file(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(kept, dict) or kept.get("key") != key:
            return None
        sources = DataSources(tuple(kept["stamp"]["files"]), tuple(kept["stamp"]["packages"]))
        if stamp(sources, plugin) != kept["stamp"]:
            return None
        splits = {}
        for name, split in kept["splits"].items():
            labels = None if split["labels"] is None else np.asarray(split["labels"], dtype=np.int64)
            views = {view: UnloadedView(len(split["ids"]), name, view, load) for view in kept["view_modalities"]}
            splits[name] = Split(ids=list(split["ids"]), labels=labels, views=views)
        return DatasetData(name=kept["name"], splits=splits, class_names=list(kept["class_names"]),
                           view_modalities=dict(kept["view_modalities"]), fingerprint=kept["fingerprint"],
                           ordinal=bool(kept["ordinal"]), sources=sources)

    def put(self, key: str, plugin: type, data: DatasetData) -> None:
        """Keep the description of a loaded data set that declares its sources."""
        if data.sources is None:
            return
        kept_stamp = stamp(data.sources, plugin)
        if kept_stamp is None:
            return
        description = {
            "key": key, "stamp": kept_stamp, "name": data.name, "fingerprint": data.fingerprint,
            "class_names": data.class_names, "view_modalities": data.view_modalities, "ordinal": data.ordinal,
            "splits": {name: {"ids": list(split.ids),
                              "labels": None if split.labels is None else np.asarray(split.labels).tolist()}
                       for name, split in data.splits.items()},
        }
        try:
            atomic_write_bytes(self._file(key), json.dumps(description).encode())
        except OSError:  # a description is an optimisation: without it the data set is loaded
            pass


def check_same(described: DatasetData, data: DatasetData) -> DatasetData:
    """``data`` (just loaded) when it is what ``described`` said; else a user error."""
    if data.fingerprint != described.fingerprint:
        raise ConfigError(
            f"data set {data.name!r} changed while this run used it (its fingerprint is now {data.fingerprint[:12]}, "
            f"the run planned with {described.fingerprint[:12]}): its files changed without their size or "
            f"modification time changing. Run again: the run plans anew from the data as it is now.")
    return data


class DataSets:
    """The data sets of one run, each loaded once whatever the number of tasks that read it."""

    def __init__(self, descriptions: Descriptions):
        self.descriptions = descriptions
        self._loaded: dict[str, DatasetData] = {}

    def get(self, spec: PluginSpec) -> DatasetData:
        """Data set ``spec``, loaded once per run. A data set that declares its sources is
        described instead while they are unchanged: planning reads no image or text, and
        the data are loaded the first time a view is read."""
        key = json.dumps(spec.identity(), sort_keys=True, default=str)
        if key not in self._loaded:
            described = self.descriptions.get(key, spec.cls, functools.cache(lambda: self._load(spec, key, described)))
            self._loaded[key] = described or self._load(spec, key, None)
        return self._loaded[key]

    def _load(self, spec: PluginSpec, key: str, described: DatasetData | None) -> DatasetData:
        data = spec.build().load()
        self.descriptions.put(key, spec.cls, data)
        return data if described is None else check_same(described, data)
