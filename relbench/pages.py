"""What a task kind needs to draw its leaderboard page: where figures go, and how
numbers and their directions are written. Kinds take :class:`Page` and the helpers
they draw with from :mod:`relbench.api` (which re-exports them from here), never from
the leaderboard renderer."""

from __future__ import annotations

import math
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relbench import deferred
from relbench.names import inside
from relbench.results import ResultStore

pd = deferred.load("pandas")

ARROWS = {"higher": "↑", "lower": "↓", "neutral": ""}
#: the widest line a page's table may have, in characters: a wider one overflows a screen
WIDTH = 160
#: the most names a page lists inline; a longer list folds into a ``<details>`` block
LISTED = 8
#: the :class:`Page` of the leaderboard index's figures (a reserved task name)
INDEX = "index"


@dataclass
class Page:
    """Where one task's page and figures go, and where the figures its run drew are stored."""

    root: Path
    task: str
    store: ResultStore | None = None
    #: the figure files handed out for this page (so a page is redrawn if one goes missing)
    written: list[Path] = field(default_factory=list)
    #: the task's metric plugins by label, to rescore stored per-sample predictions
    #: (intervals, :mod:`relbench.uncertainty`); a metric missing here is shown from
    #: its stored values
    metrics: dict[str, Any] = field(default_factory=dict)
    #: the index's line for the task, when the kind's ``page()`` sets it (same keys as
    #: :meth:`~relbench.interfaces.TaskKind.headline`, which is then not called)
    headline: dict[str, Any] | None = None

    @property
    def folder(self) -> Path:
        """The folder of this page's figures (relbench's alone: a redrawing leaves in it
        only what it wrote)."""
        # the index's own figures go under a reserved name no task can take
        return self.root / "figures" / INDEX if self.task == INDEX else inside(self.root / "figures", self.task)

    def figure(self, filename: str) -> tuple[Path, str]:
        """``(path to write, markdown-relative link)`` of a figure of this page. A link
        planted at that path is removed first: a figure never writes through a link."""
        folder = self.folder
        folder.mkdir(parents=True, exist_ok=True)
        filename = Path(filename).name
        path = folder / filename
        if path.is_symlink():
            path.unlink()
        self.written.append(path)
        return path, f"figures/{self.task}/{filename}"

    def save(self, fig, filename: str, dpi: int = 110) -> str:
        """Write a matplotlib figure as ``filename`` (PNG, for the page) and as SVG beside
        it (the same name with ``.svg``, for papers), close it, and return the PNG's
        markdown-relative link."""
        path, link = self.figure(filename)
        self.figure(Path(filename).with_suffix(".svg").name)  # its vector twin, written beside it
        save_figure(fig, path, dpi)
        return link

    def stored_figure(self, filename: str) -> str | None:
        """Link to a figure drawn during the run (kept in the results store, see
        :meth:`ResultStore.figure_path`), copied next to the page; None if there is none."""
        source = self.store.figure_path(self.task, filename) if self.store else None
        if source is None or not source.exists():
            return None
        path, link = self.figure(filename)
        if path.resolve() != source.resolve():
            shutil.copyfile(source, path)
        vector = source.with_suffix(".svg")
        if vector.exists():  # its vector twin, when the run drew one
            vector_path, _ = self.figure(vector.name)
            if vector_path.resolve() != vector.resolve():
                shutil.copyfile(vector, vector_path)
        return link


#: the salt of the element ids of every SVG figure (:func:`save_figure`)
SVG_SALT = "relbench"


def save_figure(fig, path: Path, dpi: int = 110) -> None:
    """Write a matplotlib figure as the PNG ``path`` and as SVG beside it (the same name
    with ``.svg``, its text kept as text: editable, searchable), creating the folder, and
    close it; the same figure gives the same bytes in any process. For figures a task kind
    draws during a run into
    :meth:`relbench.results.ResultStore.figure_path`, which :meth:`Page.stored_figure`
    copies next to the page."""
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    # the same figure gives the same bytes in any process: a fixed salt for the SVG's
    # element ids (else random per process) and no date in its metadata
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": SVG_SALT}):
        fig.savefig(path.with_suffix(".svg"), metadata={"Date": None})
    plt.close(fig)


def pair_heatmap(M: Any, labels: list[str], title: str, axes: tuple[str, str] = ("target", "source"),
                 cmap: str = "viridis", scale: tuple[float, float] | None = None, cell=None):
    """A square matrix over a task's encoders as an annotated heatmap (rows: ``axes[1]``,
    columns: ``axes[0]``), NaN cells grey; each cell says ``cell(i, j, value)`` (default:
    the value to two decimals, ``n/a`` for NaN) in white on the darker half of the colour
    scale and black on the lighter. ``scale`` fixes the colour range (default: the data's).
    Returns the matplotlib figure, for :meth:`Page.save` or :func:`save_figure`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cell = cell or (lambda i, j, value: "n/a" if np.isnan(value) else f"{value:.2f}")
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(labels), 1.0 + 0.8 * len(labels)))
    vmin, vmax = scale or (None, None)
    image = ax.imshow(np.ma.masked_invalid(M), cmap=cmap, vmin=vmin, vmax=vmax)
    ax.set_facecolor("#cccccc")
    low, high = image.norm.vmin, image.norm.vmax
    dark_low = not cmap.endswith("_r")  # viridis is dark at its low end, viridis_r at its high end
    for i in range(len(labels)):
        for j in range(len(labels)):
            value = M[i, j]
            dark = np.isnan(value) or low is None or (value < (low + high) / 2) == dark_low
            ax.text(j, i, cell(i, j, value), ha="center", va="center", color="white" if dark else "black",
                    fontsize=8)
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlabel(axes[0])
    ax.set_ylabel(axes[1])
    ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.046)
    fig.tight_layout()
    return fig


def slug(text: str) -> str:
    """A file-name-safe form of a label: runs of other characters become ``-``."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:60]


def fmt(mean: float, std: float | None = None, scale: float = 1.0) -> str:
    """``mean ± std`` with sensible digits; ``n/a`` for missing values."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "n/a"
    if std is None or (isinstance(std, float) and math.isnan(std)):
        return f"{mean * scale:.3f}"
    return f"{mean * scale:.3f} ± {std * scale:.3f}"


def directions(results: pd.DataFrame) -> dict[str, str]:
    """Metric → its declared direction, as the rows carry it (``neutral`` if rows of
    one metric disagree, which a page must not guess about)."""
    if results.empty or "direction" not in results:
        return {}
    found = results.dropna(subset=["direction"]).groupby("metric")["direction"].agg(set)
    return {metric: next(iter(d)) if len(d) == 1 else "neutral" for metric, d in found.items()}


def arrow(metric: str, direction: str) -> str:
    """The metric's name with ↑ (higher is better), ↓ (lower) or nothing (neutral)."""
    mark = ARROWS.get(direction, "")
    return f"{metric} {mark}" if mark else metric


def lower_is_better(direction: str) -> bool:
    """Whether a ranking by this direction sorts ascending."""
    return direction == "lower"


def table(rows: list[list[Any]], headers: list[str], keep: int = 1, width: int = WIDTH) -> str:
    """A markdown pipe table whose lines are at most ``width`` characters: when the whole
    table is wider, the columns after the first ``keep`` (those that name a row) are
    dealt, in order, into as few tables as fit, each repeating the ``keep`` columns and
    separated by a blank line. A column too wide to fit beside them still gets a table
    of its own."""
    from tabulate import tabulate

    def render(columns: list[int]) -> str:
        return tabulate([[row[i] for i in columns] for row in rows], headers=[headers[i] for i in columns],
                        tablefmt="pipe", disable_numparse=True)

    def fits(text: str) -> bool:
        return max(map(len, text.splitlines())) <= width

    whole = render(list(range(len(headers))))
    if fits(whole) or len(headers) <= keep:
        return whole
    named, groups = list(range(keep)), [[]]
    for column in range(keep, len(headers)):
        if groups[-1] and not fits(render(named + groups[-1] + [column])):
            groups.append([])
        groups[-1].append(column)
    return "\n\n".join(render(named + group) for group in groups)


def listing(label: str, items: list[str], lines: bool = False, width: int = WIDTH) -> str:
    """A list of names under ``label``: inline (``label: a, b, c.``) when short, that is
    at most :data:`LISTED` items on one line of at most ``width`` characters; otherwise
    a collapsed ``<details>`` block whose summary is the label and the count, so that a
    long list does not fill the page. ``lines``: the items are sentences (they may hold
    commas), one bullet each, folded when there are more than :data:`LISTED`."""
    if lines:
        body = "\n".join(f"- {item}" for item in items)
        if len(items) <= LISTED:
            return f"{label}:\n\n{body}"
    else:
        body = f"{', '.join(items)}."
        if len(items) <= LISTED and len(label) + 2 + len(body) <= width:
            return f"{label}: {body}"
    return f"<details><summary>{label} ({len(items)})</summary>\n\n{body}\n\n</details>"


def sparse_figure(what: str, values: Any) -> str | None:
    """The line a page shows instead of a figure (``what``, e.g. "heatmap of x") more than
    half of whose cells (``values``, any nesting of numbers; NaN or None: missing) are
    missing, saying why it is not drawn; None when the figure is to be drawn. A figure
    not drawn is not handed out by :meth:`Page.figure`, so a redrawing removes its old
    file."""
    cells = list(_flat(values))
    missing = sum(v is None or (isinstance(v, float) and math.isnan(v)) for v in cells)
    if cells and 2 * missing <= len(cells):
        return None
    return (f"_No {what}: {missing} of {len(cells)} cells have no score, and a figure more than half empty is not "
            f"drawn._\n")


def _flat(values: Any):
    if hasattr(values, "tolist"):  # numpy arrays and pandas objects
        values = values.tolist()
    if isinstance(values, (list, tuple)):
        for value in values:
            yield from _flat(value)
    else:
        yield None if values is None else float(values)
