"""The plugin registry: entry-point discovery, names, conflicts and did-you-mean.

Plugins are modules registered under the ``relbench`` entry-point group; built-in ones
use the same mechanism as third-party ones. Set ``RELBENCH_DISABLE_PLUGINS`` (or pass
``--disable``) to a comma-separated list of entry-point names (a whole package) or
plugin names (one class, optionally as ``interface:name``) to switch them off.

To try a method before packaging it, name its module in ``RELBENCH_PLUGINS`` (comma
separated) or pass ``relbench --plugin MODULE``: the module is imported from the current
folder or ``sys.path`` like an entry point, and its plugins are listed as coming from
``MODULE (not installed)``.

A plugin renamed in a new release keeps its old names working by declaring them:
``aliases: ClassVar[tuple[str, ...]] = ("old-name",)`` (in the manner of deprecated model
names in timm's registry). :meth:`Registry.get` gives the current plugin for an alias, and
says once per place, on one line on stderr, where the old name was used and what the new
one is; an alias may equal no other name or alias of its interface.

Whatever a plugin's code raises while the registry is built (importing it, registering
it, calling its hooks), ``SystemExit`` included, is a :class:`PluginLoadError` that names
the package and how to switch it off; only Ctrl-C goes through.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import sys
from dataclasses import is_dataclass
import os
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import ModuleType

import pluggy

from relbench import hookspecs
from relbench.errors import TEXT_LIMIT, PluginConflict, PluginLoadError, UnknownPlugin, short_repr, short_text
from relbench.interfaces import INTERFACES, Plugin

ENTRY_POINT_GROUP = "relbench"
DISABLE_ENV = "RELBENCH_DISABLE_PLUGINS"
PLUGINS_ENV = "RELBENCH_PLUGINS"


@dataclass(frozen=True)
class Registered:
    """A plugin class with where it came from."""

    cls: type[Plugin]
    source: str  # entry-point name
    package: str  # distribution name and version, e.g. "relbench 0.1.0"

    @property
    def aliases(self) -> tuple[str, ...]:
        """The plugin's former names, still accepted (its class's ``aliases``)."""
        return tuple(getattr(self.cls, "aliases", ()))

    @property
    def summary(self) -> str:
        """First paragraph of the class's own docstring, on one line ("" when it has none)."""
        doc = own_docstring(self.cls)
        return " ".join(doc.split("\n\n", 1)[0].split())


def own_docstring(cls: type) -> str:
    """The docstring written on ``cls`` itself: not one inherited from a base class, nor
    the signature ``@dataclass`` fills in for a class that has none."""
    doc = cls.__dict__.get("__doc__") or ""
    if doc.startswith(f"{cls.__name__}(") and is_dataclass(cls):
        return ""
    return inspect.cleandoc(doc)


def did_you_mean(name: str, choices: list[str]) -> str:
    """A 'did you mean …?' clause listing close matches (or all choices if few)."""
    close = difflib.get_close_matches(name, choices, n=3, cutoff=0.5)
    if close:
        return "did you mean " + " or ".join(repr(c) for c in close) + "?"
    if choices:
        return "available: " + ", ".join(sorted(choices)) + "."
    return "none are installed."


@contextlib.contextmanager
def _plugin_code(failed: str, remedy: str):
    """Run a plugin's code: anything it raises but Ctrl-C (``SystemExit`` included) becomes
    a :class:`PluginLoadError` "``failed``: the exception. ``remedy``"."""
    try:
        yield
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - a plugin may raise anything, SystemExit included
        raise PluginLoadError(f"{failed}: {type(exc).__name__}: {short_text(str(exc), TEXT_LIMIT)}. {remedy}") from None


def _switch_off(source: str) -> str:
    """How to switch off the plugin package (entry point or --plugin module) ``source``."""
    return (f"Fix or reinstall that package, or switch it off with `relbench --disable {source} …` or "
            f"{DISABLE_ENV}={source}.")


class Registry:
    """Every plugin class, per interface, by name."""

    def __init__(self, modules: list[tuple[str, ModuleType, str]], disabled: set[str] = frozenset()):
        """``modules``: (entry-point name, module, "dist version") triples (module None:
        a package switched off before import)."""
        self.pm = pluggy.PluginManager("relbench")
        self.pm.add_hookspecs(hookspecs)
        self.disabled = set(disabled)
        self.by_interface: dict[str, dict[str, Registered]] = {k: {} for k in INTERFACES}
        #: per interface, each former name (alias) → the current name
        self.aliases: dict[str, dict[str, str]] = {k: {} for k in INTERFACES}
        #: (place, alias) pairs already reported as deprecated
        self._reported: set[tuple[str, str]] = set()
        #: every entry-point and plugin name seen, switched off or not (to warn about
        #: a --disable that matches nothing)
        self.seen: set[str] = {ep_name for ep_name, _, _ in modules}
        packages = {}
        for ep_name, module, package in modules:
            if module is not None and ep_name not in self.disabled:
                with _plugin_code(f"The relbench plugin package {ep_name!r} ({package}) cannot be registered",
                                  _switch_off(ep_name)):
                    self.pm.register(module, name=ep_name)
                packages[ep_name] = package
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginConflict(
                f"A plugin implements a hook relbench does not define: {exc}. Hook names are "
                f"listed in relbench.hookspecs."
            ) from None
        for hook_name, interface in hookspecs.HOOK_INTERFACES.items():
            for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
                source = impl.plugin_name
                with _plugin_code(f"The hook {hook_name}() of the relbench plugin package {source!r} "
                                  f"({packages[source]}) failed", _switch_off(source)):
                    classes = list(impl.function() or [])
                for cls in classes:
                    self._add(interface, Registered(cls, source, packages[source]))

    def _add(self, interface: str, reg: Registered) -> None:
        expected = INTERFACES[interface]
        if not (isinstance(reg.cls, type) and issubclass(reg.cls, expected)):
            raise PluginConflict(
                f"Plugin package {reg.package!r} (entry point {reg.source!r}) returned {reg.cls!r} "
                f"from its {interface} hook, which is not a subclass of {expected.__name__}. "
                f"Fix the plugin, or disable it with {DISABLE_ENV}={reg.source}."
            )
        name = reg.cls.name
        if not name or not isinstance(name, str):
            raise PluginConflict(f"{reg.cls.__qualname__} from {reg.package!r} has no `name` (a non-empty string).")
        self.seen |= {name, f"{interface}:{name}"}
        if name in self.disabled or f"{interface}:{name}" in self.disabled:
            return
        table = self.by_interface[interface]
        if name in table:
            other = table[name]
            raise PluginConflict(
                f"Two plugins claim the {interface} name {name!r}: {other.cls.__qualname__} from "
                f"{other.package} (entry point {other.source!r}) and {reg.cls.__qualname__} from "
                f"{reg.package} (entry point {reg.source!r}). Uninstall one, or disable one with "
                f"{DISABLE_ENV}={other.source} (whole package) or {DISABLE_ENV}={interface}:{name}."
            )
        self._check_unclaimed(interface, name, reg)
        table[name] = reg
        self._add_aliases(interface, reg)

    def _add_aliases(self, interface: str, reg: Registered) -> None:
        """Record the former names ``reg`` declares (a tuple of non-empty strings)."""
        aliases = getattr(reg.cls, "aliases", ())
        if not isinstance(aliases, (tuple, list)) or not all(isinstance(a, str) and a for a in aliases) \
                or reg.cls.name in aliases:
            raise PluginConflict(f"{reg.cls.__qualname__} from {reg.package!r} declares aliases {short_repr(aliases)}; "
                                 f"`aliases` is a tuple of former names (non-empty strings other than its name).")
        for alias in aliases:
            self._check_unclaimed(interface, alias, reg)
            self.aliases[interface][alias] = reg.cls.name

    def _check_unclaimed(self, interface: str, name: str, reg: Registered) -> None:
        """Refuse ``name`` (a plugin's name or alias) when another plugin of the interface
        is called so, or had it as a former name."""
        owner = self.by_interface[interface].get(self.aliases[interface].get(name, name))
        if owner is not None and owner.cls is not reg.cls:
            raise PluginConflict(
                f"The {interface} name {name!r} of {reg.cls.__qualname__} from {reg.package} (entry point "
                f"{reg.source!r}) is already a name or former name (alias) of {owner.cls.__qualname__} from "
                f"{owner.package} (entry point {owner.source!r}). Uninstall one, or disable one with "
                f"{DISABLE_ENV}={owner.source}."
            )

    def current_name(self, interface: str, name: str, place: str = "") -> str:
        """The current name of the plugin formerly called ``name`` (an alias), saying so
        once per ``place`` (e.g. ``file:line``) on one line on stderr; any other name as it is."""
        current = self.aliases[interface].get(name)
        if current is None:
            return name
        if (place, name) not in self._reported:
            self._reported.add((place, name))
            where = f"{place}: " if place else ""
            print(f"{where}warning: the {interface} name {name!r} is deprecated: it is now {current!r} (same plugin, "
                  f"same results); write {current!r}.", file=sys.stderr)
        return current

    def get(self, interface: str, name: str, where: str = "") -> type[Plugin]:
        """The class registered as ``name`` (or formerly so: :meth:`current_name`, at
        ``where``); :class:`UnknownPlugin` with suggestions."""
        name = self.current_name(interface, name, where)
        table = self.by_interface[interface]
        if name in table:
            return table[name].cls
        where = f"{where}: " if where else ""
        raise UnknownPlugin(
            f"{where}unknown {interface} {short_repr(name)}; {did_you_mean(name, list(table))} "
            f"Run `relbench plugins` to list what is installed."
        )

    def package(self, interface: str, name: str) -> str:
        """The distribution (name and version) that provides a registered plugin."""
        return self.by_interface[interface][name].package

    def names(self, interface: str) -> list[str]:
        """Registered names of one interface, sorted."""
        return sorted(self.by_interface[interface])

    def unmatched_disables(self) -> list[str]:
        """Names given to ``--disable`` that match no package or plugin."""
        return sorted(self.disabled - self.seen)

    def find(self, name: str) -> list[Registered]:
        """Every registered plugin called ``name``, now or formerly (``interface:name``
        picks one interface)."""
        interface, _, plain = name.rpartition(":")
        found = [(key, self.aliases[key].get(plain, plain)) for key in self.by_interface if interface in ("", key)]
        return [self.by_interface[key][current] for key, current in found if current in self.by_interface[key]]


def _discover(disabled: set[str] | frozenset[str] = frozenset()) -> list[tuple[str, ModuleType, str]]:
    """Import every ``relbench`` entry point not switched off by name.

    A package that fails to import is a :class:`PluginLoadError` naming it, the error,
    and how to switch it off; a disabled package is never imported at all (it is
    still listed, without a module, so that its name counts as known).
    """
    found, packages = [], {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in disabled:
            found.append((ep.name, None, ""))
            continue
        dist = getattr(ep, "dist", None)
        if id(dist) not in packages:  # a distribution's name and version parse its metadata file on each read
            packages[id(dist)] = (dist, f"{dist.name} {dist.version}" if dist is not None else "?")
        package = packages[id(dist)][1]
        with _plugin_code(f"The relbench plugin package {ep.name!r} ({package}, module {ep.value!r}) failed to "
                          f"import", _switch_off(ep.name)):
            module = ep.load()
        found.append((ep.name, module, package))
        _PROVIDERS[module.__name__.split(".")[0]] = package
    return found


#: top-level module of every discovered entry point → its distribution ("name version")
_PROVIDERS: dict[str, str] = {}


def provider_of(module: str) -> str | None:
    """The distribution ("name version") whose ``relbench`` entry point imported the
    top-level package of ``module``, when one did."""
    return _PROVIDERS.get(module.split(".")[0])


def disabled_from_env(extra: list[str] | None = None) -> set[str]:
    """Names switched off by ``RELBENCH_DISABLE_PLUGINS`` and ``--disable``."""
    names = [n.strip() for n in os.environ.get(DISABLE_ENV, "").split(",") if n.strip()]
    return set(names) | set(extra or [])


def _local_modules(names: list[str], disabled: set[str] | frozenset[str] = frozenset()
                   ) -> list[tuple[str, ModuleType | None, str]]:
    """Import plugin modules named on the command line or in ``RELBENCH_PLUGINS``; a
    module switched off by name (``--disable NAME``) is never imported, as a disabled
    package is not."""
    import importlib
    import sys

    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    found = []
    for name in names:
        if name in disabled:
            found.append((name, None, ""))
            continue
        with _plugin_code(f"The plugin module {name!r} (from --plugin or {PLUGINS_ENV}) failed to import",
                          "Give an importable module name (e.g. `my_method` for my_method.py in the current folder) "
                          "and fix the module."):
            module = importlib.import_module(name)
        found.append((name, module, f"{name} {getattr(module, '__version__', '')}".strip() + " (not installed)"))
    return found


def load_registry(disable: list[str] | None = None, modules: list[str] | None = None) -> Registry:
    """Build the registry from every installed ``relbench`` entry point, plus the
    modules named in ``modules`` and ``RELBENCH_PLUGINS``."""
    disabled = disabled_from_env(disable)
    local = [n.strip() for n in os.environ.get(PLUGINS_ENV, "").split(",") if n.strip()] + list(modules or [])
    return Registry(_discover(disabled) + _local_modules(list(dict.fromkeys(local)), disabled), disabled)
