"""Where the timm encoder's weights come from: the source ``auto`` resolves to, the
fingerprint of the weights, and the network built with them."""

from __future__ import annotations

from pathlib import Path

from relbench.api import deferred_import, EncoderContext, MissingAsset
from relbench_encoders import packaged
from relbench_encoders._common import cache_subdir, file_sha256, import_timm

torch = deferred_import("torch")


def weight_source(model: str, weights: str) -> str:
    """The weight source of ``model`` after resolving ``auto`` (``packaged`` when a
    packaged resolver exists for the model, else ``hub``)."""
    if weights == "auto":
        return "packaged" if model in packaged.RESOLVERS else "hub"
    return weights


def weight_file(path: str | None) -> Path:
    """The local weight file ``path`` of ``weights: file`` (MissingAsset when absent)."""
    file = Path(path or "").expanduser()
    if not file.is_file():
        raise MissingAsset(f"timm weight file {file} does not exist (weights: file, path: {path})")
    return file


def weights_fingerprint(model: str, source: str, path: str | None, seed: int, ctx: EncoderContext) -> str:
    """Hash of the weight file (packaged/file), or the model name (hub/random)."""
    if source == "packaged":
        return "sha256:" + file_sha256(packaged.source_file(model), cache_subdir(ctx, "weights") / "hashes")
    if source == "file":
        return "sha256:" + file_sha256(weight_file(path), cache_subdir(ctx, "weights") / "hashes")
    if source == "random":
        return f"random:{model}:{seed}"
    return f"hub:{model}"


def load_net(model: str, source: str, path: str | None, seed: int,
             ctx: EncoderContext | None = None) -> torch.nn.Module:
    """The timm model with its weights from ``source``, ``num_classes=0`` (pre-logits),
    eval mode."""
    timm = import_timm()
    if source == "packaged":
        net = packaged.load_packaged(model, cache_subdir(ctx, "weights"))
    elif source == "file":
        net = timm.create_model(model, pretrained=True, pretrained_cfg_overlay=dict(file=str(weight_file(path))),
                                num_classes=0)
    elif source == "random":
        torch.manual_seed(seed)
        net = timm.create_model(model, pretrained=False, num_classes=0)
    else:
        try:
            net = timm.create_model(model, pretrained=True, num_classes=0)
        except Exception as exc:  # noqa: BLE001 - the hub may be unreachable
            raise MissingAsset(
                f"could not fetch timm weights for {model!r} from the hub ({exc}); use "
                f"weights: packaged/file, or run where the hub is reachable"
            ) from exc
    return net.eval()
