"""The transformers encoder's work around the model: the outputs it reads, the padded
batch a graph is traced on, the pooling of the outputs, and the exported graph's spec."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from relbench.api import deferred_import
from relbench_encoders import ort_backend
from relbench_encoders._common import require

torch = deferred_import("torch")


def pick_outputs(out: Any, outputs: Sequence[str], model: str) -> tuple[torch.Tensor, ...]:
    """The named fields of a transformers model output (ValueError when one is absent)."""
    picked = tuple(getattr(out, name, None) for name in outputs)
    if any(p is None for p in picked):
        raise ValueError(f"model {model!r} has no pooler output; use pooling: mean or cls")
    return picked


def with_padding(batch: dict[str, torch.Tensor], pad_id: int) -> dict[str, torch.Tensor]:
    """``batch`` with one padding column appended when it has none: the graph is traced,
    and checked, on a batch whose attention mask masks something (texts of one length
    would otherwise let a graph that ignores the mask pass the agreement check)."""
    if not bool(batch["attention_mask"].all()):
        return batch
    return {name: torch.cat([x, torch.full_like(x[:, :1], pad_id if name == "input_ids" else 0)], dim=1)
            for name, x in batch.items()}


def pool(outputs: Sequence[torch.Tensor], attention_mask: torch.Tensor, pooling: str,
         normalize: bool) -> torch.Tensor:
    """The pooled (``pooler``, ``cls`` or ``mean`` over the attention mask; L2-normalised
    when ``normalize``) float32 embeddings from the model outputs."""
    if pooling == "pooler":
        pooled = outputs[0].float()
    elif pooling == "cls":
        pooled = outputs[0][:, 0].float()
    else:
        mask = attention_mask.to(outputs[0].device).unsqueeze(-1).float()
        pooled = (outputs[0].float() * mask).sum(1) / mask.sum(1).clamp_min(1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1) if normalize else pooled


def graph_spec(model: str, names: tuple[str, ...], outputs: tuple[str, ...], weights: str) -> ort_backend.GraphSpec:
    """What the exported graph of ``model`` is (inputs ``names``, ``outputs``, dynamic
    batch and sequence axes), identified by its ``weights`` fingerprint."""
    transformers = require("transformers", "the transformers encoder")
    axes = {n: {0: "batch", 1: "sequence"} for n in (*names, "last_hidden_state")} | {"pooler_output": {0: "batch"}}
    return ort_backend.GraphSpec(
        what=f"transformers {model}", model=model,
        identity={"model": model, "weights": weights, "transformers": transformers.__version__},
        input_names=names, output_names=outputs,
        dynamic_axes={n: axes[n] for n in (*names, *outputs)},
    )
