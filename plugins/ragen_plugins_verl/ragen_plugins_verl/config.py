"""The ``verl`` trainer's options and their translation into veRL 0.9.1's structured config.

This module imports neither veRL nor torch at import time: ragen validates ``trainer:`` sections (and runs
``ragen_check_config``) before any trainer is built, on machines without veRL too. Three steps, in order:

1. :class:`VerlTrainerConfig` (attrs) validates the ``trainer:`` section like every ragen component;
2. :func:`verl_settings` maps the resolved ragen config key by key to dotted veRL keys (the table in
   ``docs/verl.md`` is this function); :func:`unsupported` lists the combinations veRL cannot take, with the reason;
3. :func:`build_verl_config` composes veRL's own ``ppo_trainer`` config with Hydra, applies the settings (a key that
   veRL's schema does not have is an error, never a silent addition), then the user's raw ``verl_overrides``, and
   :func:`validate_verl_config` runs veRL's validation (``verl.utils.config.validate_config`` and the dataclasses
   behind ``algorithm``, ``actor``, ``critic`` and ``rollout``) — all before Ray starts.

ragen's own settings travel in the top-level key ``ragen`` (veRL's ``AlgoConfig`` is strict, so nothing of ours goes
under ``algorithm``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import attrs

from ragen_core.errors import ConfigError, RagenError
from ragen_core.starpo.ppo import PPOOptions, leading
from ragen_core.validators import number

__all__ = ["VERL_INSTALL", "VerlTrainerConfig", "build_verl_config", "check_resources", "unsupported",
           "validate_verl_config", "verl_settings", "visible_gpus"]

#: what ``ragen train trainer=verl`` tells a user without veRL
VERL_INSTALL = ("pip install 'ragen[verl]' (in a clone: make setup), after a torch build for your machine; "
                "on the GPU nodes also vLLM: pip install 'verl[vllm]==0.9.1'")
#: the advantage-estimator names ragen registers into veRL's registry: ``ragen_<estimator name>``
VERL_ESTIMATOR_PREFIX = "ragen_"
#: the V1 trainer mode (``trainer.v1.trainer_mode``) and the agent loop's name in veRL (see verl_plugin)
TRAINER_MODE = "ragen"
AGENT_LOOP = "ragen"


_unit = number(0, 1, low_open=True)


@attrs.define(field_transformer=leading("model", "steps"))
class VerlTrainerConfig(PPOOptions):
    """Options of the ``verl`` trainer (``trainer: {name: verl, ...}``); see ``docs/verl.md`` for the mapping.

    The PPO options (``actor_lr`` ... ``value_clip``) are :class:`ragen_core.starpo.ppo.PPOOptions`, shared with the native
    trainer (names, defaults, validators), so a config moves between ``trainer: torch`` and ``trainer: verl`` by
    changing the name and the resource keys.
    ``mini_batch_size`` counts trajectories, as in the native trainer; veRL counts prompts (groups), so it must be a
    multiple of ``rollout.group_size``. ``micro_batch_size`` is per GPU. ``verl_overrides`` are raw Hydra
    overrides of veRL's config (``"actor_rollout_ref.rollout.max_num_seqs=64"``) applied last and still validated
    by veRL.

    :ivar model: a Hugging Face model folder or hub id (``tiny`` and ``smollm2-135m`` are built by the torch plugin).
    :ivar steps: training steps (veRL's ``trainer.total_training_steps``).
    :ivar mini_batch_size: trajectories per optimiser step; a multiple of ``rollout.group_size``.
    :ivar micro_batch_size: sequences per forward/backward pass on each GPU.
    :ivar clip_low: PPO ratio clip below 1 (veRL's ``clip_ratio_low``).
    :ivar clip_high: PPO ratio clip above 1 (veRL's ``clip_ratio_high``).
    :ivar dual_clip: dual-clip constant, > 1 (veRL's ``clip_ratio_c``; this trainer refuses null).
    :ivar kl_estimator: per-token KL estimate (veRL's ``kl_loss_type``).
    :ivar loss_agg: loss aggregation (veRL's ``loss_agg_mode``).
    :ivar grad_clip: gradient norm clip of the actor (veRL's ``actor.optim.clip_grad``).
    :ivar value_clip: clip of the value change in the critic loss (null uses veRL's 0.5).
    :ivar val_every: validate every this many steps (0: never; veRL's ``test_freq``).
    :ivar save_every: checkpoint every this many steps (0: never; veRL's ``save_freq``).
    :ivar keep_last: checkpoints kept (actor and critic).
    :ivar diagnostics_every: compute the configured diagnostics every this many steps.
    :ivar gradient_checkpointing: gradient checkpointing of the actor and the critic.
    :ivar n_gpus_per_node: GPUs used on each node.
    :ivar nnodes: nodes of the Ray cluster.
    :ivar rollout_backend: the inference engine that samples rollouts: ``vllm`` or ``sglang``.
    :ivar gpu_memory_utilization: share of GPU memory the inference engine may take.
    :ivar tensor_parallel_size: tensor-parallel degree of the inference engine.
    :ivar param_offload: FSDP parameter offloading to the CPU (actor and critic).
    :ivar optimizer_offload: FSDP optimizer-state offloading to the CPU (actor and critic).
    :ivar dtype: dtype of the inference engine.
    :ivar max_prompt_length: longest first prompt in tokens (veRL's ``data.max_prompt_length``).
    :ivar max_response_length: longest multi-turn response in tokens, observations included
        (veRL's ``data.max_response_length``).
    :ivar export_hf: at the end, export the last actor as a Hugging Face folder at ``checkpoints/step_N/actor``.
    :ivar project_name: veRL's ``trainer.project_name`` (the W&B project when veRL logs there).
    :ivar logger: veRL's own loggers (``console``, ``wandb``, ...); ragen's ``metrics.jsonl`` is written anyway.
    :ivar verl_overrides: raw Hydra overrides of veRL's config, applied last.
    """

    model: str = "Qwen/Qwen2.5-0.5B-Instruct"
    steps: int = attrs.field(default=200, validator=attrs.validators.gt(0))
    micro_batch_size: int = attrs.field(default=4, validator=attrs.validators.gt(0))
    val_every: int = attrs.field(default=10, validator=attrs.validators.ge(0))
    save_every: int = attrs.field(default=10, validator=attrs.validators.ge(0))
    keep_last: int = attrs.field(default=2, validator=attrs.validators.gt(0))
    diagnostics_every: int = attrs.field(default=5, validator=attrs.validators.gt(0))
    gradient_checkpointing: bool = True
    # --- resources and engines (veRL only)
    n_gpus_per_node: int = attrs.field(default=1, validator=attrs.validators.gt(0))
    nnodes: int = attrs.field(default=1, validator=attrs.validators.gt(0))
    rollout_backend: Literal["vllm", "sglang"] = "vllm"
    gpu_memory_utilization: float = attrs.field(default=0.5, validator=_unit)
    tensor_parallel_size: int = attrs.field(default=1, validator=attrs.validators.gt(0))
    param_offload: bool = False
    optimizer_offload: bool = False
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    max_prompt_length: int = attrs.field(default=1024, validator=attrs.validators.gt(0))
    max_response_length: int = attrs.field(default=4096, validator=attrs.validators.gt(0))
    export_hf: bool = True
    project_name: str = "ragen"
    logger: list[str] = attrs.field(factory=lambda: ["console"])
    verl_overrides: list[str] = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        if self.dual_clip is not None and self.dual_clip <= 1.0:
            raise ValueError(f"'dual_clip' must be > 1 (veRL's clip_ratio_c) or null: {self.dual_clip}")


# ------------------------------------------------------------------------------------------------ checks

def unsupported(resolved: Any, registries: Any = None) -> list[str]:
    """Combinations of the resolved config that the veRL trainer refuses, each with its reason (a sentence)."""
    cfg, tc = resolved.config, resolved.trainer
    rollout = cfg.rollout
    problems = []
    if rollout.context_mode != "full":
        problems.append(
            f"rollout.context_mode={rollout.context_mode!r} is not supported by trainer=verl: veRL 0.9.1's V1 trainer "
            "overwrites every per-turn output's reward with the session's final one and spreads only its own GRPO "
            "statistics over them; use context_mode=full (or trainer=torch)")
    if rollout.max_context_tokens is not None:
        problems.append(
            "rollout.max_context_tokens is not supported by trainer=verl: a truncated context starts a new training "
            "segment, i.e. several outputs per episode (see context_mode); cap lengths with "
            "trainer.max_prompt_length/max_response_length instead")
    if cfg.filter.name == "dynamic":
        problems.append(
            "filter=dynamic is not supported by trainer=verl: it rolls out extra groups inside a step, which veRL's "
            "replay buffer does itself; use veRL's DAPO filter with "
            "trainer.verl_overrides=[algorithm.filter_groups.enable=true,algorithm.filter_groups.metric=acc] or a "
            "ragen filter that selects (top_p, top_k, top_k_abs, min_p)")
    if tc is None:
        return problems
    if tc.mini_batch_size % rollout.group_size:
        problems.append(
            f"trainer.mini_batch_size={tc.mini_batch_size} must be a multiple of rollout.group_size="
            f"{rollout.group_size} for trainer=verl (veRL's ppo_mini_batch_size counts whole groups)")
    elif tc.mini_batch_size // rollout.group_size > rollout.env_groups:
        problems.append(
            f"trainer.mini_batch_size={tc.mini_batch_size} exceeds the {rollout.env_groups * rollout.group_size} "
            "trajectories of a step (rollout.env_groups x rollout.group_size)")
    if tc.dual_clip is None:
        problems.append("trainer.dual_clip=null is not supported by trainer=verl (veRL always applies its dual clip "
                        "clip_ratio_c); set a value > 1, e.g. 3.0")
    if rollout.max_turn * rollout.max_new_tokens > tc.max_response_length:
        problems.append(
            f"rollout.max_turn x rollout.max_new_tokens = {rollout.max_turn * rollout.max_new_tokens} generated "
            f"tokens do not fit trainer.max_response_length={tc.max_response_length} (which also holds the "
            "observations between turns)")
    if tc.tensor_parallel_size > tc.n_gpus_per_node * tc.nnodes:
        problems.append(f"trainer.tensor_parallel_size={tc.tensor_parallel_size} exceeds the "
                        f"{tc.n_gpus_per_node * tc.nnodes} GPUs of trainer.n_gpus_per_node x trainer.nnodes")
    if (rollout.env_groups * rollout.group_size) % (tc.n_gpus_per_node * tc.nnodes):
        problems.append(
            f"rollout.env_groups x rollout.group_size = {rollout.env_groups * rollout.group_size} trajectories "
            f"cannot be split evenly over {tc.n_gpus_per_node * tc.nnodes} GPUs")
    if registries is not None and cfg.estimator.name in registries.estimators:
        spec = registries.estimators.get(cfg.estimator.name)
        if getattr(spec, "needs_critic", False) and tc.value_clip is None:
            problems.append(f"estimator={cfg.estimator.name} trains a critic and trainer=verl needs "
                            "trainer.value_clip (veRL's critic.cliprange_value); set e.g. 0.5")
    return problems


def visible_gpus() -> int:
    """Number of GPUs this process can see (``CUDA_VISIBLE_DEVICES`` honoured; 0 without CUDA)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None and env.strip() in ("", "-1"):
        return 0
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def check_resources(tc: VerlTrainerConfig, visible: int | None = None) -> None:
    """Refuse a resource request this node cannot meet, before Ray starts (``visible`` defaults to what CUDA sees)."""
    visible = visible_gpus() if visible is None else visible
    if tc.n_gpus_per_node > visible:
        raise ConfigError(
            f"trainer.n_gpus_per_node={tc.n_gpus_per_node} but this node sees {visible} GPU(s)"
            + (" (CUDA_VISIBLE_DEVICES=" + os.environ["CUDA_VISIBLE_DEVICES"] + ")"
               if "CUDA_VISIBLE_DEVICES" in os.environ else ""),
            hint="set trainer.n_gpus_per_node to at most the visible GPUs (veRL needs GPUs: its rollout backends are "
                 "vLLM/SGLang) or use trainer=torch on this machine")


# ------------------------------------------------------------------------------------------------ translation

def resolve_model_path(name: str) -> str:
    """A folder or hub id for veRL; ragen's built-in names (``tiny``, ``smollm2-135m``) are built by the native
    trainer plugin's model helpers and given as their folders."""
    if name in ("tiny", "smollm2-135m"):
        try:
            from ragen_plugins_torch import models
        except ImportError as exc:
            raise RagenError(f"trainer.model={name!r} is built by the torch trainer plugin, which is not importable",
                             hint="pip install ragen-plugins-torch (a dependency of this plugin), or give a model folder / hub id") from exc
        folder = models.build_tiny_model() if name == "tiny" else models.convert_smollm2()
        return os.fspath(folder)
    return os.path.expanduser(name)


def verl_settings(resolved: Any, run_dir: str | Path, *, model_path: str | None = None,
                  needs_critic: bool = False) -> dict[str, Any]:
    """Dotted veRL keys → values for a resolved ragen config (the mapping table of ``docs/verl.md``).

    ``run_dir`` holds the dataset files and veRL's checkpoints; ``model_path`` replaces ``trainer.model``
    (after :func:`resolve_model_path`); ``needs_critic`` comes from the estimator's spec. The keys come section by
    section, in this order: model, actor and reference, rollout, data, critic, algorithm, trainer.
    """
    cfg, tc, run_dir = resolved.config, resolved.trainer, Path(run_dir)
    model = model_path or tc.model
    return {
        **_actor_settings(tc, cfg.rollout, model),
        **_rollout_settings(tc, cfg.rollout, run_dir),
        **_data_settings(tc, cfg.rollout, run_dir),
        **_critic_settings(tc, model, needs_critic),
        **_algorithm_settings(cfg, needs_critic),
        **_trainer_settings(tc, cfg, run_dir),
    }


#: the prefix of the model, actor, reference and rollout keys
_AR = "actor_rollout_ref"


def _actor_settings(tc: VerlTrainerConfig, ro: Any, model: str) -> dict[str, Any]:
    """The model, the PPO actor and the reference policy (``actor_rollout_ref.model/actor/ref``)."""
    return {
        # model
        f"{_AR}.model.path": model,
        f"{_AR}.model.enable_gradient_checkpointing": tc.gradient_checkpointing,
        # actor (PPO); veRL's mini-batch counts groups
        f"{_AR}.actor.optim.lr": tc.actor_lr,
        f"{_AR}.actor.optim.lr_warmup_steps": tc.lr_warmup_steps if tc.lr_warmup_steps else -1,
        f"{_AR}.actor.optim.clip_grad": tc.grad_clip,
        f"{_AR}.actor.ppo_epochs": tc.ppo_epochs,
        f"{_AR}.actor.ppo_mini_batch_size": max(1, tc.mini_batch_size // ro.group_size),
        f"{_AR}.actor.ppo_micro_batch_size_per_gpu": tc.micro_batch_size,
        f"{_AR}.actor.clip_ratio_low": tc.clip_low,
        f"{_AR}.actor.clip_ratio_high": tc.clip_high,
        f"{_AR}.actor.clip_ratio_c": tc.dual_clip if tc.dual_clip is not None else 3.0,
        f"{_AR}.actor.entropy_coeff": tc.entropy_coeff,
        f"{_AR}.actor.use_kl_loss": tc.use_kl_loss,
        f"{_AR}.actor.kl_loss_coef": tc.kl_coeff,
        f"{_AR}.actor.kl_loss_type": tc.kl_estimator,
        f"{_AR}.actor.loss_agg_mode": tc.loss_agg,
        f"{_AR}.actor.fsdp_config.param_offload": tc.param_offload,
        f"{_AR}.actor.fsdp_config.optimizer_offload": tc.optimizer_offload,
        f"{_AR}.actor.checkpoint.save_contents": ["model", "optimizer", "extra", "hf_model"],
        f"{_AR}.ref.log_prob_micro_batch_size_per_gpu": tc.micro_batch_size,
    }


def _rollout_settings(tc: VerlTrainerConfig, ro: Any, run_dir: Path) -> dict[str, Any]:
    """The rollout (vLLM / SGLang behind ragen's agent loop; ``actor_rollout_ref.rollout``)."""
    return {
        f"{_AR}.rollout.name": tc.rollout_backend,
        f"{_AR}.rollout.mode": "async",
        f"{_AR}.rollout.n": ro.group_size,
        f"{_AR}.rollout.temperature": ro.temperature if ro.temperature > 0 else 1.0,
        f"{_AR}.rollout.top_p": ro.top_p,
        f"{_AR}.rollout.top_k": ro.top_k if ro.top_k > 0 else -1,
        f"{_AR}.rollout.calculate_log_probs": True,
        f"{_AR}.rollout.gpu_memory_utilization": tc.gpu_memory_utilization,
        f"{_AR}.rollout.tensor_model_parallel_size": tc.tensor_parallel_size,
        f"{_AR}.rollout.dtype": tc.dtype,
        f"{_AR}.rollout.log_prob_micro_batch_size_per_gpu": tc.micro_batch_size,
        f"{_AR}.rollout.val_kwargs.temperature": ro.val_temperature,
        f"{_AR}.rollout.val_kwargs.do_sample": ro.val_temperature > 0,
        f"{_AR}.rollout.val_kwargs.n": ro.val_group_size,
        f"{_AR}.rollout.agent.default_agent_loop": AGENT_LOOP,
        # ragen's agent loop by class path (verl_plugin.agent_loop_yaml writes it): nothing registered at import
        f"{_AR}.rollout.agent.agent_loop_config_path": os.fspath((run_dir / "verl" / "agent_loops.yaml").resolve()),
        f"{_AR}.rollout.multi_turn.enable": True,
        f"{_AR}.rollout.multi_turn.max_assistant_turns": ro.max_turn,
    }


def _data_settings(tc: VerlTrainerConfig, ro: Any, run_dir: Path) -> dict[str, Any]:
    """The data: one row per env group, generated by ragen (no dataset files to prepare)."""
    return {
        "data.train_files": os.fspath(run_dir / "verl" / "train_groups.json"),
        "data.val_files": os.fspath(run_dir / "verl" / "val_groups.json"),
        "data.custom_cls.path": "pkg://ragen_plugins_verl.dataset",
        "data.custom_cls.name": "EnvGroupDataset",
        "data.train_batch_size": ro.env_groups,
        "data.max_prompt_length": tc.max_prompt_length,
        "data.max_response_length": tc.max_response_length,
        "data.shuffle": False,
        "data.dataloader_num_workers": 0,
        "data.return_raw_chat": True,
    }


def _critic_settings(tc: VerlTrainerConfig, model: str, needs_critic: bool) -> dict[str, Any]:
    """The critic (enabled for estimators that need one)."""
    return {
        "critic.enable": needs_critic,
        "critic.optim.lr": tc.critic_lr,
        "critic.cliprange_value": tc.value_clip if tc.value_clip is not None else 0.5,
        "critic.ppo_micro_batch_size_per_gpu": tc.micro_batch_size,
        "critic.model.path": model,
        "critic.model.enable_gradient_checkpointing": tc.gradient_checkpointing,
        "critic.fsdp.param_offload": tc.param_offload,
        "critic.fsdp.optimizer_offload": tc.optimizer_offload,
    }


def _algorithm_settings(cfg: Any, needs_critic: bool) -> dict[str, Any]:
    """The algorithm: the estimator runs in ragen's trainer mode; veRL's name is recorded for its own bookkeeping."""
    return {
        "algorithm.adv_estimator": "gae" if needs_critic else f"{VERL_ESTIMATOR_PREFIX}{cfg.estimator.name}",
        "algorithm.use_kl_in_reward": False,
    }


def _trainer_settings(tc: VerlTrainerConfig, cfg: Any, run_dir: Path) -> dict[str, Any]:
    """veRL's ``trainer``: the V1 trainer in ragen's mode, resources, schedule, checkpoints and logging."""
    return {
        "trainer.use_v1": True,
        "trainer.v1.trainer_mode": TRAINER_MODE,
        "trainer.v1.sampler.custom_sampler.path": "pkg://ragen_plugins_verl.filtering",
        "trainer.v1.sampler.custom_sampler.name": "FilteringReplayBuffer",
        "trainer.n_gpus_per_node": tc.n_gpus_per_node,
        "trainer.nnodes": tc.nnodes,
        "trainer.device": "cuda",
        "trainer.total_training_steps": tc.steps,
        "trainer.total_epochs": 1,
        "trainer.save_freq": tc.save_every if tc.save_every else -1,
        "trainer.test_freq": tc.val_every if tc.val_every else -1,
        "trainer.val_before_train": True,
        "trainer.max_actor_ckpt_to_keep": tc.keep_last,
        "trainer.max_critic_ckpt_to_keep": tc.keep_last,
        "trainer.default_local_dir": os.fspath(run_dir / "checkpoints" / "verl"),
        "trainer.resume_mode": "auto",
        "trainer.project_name": tc.project_name,
        "trainer.experiment_name": cfg.run.name,
        "trainer.logger": list(tc.logger),
    }


def ragen_section(resolved: Any) -> dict[str, Any]:
    """What ragen's code inside veRL's processes needs (the top-level ``ragen`` key of the veRL config): the
    resolved ragen config as plain data."""
    return {"config": resolved.to_data()}


def build_verl_config(settings: dict[str, Any], ragen: dict[str, Any] | None = None,
                      overrides: list[str] | None = None) -> Any:
    """Compose veRL's ``ppo_trainer`` config, apply ``settings`` (each key must exist in veRL's schema), the
    ``ragen`` section and the raw Hydra ``overrides``; returns an OmegaConf ``DictConfig``."""
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException
    from omegaconf import OmegaConf, open_dict
    from omegaconf.errors import OmegaConfBaseException

    try:
        with initialize_config_module(config_module="verl.trainer.config", version_base=None):
            backend = settings.get("actor_rollout_ref.rollout.name", "vllm")
            cfg = compose(config_name="ppo_trainer", overrides=[f"actor_rollout_ref.rollout.name={backend}"])
    except (HydraException, OmegaConfBaseException) as exc:
        raise RagenError(f"veRL's ppo_trainer config could not be composed: {exc}") from exc
    OmegaConf.set_struct(cfg, True)
    for key, value in settings.items():
        if OmegaConf.select(cfg, key, throw_on_missing=False, default=_ABSENT) is _ABSENT:
            raise ConfigError(f"veRL's config has no key {key!r} (ragen's mapping does not fit this veRL version)",
                              hint="install the veRL version this plugin supports: pip install verl==0.9.1")
        try:
            OmegaConf.update(cfg, key, value, merge=False)
        except OmegaConfBaseException as exc:
            raise ConfigError(f"veRL rejected {key}={value!r}: {exc}") from exc
    if ragen is not None:
        with open_dict(cfg):
            cfg.ragen = ragen
    for text in overrides or []:
        key, sep, raw = text.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"trainer.verl_overrides: {text!r} is not of the form key=value")
        if OmegaConf.select(cfg, key.strip().lstrip("+"), throw_on_missing=False, default=_ABSENT) is _ABSENT \
                and not key.startswith("+"):
            raise ConfigError(f"trainer.verl_overrides: veRL's config has no key {key.strip()!r}",
                              hint="prefix the key with '+' to add a new one")
        import yaml

        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        try:
            with open_dict(cfg):
                OmegaConf.update(cfg, key.strip().lstrip("+"), value, merge=False)
        except OmegaConfBaseException as exc:
            raise ConfigError(f"trainer.verl_overrides: veRL rejected {text!r}: {exc}") from exc
    return cfg


_ABSENT = object()


def validate_verl_config(cfg: Any) -> None:
    """veRL's own validation of a composed config; a failure becomes one :class:`ConfigError` quoting veRL."""
    import contextlib
    import io

    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    checks = [
        ("algorithm", lambda: omega_conf_to_dataclass(cfg.algorithm)),
        ("actor_rollout_ref.rollout", lambda: omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)),
        ("validate_config", lambda: validate_config(cfg, use_reference_policy=need_reference_policy(cfg),
                                                    use_critic=need_critic(cfg))),
    ]
    for where, check in checks:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                check()
        except Exception as exc:  # veRL raises AssertionError/ValueError, wrapped by Hydra's instantiate
            cause: BaseException = exc
            while cause.__cause__ is not None:
                cause = cause.__cause__
            raise ConfigError(f"veRL rejected the translated config ({where}): {type(cause).__name__}: {cause}",
                              hint="see docs/verl.md for how ragen keys map to veRL's") from exc
