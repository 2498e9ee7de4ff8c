"""ragen inside veRL: the module behind the entry point ``ragen`` in the group ``verl.plugins``.

``import verl`` loads every ``verl.plugins`` entry point in every process (the driver, Ray's task runner and
workers), so this is where ragen's pieces are registered into veRL 0.9.1:

- the compatible estimators into veRL's advantage-estimator registry as ``ragen_<name>``
  (:func:`ragen_plugins_verl.estimators.register_into_verl`);
- the agent loop ``ragen`` (:class:`ragen_plugins_verl.agent_loop.RagenAgentLoop`);
- the V1 trainer mode ``ragen`` (:class:`ragen_plugins_verl.verl_trainer.RagenPPOTrainer`).

veRL logs a failing plugin only at DEBUG; each failure here is logged as a warning naming the part, and ragen's
trainer checks the registrations before it starts (:func:`ragen_plugins_verl.estimators.check_registered`).
"""

from __future__ import annotations

import logging

__all__ = ["register"]

_log = logging.getLogger("ragen.verl")
REGISTERED: dict[str, object] = {}


def register() -> dict[str, object]:
    """Register ragen's estimators, agent loop and trainer mode in this process's veRL (idempotent)."""
    try:
        from ragen_core.plugins import build_plugin_manager, collect_registries

        from .estimators import register_into_verl

        REGISTERED["estimators"] = register_into_verl(collect_registries(build_plugin_manager()))
    except Exception as exc:  # noqa: BLE001 - reported, never fatal to a plain veRL user
        _log.warning("ragen: registering estimators in veRL failed: %s: %s", type(exc).__name__, exc)
    try:
        from verl.experimental.agent_loop.agent_loop import register as register_agent_loop

        from .agent_loop import RagenAgentLoop
        from .config import AGENT_LOOP

        register_agent_loop(AGENT_LOOP)(RagenAgentLoop)
        REGISTERED["agent_loop"] = AGENT_LOOP
    except Exception as exc:  # noqa: BLE001
        _log.warning("ragen: registering the agent loop in veRL failed: %s: %s", type(exc).__name__, exc)
    try:
        from . import verl_trainer  # registers the trainer mode on import

        REGISTERED["trainer_mode"] = verl_trainer.RagenPPOTrainer
    except Exception as exc:  # noqa: BLE001
        _log.warning("ragen: registering the V1 trainer mode in veRL failed: %s: %s", type(exc).__name__, exc)
    return dict(REGISTERED)


register()
