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

import lazy_loader

from relbench.names import inside
from relbench.results import ResultStore

pd = lazy_loader.load("pandas")

ARROWS = {"higher": "↑", "lower": "↓", "neutral": ""}
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
        import matplotlib.pyplot as plt

        path, link = self.figure(filename)
        vector, _ = self.figure(Path(filename).with_suffix(".svg").name)
        fig.savefig(path, dpi=dpi)
        with plt.rc_context({"svg.fonttype": "none"}):  # text stays text: editable, searchable
            fig.savefig(vector)
        plt.close(fig)
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
