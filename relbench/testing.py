"""Test doubles for plugin authors: run a task kind without encoders or a results store.

:class:`TaskRunDouble` implements :class:`relbench.interfaces.TaskRunAPI` over banks you
build in a test; it stores rows exactly as the runner would (:func:`relbench.rows.flat_row`)
and enforces the runner's contract: a unit must be in the kind's plan, and is computed
at most once. :func:`make_task` builds a real :class:`relbench.task_model.Task` from plugin
classes, without a tasks file::

    task = make_task(MyKind, encoders=["a", "b"], grid={"selectors": [spec(RandomAnchors)]})
    run = TaskRunDouble(task, banks={"train": {...}, "test": {...}}, dataset=data, tmp=tmp_path)
    run.run()
    df = run.frame()   # what the kind's page() would receive

:func:`check_metric` checks a :class:`~relbench.interfaces.Metric`'s declarations (what it
scores, how its samples aggregate) and its vectorised ``compute_weighted`` against its ``compute``.

**Conformance kit.** One check per interface, in the manner of scikit-learn's
``check_estimator``: each runs a plugin instance on tiny synthetic data (or, for data sets
and encoders, on what the author gives it) and raises ``AssertionError`` saying what
failed, on which input, and how to fix it. A check that repeats a call makes it on a
fresh instance built from the plugin's parameters (``type(plugin)(**plugin.params())``),
so state left by one call never hides a fault of the next:

* :func:`check_similarity`: ``n × k`` finite, deterministic, refitted cleanly, inductive
  unless it says otherwise, and keeping the :attr:`~relbench.interfaces.Similarity.invariances`
  it declares (a table names the transforms that broke);
* :func:`check_anchor_selector`: the anchors asked for, from the fit ids (or its own pool),
  realisable in every bank, the same for a seed;
* :func:`check_stitcher`: logits of the right shape; a test sample's prediction ignores the
  other test samples; :class:`~relbench.interfaces.NotAchievable` only by design;
* :func:`check_encoder`: ``n × d`` float32 (``d`` as declared), a stable fingerprint;
* :func:`check_dataset`: aligned splits, labels among the classes, a stable fingerprint;
* :func:`check_regularizer`: a finite scalar loss, with a gradient where it trains (exactly
  zero for a control that declares it adds none);
* :func:`check_task_kind`: unique planned units, each computed once (:class:`TaskRunDouble`);
* :func:`check_space_measure`: a finite float, deterministic, symmetric where declared, a
  space as similar to itself as to nothing else, and the declared invariances kept;
* :func:`check_metric`: a known output, aggregation and direction; a ``mean`` metric's score
  the mean of its per-sample values; vectorised bootstrap scores equal to ``compute``.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import random
import typing
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from relbench import deferred
from relbench.identity import key_json
from relbench.protocol import EvaluationProtocol
from relbench.interfaces import (AGGREGATIONS, INVARIANCES, METRIC_OUTPUTS, AnchorContext, AnchorSelector, Anchors,
                                 Bank, Dataset, DatasetData, Diagnostic, Encoder, EncoderContext, FitContext, Metric,
                                 NotAchievable, Plugin, Prediction, Regularizer, RegularizerBatch, ResultRow,
                                 Similarity, SpaceMeasure, Split, StitchSide, Stitcher, StitcherRole, UnitKey)
from relbench.rows import display_key, flat_row
from relbench.sharing import SharedWork
from relbench.task_model import EncoderSpec, PluginSpec, Task

pd = deferred.load("pandas")
torch = deferred.load("torch")


def _metric_inputs(output: str, rng: np.random.Generator, classes: int, samples: int,
                   cells: int) -> tuple[np.ndarray, np.ndarray]:
    """Random ``y_true`` and ``cells`` predictions ``y_preds`` of ``samples`` samples in the
    shapes a metric scoring ``output`` takes (:data:`~relbench.interfaces.METRIC_OUTPUTS`):
    class indices (some classes missing from the truth, as in a resample), per-class
    scores, real values, or rankings of ``classes`` items (two relevant, three retrieved)."""
    if output == "labels":
        return rng.integers(0, classes - 1, samples), rng.integers(0, classes, (cells, samples))
    if output == "scores":
        return rng.integers(0, classes - 1, samples), rng.normal(size=(cells, samples, classes))
    if output == "regression":
        y_true = rng.normal(size=samples)
        return y_true, y_true + rng.normal(size=(cells, samples))
    items = np.tile(np.arange(max(classes, 3)), (cells + 1, samples, 1))
    rankings = rng.permuted(items, axis=2)
    return rankings[0, :, :2], rankings[1:, :, :3]


def check_metric(metric: Metric, classes: int = 5, samples: int = 40, cells: int = 4, resamples: int = 6,
                 seed: int = 0) -> None:
    """Raise ``AssertionError`` unless ``metric`` declares a known
    :attr:`~relbench.interfaces.Metric.output`, :attr:`~relbench.interfaces.Metric.aggregation`
    and direction, scores random inputs of its output's shapes as finite floats, a
    ``mean`` metric's score is the mean of its ``n`` per-sample values, and
    ``compute_weighted`` equals :meth:`Metric.compute_repeated` (the score of the
    repeated samples) for random bootstrap weights."""
    name = type(metric).__name__
    assert metric.output in METRIC_OUTPUTS, (
        f"{name}.output is {metric.output!r}; declare what it scores, one of {METRIC_OUTPUTS}")
    assert metric.aggregation in AGGREGATIONS, (
        f"{name}.aggregation is {metric.aggregation!r}; declare one of {AGGREGATIONS}")
    assert isinstance(metric.higher_is_better, bool), f"{name}.higher_is_better must be True or False"
    assert isinstance(metric.claim_margin, (int, float)) and metric.claim_margin > 0, (
        f"{name}.claim_margin is {metric.claim_margin!r}; declare the smallest difference a claim counts (> 0)")
    rng = np.random.default_rng(seed)
    y_true, y_preds = _metric_inputs(metric.output, rng, classes, samples, cells)
    scores = [metric.compute(y_true, p) for p in y_preds]
    assert all(isinstance(v, float) and np.isfinite(v) for v in scores), (
        f"{name}.compute returned {scores} on random {metric.output} inputs, not finite floats")
    if metric.aggregation == "mean":
        values = [np.asarray(metric.per_sample(y_true, p), dtype=float) for p in y_preds]
        assert all(v.shape == (samples,) and np.isfinite(v).all() for v in values), (
            f"{name}.per_sample must return {samples} finite values (one per sample), got shapes "
            f"{[v.shape for v in values]}")
        assert np.allclose(scores, [v.mean() for v in values], rtol=1e-9, atol=1e-12), (
            f"{name} declares aggregation 'mean' but its score is not the mean of its per-sample values")
    weights = rng.multinomial(samples, np.full(samples, 1 / samples), size=resamples)
    weights[0] = 1  # the unweighted score is one of the checks
    got = np.asarray(metric.compute_weighted(y_true, y_preds, weights), dtype=float)
    want = metric.compute_repeated(y_true, y_preds, weights)
    assert got.shape == want.shape, f"{name}.compute_weighted returned shape {got.shape}, not {want.shape}"
    assert np.allclose(got, want, rtol=1e-9, atol=1e-12), (
        f"{name}.compute_weighted disagrees with compute on the repeated samples by up to "
        f"{np.abs(got - want).max():.3g}")
    assert np.allclose(got[0], scores, rtol=1e-9, atol=1e-12)


def spec(cls: type, interface: str | None = None, label: str | None = None, **params: Any) -> PluginSpec:
    """A validated-looking plugin choice of ``cls`` with ``params``."""
    return PluginSpec(interface or cls.interface, cls.name, params, label or cls.name, cls, "test 0")


def make_task(kind: type | PluginSpec, *, name: str = "t", encoders: list[str] = (), dataset: str = "data",
              grid: dict[str, list[PluginSpec | None]] | None = None, metrics: list[PluginSpec] = (),
              seeds: list[int] = (0,), num_anchors: int = 20,
              protocol: EvaluationProtocol = EvaluationProtocol(validation=0.0), **kind_params: Any) -> Task:
    """A :class:`Task` of ``kind`` (a class, with ``kind_params``, or a spec) over encoders
    named by label, with ``grid`` (axis → plugin specs) over the axes the kind declares
    (:attr:`~relbench.interfaces.TaskKind.axes`; an axis left out holds what a tasks file
    that omits it gets). The default ``protocol`` has no validation part (nothing tuned);
    to test tuning, pass one with ``validation > 0`` and give the double
    ``"validation"`` banks."""
    kind_spec = kind if isinstance(kind, PluginSpec) else spec(kind, "task_kind", **kind_params)
    return Task(name=name, kind=kind_spec, dataset=PluginSpec("dataset", dataset, {}, dataset),
                encoders=[EncoderSpec("encoder", label, {}, label) for label in encoders],
                grid=_grid(kind_spec.cls, grid or {}), metrics=list(metrics), seeds=list(seeds),
                num_anchors=num_anchors, device="cpu", batch_size=64, protocol=protocol)


def _grid(kind: type, given: dict[str, list[PluginSpec | None]]) -> dict[str, list[PluginSpec | None]]:
    """``given`` over every axis ``kind`` declares; an axis it does not declare is a
    ``TypeError`` (a tasks file would refuse it)."""
    unknown = sorted(set(given) - set(kind.axes))
    if unknown:
        raise TypeError(f"task kind {kind.name!r} declares no grid axis {unknown}; its axes are {list(kind.axes)}")
    return {key: list(given[key]) if key in given else axis.omitted() for key, axis in kind.axes.items()}


class TaskRunDouble:
    """A :class:`~relbench.interfaces.TaskRunAPI` over in-memory banks (see the module)."""

    def __init__(self, task: Task, banks: dict[str, dict[str, Bank]], dataset: DatasetData | None = None,
                 tmp: Path | None = None, modality: str = "image"):
        self.task = task
        self.kind = task.kind.build()
        self.kind.validate(task)  # what loading a tasks file would refuse, the double refuses too
        self.device = torch.device("cpu")
        self._banks, self._data, self._tmp, self._modality = banks, dataset, tmp, modality
        self.shared_log: list[tuple[int, SharedWork]] = []
        self._plan = {key_json(display_key(k)) for k in self.kind.plan(task)}
        self._done: set[str] = set()
        #: the displayed keys of the units computed, in order
        self.computed: list[dict] = []
        self.rows: list[dict] = []

    def run(self) -> None:
        """Let the kind compute every unit of its plan."""
        self.kind.run(self)

    def dataset(self) -> DatasetData:
        """The data set given to the double."""
        return self._data

    def banks(self, split: str, seed: int | None = None) -> dict[str, Bank]:
        """The banks given to the double for ``split`` (the same for every seed; give a
        ``"validation"`` entry to test tuning)."""
        if split not in self._banks:
            raise ValueError(f"the test double was given no {split!r} banks (it has {sorted(self._banks)})")
        return self._banks[split]

    def pool_banks(self, dataset_name: str) -> dict[str, Bank]:
        """Out-of-domain pools are not part of the double."""
        raise ValueError(f"the test double has no out-of-domain pool {dataset_name!r}")

    def anchors(self, seed: int, selector: PluginSpec, excluded: frozenset[str] = frozenset(),
                similarity: PluginSpec | None = None) -> Anchors:
        """The selector run on the training banks (those not excluded)."""
        train = self._banks["train"]
        first = next(iter(train.values()))
        labels = None if first.labels is None else first.labels.cpu().numpy()
        ctx = AnchorContext(num_anchors=self.task.num_anchors, seed=seed, ids=list(first.ids), labels=labels,
                            banks={k: v for k, v in train.items() if k not in excluded}, excluded=frozenset(excluded),
                            device=self.device, views={k: "x" for k in train}, pool_banks=self.pool_banks,
                            similarity=similarity.build() if similarity is not None else None)
        return selector.build().select(ctx)

    def realise(self, anchors: Anchors, label: str) -> torch.Tensor:
        """The anchors in encoder ``label``'s training bank."""
        return anchors.realise(self._banks["train"][label])

    def modality(self, label: str) -> str:
        """The modality given to the double (default ``image``)."""
        return self._modality

    def shared(self, seed: int) -> SharedWork:
        """The seed's shared-work memo (one seed at a time, as the runner keeps it);
        :attr:`shared_log` keeps every seed's memo, so tests can read what was reused."""
        if not self.shared_log or self.shared_log[-1][0] != seed:
            self.shared_log.append((seed, SharedWork()))
        return self.shared_log[-1][1]

    def _checked(self, key: UnitKey) -> str:
        k = key_json(display_key(key))
        if k not in self._plan:
            raise AssertionError(f"unit {display_key(key)} is not in the kind's plan()")
        return k

    def is_done(self, key: UnitKey) -> bool:
        """Whether the unit was computed already by this double."""
        return self._checked(key) in self._done

    @contextlib.contextmanager
    def unit(self, key: UnitKey) -> Iterator[list[ResultRow]]:
        """Collect the unit's rows and keep them as the store would (exceptions propagate)."""
        k = self._checked(key)
        if k in self._done:
            raise AssertionError(f"unit {display_key(key)} computed twice")
        rows: list[ResultRow] = []
        yield rows
        self._done.add(k)
        self.computed.append(display_key(key))
        self.rows += [flat_row(self.task, self.kind, r, display_key(key), {}) for r in rows]

    def figure_path(self, filename: str) -> Path:
        """A path under the double's ``tmp`` folder."""
        path = Path(self._tmp) / "figures" / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def progress(self, iterable: Any = None, desc: str = "", total: int | None = None) -> Any:
        """No bar: the iterable itself."""
        return iterable

    def planned(self) -> int:
        """How many units the kind's plan lists."""
        return len(self._plan)

    def frame(self) -> pd.DataFrame:
        """The rows as the results store would load them."""
        return pd.DataFrame(self.rows)


# --------------------------------------------------------------------------------------
# Conformance kit: shared helpers
# --------------------------------------------------------------------------------------


def _require(ok: bool, plugin: Any, what: str, on: str, fix: str, detail: str = "") -> None:
    """Raise ``AssertionError`` "<plugin>: <what> (on <on>). Fix: <fix>", then ``detail``
    on lines of its own, unless ``ok``."""
    if not ok:
        raise AssertionError(f"{_named(plugin)}: {what} (on {on}). Fix: {fix}." + (f"\n{detail}" if detail else ""))


def _named(plugin: Any) -> str:
    """How a check names the plugin it checks: its class and registered name."""
    cls = type(plugin)
    return f"{cls.__name__} ({cls.interface or 'plugin'} {cls.name!r})" if isinstance(plugin, Plugin) else cls.__name__


def _fresh(plugin: Any) -> Any:
    """A new instance with the same parameters (no state from earlier calls)."""
    return type(plugin)(**plugin.params())


def _blobs(n: int, d: int, classes: int, seed: int, shift: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` float32 rows of ``d`` dimensions around ``classes`` seeded centres, and their
    classes (``0 … classes−1`` in turn)."""
    g = torch.Generator().manual_seed(seed)
    centres = 3 * torch.randn(classes, d, generator=torch.Generator().manual_seed(1234))
    y = torch.arange(n) % classes
    return centres[y] + torch.randn(n, d, generator=g) + shift, y


def _orthogonal(d: int, seed: int) -> torch.Tensor:
    """A seeded random ``d × d`` orthogonal matrix."""
    return torch.linalg.qr(torch.randn(d, d, generator=torch.Generator().manual_seed(seed)))[0]


def _largest_gap(a: torch.Tensor, b: torch.Tensor) -> float:
    """``max |a − b|`` (infinite for different shapes or non-finite entries)."""
    if a.shape != b.shape:
        return float("inf")
    gap = (a.double() - b.double()).abs().max() if a.numel() else torch.tensor(0.0)
    return float(gap) if torch.isfinite(gap) else float("inf")


# --------------------------------------------------------------------------------------
# Similarity
# --------------------------------------------------------------------------------------


def _transforms(d: int, seed: int) -> dict[str, Any]:
    """Each invariance a similarity may declare → a seeded transform of a bank (rows →
    rows), applied to the fit rows, the embeddings and the anchors alike."""
    Q, perm = _orthogonal(d, seed), torch.randperm(d, generator=torch.Generator().manual_seed(seed))
    shift = 3 * torch.randn(d, generator=torch.Generator().manual_seed(seed + 1))
    return {"orthogonal": lambda X: X @ Q, "scale": lambda X: 2.5 * X, "translation": lambda X: X + shift,
            "permutation": lambda X: X[:, perm]}


def _relative(sim: Similarity, fit_rows: torch.Tensor, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """A fresh copy of ``sim`` fitted on ``fit_rows`` (as the runner fits each bank's
    copy on its training rows) and its projection of ``X`` on ``A``, without gradient."""
    copy = _fresh(sim)
    copy.fit(fit_rows.clone())
    with torch.no_grad():
        return copy.project(X.clone(), A.clone())


def check_similarity(sim: Similarity, n: int = 40, d: int = 8, k: int = 6, seed: int = 0, rtol: float = 1e-3) -> None:
    """Raise ``AssertionError`` unless the similarity ``sim``, on ``n`` random rows, ``k``
    anchors and ``d`` dimensions (a fresh copy, fitted on ``3n`` training rows, each time):

    * projects to finite ``n × k`` features (``n × mk`` for a concatenation of ``m`` parts);
    * gives the same output for the same input, also after a refit on other rows and then
      on the training rows (:meth:`~Similarity.fit` replaces its state);
    * gives a row the same features whatever other rows are projected with it, unless it
      is :meth:`~Similarity.transductive`;
    * keeps every feature within ``rtol`` of their largest magnitude under each transform
      its :attr:`~Similarity.invariances` name, applied to the fit rows, the rows and the
      anchors alike; a failure prints a table of all four
      :data:`~relbench.interfaces.INVARIANCES`."""
    fit_rows, _ = _blobs(3 * n, d, 3, seed)
    X, _ = _blobs(n, d, 3, seed + 1)
    A = fit_rows[:k]
    on = f"{n} random rows, {k} anchors, {d} dimensions, fitted on {3 * n} rows"
    rel = _relative(sim, fit_rows, X, A)
    _require(isinstance(rel, torch.Tensor) and rel.dim() == 2 and len(rel) == n and rel.shape[1] % k == 0
             and rel.shape[1] > 0, sim, f"project(X, A) returned {_shape(rel)}, not {n} × {k} (or a multiple of {k})",
             on, "return one row per row of X and one column per anchor (per part, for a concatenation)")
    _require(bool(torch.isfinite(rel).all()), sim, "project(X, A) returned non-finite values", on,
             "guard divisions and logarithms (clamp norms, add an eps)")
    _require(torch.equal(rel, _relative(sim, fit_rows, X, A)), sim, "two projections of the same input differ", on,
             "make fit() and project() deterministic (seed every random draw with a generator of its own)")
    _check_refit(sim, fit_rows, X, A, rel, on)
    if not sim.transductive():
        part = _relative(sim, fit_rows, X[: n // 2], A)
        _require(_largest_gap(part, rel[: n // 2]) <= rtol * _magnitude(rel), sim,
                 "a row's features change with the other rows projected with it", on,
                 "normalise with statistics of the fit() rows, or declare transductive() True")
    _check_invariances(sim, fit_rows, X, A, rel, rtol, on)


def _shape(value: Any) -> str:
    """A tensor's shape, or the type of what is not a tensor, for messages."""
    return f"shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else type(value).__name__


def _magnitude(rel: torch.Tensor) -> float:
    """The scale tolerances are relative to: the largest magnitude (at least 1e-6)."""
    return max(float(rel.abs().max()), 1e-6)


def _check_refit(sim: Similarity, fit_rows: torch.Tensor, X: torch.Tensor, A: torch.Tensor, rel: torch.Tensor,
                 on: str) -> None:
    """Fitting on other rows and then on ``fit_rows`` again projects as one fit does."""
    if type(sim).fit is Similarity.fit:
        return
    copy = _fresh(sim)
    copy.fit(7 * fit_rows.flip(0)[: len(fit_rows) // 2] - 1)
    copy.fit(fit_rows.clone())
    with torch.no_grad():
        again = copy.project(X.clone(), A.clone())
    _require(_largest_gap(again, rel) <= 1e-6 * _magnitude(rel), sim,
             "after fit() on other rows and fit() on the training rows again, project() differs from one fit()",
             on, "let fit() replace every fitted statistic instead of accumulating them")


def _check_invariances(sim: Similarity, fit_rows: torch.Tensor, X: torch.Tensor, A: torch.Tensor,
                       rel: torch.Tensor, rtol: float, on: str) -> None:
    """Each declared invariance holds within ``rtol``; else a table of every transform."""
    declared = set(type(sim).invariances)
    unknown = declared - set(INVARIANCES)
    _require(not unknown, sim, f"declares unknown invariances {sorted(unknown)}", on,
             f"name only {', '.join(INVARIANCES)} in `invariances`")
    if not declared:
        return
    tolerance = rtol * _magnitude(rel)
    gaps = {name: _largest_gap(_relative(sim, t(fit_rows), t(X), t(A)), rel)
            for name, t in _transforms(X.shape[1], seed=7).items()}
    broken = sorted(name for name in declared if not gaps[name] <= tolerance)
    rows = [f"  {'transform':<12} {'declared':<9} {'max |Δ|':<10} result"]
    for name, gap in gaps.items():
        verdict = ("FAILED" if name in broken else "ok") if name in declared else "-"
        rows.append(f"  {name:<12} {'yes' if name in declared else 'no':<9} {gap:<10.3g} {verdict}")
    _require(not broken, sim, f"declares invariance to {', '.join(broken)} but its relative features change by more "
             f"than {tolerance:.3g} ({rtol:g} of their largest magnitude)", on,
             f"remove {', '.join(broken)} from {type(sim).__name__}.invariances, or make project() invariant to "
             f"{'it' if len(broken) == 1 else 'them'}", "\n".join(rows))


# --------------------------------------------------------------------------------------
# Space measure
# --------------------------------------------------------------------------------------


def _space_pair(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Float64 spaces of ``n`` samples: ``X`` (``d`` dims, clustered), a related ``Y``
    (a random linear map of ``X`` into ``d + 3`` dims plus noise) and an unrelated ``Z``."""
    rng = np.random.default_rng(seed)
    X = _blobs(n, d, 4, seed)[0].double().numpy()
    Y = X @ rng.normal(size=(d, d + 3)) + 0.3 * rng.normal(size=(n, d + 3))
    return X, Y, rng.normal(size=(n, d))


def _space_transforms(d: int, seed: int) -> dict[str, Any]:
    """Each invariance a space measure may declare → a seeded float64 transform of a
    space (rows → rows), as :func:`_transforms` makes them for a bank."""
    rng = np.random.default_rng(seed)
    Q, perm, shift = np.linalg.qr(rng.normal(size=(d, d)))[0], rng.permutation(d), 3 * rng.normal(size=d)
    return {"orthogonal": lambda X: X @ Q, "scale": lambda X: 2.5 * X, "translation": lambda X: X + shift,
            "permutation": lambda X: X[:, perm]}


def _measured(measure: SpaceMeasure, X: np.ndarray, Y: np.ndarray) -> float:
    """A fresh copy's measure of copies of ``X`` and ``Y``."""
    return _fresh(measure).measure(X.copy(), Y.copy())


def check_space_measure(measure: SpaceMeasure, n: int = 60, d: int = 6, seed: int = 0, tol: float = 1e-6) -> None:
    """Raise ``AssertionError`` unless the space measure ``measure``, on spaces of ``n``
    samples (``X`` of ``d`` dims, a related ``Y`` of ``d + 3``, an unrelated ``Z``):

    * declares its direction (``higher_is_similar``) and symmetry as booleans;
    * returns a finite float, the same twice;
    * returns the same (within ``tol``, relative to its magnitude) with ``X`` and ``Y``
      swapped, where it declares :attr:`~relbench.interfaces.SpaceMeasure.symmetric`;
    * scores ``X`` against itself at least as similar as against ``Y`` and ``Z``;
    * keeps its value within ``tol`` under each transform of ``X`` alone that its
      :attr:`~relbench.interfaces.SpaceMeasure.invariances` name; a failure prints a
      table of all four :data:`~relbench.interfaces.INVARIANCES`."""
    cls = type(measure)
    on = f"{n} samples, {d} and {d + 3} dimensions"
    _require(isinstance(cls.higher_is_similar, bool) and isinstance(cls.symmetric, bool), measure,
             "higher_is_similar and symmetric must be True or False", on, "declare both as booleans")
    X, Y, Z = _space_pair(n, d, seed)
    value = _measured(measure, X, Y)
    _require(isinstance(value, float) and np.isfinite(value), measure, f"measure(X, Y) returned {value!r}", on,
             "return a finite Python float (guard divisions by zero norms)")
    _require(value == _measured(measure, X, Y), measure, "two measures of the same spaces differ", on,
             "make measure() deterministic (no unseeded random draws)")
    scale = tol * max(abs(value), 1.0)
    if cls.symmetric:
        swapped = _measured(measure, Y, X)
        _require(abs(swapped - value) <= scale, measure, f"declares symmetric but measure(Y, X) = {swapped:.6g} "
                 f"differs from measure(X, Y) = {value:.6g}", on, "make it symmetric, or declare symmetric False")
    itself = _measured(measure, X, X)
    sign = 1.0 if cls.higher_is_similar else -1.0
    others = {"a related space": value, "an unrelated space": _measured(measure, X, Z)}
    worse = [f"{what} ({v:.6g})" for what, v in others.items() if sign * (itself - v) < -scale]
    _require(not worse, measure, f"scores X against itself ({itself:.6g}) less similar than against "
             f"{', '.join(worse)}", on, "check higher_is_similar: it says which way is more similar")
    _check_measure_invariances(measure, X, Y, value, scale, on)


def _check_measure_invariances(measure: SpaceMeasure, X: np.ndarray, Y: np.ndarray, value: float, tolerance: float,
                               on: str) -> None:
    """Each declared invariance (a transform of ``X`` alone) holds within ``tolerance``."""
    declared = set(type(measure).invariances)
    unknown = declared - set(INVARIANCES)
    _require(not unknown, measure, f"declares unknown invariances {sorted(unknown)}", on,
             f"name only {', '.join(INVARIANCES)} in `invariances`")
    if not declared:
        return
    gaps = {name: abs(_measured(measure, t(X), Y) - value) for name, t in _space_transforms(X.shape[1], 7).items()}
    broken = sorted(name for name in declared if not gaps[name] <= tolerance)
    rows = [f"  {'transform':<12} {'declared':<9} {'|Δ|':<10} result"]
    for name, gap in gaps.items():
        verdict = ("FAILED" if name in broken else "ok") if name in declared else "-"
        rows.append(f"  {name:<12} {'yes' if name in declared else 'no':<9} {gap:<10.3g} {verdict}")
    _require(not broken, measure, f"declares invariance to {', '.join(broken)} but its value changes by more than "
             f"{tolerance:.3g}", on, f"remove {', '.join(broken)} from {type(measure).__name__}.invariances, or make "
             f"measure() invariant to {'it' if len(broken) == 1 else 'them'}", "\n".join(rows))


# --------------------------------------------------------------------------------------
# Anchor selector
# --------------------------------------------------------------------------------------


def _anchor_banks(n: int, seed: int, prefix: str) -> dict[str, Bank]:
    """Training banks ``a``, ``b`` (a rotation of ``a``), ``wide`` (another width) and
    ``held`` over ``n`` shared sample ids ``<prefix><i>``."""
    X, y = _blobs(n, 6, 3, seed)
    ids = [f"{prefix}{i}" for i in range(n)]
    spaces = {"a": X, "b": 2 * X @ _orthogonal(6, seed), "wide": torch.cat([X, X[:, :3] ** 2], dim=1),
              "held": X @ _orthogonal(6, seed + 1)}
    return {name: Bank(name, "train", Z, ids, y) for name, Z in spaces.items()}


def _anchor_context(num_anchors: int, seed: int, n: int = 60) -> AnchorContext:
    """A context over visible banks ``a``, ``b``, ``wide`` (``held`` excluded, as for a
    zero-shot evaluation); any out-of-domain pool is 40 samples ``<pool>-<i>``."""
    def visible(banks: dict[str, Bank]) -> dict[str, Bank]:
        return {k: v for k, v in banks.items() if k != "held"}

    banks = _anchor_banks(n, 0, "fit")
    return AnchorContext(num_anchors=num_anchors, seed=seed, ids=list(banks["a"].ids),
                         labels=banks["a"].labels.numpy(), banks=visible(banks), excluded=frozenset({"held"}),
                         device=torch.device("cpu"), views={k: "x" for k in banks},
                         pool_banks=lambda name: visible(_anchor_banks(40, 1, f"{name}-")))


def check_anchor_selector(selector: AnchorSelector, num_anchors: int = 8, seeds: tuple[int, int] = (0, 1),
                          fewer_allowed: bool = False) -> None:
    """Raise ``AssertionError`` unless the selector, asked for ``num_anchors`` anchors of
    60 fit samples (banks ``a``, ``b``, ``wide`` visible, ``held`` held out), for each of
    ``seeds``:

    * returns :class:`Anchors`, exactly ``num_anchors`` of them (with ``fewer_allowed``,
      for a selector that stops early by design: from one to ``num_anchors``);
    * draws their ids, and every encoder's own (``encoder_ids``), from the fit ids (or from
      its own out-of-domain pool, when ``pool`` names one), without repeating one unless it
      mixes them with ``weights`` (a finite ``anchors × ids`` matrix);
    * can be realised in every bank, the held-out one included;
    * returns the same anchors again for the same seed, whatever the global random state;
    * when it declares :attr:`~relbench.interfaces.AnchorSelector.prefix_nested`, returns
      the first ``num_anchors // 2`` of those anchors when asked for that many.

    Different seeds may give different anchors or the same ones."""
    for seed in seeds:
        on = f"seed {seed}, {num_anchors} anchors asked of 60 fit samples in banks a, b, wide (held out: held)"
        ctx = _anchor_context(num_anchors, seed)
        with _global_random_state(seed + 98):
            anchors = _fresh(selector).select(ctx)
        _require(isinstance(anchors, Anchors), selector, f"select() returned {type(anchors).__name__}", on,
                 "return relbench.interfaces.Anchors(ids=…)")
        _check_anchor_count(selector, anchors, num_anchors, fewer_allowed, on)
        _check_anchor_ids(selector, anchors, ctx, on)
        _check_anchor_realised(selector, anchors, on)
        with _global_random_state(seed + 99):
            again = _fresh(selector).select(_anchor_context(num_anchors, seed))
        _require(again.ids == anchors.ids and again.pool == anchors.pool
                 and again.encoder_ids == anchors.encoder_ids
                 and _same_weights(again.weights, anchors.weights), selector,
                 "two selections with the same seed differ", on,
                 "draw every random number from a generator seeded with ctx.seed "
                 "(relbench.training.seeded_generator), not from the global random state")
        if selector.prefix_nested:
            _check_prefix_nested(selector, anchors, num_anchors // 2, seed, on)


def _check_prefix_nested(selector: AnchorSelector, anchors: Anchors, fewer: int, seed: int, on: str) -> None:
    """Asked for ``fewer`` anchors, the selector returns the first ``fewer`` of ``anchors``."""
    smaller = _fresh(selector).select(_anchor_context(fewer, seed))
    prefix = {e: ids[:len(smaller)] for e, ids in anchors.encoder_ids.items()}
    _require(smaller.ids == anchors.ids[:len(smaller)] and smaller.encoder_ids == prefix
             and smaller.weights is None and anchors.weights is None, selector,
             f"declares prefix_nested, but its {len(smaller)} anchors asked for {fewer} are not the first of its "
             f"{len(anchors)}", on, "return the anchors in an order whose prefixes are the smaller selections, or "
             "leave prefix_nested False")


@contextlib.contextmanager
def _global_random_state(seed: int) -> Iterator[None]:
    """torch's, numpy's and Python's global random generators seeded with ``seed``, and
    restored afterwards."""
    numpy_state, python_state = np.random.get_state(), random.getstate()
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        np.random.seed(seed)
        random.seed(seed)
        try:
            yield
        finally:
            np.random.set_state(numpy_state)
            random.setstate(python_state)


def _check_anchor_count(selector: AnchorSelector, anchors: Anchors, asked: int, fewer_allowed: bool, on: str) -> None:
    """As many anchors as asked (from one to that many, with ``fewer_allowed``)."""
    got = len(anchors)
    ok = 1 <= got <= asked if fewer_allowed else got == asked
    _require(ok, selector, f"returned {got} anchors", on,
             "return ctx.num_anchors anchors" + ("" if fewer_allowed else " (or pass fewer_allowed=True to the check "
                                                 "when the selector stops early by design)"))


def _check_anchor_ids(selector: AnchorSelector, anchors: Anchors, ctx: AnchorContext, on: str) -> None:
    """Ids (``ids`` and every encoder's own, ``encoder_ids``) from the fit ids (or the named
    pool's), distinct unless mixed by finite weights."""
    allowed = set(ctx.ids if anchors.pool == "train" else next(iter(ctx.pool_banks(anchors.pool).values())).ids)
    where = "the fit ids (ctx.ids)" if anchors.pool == "train" else f"pool {anchors.pool!r}'s ids"
    for ids in (anchors.ids, *anchors.encoder_ids.values()):
        strays = [i for i in ids if i not in allowed]
        _require(not strays, selector, f"anchor ids {strays[:5]} are not among {where}", on,
                 "draw anchors from ctx.ids only (never validation or test samples), or from the pool the "
                 "Anchors name")
        if anchors.weights is None:
            _require(len(set(ids)) == len(ids), selector, "the same sample is an anchor twice", on,
                     "draw without replacement")
    if anchors.weights is None:
        return
    W = anchors.weights
    _require(isinstance(W, torch.Tensor) and W.shape == (len(anchors), len(anchors.ids))
             and bool(torch.isfinite(W).all()), selector,
             f"weights of {_shape(W)} for {len(anchors.ids)} ids are not a finite anchors × ids matrix", on,
             "give Anchors.weights one finite row per anchor and one column per id")


def _check_anchor_realised(selector: AnchorSelector, anchors: Anchors, on: str) -> None:
    """Finite ``anchors × d`` in every bank of the pool, the held-out one included."""
    banks = _anchor_banks(60, 0, "fit") if anchors.pool == "train" else _anchor_banks(40, 1, f"{anchors.pool}-")
    for name, bank in banks.items():
        A = anchors.realise(bank)
        _require(A.shape == (len(anchors), bank.dim) and bool(torch.isfinite(A).all()), selector,
                 f"the anchors realised in bank {name!r} are {_shape(A)}, not finite {len(anchors)} × {bank.dim}",
                 on, "return ids every bank holds (and finite weights)")


def _same_weights(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    """Both without weights, or with equal ones."""
    return (a is None) == (b is None) and (a is None or torch.equal(a, b))


# --------------------------------------------------------------------------------------
# Stitcher
# --------------------------------------------------------------------------------------


@dataclasses.dataclass
class _CheckCosine(Similarity):
    """Plain cosine: the similarity :func:`check_stitcher` uses unless given one."""

    name: ClassVar[str] = "cosine"

    def project(self, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(X, dim=1) @ torch.nn.functional.normalize(A, dim=1).T


class _StitchProblem:
    """Three classes in 6 dimensions seen by encoders ``a``, ``b`` (a rotation and
    rescaling of ``a``) and ``wide`` (9 dimensions): 60 training rows, 30 test rows
    ``test<i>``, and 20 other test rows ``other<i>`` from a shifted distribution; 12
    anchors among the training rows."""

    ENCODERS = ("a", "b", "wide")

    def __init__(self, similarity: Similarity):
        self.similarity = similarity
        self.rows = {"train": _blobs(60, 6, 3, 0), "test": _blobs(30, 6, 3, 1), "other": _blobs(20, 6, 3, 2, 4.0)}
        self.Q = _orthogonal(6, 0)

    def space(self, encoder: str, X: torch.Tensor) -> torch.Tensor:
        """The base rows ``X`` as encoder ``encoder`` embeds them."""
        return {"a": X, "b": 2 * X @ self.Q, "wide": torch.cat([X, X[:, :3] ** 2], dim=1)}[encoder]

    def bank(self, encoder: str, split: str, parts: dict[str, slice]) -> Bank:
        """The rows ``parts`` (part name → slice) of the base data in ``encoder``'s space."""
        X = torch.cat([self.rows[p][0][sl] for p, sl in parts.items()])
        y = torch.cat([self.rows[p][1][sl] for p, sl in parts.items()])
        ids = [f"{p}{i}" for p, sl in parts.items() for i in range(len(self.rows[p][1]))[sl]]
        return Bank(encoder, split, self.space(encoder, X), ids, y)

    def side(self, encoder: str, test: dict[str, slice]) -> StitchSide:
        """A fresh side of ``encoder`` whose test bank holds the rows ``test``."""
        train = self.bank(encoder, "train", {"train": slice(None)})
        similarity = _fresh(self.similarity)
        similarity.fit(train.X)
        return StitchSide(encoder, train, self.bank(encoder, "test", test), train.X[:12].clone(), similarity)


#: the test rows a source is evaluated on; the same first 10 among other samples; the
#: target's test rows (all of them: a stitcher may compare a source's rows with them)
_ALL_TEST = {"test": slice(None)}
_MIXED_TEST = {"test": slice(0, 10), "other": slice(None)}
_TARGET_TEST = {"test": slice(None), "other": slice(None)}


def check_stitcher(stitcher: Stitcher, similarity: Similarity | None = None,
                   evaluation: Literal["inductive", "transductive"] = "inductive", modality: str = "image",
                   rtol: float = 1e-4) -> None:
    """Raise ``AssertionError`` unless the stitcher, fitted (a fresh copy, seed 0, no
    regularizers, ``evaluation`` as the protocol sets it) on encoder ``a``'s 60 training
    rows of 3 classes, for sources ``a``, ``b`` (a rotation of ``a``) and ``wide`` (another
    width), each with 30 test rows:

    * predicts finite ``30 × 3`` logits, with :class:`~relbench.interfaces.Diagnostic`
      extras;
    * raises :class:`NotAchievable` (and nothing else) only for ``wide``, a pair that may
      be impossible by design, or, being :attr:`~Stitcher.diagonal_only`, for ``b``;
    * is inductive: gives each of the first 10 test rows the same logits (within ``rtol``
      of their largest magnitude) when the 20 others are replaced by other samples.
      Skipped under ``evaluation="transductive"`` or with a :meth:`~Similarity.transductive`
      similarity: a stitcher may be transductive only when the protocol or the similarity
      says so.

    ``similarity`` (default: plain cosine) is fitted on each encoder's training rows. Its
    :attr:`~Stitcher.role` must be one of :data:`~relbench.interfaces.StitcherRole`'s values."""
    roles = typing.get_args(StitcherRole)
    assert stitcher.role in roles, f"{type(stitcher).__name__}.role is {stitcher.role!r}; declare one of {roles}"
    problem = _StitchProblem(similarity or _CheckCosine())
    fitted = _fresh(stitcher)
    ctx = FitContext(seed=0, device=torch.device("cpu"), num_classes=3, modality=modality, regularizers=[],
                     evaluation=evaluation)
    fitted.fit(problem.side("a", _TARGET_TEST), ctx)
    inductive = evaluation == "inductive" and not problem.similarity.transductive()
    for source in problem.ENCODERS:
        on = f"target a (60 training rows, 3 classes), source {source} (30 test rows), {evaluation} evaluation"
        logits = _stitched(fitted, problem.side(source, _ALL_TEST), source, on)
        if logits is None:
            continue
        if inductive:
            mixed = _stitched(fitted, problem.side(source, _MIXED_TEST), source, on)
            gap = float("inf") if mixed is None else _largest_gap(mixed[:10], logits[:10])
            _require(gap <= rtol * _magnitude(logits), stitcher,
                     f"a test sample's logits change by {gap:.3g} when the other test samples change", on,
                     "predict each test row on its own: fix normalisation statistics on the training rows "
                     "(relbench.training.fix_statistics), or let only FitContext.evaluation='transductive' use "
                     "statistics of the test batch")


def _stitched(stitcher: Stitcher, source: StitchSide, name: str, on: str) -> torch.Tensor | None:
    """The logits predicted for ``source`` (checked), or None where NotAchievable is allowed."""
    n = len(source.test.ids)
    try:
        pred = stitcher.predict(source)
    except NotAchievable as exc:
        _require(name == "wide" or (name != "a" and type(stitcher).diagonal_only), stitcher,
                 f"predict() raised NotAchievable ({exc})", on,
                 "raise NotAchievable only for pairs impossible by design (set diagonal_only = True for a "
                 "reference evaluated on its own encoder only)")
        return None
    except Exception as exc:  # noqa: BLE001 - any other failure is the check's finding
        raise AssertionError(f"{_named(stitcher)}: predict() raised {type(exc).__name__}: {exc} (on {on}). Fix: "
                             f"predict, or raise NotAchievable for a pair impossible by design.") from exc
    logits = pred.logits if isinstance(pred, Prediction) else None
    _require(isinstance(logits, torch.Tensor) and tuple(logits.shape) == (n, 3) and bool(torch.isfinite(logits).all()),
             stitcher, f"predict() returned {_shape(logits)} logits, not finite {n} × 3", on,
             "return Prediction(logits=…) with one row per source test row and one column per class")
    bad = [k for k, v in pred.extras.items() if not isinstance(v, Diagnostic)]
    _require(not bad, stitcher, f"extras {bad} are not Diagnostic", on,
             "wrap each extra in Diagnostic(value, direction)")
    return logits


# --------------------------------------------------------------------------------------
# Encoder and data set
# --------------------------------------------------------------------------------------


def check_encoder(encoder: Encoder, ctx: EncoderContext, items: Sequence[Any] | None = None) -> None:
    """Raise ``AssertionError`` unless the encoder, on ``items`` (default: the first 32
    items of ``ctx.train``'s view ``ctx.view``):

    * has a string fingerprint (the embedding cache's key) that is the same twice, the
      same for a fresh instance with the same parameters, and the same after
      :meth:`~Encoder.setup` and :meth:`~Encoder.encode`;
    * encodes the items into a finite float32 ``len(items) × d`` tensor, ``d`` the width
      the class declares as ``dim: ClassVar[int]``, if it declares one."""
    items = list(ctx.train.views[ctx.view][:32]) if items is None else list(items)
    on = f"{len(items)} items of view {ctx.view!r} of data set {ctx.dataset.name!r}"
    fingerprint = encoder.fingerprint(ctx)
    _require(isinstance(fingerprint, str), encoder, f"fingerprint() returned {type(fingerprint).__name__}", on,
             "return a string (a hash of the weights, or '' when the parameters determine them)")
    again = {"twice": encoder.fingerprint(ctx), "of a fresh instance": _fresh(encoder).fingerprint(ctx)}
    encoder.setup(ctx)
    X = encoder.encode(items, ctx)
    again["after encode()"] = encoder.fingerprint(ctx)
    for when, other in again.items():
        _require(other == fingerprint, encoder, f"the fingerprint {when} is {other!r}, not {fingerprint!r}", on,
                 "derive the fingerprint from the parameters and the weights' content only (no ids, times, "
                 "or state set by setup)")
    _require(isinstance(X, torch.Tensor) and X.dtype == torch.float32, encoder,
             f"encode() returned {X.dtype if isinstance(X, torch.Tensor) else type(X).__name__}, not float32",
             on, "return a torch.float32 tensor (e.g. .float())")
    _require(X.dim() == 2 and len(X) == len(items), encoder,
             f"encode() returned {_shape(X)}, not {len(items)} × d", on, "return one row per item")
    _require(bool(torch.isfinite(X).all()), encoder, "encode() returned non-finite values", on,
             "guard normalisations against zero norms")
    declared = _declared_dim(encoder)
    _require(declared is None or X.shape[1] == declared, encoder,
             f"encode() returned width {X.shape[1]}, but the encoder declares dim {declared}", on,
             "return embeddings of the declared width, or correct `dim`")


def _declared_dim(encoder: Encoder) -> int | None:
    """The width a class declares with ``dim: ClassVar[int]`` (a *parameter* named ``dim``
    may mean something else, e.g. the width of tables trained here only)."""
    fields = {f.name for f in dataclasses.fields(encoder)} if dataclasses.is_dataclass(encoder) else set()
    dim = getattr(type(encoder), "dim", None)
    return dim if isinstance(dim, int) and "dim" not in fields else None


def check_dataset(dataset: Dataset) -> None:
    """Raise ``AssertionError`` unless the data set loads :class:`DatasetData` with:

    * ``train`` and ``test`` splits, each of distinct string ids, with every view named in
      ``view_modalities`` holding one item per id, and labels (if any) one integer per id
      in ``0 … len(class_names)−1``;
    * a non-empty string fingerprint, and the same fingerprint and ids when a fresh
      instance loads it again."""
    data = dataset.load()
    on = f"{_named(dataset)}.load() with parameters {dataset.params()}"
    _require(isinstance(data, DatasetData), dataset, f"load() returned {type(data).__name__}", on,
             "return relbench.interfaces.DatasetData")
    _require({"train", "test"} <= set(data.splits), dataset, f"the splits are {sorted(data.splits)}", on,
             "provide a 'train' and a 'test' split")
    for name, split in data.splits.items():
        _check_split(dataset, data, split, f"split {name!r} of {on}")
    _require(isinstance(data.fingerprint, str) and bool(data.fingerprint), dataset,
             f"the fingerprint is {data.fingerprint!r}", on, "hash the content (and the parameters) into a string")
    again = _fresh(dataset).load()
    _require(again.fingerprint == data.fingerprint, dataset,
             f"a second load's fingerprint is {again.fingerprint!r}, not {data.fingerprint!r}", on,
             "make load() deterministic, and hash content only (no paths, times or random state)")
    _require(all(again.splits[k].ids == s.ids for k, s in data.splits.items()), dataset,
             "a second load gives other ids", on, "seed every subsample")


def _check_split(dataset: Dataset, data: DatasetData, split: Split, on: str) -> None:
    """Distinct string ids, every declared view aligned with them, labels among the classes."""
    n = len(split.ids)
    _require(len(set(split.ids)) == n and all(isinstance(i, str) for i in split.ids), dataset,
             "sample ids are not distinct strings", on, "give every sample one stable string id")
    _require(set(split.views) == set(data.view_modalities), dataset,
             f"the views are {sorted(split.views)}, the declared ones {sorted(data.view_modalities)}", on,
             "give every split every view named in view_modalities")
    uneven = {v: len(items) for v, items in split.views.items() if len(items) != n}
    _require(not uneven, dataset, f"views {uneven} do not have {n} items, one per id", on, "align views with ids")
    if split.labels is None:
        return
    labels = np.asarray(split.labels)
    _require(len(labels) == n and np.issubdtype(labels.dtype, np.integer), dataset,
             f"{len(labels)} labels of dtype {labels.dtype} for {n} ids", on, "give one integer label per id")
    _require(n == 0 or (labels.min() >= 0 and labels.max() < len(data.class_names)), dataset,
             f"labels span {labels.min() if n else '-'}…{labels.max() if n else '-'} with "
             f"{len(data.class_names)} class names", on, "use class indices 0 … len(class_names)−1")


# --------------------------------------------------------------------------------------
# Regularizer and task kind
# --------------------------------------------------------------------------------------


def _regularizer_batch(shape: tuple[int, int]) -> tuple[RegularizerBatch, torch.Tensor]:
    """A class-balanced batch of ``shape`` (classes, samples per class): bank ``a``
    trained (its embeddings a leaf that takes gradients, returned too), bank ``b`` a
    fixed partner; relative features are cosines to 6 anchors, through the graph."""
    classes, per_class = shape
    X, y = _blobs(classes * per_class, 6, classes, 0)
    trained = X.clone().requires_grad_(True)
    partner = 2 * X @ _orthogonal(6, 0)
    anchors = X[:6].detach()
    cosine = _CheckCosine()
    batch = RegularizerBatch(labels=y, embeddings={"a": trained, "b": partner},
                             relative={"a": cosine.project(trained, anchors),
                                       "b": cosine.project(partner, anchors @ _orthogonal(6, 0) * 2)},
                             trained="a")
    return batch, trained


def check_regularizer(regularizer: Regularizer, steps: int = 4) -> None:
    """Raise ``AssertionError`` unless the regularizer, :meth:`~Regularizer.prepared` for
    ``steps`` steps on one class-balanced batch (of its :meth:`~Regularizer.batch_shape`,
    else 3 classes × 8 samples; bank ``a`` trained, bank ``b`` its fixed partner):

    * returns a regularizer whose :meth:`~Regularizer.loss` on that batch is a finite
      scalar tensor and whose diagnostics are :class:`Diagnostic`;
    * where it adds no loss (:attr:`~Regularizer.adds_loss` False: a same-budget
      control), returns a loss of exactly zero;
    * else, where it trains something (it :attr:`~Regularizer.needs_adapter`), gives the
      trained bank's embeddings a finite, non-zero gradient."""
    shape = regularizer.batch_shape() or (3, 8)
    batch, trained = _regularizer_batch(shape)
    on = (f"a batch of {shape[0]} classes × {shape[1]} samples, bank a trained (6 dimensions), bank b its partner, "
          f"cosines to 6 anchors")
    ready = _fresh(regularizer).prepared([batch], steps)
    _require(isinstance(ready, Regularizer), regularizer, f"prepared() returned {type(ready).__name__}", on,
             "return the regularizer (self, or a configured copy)")
    loss = ready.loss(batch)
    _require(isinstance(loss, torch.Tensor) and loss.dim() == 0 and bool(torch.isfinite(loss)), regularizer,
             f"loss() returned {_shape(loss)}, not a finite scalar tensor", on,
             "reduce to one number (e.g. .mean()) and guard divisions")
    bad = [k for k, v in ready.diagnostics().items() if not isinstance(v, Diagnostic)]
    _require(not bad, regularizer, f"diagnostics {bad} are not Diagnostic", on,
             "wrap each one in Diagnostic(value, direction)")
    if not type(regularizer).adds_loss:
        _require(loss.item() == 0.0, regularizer, f"it declares adds_loss = False but its loss is {loss.item()}", on,
                 "return an exact zero (e.g. 0 * batch.embeddings[batch.trained].sum()), or declare adds_loss = True")
        return
    if not type(regularizer).needs_adapter:
        return
    _require(loss.requires_grad, regularizer, "the loss carries no gradient", on,
             "compute it from the batch's tensors without .detach(), .item() or numpy")
    loss.backward()
    grad = trained.grad
    _require(grad is not None and bool(torch.isfinite(grad).all()) and bool(grad.abs().sum() > 0), regularizer,
             "the trained bank's embeddings get no finite, non-zero gradient", on,
             "let the loss depend differentiably on batch.embeddings or batch.relative of batch.trained")


def check_task_kind(kind: type | PluginSpec, banks: dict[str, dict[str, Bank]], dataset: DatasetData | None = None,
                    tmp: Path | None = None, **task: Any) -> TaskRunDouble:
    """Raise ``AssertionError`` unless, for the task :func:`make_task` builds from ``kind``
    and ``task`` (its ``encoders`` default to the labels of ``banks["train"]``):

    * the kind's :meth:`~relbench.interfaces.TaskKind.plan` lists unique unit keys, the
      same twice;
    * running it in a :class:`TaskRunDouble` over ``banks`` and ``dataset`` computes every
      planned unit exactly once, and nothing when run again (every unit is then done);
    * every name in its :attr:`~relbench.interfaces.TaskKind.presentation_params` is one
      of its parameters;
    * what it declares for the board and the summary export holds on those rows: its
      :attr:`~relbench.interfaces.TaskKind.matrix_axes` are two of its columns and every
      matrix cell names both; every curve cell names its
      :attr:`~relbench.interfaces.TaskKind.curve_axis`; every summary cell has a
      ``metric``, a ``score`` and ``n``.

    Returns the run, for further checks of its rows."""
    task.setdefault("encoders", list(banks.get("train", {})))
    made = make_task(kind, **task)
    run = TaskRunDouble(made, banks, dataset=dataset, tmp=tmp)
    on = f"task {made.name!r} of kind {made.kind.label!r} with seeds {made.seeds} and encoders {task['encoders']}"
    unknown = sorted(set(run.kind.presentation_params) - set(run.kind.params()))
    _require(not unknown, run.kind, f"presentation_params names {unknown}, which are not its parameters", on,
             "name fields of the kind (its tasks.yaml `params:`) there, or remove them")
    keys = [key_json(display_key(k)) for k in run.kind.plan(made)]
    repeated = sorted(k for k, count in collections.Counter(keys).items() if count > 1)
    _require(not repeated, run.kind, f"plan() lists units more than once: {repeated[:3]}", on,
             "give every unit a distinct key (add the column that tells them apart)")
    _require(keys == [key_json(display_key(k)) for k in run.kind.plan(made)], run.kind,
             "two plans of the same task differ", on, "plan from the task alone, in a fixed order")
    for attempt in ("first", "second"):
        try:
            run.run()
        except AssertionError as exc:
            raise AssertionError(f"{_named(run.kind)}: the {attempt} run broke the runner's contract: {exc} (on "
                                 f"{on}). Fix: compute only planned units, each once, skipping those "
                                 f"run.is_done(key) reports.") from exc
    missing = sorted(set(keys) - {key_json(c) for c in run.computed})
    _require(not missing, run.kind, f"run() left planned units uncomputed: {missing[:3]}", on,
             "compute every unit plan() lists (the plan must be exact: --dry-run counts from it)")
    _check_board_cells(run, on)
    return run


def _check_board_cells(run: TaskRunDouble, on: str) -> None:
    """The board's and the summary's cells of ``run``'s rows agree with what its kind declares."""
    import tempfile

    from relbench.pages import Page

    kind, rows = run.kind, run.frame()
    axes = tuple(kind.matrix_axes)
    _require(not axes or (len(axes) == 2 and set(axes) <= set(kind.columns)), kind,
             f"matrix_axes {axes} are not two of its columns {tuple(kind.columns)}", on,
             "declare two of the columns that identify a cell, rows then columns")
    with tempfile.TemporaryDirectory(prefix="relbench-check-") as root:
        page = Page(Path(root), run.task.name)
        matrix = (kind.matrix_cells(rows, page) if axes else None) or []
        curves = (kind.curve_cells(rows, page) if kind.curve_axis else None) or []
        summary = kind.summary_cells(rows, page) or []
    lacking = [c for c in matrix if not all(axis in c for axis in axes)]
    _require(not lacking, kind, f"matrix_cells gives cells without both matrix axes {axes}: {lacking[:1]}", on,
             "give every matrix cell its row and column value")
    lacking = [c for c in curves if kind.curve_axis not in c]
    _require(not lacking, kind, f"curve_cells gives points without curve_axis {kind.curve_axis!r}: {lacking[:1]}",
             on, "give every point its value on the curve axis")
    lacking = [c for c in summary if not {"metric", "score", "n"} <= set(c)]
    _require(not lacking, kind, f"summary_cells gives cells without metric, score and n: {lacking[:1]}", on,
             "give every summary cell its metric, score and seeds")
