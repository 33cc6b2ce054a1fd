"""One thread count for every pool that sums a number: torch's and the native ones.

A row names the thread count it was computed with (``torch threads N`` in its
``environment``) so that ``relbench verify`` can recompute it bit for bit. torch's own
count is not enough: NumPy and SciPy call the BLAS/LAPACK library they ship with
(OpenBLAS in the wheels), whose pool starts at one thread per core and splits a matrix
product's or an SVD's sums by it, so a space-similarity measure or a least-squares fit
moves in its last bits with that pool's size. :func:`fixed_threads` sets torch, every
native pool already loaded (through ``threadpoolctl``: OpenBLAS, MKL, OpenMP) and the
variables the pools and ``-j`` workers read when they start to the same count.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

#: what OpenMP, MKL and OpenBLAS read when they load: a worker process started with these
#: set computes at the count from its first product (OpenBLAS prefers its own variable)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def thread_variables(count: int) -> dict[str, str]:
    """The environment entries that start a process's native pools at ``count`` threads."""
    return dict.fromkeys(THREAD_VARIABLES, str(count))


def pin_threads(count: int) -> None:
    """This whole process at ``count`` threads from now on, as a worker sets itself when it
    starts: torch, every native pool already loaded and the variables later loads read."""
    import torch
    from threadpoolctl import threadpool_limits

    os.environ.update(thread_variables(count))
    threadpool_limits(count)
    torch.set_num_threads(count)


@contextlib.contextmanager
def fixed_threads(count: int | None) -> Iterator[None]:
    """This process at ``count`` threads for the block: torch, the native pools NumPy and
    SciPy use, and the variables processes started meanwhile read; all restored afterwards.
    No change for None."""
    if count is None:
        yield
        return
    import torch
    from threadpoolctl import threadpool_limits

    saved = {var: os.environ.get(var) for var in THREAD_VARIABLES}
    before = torch.get_num_threads()
    os.environ.update(thread_variables(count))
    torch.set_num_threads(count)
    try:
        with threadpool_limits(count):
            yield
    finally:
        torch.set_num_threads(before)
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
