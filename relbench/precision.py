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
import os
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
