"""Planetoid citation graphs (Cora, CiteSeer, PubMed) read from their raw ``ind.<graph>.*`` files.

No installable package ships these files (the graph libraries download them at run time),
so they are read from a folder, fetched there from ``url`` when one is given and
``HF_HUB_OFFLINE`` is not set, and otherwise reported missing
(:class:`relbench.errors.MissingAsset`, exit 2) with what to do.
"""

from __future__ import annotations

import os
import pickle
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from relbench.api import DatasetData, MissingAsset, atomic_write_bytes
from relbench_datasets.assets import cache_dir, files_digest, sources_of
from relbench_datasets.base import Part, PooledDataset

#: the files of one Planetoid graph, ``ind.<graph>.<suffix>``
SUFFIXES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
#: where the Planetoid authors publish the files (what the graph libraries download)
PLANETOID_URL = "https://github.com/kimiyoung/planetoid/raw/master/data"
CLASS_NAMES = {
    "cora": ["Case_Based", "Genetic_Algorithms", "Neural_Networks", "Probabilistic_Methods",
             "Reinforcement_Learning", "Rule_Learning", "Theory"],
    "citeseer": ["Agents", "AI", "DB", "IR", "ML", "HCI"],
    "pubmed": ["Diabetes_Experimental", "Diabetes_Type_1", "Diabetes_Type_2"],
}
#: the only classes the pickled files may name (they are read with a restricted unpickler)
_ALLOWED = {
    ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"), ("collections", "defaultdict"), ("builtins", "list"),
    ("__builtin__", "list"), ("copy_reg", "_reconstructor"), ("copyreg", "_reconstructor"),
    ("__builtin__", "object"), ("builtins", "object"), ("_codecs", "encode"),
}
_SPARSE = {"csr_matrix", "csc_matrix", "coo_matrix", "lil_matrix"}


@dataclass(eq=False)
class Graph:
    """One whole graph: ``features`` (``n × d`` float32) and undirected ``edges``
    (``2 × E`` int64, both directions, no self-loops, no duplicates)."""

    name: str
    features: np.ndarray
    edges: np.ndarray

    @property
    def num_nodes(self) -> int:
        """Number of nodes ``n``."""
        return int(self.features.shape[0])


@dataclass(frozen=True, eq=False)
class GraphNode:
    """A view item: node ``index`` of ``graph`` (a graph encoder reads the whole graph)."""

    graph: Graph
    index: int

    def __repr__(self) -> str:
        return f"{self.graph.name} node {self.index}"


class _PlanetoidUnpickler(pickle.Unpickler):
    """Unpickles arrays, SciPy sparse matrices and the adjacency dict, nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        if module.startswith("scipy.sparse") and name in _SPARSE:
            import scipy.sparse

            return getattr(scipy.sparse, name)
        if (module, name) in _ALLOWED:
            return super().find_class({"__builtin__": "builtins", "copy_reg": "copyreg"}.get(module, module), name)
        raise pickle.UnpicklingError(f"a Planetoid file may not name {module}.{name}")


def read_pickle(path: Path) -> Any:
    """One pickled Planetoid file (written by Python 2: strings decode as latin-1)."""
    with open(path, "rb") as fh:
        return _PlanetoidUnpickler(fh, encoding="latin1").load()


def _dense(matrix: Any) -> np.ndarray:
    return np.asarray(matrix.todense() if hasattr(matrix, "todense") else matrix, dtype=np.float32)


def _pad_test_rows(rows: np.ndarray, test_sorted: np.ndarray) -> np.ndarray:
    """CiteSeer's test indices have gaps (isolated nodes): zero rows fill them, as the
    reference loaders do, so that test row ``i`` is node ``min + i``."""
    full = np.zeros((int(test_sorted[-1] - test_sorted[0]) + 1, rows.shape[1]), dtype=rows.dtype)
    full[test_sorted - test_sorted[0]] = rows
    return full


def _edges(adjacency: dict, n: int) -> np.ndarray:
    """The adjacency lists as undirected edges, both directions, without self-loops."""
    pairs = [(int(u), int(v)) for u, vs in adjacency.items() for v in vs if int(u) != int(v)]
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if len(pairs) and (pairs.min() < 0 or pairs.max() >= n):
        raise ValueError(f"the Planetoid graph names nodes outside 0 … {n - 1}")
    both = np.unique(np.concatenate([pairs, pairs[:, ::-1]]), axis=0)
    return np.ascontiguousarray(both.T)


def read_planetoid(folder: Path, graph: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features (``n × d`` float32), labels (``n``, int64, −1 for a node without a label)
    and edges (``2 × E``) of ``ind.<graph>.*`` in ``folder``, ordered as the Planetoid
    reference loader orders them (test rows moved to their node indices)."""
    part = {s: read_pickle(folder / f"ind.{graph}.{s}") for s in SUFFIXES if s != "test.index"}
    test_order = np.loadtxt(folder / f"ind.{graph}.test.index", dtype=np.int64, ndmin=1)
    test_sorted = np.sort(test_order)
    tx, ty = _dense(part["tx"]), _dense(part["ty"])
    if len(test_sorted) != test_sorted[-1] - test_sorted[0] + 1:
        tx, ty = _pad_test_rows(tx, test_sorted), _pad_test_rows(ty, test_sorted)
    features = np.vstack([_dense(part["allx"]), tx])
    onehot = np.vstack([_dense(part["ally"]), ty])
    features[test_order] = features[test_sorted]
    onehot[test_order] = onehot[test_sorted]
    labels = np.where(onehot.sum(axis=1) > 0, onehot.argmax(axis=1), -1).astype(np.int64)
    return features, labels, _edges(part["graph"], len(features))


def fetch(folder: Path, graph: str, url: str) -> None:
    """Download the files of ``graph`` missing from ``folder`` from ``url`` (each written
    atomically); an unreachable ``url`` raises :class:`MissingAsset`."""
    for suffix in SUFFIXES:
        target = folder / f"ind.{graph}.{suffix}"
        if target.is_file():
            continue
        source = f"{url.rstrip('/')}/ind.{graph}.{suffix}"
        try:
            with urllib.request.urlopen(source, timeout=60) as response:
                atomic_write_bytes(target, response.read())
        except (urllib.error.URLError, OSError) as exc:
            raise MissingAsset(f"could not download {source} ({exc}). {missing_advice(folder, graph)}") from exc


def missing_advice(folder: Path, graph: str) -> str:
    """What to do when the files are not in ``folder``."""
    return (f"Put the Planetoid files ind.{graph}.{{{','.join(SUFFIXES)}}} into {folder} (or set `root`), or set "
            f"`url` (e.g. {PLANETOID_URL}) and run where it is reachable with HF_HUB_OFFLINE unset. No installable "
            f"package ships them: the graph libraries (torch-geometric, dgl, spektral, stellargraph, cogdl) "
            f"download them at run time too.")


@dataclass
class Planetoid(PooledDataset):
    """A Planetoid citation graph (Yang et al. 2016): Cora, CiteSeer or PubMed.

    Every labelled node is a sample (CiteSeer's 15 unlabelled isolated nodes stay in the
    graph but in no split); a fixed stratified partition (seed 0) puts ``test_fraction``
    of every class into test, instead of the Planetoid split's 20 training nodes per
    class (too few for hundreds of anchors). Ids are ``<graph>-<node>``; the one view
    ``node`` (modality ``graph``) holds :class:`GraphNode` items that share the whole
    graph (features and edges of all nodes, test nodes included, as in the papers'
    transductive node classification), for a graph encoder such as ``gcn``.

    Files ``ind.<graph>.{x,tx,allx,y,ty,ally,graph,test.index}`` are read from ``root``
    with a restricted unpickler (arrays, sparse matrices and the adjacency dict only).
    Absent files are downloaded from ``url`` when it is set and ``HF_HUB_OFFLINE`` is not
    (like the hub loaders); otherwise the load raises ``MissingAsset`` (exit 2).

    Parameters
    ----------
    graph : "cora" | "citeseer" | "pubmed", default "cora"
        Which graph.
    root : str | None, default None
        Folder of the files; null = ``<cache>/datasets/planetoid/<graph>``.
    url : str | None, default None
        Where to download absent files from (e.g. the Planetoid repository's ``data``
        folder); null = never download.
    test_fraction : float, default 0.2
        Share of every class held out for test (fixed partition, seed 0). Our choice.
    train_size : int | None, default None
        Seeded stratified subsample of the training partition (``null`` = all).
    test_size : int | None, default None
        Seeded stratified subsample of the test partition (``null`` = all).
    seed : int, default 0
        Seed of the subsampling.
    """

    name: ClassVar[str] = "planetoid"
    graph: Literal["cora", "citeseer", "pubmed"] = "cora"
    root: str | None = None
    url: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.graph not in CLASS_NAMES:
            raise ValueError(f"graph must be one of {sorted(CLASS_NAMES)}, got {self.graph!r}")

    def provenance(self) -> dict[str, str]:
        """The Planetoid release of the graph (downloaded or placed by the user)."""
        return {"what": f"{self.graph} citation graph (Planetoid files)",
                "licence": "as released by the Planetoid authors (no licence stated)",
                "cite": "Yang, Cohen and Salakhutdinov (2016): Revisiting semi-supervised learning with graph "
                        "embeddings, ICML; Sen et al. (2008): Collective classification in network data, AI Magazine"}

    def folder(self) -> Path:
        """Where the files are read from."""
        return Path(self.root) if self.root else cache_dir() / "planetoid" / self.graph

    def files(self) -> list[Path]:
        """The graph's files, fetched first where ``url`` allows (``MissingAsset`` if absent)."""
        folder = self.folder()
        paths = [folder / f"ind.{self.graph}.{s}" for s in SUFFIXES]
        if not all(p.is_file() for p in paths) and self.url and not os.environ.get("HF_HUB_OFFLINE"):
            fetch(folder, self.graph, self.url)
        missing = [p for p in paths if not p.is_file()]
        if missing:
            raise MissingAsset(f"{missing[0]} is missing. {missing_advice(folder, self.graph)}")
        return paths

    def load(self) -> DatasetData:
        """Read the graph, partition its labelled nodes and subsample."""
        paths = self.files()
        features, labels, edges = read_planetoid(self.folder(), self.graph)
        whole = Graph(self.graph, features, edges)
        nodes = np.flatnonzero(labels >= 0)
        if labels.max() >= len(CLASS_NAMES[self.graph]):
            raise ValueError(f"{self.graph}: {labels.max() + 1} classes in the files, "
                             f"{len(CLASS_NAMES[self.graph])} expected")
        items = [GraphNode(whole, int(i)) for i in nodes]
        pool = Part([f"{self.graph}-{i}" for i in nodes], labels[nodes], {"node": items})
        parts = self.partition(pool)
        return self.assemble(parts, CLASS_NAMES[self.graph], {"node": "graph"}, files_digest(paths),
                             sources=sources_of(paths))
