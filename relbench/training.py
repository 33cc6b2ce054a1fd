"""Training utilities shared by plugins that fit heads: seeded batches and one loop.

These are harness services, not methods: a stitcher decides *what* it trains (which
module, on which features, with which regularizers); this module only runs the loop the
same way for everyone, so that heads are comparable across methods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

from relbench import deferred
import numpy as np

torch = deferred.load("torch")


def seeded_generator(seed: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with ``seed`` (use it for every random draw)."""
    g = torch.Generator()
    g.manual_seed(int(seed))
    return g


def minibatches(
    n: int,
    batch_size: int,
    generator: torch.Generator,
    labels: torch.Tensor | None = None,
    balanced: tuple[int, int] | None = None,
) -> Iterator[torch.Tensor]:
    """Index batches for one epoch, drawn with ``generator`` (deterministic per seed).

    Plain (``balanced`` or ``labels`` None): one seeded permutation of ``range(n)`` cut
    into consecutive ``batch_size`` chunks, so every sample is seen exactly once per
    epoch. The last chunk may be shorter; a last chunk of a single sample joins the
    previous one (batch-statistics layers need two rows, and :func:`train_loop` skips
    one-row batches).

    ``balanced=(C, b)`` (topological densification's batches): ``max(1, n // (C·b))``
    batches per epoch; each picks ``C`` distinct classes uniformly at random (all of
    them when fewer than ``C`` classes have two or more samples; single-sample classes
    are never drawn) and ``min(b, class size)`` distinct samples of each. Each class's
    samples are drawn without replacement, in consecutive passes over the class (the
    first a seeded permutation of all of its samples, freshly drawn every epoch); when a
    batch needs more of a class than the current pass has left, it takes those leftovers
    and the first samples of the next pass, a permutation of the others followed by the
    leftovers, so no batch holds a sample twice and no sample repeats before its whole
    class has been drawn. Classes are picked at random, so within an epoch a class may
    be drawn less than its size (some of its samples unseen) or more (a small class
    cycles through several passes).
    """
    if balanced is None or labels is None:
        chunks = list(torch.randperm(n, generator=generator).split(batch_size))
        if len(chunks) > 1 and len(chunks[-1]) == 1:
            chunks[-2:] = [torch.cat(chunks[-2:])]
        yield from chunks
        return
    yield from _class_balanced(n, generator, labels.cpu(), *balanced)


def _class_balanced(n: int, generator: torch.Generator, labels: torch.Tensor, n_cls: int,
                    per_cls: int) -> Iterator[torch.Tensor]:
    """The class-balanced batches of :func:`minibatches`."""
    pools = {int(c): torch.nonzero(labels == c).flatten() for c in torch.unique(labels)}
    pools = {c: idx for c, idx in pools.items() if len(idx) >= 2}
    if not pools:
        raise ValueError("class-balanced batches need at least one class with two samples")
    n_cls = min(n_cls, len(pools))
    keys = list(pools)
    queues = {c: idx[torch.randperm(len(idx), generator=generator)] for c, idx in pools.items()}
    for _ in range(max(1, n // (n_cls * per_cls))):
        chosen = torch.randperm(len(keys), generator=generator)[:n_cls]
        parts = []
        for ci in chosen.tolist():
            c = keys[ci]
            take = min(per_cls, len(pools[c]))
            queue = queues[c]
            if len(queue) < take:  # pass ends: its leftovers, then the next pass with them last
                rest = pools[c][~torch.isin(pools[c], queue)]
                queue = torch.cat([queue, rest[torch.randperm(len(rest), generator=generator)], queue])
            parts.append(queue[:take])
            queues[c] = queue[take:]
        yield torch.cat(parts)


def train_loop(
    parameters: list[torch.nn.Parameter],
    n: int,
    step_loss: Callable[[torch.Tensor], torch.Tensor],
    *,
    epochs: int,
    lr: float,
    batch_size: int,
    seed: int,
    labels: torch.Tensor | None = None,
    balanced: tuple[int, int] | None = None,
    on_epoch: Callable[[], None] | None = None,
    weight_decay: float = 0.0,
) -> None:
    """The one optimisation loop: seeded Adam over seeded index batches of ``n`` samples.

    ``step_loss(idx)`` returns the loss of a batch of row indices (on CPU; move them to
    your device). ``on_epoch()`` runs before every epoch (e.g. to refit statistics).
    Batches of fewer than two rows are skipped (batch-statistics layers need two).
    """
    torch.manual_seed(seed)
    gen = seeded_generator(seed)
    opt = torch.optim.Adam(parameters, lr=lr, weight_decay=weight_decay, foreach=True)
    for epoch in range(epochs):
        if on_epoch is not None:
            on_epoch()
        for idx in minibatches(n, batch_size, gen, labels, balanced):
            if len(idx) < 2:
                continue
            loss = step_loss(idx)
            if not torch.isfinite(loss):
                raise NonFinite(f"the training loss became {float(loss)} at epoch {epoch + 1}: a non-finite input "
                                f"(features, anchors) or a diverging term; nothing trained on it is scored")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()


def train_classifier(
    model: torch.nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    epochs: int,
    lr: float,
    batch_size: int,
    seed: int,
    extra_loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    balanced: tuple[int, int] | None = None,
    weight_decay: float = 0.0,
    evaluation: str = "inductive",
) -> torch.nn.Module:
    """Train ``model`` (``X[idx] → logits``) with Adam and cross-entropy.

    ``extra_loss(idx, logits)`` adds a term per batch (regularizers); ``balanced``
    switches to class-balanced batches. The model is left in eval mode with its
    normalisation statistics fixed on ``X`` (:func:`finish_training`; ``evaluation``
    picks the inductive or transductive reading). Deterministic for a fixed seed on CPU.
    """
    torch.manual_seed(seed)
    model.train()
    y = y.to(X.device)

    def step_loss(idx: torch.Tensor) -> torch.Tensor:
        idx = idx.to(X.device)
        logits = model(X[idx])
        loss = torch.nn.functional.cross_entropy(logits, y[idx])
        return loss if extra_loss is None else loss + extra_loss(idx, logits)

    train_loop(list(model.parameters()), len(X), step_loss, epochs=epochs, lr=lr, batch_size=batch_size,
               seed=seed, labels=y, balanced=balanced, weight_decay=weight_decay)
    return finish_training(model, X, evaluation)


def predict_logits(model: torch.nn.Module, X: torch.Tensor) -> torch.Tensor:
    """Logits of ``model`` on ``X`` in eval mode, without autograd.

    Inductive heads (the default, see :class:`~relbench.reference_head.FeatureNorm`) give
    every row the logits it gets alone. A head switched to transductive evaluation
    normalises over the rows passed together, so the whole split is passed at once:
    every row's logits then depend on the split alone, never on where a chunk boundary
    falls.
    """
    model.eval()
    with torch.inference_mode():
        return model(X) if len(X) else X.new_zeros((0, 0))


class NonFinite(ValueError):
    """A plugin produced NaN or an infinity where a number was needed: its unit is
    stored as an error naming the step, never as a score."""


#: how a head normalises at prediction time (recorded in every row that uses one)
EVALUATIONS = ("inductive", "transductive")


def fix_statistics(model: torch.nn.Module, X: torch.Tensor) -> None:
    """Fix every :class:`~relbench.reference_head.FeatureNorm` of ``model`` to the
    statistics of the training rows ``X`` (one pass over all of them without autograd,
    layer after layer, so each layer's statistics are those of its own inputs once the
    earlier layers are fixed)."""
    from relbench.reference_head import FeatureNorm

    norms = [m for m in model.modules() if isinstance(m, FeatureNorm)]
    if not norms:
        return
    was_training = model.training
    model.eval()
    for norm in norms:
        norm._collect = True
    try:
        with torch.no_grad():
            model(X)
    finally:
        for norm in norms:
            norm._collect = False
        model.train(was_training)


def set_evaluation(model: torch.nn.Module, evaluation: str) -> None:
    """Make every :class:`~relbench.reference_head.FeatureNorm` of ``model`` predict
    ``inductive``-ly (fixed training statistics) or ``transductive``-ly (statistics of
    the evaluated rows)."""
    from relbench.reference_head import FeatureNorm

    if evaluation not in EVALUATIONS:
        raise ValueError(f"evaluation is one of {EVALUATIONS}, got {evaluation!r}")
    for m in model.modules():
        if isinstance(m, FeatureNorm):
            m.transductive = evaluation == "transductive"


def finish_training(model: torch.nn.Module, X: torch.Tensor, evaluation: str = "inductive") -> torch.nn.Module:
    """After a head trained on ``X``: fix its normalisation statistics on ``X``, set
    its evaluation mode and leave it in eval mode."""
    fix_statistics(model, X)
    set_evaluation(model, evaluation)
    model.eval()
    return model


#: reference-code head settings per modality: (activation, blocks, lr, epochs).
#: Vision: Tanh, one block, Adam 1e-4; text: SiLU, two blocks, Adam 1e-3 (Moschella et
#: al. 2023 reference code). Epochs: the low ends of the 10–20 (vision) and 3–5 (text)
#: ranges, to keep CPU runs short.
MODALITY_DEFAULTS = {
    "image": ("tanh", 1, 1e-4, 10),
    "text": ("silu", 2, 1e-3, 5),
    "word": ("silu", 2, 1e-3, 5),
}


@dataclass
class HeadSettings:
    """Resolved head hyper-parameters for one fit."""

    activation: str
    blocks: int
    lr: float
    epochs: int
    hidden: int
    batch_size: int

    def build(self, in_dim: int, num_classes: int, device: torch.device) -> torch.nn.Module:
        """A fresh :class:`~relbench.reference_head.ReferenceHead` on ``device`` (seed the
        RNG before calling)."""
        from relbench.reference_head import ReferenceHead

        return ReferenceHead(in_dim, self.hidden, num_classes, self.activation, self.blocks).to(device)


def head_settings(modality: str, epochs: int | None, lr: float | None, hidden: int, batch_size: int) -> HeadSettings:
    """The modality's reference settings, with explicit ``epochs``/``lr`` taking precedence
    (modalities without their own entry use the text settings)."""
    act, blocks, d_lr, d_epochs = MODALITY_DEFAULTS.get(modality, MODALITY_DEFAULTS["text"])
    return HeadSettings(act, blocks, d_lr if lr is None else lr, d_epochs if epochs is None else epochs,
                        hidden, batch_size)


def fit_reference_head(X: torch.Tensor, y: torch.Tensor, settings: HeadSettings, *, num_classes: int, seed: int,
                       evaluation: str = "inductive") -> torch.nn.Module:
    """A :class:`~relbench.reference_head.ReferenceHead` of ``settings`` trained on ``X`` (labels ``y``), seeded
    with ``seed``: the head the absolute baseline, the non-stitched reference and the
    translation stitchers train on a target's absolute space."""
    torch.manual_seed(seed)
    head = settings.build(X.shape[1], num_classes, X.device)
    return train_classifier(head, X, y.long(), epochs=settings.epochs, lr=settings.lr,
                            batch_size=settings.batch_size, seed=seed, evaluation=evaluation)


def head_key(encoder: str, variant: str, settings: HeadSettings, *, num_classes: int, seed: int,
             evaluation: str) -> tuple:
    """The :class:`~relbench.sharing.SharedWork` key of a head trained on the fit part
    of ``encoder``'s bank: ``variant`` names the architecture beyond ``settings``
    (``"reference"`` for :func:`fit_reference_head`), then every setting, the number of
    classes, the seed and the evaluation."""
    return ("head", encoder, variant, asdict(settings), num_classes, seed, evaluation)


def validate_head_params(epochs: int | None, lr: float | None, hidden: int, batch_size: int) -> None:
    """Raise ``ValueError`` for non-positive head parameters."""
    if epochs is not None and epochs <= 0:
        raise ValueError(f"epochs must be positive (or null for the modality default), got {epochs}")
    if lr is not None and lr <= 0:
        raise ValueError(f"lr must be positive (or null for the modality default), got {lr}")
    if hidden <= 0:
        raise ValueError(f"hidden must be positive, got {hidden}")
    if batch_size < 2:
        raise ValueError(f"batch_size must be at least 2, got {batch_size}")


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """Detach, move to CPU and convert."""
    return t.detach().cpu().numpy()
