"""Heads trained on a target's *absolute* space (what IRP and direct translations feed).

Two kinds:

* ``reference`` — the harness's reference head (``LayerNorm → Linear → act →
  InstanceNorm across the batch → Linear``, per-modality settings shared with the
  relative decoder). The IRP paper does not describe the heads of its stitching table
  (§5); its reference code's text head ends with a ReLU on the logits, which the
  harness's head lacks: ``text_relu`` appends it to heads of every modality but image
  (those that take the text settings).
* ``mlp`` — the heads of IRP §4.2 (scale invariance): a multi-layer perceptron with two
  hidden layers and no normalisation layer, with a cosine, ReLU or tanh activation.
"""

from __future__ import annotations

from typing import Literal

from relbench.api import deferred_import, fit_reference_head, head_settings, train_classifier

torch = deferred_import("torch")

HeadKind = Literal["reference", "mlp"]
ACTIVATIONS = ("cos", "relu", "tanh")


def mlp_head(in_dim: int, hidden: int, num_classes: int, activation: str = "relu") -> torch.nn.Sequential:
    """Two hidden layers, no normalisation (IRP §4.2)."""
    from relbench_irp.cos_activation import Cos

    act = {"cos": Cos, "relu": torch.nn.ReLU, "tanh": torch.nn.Tanh}[activation]
    return torch.nn.Sequential(torch.nn.Linear(in_dim, hidden), act(), torch.nn.Linear(hidden, hidden), act(),
                               torch.nn.Linear(hidden, num_classes))


def fit_absolute_head(
    kind: HeadKind,
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    num_classes: int,
    modality: str,
    seed: int,
    hidden: int,
    batch_size: int,
    epochs: int | None = None,
    lr: float | None = None,
    activation: str = "relu",
    text_relu: bool = False,
    evaluation: str = "inductive",
) -> torch.nn.Module:
    """Train a head of ``kind`` on absolute embeddings ``X`` (labels ``y``), seeded.

    ``epochs``/``lr`` of ``None`` take the modality's reference defaults (the same for
    both kinds); ``activation`` applies to ``mlp`` heads. ``text_relu`` ends a
    ``reference`` head of a non-image modality with a ReLU on its logits (IRP reference
    code). ``evaluation`` (``inductive`` or ``transductive``) is passed to
    :func:`~relbench.training.train_classifier`, which fixes the head's normalisation
    statistics on ``X``.
    """
    settings = head_settings(modality, epochs, lr, hidden, batch_size)
    if head_variant(kind, modality, activation, text_relu) == "reference":
        return fit_reference_head(X, y, settings, num_classes=num_classes, seed=seed, evaluation=evaluation)
    torch.manual_seed(seed)
    if kind == "reference":
        head = torch.nn.Sequential(settings.build(X.shape[1], num_classes, X.device), torch.nn.ReLU())
    else:
        head = mlp_head(X.shape[1], hidden, num_classes, activation).to(X.device)
    return train_classifier(head, X, y.long(), epochs=settings.epochs, lr=settings.lr,
                            batch_size=settings.batch_size, seed=seed, evaluation=evaluation)


def head_variant(kind: HeadKind, modality: str, activation: str = "relu", text_relu: bool = False) -> str:
    """The architecture :func:`fit_absolute_head` trains, beyond its settings:
    ``reference`` (the harness's reference head, the one the absolute baseline trains),
    ``reference+relu`` (with the text ReLU on the logits) or ``mlp-<activation>``."""
    if kind == "reference":
        return "reference+relu" if text_relu and modality != "image" else "reference"
    return f"mlp-{activation}"
