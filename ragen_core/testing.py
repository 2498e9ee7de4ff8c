"""The contract-test kit, registered as a pytest plugin (entry point ``pytest11: ragen``).

Fixtures (all isolated from the plugins installed in the environment):

- ``ragen_pm`` — a fresh plugin manager with entry-point autoload off;
- ``ragen_register`` — ``ragen_register(plugin, name=None)`` registers a plugin object (module, class or instance)
  into ``ragen_pm`` for one test and returns the manager;
- ``ragen_registries`` — ``ragen_registries()`` collects the registries of ``ragen_pm`` as registered so far.

Checks (plain functions, usable outside pytest too): :func:`check_env`, :func:`check_filter`,
:func:`check_estimator`, :func:`check_diagnostic`, and :func:`fuzz_env` (send any actions, e.g. drawn by
hypothesis, and assert the contract on every step; ``check=`` adds the env's own assertions) — see
:mod:`ragen_core.checks`. ``fuzz_env`` takes each action from its iterable just before that action's step, so a
generator may draw the next action from the env's current state (``env.available_actions()``).

A third-party plugin's test suite typically reads::

    from ragen_core.testing import check_env

    def test_my_env_contract(ragen_register, ragen_registries):
        import my_plugin
        ragen_register(my_plugin)
        env_registry = ragen_registries().envs
        check_env(lambda: env_registry.make("my_env"))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

__all__ = ["check_diagnostic", "check_env", "check_estimator", "check_filter", "fuzz_env"]  # noqa: F822 - from __getattr__


def __getattr__(name: str) -> Any:
    # the checks (and gymnasium/numpy behind them) load on first use, not when pytest loads this plugin at every
    # start in an environment that has ragen-core installed
    if name in __all__:
        from ragen_core import checks

        return getattr(checks, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@pytest.fixture
def ragen_pm() -> Any:
    """A fresh :class:`~ragen_core.plugins.RagenPluginManager` with no entry points loaded."""
    from ragen_core.plugins import build_plugin_manager

    return build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1"})


@pytest.fixture
def ragen_register(ragen_pm: Any) -> Callable[..., Any]:
    """Register a plugin object into ``ragen_pm`` for this test: ``ragen_register(plugin, name=None)``."""

    def register(plugin: Any, name: str | None = None) -> Any:
        ragen_pm.register(plugin, name=name)
        ragen_pm.check_pending()
        return ragen_pm

    return register


@pytest.fixture
def ragen_registries(ragen_pm: Any) -> Callable[[], Any]:
    """``ragen_registries()`` returns the registries collected from ``ragen_pm`` now."""
    from ragen_core.plugins import collect_registries

    return lambda: collect_registries(ragen_pm)
