"""Work computed once and reused by every unit that needs it.

Many units of a task repeat a fit: the absolute baseline, the non-stitched reference and
every translation stitcher (IRP, Procrustes, affine) train the same head on the same
target bank, once per anchor selector and similarity of the grid. :class:`SharedWork`
keeps such results for the units of one seed of one task run, keyed by *everything the
result depends on*; the task kind hands it to stitchers as
:attr:`relbench.interfaces.FitContext.shared`. A key names what it is first (``("head",
…)``), then every input: the encoder whose bank it was computed from (one seed's draw:
a :class:`SharedWork` never outlives its seed), the resolved settings, the seed. A fit
that seeds its own random generator and reads nothing else gives the same numbers
whether it is computed or reused, so sharing changes no result (tested against units
computed apart).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class SharedWork:
    """A memo of results by key, counting what was computed and what was reused.

    ``computed`` and ``reused`` count calls by the first element of the key (what the
    result is), for the run's summary and the benchmarks.
    """

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self.computed: Counter = Counter()
        self.reused: Counter = Counter()

    def get(self, key: tuple, build: Callable[[], T]) -> T:
        """``build()``, computed the first time ``key`` is asked and reused afterwards.

        ``key`` is a tuple of JSON-able values (anything else is keyed by ``str``)
        starting with the name of what is computed; it must name every input of
        ``build`` that can differ between the units sharing this memo."""
        if not key or not isinstance(key[0], str):
            raise TypeError(f"a shared-work key starts with the name of what it computes, got {key!r}")
        name = json.dumps(key, sort_keys=True, default=str)
        if name in self._values:
            self.reused[key[0]] += 1
            return self._values[name]
        value = build()
        self._values[name] = value
        self.computed[key[0]] += 1
        return value

    def __len__(self) -> int:
        return len(self._values)
