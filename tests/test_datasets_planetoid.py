"""The planetoid data set: Planetoid's file format read back exactly (test rows moved to
their nodes, CiteSeer-style gaps, undirected edges), labelled nodes partitioned, files
fetched from a URL only where allowed, and absent files a missing asset (exit 2)."""

from __future__ import annotations

import pickle
from collections import OrderedDict

import numpy as np
import pytest
from planetoid_files import tiny_graph, write_planetoid

from relbench.errors import MissingAsset
from relbench.testing import check_dataset
from relbench_datasets.planetoid import SUFFIXES, GraphNode, Planetoid, read_pickle, read_planetoid


def test_the_files_read_back_as_the_graph_they_encode(tmp_path):
    truth = tiny_graph()
    write_planetoid(tmp_path, "pubmed", truth)
    features, labels, edges = read_planetoid(tmp_path, "pubmed")
    np.testing.assert_array_equal(features, truth.features)  # shuffled test rows back at their nodes
    np.testing.assert_array_equal(labels, truth.labels)  # the gap node: no label
    pairs = set(map(tuple, edges.T.tolist()))
    assert pairs == truth.edges | {(v, u) for u, v in truth.edges}  # both directions, no loop, no repeat
    assert edges.shape[1] == 2 * len(truth.edges)


def test_labelled_nodes_are_partitioned_and_share_the_whole_graph(tmp_path):
    truth = tiny_graph()
    write_planetoid(tmp_path, "pubmed", truth)
    data = Planetoid(graph="pubmed", root=str(tmp_path), test_fraction=0.25).load()
    train, test = data.splits["train"], data.splits["test"]
    assert sorted(train.ids + test.ids) == sorted(f"pubmed-{i}" for i in np.flatnonzero(truth.labels >= 0))
    assert len(test.ids) == 15 and not set(train.ids) & set(test.ids)
    nodes = train.views["node"] + test.views["node"]
    assert all(isinstance(node, GraphNode) and node.graph is nodes[0].graph for node in nodes)
    assert nodes[0].graph.num_nodes == 60  # the gap node stays in the graph
    for sid, node, label in zip(train.ids, train.views["node"], train.labels):
        assert sid == f"pubmed-{node.index}" and label == truth.labels[node.index]
    assert data.view_modalities == {"node": "graph"} and len(data.class_names) == 3
    check_dataset(Planetoid(graph="pubmed", root=str(tmp_path), train_size=20, test_size=9))


def test_the_fingerprint_follows_the_files(tmp_path):
    prints = []
    for seed in (0, 1, 0):  # the same folder rewritten
        write_planetoid(tmp_path, "pubmed", tiny_graph(seed=seed))
        prints.append(Planetoid(graph="pubmed", root=str(tmp_path)).load().fingerprint)
    assert prints[0] == prints[2] != prints[1]


def test_absent_files_are_a_missing_asset_that_says_what_was_searched(tmp_path):
    with pytest.raises(MissingAsset) as caught:
        Planetoid(graph="cora", root=str(tmp_path / "none")).load()
    message = str(caught.value)
    assert "ind.cora.x is missing" in message and "No installable package ships them" in message
    assert MissingAsset.exit_code == 2


def test_a_run_on_absent_files_exits_2_with_the_message(cli_main, write_yaml, capsys, tmp_path):
    path = write_yaml(f"""\
suite: {{seeds: [0], num_anchors: 8, output: results, leaderboards: boards}}
tasks:
  - name: cora
    dataset: {{name: planetoid, params: {{graph: cora, root: {tmp_path / 'none'}}}}}
    encoders: [{{name: gcn, label: g0}}, {{name: gcn, label: g1, params: {{seed: 1}}}}]
    grid: {{selectors: [random], similarities: [cosine], stitchers: [relative]}}
""")
    assert cli_main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "ind.cora.x is missing" in err and "Traceback" not in err


def test_absent_files_are_fetched_from_the_url_unless_the_hub_is_offline(tmp_path, monkeypatch):
    write_planetoid(tmp_path / "published", "pubmed", tiny_graph())
    dataset = Planetoid(graph="pubmed", root=str(tmp_path / "here"), url=(tmp_path / "published").as_uri())
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(MissingAsset):
        dataset.load()
    assert not (tmp_path / "here").exists()
    monkeypatch.delenv("HF_HUB_OFFLINE")
    data = dataset.load()
    assert sorted(p.name for p in (tmp_path / "here").iterdir()) == sorted(f"ind.pubmed.{s}" for s in SUFFIXES)
    for name in (f"ind.pubmed.{s}" for s in SUFFIXES):
        assert (tmp_path / "here" / name).read_bytes() == (tmp_path / "published" / name).read_bytes()
    assert len(data.splits["train"].ids) + len(data.splits["test"].ids) == 59


def test_an_unreachable_url_is_a_missing_asset(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    dataset = Planetoid(graph="cora", root=str(tmp_path / "here"), url=(tmp_path / "nowhere").as_uri())
    with pytest.raises(MissingAsset, match="could not download"):
        dataset.load()


def test_a_file_naming_any_other_class_is_refused(tmp_path):
    path = tmp_path / "ind.cora.graph"
    path.write_bytes(pickle.dumps(OrderedDict(a=1), protocol=2))
    with pytest.raises(pickle.UnpicklingError, match="collections.OrderedDict"):
        read_pickle(path)


def test_a_graph_outside_the_three_is_refused():
    with pytest.raises(ValueError, match="graph must be one of"):
        Planetoid(graph="reddit")
