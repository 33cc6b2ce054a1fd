"""The stable public surface for plugin authors: the one module a plugin imports.

Everything a plugin needs from relbench is re-exported here — the hook marker, the
interfaces and the data they exchange, the task model, the page, training, tuning,
uncertainty and per-sample helpers task kinds use, the errors a plugin raises, and the
conformance kit of :mod:`relbench.testing`::

    from relbench.api import Similarity, hookimpl

The names in ``__all__`` are kept working across releases; the modules they come from
are relbench's internals and may move. The README's "The plugin API" section says what
each name is.

Nothing in relbench's core imports this module, so a plugin importing it while the
registry loads entry points (:mod:`relbench.plugins`) closes no import cycle: every
module below is complete by the time a plugin is imported.
"""

from __future__ import annotations

from relbench import hookimpl
from relbench.cache import atomic_write_bytes, default_cache_root, file_sha256
from relbench.errors import ConfigError, MissingAsset, UserError
from relbench.interfaces import (
    DIRECTIONS,
    USES,
    AnchorContext,
    AnchorSelector,
    Anchors,
    Axis,
    Bank,
    Dataset,
    DatasetData,
    DataSources,
    Diagnostic,
    Direction,
    Encoder,
    EncoderContext,
    FitContext,
    Metric,
    NotAchievable,
    Plugin,
    Prediction,
    Regularizer,
    RegularizerBatch,
    ResultRow,
    Similarity,
    SpaceMeasure,
    Split,
    StitchSide,
    Stitcher,
    TaskKind,
    TaskRunAPI,
    Tunable,
    UnitKey,
)
from relbench.console import progress_bar
from relbench.deferred import load as deferred_import
from relbench.pages import (Page, arrow, directions, fmt, listing, lower_is_better, pair_heatmap, save_figure, slug,
                            sparse_figure, table)
from relbench.precision import autocast
from relbench.reuse import ORIGIN, origin_marks
from relbench.rows import metric_row
from relbench.samples import predictions as per_sample_predictions
from relbench.samples import read_predictions
from relbench.samples import values as per_sample_values
from relbench.sampling import stratified_split, stratified_subsample
from relbench.task_model import EncoderSpec, PluginSpec, Suite, Task
from relbench.testing import (TaskRunDouble, check_anchor_selector, check_dataset, check_encoder, check_metric,
                              check_regularizer, check_similarity, check_space_measure, check_stitcher, check_task_kind,
                              make_task, spec)
from relbench.training import (
    HeadSettings,
    NonFinite,
    finish_training,
    fit_reference_head,
    head_key,
    head_settings,
    minibatches,
    predict_logits,
    seeded_generator,
    train_classifier,
    train_loop,
    validate_head_params,
)
from relbench.tuning import Candidate, candidates, choose
from relbench.uncertainty import (
    Draws,
    bootstrap_columns,
    fmt_interval,
    indistinguishable,
    method_note,
    seed_interval,
    t_draws,
    with_samples,
)

__all__ = [
    # registering plugins
    "hookimpl",
    # the interfaces
    "Plugin",
    "Dataset",
    "Encoder",
    "AnchorSelector",
    "Similarity",
    "Regularizer",
    "Stitcher",
    "Metric",
    "SpaceMeasure",
    "TaskKind",
    "TaskRunAPI",
    # the data the interfaces exchange
    "AnchorContext",
    "Anchors",
    "Bank",
    "DatasetData",
    "DataSources",
    "Diagnostic",
    "Direction",
    "DIRECTIONS",
    "EncoderContext",
    "FitContext",
    "NotAchievable",
    "Prediction",
    "RegularizerBatch",
    "ResultRow",
    "Split",
    "StitchSide",
    "Tunable",
    "UnitKey",
    "USES",
    "progress_bar",
    "deferred_import",
    # the task model
    "Task",
    "Axis",
    "PluginSpec",
    "EncoderSpec",
    "Suite",
    # errors
    "UserError",
    "ConfigError",
    "MissingAsset",
    # leaderboard pages
    "Page",
    "arrow",
    "directions",
    "fmt",
    "lower_is_better",
    "slug",
    "table",
    "listing",
    "save_figure",
    "pair_heatmap",
    "sparse_figure",
    "ORIGIN",
    "origin_marks",
    # training heads and adapters
    "HeadSettings",
    "NonFinite",
    "finish_training",
    "fit_reference_head",
    "head_key",
    "head_settings",
    "minibatches",
    "predict_logits",
    "seeded_generator",
    "train_classifier",
    "train_loop",
    "validate_head_params",
    "autocast",
    # tuning on validation data
    "Candidate",
    "candidates",
    "choose",
    # per-sample records, rows and intervals
    "per_sample_predictions",
    "per_sample_values",
    "metric_row",
    "Draws",
    "bootstrap_columns",
    "fmt_interval",
    "indistinguishable",
    "method_note",
    "seed_interval",
    "t_draws",
    "with_samples",
    "read_predictions",
    # drawing samples
    "stratified_split",
    "stratified_subsample",
    # files and caches
    "atomic_write_bytes",
    "default_cache_root",
    "file_sha256",
    # the conformance kit (relbench.testing)
    "TaskRunDouble",
    "check_anchor_selector",
    "check_dataset",
    "check_encoder",
    "check_metric",
    "check_regularizer",
    "check_similarity",
    "check_space_measure",
    "check_stitcher",
    "check_task_kind",
    "make_task",
    "spec",
]
