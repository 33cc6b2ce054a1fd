"""User-facing errors: each carries a one-paragraph message and an exit code.

The CLI prints the message (no traceback) and exits with the code. Anything else that
escapes is a bug in relbench or a plugin and is shown with its traceback.
"""


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
