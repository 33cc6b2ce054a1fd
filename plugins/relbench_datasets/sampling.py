"""Seeded, stratified splitting and subsampling shared by every data set plugin (the
functions live in :mod:`relbench.sampling`, which the harness's per-seed draws use too)."""

from __future__ import annotations

import numpy as np

from relbench.api import ConfigError, stratified_split, stratified_subsample

__all__ = ["require_two_classes", "stratified_split", "stratified_subsample"]


def require_two_classes(dataset: str, split: str, labels: np.ndarray | None, class_names: list[str]) -> None:
    """Raise :class:`ConfigError` when a labelled split holds fewer than two classes."""
    if labels is None:
        return
    present = np.unique(labels)
    if len(present) < 2:
        only = ", ".join(class_names[int(c)] for c in present) or "none"
        raise ConfigError(
            f"data set {dataset!r}: the {split!r} split has {len(present)} class ({only}) after "
            f"filtering and subsampling; a classification needs at least two. Raise "
            f"{split}_size or choose parameters that keep more classes."
        )
