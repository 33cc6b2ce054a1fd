"""The timm encoder's image pipeline: timm's eval transform applied to whole uint8
batches (the per-image PIL path's values exactly), or image by image otherwise."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from relbench.api import deferred_import, EncoderContext
from relbench_encoders.pil_resize import reproducible, resize_crop, uint8_batch

torch = deferred_import("torch")


@dataclass(frozen=True)
class BatchTransform:
    """timm's eval transform — resize of the shorter side to ``size`` (PIL, ``filter_name``),
    centre crop to ``crop`` (height, width), to-tensor, ``normalize`` — applied to a uint8
    ``N×C×H×W`` batch at once, giving the per-image PIL path's values exactly
    (:mod:`relbench_encoders.pil_resize`)."""

    size: int
    crop: tuple[int, int]
    filter_name: str
    normalize: Any

    @classmethod
    def of(cls, transform: Any) -> BatchTransform | None:
        """The batched form of ``transform``, or None when it is not exactly timm's
        ``Resize(int, bilinear|bicubic) → CenterCrop → (Maybe)ToTensor → Normalize``."""
        from torchvision import transforms as T

        steps = getattr(transform, "transforms", ())
        if len(steps) != 4:
            return None
        resize, crop, to_tensor, normalize = steps
        if not (isinstance(resize, T.Resize) and isinstance(crop, T.CenterCrop) and isinstance(normalize, T.Normalize)
                and type(to_tensor).__name__ in ("ToTensor", "MaybeToTensor") and resize.max_size is None):
            return None
        size = resize.size if isinstance(resize.size, int) else (resize.size[0] if len(resize.size) == 1 else None)
        filters = {T.InterpolationMode.BILINEAR: "bilinear", T.InterpolationMode.BICUBIC: "bicubic"}
        if size is None or resize.interpolation not in filters:
            return None
        return cls(size, tuple(crop.size), filters[resize.interpolation], normalize)

    def box(self, height: int, width: int) -> tuple[tuple[int, int], tuple[int, int, int, int]] | None:
        """The resized size and the crop box (top, left, height, width) of an image of
        ``height × width``, as torchvision computes them; None when the crop would pad or
        the resize is not :func:`~relbench_encoders.pil_resize.reproducible` (the height
        shrinks)."""
        short, long = min(height, width), max(height, width)
        new_long = int(self.size * long / short)
        size = (self.size, new_long) if height <= width else (new_long, self.size)
        ch, cw = self.crop
        if ch > size[0] or cw > size[1] or not reproducible((height, width), size):
            return None
        return size, (int(round((size[0] - ch) / 2.0)), int(round((size[1] - cw) / 2.0)), ch, cw)

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        """Float32 ``N×3×h×w`` model inputs of uint8 ``N×C×H×W`` images (C = 1: grey)."""
        size, box = self.box(*images.shape[-2:])
        pixels = resize_crop(images, size, box, self.filter_name).numpy().astype(np.float32) / np.float32(255)
        mean, std = (np.asarray(v, np.float32).reshape(-1, 1, 1) for v in (self.normalize.mean, self.normalize.std))
        # numpy, as the resize: the values of torchvision's to_tensor and normalize, without torch's thread pool
        # (grey: the one channel broadcasts against the three means, as PIL's RGB conversion repeats it)
        return torch.from_numpy((pixels - mean) / std)


def image_batches(items: Sequence[Any], transform: Any, batched: BatchTransform | None,
                  ctx: EncoderContext) -> Iterator[torch.Tensor]:
    """The model inputs of ``items`` in batches of ``ctx.batch_size``: whole batches at
    once through ``batched`` (timm's ``transform`` in batched form) for equal-sized uint8
    arrays it reproduces, otherwise image by image through ``transform`` in DataLoader
    workers."""
    size = max(1, ctx.batch_size)
    images = uint8_batch(items) if batched is not None else None
    if images is not None and batched.box(*images.shape[-2:]) is not None:
        for i in range(0, len(images), size):
            yield batched(images[i : i + size])
        return
    from relbench_encoders.torch_modules import ImageItems

    yield from torch.utils.data.DataLoader(ImageItems(items, transform), batch_size=size,
                                           num_workers=ctx.num_workers, pin_memory=ctx.device.type == "cuda")
