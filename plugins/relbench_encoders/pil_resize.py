"""Batched image resizing that reproduces PIL's 8-bit resampling bit for bit.

PIL resizes an 8-bit image in two separable passes, each a fixed-point weighted sum of
input pixels (weights scaled by ``2**22`` and rounded), rounded and clipped back to uint8
after the pass (Pillow's ``Resample.c``). The order of the passes matters (the
intermediate rounding): PIL runs the horizontal pass first, except (Pillow 13) where the
height shrinks, where it may run the vertical one first; those cases are left to PIL
(:func:`reproducible`). For a batch of
images of one size every image uses the same weights, so each pass is one matrix product
of the whole batch with a weight matrix; computed in float64, whose 53-bit mantissa holds
the integer sums exactly, it gives PIL's pixels exactly (checked by the tests against
``PIL.Image.resize``). A centre crop only keeps the weight rows of the kept pixels.

The image encoders use it on batches of equal-sized uint8 arrays (the 28×28 digit and
clothing images) instead of resizing every image through PIL in a Python loop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from relbench.api import deferred_import

torch = deferred_import("torch")

#: fixed-point precision of PIL's 8-bit resampling weights
PRECISION_BITS = 32 - 8 - 2


def _bilinear(x: float) -> float:
    x = abs(x)
    return 1.0 - x if x < 1.0 else 0.0


def _bicubic(x: float) -> float:
    a = -0.5  # PIL's bicubic (torch's uses -0.75)
    x = abs(x)
    if x < 1.0:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    if x < 2.0:
        return (((x - 5) * x + 8) * x - 4) * a
    return 0.0


#: filter name → (kernel, support), as PIL defines them
FILTERS = {"bilinear": (_bilinear, 1.0), "bicubic": (_bicubic, 2.0)}


def pil_weights(in_size: int, out_size: int, filter_name: str) -> np.ndarray:
    """PIL's fixed-point resampling weights from ``in_size`` to ``out_size`` pixels along
    one axis: an ``out_size × in_size`` integer matrix (as float64), row ``i`` the weights
    of output pixel ``i`` scaled by ``2**PRECISION_BITS``."""
    kernel, support = FILTERS[filter_name]
    scale = in_size / out_size
    filterscale = max(scale, 1.0)
    support *= filterscale
    inverse = 1.0 / filterscale  # PIL multiplies by the reciprocal (rounding differs from a division)
    weights = np.zeros((out_size, in_size))
    for i in range(out_size):
        center = (i + 0.5) * scale
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), in_size)
        k = np.array([kernel((x - center + 0.5) * inverse) for x in range(lo, hi)])
        total = k.sum()
        if total != 0.0:
            k = k / total
        weights[i, lo:hi] = [math.trunc(w * (1 << PRECISION_BITS) + (0.5 if w >= 0 else -0.5)) for w in k]
    return weights


def _pass(x: np.ndarray) -> np.ndarray:
    """PIL's rounding and clipping of a pass's fixed-point sums back to 0–255 (in place)."""
    x += 1 << (PRECISION_BITS - 1)
    x *= 1.0 / (1 << PRECISION_BITS)  # a power of two: exact
    np.floor(x, out=x)
    return np.clip(x, 0, 255, out=x)


def reproducible(in_size: tuple[int, int], out_size: tuple[int, int]) -> bool:
    """Whether :func:`resize_crop` reproduces PIL from ``in_size`` to ``out_size``
    (height, width): where the height does not shrink (see the module docstring)."""
    return out_size[0] >= in_size[0]


def resize_crop(images: torch.Tensor, size: tuple[int, int], box: tuple[int, int, int, int],
                filter_name: str) -> torch.Tensor:
    """``images`` (uint8, ``N×C×H×W``) resized to ``size`` = (height, width) as PIL's
    ``Image.resize`` does with ``filter_name`` (``bilinear`` or ``bicubic``), then cropped
    to ``box`` = (top, left, height, width) of the resized image: uint8 ``N×C×h×w``.
    ValueError unless :func:`reproducible`."""
    if not reproducible(images.shape[-2:], size):
        raise ValueError(f"PIL's pass order is not reproduced when the height shrinks "
                         f"({tuple(images.shape[-2:])} → {size})")
    top, left, h, w = box
    rows = pil_weights(images.shape[-2], size[0], filter_name)[top : top + h]
    cols = pil_weights(images.shape[-1], size[1], filter_name)[left : left + w]
    n, c, height, width = images.shape
    # numpy, not torch: one thread without a pool to wake (torch's stalls on a busy machine)
    x = _pass(images.numpy().reshape(-1, width).astype(np.float64) @ cols.T)  # (N·C·H × W) @ (W × w)
    x = _pass(rows @ x.reshape(n * c, height, w).transpose(1, 0, 2).reshape(height, -1))  # (h × H) @ (H × N·C·w)
    return torch.from_numpy(x.reshape(h, n, c, w).transpose(1, 2, 0, 3).astype(np.uint8))


def uint8_batch(items: Sequence[Any]) -> torch.Tensor | None:
    """The images as one uint8 ``N×C×H×W`` tensor when they are uint8 arrays of one shape,
    grey (``H×W`` or ``H×W×1``: ``C`` = 1; PIL's RGB conversion repeats it into three equal
    channels, which the caller does after resizing) or RGB (``H×W×3``); None otherwise
    (PIL images, RGBA, mixed sizes …)."""
    if isinstance(items, np.ndarray):
        arr = items
    elif len(items) and all(isinstance(item, np.ndarray) for item in items):
        if len({(item.shape, item.dtype) for item in items}) != 1:
            return None
        arr = np.stack(items)
    else:
        return None
    if arr.dtype != np.uint8 or arr.ndim not in (3, 4) or (arr.ndim == 4 and arr.shape[3] not in (1, 3)):
        return None
    x = torch.from_numpy(np.ascontiguousarray(arr))
    if x.ndim == 3:
        x = x.unsqueeze(3)
    return x.permute(0, 3, 1, 2)
