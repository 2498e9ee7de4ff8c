"""Registering ragen's pieces in veRL 0.9.1: lazily, only in the process that looks them up.

Importing this module does nothing, and ``import verl`` does not import ragen at all (ragen declares no
``verl.plugins`` entry point, so veRL's driver, task runner and GPU workers load none of ragen's plugins):

- the V1 trainer mode ``ragen`` (:class:`ragen_plugins_verl.verl_trainer.RagenPPOTrainer`): veRL looks it up in
  Ray's task-runner process only, so ragen launches veRL with its own task runner
  (:func:`ragen_plugins_verl.task_runner.task_runner_class`), which calls :func:`register_trainer_mode` there, then
  runs veRL's ``TaskRunnerV1.run`` unchanged;
- the agent loop ``ragen`` (:class:`ragen_plugins_verl.agent_loop.RagenAgentLoop`): never registered; the exported
  config points veRL's agent-loop workers at a YAML that names the class by path
  (``rollout.agent.agent_loop_config_path``, :func:`agent_loop_yaml`), veRL's own mechanism;
- the estimators as ``ragen_<name>`` in veRL's advantage-estimator registry: ragen's trainer mode calls the
  configured estimator directly, so these exist only for a plain veRL run that wants one. It opts in with veRL's own
  switch, ``VERL_USE_EXTERNAL_MODULES=ragen_plugins_verl.verl_estimators``, which imports that module (and so
  :func:`register_estimators`) in every veRL process.

Each function is idempotent and returns what it registered, and :func:`check_trainer_mode` is the start-up
self-check: a failure is one clear error in the process that needs the piece, not a DEBUG line of veRL's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragen_core.errors import RagenError

__all__ = ["AGENT_LOOP_CLASS", "agent_loop_yaml", "check_trainer_mode", "register_estimators",
           "register_trainer_mode"]

#: the agent loop's class path, as veRL's agent-loop workers instantiate it (``_target_``)
AGENT_LOOP_CLASS = "ragen_plugins_verl.agent_loop.RagenAgentLoop"


def register_trainer_mode() -> type:
    """Register the V1 trainer mode ``ragen`` in this process's veRL; returns the class (idempotent)."""
    from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, register_trainer

    from .config import TRAINER_MODE
    from .verl_trainer import RagenPPOTrainer

    existing = TRAINER_REGISTRY.get(TRAINER_MODE)
    if existing is not None and existing is not RagenPPOTrainer:
        raise RagenError(f"veRL's trainer mode {TRAINER_MODE!r} is already registered to {existing!r}",
                         hint="another package registered the same trainer name in veRL")
    return register_trainer(TRAINER_MODE)(RagenPPOTrainer)


def check_trainer_mode() -> None:
    """The start-up self-check: veRL can resolve ragen's trainer mode in this process, or one clear error."""
    from verl.trainer.ppo.v1 import get_trainer_cls

    from .config import TRAINER_MODE

    try:
        register_trainer_mode()
        get_trainer_cls(TRAINER_MODE)
    except Exception as exc:
        raise RagenError(f"ragen's veRL trainer mode cannot be registered: {type(exc).__name__}: {exc}",
                         hint="check that veRL 0.9.1 and ragen-plugins-verl are installed in this environment "
                              "(pip install 'ragen[verl]')") from exc


def agent_loop_yaml(path: Path) -> Path:
    """Write veRL's agent-loop config (``rollout.agent.agent_loop_config_path``) naming ragen's agent loop."""
    from .config import AGENT_LOOP

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"- name: {AGENT_LOOP}\n  _target_: {AGENT_LOOP_CLASS}\n")
    return path


def register_estimators(registries: Any = None) -> dict[str, str]:
    """Register every veRL-compatible ragen estimator as ``ragen_<name>`` (for plain veRL runs; idempotent).

    Builds ragen's registries from the installed plugins when none are given; returns ``{veRL name: ragen name}``.
    """
    from .estimators import register_into_verl

    if registries is None:
        from ragen_core.plugins import build_plugin_manager, collect_registries

        registries = collect_registries(build_plugin_manager())
    return register_into_verl(registries)
