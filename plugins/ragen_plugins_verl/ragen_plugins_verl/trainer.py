"""The ``verl`` trainer: ragen's StarPO on veRL 0.9.1 (Ray, FSDP actors, vLLM/SGLang rollouts), no fork.

``train(run)``, in order — everything that can fail on bad input fails before Ray starts:

1. refuse unsupported combinations (:func:`~ragen_plugins_verl.config.unsupported`) and a GPU request this node
   cannot meet (:func:`~ragen_plugins_verl.config.check_resources`);
2. translate the config (:func:`~ragen_plugins_verl.config.verl_settings`), compose veRL's ``ppo_trainer`` config,
   validate it with veRL's own classes, write it to ``<run>/verl/verl_config.yaml``;
3. write the env-group rows (:mod:`~ragen_plugins_verl.dataset`) and the agent-loop YAML, check that veRL can
   resolve ragen's trainer mode (:func:`~ragen_plugins_verl.verl_plugin.check_trainer_mode`);
4. ``verl.trainer.main_ppo.run_ppo`` with ragen's task runner (:mod:`~ragen_plugins_verl.task_runner`: veRL's
   ``TaskRunnerV1`` that registers the mode in its own process first) in ragen's trainer mode
   (:mod:`~ragen_plugins_verl.verl_trainer`), which writes ``metrics.jsonl`` and calls ragen's hooks every step;
5. link veRL's checkpoints into ``<run>/checkpoints/step_N`` and export the final actor as a Hugging Face folder
   there (``ragen eval trainer.model=<run>/checkpoints/step_N/actor`` or ``--resume``).

This module imports veRL: without it, ``ragen train trainer=verl`` reports the install hint of the trainer spec.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import verl  # noqa: F401 - the optional dependency; its absence gives the trainer spec's install hint

from ragen_core.errors import ConfigError

from .config import (
    VerlTrainerConfig,
    build_verl_config,
    check_resources,
    ragen_section,
    resolve_model_path,
    unsupported,
    validate_verl_config,
    verl_settings,
)
from .dataset import write_group_rows
from .export import export_hf, latest_verl_step, link_checkpoint, verl_checkpoint_of
from .verl_plugin import agent_loop_yaml, check_trainer_mode

__all__ = ["VerlTrainer", "prepare"]


def prepare(run: Any, config: VerlTrainerConfig, *, visible_gpus: int | None = None, val_only: bool = False) -> Any:
    """Steps 1–3 of the module docstring: the validated veRL config of ``run`` (an OmegaConf ``DictConfig``).

    ``visible_gpus`` replaces what CUDA reports (tests); the checks run in the documented order.
    """
    problems = unsupported(run.resolved, run.registries)
    if problems:
        raise ConfigError("trainer=verl cannot run this config:\n  - " + "\n  - ".join(problems))
    check_resources(config, visible_gpus)
    est_spec = run.registries.estimators.get(run.config.estimator.name)
    needs_critic = bool(getattr(est_spec, "needs_critic", False))
    resume = run.state.get("resume_checkpoint")
    model = resolve_model_path(config.model)
    settings = verl_settings(run.resolved, run.run_dir, model_path=model, needs_critic=needs_critic)
    verl_step = verl_checkpoint_of(resume) if resume else None
    if verl_step is not None:
        settings.update({"trainer.resume_mode": "resume_path", "trainer.resume_from_path": str(verl_step)})
    if val_only:
        settings.update({"trainer.val_only": True, "trainer.val_before_train": True})
    ragen = {**ragen_section(run.resolved), "run_dir": str(Path(run.run_dir).resolve())}
    cfg = build_verl_config(settings, ragen, config.verl_overrides)
    validate_verl_config(cfg)
    write_group_rows(run.resolved, Path(run.run_dir) / "verl", config.steps)
    from omegaconf import OmegaConf

    (Path(run.run_dir) / "verl").mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, Path(run.run_dir) / "verl" / "verl_config.yaml")
    agent_loop_yaml(Path(cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path))
    check_trainer_mode()  # the same check runs again in Ray's task runner, where veRL looks the mode up
    return cfg


class VerlTrainer:
    """``train(run)`` and ``evaluate(run)`` of the ``verl`` trainer spec (module docstring)."""

    config_cls = VerlTrainerConfig

    def __init__(self, config: VerlTrainerConfig) -> None:
        self.config = config

    def train(self, run: Any) -> dict[str, Any]:
        """Train with veRL (steps 1–5); returns the run summary (last metrics line)."""
        cfg = prepare(run, self.config)
        run.log.info("verl", config=str(Path(run.run_dir) / "verl" / "verl_config.yaml"))
        self._launch(cfg)
        return self._finish(run)

    def evaluate(self, run: Any) -> dict[str, Any]:
        """veRL's validation only (``trainer.val_only``) on ``trainer.model`` or the ``--resume`` checkpoint."""
        resume = run.state.get("resume_checkpoint")
        if resume and (Path(resume) / "actor").is_dir():
            import attrs

            self.config = attrs.evolve(self.config, model=str(Path(resume) / "actor"))
            run.state.pop("resume_checkpoint")
        cfg = prepare(run, self.config, val_only=True)
        self._launch(cfg)
        return {"status": "completed", "steps": 0, "metrics": _last_metrics(Path(run.run_dir))}

    @staticmethod
    def _launch(cfg: Any) -> None:
        from verl.trainer.main_ppo import run_ppo

        from .task_runner import task_runner_class

        run_ppo(cfg, task_runner_class=task_runner_class())

    def _finish(self, run: Any) -> dict[str, Any]:
        run_dir = Path(run.run_dir)
        root = run_dir / "checkpoints" / "verl"
        for step_dir in sorted(root.glob("global_step_*")):
            link_checkpoint(run_dir, step_dir)
        last = latest_verl_step(root)
        result: dict[str, Any] = {"status": "completed", "metrics": _last_metrics(run_dir)}
        result["steps"] = int(last.name.split("_")[-1]) if last is not None else 0
        if last is not None and self.config.export_hf:
            folder = link_checkpoint(run_dir, last)
            result["actor"] = str(export_hf(last, folder / "actor"))
            run.log.info("exported", actor=result["actor"])
        return result


def _last_metrics(run_dir: Path) -> dict[str, float]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return {}
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    if not lines:
        return {}
    data = json.loads(lines[-1])
    data.pop("step", None)
    return {k: float(v) for k, v in data.items() if isinstance(v, (int, float))}
