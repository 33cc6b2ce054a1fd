"""User-facing errors: each carries a one-paragraph message and an exit code.

The CLI prints the message (no traceback) and exits with the code. Anything else that
escapes is a bug in relbench or a plugin and is shown with its traceback. A message quotes at
most :data:`QUOTE_LIMIT` characters of any value (:func:`short_repr`) and passes on at most
:data:`TEXT_LIMIT` of a plugin's error text (:func:`short_text`).
"""

import reprlib


class UserError(Exception):
    """A problem the user can fix: bad input, a missing asset, an unusable path."""

    exit_code = 2


class ConfigError(UserError):
    """tasks.yaml is malformed or names something that does not exist."""


class UnknownPlugin(ConfigError):
    """A plugin name that no installed package provides."""


class PluginLoadError(UserError):
    """An installed plugin package fails to import."""


class PluginConflict(UserError):
    """Two packages register the same plugin name for one interface."""


class MissingAsset(UserError):
    """A data set or model file is not installed; the message says how to install it."""


class BadEmbeddings(UserError):
    """An encoder produced NaN/inf, the wrong shape, or mismatched dimensions."""

    exit_code = 1


class OutputNotWritable(UserError):
    """The output or cache directory cannot be written."""


#: the most characters of any one value a message quotes
QUOTE_LIMIT = 200
#: the most characters of a plugin's own error text a message passes on: room for its
#: explanation, not for a huge value it quotes
TEXT_LIMIT = 1000


class _ShortRepr(reprlib.Repr):
    """reprlib's abbreviating repr, applied to subclasses of the built-in containers too
    (reprlib dispatches on the exact type name, and would show those in full)."""

    _CONTAINERS = (dict, list, tuple, set, frozenset)

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxdict = self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = 6
        self.maxstring = self.maxlong = self.maxother = QUOTE_LIMIT

    def repr1(self, x, level):
        for base in self._CONTAINERS:
            if isinstance(x, base):
                return getattr(self, f"repr_{base.__name__}")(x, level)
        return super().repr1(x, level)


_SHORT_REPR = _ShortRepr()


def short_text(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` cut to at most ``limit`` characters (an ellipsis marks a cut)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def short_repr(value) -> str:
    """``repr(value)`` for a message, at most :data:`QUOTE_LIMIT` characters long. The
    work is bounded too: the repr of a huge or deeply nested value (a YAML alias bomb) is
    never built, only that of its first few items, a few levels deep."""
    return short_text(_SHORT_REPR.repr(value))
