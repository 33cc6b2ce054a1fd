"""relbench: a plugin-based benchmark suite for latent space communication.

Plugins implement the interfaces in :mod:`relbench.interfaces` and make them known
through the hooks in :mod:`relbench.hookspecs`, marked with :data:`hookimpl`. They import
all they use from :mod:`relbench.api`, the stable public surface for plugin authors.
"""

from importlib.metadata import PackageNotFoundError, version

import pluggy

try:
    __version__ = version("relbench")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

#: marker for plugin hook implementations: ``@hookimpl def relbench_similarities(): ...``
hookimpl = pluggy.HookimplMarker("relbench")

__all__ = ["__version__", "hookimpl"]
