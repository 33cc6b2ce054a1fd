"""Every relbench hook, in one place.

A plugin is any importable module registered under the ``relbench`` entry-point group
(``[project.entry-points.relbench]`` in its pyproject). relbench imports it and calls
the hooks below that it implements (marked with :data:`relbench.hookimpl`). Each hook
is called once, when the plugin registry is first built (``relbench plugins``, or at the
start of ``relbench run``), takes no arguments, and returns a list of plugin *classes*
of one interface from :mod:`relbench.interfaces`. A class's ``name`` is what tasks.yaml
uses to select it; two classes claiming one name in one interface is an error that names
both packages.
"""

import pluggy

hookspec = pluggy.HookspecMarker("relbench")


@hookspec
def relbench_encoders():
    """Encoder classes: data of one view (images, text, words) → ``n × d`` embeddings.

    Returns: ``list[type[relbench.interfaces.Encoder]]``.
    Called: once, when the registry is built. The runner later instantiates a class
    per encoder entry of a task, asks its fingerprint, and calls ``setup``/``encode``
    only for splits missing from the embedding cache.
    """


@hookspec
def relbench_anchor_selectors():
    """AnchorSelector classes: banks (+ labels, seed, excluded encoders) → an anchor
    recipe that every bank can realise.

    Returns: ``list[type[relbench.interfaces.AnchorSelector]]``.
    Called: once, when the registry is built. ``select`` is later called once per
    (task, seed, selector) — and per held-out encoder when the selector learns from
    the banks.
    """


@hookspec
def relbench_similarities():
    """Similarity classes: relative projections ``(X, A) → rel``.

    Returns: ``list[type[relbench.interfaces.Similarity]]``.
    Called: once, when the registry is built. Each similarity is copied per bank,
    fitted on that bank's training embeddings and then projects any of its splits.
    """


@hookspec
def relbench_stitchers():
    """Stitcher classes: fit a decoder on the decoder-side (target) bank, predict for
    any encoder-side (source) bank.

    Returns: ``list[type[relbench.interfaces.Stitcher]]``.
    Called: once, when the registry is built. ``fit`` runs once per target and
    ``predict`` once per (source, target) pair.
    """


@hookspec
def relbench_regularizers():
    """Regularizer classes: extra loss terms while a head or adapter trains.

    Returns: ``list[type[relbench.interfaces.Regularizer]]``.
    Called: once, when the registry is built. Instances are handed to stitchers that
    accept regularizers, which add ``loss(batch)`` to their training loss.
    """


@hookspec
def relbench_datasets():
    """Dataset classes: splits with stable ids, labels, class names and views.

    Returns: ``list[type[relbench.interfaces.Dataset]]``.
    Called: once, when the registry is built; ``load`` once per task that uses it
    (and per out-of-domain anchor pool).
    """


@hookspec
def relbench_metrics():
    """Metric classes: ``(y_true, y_pred) → float``.

    Returns: ``list[type[relbench.interfaces.Metric]]``.
    Called: once, when the registry is built; ``compute`` once per evaluated cell.
    """


@hookspec
def relbench_space_measures():
    """SpaceMeasure classes: two spaces of the same samples ``(X, Y)`` → a float, with a
    declared direction (higher or lower is more similar).

    Returns: ``list[type[relbench.interfaces.SpaceMeasure]]``.
    Called: once, when the registry is built; ``measure`` once per pair of encoders a
    task kind compares (once per unordered pair for a symmetric measure).
    """


@hookspec
def relbench_task_kinds():
    """TaskKind classes: evaluation protocols (stitching, word neighbourhoods,
    reconstruction, translation quality …) selected by a task's ``kind:``.

    Returns: ``list[type[relbench.interfaces.TaskKind]]``.
    Called: once, when the registry is built. Each kind is then built with the task's
    own parameters: ``plan(task)`` lists its units (before any data is loaded, for every
    run, ``--dry-run``, page and export), ``run(run)`` computes the units not stored
    through a :class:`relbench.interfaces.TaskRunAPI`, and ``page(results, page)`` draws
    its leaderboard page from the stored rows of the current units (``headline``,
    ``ranking`` and ``claim_rows`` feed the index and the claims).
    """


#: hook name → interface key (see ``relbench.interfaces.INTERFACES``)
HOOK_INTERFACES = {
    "relbench_encoders": "encoder",
    "relbench_anchor_selectors": "selector",
    "relbench_similarities": "similarity",
    "relbench_stitchers": "stitcher",
    "relbench_regularizers": "regularizer",
    "relbench_datasets": "dataset",
    "relbench_metrics": "metric",
    "relbench_space_measures": "space_measure",
    "relbench_task_kinds": "task_kind",
}
