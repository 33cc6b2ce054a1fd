"""Several task pages drawn at once, each in a worker process (``-j N``).

A page is drawn from its task's stored rows alone (its bootstrap intervals, figures and
cells), so pages are independent: :func:`draw_pages` draws them in ``jobs`` processes
started afresh (``spawn``: no thread pool of the parent is inherited half-way) and
returns what each drawing returned, in the order asked. Every worker computes with one
thread (BLAS and torch), so ``jobs`` workers use ``jobs`` cores; a page's numbers do not
depend on how many were drawn at once (tested: the folder is byte for byte the same).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor


def _one_thread() -> None:
    """A worker's start: one BLAS thread and one torch thread."""
    from relbench.threads import pin_threads

    pin_threads(1)


def draw_pages(draw: Callable[..., dict], work: Sequence[tuple], jobs: int) -> list[dict]:
    """``[draw(*args) for args in work]``; with ``jobs`` > 1 and more than one page, in
    ``min(jobs, len(work))`` worker processes (``draw`` and its arguments are pickled:
    a module-level function and plain data). An error of any page is raised here, after
    the pages already under way have finished."""
    if jobs <= 1 or len(work) <= 1:
        return [draw(*args) for args in work]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(work)), mp_context=context, initializer=_one_thread) as pool:
        futures = [pool.submit(draw, *args) for args in work]
        try:
            return [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise
