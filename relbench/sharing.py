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

Anchors learned from the banks (a selector with ``learns_from_banks``: PARAM, fps) are
shared further, by every process that shares the embedding cache folder: the ``-j``
workers of a run, the Ray workers of a node (or of a cluster on a shared file system),
and later runs. :func:`learned_anchors` keys them by everything they depend on
(:func:`anchor_identity`) and computes each under a lock on its cache entry, so a second
process asking for the same anchors waits for the first and reads them; without a shared
folder each node computes them once. A stored recipe reads back bit for bit, so a unit
computes the same numbers whether its anchors were learned or read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from relbench.cache import ArtefactCache
    from relbench.task_model import PluginSpec
    from relbench.interfaces import AnchorContext, AnchorSelector, Anchors
    from relbench.task_run import TaskRun

T = TypeVar("T")
#: what :func:`learned_anchors` counts in the run's shared-work statistics
LEARNED_ANCHORS = "learned anchors"


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


def learned_anchors(task_run: TaskRun, selector: AnchorSelector, ctx: AnchorContext, spec: PluginSpec,
                    similarity: PluginSpec | None) -> Anchors:
    """``selector.select(ctx)``, computed once by all the processes that share the task's
    cache folder: read from the cache entry of :func:`anchor_identity` when one holds it,
    else learned under the entry's lock (another process asking meanwhile waits, then
    reads) and stored. ``spec`` is the selector's grid entry, ``similarity`` the one
    passed to it. Counted in the run's shared work as :data:`LEARNED_ANCHORS`, computed
    or reused. An entry that is corrupt, partial or malformed is reported and learned
    again; a recipe whose ``info`` is not plain JSON, or that read an anchor pool the
    selector does not declare (:meth:`~relbench.interfaces.AnchorSelector.pools`), is
    used but not stored."""
    from relbench.cache import ArtefactCache, identity_key

    runner = task_run.runner
    cache = ArtefactCache(runner.cache.root)
    identity = {"anchors": anchor_identity(task_run, selector, ctx, spec, similarity)}
    key = identity_key(identity)
    try:
        anchors = _read_anchors(cache, key, identity, ctx)
        if anchors is None:
            with cache.lock(key):
                anchors = _read_anchors(cache, key, identity, ctx)
                if anchors is None:
                    anchors = _learn(cache, key, identity, selector, ctx)
                    runner.stats.shared_computed[LEARNED_ANCHORS] += 1
                    return anchors
        runner.stats.shared_reused[LEARNED_ANCHORS] += 1
        return anchors
    finally:
        for warning in cache.warnings:
            runner.say(f"warning: {warning}")
        cache.warnings.clear()


def anchor_identity(task_run: TaskRun, selector: AnchorSelector, ctx: AnchorContext, spec: PluginSpec,
                    similarity: PluginSpec | None) -> dict[str, Any]:
    """Everything learned anchors depend on: the data set and evaluation protocol (which
    fix the seed's fit draw, also recorded by a digest of its ids and labels), the seed,
    the number of anchors, the identities and views of the encoders whose banks the
    selector sees (not of the held-out ones, which it never sees), the cache keys of the
    anchor pools it declares, the selector's and the similarity's identities, the device
    kind and the numeric precision (:func:`relbench.precision.current`)."""
    from relbench import __version__, precision

    inputs = task_run.task_inputs()
    declared = set(selector.pools())
    pools = sorted(need.key for need in task_run.bank_needs() if need.pool in declared) if declared else []
    return {"relbench": __version__, "protocol": inputs["protocol"], "dataset": inputs["dataset"],
            "evaluation_protocol": inputs["evaluation_protocol"], "seed": ctx.seed, "num_anchors": ctx.num_anchors,
            "draw": _draw_digest(ctx), "encoders": {label: inputs["encoders"][label] for label in sorted(ctx.banks)},
            "excluded": sorted(ctx.excluded),
            "pools": pools, "selector": spec.identity(), "similarity": similarity.identity() if similarity else None,
            "device": ctx.device.type, "precision": precision.current()}


def _draw_digest(ctx: AnchorContext) -> str:
    """SHA-256 of the ids and labels the selector chooses among."""
    labels = None if ctx.labels is None else [str(v) for v in ctx.labels.tolist()]
    return hashlib.sha256(json.dumps([list(ctx.ids), labels], default=str).encode()).hexdigest()


def _learn(cache: ArtefactCache, key: str, identity: dict, selector: AnchorSelector, ctx: AnchorContext) -> Anchors:
    """Run the selector, store its recipe when it can be stored faithfully, return it."""
    read: set[str] = set()

    def pool_banks(name: str):
        read.add(name)
        return ctx.pool_banks(name)

    anchors = selector.select(dataclasses.replace(ctx, pool_banks=pool_banks))
    own_ids = {"encoder_ids": anchors.encoder_ids} if anchors.encoder_ids else {}  # one id list: as before
    try:
        recipe = json.dumps({"ids": list(anchors.ids), "pool": anchors.pool, "info": anchors.info,
                             "weights": anchors.weights is not None, **own_ids})
    except (TypeError, ValueError):  # info that JSON would change: recomputed by every process instead
        return anchors
    if read <= set(selector.pools()):
        import torch

        X = anchors.weights if anchors.weights is not None else torch.zeros(0)
        cache.put(key, X, {**identity, "recipe": json.loads(recipe)})
    return anchors


def _read_anchors(cache: ArtefactCache, key: str, identity: dict, ctx: AnchorContext) -> Anchors | None:
    """The anchors stored under ``key``, on the context's device, or None (none stored,
    or an entry found corrupt or malformed, which is set aside)."""
    from relbench.interfaces import Anchors

    hit = cache.get(key, identity)
    if hit is None:
        return None
    X, meta = hit
    recipe = meta.get("recipe")
    try:
        ids, pool, info, weighted = recipe["ids"], recipe["pool"], recipe["info"], recipe["weights"]
        own_ids = recipe.get("encoder_ids", {})
        if not (isinstance(ids, list) and isinstance(pool, str) and isinstance(info, dict)
                and isinstance(weighted, bool) and isinstance(own_ids, dict)
                and all(isinstance(v, list) and len(v) == len(ids) for v in own_ids.values())):
            raise TypeError("a field has the wrong type")
        if weighted and (X.ndim != 2 or X.shape[1] != len(ids)):
            raise ValueError(f"weights of shape {tuple(X.shape)} for {len(ids)} ids")
        if not weighted and X.numel():
            raise ValueError("weights stored for a recipe without weights")
    except (TypeError, KeyError, ValueError) as exc:
        cache.set_aside(key, f"holds a malformed anchor recipe ({exc})")
        return None
    return Anchors(ids=ids, pool=pool, weights=X.to(ctx.device) if weighted else None, info=info,
                   encoder_ids=own_ids)
