"""Numeric precision of a task's heavy loops: part of every unit's identity.

A task runs at ``fp32`` (the default) or ``bf16``. The runner sets the task's precision
while it computes the task's units (:func:`running_at`); a plugin opts a loop into it
by wrapping it in :func:`autocast`, which is ``torch.autocast`` with bfloat16 when the
precision is ``bf16`` and a no-op at ``fp32``. Parameters, optimiser state and
reductions stay fp32 under autocast (PyTorch's autocast policy), so bf16 changes the
rounding of matrix products, not what is trained. Where a plugin opts in is its
choice and stated in its docstring; everything else runs at fp32 whatever the task's
precision. The precision is stored on every row and in the unit's identity, so a bf16
result is never mistaken for, or resumed as, an fp32 one.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where autocast is used: the command line reads this module without it
    import torch

#: the precisions a task may run at, the first the default
PRECISIONS = ("fp32", "bf16")
DEFAULT = PRECISIONS[0]

#: set by ``relbench run --precision P`` (and inherited by its worker processes): every
#: task of the suite runs at P, whatever its tasks file says
PRECISION_ENV = "RELBENCH_PRECISION"

_current: contextvars.ContextVar[str] = contextvars.ContextVar("relbench_precision", default=DEFAULT)


def current() -> str:
    """The precision of the task being computed (``fp32`` outside a task)."""
    return _current.get()


@contextlib.contextmanager
def running_at(precision: str) -> Iterator[None]:
    """Compute the enclosed work at ``precision`` (one of :data:`PRECISIONS`)."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {', '.join(PRECISIONS)}")
    token = _current.set(precision)
    try:
        yield
    finally:
        _current.reset(token)


def autocast(device: torch.device | str) -> torch.autocast:
    """``torch.autocast`` on ``device`` with bfloat16, enabled only when the current
    precision is ``bf16``: wrap a plugin's heavy loop in it to run at the task's precision."""
    import torch

    kind = torch.device(device).type
    return torch.autocast(kind, dtype=torch.bfloat16, enabled=current() == "bf16")


def override() -> str | None:
    """The precision ``--precision`` (:data:`PRECISION_ENV`) imposes on every task, or None."""
    return os.environ.get(PRECISION_ENV) or None


#: the side of the square matrix products that compare bf16 with fp32 (a few hundredths of a second)
PROBE_SIZE = 512
#: below this bf16/fp32 throughput ratio a run says that its bf16 tasks are slow here
SLOW_BF16 = 1.0


@functools.cache
def bf16_speed() -> float | None:
    """bf16 matrix-product throughput over fp32 on this machine's CPU, one thread (the
    best of three :data:`PROBE_SIZE`-square products of each; measured once per
    process), or None where torch sees a GPU, whose bf16 is not measured here.

    CPUs differ by more than a factor: with AMX, bf16 products run about 6× fp32; with
    AVX-512 BF16 alone about 2×; where neither is exposed to torch (e.g. a virtual
    machine that hides AMX), about 0.5×."""
    import torch

    if torch.cuda.is_available():
        return None
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        best = {}
        for dtype in (torch.float32, torch.bfloat16):
            a = torch.randn(PROBE_SIZE, PROBE_SIZE).to(dtype)
            a @ a  # warm-up: the first product picks and loads its kernel
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                a @ a
                times.append(time.perf_counter() - t0)
            best[dtype] = min(times)
    finally:
        torch.set_num_threads(threads)
    return best[torch.float32] / best[torch.bfloat16]


def slow_bf16_note(tasks: list[str], speed: float | None = None) -> str | None:
    """The line a run prints before computing ``tasks`` (those with units to compute at
    bf16) on a CPU whose bf16 products are slower than its fp32 ones
    (:func:`bf16_speed`, or ``speed`` when given), or None. Nothing is changed: the
    precision is part of each unit's identity, so the user chooses."""
    if not tasks:
        return None
    speed = bf16_speed() if speed is None else speed
    if speed is None or speed >= SLOW_BF16:
        return None
    names = ", ".join(tasks[:4]) + (" …" if len(tasks) > 4 else "")
    return (f"relbench: note: bf16 matrix products run at {speed:.2f}× fp32 on this CPU (its bf16 units are not "
            f"accelerated here), so the tasks at bf16 ({names}) will take longer than at fp32. `--precision fp32` "
            f"computes every task at fp32 instead: a different identity, and rows that say fp32.")
