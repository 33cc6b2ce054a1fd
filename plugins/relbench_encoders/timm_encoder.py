"""Image encoder: any timm model, pre-logits features.

Where the weights come from is :mod:`relbench_encoders.timm_weights`; the image pipeline
(timm's transform, batched where it can be) :mod:`relbench_encoders.timm_images`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from relbench.api import deferred_import, Encoder, EncoderContext, progress_bar
from relbench_encoders import ort_backend, packaged
from relbench_encoders._common import cache_subdir, import_timm, is_cuda_oom, to_pil_rgb
from relbench_encoders.timm_images import BatchTransform as _BatchTransform
from relbench_encoders.timm_images import image_batches
from relbench_encoders.timm_weights import load_net, weight_source, weights_fingerprint

torch = deferred_import("torch")


@dataclass
class TimmEncoder(Encoder):
    """Image encoder from timm: the pooled pre-logits features of any timm model.

    Images are preprocessed with timm's own data config for the model (resolution,
    mean/std, interpolation, centre crop: ``timm.data.resolve_data_config`` +
    ``create_transform``); grey images are repeated to 3 channels. Equal-sized uint8 arrays
    (grey or RGB) are preprocessed a whole batch at a time by matrix products that give
    PIL's resized pixels exactly (:mod:`relbench_encoders.pil_resize`); other images go
    through the transform one by one. Inference runs batched
    under ``torch.inference_mode`` in channels-last layout, under bf16 autocast only for a
    bf16 task on CUDA (:meth:`arithmetic`); a CUDA out-of-memory error halves the batch
    and retries.

    With the onnxruntime backend the net is exported once to ONNX (dynamic batch axis, the
    input resolution fixed), cached under ``<cache>/onnx/`` keyed by the weights
    fingerprint, model, timm, torch and onnx versions and opset, and checked against the
    torch forward on the first images it encodes: ``max |Δ| ≤ 1e-4 · max |torch
    features|`` (see :mod:`relbench_encoders.ort_backend`). When export or the check
    fails, the torch forward runs and a warning says why. ``backend_used`` tells which
    backend embedded (``torch`` or ``onnxruntime``; None before the first encode), and
    :meth:`release` frees the net and the session once the embeddings are stored.

    Parameters
    ----------
    model: timm model name (default ``tf_efficientnet_lite0``; our choice, its weights ship
        in a pip package).
    weights: where the weights come from (default ``auto``: ``packaged`` when a packaged
        resolver exists for ``model`` — ``tf_efficientnet_lite0/1/2``, ``mobilenetv2_100`` —
        otherwise ``hub``). ``hub``: timm's pretrained download; ``file``: a local
        checkpoint at ``path`` (a timm-keyed state dict, ``.safetensors``/``.pth``);
        ``packaged``: converted from the pip package; ``random``: untrained weights drawn
        with ``seed``.
    path: local weight file for ``weights: file`` (default none).
    image_size: square input resolution overriding timm's data config (default none:
        the model's native resolution).
    seed: seed of the random initialisation for ``weights: random`` (default 0).
    backend: ``auto``, ``torch`` or ``onnxruntime`` (default ``auto``: onnxruntime on the
        CPU, where the packaged CNNs embed 2.0–2.3× faster through it on one thread,
        torch on CUDA).
        Like the device, the backend is not part of the encoder's identity (the
        embeddings agree within 1e-4 relative, checked): :meth:`params` leaves it out,
        so switching it recomputes no embedding and no result.
    """

    name: ClassVar[str] = "timm"
    modalities: ClassVar[tuple[str, ...]] = ("image",)

    model: str = "tf_efficientnet_lite0"
    weights: Literal["auto", "hub", "file", "packaged", "random"] = "auto"
    path: str | None = None
    image_size: int | None = None
    seed: int = 0
    backend: Literal["auto", "torch", "onnxruntime"] = "auto"

    def provenance(self) -> dict[str, str]:
        """The packaged checkpoint's, when this model's weights ship in a package; else
        the model name and where its weights come from."""
        if self.weights in ("auto", "packaged") and self.model in packaged.PACKAGED_PROVENANCE:
            return dict(packaged.PACKAGED_PROVENANCE[self.model])
        return {"what": f"timm {self.model} ({self.weights} weights)"}

    def __post_init__(self) -> None:
        if self.weights not in ("auto", "hub", "file", "packaged", "random"):
            raise ValueError(f"weights must be auto, hub, file, packaged or random, got {self.weights!r}")
        if self.weights == "file" and not self.path:
            raise ValueError("weights: file needs `path` to a local weight file")
        if self.weights == "packaged" and self.model not in packaged.RESOLVERS:
            raise ValueError(
                f"no packaged weights for {self.model!r}; packaged models: {', '.join(sorted(packaged.RESOLVERS))}"
            )
        if self.image_size is not None and self.image_size < 8:
            raise ValueError(f"image_size must be at least 8, got {self.image_size}")
        ort_backend.check_backend(self.backend)
        self._net: torch.nn.Module | None = None
        self._ort: ort_backend.OrtForward | None = None
        self._graph: ort_backend.GraphSpec | None = None
        self._transform = None
        self._batched: _BatchTransform | None = None
        self._batch = 0
        self._dim = 0
        #: the backend that embedded (``torch`` or ``onnxruntime``), None before the first encode
        self.backend_used: str | None = None

    def params(self) -> dict[str, Any]:
        """Every parameter but ``backend`` (no part of the identity: see the class docstring)."""
        return ort_backend.without_backend(super().params())

    @property
    def source(self) -> str:
        """The weight source after resolving ``auto``."""
        return weight_source(self.model, self.weights)

    def fingerprint(self, ctx: EncoderContext) -> str:
        """Hash of the weight file (packaged/file), or the model name (hub/random)."""
        return weights_fingerprint(self.model, self.source, self.path, self.seed, ctx)

    def build(self, ctx: EncoderContext | None = None) -> torch.nn.Module:
        """The timm model with its weights, ``num_classes=0`` (pre-logits), eval mode."""
        return load_net(self.model, self.source, self.path, self.seed, ctx)

    def arithmetic(self, ctx: EncoderContext) -> str:
        """bf16 autocast for a bf16 task's torch forward on CUDA, else fp32."""
        return ort_backend.torch_arithmetic(self.backend, ctx)

    def setup(self, ctx: EncoderContext) -> None:
        """Load the network and its preprocessing; the backend is chosen on the first
        images encoded."""
        timm = import_timm()
        net = self.build(ctx)
        config = timm.data.resolve_data_config({}, model=net)
        if self.image_size is not None:
            config["input_size"] = (3, self.image_size, self.image_size)
        self._transform = timm.data.create_transform(**config, is_training=False)
        self._batched = _BatchTransform.of(self._transform)
        self._net = net.to(ctx.device, memory_format=torch.channels_last)
        self._bf16 = self.arithmetic(ctx) == "bf16"
        self._ort, self._graph, self.backend_used = None, None, None
        self._batch = max(1, ctx.batch_size)
        self._dim = net.num_features
        if ort_backend.wanted(self.backend, ctx.device) == "onnxruntime":
            ort_backend.require_runtime("the timm encoder's onnxruntime backend")
            self._graph = ort_backend.GraphSpec(
                what=f"timm {self.model}", model=self.model,
                identity={"model": self.model, "weights": self.fingerprint(ctx), "timm": timm.__version__,
                          "input": list(config["input_size"])},
                input_names=("pixels",), output_names=("features",),
                dynamic_axes={"pixels": {0: "batch"}, "features": {0: "batch"}},
            )

    def release(self) -> None:
        """Free the net and the onnxruntime session (once the embeddings are stored); a
        later :meth:`encode` sets the encoder up again."""
        self._net, self._ort, self._transform = None, None, None

    def _choose_backend(self, items: Sequence[Any], ctx: EncoderContext) -> None:
        """Export and check the graph on the first images (onnxruntime wanted), or keep
        torch; with a session that agrees, the torch net is freed."""
        if self._graph is not None:
            from relbench_encoders.torch_modules import FeaturesTuple

            probe = torch.stack([self._transform(to_pil_rgb(item)) for item in ort_backend.probe_items(items)])
            self._ort = ort_backend.prepare(self._graph, FeaturesTuple(self._net).eval(), [(probe,), (probe[:1],)],
                                            lambda outputs, _: outputs[0], cache_subdir(ctx, "onnx"), ctx.device)
        if self._ort is not None:
            self._net = None
        self.backend_used = "torch" if self._ort is None else "onnxruntime"

    def _forward(self, x: torch.Tensor, device: torch.device) -> torch.Tensor:
        """Run the session on ``x``, or the net in chunks, halving the chunk on CUDA OOM."""
        if self._ort is not None:
            return self._ort(x)[0]
        out, i = [], 0
        while i < len(x):
            chunk = x[i : i + self._batch].to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
            try:
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=self._bf16):
                    out.append(self._net(chunk).float().cpu())
            except Exception as exc:  # noqa: BLE001 - only OOM is retried
                if not is_cuda_oom(exc) or self._batch == 1:
                    raise
                torch.cuda.empty_cache()
                self._batch //= 2
                continue
            i += len(chunk)
        return torch.cat(out)

    def batches(self, items: Sequence[Any], ctx: EncoderContext) -> Iterator[torch.Tensor]:
        """The preprocessed inputs of ``items`` in batches of ``ctx.batch_size``: whole
        batches at once for equal-sized uint8 arrays (see the class docstring), otherwise
        image by image in DataLoader workers."""
        return image_batches(items, self._transform, self._batched, ctx)

    def encode(self, items: Sequence[Any], ctx: EncoderContext) -> torch.Tensor:
        """Embed images: ``len(items) × num_features`` float32 on CPU."""
        if self._transform is None:
            self.setup(ctx)
        if len(items) == 0:
            return torch.zeros(0, self._dim)
        if self.backend_used is None:
            self._choose_backend(items, ctx)
        out = []
        with torch.inference_mode(), progress_bar(total=len(items), desc=f"timm {self.model}", unit="samples") as bar:
            for x in self.batches(items, ctx):
                out.append(self._forward(x, ctx.device))
                bar.update(len(x))
        return torch.cat(out)
