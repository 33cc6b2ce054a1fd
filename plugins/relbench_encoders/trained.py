"""Small networks trained here per seed: classifier encoders whose embedding is the
penultimate layer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from relbench.api import deferred_import, Encoder, EncoderContext, train_classifier
from relbench_encoders._common import params_hash, to_pil_rgb

torch = deferred_import("torch")


def grey_images(items: Sequence[Any], size: int) -> torch.Tensor:
    """Images (PIL or uint8 arrays) → ``n × 1 × size × size`` float32 in [0, 1].

    Arrays already ``size×size`` grey are used as they are; others are converted to grey
    and resized (bilinear)."""
    from PIL import Image

    out = np.empty((len(items), size, size), np.float32)
    for i, item in enumerate(items):
        arr = np.asarray(item) if not isinstance(item, Image.Image) else None
        if arr is None or arr.shape != (size, size):
            img = to_pil_rgb(item).convert("L")
            if img.size != (size, size):
                img = img.resize((size, size), resample=Image.Resampling.BILINEAR)
            arr = np.asarray(img)
        out[i] = arr.astype(np.float32) / 255.0
    return torch.from_numpy(out).unsqueeze(1)


def _is_image(item: Any) -> bool:
    from PIL import Image

    return isinstance(item, Image.Image) or (np.asarray(item).dtype == np.uint8 and np.asarray(item).ndim in (2, 3))


def as_inputs(items: Sequence[Any], size: int) -> torch.Tensor:
    """Images → grey ``n×1×size×size`` tensors; feature vectors → ``n × d`` float32."""
    if len(items) and _is_image(items[0]):
        return grey_images(items, size)
    return torch.as_tensor(np.stack([np.asarray(x, dtype=np.float32).reshape(-1) for x in items]))


@dataclass
class TrainedEncoder(Encoder):
    """Encoder trained here: a small MLP or CNN classifier fitted per seed on the task's
    training split; the embedding is its penultimate layer.

    Items are images (converted to grey, resized to ``image_size``, scaled to [0, 1] and
    standardised with the training split's mean and std) or precomputed feature vectors
    (standardised per dimension; ``mlp`` only). Training: Adam, cross-entropy on the
    split's labels, seeded batches (relbench.training), deterministic per seed on CPU.
    Different seeds give the differently initialised networks of Moschella 2023 §5.

    Parameters
    ----------
    arch: ``mlp`` (Flatten → 256 → ReLU → width → ReLU) or ``cnn`` (two conv+pool
        blocks, 16 and 32 channels, → width → ReLU) (default ``mlp``: our choice).
    seed: seed of initialisation and batch order (default 0).
    width: width of the penultimate layer, the embedding size (default 64: our choice).
    epochs: training epochs (default 3: our choice, small for CPU).
    lr: Adam learning rate (default 1e-3).
    batch_size: training batch size (default 128).
    image_size: side images are resized to (default 28, the MNIST family's).
    """

    name: ClassVar[str] = "trained"
    modalities: ClassVar[tuple[str, ...]] = ()

    arch: Literal["mlp", "cnn"] = "mlp"
    seed: int = 0
    width: int = 64
    epochs: int = 3
    lr: float = 1e-3
    batch_size: int = 128
    image_size: int = 28

    def provenance(self) -> dict[str, str]:
        """Trained here: no package, no licence beyond the data's."""
        return {"what": f"{self.arch.upper()} trained here (seed {self.seed}) on the task's training pool",
                "licence": "trained here (the data's licence applies)"}

    def __post_init__(self) -> None:
        if self.arch not in ("mlp", "cnn"):
            raise ValueError(f"arch must be mlp or cnn, got {self.arch!r}")
        if min(self.width, self.epochs, self.batch_size, self.image_size) < 1 or self.lr <= 0:
            raise ValueError("width, epochs, batch_size, image_size and lr must be positive")
        self._body: TrainedBody | None = None
        self._stats: tuple[torch.Tensor, torch.Tensor] | None = None
        self._report: dict = {}

    def fingerprint(self, ctx: EncoderContext) -> str:
        """Hash of the parameters, the view and the data set's fingerprint."""
        return params_hash(dict(params=self.params(), view=ctx.view, data=ctx.dataset.fingerprint))

    def _standardise(self, x: torch.Tensor) -> torch.Tensor:
        mean, std = self._stats
        return (x - mean) / std

    def setup(self, ctx: EncoderContext) -> None:
        """Train the classifier on ``ctx.train`` (its view ``ctx.view`` and labels)."""
        if ctx.train.labels is None:
            raise ValueError("the trained encoder needs a labelled training split")
        x = as_inputs(ctx.train.views[ctx.view], self.image_size)
        if x.ndim == 4:
            self._stats = (x.mean(), x.std().clamp_min(1e-6))
        else:
            self._stats = (x.mean(0), x.std(0).clamp_min(1e-6))
        y = torch.as_tensor(np.asarray(ctx.train.labels), dtype=torch.long)
        torch.manual_seed(self.seed)
        from relbench_encoders.torch_modules import TrainedBody

        body = TrainedBody(self.arch, tuple(x.shape[1:]), self.width)
        model = torch.nn.Sequential(body, torch.nn.Linear(self.width, int(y.max()) + 1)).to(ctx.device)
        train_classifier(model, self._standardise(x).to(ctx.device), y, epochs=self.epochs, lr=self.lr,
                         batch_size=self.batch_size, seed=self.seed)
        self._body = body.eval()
        self._report = {"epochs": self.epochs, "train_accuracy": self._accuracy(model, ctx.train, ctx)}
        test = ctx.dataset.splits.get("test")
        if test is not None and test.labels is not None:
            self._report["test_accuracy"] = self._accuracy(model, test, ctx)

    def _accuracy(self, model: torch.nn.Module, split, ctx: EncoderContext) -> float:
        """The trained classifier's own accuracy on ``split`` (reported, never used to choose)."""
        x = self._standardise(as_inputs(split.views[ctx.view], self.image_size))
        with torch.inference_mode():
            pred = torch.cat([model(c.to(ctx.device)).argmax(dim=1).cpu() for c in x.split(1024)])
        return float((pred.numpy() == np.asarray(split.labels)).mean())

    def report(self) -> dict:
        """The classifier's own accuracy after training: on the training split it learned
        from and on the data set's test split (``epochs`` with it), so a page shows
        whether the networks whose spaces are stitched converged."""
        return dict(self._report)

    def encode(self, items: Sequence[Any], ctx: EncoderContext) -> torch.Tensor:
        """Penultimate-layer features: ``len(items) × width`` float32 on CPU."""
        if len(items) == 0:
            return torch.zeros(0, self.width)
        if self._body is None:
            self.setup(ctx)
        x = self._standardise(as_inputs(items, self.image_size))
        with torch.inference_mode():
            return torch.cat([self._body(c.to(ctx.device)).float().cpu() for c in x.split(1024)])
