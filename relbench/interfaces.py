"""The interfaces every relbench plugin implements, and the data they exchange.

A plugin is a small ``@dataclass`` subclass of one of the interface classes below. Its
dataclass fields *are* its parameters: tasks.yaml sets them by name, relbench validates
their types before any work starts, ``relbench plugins`` lists them with their defaults,
and every result row records them. A plugin class is made available by returning it from
the matching hook in :mod:`relbench.hookspecs`.

Shapes used throughout: ``X`` is an ``n × d`` float32 tensor of embeddings from one
encoder (a *bank*), ``A`` a ``k × d`` tensor of that bank's anchors, and ``rel(X)`` the
``n × k`` relative representation.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

import numpy as np

from relbench import deferred
from relbench.sharing import SharedWork

if TYPE_CHECKING:  # only for annotations: the core modules import this one
    import pandas as pd

    from relbench.task_model import PluginSpec, Task
    from relbench.pages import Page

torch = deferred.load("torch")

#: which way a number is better: every number relbench stores declares one where it is
#: produced (a metric's class, a stitcher's diagnostic, a task kind's row)
Direction = Literal["higher", "lower", "neutral"]
DIRECTIONS: tuple[str, ...] = ("higher", "lower", "neutral")


@dataclass(frozen=True)
class Diagnostic:
    """A per-cell number a plugin reports besides the task's metrics (a condition
    number, the anchors a pruning kept …), with its direction: ``lower`` for a condition
    number, ``neutral`` for a count that describes rather than scores."""

    value: float
    direction: Direction

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"a diagnostic's direction is one of {DIRECTIONS}, got {self.direction!r}")

@dataclass(frozen=True)
class Tunable:
    """A parameter the harness chooses per space and seed on validation data.

    ``values`` are the candidates, tried in order (a tie keeps the earlier one, so put
    the author's default first). ``relative_to`` documents what a scale-dependent
    parameter is measured against (e.g. "quantile of the space's 0-dim death times"):
    the plugin interprets the value relative to a scale it measures on the fit data,
    so the same candidates make sense in every space. Both are recorded on the page.
    """

    values: tuple[Any, ...]
    relative_to: str = ""

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError("a Tunable needs at least one candidate value")


# --------------------------------------------------------------------------------------
# Base class and data containers
# --------------------------------------------------------------------------------------


class Plugin:
    """Base of every plugin class.

    Subclasses are dataclasses: each field is a documented parameter with a default.
    ``name`` is the name tasks.yaml uses to pick the plugin; the class docstring is what
    ``relbench plugins`` shows, so its first line must say what the method is.
    """

    name: ClassVar[str] = ""
    #: the interface this plugin implements, set on each interface class below
    interface: ClassVar[str] = ""
    #: the author's version of the method: bump it when a change of the code changes
    #: the plugin's results, and every stored unit that used it is recomputed
    version: ClassVar[str] = "1"
    #: parameters the harness chooses on validation data when tasks.yaml does not fix
    #: them: parameter name → :class:`Tunable` (the candidate values, in order of
    #: preference on ties). A value set in tasks.yaml switches tuning off for it.
    tunable: ClassVar[dict[str, "Tunable"]] = {}
    #: former names of the plugin, still accepted in tasks files with a deprecation
    #: message (results are shared: identity is the class, not the name)
    aliases: ClassVar[tuple[str, ...]] = ()
    #: the class attributes by which plugins of this interface declare what they are
    #: (a metric's direction, a similarity's invariances …), shown by ``relbench plugins
    #: NAME``; a name whose attribute is a method is shown as what calling it returns
    declarations: ClassVar[tuple[str, ...]] = ()

    def params(self) -> dict[str, Any]:
        """The parameters of this instance as a plain dict (recorded in every row)."""
        if dataclasses.is_dataclass(self):
            return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {}


@dataclass
class Split:
    """One split of a data set.

    ``ids`` are stable sample identifiers (strings), shared by every view of a sample,
    so parallel anchors can be chosen by id. ``labels`` are integer class indices (or
    ``None`` for unlabelled data). ``views`` maps a view name (``"image"``, ``"en"``,
    ``"es"``, ``"word"`` …) to the items of that view, aligned with ``ids``: images as
    ``PIL.Image`` or ``uint8`` arrays, text as ``str``.
    """

    ids: list[str]
    labels: np.ndarray | None
    views: dict[str, Sequence[Any]]

    def __post_init__(self) -> None:
        for view, items in self.views.items():
            if len(items) != len(self.ids):
                raise ValueError(
                    f"view {view!r} has {len(items)} items but the split has {len(self.ids)} ids"
                )

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class DataSources:
    """What a loaded data set was made from: the files whose bytes (with the data set's
    parameters) determine it, and the installed distributions whose versions do.

    A data set that declares its sources lets the runner plan without loading it: while
    every file keeps its size and modification time and every distribution its version,
    the runner reuses the description it kept of the data (fingerprint, ids, labels,
    classes, views; :mod:`relbench.descriptions`) and loads the data only when something
    reads a view. Declare every file read, or none (``None``: loaded whenever a run plans).
    """

    files: tuple[str, ...]
    packages: tuple[str, ...] = ()


@dataclass
class DatasetData:
    """What a :class:`Dataset` plugin returns: splits, classes, views, fingerprint.

    ``view_modalities`` maps each view to ``"image"``, ``"text"`` or ``"word"`` so the
    runner can check that an encoder reads a view it understands. ``fingerprint`` is a
    stable hash of the content (it keys the embedding cache). ``ordinal`` marks labels
    whose order means something (MAE is then meaningful). ``sources`` (optional, see
    :class:`DataSources`) lets a run plan without loading the data.
    """

    name: str
    splits: dict[str, Split]
    class_names: list[str]
    view_modalities: dict[str, str]
    fingerprint: str
    ordinal: bool = False
    sources: DataSources | None = None

    @property
    def views(self) -> list[str]:
        """The view names, in declaration order."""
        return list(self.view_modalities)


@dataclass
class Bank:
    """Embeddings of one encoder on one split: the unit the methods work on.

    ``X`` is ``n × d`` float32 on the run's device; row ``i`` belongs to ``ids[i]``.
    """

    encoder: str
    split: str
    X: torch.Tensor
    ids: list[str]
    labels: torch.Tensor | None = None
    #: what the encoder reported about itself (:meth:`Encoder.report`)
    report: dict[str, Any] = field(default_factory=dict)
    _index: dict[str, int] | None = field(default=None, repr=False)

    @property
    def dim(self) -> int:
        """Width ``d`` of the embeddings."""
        return int(self.X.shape[1])

    def subset(self, positions: torch.Tensor, split: str) -> "Bank":
        """The rows at ``positions`` (a seed's draw) as a bank of split ``split``."""
        positions = positions.to(self.X.device)
        return Bank(encoder=self.encoder, split=split, X=self.X.index_select(0, positions),
                    ids=[self.ids[i] for i in positions.tolist()],
                    labels=None if self.labels is None else self.labels.index_select(0, positions),
                    report=self.report)

    def rows(self, ids: Sequence[str]) -> torch.Tensor:
        """The embeddings of the given sample ids, in that order (``KeyError`` if absent)."""
        if self._index is None:
            self._index = {sid: i for i, sid in enumerate(self.ids)}
        idx = torch.tensor([self._index[s] for s in ids], device=self.X.device)
        return self.X.index_select(0, idx)


# --------------------------------------------------------------------------------------
# Dataset
# --------------------------------------------------------------------------------------


class Dataset(Plugin, ABC):
    """A source of samples: splits with stable ids, labels, class names and views."""

    interface: ClassVar[str] = "dataset"

    @abstractmethod
    def load(self) -> DatasetData:
        """Load (or read from the asset cache) and return the data set.

        Must be deterministic for fixed parameters. A missing package or file raises
        :class:`relbench.errors.MissingAsset` naming the exact install command.
        """

    def provenance(self) -> dict[str, str]:
        """Where these data come from, for the leaderboards' sources page
        (:mod:`relbench.provenance`): ``what`` (the data set, as people know it),
        ``package`` (the PyPI distribution that ships it), ``debian`` (the Debian
        package) or ``npm`` (the npm package), ``licence`` (the data's own) and ``cite`` (the reference to cite).
        Cheap: nothing is loaded. Default: nothing known."""
        return {}


# --------------------------------------------------------------------------------------
# Encoder
# --------------------------------------------------------------------------------------


class EncoderContext:
    """What the runner tells an encoder about where and what it encodes.

    ``train`` is the task's training split and ``view`` the view the encoder reads, for
    encoders that learn from data (trained nets, word vectors). ``cache_dir`` is where an
    encoder may keep converted weights or trained tables across runs. ``device`` is the
    ``torch.device`` to compute on; the runner may give a function that resolves it
    instead, called when an encoder first reads :attr:`device` (so that planning, which
    only asks encoders for fingerprints, never imports torch to look for a GPU).
    ``precision`` is the task's (``fp32`` or ``bf16``, :mod:`relbench.precision`): an
    encoder may opt in to bf16 where it pays (see :meth:`Encoder.arithmetic`).
    """

    def __init__(self, device: torch.device | Callable[[], torch.device], view: str, dataset: DatasetData,
                 train: Split, cache_dir: Any, batch_size: int = 64, num_workers: int = 0,
                 precision: str = "fp32"):
        self._device = device
        self.precision = precision
        self.view = view
        self.dataset = dataset
        self.train = train
        self.cache_dir = cache_dir  # a pathlib.Path
        self.batch_size = batch_size
        self.num_workers = num_workers

    @property
    def device(self) -> torch.device:
        """The ``torch.device`` the encoder computes on."""
        if callable(self._device):
            self._device = self._device()
        return self._device

    def __repr__(self) -> str:
        return (f"EncoderContext(view={self.view!r}, dataset={getattr(self.dataset, 'name', '?')!r}, "
                f"batch_size={self.batch_size}, num_workers={self.num_workers}, precision={self.precision!r})")


class Encoder(Plugin, ABC):
    """Turns the items of one view into embeddings (``n × d`` float32).

    The runner calls :meth:`fingerprint` first, to look the embeddings up in the cache;
    only on a miss does it call :meth:`setup` and then :meth:`encode` once per split.
    """

    interface: ClassVar[str] = "encoder"
    #: the view modalities this encoder can read ("image", "text", "word"); empty = any
    modalities: ClassVar[tuple[str, ...]] = ()

    def fingerprint(self, ctx: EncoderContext) -> str:
        """A string that changes whenever the weights would (e.g. a hash of the weight
        file). Must be cheap: it is called on every run, before :meth:`setup`. The
        default covers encoders whose weights are fully determined by their parameters."""
        return ""

    def setup(self, ctx: EncoderContext) -> None:
        """Load weights, or train on ``ctx.train`` for encoders that learn. Called at
        most once per run, only when some split is not cached."""

    def arithmetic(self, ctx: EncoderContext) -> str:
        """How :meth:`encode` computes under ``ctx``: ``"fp32"`` (the default, and always
        at an fp32 task), or ``"bf16"`` where the encoder runs its forward under bfloat16
        autocast because the task runs at ``bf16`` and that pays on ``ctx.device``. A
        bank's cache identity records it when it is not fp32, so banks of the two
        arithmetics are never mixed. Cheap, and must not read ``ctx.device`` at fp32
        (planning asks every encoder, and must not import torch to look for a GPU)."""
        return "fp32"

    @abstractmethod
    def encode(self, items: Sequence[Any], ctx: EncoderContext) -> torch.Tensor:
        """Embed ``items`` (one view's items, in order) and return ``len(items) × d``
        float32. Batch internally and show a :func:`progress_bar` with samples/s."""

    def provenance(self) -> dict[str, str]:
        """Where the weights come from, for the leaderboards' sources page: the same keys
        as :meth:`Dataset.provenance` (``what``, ``package``/``debian``, ``licence`` of the
        weights, ``cite``). Cheap: no weights are loaded. Default: nothing known."""
        return {}

    def report(self) -> dict[str, Any]:
        """What the encoder measured about itself in :meth:`setup`, for the pages (an
        encoder trained here reports its own accuracy, so a reader sees whether it
        converged). JSON-able numbers and strings; stored with the embeddings in the
        cache, so a cached bank keeps it. Default: nothing."""
        return {}


# --------------------------------------------------------------------------------------
# Anchor selection
# --------------------------------------------------------------------------------------


@dataclass
class Anchors:
    """An anchor *recipe* that every bank can realise.

    ``ids`` are sample ids in the anchor pool: the task's training split when ``pool``
    is ``"train"``, or another data set (out-of-domain anchors) named by ``pool`` and
    encoded by the runner with every encoder. ``weights`` (``m × len(ids)``), when set,
    mixes those rows (PARAM); otherwise the anchors are the rows themselves.

    ``encoder_ids`` (by encoder label), when it names an encoder, replaces ``ids`` in that
    encoder's bank: anchor ``i`` is then a *different* sample in each space (e.g. one of the
    same class: class-level parallel anchors). Each list has ``len(ids)`` ids of the same
    pool; an encoder it does not name uses ``ids``.
    """

    ids: list[str]
    pool: str = "train"
    weights: torch.Tensor | None = None
    info: dict[str, Any] = field(default_factory=dict)
    encoder_ids: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        uneven = sorted(e for e, ids in self.encoder_ids.items() if len(ids) != len(self.ids))
        if uneven:
            raise ValueError(f"Anchors.encoder_ids of {uneven} do not hold one id per entry of ids "
                             f"({len(self.ids)})")

    def __len__(self) -> int:
        return len(self.ids) if self.weights is None else int(self.weights.shape[0])

    def ids_for(self, encoder: str) -> list[str]:
        """The ids realised in encoder ``encoder``'s bank: its own in ``encoder_ids``, else ``ids``."""
        return self.encoder_ids.get(encoder, self.ids)

    def realise(self, pool_bank: Bank) -> torch.Tensor:
        """The ``k × d`` anchor matrix of one bank (its encoder's ids: :meth:`ids_for`)."""
        rows = pool_bank.rows(self.ids_for(pool_bank.encoder))
        if self.weights is None:
            return rows
        return self.weights.to(rows.device, rows.dtype) @ rows


@dataclass
class AnchorContext:
    """What a selector may look at.

    ``banks`` are the training banks of the encoders the selector may learn from (the
    held-out encoder of a zero-shot evaluation is *not* in it; ``excluded`` names it).
    ``pool_banks(name)`` encodes another data set with every encoder (cached) and
    returns its training banks, for out-of-domain anchors. ``views`` maps encoder to
    the view it reads.
    """

    num_anchors: int
    seed: int
    ids: list[str]
    labels: np.ndarray | None
    banks: dict[str, Bank]
    excluded: frozenset[str]
    device: torch.device
    views: dict[str, str]
    pool_banks: Callable[[str], dict[str, Bank]]
    generator: torch.Generator | None = None
    #: the (unfitted) similarity of the grid entry the anchors are chosen for, or
    #: None: a selector that needs a similarity (PARAM's whitening) uses this one's
    #: parameters, so the anchors are learned for the projection they are used with
    similarity: Similarity | None = None


class AnchorSelector(Plugin, ABC):
    """Chooses the anchors: a recipe (:class:`Anchors`) usable in every bank."""

    interface: ClassVar[str] = "selector"
    declarations: ClassVar[tuple[str, ...]] = ("prefix_nested", "chance_null")
    #: True when the choice depends on the embeddings (fps, PARAM): the runner then
    #: selects again for every held-out encoder and never shows it that encoder's bank.
    learns_from_banks: ClassVar[bool] = False
    #: True when the selection is ordered so that its first ``k`` anchors are what the
    #: selector returns when asked for ``k`` (same seed and context): a random draw, a
    #: farthest-point order. A sweep over anchor budgets may then take prefixes of one
    #: selection, so its curves are paired. False (the default) for choices made for one
    #: count as a whole (k-means centres, learned mixtures), whose prefix is no such
    #: choice. :func:`relbench.testing.check_anchor_selector` verifies a True.
    prefix_nested: ClassVar[bool] = False
    #: True for a control whose anchors correspond to nothing across spaces (each space
    #: its own order of real anchors): a decoder stitched through them scores what its
    #: head, budget and tuning reach by chance. Pages measure the other selectors'
    #: stitching scores from this floor, read from the class their rows record, never
    #: from its label.
    chance_null: ClassVar[bool] = False

    @abstractmethod
    def select(self, ctx: AnchorContext) -> Anchors:
        """Return the anchors for this seed (deterministic given ``ctx.seed``)."""

    def pools(self) -> list[str]:
        """The data sets (plugin names) whose training banks :meth:`select` reads through
        ``ctx.pool_banks`` (default: none). Declaring them lets an executor encode them
        ahead of the units, as it does the task's own banks; a pool read but not declared
        is encoded where the selector runs."""
        return []


# --------------------------------------------------------------------------------------
# Similarity (relative projection)
# --------------------------------------------------------------------------------------


#: the invariances a :class:`Similarity` may declare: a random ``orthogonal`` map, an
#: isotropic rescaling (``scale``), a ``translation`` and a ``permutation`` of the
#: embedding dimensions
INVARIANCES: tuple[str, ...] = ("orthogonal", "scale", "translation", "permutation")


class Similarity(Plugin, ABC):
    """A relative projection: ``(X, A) → rel`` (``n × k``), differentiable.

    The runner makes one copy per bank and calls :meth:`fit` on that bank's training
    embeddings (for statistics such as per-dimension moments or a covariance), then
    :meth:`project` as often as needed.

    A similarity whose projection of a row depends on the *other* rows projected with it
    (statistics of the batch, e.g. the evaluated test split) must say so with
    :meth:`transductive`: the inductive protocol refuses it when the tasks file is
    validated, and under the transductive protocol its result rows record it.
    """

    interface: ClassVar[str] = "similarity"
    declarations: ClassVar[tuple[str, ...]] = ("invariances",)
    #: the transforms of a bank, applied to its embeddings and anchors alike (and to the
    #: rows it is fitted on), that leave its relative features unchanged for every value
    #: of its parameters: any of :data:`INVARIANCES`. Documentation that
    #: :func:`relbench.testing.check_similarity` verifies; not part of the plugin's
    #: identity (a class attribute, not a parameter)
    invariances: ClassVar[frozenset[str]] = frozenset()

    def fit(self, X: torch.Tensor) -> None:
        """Fit per-bank statistics on the training embeddings (default: none)."""

    def transductive(self) -> bool:
        """True when, with these parameters, :meth:`project` of a row depends on the
        other rows of ``X`` (statistics of the projected batch rather than of the
        :meth:`fit` data), so that a test prediction depends on the other test samples.
        Default False: a row's projection depends on that row, the anchors and the fit
        alone."""
        return False

    def inductive_alternative(self) -> str:
        """For a :meth:`transductive` configuration: the parameters that make it
        inductive, as a tasks file writes them (e.g. ``statistics: train``), quoted by
        the inductive protocol's refusal; "" when it has none (default)."""
        return ""

    @abstractmethod
    def project(self, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """Relative representation of ``X`` with respect to anchors ``A``: ``n × k``."""


# --------------------------------------------------------------------------------------
# Regularizer
# --------------------------------------------------------------------------------------


@dataclass
class RegularizerBatch:
    """One training batch, as a regularizer sees it.

    ``embeddings`` maps bank name → the (possibly adapted) absolute embeddings of the
    batch, before the relative projection; ``relative`` → their relative features;
    rows are the same samples in every bank. ``labels`` are the batch's classes.
    ``trained`` names the bank being trained (its entries carry gradients); every other
    entry of ``relative`` is a fixed *partner* bank (see
    :attr:`Regularizer.needs_partner_banks`).
    """

    labels: torch.Tensor
    embeddings: dict[str, torch.Tensor]
    relative: dict[str, torch.Tensor]
    trained: str = ""


class Regularizer(Plugin, ABC):
    """An extra loss term added while a head (and its adapter) trains."""

    interface: ClassVar[str] = "regularizer"
    declarations: ClassVar[tuple[str, ...]] = ("needs_adapter", "needs_partner_banks")
    #: True when the regularizer acts on a trainable adapter in front of the frozen
    #: encoder (the stitcher then inserts one)
    needs_adapter: ClassVar[bool] = False
    #: True when the loss compares the trained bank with *other encoders'* banks (the
    #: same training samples' relative features, fixed): the stitcher then receives
    #: them as :attr:`FitContext.partners` (never an encoder held out of the unit), and
    #: the result rows record that the decoder saw more than one space at fit time
    needs_partner_banks: ClassVar[bool] = False
    #: False for a *control* that adds no loss term (its :meth:`loss` is exactly zero)
    #: and exists for what it makes the training share with a regularizer that does: an
    #: adapter (:attr:`needs_adapter`), class-balanced batches (:meth:`batch_shape`).
    #: The conformance kit then checks the zero instead of a gradient, and the training
    #: accepts a loss with no trainable path from it
    adds_loss: ClassVar[bool] = True

    def batch_shape(self) -> tuple[int, int] | None:
        """``(classes, samples per class)`` when the loss needs class-balanced batches."""
        return None

    @abstractmethod
    def loss(self, batch: RegularizerBatch) -> torch.Tensor:
        """A scalar loss (already weighted) for this batch."""

    def prepared(self, batches: Sequence[RegularizerBatch], steps: int) -> "Regularizer":
        """The regularizer ready for one training: shown the first epoch's batches (before
        any step) and the number of optimiser steps, it may measure a scale of the space
        (topological densification's β as a quantile of death times) or plan a schedule.
        Returns a configured copy (default: ``self``, nothing to measure)."""
        return self

    def diagnostics(self) -> dict[str, Diagnostic]:
        """Numbers measured by :meth:`prepared` (absolute β …), reported in every cell of
        the unit as diagnostics (default: none)."""
        return {}


# --------------------------------------------------------------------------------------
# Stitcher
# --------------------------------------------------------------------------------------


class NotAchievable(Exception):
    """Raised by :meth:`Stitcher.predict` when a pair cannot be stitched by design
    (e.g. an absolute head fed embeddings of another width). Recorded as *not
    achievable*, never as a score of 0."""


@dataclass
class StitchSide:
    """One encoder's side of a stitch: its banks, anchors and fitted similarity.

    The runner reuses one side for every decoder it meets, so :meth:`relative` computes
    each split's relative representation once, however many stitchers read it.
    """

    encoder: str
    train: Bank
    test: Bank
    anchors: torch.Tensor | None
    similarity: Similarity | None
    #: the validation part of the seed's training draw (never fitted on; the harness
    #: chooses tunable constants on it), or None where the task has none
    validation: Bank | None = None
    #: per-side results a stitcher may reuse across the units that meet this side
    #: (e.g. the source encoder's own adapter); key them by everything they depend on
    memo: dict[Any, Any] = field(default_factory=dict, repr=False)
    _relative: dict[str, torch.Tensor] = field(default_factory=dict, repr=False)

    def bank(self, split: str) -> Bank:
        """The ``"train"`` (fit part), ``"validation"`` or ``"test"`` bank."""
        bank = {"train": self.train, "validation": self.validation, "test": self.test}.get(split)
        if bank is None:
            raise ValueError(f"encoder {self.encoder!r}: this side has no {split!r} bank")
        return bank

    def evaluated_on(self, split: str) -> "StitchSide":
        """This side with ``split``'s bank in the place of the test bank (what the
        harness predicts on when it scores a candidate on ``"validation"``); the
        training relative features and the memo are shared."""
        view = dataclasses.replace(self, test=self.bank(split), _relative={})
        view.memo = self.memo
        if "train" in self._relative:
            view._relative["train"] = self._relative["train"]
        return view

    def relative_bytes(self) -> int:
        """The bytes of the relative features this side has computed so far."""
        return sum(t.numel() * t.element_size() for t in self._relative.values())

    def relative(self, split: str) -> torch.Tensor:
        """``similarity.project(bank.X, anchors)`` of the ``"train"``, ``"validation"``
        or ``"test"`` bank (computed once per side; no gradient flows through it)."""
        if self.similarity is None or self.anchors is None:
            raise ValueError(f"encoder {self.encoder!r}: this stitch has no similarity or anchors")
        if split not in self._relative:
            bank = self.bank(split)
            with torch.no_grad():
                rel = self.similarity.project(bank.X, self.anchors)
            if not torch.isfinite(rel).all():
                raise ValueError(f"similarity {self.similarity.name!r} produced non-finite relative features for "
                                 f"encoder {self.encoder!r} ({split} split); nothing is scored on them")
            self._relative[split] = rel
        return self._relative[split]


@dataclass
class FitContext:
    """Everything a stitcher needs to train, apart from the target bank.

    ``modality`` is the modality of the target's view (text heads train differently
    from vision heads in the reference code). ``regularizers`` are already configured.
    ``partners`` maps encoder → its relative features of the *training* split (rows in
    the target training bank's order), for regularizers that compare banks; it is empty
    unless one of them :attr:`~Regularizer.needs_partner_banks`, and never holds an
    encoder that the unit holds out.
    """

    seed: int
    device: torch.device
    num_classes: int
    modality: str
    regularizers: list[Regularizer]
    partners: dict[str, torch.Tensor] = field(default_factory=dict)
    #: ``inductive`` (default): a prediction never depends on other test samples
    #: (heads normalise with statistics fixed from their training data);
    #: ``transductive``: batch statistics of the evaluated split, as the reference
    #: code's head does at test time. Recorded in every row.
    evaluation: Literal["inductive", "transductive"] = "inductive"
    #: results shared by every unit of this seed of the task (:mod:`relbench.sharing`):
    #: a fit that several stitchers repeat (the absolute head every translation
    #: stitcher trains) is computed once; key it by everything it depends on
    shared: SharedWork = field(default_factory=SharedWork, repr=False)


@dataclass
class Prediction:
    """Output of :meth:`Stitcher.predict`: class scores and per-cell diagnostics.

    ``logits`` is ``n × C`` for the source's test split; ``extras`` holds extra
    per-cell numbers (e.g. IRP's reconstruction cosine), each a :class:`Diagnostic`
    that declares its direction; they are recorded as metrics.
    """

    logits: torch.Tensor
    extras: dict[str, Diagnostic] = field(default_factory=dict)


#: a stitcher's part on the pages (:attr:`Stitcher.role`)
StitcherRole = Literal["method", "reference", "own-head"]


class Stitcher(Plugin, ABC):
    """Fits a decoder on the target (decoder-side) bank, then predicts for any source.

    The runner calls :meth:`fit` once per target and :meth:`predict` once per source:
    E encoders cost E fits and E² predictions.
    """

    interface: ClassVar[str] = "stitcher"
    declarations: ClassVar[tuple[str, ...]] = ("role", "uses_similarity", "uses_anchors", "needs_both_spaces")
    #: False when the similarity plays no part (absolute heads, IRP, Procrustes): the
    #: grid then does not repeat the stitcher for every similarity
    uses_similarity: ClassVar[bool] = True
    #: False when anchors play no part (the absolute baseline)
    uses_anchors: ClassVar[bool] = True
    #: True when regularizers apply to its training
    accepts_regularizers: ClassVar[bool] = False
    #: True when the translation needs both spaces at fit time (Procrustes, affine);
    #: a unit whose regularizer compares banks needs them too, whatever the stitcher
    #: (its rows' ``needs_both_spaces`` column says so)
    needs_both_spaces: ClassVar[bool] = False
    #: True for stitchers that are only evaluated on their own bank (the plan gives them
    #: no other source)
    diagonal_only: ClassVar[bool] = False
    #: what the stitcher's rows are on the pages (:data:`StitcherRole`): a ``method``
    #: is ranked; a ``reference`` (an untranslated baseline, the absolute head) and an
    #: ``own-head`` (a decoder on its own encoder only: the upper bound a stitched
    #: decoder is compared with) are shown beside the ranking. Stored rows carry it as
    #: their ``role`` column, so no page depends on the label a tasks file gives it
    role: ClassVar[StitcherRole] = "method"

    @abstractmethod
    def fit(self, target: StitchSide, ctx: FitContext) -> None:
        """Train on ``target.train`` (labels in ``target.train.labels``)."""

    @abstractmethod
    def predict(self, source: StitchSide) -> Prediction:
        """Predict the classes of ``source.test``; raise :class:`NotAchievable` when
        the pair cannot be stitched by design."""


# --------------------------------------------------------------------------------------
# Metric
# --------------------------------------------------------------------------------------


#: what a metric scores (:attr:`Metric.output`), each with the shapes of ``y_true`` and
#: ``y_pred`` for ``n`` samples:
#:
#: * ``labels``: class indices, ``n`` and ``n``;
#: * ``scores``: class indices ``n`` and per-class scores (logits, probabilities) ``n × C``;
#: * ``regression``: real values, ``n`` (or ``n × d``, one row per sample) for both;
#: * ``ranking``: per query the relevant items ``n × m`` (or ``n``: one each) and the
#:   retrieved items ``n × k``, best first, each row listing distinct item indices.
METRIC_OUTPUTS: tuple[str, ...] = ("labels", "scores", "regression", "ranking")
#: how a metric's score is made from the samples (:attr:`Metric.aggregation`): ``mean``,
#: the mean of its per-sample values (:meth:`Metric.per_sample`); ``whole_set``, a
#: statistic of the whole set that no per-sample value makes (F1, Pearson r)
AGGREGATIONS: tuple[str, ...] = ("mean", "whole_set")


class Metric(Plugin, ABC):
    """A score computed from targets and predictions, declaring what it scores
    (:attr:`output`), its direction (:attr:`higher_is_better`) and how its samples make
    the score (:attr:`aggregation`), as an evaluation harness's metric specification does.

    A ``mean`` metric implements :meth:`per_sample` and inherits :meth:`compute` (their
    mean) and a vectorised :meth:`compute_weighted`; a ``whole_set`` metric implements
    :meth:`compute`. Neither declaration enters a unit's identity (the class does)."""

    interface: ClassVar[str] = "metric"
    declarations: ClassVar[tuple[str, ...]] = ("direction", "aggregation", "output")
    #: the metric's direction, declared where it is produced: result rows carry it
    #: (``higher`` or ``lower``) and pages read only that
    higher_is_better: ClassVar[bool] = True
    #: what it scores: one of :data:`METRIC_OUTPUTS` (the shapes of ``y_true`` and ``y_pred``)
    output: ClassVar[str] = "labels"
    #: how its samples make the score: one of :data:`AGGREGATIONS`
    aggregation: ClassVar[str] = "whole_set"
    #: the smallest difference of this metric that a claim counts (its default margin,
    #: in the metric's units): a point of F1 is not a point of a correlation
    claim_margin: ClassVar[float] = 0.01

    @classmethod
    def direction(cls) -> Direction:
        """``"higher"`` or ``"lower"``, from :attr:`higher_is_better`."""
        return "higher" if cls.higher_is_better else "lower"

    def per_sample(self, y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
        """The ``n`` per-sample values whose mean is the score (``mean`` metrics only;
        what a task kind stores per sample, :func:`relbench.samples.values`)."""
        raise NotImplementedError(f"metric {type(self).name!r} aggregates {self.aggregation!r}: it has no "
                                  f"per-sample values (a 'mean' metric implements per_sample)")

    def compute(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        """Return the score as a float: here the mean of :meth:`per_sample`; a
        ``whole_set`` metric overrides it."""
        return float(np.mean(self.per_sample(y_true, y_pred)))

    def compute_weighted(self, y_true: np.ndarray, y_preds: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """The score of several predictions of the same samples under several weightings
        of those samples, for bootstrap intervals (:mod:`relbench.uncertainty`).

        ``y_true``: the ``n`` true values; ``y_preds``: ``cells × n`` predictions (one row
        per scored cell; ``cells × n × …`` for outputs with a row per sample); ``weights``:
        ``R × n`` non-negative integer counts (a resample's multiplicity of each sample).
        Returns the ``R × cells`` array :meth:`compute_repeated` defines. A ``mean``
        metric gets the weighted mean of its per-sample values; a ``whole_set`` one,
        :meth:`compute_repeated` itself (slow), unless it overrides this with a vectorised
        form that agrees with it (:func:`relbench.testing.check_metric` checks the agreement)."""
        if self.aggregation != "mean":
            return self.compute_repeated(y_true, y_preds, weights)
        weights = np.atleast_2d(weights)
        values = np.stack([self.per_sample(y_true, pred) for pred in np.atleast_2d(y_preds)])
        return (weights.astype(float) @ values.T) / weights.sum(axis=1, keepdims=True)

    def compute_repeated(self, y_true: np.ndarray, y_preds: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """What :meth:`compute_weighted` returns, by definition: an ``R × cells`` array
        whose entry ``[r, c]`` is :meth:`compute` of ``y_true`` and ``y_preds[c]`` with
        sample ``i`` repeated ``weights[r, i]`` times, one resample at a time."""
        y_true, y_preds, weights = np.asarray(y_true), np.atleast_2d(y_preds), np.atleast_2d(weights)
        out = np.empty((len(weights), len(y_preds)))
        for r, counts in enumerate(weights):
            take = np.repeat(np.arange(len(y_true)), counts.astype(np.int64))
            out[r] = [self.compute(y_true[take], pred[take]) for pred in y_preds]
        return out


# --------------------------------------------------------------------------------------
# Space measure
# --------------------------------------------------------------------------------------


class SpaceMeasure(Plugin, ABC):
    """A representational-similarity measure between two spaces of the same samples:
    ``(X, Y) → float``, with ``X`` ``n × d_x`` and ``Y`` ``n × d_y`` (row ``i`` of both the
    same sample; the widths may differ), declaring which way is more similar.

    A measure reads the whole spaces at once (kernels, neighbourhoods, subspaces): it is a
    statistic of the set of samples, not a mean over them. :func:`relbench.testing.
    check_space_measure` checks that it is finite, deterministic, symmetric where it says
    so, scores a space against itself at least as similar as against an unrelated one,
    and keeps the :attr:`invariances` it declares."""

    interface: ClassVar[str] = "space_measure"
    #: True when a higher value means more similar spaces (CKA, mutual k-NN), False when
    #: a lower one does (a distance such as Procrustes'): result rows carry it as their
    #: direction
    higher_is_similar: ClassVar[bool] = True
    #: True when ``measure(X, Y) == measure(Y, X)``; a task kind may then compute each
    #: unordered pair once
    symmetric: ClassVar[bool] = True
    #: the transforms of *one* of the two spaces that leave the value unchanged for every
    #: value of its parameters: any of :data:`INVARIANCES`. Documentation that
    #: :func:`relbench.testing.check_space_measure` verifies; not part of the identity
    invariances: ClassVar[frozenset[str]] = frozenset()
    declarations: ClassVar[tuple[str, ...]] = ("higher_is_similar", "symmetric", "invariances")

    @classmethod
    def direction(cls) -> Direction:
        """``"higher"`` or ``"lower"`` (which way is more similar), from :attr:`higher_is_similar`."""
        return "higher" if cls.higher_is_similar else "lower"

    @abstractmethod
    def measure(self, X: np.ndarray, Y: np.ndarray) -> float:
        """The measure of the two spaces: ``X`` ``n × d_x`` and ``Y`` ``n × d_y`` float64
        arrays whose rows are the same samples, in the same order."""


# --------------------------------------------------------------------------------------
# Task kind
# --------------------------------------------------------------------------------------


#: a unit of work's key: the task kind's columns (plus ``seed``) → a plugin spec (its
#: identity enters the unit's fingerprint, its label the displayed column), a list of
#: specs (e.g. held-out encoders), or a plain value (an activation name, a seed). The
#: entry :data:`USES` holds what the unit also depends on without it being one of its
#: columns (e.g. the grid's selectors, when every row names its own): a mapping of names
#: to specs or values that enters the fingerprint only
UnitKey = dict[str, Any]
USES = "uses"


@dataclass
class ResultRow:
    """One long-format result: a metric value for one cell of a unit of work.

    ``direction`` says which way the value is better (declare it where the number is
    made: ``metric.direction()`` for a :class:`Metric`, the :class:`Diagnostic`'s own
    for a stitcher's extra, the kind's knowledge for its own numbers). ``cell`` holds
    the values of the kind's :attr:`TaskKind.columns` that vary inside the unit (for
    stitching: ``source``); the unit key's columns are added by the runner. ``extra``
    is free-form detail a page may show but never needs to identify a cell.
    ``per_sample`` is the per-sample data behind the value (a classification cell's true
    and predicted labels: :func:`relbench.samples.predictions`), stored once per cell
    (on one of its rows) so that intervals and paired comparisons can be computed later
    from the store.
    """

    metric: str
    value: float | None
    direction: Direction
    cell: dict[str, Any] = field(default_factory=dict)
    status: str = "ok"  # ok | not_achievable | error
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    per_sample: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"result row {self.metric!r}: direction must be one of {DIRECTIONS}, "
                             f"got {self.direction!r}")


class TaskRunAPI(Protocol):
    """What a :class:`TaskKind` receives from the runner while it evaluates one task.

    relbench's runner implements it; :class:`relbench.testing.TaskRunDouble` is a
    light implementation for testing a kind without encoders or a results store.
    """

    #: the validated task (its grid, encoders, seeds, anchors count …)
    task: Task
    #: where tensors live for this task (``cuda`` when asked for and present)
    device: torch.device

    def dataset(self) -> DatasetData:
        """The task's data set (loaded once)."""

    def banks(self, split: str, seed: int | None = None) -> dict[str, Bank]:
        """Every encoder's embeddings, by label: without ``seed`` the data set's whole
        ``"train"``/``"test"`` split; with ``seed`` that seed's draw, ``"train"`` (the
        fit part), ``"validation"`` or ``"test"`` (:mod:`relbench.protocol`). The draws of
        one seed are held at a time: asking for another seed's frees the previous seed's
        (drawn again, identically, when asked again), so walk the seeds one after another."""

    def pool_banks(self, dataset_name: str) -> dict[str, Bank]:
        """Training banks of another data set (an out-of-domain anchor pool)."""

    def anchors(self, seed: int, selector: PluginSpec, excluded: frozenset[str] = frozenset(),
                similarity: PluginSpec | None = None) -> Anchors:
        """The anchor recipe for (seed, selector, held-out encoders), computed once from
        the seed's fit part; ``similarity`` reaches selectors that learn from banks."""

    def realise(self, anchors: Anchors, label: str) -> torch.Tensor:
        """The ``k × d`` anchors of encoder ``label``."""

    def modality(self, label: str) -> str:
        """The modality of the view encoder ``label`` reads."""

    def shared(self, seed: int) -> SharedWork:
        """The memo of work shared by the units of seed ``seed`` (one seed at a time:
        asking for another seed starts a fresh one); see :mod:`relbench.sharing`."""

    def is_done(self, key: UnitKey) -> bool:
        """Whether the unit is stored with its current identity (and not forced)."""

    def unit(self, key: UnitKey) -> AbstractContextManager[list[ResultRow]]:
        """Collect a unit's rows and store them atomically; a raise becomes an error row.
        ``key`` must be one of the kind's :meth:`TaskKind.plan`."""

    def figure_path(self, filename: str) -> Path:
        """Where a figure drawn during the run is kept (it is shown on the page)."""

    def progress(self, iterable: Any = None, desc: str = "", total: int | None = None) -> Any:
        """A progress bar for the kind's own loops."""


@dataclass(frozen=True)
class Axis:
    """One axis of a task kind's grid (:attr:`TaskKind.axes`): under ``grid:`` in a tasks
    file, a list of plugin choices of one interface, e.g. ``Axis("selector")`` for
    ``selectors: [random, fps]``.

    Parameters:
        interface: the plugin interface of its entries: a key of :data:`INTERFACES`
            other than ``"task_kind"`` (``"selector"``, ``"similarity"``, ``"stitcher"``,
            ``"regularizer"`` …).
        allows_none: entries may be ``none`` (a grid point without a plugin of this
            axis, held as ``None``); a task that omits the axis then holds ``[None]``.
            Otherwise an omitted axis holds no entry (``[]``).
    """

    interface: str
    allows_none: bool = False

    def __post_init__(self) -> None:
        choices = [name for name in INTERFACES if name != TaskKind.interface]
        if self.interface not in choices:
            raise ValueError(f"a grid axis holds plugins of one interface; {self.interface!r} is none of "
                             f"{', '.join(choices)}.")

    def omitted(self) -> list[None]:
        """What a task that leaves the axis out holds: ``[None]`` where ``none`` is
        allowed (one grid point without such a plugin), else nothing."""
        return [None] if self.allows_none else []


class TaskKind(Plugin, ABC):
    """A protocol of evaluation (stitching, word neighbourhoods, reconstruction …).

    Its fields are the task-level parameters tasks.yaml may set under ``params:``. A
    kind declares the :attr:`columns` that identify its cells, lists its units of work
    with :meth:`plan` (from the task alone, before any data is loaded: ``--dry-run`` and
    the results store's identities come from it), computes them in :meth:`run` through a
    :class:`TaskRunAPI`, and draws its page from stored rows in :meth:`page`. It may
    add one section to the leaderboard index from what its pages recorded
    (:meth:`index_cells`, :meth:`index_section`). The :attr:`axes` it declares are the
    keys a task of this kind may set under ``grid:``.
    """

    interface: ClassVar[str] = "task_kind"
    declarations: ClassVar[tuple[str, ...]] = ("axes", "paired_on", "row_fields", "uses_encoders",
                                               "presentation_params", "seeds_vary")
    #: the parameters that change only how pages and the index are drawn, never a row
    #: (e.g. the name of a companion task): left out of every unit's identity, so that
    #: setting or changing one recomputes nothing
    presentation_params: ClassVar[tuple[str, ...]] = ()
    #: the columns that identify a cell of this kind's results (``seed`` is the
    #: runner's); result rows carry them flat, and claims filter on them
    columns: ClassVar[tuple[str, ...]] = ()
    #: the columns among :attr:`columns` that name what a method is evaluated on rather
    #: than the method (stitching: the encoder pair): a claim compares its two sides on
    #: the values of these columns, and the seeds, that both sides were measured on
    paired_on: ClassVar[tuple[str, ...]] = ()
    #: columns that only :meth:`claim_rows` adds (beside :attr:`columns`), which a claim
    #: of the tasks file may filter on
    claim_columns: ClassVar[tuple[str, ...]] = ()
    #: typed columns every row of a unit carries besides :attr:`columns` (name → type),
    #: fixed per unit and written by the kind; pages read them as columns
    row_fields: ClassVar[dict[str, type]] = {}
    #: False for protocols that train their own networks (the task's ``encoders`` may
    #: then be omitted)
    uses_encoders: ClassVar[bool] = True
    #: for a protocol that does not draw its samples as the task's ``protocol:`` says (it
    #: draws none, or its own), what its seeds vary (a sentence, which may name the kind's
    #: parameters in braces, e.g. ``{train_samples:,}``): its pages' protocol paragraph says
    #: this in place of the sample draw, validation part and evaluation mode; empty
    #: (default): the kind draws its samples as the task's ``protocol:`` says
    seeds_vary: ClassVar[str] = ""
    #: True when the protocol asks for anchors with the evaluated encoder held out
    #: (``run.anchors(seed, selector, excluded)``); only such kinds accept selectors that
    #: learn from the banks (fps, PARAM), which validation enforces
    holds_out_sources: ClassVar[bool] = False
    #: True for the one kind a task without ``kind:`` gets (two installed kinds
    #: claiming it is an error)
    is_default: ClassVar[bool] = False
    #: the axes of this kind's grid, by the key a task sets under ``grid:`` (e.g.
    #: ``{"selectors": Axis("selector"), "regularizers": Axis("regularizer",
    #: allows_none=True)}``): the tasks file may set only these, each a list of plugins of
    #: the axis's interface, and ``task.grid`` holds every one of them (an omitted axis as
    #: :meth:`Axis.omitted`). A task's unit bound multiplies its seeds and encoders by
    #: each axis's length. Default: no grid.
    axes: ClassVar[Mapping[str, Axis]] = {}
    #: two of :attr:`columns` that span the matrix of each combination's cells on the
    #: task's page of the interactive board (:mod:`relbench.board`), rows then columns
    #: (stitching: ``("source", "target")``); empty: no matrix, the board shows the
    #: task's summary cells only
    matrix_axes: ClassVar[tuple[str, ...]] = ()
    #: the column of :meth:`curve_cells` that the board draws its curves over (the
    #: anchor budget: ``"num_anchors"``); empty: no curves
    curve_axis: ClassVar[str] = ""

    def validate(self, task: Task) -> None:
        """Check the task against this protocol before any work starts; raise
        ``ValueError`` with a message naming what is wrong and how to fix it. Called
        while tasks.yaml is validated, so the message gets the file and line."""

    def check_data(self, task: Task, data: DatasetData) -> None:
        """Check the loaded data set against this protocol, before any unit is computed
        (e.g. enough classes); raise ``ValueError`` saying what is wrong and how to fix it."""

    @abstractmethod
    def plan(self, task: Task) -> list[UnitKey]:
        """Every unit of work of the task, in the order :meth:`run` computes them.

        Must be exact: the runner refuses a unit that is not in the plan, and
        ``relbench run --dry-run`` counts from it."""

    @abstractmethod
    def run(self, run: TaskRunAPI) -> None:
        """Compute the units not yet done (``run.is_done``), emitting rows through
        ``run.unit(key)``."""

    @abstractmethod
    def page(self, results: pd.DataFrame, page: Page) -> str:
        """The markdown body of the task's leaderboard page, from the current rows of
        the results store (one row per cell and metric, with a ``direction`` column);
        figures are written through ``page``."""

    def headline(self, results: pd.DataFrame) -> dict[str, Any] | None:
        """The index's line for this task: ``{"metric", "best", "score", "std",
        "reference"}`` (optionally ``"interval": (low, high)``, shown instead of the
        std), or None (the index then says "see page"). Not called when :meth:`page`
        set :attr:`Page.headline <relbench.pages.Page.headline>` (a kind that computes
        intervals for its page hands the line over there instead of computing them twice)."""
        return None

    def meaning(self, headline: dict[str, Any] | None, direction: str) -> str:
        """The plain sentence that ends the three-line summary a task's page opens with:
        what its headline means. ``headline``: as :meth:`headline` returns it (None when
        the kind names no best combination); ``direction``: its metric's (``higher``,
        ``lower`` or ``neutral``). The default says it from the headline and the direction
        alone; a kind overrides it to say it in the terms of its protocol."""
        if headline is None:
            return "No single score ranks this task's combinations; each table below says what it compares."
        best, metric = headline["best"], headline["metric"]
        if direction not in ("higher", "lower"):
            return (f"{best} comes first on {metric}, which declares no better direction, so the order is not a "
                    f"ranking.")
        return (f"Of the combinations compared here, {best} ranks first on {metric} ({direction} is better); the "
                f"tables below compare it with the others.")

    def ranking(self, results: pd.DataFrame) -> list[str] | None:
        """Combination labels best first, for the index's cross-task ranking (None:
        this kind's combinations are not ranked across tasks)."""
        return None

    def ranking_marks(self, results: pd.DataFrame) -> dict[str, list[str]]:
        """Marks on this task's combinations wherever the index names them (its ranking
        across tasks, and the task's line when one is its best): label → ``[mark,
        meaning]``, a short symbol printed after the label and what it means, printed
        once under the table (e.g. a combination that reads what the others may not).
        Default: none."""
        return {}

    def index_cells(self, results: pd.DataFrame, page: Page) -> list[dict[str, Any]] | None:
        """The task's cells in this kind's section of the index (:meth:`index_section`):
        compact, JSON-serialisable summaries, e.g. one per method with its score, 95 %
        interval and whether it is among the best, or None (the kind has no section).
        Called once per drawing of the task's page, after :meth:`page` (which ``page``
        drew, so a kind may hand over what it computed there instead of computing it
        twice); the leaderboard manifest keeps them with the page, so a run that redraws
        no page does not call it again."""
        return None

    def summary_cells(self, results: pd.DataFrame, page: Page) -> list[dict[str, Any]] | None:
        """The cells of the task's page as rows of ``relbench export --summary``
        (:mod:`relbench.summary`), computed as the page computes them, or None (the kind
        gives no summary). Default: every measured cell of :attr:`columns` and metric,
        the mean over seeds with its interval over seeds and ``measure`` "mean over
        seeds" (:func:`relbench.cell_means.seed_mean_cells`); a kind whose page ranks or
        aggregates otherwise overrides it. Each cell is a dict with the kind's method
        columns (:func:`relbench.summary.method_columns`: the interfaces of its
        :attr:`axes` that are also :attr:`columns`, each the plugin label, None where the
        combination has no plugin there), ``metric``, ``score``, ``low`` and ``high``
        (the ends of its 95 % interval, None when the page shows none), ``n`` (the seeds
        the score is a mean over) and ``tie_group`` (True when the page counts it in the
        best's group of indistinguishable cells, False when it does not, None where the
        page ranks no such cell); it may add typed keys of its own (stitching: which
        score of the combination, ``measure``). Called with the rows and ``page`` that
        :meth:`page` receives, without drawing the page."""
        from relbench.cell_means import seed_mean_cells

        return seed_mean_cells(results, self.columns)

    def matrix_cells(self, results: pd.DataFrame, page: Page) -> list[dict[str, Any]] | None:
        """The cells of the task's matrices on the interactive board (:mod:`relbench.board`),
        one per combination, metric and pair of :attr:`matrix_axes` values: the kind's
        method columns (as in :meth:`summary_cells`), ``metric``, the two axis columns,
        ``score``, ``low`` and ``high`` (its 95 % interval, None where none is computed)
        and ``n`` (the seeds the score is a mean over); None (the default) where the kind
        declares no :attr:`matrix_axes`. Called with the rows and ``page`` that
        :meth:`page` receives, without drawing the page. Default where it declares them:
        every measured cell of :attr:`columns` and metric, the mean over seeds with its
        interval over seeds (:func:`relbench.cell_means.seed_mean_cells`)."""
        if not self.matrix_axes:
            return None
        from relbench.cell_means import seed_mean_cells

        return seed_mean_cells(results, self.columns, summary=False)

    def curve_cells(self, results: pd.DataFrame, page: Page) -> list[dict[str, Any]] | None:
        """The points of the task's curves on the interactive board: one per series and
        value of :attr:`curve_axis`, each a dict with the keys that name its series (the
        method columns, ``metric``, a ``measure``), the :attr:`curve_axis` column, and
        ``score``, ``low``, ``high`` (95 % interval, None where none) and ``n`` (seeds).
        A point at 0 on the axis is a reference drawn as a level line. None (the
        default) where the kind declares no :attr:`curve_axis`."""
        return None

    @classmethod
    def index_section(cls, cells_by_task: dict[str, list[dict[str, Any]]]) -> str | None:
        """This kind's section of the leaderboard index (markdown, headed by its own
        ``##`` heading), from the :meth:`index_cells` of each of its tasks (task name →
        cells, in the tasks file's order; tasks without cells are left out), or None
        (no section). Called once per kind each time the index is written; a task's
        page is ``<task>.md`` beside the index."""
        return None

    def companion_tasks(self) -> tuple[str, ...]:
        """The names of other tasks of the same tasks file whose cells this task's
        :meth:`cross_kind_section` reads (e.g. a task named in the kind's parameters, best
        declared in :attr:`presentation_params`), whatever their kind; the index then
        records each such task's :meth:`matrix_cells` with its page. Loading the tasks
        file refuses a name it does not hold. Default: none."""
        return ()

    @classmethod
    def cross_kind_section(cls, cells_by_task: dict[str, list[dict[str, Any]]],
                           companions: dict[str, dict[str, dict[str, Any]]]) -> str | None:
        """A section of the leaderboard index that reads cells of other kinds' tasks
        (markdown, headed by its own ``##`` heading), or None (no section; the default).
        ``cells_by_task``: this kind's tasks' :meth:`index_cells`, as
        :meth:`index_section` gets them; ``companions``: per such task, each of its
        :meth:`companion_tasks` that the tasks file has, by name: ``{"kind": its kind's
        name, "axes": its kind's matrix_axes, "cells": its index cells, "matrix": its
        matrix cells}`` (None where its page recorded none). Called once per kind each
        time the index is written, right after this kind's :meth:`index_section`."""
        return None

    def claim_rows(self, results: pd.DataFrame) -> pd.DataFrame:
        """The rows a claim of the tasks file compares (default: all; stitching keeps
        the stitched, off-diagonal ones)."""
        return results


#: every interface class, by the key hookspecs and tasks.yaml use
INTERFACES: Mapping[str, type[Plugin]] = {
    cls.interface: cls
    for cls in (Dataset, Encoder, AnchorSelector, Similarity, Stitcher, Regularizer, Metric, SpaceMeasure,
                TaskKind)
}

__all__ = [
    "INTERFACES",
    "INVARIANCES",
    "AnchorContext",
    "AnchorSelector",
    "Anchors",
    "Axis",
    "DIRECTIONS",
    "Diagnostic",
    "Direction",
    "Bank",
    "Dataset",
    "DatasetData",
    "Encoder",
    "EncoderContext",
    "FitContext",
    "Metric",
    "NotAchievable",
    "Plugin",
    "Prediction",
    "Regularizer",
    "RegularizerBatch",
    "ResultRow",
    "Similarity",
    "SpaceMeasure",
    "Split",
    "StitchSide",
    "Stitcher",
    "TaskKind",
    "TaskRunAPI",
    "USES",
    "UnitKey",
]
