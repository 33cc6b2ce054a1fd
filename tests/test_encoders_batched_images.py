"""Batched image preprocessing: PIL's resampling reproduced exactly on whole batches, and
the timm encoder's batched inputs equal to its per-image PIL inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from relbench.interfaces import DatasetData, EncoderContext, Split
from relbench_encoders._common import import_timm, to_pil_rgb
from relbench_encoders.pil_resize import resize_crop, uint8_batch
from relbench_encoders.timm_encoder import TimmEncoder, _BatchTransform

MODES = {"bilinear": Image.Resampling.BILINEAR, "bicubic": Image.Resampling.BICUBIC}


def images(n: int, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, *shape), dtype=np.uint8)


@pytest.mark.parametrize("filter_name", ["bilinear", "bicubic"])
@pytest.mark.parametrize(("shape", "size"), [((28, 28), (146, 146)), ((28, 28), (256, 256)), ((28, 28, 3), (143, 143)),
                                             ((40, 30, 3), (40, 23)), ((40, 30), (80, 23)), ((9, 31), (9, 50))])
def test_resize_equals_pil_pixel_for_pixel(filter_name, shape, size):
    imgs = images(4, shape)
    got = resize_crop(uint8_batch(imgs), size, (0, 0, *size), filter_name)
    ref = np.stack([np.asarray(Image.fromarray(im).resize(size[::-1], resample=MODES[filter_name])) for im in imgs])
    assert torch.equal(got, torch.from_numpy(ref.reshape(4, *size, -1)).permute(0, 3, 1, 2))


def test_shrinking_the_height_is_refused():
    x = uint8_batch(images(1, (40, 30)))
    with pytest.raises(ValueError, match="height shrinks"):
        resize_crop(x, (17, 50), (0, 0, 17, 50), "bilinear")


def test_crop_keeps_the_box_of_the_full_resize():
    x = uint8_batch(images(3, (28, 28)))
    full = resize_crop(x, (146, 146), (0, 0, 146, 146), "bicubic")
    assert torch.equal(resize_crop(x, (146, 146), (9, 7, 128, 120), "bicubic"), full[..., 9:137, 7:127])


def test_uint8_batch_takes_equal_grey_or_rgb_arrays_only():
    assert uint8_batch(images(2, (5, 5))).shape == (2, 1, 5, 5)
    assert uint8_batch(list(images(2, (5, 5, 3)))).shape == (2, 3, 5, 5)
    assert uint8_batch([images(1, (5, 5))[0], images(1, (6, 5))[0]]) is None  # mixed sizes
    assert uint8_batch(images(2, (5, 5, 4))) is None  # RGBA
    assert uint8_batch(images(2, (5, 5)).astype(np.float32)) is None
    assert uint8_batch([Image.new("RGB", (5, 5))]) is None


@pytest.mark.parametrize(("interpolation", "crop_pct", "shape"), [
    ("bicubic", 0.875, (28, 28)), ("bicubic", 0.882, (28, 28, 3)), ("bicubic", 0.89, (28, 28)),
    ("bilinear", 0.9, (30, 44, 3)), ("bicubic", 0.875, (50, 21)), ("bicubic", 0.875, (60, 60))])
def test_timm_batch_transform_equals_the_per_image_transform(interpolation, crop_pct, shape):
    timm = import_timm()
    transform = timm.data.create_transform(input_size=(3, 32, 32), interpolation=interpolation, crop_pct=crop_pct,
                                           mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    batched = _BatchTransform.of(transform)
    imgs = images(5, shape)
    if batched.box(*shape[:2]) is None:  # the height shrinks: left to PIL
        assert shape[0] > batched.size
        return
    ref = torch.stack([transform(to_pil_rgb(im)) for im in imgs])
    assert torch.equal(batched(uint8_batch(imgs)), ref)


def make_ctx(tmp_path, items, batch_size=3):
    split = Split(ids=[str(i) for i in range(len(items))], labels=None, views={"image": items})
    data = DatasetData("t", {"train": split}, [], {"image": "image"}, "fp")
    return EncoderContext(torch.device("cpu"), "image", data, split, tmp_path, batch_size=batch_size)


def test_timm_encoder_batches_arrays_like_pil_images(tmp_path):
    enc = TimmEncoder(model="mobilenetv2_050", weights="random", image_size=32, backend="torch")
    arrays = images(7, (28, 28))
    ctx = make_ctx(tmp_path, arrays)
    enc.setup(ctx)
    fast = torch.cat(list(enc.batches(arrays, ctx)))
    pil = [Image.fromarray(a) for a in arrays]
    slow = torch.cat(list(enc.batches(pil, ctx)))
    assert torch.equal(fast, slow)
    assert torch.allclose(enc.encode(arrays, ctx), enc.encode(pil, ctx), rtol=0, atol=1e-6)
