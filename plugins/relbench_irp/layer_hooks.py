"""Rescaling injected inside a transformers text encoder (the torch and transformers part
of :mod:`relbench_irp.layers`, kept apart so that registering the plugins imports
neither)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch


def rescalable_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules whose outputs are the hidden states, by layer: 0 is the embedding
    layer (``model.embeddings``), ``l ≥ 1`` the ``l``-th encoder layer
    (``model.encoder.layer[l − 1]``), as BERT-like models (MiniLM, RoBERTa) name them."""
    embeddings, encoder = getattr(model, "embeddings", None), getattr(model, "encoder", None)
    layers = getattr(encoder, "layer", None)
    if embeddings is None or layers is None:
        raise ValueError(f"{type(model).__name__} has no embeddings and encoder.layer to rescale (BERT-like "
                         f"models have both)")
    return [embeddings, *layers]


@contextlib.contextmanager
def rescaled(model: torch.nn.Module, layer: int, scale: float) -> Iterator[None]:
    """While open, the hidden states layer ``layer`` outputs (see
    :func:`rescalable_modules`) are multiplied by ``scale`` before the next layer reads
    them; the hook is removed on leaving, whatever happens inside."""
    modules = rescalable_modules(model)
    if not 0 <= layer < len(modules):
        raise ValueError(f"layer {layer} is not among the model's 0 … {len(modules) - 1} (0: the embedding layer)")

    def multiply(module: torch.nn.Module, inputs: tuple, output):
        if isinstance(output, tuple):  # (hidden states, attention weights …) from an encoder layer
            return (output[0] * scale, *output[1:])
        return output * scale

    handle = modules[layer].register_forward_hook(multiply)
    try:
        yield
    finally:
        handle.remove()


class TextModel:
    """A transformers model and its tokenizer read from a local folder
    (``local_files_only``), pooling the last hidden states as the ``transformers``
    encoder does: ``mean`` over the attention mask or ``cls`` (the first token), then
    optionally L2-normalised; float32 on the CPU, in the order of the texts."""

    def __init__(self, folder: Path, pooling: str, max_length: int, normalize: bool, device: torch.device):
        import transformers

        self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        self.model = transformers.AutoModel.from_pretrained(str(folder), local_files_only=True).eval().to(device)
        self.pooling, self.max_length, self.normalize, self.device = pooling, max_length, normalize, device

    @property
    def num_layers(self) -> int:
        """The number of encoder layers (layer indices run from 0, the embeddings, to it)."""
        return len(rescalable_modules(self.model)) - 1

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> torch.Tensor:
        """``len(texts) × hidden`` pooled embeddings."""
        chunks = []
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                batch = self.tokenizer(list(texts[start:start + batch_size]), padding=True, truncation=True,
                                       max_length=self.max_length, return_tensors="pt")
                hidden = self.model(**{k: v.to(self.device) for k, v in batch.items()}).last_hidden_state
                chunks.append(self._pool(hidden.float(), batch["attention_mask"].to(self.device)).cpu())
        return torch.cat(chunks) if chunks else torch.zeros(0, self.model.config.hidden_size)

    def _pool(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            weights = mask.unsqueeze(-1).float()
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp_min(1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1) if self.normalize else pooled


def relative(X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """Cosine of every row of ``X`` to every anchor row of ``A`` (``n × k``)."""
    return torch.nn.functional.normalize(X, dim=1) @ torch.nn.functional.normalize(A, dim=1).T


def agreement(new: torch.Tensor, old: torch.Tensor) -> tuple[float, float]:
    """The mean row-wise cosine between ``new`` and ``old``, and the mean relative error
    ``‖new − old‖ / ‖old‖``."""
    cosine = torch.nn.functional.cosine_similarity(new, old, dim=1)
    error = (new - old).norm(dim=1) / old.norm(dim=1).clamp_min(1e-12)
    return float(cosine.mean()), float(error.mean())
