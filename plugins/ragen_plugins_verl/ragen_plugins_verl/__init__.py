"""ragen's veRL StarPO trainer (entry point ``verl`` in the group ``ragen``): veRL 0.9.1 from PyPI on Ray, with FSDP
actors and vLLM/SGLang rollouts, running the core's rollout loop, envs, filters, estimators and diagnostics.

Nothing heavy is imported here (neither veRL nor torch): the trainer spec names lazy entry points, and the config
check uses only :mod:`ragen_plugins_verl.config`'s verl-free part. See ``docs/verl.md``.
"""

from __future__ import annotations

from typing import Any

from ragen_core import hookimpl

INSTALL_HINT = ("pip install 'ragen[verl]' (in a clone: make setup), after a torch build for your machine; "
                "on the GPU nodes also vLLM: pip install 'verl[vllm]==0.9.1'")


@hookimpl
def ragen_register_trainers(registry: Any) -> None:
    """Register the ``verl`` trainer with its GPU preset."""
    registry.register(
        "verl", "ragen_plugins_verl.trainer:VerlTrainer",
        config="ragen_plugins_verl.config:VerlTrainerConfig",
        description="veRL StarPO trainer: Ray, FSDP actors, vLLM/SGLang rollouts (veRL 0.9.1, GPUs)",
        install_hint=INSTALL_HINT,
        preset="ragen_plugins_verl:presets/verl_default.yaml",
    )


@hookimpl
def ragen_check_config(config: Any, registries: Any) -> list[str]:
    """Refuse, with the reason, the combinations the veRL trainer cannot run (before anything starts)."""
    if config.config.trainer.name != "verl":
        return []
    from ragen_plugins_verl.config import unsupported

    return unsupported(config, registries)
