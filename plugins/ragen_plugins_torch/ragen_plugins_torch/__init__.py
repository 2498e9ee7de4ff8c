"""ragen's native StarPO trainer (entry point ``torch`` in the group ``ragen``): one process, CPU or one GPU, any
Hugging Face causal LM, the built-in ``tiny`` model, or SmolLM2-135M-Instruct. Also the ``hf`` policy backend of
``ragen eval`` and ``ragen serve`` (an OpenAI-compatible HTTP server for a local model). Nothing heavy is imported
here."""

from __future__ import annotations

from typing import Any

from ragen_core import hookimpl


@hookimpl
def ragen_register_trainers(registry: Any) -> None:
    """Register the ``torch`` trainer with its CPU preset, as the trainer a config that names none gets."""
    registry.register(
        "torch", "ragen_plugins_torch.trainer:TorchTrainer",
        config="ragen_plugins_torch.trainer:TorchTrainerConfig",
        description="native StarPO trainer: PPO/GRPO on a Hugging Face causal LM, CPU or one GPU",
        install_hint="pip install 'ragen[torch]' (after installing a torch build for your machine)",
        preset="ragen_plugins_torch:presets/cpu_default.yaml", default=True,
    )


@hookimpl
def ragen_register_policies(registry: Any) -> None:
    """Register the ``hf`` policy backend of ``ragen eval`` (local paths and model names)."""
    registry.register(
        "hf", "ragen_plugins_torch.serve:HFBackend", config="ragen_plugins_torch.serve:HFBackendConfig",
        schemes=("path",), description="a local Hugging Face causal LM, tiny, smollm2-135m or a training checkpoint",
        install_hint="pip install 'ragen[torch]' (after installing a torch build for your machine)",
    )


@hookimpl
def ragen_register_commands(cli: Any) -> None:
    """Add ``ragen serve MODEL`` (an OpenAI-compatible HTTP server for a local model)."""
    from .serve import add_serve_command

    add_serve_command(cli)


@hookimpl
def ragen_check_config(config: Any, registries: Any) -> list[str]:
    """Refuse mini-batches that cannot be filled by what the rollout (after filtering) produces."""
    if config.config.trainer.name != "torch" or config.trainer is None:
        return []
    rollout, tc = config.config.rollout, config.trainer
    per_traj = rollout.max_turn if rollout.context_mode != "full" else 1
    most = rollout.env_groups * rollout.group_size * per_traj
    problems = []
    if tc.mini_batch_size > most:
        problems.append(f"trainer.mini_batch_size={tc.mini_batch_size} exceeds the {most} samples a step can produce "
                        f"(rollout.env_groups={rollout.env_groups} x rollout.group_size={rollout.group_size})")
    kept = _kept_by_filter(config, rollout)
    if kept is not None and tc.mini_batch_size > kept * rollout.group_size * per_traj:
        problems.append(f"trainer.mini_batch_size={tc.mini_batch_size} exceeds the {kept * rollout.group_size} "
                        f"trajectories that survive the filter ({config.config.filter.name} keeps {kept} groups)")
    return problems


def _kept_by_filter(config: Any, rollout: Any) -> int | None:
    """Groups a fixed-budget filter keeps (top_k / top_k_abs), else None."""
    f = config.filter
    strategy = getattr(f, "strategy", config.config.filter.name)
    value = getattr(f, "value", None)
    if value is None:
        return None
    if strategy == "top_k":
        return max(1, int(value * rollout.env_groups))
    if strategy == "top_k_abs":
        return int(value)
    return None
