"""The stitching kind's plan: the grid's combinations and the units of work they make."""

from __future__ import annotations

from dataclasses import dataclass

from relbench.api import EncoderSpec, PluginSpec, Task, UnitKey

NONE = "-"
COMBO = ("selector", "similarity", "stitcher", "regularizer")


@dataclass(frozen=True)
class Combination:
    """One point of the grid; ``None`` where the stitcher does not use that part."""

    selector: PluginSpec | None
    similarity: PluginSpec | None
    stitcher: PluginSpec
    regularizer: PluginSpec | None

    def key(self) -> dict:
        """Labels identifying the combination in result rows."""
        return {"selector": self.selector.label if self.selector else NONE,
                "similarity": self.similarity.label if self.similarity else NONE,
                "stitcher": self.stitcher.label,
                "regularizer": self.regularizer.label if self.regularizer else NONE}

    def specs(self) -> dict[str, PluginSpec]:
        """The plugins of the combination by column (parts it does not use left out)."""
        return {col: spec for col, spec in zip(COMBO, (self.selector, self.similarity, self.stitcher,
                                                      self.regularizer)) if spec is not None}


#: one unit of work: (seed, combination, target, sources, held-out encoders)
Unit = tuple[int, Combination, EncoderSpec, list[EncoderSpec], list[EncoderSpec]]


def expand_grid(task: Task) -> list[Combination]:
    """selectors × similarities × stitchers × regularizers, collapsing the axes a
    stitcher ignores (an absolute head is not repeated per similarity), in order."""
    out: list[Combination] = []
    seen = set()
    for stitcher in task.grid["stitchers"]:
        cls = stitcher.cls
        selectors = task.grid["selectors"] if cls.uses_anchors else [None]
        similarities = task.grid["similarities"] if cls.uses_similarity else [None]
        regularizers = task.grid["regularizers"] if cls.accepts_regularizers else [None]
        if cls.uses_anchors and not selectors:
            raise ValueError(f"stitcher {stitcher.label!r} needs anchors but the grid has no selectors; "
                             f"add e.g. `selectors: [random]` to the task's grid.")
        if cls.uses_similarity and not similarities:
            raise ValueError(f"stitcher {stitcher.label!r} needs a similarity but the grid has none; "
                             f"add e.g. `similarities: [cosine]` to the task's grid.")
        for sel in selectors:
            for sim in similarities:
                for reg in regularizers:
                    combo = Combination(sel, sim, stitcher, reg)
                    k = tuple(combo.key().values())
                    if k not in seen:
                        seen.add(k)
                        out.append(combo)
    return out


def plan_units(task: Task, protocol: str, held_out: list[str]) -> list[Unit]:
    """Every unit of work of ``task`` under ``protocol`` (``all-pairs`` or ``held-out``,
    holding out the encoders labelled ``held_out``, each in turn when empty).

    One decoder is fitted per unit. Selectors that learn from the banks, and the
    held-out protocol, get one unit per (source, target) with the source held out.
    """
    encoders = list(task.encoders)
    by_label = {e.label: e for e in encoders}
    out = []
    for seed in task.seeds:
        for combo in expand_grid(task):
            learns = combo.selector is not None and combo.selector.cls.learns_from_banks
            if protocol == "held-out" or learns:
                for source in [by_label[h] for h in held_out] or encoders:
                    if combo.stitcher.cls.diagonal_only:
                        targets = [source]
                    elif protocol == "held-out":
                        targets = [t for t in encoders if t is not source]
                    else:
                        targets = encoders
                    out += [(seed, combo, target, [source], [source]) for target in targets]
            else:
                for target in encoders:
                    sources = [target] if combo.stitcher.cls.diagonal_only else encoders
                    out.append((seed, combo, target, sources, []))
    return out


def unit_key(seed: int, combo: Combination, target: EncoderSpec, held_out: list[EncoderSpec]) -> UnitKey:
    """The key a unit is stored under: its seed, its combination's plugins, its target
    and, when it holds encoders out, those."""
    key: UnitKey = {"seed": seed, **combo.specs(), "target": target}
    if held_out:
        key["held_out"] = held_out
    return key
