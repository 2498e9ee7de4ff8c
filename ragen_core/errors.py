"""Errors raised by the ragen core.

Every error the core raises on bad input derives from :class:`RagenError`: one message that names the culprit
(plugin, distribution, config key path, component name) and, where one exists, a hint. The CLI prints these as a
single line (plus the hint) instead of a traceback.
"""

from __future__ import annotations

import difflib


class RagenError(Exception):
    """Base class of every user-facing ragen error.

    :param message: what went wrong, naming the culprit.
    :param hint: optional advice on how to fix it.
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class PluginError(RagenError):
    """A plugin could not be loaded, registered, or misbehaved while registering components."""


class PluginWarning(UserWarning):
    """A plugin loaded but looks wrong (e.g. a hook-named function without ``@hookimpl``, which pluggy ignores)."""


class PluginLoadError(PluginError):
    """An entry point failed to import or to register with the plugin manager."""


class MissingPluginError(PluginError):
    """A plugin listed in ``plugins.required`` is absent, blocked, or at an unacceptable version."""


class DuplicateComponentError(PluginError):
    """Two plugins registered a component under the same name."""


class UnknownComponentError(RagenError, KeyError):
    """A component name (env, filter, estimator, ...) is not registered."""

    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return RagenError.__str__(self)


class ConfigError(RagenError, ValueError):
    """The configuration is invalid (unknown key, wrong type, out-of-range value, failed cross-field check)."""


class EnvError(RagenError):
    """An environment misbehaved (raised, returned a malformed step) or was misconfigured."""


def suggest(name: str, known: list[str] | tuple[str, ...]) -> str | None:
    """Return the nearest known name (for "did you mean" hints) to ``name`` (case-insensitive first), or None."""
    lowered = {k.lower(): k for k in known}
    if name.lower() in lowered:
        return lowered[name.lower()]
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[close[0]] if close else None
