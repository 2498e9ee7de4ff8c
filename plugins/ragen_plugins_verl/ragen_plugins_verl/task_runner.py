"""ragen's task runner for veRL 0.9.1: veRL's ``TaskRunnerV1`` with ragen's trainer mode registered first.

veRL looks the V1 trainer mode up (``get_trainer_cls``) inside its task runner, a Ray actor in a process of its
own. ragen registers nothing at ``import verl`` (see :mod:`ragen_plugins_verl.verl_plugin`), so the task runner it
launches registers the mode there, on first use, and then runs veRL's ``run`` unchanged. This module imports veRL
and Ray: only ragen's veRL trainer imports it, when it launches a run.
"""

from __future__ import annotations

from typing import Any

import ray
from verl.trainer.main_ppo import TaskRunnerV1

__all__ = ["RagenTaskRunner", "task_runner_class"]


class RagenTaskRunner(TaskRunnerV1.__ray_actor_class__):  # type: ignore[name-defined]
    """veRL's V1 task runner; registers ragen's trainer mode in its own process before running."""

    def register(self) -> str:
        """Register and check ragen's trainer mode in this process; returns the class path veRL resolves."""
        from verl.trainer.ppo.v1 import get_trainer_cls

        from .config import TRAINER_MODE
        from .verl_plugin import check_trainer_mode

        check_trainer_mode()
        cls = get_trainer_cls(TRAINER_MODE)
        return f"{cls.__module__}.{cls.__qualname__}"

    def run(self, config: Any) -> Any:
        self.register()
        return super().run(config)


def task_runner_class() -> Any:
    """The Ray actor class that ``verl.trainer.main_ppo.run_ppo`` starts (``ray.remote(RagenTaskRunner)``)."""
    return ray.remote(RagenTaskRunner)
