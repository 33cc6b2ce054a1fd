"""Heavy modules imported on first use, by the ordinary import and nothing else.

Planning a run (``--dry-run``, a no-op) needs neither torch nor pandas, and importing them
costs about a second and 200 MB; the modules that use them at run time name them through
:func:`load`. The stand-in it returns is an attribute forwarder: the first attribute read
imports the module with :func:`importlib.import_module`, and every read returns the real
module's attribute.

Unlike ``importlib.util.LazyLoader`` (which ``lazy_loader`` uses), nothing is put in
``sys.modules`` before the real import runs. A lazy module there is what the package itself
meets when it imports its own submodules, and under Python 3.12.3 (CPython gh-117178,
fixed in later releases) that recursed until the interpreter gave up: torch 2.11's import
failed with ``RecursionError`` in ``_LazyModule.__delattr__`` and every unit of a run with
``'_LazyModule' object has no attribute 'as_tensor'`` (seen on a GPU machine with that
Python, Ubuntu 24.04's own).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class DeferredModule:
    """Stands for the module ``name`` until an attribute is read, then forwards every read
    to the real module (imported once, by the ordinary import machinery)."""

    __slots__ = ("_name", "_module")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if attr in DeferredModule.__slots__:  # unset: an instance made without __init__ (never a recursion)
            raise AttributeError(attr)
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attr)

    def __reduce__(self) -> tuple:
        """Pickled and copied as the name it stands for, so a copy defers as the original."""
        return load, (self._name,)

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"<deferred module {self._name!r} ({state})>"


def load(name: str) -> Any:
    """A stand-in for module ``name`` that imports it on the first attribute read."""
    return DeferredModule(name)
