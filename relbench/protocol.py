"""The evaluation protocol of a task: what each seed draws, what is held out for
choosing constants, and how heads predict.

For every seed the harness draws the seed's own samples from the data set's splits
(the *pool* a data set plugin loads and the encoders embed once): ``train_size``
training samples and ``test_size`` test samples, stratified by class. The training draw
is then divided, stratified, into a *fit* part (what decoders, adapters and learned
anchors train on) and a *validation* part of fraction ``validation`` (what tunable
constants are chosen on). Test samples are only ever predicted and scored.

Draws depend on the labels and the seed only, so they are the same on every machine;
different seeds draw different samples (the pool is shared, each sample is encoded
once per encoder).

Under the ``inductive`` evaluation no prediction may depend on other test samples: a
similarity that declares itself transductive (:meth:`relbench.interfaces.Similarity.
transductive`, e.g. one normalising with the statistics of the projected batch) is
refused when the tasks file is validated (:func:`check_similarities`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from relbench.sampling import stratified_split, stratified_subsample

if TYPE_CHECKING:
    from relbench.task_model import Task

#: the fraction of a seed's training draw held out for validation when the tasks file
#: does not say (a common choice; ≥ 1,000 validation samples at the suite's 5,000)
DEFAULT_VALIDATION = 0.2
#: the largest validation fraction accepted (the fit part must keep most of the draw)
MAX_VALIDATION = 0.5


@dataclass(frozen=True)
class EvaluationProtocol:
    """A task's protocol (tasks.yaml ``protocol:``, in ``suite:`` or per task).

    Parameters:
        train_size: training samples each seed draws from the data set's training pool
            (``null``: the whole pool, the same for every seed).
        test_size: test samples each seed draws from the test pool (``null``: all).
        validation: fraction of the seed's training draw held out to choose tunable
            constants (stratified); 0 switches tuning off (defaults are used).
        evaluation: ``inductive`` (a prediction never depends on other test samples)
            or ``transductive`` (heads normalise over the evaluated split, as the
            reference code does at test time).
    """

    train_size: int | None = None
    test_size: int | None = None
    validation: float = DEFAULT_VALIDATION
    evaluation: Literal["inductive", "transductive"] = "inductive"

    def identity(self) -> dict[str, Any]:
        """What enters every unit's fingerprint."""
        return asdict(self)


def check_similarities(task: Task) -> None:
    """Refuse, under the inductive protocol, a similarity of ``task``'s grid that
    declares itself :meth:`~relbench.interfaces.Similarity.transductive`: a
    ``ValueError`` naming the task, the similarity and the two ways out (the
    similarity's own inductive parameters, when it has some, or the transductive
    protocol)."""
    if task.protocol.evaluation != "inductive":
        return
    for spec in task.specs("similarity"):
        similarity = spec.build()
        if not similarity.transductive():
            continue
        alternative = similarity.inductive_alternative()
        own = f"give it `params: {{{alternative}}}` (its inductive setting)" if alternative else "choose another one"
        raise ValueError(f"task {task.name!r}: similarity {spec.label!r} is transductive (a test sample's "
                         f"prediction depends on the other test samples), which the task's inductive protocol "
                         f"refuses. Either {own}, or set `protocol: {{evaluation: transductive}}` in the task (its "
                         f"rows are then marked transductive).")


@dataclass(frozen=True)
class Draw:
    """One seed's samples: positions in the data set's train split (``fit``,
    ``validation``) and test split (``test``), each sorted."""

    fit: np.ndarray
    validation: np.ndarray
    test: np.ndarray

    def positions(self, split: str) -> np.ndarray:
        """The positions of ``split`` (``train`` is the fit part)."""
        return {"train": self.fit, "fit": self.fit, "validation": self.validation, "test": self.test}[split]


def _seed_for(seed: int, part: int) -> int:
    """A seed for one part of a draw, independent across parts and seeds."""
    return int(np.random.SeedSequence([int(seed), part]).generate_state(1)[0])


def draw(protocol: EvaluationProtocol, train_labels: np.ndarray | None, n_train: int,
         test_labels: np.ndarray | None, n_test: int, seed: int) -> Draw:
    """The samples of ``seed`` under ``protocol`` (see the module docstring)."""
    train = stratified_subsample(train_labels, n_train, protocol.train_size, _seed_for(seed, 0))
    test = stratified_subsample(test_labels, n_test, protocol.test_size, _seed_for(seed, 1))
    if protocol.validation <= 0:
        return Draw(train, train[:0], test)
    labels = None if train_labels is None else np.asarray(train_labels)[train]
    fit, val = stratified_split(labels, len(train), protocol.validation, _seed_for(seed, 2))
    return Draw(train[fit], train[val], test)


def describe(protocol: EvaluationProtocol, seeds: list[int], samples: list[dict], tuned: list[tuple[str, dict]],
             seeds_vary: str = "") -> str:
    """The protocol paragraph of a page: sizes per seed, validation fraction, evaluation
    mode, seeds, and every constant chosen on validation data with its search space.

    ``samples`` are the rows' recorded sizes (``{"fit", "validation", "test"}``);
    ``tuned`` pairs a plugin label with a row's tuning record (:mod:`relbench.tuning`);
    ``seeds_vary``: the kind's :attr:`~relbench.interfaces.TaskKind.seeds_vary`, said in
    place of the sample draw, validation part and evaluation mode where the kind draws none.
    """
    if seeds_vary:
        return f"**Protocol.** The {len(seeds)} seeds {sorted(seeds)}: {seeds_vary}\n"
    def size(n: int | None) -> str:
        return "the whole pool" if n is None else f"{n:,}"

    if protocol.test_size is None:  # the whole test split: no seed draws its own
        training = "all its training samples" if protocol.train_size is None else \
            f"{protocol.train_size:,} training samples of its own"
        carried = ("so an interval over seeds does not carry the test samples' variation (it is conditional on "
                   "them)" if len(seeds) > 1 else "so the interval, a bootstrap over them, is conditional on the seed")
        parts = [f"**Protocol.** Each of the {len(seeds)} seeds {sorted(seeds)} uses the data set's pool: {training} "
                 f"and all its test samples, **the same test samples in every seed**, {carried}"]
    else:
        parts = [f"**Protocol.** Each of the {len(seeds)} seeds {sorted(seeds)} draws its own samples from the data "
                 f"set's pool: {size(protocol.train_size)} training and {size(protocol.test_size)} test samples "
                 f"(stratified)"]
    if protocol.validation > 0:
        parts.append(f"; {protocol.validation:.0%} of the training draw is held out as a validation part on which "
                     f"open constants are chosen, the rest is what decoders fit on")
    else:
        parts.append("; no validation part (constants keep their defaults)")
    sizes = sorted({(s.get("fit"), s.get("validation"), s.get("test")) for s in samples if s})
    if sizes:
        parts.append(" — measured per unit: " + "; ".join(f"fit {f:,}, validation {v:,}, test {t:,}"
                                                          for f, v, t in sizes))
    varied = "the validation part, the anchors and the initialisations" if protocol.test_size is None else \
        "the draw, the anchors and the initialisations"
    parts.append(f". Every seed draws from the same pool, so the seeds' samples overlap: seeds vary {varied}, not "
                 f"the data source, and the intervals on this page are conditional on that pool (and on the task's "
                 f"encoders: encoder pairs are not resampled)")
    parts.append(f". Evaluation is **{protocol.evaluation}**"
                 + (": a prediction never depends on other test samples (heads normalise with statistics fixed on "
                    "their training data)." if protocol.evaluation == "inductive" else
                    ": heads normalise over the evaluated split, so a prediction depends on the other test samples."))
    chosen: dict[tuple[str, str], dict] = {}
    for label, record in tuned:
        for name, entry in (record or {}).get("parameters", {}).items():
            slot = chosen.setdefault((label, name), {"space": entry["space"], "relative_to": entry["relative_to"],
                                                     "counts": {}})
            value = json_value(entry["chosen"])
            slot["counts"][value] = slot["counts"].get(value, 0) + 1
    if chosen:
        lines = []
        for (label, name), slot in sorted(chosen.items()):
            ordered = sorted(slot["counts"].items(), key=lambda kv: -kv[1])
            counts = ", ".join(f"{v} ×{n}" for v, n in ordered)
            rel = f" ({slot['relative_to']})" if slot["relative_to"] else ""
            most = [v for v, n in ordered if n == ordered[0][1]]
            lines.append(f"- {label}: `{name.split('.', 1)[1]}` over {slot['space']}{rel}: chosen {counts} "
                         f"(units){edge_note(slot['space'], most)}")
        parts.append("\n\nConstants chosen on the validation part (per encoder space and seed):\n\n" + "\n".join(lines))
    return "".join(parts) + "\n"


def edge_note(space: Any, most_chosen: list[str]) -> str:
    """``; …`` when every value chosen most often (``most_chosen``, as shown: one, or those
    tied) is an end of a numeric search space (the best value may lie beyond the grid,
    which a reader of the score should know); "" else."""
    numbers = [v for v in space if isinstance(v, (int, float)) and not isinstance(v, bool)] \
        if isinstance(space, (list, tuple)) else []
    if len(numbers) < 2 or len(numbers) != len(space) or not most_chosen:
        return ""
    ends = {json_value(min(numbers)), json_value(max(numbers))}
    if not set(most_chosen) <= ends:
        return ""
    if len(most_chosen) == 1:
        return (f"; the value chosen most often, {most_chosen[0]}, is an end of the grid, so a better one may lie "
                f"beyond it")
    return (f"; the values chosen most often, {' and '.join(most_chosen)}, are ends of the grid, so a better one may "
            f"lie beyond them")


def json_value(value: Any) -> str:
    """A chosen value as shown on a page."""
    return f"{value:g}" if isinstance(value, float) else str(value)
