"""The audit a release publishes: what ``relbench verify`` printed, kept as a page.

``relbench verify --report FILE`` (and ``relbench release``, which audits what it has just
drawn into ``AUDIT.md`` beside the pages) copies everything the audit prints on standard
output (:class:`Tee`: integrity findings, the sample, the per-metric comparison) into a
markdown file headed by what a reader needs to judge it (:func:`report_text`): the exact
command, the revision of the code that recomputed the sample, the machine, the date and
the wall time. Progress bars go to standard error and are not kept.
"""

from __future__ import annotations

import io
from datetime import datetime, timezone

from relbench.results import THREADS_PREFIX

#: the file ``relbench release`` writes beside the pages
AUDIT_PAGE = "AUDIT.md"


class Tee(io.TextIOBase):
    """A text stream that writes to ``stream`` and keeps a copy (:meth:`text`)."""

    def __init__(self, stream) -> None:
        self.stream, self.kept = stream, io.StringIO()

    def write(self, text: str) -> int:
        """Write ``text`` to both."""
        self.kept.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        """Flush the stream written through."""
        self.stream.flush()

    def text(self) -> str:
        """Everything written so far."""
        return self.kept.getvalue()


def report_text(printed: str, command: str, revision: str, environment: str, seconds: float, holds: bool,
                tables: dict[str, str] | None = None, what: str = "recomputed a sample of its units from scratch "
                                                                  "(a fresh cache and store)") -> str:
    """The audit page: a header (the command, what it did, the tables it read with their
    sha256, the code revision, the machine, the date, the wall time and the outcome) and
    ``printed`` verbatim. ``environment``'s torch thread count is left out: it is the
    command's own, not the count the units were recomputed at, which ``printed`` states."""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    outcome = "everything holds (exit 0)" if holds else "there are findings (exit 1): read them below"
    machine = ", ".join(part for part in environment.split(", ") if not part.startswith(THREADS_PREFIX))
    read = "; ".join(f"`{path}` (sha256 `{digest}`)" for path, digest in (tables or {}).items())
    return (f"# Reproduction audit\n\n"
            f"Written by `relbench verify`; do not edit by hand. The command `{command}` checked the "
            f"release's integrity and {what}, with the code at revision `{revision}`, on {machine}, on {when}, "
            f"in {seconds / 60:.1f} min.{f' Tables read: {read}.' if read else ''} Outcome: {outcome}.\n\n"
            f"```text\n{printed.rstrip()}\n```\n")

