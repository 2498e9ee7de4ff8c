"""Building the plugin manager, loading plugins through entry points, collecting registries.

There is no global manager: :func:`build_plugin_manager` builds a fresh one per run (and per test). Entry points in
the group ``ragen`` are loaded in sorted name order. Controls, pytest-style:

- ``plugins.disable`` in config or ``RAGEN_DISABLE_PLUGINS=a,b``: block these plugins (by entry-point name);
- ``RAGEN_DISABLE_PLUGIN_AUTOLOAD=1``: load no entry point except those named in ``RAGEN_PLUGINS=a,b`` (entry-point
  names, or importable module paths for a plugin under development);
- ``plugins.required: ["envs", "my-dist>=1.2"]``: fail unless these plugins (or distributions) are loaded at an
  acceptable version;
- ``plugins.trace`` or ``RAGEN_TRACE_HOOKS=1``: log every hook call and result at debug level.

A plugin that fails to import or to register, or that implements a hook that does not exist, raises one
:class:`~ragen_core.errors.PluginLoadError` naming the plugin, its entry point, distribution and version.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata as md
import os
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import pluggy

from ragen_core import hookspecs
from ragen_core.errors import MissingPluginError, PluginError, PluginLoadError, RagenError
from ragen_core.registry import Registries

__all__ = ["PluginInfo", "RagenPluginManager", "build_plugin_manager", "collect_registries", "plugin_infos"]

ENTRY_POINT_GROUP = "ragen"
REGISTRATION_HOOKS = {
    "ragen_register_envs": "envs",
    "ragen_register_filters": "filters",
    "ragen_register_estimators": "estimators",
    "ragen_register_diagnostics": "diagnostics",
    "ragen_register_trainers": "trainers",
    "ragen_register_sinks": "sinks",
    "ragen_register_policies": "policies",
}


@attrs.frozen
class PluginInfo:
    """Where a plugin came from: entry point, distribution and version (empty for directly registered objects)."""

    name: str
    entry_point: str = ""
    distribution: str = ""
    version: str = ""
    status: str = "loaded"  # loaded | blocked | not loaded (autoload off)
    blocked_by: str = ""  # what blocks it: plugins.disable, RAGEN_DISABLE_PLUGINS or both

    def origin(self) -> str:
        """``'entry point X of distribution Y Z'`` for messages."""
        if self.distribution:
            return f"entry point {self.entry_point!r} of distribution {self.distribution} {self.version}"
        return f"entry point {self.entry_point!r}" if self.entry_point else "registered directly"


class RagenPluginManager(pluggy.PluginManager):
    """A pluggy manager for the ``ragen`` project that remembers where each plugin came from."""

    def __init__(self) -> None:
        super().__init__("ragen")
        self.add_hookspecs(hookspecs)
        self.infos: dict[str, PluginInfo] = {}

    def register(self, plugin: Any, name: str | None = None) -> str | None:
        """Register ``plugin``; a clash or invalid hook implementation raises :class:`PluginLoadError`."""
        try:
            registered = super().register(plugin, name)
        except ValueError as exc:
            other = self.infos.get(name or "")
            raise PluginLoadError(
                f"plugin name {name!r} is taken: {exc}; "
                f"first by {other.origin() if other else 'a direct registration'}",
                hint="two distributions define the same 'ragen' entry-point name; uninstall or disable one") from exc
        except pluggy.PluginValidationError as exc:
            label = name or self.get_canonical_name(plugin)
            raise PluginLoadError(f"plugin {label!r} ({self.info(label).origin()}) "
                                  f"has an invalid hook implementation: {exc}") from exc
        if registered is not None and registered not in self.infos:
            self.infos[registered] = PluginInfo(name=registered)
        if registered is not None:
            self._warn_unmarked(plugin, registered)
        return registered

    def _warn_unmarked(self, plugin: Any, name: str) -> None:
        """Warn (:class:`~ragen_core.errors.PluginWarning`) about each function of ``plugin`` named like a hook but
        not marked ``@hookimpl``: pluggy ignores it, so the plugin would load and silently do nothing."""
        import warnings

        from ragen_core.errors import PluginWarning

        for attr in sorted(n for n in dir(plugin) if n.startswith("ragen_") and hasattr(hookspecs, n)):
            fn = getattr(plugin, attr, None)
            if callable(fn) and getattr(fn, "ragen_impl", None) is None:
                warnings.warn(PluginWarning(f"plugin {name!r}: {attr} is not marked @hookimpl, so it is never "
                                            "called; decorate it with ragen_core.hookimpl"), stacklevel=3)

    def info(self, name: str) -> PluginInfo:
        """The :class:`PluginInfo` of a registered plugin name."""
        return self.infos.get(name) or PluginInfo(name=name)


def _split(value: str | None) -> list[str]:
    return [p.strip() for p in (value or "").split(",") if p.strip()]


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def build_plugin_manager(config: Any = None, *, environ: Mapping[str, str] | None = None,
                         plugins: Iterable[Any] = ()) -> RagenPluginManager:
    """Build a fresh plugin manager.

    :param config: a :class:`~ragen_core.config.PluginsConfig` (or a whole ``RagenConfig``) for ``disable``,
        ``required`` and ``trace``; None for defaults.
    :param environ: environment variables to read (default ``os.environ``).
    :param plugins: extra plugin objects (modules, classes or instances) to register after the entry points.
    :returns: the manager, with every hook implementation validated (``check_pending``).
    """
    environ = os.environ if environ is None else environ
    pconf = getattr(config, "plugins", config)
    off = {"plugins.disable": set(getattr(pconf, "disable", []) or []),
           "RAGEN_DISABLE_PLUGINS": set(_split(environ.get("RAGEN_DISABLE_PLUGINS")))}
    disabled = {name: " and ".join(by for by, names in off.items() if name in names)  # name -> what blocks it
                for name in set().union(*off.values())}
    autoload = not _truthy(environ.get("RAGEN_DISABLE_PLUGIN_AUTOLOAD"))
    allow = _split(environ.get("RAGEN_PLUGINS"))
    trace = bool(getattr(pconf, "trace", False)) or _truthy(environ.get("RAGEN_TRACE_HOOKS"))

    pm = RagenPluginManager()
    by_name = _load_entry_points(pm, disabled, autoload, allow)
    _load_allowed_modules(pm, allow, by_name, disabled)
    for obj in plugins:
        pm.register(obj)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        name = pm.get_name(exc.plugin) or "?"
        raise PluginLoadError(f"plugin {name!r} ({pm.info(name).origin()}) implements unknown hooks: {exc}",
                              hint="hook names start with 'ragen_'; see docs/hooks.md for the list") from exc
    _check_required(pm, list(getattr(pconf, "required", []) or []))
    if trace:
        from ragen_core.log import get_logger

        logger = get_logger("ragen.hooks")
        pm.trace.root.setwriter(lambda msg: logger.debug("hook", trace=msg.rstrip()))
        pm.enable_tracing()
    return pm


def _load_entry_points(pm: RagenPluginManager, disabled: dict[str, str], autoload: bool,
                       allow: list[str]) -> dict[str, Any]:
    """Register the ``ragen`` entry points (sorted, each blocked, skipped or loaded); returns them by name."""
    eps = sorted(md.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value))
    by_name = {ep.name: ep for ep in eps}
    for ep in eps:
        dist = getattr(ep, "dist", None)
        info = PluginInfo(name=ep.name, entry_point=f"{ep.name} = {ep.value}",
                          distribution=getattr(dist, "name", "") or "", version=getattr(dist, "version", "") or "")
        if ep.name in disabled:
            pm.set_blocked(ep.name)
            pm.infos[ep.name] = attrs.evolve(info, status="blocked", blocked_by=disabled[ep.name])
            continue
        if not autoload and ep.name not in allow:
            pm.infos[ep.name] = attrs.evolve(info, status="not loaded")
            continue
        if ep.name in pm.infos and pm.infos[ep.name].status == "loaded":
            first = pm.infos[ep.name]
            raise PluginLoadError(
                f"two plugins are named {ep.name!r}: {first.origin()} and {info.origin()}",
                hint="uninstall one of the distributions, or disable the name")
        try:
            obj = ep.load()
        except Exception as exc:
            raise PluginLoadError(f"plugin {ep.name!r} ({info.origin()}) failed to load: {type(exc).__name__}: {exc}",
                                  hint=f"fix or reinstall {info.distribution or 'it'}, or disable it with "
                                       f"RAGEN_DISABLE_PLUGINS={ep.name}") from exc
        pm.infos[ep.name] = info
        pm.register(obj, name=ep.name)
    return by_name


def _load_allowed_modules(pm: RagenPluginManager, allow: list[str], by_name: dict[str, Any],
                          disabled: dict[str, str]) -> None:
    """Register the modules ``RAGEN_PLUGINS`` names that are not entry points (a plugin under development)."""
    for name in allow:
        if name in by_name or name in disabled:
            continue
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            raise PluginLoadError(f"RAGEN_PLUGINS names {name!r}, which is neither an installed 'ragen' entry point "
                                  f"nor an importable module: {type(exc).__name__}: {exc}",
                                  hint=f"installed entry points: {', '.join(by_name) or 'none'}") from exc
        pm.infos[name] = PluginInfo(name=name, entry_point=f"module {name}")
        pm.register(module, name=name)


def _check_required(pm: RagenPluginManager, required: list[str]) -> None:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    for text in required:
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            raise MissingPluginError(f"plugins.required entry {text!r} is not a valid requirement: {exc}") from None
        want = canonicalize_name(req.name)
        match = None
        for info in pm.infos.values():
            if canonicalize_name(info.name) == want or (info.distribution and canonicalize_name(info.distribution) == want):
                match = info
                break
        if match is None:
            raise MissingPluginError(f"required plugin {text!r} is not installed",
                                     hint=f"loaded plugins: {', '.join(sorted(pm.infos)) or 'none'}")
        if match.status == "blocked":
            raise MissingPluginError(f"required plugin {text!r} is blocked (plugins.disable or RAGEN_DISABLE_PLUGINS)")
        if not pm.has_plugin(match.name):
            raise MissingPluginError(f"required plugin {text!r} is installed but not loaded (autoload is off)",
                                     hint=f"add it to RAGEN_PLUGINS={match.name}")
        if req.specifier and (not match.version or not req.specifier.contains(match.version, prereleases=True)):
            raise MissingPluginError(
                f"required plugin {text!r}: {match.distribution or match.name} {match.version or '(no version)'} "
                f"is installed", hint=f"install a version matching {req.specifier}")


def collect_registries(pm: pluggy.PluginManager) -> Registries:
    """Call every registration hook, plugin by plugin (sorted by name), and return the filled registries.

    Each plugin's registrations are attributed to it. An exception raised by a plugin's hook becomes one
    :class:`PluginError` naming the plugin and its distribution.
    """
    registries = Registries()
    plugins = {name: plugin for name, plugin in pm.list_name_plugin() if plugin is not None}
    for hook_name, kind in REGISTRATION_HOOKS.items():
        registry = getattr(registries, kind)
        impls = getattr(pm.hook, hook_name).get_hookimpls()
        for name in sorted({impl.plugin_name for impl in impls}):
            others = [p for n, p in plugins.items() if n != name]
            caller = pm.subset_hook_caller(hook_name, remove_plugins=others)
            with registry.owned_by(name):
                try:
                    caller(registry=registry)
                except RagenError:
                    raise
                except Exception as exc:
                    origin = pm.info(name).origin() if isinstance(pm, RagenPluginManager) else ""
                    raise PluginError(f"plugin {name!r} ({origin}) failed in {hook_name}: "
                                      f"{type(exc).__name__}: {exc}") from exc
    if isinstance(pm, RagenPluginManager):
        offers = functools.cache(lambda: _disabled_offers(pm))
        for kind, registry in registries.all().items():
            registry.disabled = functools.partial(lambda k: offers()[k], kind)
    return registries


def _disabled_offers(pm: RagenPluginManager) -> dict[str, list[tuple[str, str, list[Any] | None]]]:
    """By registry kind: each blocked plugin, what blocks it, and what it would register (None: unknown, its entry
    point failed). Loads the blocked plugins into a throwaway manager: only to word an error about a missing name."""
    import warnings

    out: dict[str, list[tuple[str, str, list[Any] | None]]] = {kind: [] for kind in REGISTRATION_HOOKS.values()}
    for info in [i for i in pm.infos.values() if i.status == "blocked"]:
        name, _, value = info.entry_point.partition(" = ")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                throwaway = RagenPluginManager()
                throwaway.register(md.EntryPoint(name, value, ENTRY_POINT_GROUP).load(), name=name)
                found: dict[str, Any] | None = collect_registries(throwaway).all()
        except Exception:
            found = None
        for kind, offers in out.items():
            offers.append((info.name, info.blocked_by, list(found[kind]) if found is not None else None))
    return out


def plugin_infos(pm: RagenPluginManager, registries: Registries | None = None) -> list[dict[str, Any]]:
    """One JSON-friendly record per plugin (loaded or blocked): name, distribution, version, entry point, status,
    hooks implemented, components provided."""
    provided = registries.by_plugin() if registries is not None else {}
    out = []
    names = sorted(set(pm.infos) | {n for n, p in pm.list_name_plugin() if p is not None})
    for name in names:
        info = pm.info(name)
        plugin = pm.get_plugin(name)
        hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or []) if plugin is not None else []
        out.append({
            "name": name, "distribution": info.distribution, "version": info.version,
            "entry_point": info.entry_point, "status": info.status, "hooks": hooks,
            "components": [{"kind": s.kind, "name": s.name} for s in provided.get(name, [])],
        })
    return out


def load_component_class(spec: Any) -> Any:
    """Load a spec's object, re-raising with the trainer's install hint when an optional dependency is missing."""
    try:
        return spec.load()
    except PluginError as exc:
        hint = getattr(spec, "install_hint", "")
        if hint and isinstance(exc.__cause__, ImportError):
            raise PluginError(f"{spec.kind} {spec.name!r} needs packages that are not installed: {exc.__cause__}",
                              hint=hint) from exc
        raise
