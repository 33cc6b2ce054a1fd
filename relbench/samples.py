"""Per-sample data behind a stored score, so that intervals, paired comparisons and new
metrics can be computed later from the store without re-running anything.

A classification cell stores its test samples' true and predicted class indices
(:func:`predictions`), as base64 of little-endian unsigned integers (one byte per sample
up to 256 classes), with the number of samples and a digest of the test sample ids in
their order: two cells with the same digest scored the same samples in the same order,
so their predictions can be compared sample by sample (paired). About 2.7 kB per 1,000
samples. A score that is the mean of one value per sample (a retrieval score per word,
an error per sample) stores those values instead (:func:`values`, float32, about 5.4 kB
per 1,000 samples); the mean of the values is the score.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

#: the format of :func:`predictions`' record (bump when its fields change)
FORMAT = "predictions/1"
#: the format of :func:`values`' record
VALUES_FORMAT = "values/1"


def ids_digest(ids: Sequence[str]) -> str:
    """A short digest of sample ids in their order (equal digests: same samples, same order)."""
    h = hashlib.sha1()
    for sid in ids:
        h.update(str(sid).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def _width(*arrays: np.ndarray) -> str:
    """The narrowest little-endian unsigned type that holds every class index."""
    top = max((int(a.max()) for a in arrays if a.size), default=0)
    if any(a.size and a.min() < 0 for a in arrays) or top >= 2**16:
        raise ValueError("class indices must lie in [0, 65536)")
    return "<u1" if top < 256 else "<u2"


def _b64(values: np.ndarray, dtype: str) -> str:
    return base64.b64encode(values.astype(dtype).tobytes()).decode("ascii")


def predictions(ids: Sequence[str], y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, Any]:
    """The per-sample record of a classification cell (see the module docstring)."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if not len(ids) == len(y_true) == len(y_pred):
        raise ValueError(f"ids, true and predicted labels differ in length: {len(ids)}, {len(y_true)}, {len(y_pred)}")
    dtype = _width(y_true, y_pred)
    return {"format": FORMAT, "n": int(len(ids)), "ids": ids_digest(ids), "dtype": dtype,
            "y_true": _b64(y_true, dtype), "y_pred": _b64(y_pred, dtype)}


def read_predictions(record: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """``(y_true, y_pred)`` as int64 arrays from a :func:`predictions` record."""
    if record.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} record: format {record.get('format')!r}")
    out = []
    for name in ("y_true", "y_pred"):
        values = np.frombuffer(base64.b64decode(record[name]), dtype=record["dtype"]).astype(np.int64)
        if len(values) != record["n"]:
            raise ValueError(f"{name} holds {len(values)} samples, the record says {record['n']}")
        out.append(values)
    return out[0], out[1]


def values(ids: Sequence[str], per_sample: np.ndarray) -> dict[str, Any]:
    """The per-sample record of a score that is the mean of ``per_sample`` (one finite
    value per sample id, stored as float32)."""
    per_sample = np.asarray(per_sample, dtype=np.float64).reshape(-1)
    if len(ids) != len(per_sample):
        raise ValueError(f"ids and values differ in length: {len(ids)}, {len(per_sample)}")
    if not np.isfinite(per_sample).all():
        raise ValueError("per-sample values must be finite")
    return {"format": VALUES_FORMAT, "n": int(len(ids)), "ids": ids_digest(ids), "dtype": "<f4",
            "values": _b64(per_sample, "<f4")}


def read_values(record: dict[str, Any]) -> np.ndarray:
    """The per-sample values (float64) of a :func:`values` record."""
    if record.get("format") != VALUES_FORMAT:
        raise ValueError(f"not a {VALUES_FORMAT} record: format {record.get('format')!r}")
    out = np.frombuffer(base64.b64decode(record["values"]), dtype=record["dtype"]).astype(np.float64)
    if len(out) != record["n"]:
        raise ValueError(f"values hold {len(out)} samples, the record says {record['n']}")
    return out
