"""The gcn encoder: the normalised adjacency of Kipf and Welling, a GCN trained per seed
on a tiny community graph that learns its classes, deterministic per seed, and a stitching
task over two seeds that runs end to end on Planetoid-format files."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from planetoid_files import tiny_graph, write_planetoid

from relbench.config import load_suite
from relbench.export import flatten
from relbench.interfaces import EncoderContext
from relbench.runner import Runner
from relbench_datasets.planetoid import Graph, GraphNode, Planetoid
from relbench_encoders.graph import GCNEncoder, normalised_adjacency, row_normalised


def test_the_adjacency_is_symmetrically_normalised_with_self_loops():
    edges = np.array([[0, 1, 1, 2, 1, 3], [1, 0, 2, 1, 3, 1]])
    A = np.zeros((4, 4))
    A[edges[0], edges[1]] = 1
    A += np.eye(4)
    d = A.sum(axis=1)
    expected = A / np.sqrt(d[:, None] * d[None, :])
    np.testing.assert_allclose(normalised_adjacency(edges, 4).to_dense().numpy(), expected, rtol=1e-6)


def test_features_are_row_normalised_and_empty_rows_stay_zero():
    x = row_normalised(np.array([[1.0, 3.0], [0.0, 0.0]], dtype=np.float32)).numpy()
    np.testing.assert_allclose(x, [[0.25, 0.75], [0.0, 0.0]])


@pytest.fixture
def data(tmp_path):
    write_planetoid(tmp_path, "pubmed", tiny_graph())
    return Planetoid(graph="pubmed", root=str(tmp_path), test_fraction=0.3).load()


def context(data, tmp_path) -> EncoderContext:
    return EncoderContext(torch.device("cpu"), "node", data, data.splits["train"], tmp_path)


def test_a_gcn_learns_the_communities_and_embeds_every_node(data, tmp_path):
    ctx = context(data, tmp_path)
    encoder = GCNEncoder(width=8, hidden=16)
    X = encoder.encode(data.splits["test"].views["node"], ctx)
    assert X.shape == (len(data.splits["test"].ids), 8) and X.dtype == torch.float32 and (X >= 0).all()
    report = encoder.report()
    assert report["train_accuracy"] > 0.9 and report["test_accuracy"] > 0.8  # chance: 1/3
    one = encoder.encode(data.splits["test"].views["node"][:1], ctx)
    torch.testing.assert_close(one, X[:1])  # a node's embedding does not depend on the batch


def test_a_seed_fixes_the_network_and_another_seed_changes_it(data, tmp_path):
    items = data.splits["train"].views["node"]
    runs = [GCNEncoder(seed=s, width=8, epochs=20).encode(items, context(data, tmp_path)) for s in (0, 0, 1)]
    assert torch.equal(runs[0], runs[1]) and not torch.allclose(runs[0], runs[2])


def test_nodes_of_another_graph_are_refused(data, tmp_path):
    encoder = GCNEncoder(epochs=2)
    encoder.setup(context(data, tmp_path))
    other = Graph("other", np.ones((3, 12), np.float32), np.zeros((2, 0), np.int64))
    with pytest.raises(ValueError, match="another graph"):
        encoder.encode([GraphNode(other, 0)], context(data, tmp_path))


@pytest.mark.parametrize("bad", [{"layers": 0}, {"dropout": 1.0}, {"lr": 0}])
def test_bad_parameters_are_refused(bad):
    with pytest.raises(ValueError):
        GCNEncoder(**bad)


def test_a_stitching_task_across_two_gcn_seeds_runs(registry, write_yaml, tmp_path):
    write_planetoid(tmp_path / "files", "pubmed", tiny_graph(per_class=30, gap=None))
    path = write_yaml(f"""\
suite: {{seeds: [0], num_anchors: 12, output: results, leaderboards: boards}}
tasks:
  - name: graph
    dataset: {{name: planetoid, params: {{graph: pubmed, root: {tmp_path / 'files'}}}}}
    encoders:
      - {{name: gcn, label: g0, params: {{width: 8, epochs: 50}}}}
      - {{name: gcn, label: g1, params: {{width: 8, epochs: 50, seed: 1}}}}
    grid: {{selectors: [random], similarities: [cosine], stitchers: [relative, non-stitched]}}
    metrics: [accuracy]
""")
    runner = Runner(load_suite(path, registry), registry, quiet=True)
    assert not runner.run().failures
    flat = flatten(runner.store.load("graph"))
    ok = flat[flat["status"] == "ok"]
    assert {(s, t) for s, t in zip(ok["source"], ok["target"])} >= {("g0", "g1"), ("g1", "g0")}
    assert ok["value"].between(0, 1).all()
