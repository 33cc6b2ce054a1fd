"""A graph convolutional network (Kipf and Welling 2017) trained here per seed on a
node-classification data set; its last graph convolution is the node embedding."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from relbench.api import deferred_import, Encoder, EncoderContext
from relbench_encoders._common import params_hash

torch = deferred_import("torch")


def normalised_adjacency(edges: np.ndarray, n: int) -> torch.Tensor:
    """``D^-1/2 (A + I) D^-1/2`` as a sparse ``n × n`` tensor (``edges``: ``2 × E``, both
    directions listed)."""
    loops = np.arange(n, dtype=np.int64)
    rows = np.concatenate([edges[0], loops])
    cols = np.concatenate([edges[1], loops])
    degree = np.bincount(rows, minlength=n).astype(np.float64)
    scale = 1.0 / np.sqrt(degree)
    values = (scale[rows] * scale[cols]).astype(np.float32)
    index = torch.from_numpy(np.stack([rows, cols]))
    return torch.sparse_coo_tensor(index, torch.from_numpy(values), (n, n), check_invariants=True).coalesce()


def row_normalised(features: np.ndarray) -> torch.Tensor:
    """Each node's features divided by their sum (rows summing to 0 stay 0), as in the
    reference GCN."""
    total = features.sum(axis=1, keepdims=True)
    return torch.from_numpy(np.divide(features, total, out=np.zeros_like(features), where=total != 0))


def _node_indices(items: Sequence[Any]) -> tuple[Any, torch.Tensor]:
    """The one graph the items belong to and their node indices."""
    graphs = {id(item.graph): item.graph for item in items}
    if len(graphs) != 1:
        raise ValueError(f"the gcn encoder reads nodes of one graph; these items belong to {len(graphs)}")
    return next(iter(graphs.values())), torch.tensor([item.index for item in items], dtype=torch.long)


@dataclass
class GCNEncoder(Encoder):
    """A GCN trained here per seed on the task's training nodes (full-batch, transductive:
    it sees every node's features and edges, only the training nodes' labels); the
    embedding is its last graph convolution (after ReLU), the penultimate layer.

    Items are graph nodes (``GraphNode``: a shared graph with ``features`` and ``edges``,
    and a node ``index``), as the ``planetoid`` data set's view ``node`` holds them.
    Features are row-normalised and the adjacency symmetrically normalised with
    self-loops (Kipf and Welling 2017); training: Adam with weight decay, dropout,
    cross-entropy on the training nodes, seeded (deterministic per seed on the CPU).
    Different seeds give the differently initialised networks that are stitched.

    Parameters
    ----------
    seed : int, default 0
        Seed of initialisation and dropout.
    layers : int, default 2
        Graph convolutions (the reference GCN's two).
    hidden : int, default 64
        Width of the convolutions before the last (ours; the reference GCN: 16).
    width : int, default 64
        Width of the last convolution, the embedding size (ours).
    epochs : int, default 200
        Full-batch training steps (the reference GCN's 200).
    lr : float, default 0.01
        Adam learning rate (the reference GCN's).
    weight_decay : float, default 5e-4
        Adam weight decay (the reference GCN's).
    dropout : float, default 0.5
        Dropout before each convolution (the reference GCN's).
    """

    name: ClassVar[str] = "gcn"
    modalities: ClassVar[tuple[str, ...]] = ("graph",)

    seed: int = 0
    layers: int = 2
    hidden: int = 64
    width: int = 64
    epochs: int = 200
    lr: float = 0.01
    weight_decay: float = 5e-4
    dropout: float = 0.5

    def __post_init__(self) -> None:
        if min(self.layers, self.hidden, self.width, self.epochs) < 1 or self.lr <= 0 or self.weight_decay < 0:
            raise ValueError("layers, hidden, width, epochs and lr must be positive, weight_decay at least 0")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}")
        self._graph: Any = None
        self._embedding: torch.Tensor | None = None
        self._report: dict = {}

    def provenance(self) -> dict[str, str]:
        """Trained here: no package, no licence beyond the data's."""
        return {"what": f"{self.layers}-layer GCN trained here (seed {self.seed}) on the task's training nodes",
                "licence": "trained here (the data's licence applies)"}

    def fingerprint(self, ctx: EncoderContext) -> str:
        """Hash of the parameters, the view and the data set's fingerprint."""
        return params_hash(dict(params=self.params(), view=ctx.view, data=ctx.dataset.fingerprint))

    def setup(self, ctx: EncoderContext) -> None:
        """Train the GCN on ``ctx.train``'s nodes and labels; keep every node's embedding."""
        if ctx.train.labels is None:
            raise ValueError("the gcn encoder needs a labelled training split")
        graph, train_nodes = _node_indices(ctx.train.views[ctx.view])
        x = row_normalised(graph.features).to(ctx.device)
        adjacency = normalised_adjacency(graph.edges, graph.num_nodes).to(ctx.device)
        y = torch.as_tensor(np.asarray(ctx.train.labels), dtype=torch.long, device=ctx.device)
        from relbench_encoders.torch_modules import GCN

        torch.manual_seed(self.seed)
        model = GCN(x.shape[1], self.hidden, self.width, self.layers, len(ctx.dataset.class_names), self.dropout)
        model = model.to(ctx.device)
        optimiser = torch.optim.Adam(model.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        train_nodes = train_nodes.to(ctx.device)
        model.train()
        for _ in range(self.epochs):
            optimiser.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x, adjacency)[train_nodes], y)
            loss.backward()
            optimiser.step()
        model.eval()
        with torch.inference_mode():
            self._embedding = model.embed(x, adjacency).float().cpu()
            predicted = model.classifier(self._embedding.to(ctx.device)).argmax(dim=1).cpu().numpy()
        self._graph = graph
        self._report = {"epochs": self.epochs, "train_accuracy": _accuracy(predicted, ctx.train, ctx.view)}
        test = ctx.dataset.splits.get("test")
        if test is not None and test.labels is not None:
            self._report["test_accuracy"] = _accuracy(predicted, test, ctx.view)

    def report(self) -> dict:
        """The GCN's own accuracy after training, on the training nodes and on the data
        set's test nodes (reported, never used to choose)."""
        return dict(self._report)

    def encode(self, items: Sequence[Any], ctx: EncoderContext) -> torch.Tensor:
        """The trained GCN's embeddings of ``items``: ``len(items) × width`` float32 on CPU."""
        if len(items) == 0:
            return torch.zeros(0, self.width)
        if self._embedding is None:
            self.setup(ctx)
        graph, nodes = _node_indices(items)
        if graph is not self._graph:
            raise ValueError("the gcn encoder was trained on another graph than these items'")
        return self._embedding.index_select(0, nodes)


def _accuracy(predicted: np.ndarray, split, view: str) -> float:
    """Share of ``split``'s nodes whose predicted class is their label."""
    _, nodes = _node_indices(split.views[view])
    return float((predicted[nodes.numpy()] == np.asarray(split.labels)).mean())
