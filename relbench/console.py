"""Console state of one relbench process: whether progress bars show (``relbench run
-q``), and the bar every part of relbench and its plugins draws with.

Kept apart from the plugin contracts (:mod:`relbench.interfaces`): silencing sets
environment variables that libraries read when they load, which is process state, not
part of any interface.
"""

from __future__ import annotations

import os

_quiet = False
_QUIET_ENV = ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS")  # read when those libraries load
_env_before: dict[str, str | None] = {}


def set_quiet(quiet: bool = True) -> None:
    """Silence every bar :func:`progress_bar` makes in this process, and the bars of the
    libraries loaded after this call (``relbench run -q``); ``set_quiet(False)`` undoes
    exactly that, leaving variables the user set alone."""
    global _quiet
    if quiet and not _quiet:
        for var in _QUIET_ENV:
            _env_before[var] = os.environ.get(var)
            os.environ[var] = "1"
    elif not quiet and _quiet:
        for var, value in _env_before.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
        _env_before.clear()
    _quiet = quiet


def progress_bar(iterable=None, **kwargs):
    """A tqdm progress bar with relbench's defaults (what plugins should use); silent
    after :func:`set_quiet`."""
    from tqdm.auto import tqdm

    if _quiet:
        kwargs["disable"] = True
    kwargs.setdefault("leave", False)
    kwargs.setdefault("dynamic_ncols", True)
    kwargs.setdefault("mininterval", 0.5)
    return tqdm(iterable, **kwargs)
