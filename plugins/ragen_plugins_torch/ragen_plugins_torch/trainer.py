"""The native StarPO trainer: one process, CPU or one GPU.

Each step: roll out env groups with the core loop (batched generation with a KV cache) → diagnostics on the
unfiltered batch → the configured filter → score normalisation → samples (exactly the sampled ids) → the configured
estimator → PPO/GRPO update of the actor (and critic) over mini-batches → metrics, hooks, checkpoints, validation.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import attrs
import numpy as np

from ragen_core.data import read_batches, write_batches
from ragen_core.errors import ConfigError, RagenError
from ragen_core.protocols import DiagnosticContext
from ragen_core.registry import with_filter_metrics
from ragen_core.runner import group_seeds, rollout_metrics, warn_truncation
from ragen_core.starpo.batching import advantage_input, build_samples, normalise_scores
from ragen_core.starpo.chat import ChatCodec
from ragen_core.starpo.ppo import PPOOptions, leading
from ragen_core.starpo.rollout import extra_round, make_episodes, random_baseline, run_lockstep

__all__ = ["TorchTrainer", "TorchTrainerConfig", "best_checkpoint", "latest_checkpoint"]


@attrs.define(field_transformer=leading("model", "steps"))
class TorchTrainerConfig(PPOOptions):
    """Options of the native trainer (RAGEN's defaults where they exist; tiny CPU models need larger lrs).

    The PPO options (``actor_lr`` ... ``value_clip``) are :class:`ragen_core.starpo.ppo.PPOOptions`, shared with the
    ``verl`` trainer.

    :ivar model: a Hugging Face causal-LM folder or hub id, a checkpoint's ``actor/`` folder, or a built-in name:
        ``tiny`` (0.7M-parameter Qwen2 built offline) or ``smollm2-135m`` (SmolLM2-135M-Instruct).
    :ivar steps: training steps (each: rollout, filter, estimator, update).
    :ivar micro_batch_size: samples per forward/backward pass (gradients accumulate up to the mini-batch); must
        divide ``mini_batch_size``.
    :ivar val_every: validate every this many steps (0: only at step 0 and after the last step).
    :ivar save_every: write a checkpoint every this many steps and after the last one (0: none, except when the run
        stops early).
    :ivar keep_last: checkpoints kept; older ones are deleted.
    :ivar keep_best: after a validation whose ``val/success`` beats every earlier one of the run (step 0 included),
        write the model to ``checkpoints/best`` (atomically; its ``state.json`` holds the step and ``val_success``;
        the model only, no optimiser state; never removed by ``keep_last``). ``ragen eval -m RUN/checkpoints/best``
        and ``ragen serve RUN/checkpoints/best`` load it; ``summary.json`` names it under ``best``.
    :ivar device: ``auto`` (``cuda`` when available, else ``cpu``) or a torch device string.
    :ivar dtype: ``auto`` (bfloat16 on a GPU, float32 on the CPU), ``float32`` or ``bfloat16``.
    :ivar gradient_checkpointing: trade compute for memory in the forward pass.
    :ivar lora_rank: train LoRA adapters of this rank on every linear layer (alpha = 2 x rank; needs ``peft``);
        checkpoints hold the merged model. 0: full fine-tuning.
    :ivar warm_start_steps: supervised steps on format demonstrations before RL (0: none).
    :ivar warm_start_lr: learning rate of the warm-start.
    :ivar warm_start_batch: demonstrations per warm-start step.
    :ivar warm_start_groups: demonstration trajectories generated for the warm-start (one per group, seeds apart from
        training's).
    :ivar dynamics_steps: before the warm-start, supervised steps on predicting the env's next observation from
        random-play transitions in the run's prompt format (never oracle moves; the loss covers the observation
        only; cached in the model cache, so a rerun with the same settings loads it: see
        :mod:`ragen_plugins_torch.dynamics`). It teaches a small model from scratch what each action does to the
        board, which a multi-turn env's RL signal alone does not teach it in a CPU budget. Uses ``warm_start_lr``
        and ``warm_start_batch``. 0: none. Skipped (with a log line) when ``rollout.max_turn`` is 1: no observation
        the policy sees follows an action.
    :ivar dynamics_groups: random-play trajectories generated for it (one per group; seeds apart from training's,
        validation's and the warm-start's).
    :ivar dynamics_seed: the seed of that stage's random play and batch order. It is not ``run.seed``: like the
        built model it starts from, the pretrained model is a property of the env and the prompt format, built once
        and cached, and every seed of a config starts from the same one (so a seed study varies the warm-start and
        RL, not the pretraining, and pays for the stage once).
    :ivar max_empty_steps: stop the run after this many consecutive steps with nothing left after filtering.
    :ivar batch_adjust: after filtering, ``duplicate`` random samples or ``trim`` the last ones to a multiple of
        ``mini_batch_size``; ``none`` keeps the batch (the last mini-batch is then smaller).
    :ivar early_stop: let the diagnostics plugin stop the run on a reward-std collapse or a validation success below
        1% (RAGEN's rules).
    :ivar generation_batch: most sequences sampled in one ``generate`` call.
    :ivar diagnostics_every: compute the configured diagnostics at step 1 and every this many steps.
    :ivar share_prompts: run context that several samples share through the model once for all of them: in the
        update, a micro-batch's common prefix (the system prompt every turn starts with) and, on top of it, a
        prompt that several samples share (a group's first prompt) (:func:`ragen_plugins_torch.forward.grouped_logprobs`;
        equal results, a fraction of the work when prompts are long and answers short); in sampling, one prefill
        of a batch's common prefix and of each group's prompt. ``false``: every sequence on its own.
    :ivar prefix_cache_mb: megabytes of key/value caches the sampler keeps between ``generate`` calls, keyed by token
        prefix (:class:`ragen_plugins_torch.decoding.PrefixStore`): in the ``full`` context mode a turn continues
        from its trajectory's cache and runs only its new tokens (closing, observation, generation prompt) instead
        of the whole conversation again; the same tokens and log-probs to float round-off (tested). Emptied when
        the weights change. ``0``: off. The step logs ``perf/prefilled_tokens`` and ``perf/prefix_reused_tokens``.
    :ivar record_rollouts: save every step's rollouts (token ids, log-probs, rewards; extra dynamic-sampling rounds
        too) to ``rollouts/step_NNNNNN.jsonl.gz`` in the run directory, for ``ragen train --replay RUN_DIR``.
    :ivar turn_weight: how the sequence loss modes (``seq-mean-token-mean``, ``seq-mean-token-sum``) weigh the rows
        of an episode whose turns are separate rows (``rollout.context_mode`` other than ``full``): ``episode`` gives
        each row 1/(rows of its episode), so every episode counts once, as it does in ``full`` context where it is
        one sequence; ``row`` counts every row once, so episodes with more turns weigh more. With episode-level
        advantages those are often the failed ones, and their negative advantages then outweigh the rest on the
        tokens every answer shares (the format).
    :ivar old_logprobs: where the PPO ratio's old log-probs come from. ``recompute`` (veRL's default): a no-grad
        forward pass of the policy over the whole batch before the update. ``rollout``: the log-probs the sampler
        already computed for each sampled token (same weights, same temperature; they agree with the recomputed
        ones to float tolerance, see tests/torch/test_old_logprobs.py), which saves that pass, about a quarter of
        the update's work. Both are the behaviour policy's log-probs when the policy sampled its own batch; with
        ``--replay``, ``rollout`` takes the recorded run's log-probs (the policy that sampled the recording), while
        ``recompute`` takes the replaying policy's. The KL reference's and the critic's passes are unchanged.
    """

    model: str = "tiny"
    steps: int = attrs.field(default=30, validator=attrs.validators.gt(0))
    micro_batch_size: int = attrs.field(default=8, validator=attrs.validators.gt(0))
    val_every: int = attrs.field(default=10, validator=attrs.validators.ge(0))
    save_every: int = attrs.field(default=10, validator=attrs.validators.ge(0))
    keep_last: int = attrs.field(default=2, validator=attrs.validators.gt(0))
    keep_best: bool = True
    device: str = "auto"
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    gradient_checkpointing: bool = False
    lora_rank: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    warm_start_steps: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    warm_start_lr: float = attrs.field(default=1e-3, validator=attrs.validators.gt(0))
    warm_start_batch: int = attrs.field(default=16, validator=attrs.validators.gt(0))
    warm_start_groups: int = attrs.field(default=64, validator=attrs.validators.gt(0))
    dynamics_steps: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    dynamics_groups: int = attrs.field(default=1024, validator=attrs.validators.gt(0))
    dynamics_seed: int = 0
    max_empty_steps: int = attrs.field(default=5, validator=attrs.validators.gt(0))
    batch_adjust: Literal["none", "duplicate", "trim"] = "none"
    early_stop: bool = True
    generation_batch: int = attrs.field(default=128, validator=attrs.validators.gt(0))
    diagnostics_every: int = attrs.field(default=5, validator=attrs.validators.gt(0))
    record_rollouts: bool = False
    share_prompts: bool = True
    prefix_cache_mb: float = attrs.field(default=512.0, validator=attrs.validators.ge(0))
    turn_weight: Literal["episode", "row"] = "episode"
    old_logprobs: Literal["recompute", "rollout"] = "recompute"

    def __attrs_post_init__(self) -> None:
        if self.use_kl_loss and self.lora_rank and (self.warm_start_steps or self.dynamics_steps):
            raise ValueError("'use_kl_loss' with lora_rank and a warm-start or dynamics_steps is not supported (the KL "
                             "reference is the warm-started model, and LoRA keeps its warm-start in adapters): drop "
                             "one of the three")
        if self.mini_batch_size % self.micro_batch_size:
            raise ValueError(f"'mini_batch_size' must be a multiple of micro_batch_size: {self.mini_batch_size} "
                             f"vs {self.micro_batch_size}")


class TorchTrainer:
    """``train(run)`` and ``evaluate(run)`` for the ``torch`` trainer spec."""

    config_cls = TorchTrainerConfig
    #: ``ragen train --replay RUN_DIR`` trains on recorded rollouts (see ``record_rollouts``)
    supports_replay = True

    def __init__(self, config: TorchTrainerConfig) -> None:
        from .devices import check_device

        check_device(config.device, config.dtype, "trainer.")  # before any model is loaded: one clear ConfigError
        self.config = config
        self._phase: Any = lambda _name: None  # shows the step's phase on the progress bar (set by train)

    def check_replay(self, replay_dir: Path) -> dict[str, Any]:
        """Before the run starts (no model loaded): refuse a replay of ``replay_dir`` that needs a step it did not
        record (``trainer.steps`` past its recording); returns what the run replays (``run_dir``, ``recorded_steps``,
        ``steps``: the first and last step it will read)."""
        recorded = recorded_steps(replay_dir)
        steps = self.config.steps
        missing = sorted(set(range(1, steps + 1)) - set(recorded))
        if missing:
            have = f"steps {recorded[0]}..{recorded[-1]}" if recorded else "none"
            gap = f", step {missing[0]} missing" if recorded and missing[0] < recorded[-1] else ""
            fix = (f"replay at most {missing[0] - 1} step(s) (trainer.steps={missing[0] - 1})" if missing[0] > 1
                   else "record a run with trainer.record_rollouts=true")
            raise ConfigError(f"cannot replay: trainer.steps={steps} but {str(replay_dir)!r} recorded rollouts for "
                              f"{len(recorded)} step(s) ({have}{gap}): {fix}")
        return {"run_dir": str(replay_dir.resolve()), "recorded_steps": len(recorded), "steps": [1, steps]}

    # ------------------------------------------------------------------------------------------- set-up
    def _setup(self, run: Any) -> None:
        """Everything a run needs, in a fixed order after seeding torch (new weights, such as LoRA adapters and the
        value head, draw from its RNG): the policy and its optimiser, the estimator, filter and diagnostics, the critic
        and the KL reference, then a resumed run's state."""
        import torch

        tc = self.config
        self.torch = torch
        self.device = tc.device if tc.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}.get(tc.dtype)
        if dtype is None:
            dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        resume = run.state.get("resume_checkpoint")
        torch.manual_seed(run.config.run.seed)
        folder = self._load_policy(run, str(Path(resume) / "actor") if resume else tc.model, dtype)
        regs, res = run.registries, run.resolved
        est_spec = regs.estimators.get(run.config.estimator.name)
        self.estimator = est_spec.create(res.estimator)
        self.filter = regs.filters.get(run.config.filter.name).create(res.filter) if res.filter is not None else None
        self.diagnostics = [(n, regs.diagnostics.get(n).create(c)) for n, c in res.diagnostics]
        self._load_critic_and_reference(run, folder, dtype, resume)
        self.start_step = 0
        self.empty_steps = 0
        self.replay_dir = Path(run.state["replay_dir"]) if run.state.get("replay_dir") else (
            resumed_replay(run.run_dir) if resume and run.mode == "train" else None)  # a resumed replay replays on
        self._rounds: list[Any] = []  # this step's rollout rounds: recorded, or being replayed
        self.best = read_best(run.run_dir) if tc.keep_best and resume else None  # a resumed run keeps its best
        if resume:
            self._resume(run, resume)

    def _load_policy(self, run: Any, source: str, dtype: Any) -> Any:
        """Load the policy model from ``source`` (with LoRA adapters and gradient checkpointing when set), its chat
        codec and its optimiser; returns the model's folder (built-in names resolved)."""
        from .models import load_model_and_tokenizer
        from .policy import HFPolicy

        torch, tc = self.torch, self.config
        model, tokenizer = load_model_and_tokenizer(source, dtype=dtype, device=self.device)
        folder = getattr(model, "name_or_path", None) or source  # "tiny" etc. resolved to their folders
        self.base_model = str(folder)
        if tc.lora_rank:
            try:
                from peft import LoraConfig, get_peft_model
            except ImportError as exc:
                raise RagenError("trainer.lora_rank > 0 needs peft", hint="pip install peft") from exc
            model = get_peft_model(model, LoraConfig(r=tc.lora_rank, lora_alpha=2 * tc.lora_rank,
                                                     target_modules="all-linear"))
        if tc.gradient_checkpointing:
            model.gradient_checkpointing_enable()
        self.policy = HFPolicy(model, tokenizer, device=self.device, generation_batch=tc.generation_batch,
                               share_prompts=tc.share_prompts, prefix_cache_mb=tc.prefix_cache_mb)
        self.codec = ChatCodec(tokenizer, think=run.config.rollout.think)
        self._temperature = run.config.rollout.temperature or 1.0
        self.optim = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=tc.actor_lr)
        return folder

    def _load_critic_and_reference(self, run: Any, folder: Any, dtype: Any, resume: Any) -> None:
        """The critic (estimators that need one; from ``folder``, its weights from a resumed checkpoint) and its
        optimiser, and the frozen KL reference (``use_kl_loss``); None where not used."""
        from .models import load_model_and_tokenizer

        torch, tc = self.torch, self.config
        self.critic = self.critic_optim = self.ref = None
        if getattr(self.estimator, "needs_critic", False):
            from .value import ValueModel

            self.critic = ValueModel.from_pretrained(folder, dtype=dtype).to(self.device)
            if resume and (Path(resume) / "critic.pt").exists():
                self.critic.load_state_dict(torch.load(Path(resume) / "critic.pt", map_location=self.device,
                                                       weights_only=True))
            self.critic_optim = torch.optim.AdamW(self.critic.parameters(), lr=tc.critic_lr)
        if tc.use_kl_loss:
            # the reference is the policy RL starts from: trainer.model, or the warm-started model that the run saved
            saved = run.run_dir / "reference"
            ref, _ = load_model_and_tokenizer(str(saved) if resume and saved.exists() else tc.model, dtype=dtype,
                                              device=self.device)
            self.ref = ref.eval().requires_grad_(False)

    def _resume(self, run: Any, resume: Any) -> None:
        """Continue from the checkpoint ``resume``: its step, its count of empty steps and the optimisers' states
        (the weights were loaded with the models)."""
        torch = self.torch
        state = json.loads((Path(resume) / "state.json").read_text())
        self.start_step, self.empty_steps = state["step"], state["empty_steps"]
        self.optim.load_state_dict(torch.load(Path(resume) / "actor_optim.pt", map_location=self.device,
                                              weights_only=True))
        if self.critic_optim is not None:
            self.critic_optim.load_state_dict(torch.load(Path(resume) / "critic_optim.pt",
                                                         map_location=self.device, weights_only=True))
        run.log.info("resumed", checkpoint=str(resume), step=self.start_step)

    # ------------------------------------------------------------------------------------------- entry points
    def train(self, run: Any) -> dict[str, Any]:
        """Train for ``steps`` steps (see the module docstring); returns the run summary."""
        from rich.progress import BarColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        from ragen_core.log import progress, stage

        self._setup(run)
        tc = self.config
        replay = record_replay(run.run_dir, self.check_replay(self.replay_dir)) if self.replay_dir else None
        if (tc.warm_start_steps or tc.dynamics_steps) and not self.start_step:
            self._warm_start(run)
        result: dict[str, Any] = {"status": "completed", "steps": self.start_step, "metrics": {}}
        if self.start_step == 0:
            with stage("validation at step 0 (and the random baseline)"):
                result["initial_validation"] = self._log_validation(run, 0)
            self._keep_best(run, 0, result["initial_validation"])
        columns = [TextColumn("[bold]train"), BarColumn(), TextColumn("step {task.completed}/{task.total}"),
                   TextColumn("{task.fields[summary]}"), TextColumn("[dim]{task.fields[phase]}"), TimeElapsedColumn(),
                   TimeRemainingColumn()]
        with progress(*columns) as bar:
            task = bar.add_task("train", total=tc.steps, completed=self.start_step, summary="", phase="")
            self._phase = lambda name: bar.update(task, phase=name)
            for step in range(self.start_step + 1, tc.steps + 1):
                validate = step == tc.steps or bool(tc.val_every and step % tc.val_every == 0)
                ctx = self._step(run, step, validate)
                if validate:
                    self._keep_best(run, step, ctx.metrics)
                result["steps"], result["metrics"] = step, dict(ctx.metrics)
                run.log.info("step", step=step, **{k: round(v, 4) for k, v in ctx.metrics.items()
                                                   if k in ("train/success", "actor/pg_loss", "val/success",
                                                            "rollout/reward_mean", "timing_s/step")})
                bar.update(task, completed=step, summary=f"success {ctx.metrics.get('train/success', 0):.2f} "
                                                         f"reward {ctx.metrics.get('rollout/reward_mean', 0):+.2f}")
                if tc.save_every and (step % tc.save_every == 0 or step == tc.steps):
                    self._checkpoint(run, step)
                if ctx.stop_reason:
                    result.update(status="stopped", stop_reason=ctx.stop_reason)
                    self._checkpoint(run, step)
                    break
        if self.best is not None:
            result["best"] = dict(self.best)
        if replay is not None:  # the summary names the recorded run and the steps trained on
            result["replay"] = {**replay, "steps": [1, result["steps"]]}
        return result

    def evaluate(self, run: Any) -> dict[str, Any]:
        """Validation only (the model in ``trainer.model``, or ``--resume`` checkpoint)."""
        self._setup(run)
        metrics = self._validate(run)
        run.write_metrics(self.start_step, metrics)
        return {"status": "completed", "steps": 0, "metrics": metrics}

    # ------------------------------------------------------------------------------------------- one step
    def _rollout(self, run: Any, plan: Any, seeds: list[int], group_size: int, temperature: float) -> tuple[Any, float]:
        cfg = run.config
        episodes = make_episodes(run.registries.envs, plan, seeds=seeds, group_size=group_size, config=cfg.rollout,
                                 codec=self.codec, temperature=temperature)
        timer = _TimedPolicy(self.policy)
        batch = run_lockstep(episodes, timer, env_workers=cfg.rollout.env_workers)
        return batch, timer.seconds

    def _step(self, run: Any, step: int, validate: bool = False) -> Any:
        """One training step (rollout, diagnostics, filter, update, timings, validation when ``validate``); returns
        the step's context (its metrics and a stop reason, if any)."""
        torch, tc, cfg = self.torch, self.config, run.config
        t0 = time.perf_counter()
        torch.manual_seed(cfg.run.seed * 1_000_003 + step)
        seeds = group_seeds(cfg.rollout.seed_train, (step - 1) * cfg.rollout.env_groups, cfg.rollout.env_groups)
        tokens_before, prefilled_before = self.policy.generated_tokens, self.policy.prefilled_tokens
        reused_before = self.policy.store.reused_tokens if self.policy.store is not None else 0
        self._phase("rollout")
        if self.replay_dir is not None:
            self._rounds = replayed_rounds(self.replay_dir, step)
            batch, gen_s = self._rounds.pop(0), 0.0
        else:
            batch, gen_s = self._rollout(run, run.resolved.env_plan, seeds, cfg.rollout.group_size,
                                         cfg.rollout.temperature)
            self._rounds = [batch]
        rollout_s = time.perf_counter() - t0
        self._extra_rounds_s = [0.0, 0.0]  # dynamic sampling's extra rounds: [rollout seconds, generation seconds]
        ctx = run.begin_step(step, batch)
        metrics = self._batch_metrics(run, step, batch)
        kept, loss_scale = self._apply_filter(run, step, batch, metrics)
        if tc.record_rollouts and self.replay_dir is None:
            write_batches(run.run_dir / "rollouts" / f"step_{step:06d}.jsonl.gz", self._rounds)
        self._phase("update")
        update_s = self._train_on(run, step, ctx, kept, loss_scale, metrics)
        # every rollout round of the step (the first and dynamic sampling's extra ones) counts in the tokens, the
        # generation time and the rollout time alike
        generated = self.policy.generated_tokens - tokens_before
        rollout_s, gen_s = rollout_s + self._extra_rounds_s[0], gen_s + self._extra_rounds_s[1]
        metrics.update({"timing_s/gen": gen_s, "timing_s/env": rollout_s - gen_s, "timing_s/update": update_s,
                        "timing_s/step": time.perf_counter() - t0,
                        "perf/tokens_per_s": generated / gen_s if gen_s > 0 else 0.0,
                        "perf/update_tokens_per_s": (metrics.get("rollout/trained_tokens", 0.0) * tc.ppo_epochs
                                                     / update_s if update_s > 0 else 0.0),
                        "response_length/mean": metrics.get("rollout/response_length_mean", 0.0),
                        "perf/prefilled_tokens": float(self.policy.prefilled_tokens - prefilled_before),
                        "perf/prefix_reused_tokens": float(
                            self.policy.store.reused_tokens - reused_before if self.policy.store is not None else 0)})
        if validate:
            self._phase("validation")
            metrics.update(self._validate(run))
        self._phase("")
        run.end_step(ctx, metrics, "torch trainer")
        return ctx

    def _batch_metrics(self, run: Any, step: int, batch: Any) -> dict[str, float]:
        """The rolled-out batch's metrics before filtering: ``rollout/*`` (with ``train/`` copies of the success
        rates), the token drift and, at step 1 and every ``diagnostics_every`` steps, the diagnostics."""
        tc = self.config
        metrics = rollout_metrics(batch, "rollout")
        for key, value in list(metrics.items()):
            parts = key.split("/")
            if len(parts) == 3 and parts[2] in ("success", "pass@k"):
                metrics[f"train/{parts[1]}/{parts[2]}"] = value
        metrics["train/success"] = metrics.get("rollout/success", 0.0)
        metrics["rollout/token_drift"] = self._token_drift(run, batch)
        if self.diagnostics and (step == 1 or step % tc.diagnostics_every == 0):
            dctx = DiagnosticContext(batch=batch, step=step, scorer=self.policy)
            for _name, diag in self.diagnostics:
                metrics.update(diag.compute(dctx))
        return metrics

    def _apply_filter(self, run: Any, step: int, batch: Any, metrics: dict[str, float]) -> tuple[Any, float]:
        """The configured filter's kept groups (dynamic sampling rolls out more) and the loss scale it asks for;
        its metrics go into ``metrics``. Without a filter: the whole batch, scale 1."""
        if self.filter is None:
            return batch, 1.0
        if hasattr(self.filter, "collect"):  # dynamic sampling: roll out more groups until the batch is full
            kept, selection = self.filter.collect(self._more_groups(run, step), run.config.rollout.env_groups, batch)
        else:
            selection = with_filter_metrics(batch, self.filter.select(batch))  # a third party's too (docs/metrics.md)
            kept = batch.select_groups(selection.kept_groups)
        metrics.update(selection.metrics)
        if hasattr(self.filter, "metrics"):
            metrics.update(self.filter.metrics())
        return kept, float(selection.metrics.get("rollout/filter_loss_scale", 1.0))

    def _train_on(self, run: Any, step: int, ctx: Any, kept: Any, loss_scale: float, metrics: dict[str, float]) -> float:
        """Update on the kept trajectories (those whose env did not fail) and return the update's seconds; with none
        left, count an empty step instead (``max_empty_steps`` of them in a row stop the run)."""
        tc, cfg = self.config, run.config
        if not [t for t in kept if t.env_error is None]:
            self.empty_steps += 1
            metrics["rollout/empty_after_filter"] = 1.0
            run.log.warning("step_skipped", step=step, reason="nothing left to train on after the filter (and env "
                            "errors)", consecutive=self.empty_steps, stop_after=tc.max_empty_steps)
            if self.empty_steps >= tc.max_empty_steps:
                ctx.stop_reason = f"{self.empty_steps} consecutive steps had nothing left after filtering"
            return 0.0
        self.empty_steps = 0
        metrics["rollout/empty_after_filter"] = 0.0
        t1 = time.perf_counter()
        scores = normalise_scores(kept, cfg.rollout.reward_norm, cfg.rollout.reward_norm_by)
        samples = build_samples(kept, scores, use_turn_scores=cfg.rollout.use_turn_scores)
        metrics["rollout/samples"] = float(len(samples))
        samples = adjust_samples(samples, tc.mini_batch_size, tc.batch_adjust, seed=step)
        metrics["rollout/adjusted_samples"] = float(len(samples))
        metrics.update(self._update(samples, step, loss_scale))
        return time.perf_counter() - t1

    def _token_drift(self, run: Any, batch: Any, limit: int = 8) -> float:
        """Share of trajectories whose text, re-tokenised, differs from the ids that were sampled and are trained:
        what a re-tokenising trainer (RAGEN) would train on by mistake. ragen trains on the sampled ids, so this
        measures a hazard avoided, not an error; it is 0 where sampled text always re-tokenises to itself."""
        if run.config.rollout.context_mode != "full":
            return 0.0
        checked = drift = 0
        for traj in [t for t in batch if t.env_error is None and t.turns][:limit]:
            ids = [i for turn in traj.turns for i in (*turn.prompt_ids, *turn.response_ids)]
            if any(turn.new_segment for turn in traj.turns[1:]):
                continue
            text = self.codec.tokenizer.decode(ids, skip_special_tokens=False)
            checked += 1
            drift += self.codec.encode(text) != ids
        return drift / checked if checked else 0.0

    # ------------------------------------------------------------------------------------------- update
    def _tensors(self, samples: list[Any]) -> dict[str, Any]:
        from .policy import pad_right

        torch, dev = self.torch, self.device
        return {
            "ids": pad_right([s.input_ids for s in samples], self.policy.pad_id, torch.long).to(dev),
            "attn": pad_right([[1] * len(s.input_ids) for s in samples], 0, torch.long).to(dev),
            "mask": pad_right([s.response_mask for s in samples], 0, torch.float32).to(dev),
            # the sampler's log-probs, aligned like _forward's ([:, t] is about token t; 0 at prompt tokens)
            "rollout_logp": pad_right([s.logprobs for s in samples], 0.0, torch.float32).to(dev),
        }

    def _forward(self, model: Any, t: dict[str, Any], temperature: float) -> tuple[Any, Any]:
        """Log-probs and entropies aligned to token positions (``[:, t]`` is about token ``t``; column 0 is 0), computed
        at response tokens only (0 elsewhere: everything downstream is masked)."""
        from .forward import grouped_logprobs, masked_logprobs

        torch = self.torch
        forward = grouped_logprobs if self.config.share_prompts else masked_logprobs
        logp, ent = forward(model, t["ids"], t["attn"], t["mask"][:, 1:] > 0, temperature)
        zero = torch.zeros_like(logp[:, :1])
        return torch.cat([zero, logp], 1), torch.cat([zero, ent], 1)

    def _values(self, t: dict[str, Any]) -> Any:
        torch = self.torch
        assert self.critic is not None  # only estimators that need a critic ask for values
        v = self.critic(t["ids"], t["attn"])  # v[:, i] = value of the state after token i
        return torch.cat([torch.zeros_like(v[:, :1]), v[:, :-1]], 1)  # the value before generating token t

    def _more_groups(self, run: Any, step: int) -> Any:
        """``rollout(n)`` for dynamic sampling: ``n`` new groups with fresh seeds and group ids."""
        cfg = run.config
        state = {"round": 0}

        def rollout(n: int) -> Any:
            if self.replay_dir is not None:
                if not self._rounds:
                    raise RagenError(f"replay: step {step} of {str(self.replay_dir)!r} recorded fewer dynamic-"
                                     "sampling rounds than this run asks for",
                                     hint="replay with the recorded run's filter settings")
                return self._rounds.pop(0)
            state["round"] += 1
            plan, seeds, base = extra_round(run.resolved.env_plan, cfg.rollout.seed_train, step, state["round"], n)
            t0 = time.perf_counter()
            batch, gen_s = self._rollout(run, plan, seeds, cfg.rollout.group_size, cfg.rollout.temperature)
            self._extra_rounds_s[0] += time.perf_counter() - t0
            self._extra_rounds_s[1] += gen_s
            for t in batch:
                t.group_id += base
            self._rounds.append(batch)
            return batch

        return rollout

    def _update(self, samples: list[Any], step: int, loss_scale: float = 1.0) -> dict[str, float]:
        """The PPO update on ``samples``: the no-grad pass (old log-probs, values, reference log-probs), the
        estimator's advantages, then ``ppo_epochs`` passes over the micro-batches in a random order (seeded by the
        step), one optimiser step per mini-batch; returns the step's update metrics (means over micro-batches)."""
        tc = self.config
        temperature = max(self.policy_temperature, 1e-6)
        micro = tc.micro_batch_size
        chunks = [samples[i:i + micro] for i in range(0, len(samples), micro)]
        ub = self._no_grad_pass(chunks, temperature)
        inputs, out = self._estimate(samples, ub)
        rows_of = Counter(s.episode_id for s in samples)
        ub.row_w = self.torch.tensor([1.0 / rows_of[s.episode_id] if tc.turn_weight == "episode" else 1.0
                                      for s in samples])
        rng = np.random.default_rng(step)
        metrics: dict[str, list[float]] = {}
        mini = min(tc.mini_batch_size, len(chunks) * micro)
        lr = tc.actor_lr * min(1.0, step / tc.lr_warmup_steps) if tc.lr_warmup_steps else tc.actor_lr
        for param_group in self.optim.param_groups:  # a function of the step alone: --resume needs no scheduler state
            param_group["lr"] = lr
        self.policy.model.train()
        for _epoch in range(tc.ppo_epochs):
            order = rng.permutation(len(chunks))
            per_mini = max(1, mini // micro)
            for start in range(0, len(order), per_mini):
                self._mini_batch_step(ub, order[start:start + per_mini], temperature, loss_scale, metrics)
        mask_all = inputs.response_mask.astype(bool)
        summary = {k: float(np.mean(v)) for k, v in metrics.items()}
        summary["actor/advantages_mean"] = float(np.asarray(out.advantages)[mask_all].mean()) if mask_all.any() else 0.0
        summary["rollout/trained_tokens"] = float(sum(len(s.input_ids) for s in samples))
        summary["actor/lr"] = lr
        if tc.old_logprobs == "recompute":
            summary["actor/rollout_logp_diff_max"] = ub.gap
        return summary

    def _no_grad_pass(self, chunks: list[list[Any]], temperature: float) -> _UpdateBatch:
        """Each micro-batch's tensors, old log-probs (recomputed, or the sampler's), old values (with a critic) and
        reference log-probs (with a KL loss), without gradients."""
        torch, tc = self.torch, self.config
        ub = _UpdateBatch()
        with torch.no_grad():
            self.policy.model.eval()
            for ch in chunks:
                t = self._tensors(ch)
                ub.tensors.append(t)
                if tc.old_logprobs == "rollout":
                    ub.old_logp.append(t["rollout_logp"] * t["mask"])
                else:
                    ub.old_logp.append(self._forward(self.policy.model, t, temperature)[0])
                    # how far the sampler's log-probs are from the trainer's (veRL's rollout_probs_diff): a
                    # mismatch here is a bug or a numerics problem on the sampling side
                    ub.gap = max(ub.gap, float(((ub.old_logp[-1] - t["rollout_logp"]) * t["mask"]).abs().max()))
                if self.critic is not None:
                    ub.old_values.append(self._values(t) * t["mask"])
                if self.ref is not None:
                    ub.ref_logp.append(self._forward(self.ref, t, temperature)[0])
        return ub

    def _estimate(self, samples: list[Any], ub: _UpdateBatch) -> tuple[Any, Any]:
        """The estimator's advantages and returns of ``samples`` (the critic's old values padded to one width) into
        ``ub``; returns the estimator's input and output."""
        torch = self.torch
        width = max(t["ids"].shape[1] for t in ub.tensors)
        values_np = None
        if self.critic is not None:
            values_np = np.concatenate([_pad_np(v.float().cpu().numpy(), width) for v in ub.old_values])
        inputs = advantage_input(samples, values=values_np)
        out = self.estimator.compute(inputs)
        ub.adv = torch.as_tensor(np.asarray(out.advantages), dtype=torch.float32)
        ub.ret = torch.as_tensor(np.asarray(out.returns), dtype=torch.float32)
        return inputs, out

    def _mini_batch_step(self, ub: _UpdateBatch, group: Any, temperature: float, loss_scale: float,
                         metrics: dict[str, list[float]]) -> None:
        """One optimiser step of the actor (and critic) on the micro-batches ``group``, their gradients accumulated
        with weights that make the sum the mini-batch's loss (by tokens for ``token-mean``, else by rows)."""
        torch, tc, micro = self.torch, self.config, self.config.micro_batch_size
        total_tokens = sum(float(ub.tensors[k]["mask"].sum()) for k in group)
        total_rows = sum(float(ub.row_w[k * micro:k * micro + ub.tensors[k]["ids"].shape[0]].sum()) for k in group)
        self.optim.zero_grad()
        if self.critic_optim is not None:
            self.critic_optim.zero_grad()
        for k in group:
            self._micro_batch_backward(ub, k, temperature, loss_scale, total_tokens, total_rows, metrics)
        norm = torch.nn.utils.clip_grad_norm_(self.policy.model.parameters(), tc.grad_clip)
        metrics.setdefault("actor/grad_norm", []).append(float(norm))
        self.optim.step()
        if self.critic is not None and self.critic_optim is not None:
            torch.nn.utils.clip_grad_norm_(self.critic.parameters(), tc.grad_clip)
            self.critic_optim.step()

    def _micro_batch_backward(self, ub: _UpdateBatch, k: int, temperature: float, loss_scale: float,
                              total_tokens: float, total_rows: float, metrics: dict[str, list[float]]) -> None:
        """Forward and backward of micro-batch ``k``: the policy loss minus the entropy bonus (plus the KL loss),
        and the critic's value loss; their values go into ``metrics``."""
        from .losses import aggregate, kl_penalty, policy_loss, value_loss

        tc = self.config
        t, off = ub.tensors[k], k * tc.micro_batch_size
        n, w_len = t["ids"].shape
        adv = ub.adv[off:off + n, :w_len].to(self.device)
        ret = ub.ret[off:off + n, :w_len].to(self.device)
        rw = ub.row_w[off:off + n].to(self.device)
        weight = (float(t["mask"].sum()) / max(total_tokens, 1.0) if tc.loss_agg == "token-mean"
                  else float(rw.sum()) / total_rows)
        logp, ent = self._forward(self.policy.model, t, temperature)
        pg, info = policy_loss(logp, ub.old_logp[k], adv, t["mask"], clip_low=tc.clip_low, clip_high=tc.clip_high,
                               dual_clip=tc.dual_clip, agg=tc.loss_agg, row_weight=rw)
        entropy = aggregate(ent, t["mask"], tc.loss_agg, rw)
        loss = pg - tc.entropy_coeff * entropy
        if self.ref is not None:
            kl = aggregate(kl_penalty(logp, ub.ref_logp[k], tc.kl_estimator), t["mask"], tc.loss_agg, rw)
            loss = loss + tc.kl_coeff * kl
            metrics.setdefault("actor/kl_loss", []).append(kl.item())
        (loss * weight * loss_scale).backward()
        metrics.setdefault("actor/pg_loss", []).append(pg.item())
        metrics.setdefault("actor/entropy", []).append(entropy.item())
        for key, value in info.items():
            metrics.setdefault(key, []).append(value)
        if self.critic is not None:
            vf, vinfo = value_loss(self._values(t), ub.old_values[k][:, :w_len], ret, t["mask"], clip=tc.value_clip,
                                   agg=tc.loss_agg, row_weight=rw)
            (vf * weight).backward()
            metrics.setdefault("critic/vf_loss", []).append(vf.item())
            for key, value in vinfo.items():
                metrics.setdefault(key, []).append(value)

    @property
    def policy_temperature(self) -> float:
        return self._temperature if hasattr(self, "_temperature") else 1.0

    # ------------------------------------------------------------------------------------------- validation
    def _validate(self, run: Any) -> dict[str, float]:
        cfg = run.config
        plan = run.resolved.val_env_plan
        seeds = [cfg.rollout.seed_val + i for i in range(cfg.rollout.val_env_groups)]
        state = self.torch.random.get_rng_state()
        self.torch.manual_seed(cfg.rollout.seed_val)
        batch, _ = self._rollout(run, plan, seeds, cfg.rollout.val_group_size, cfg.rollout.val_temperature)
        self.torch.random.set_rng_state(state)
        for traj in batch:
            if traj.env_error is not None:  # counted in val/env_errors; val/success is over the others
                run.log.warning("env_error", env=traj.env, seed=traj.seed, error=traj.env_error, phase="validation")
        return validation_metrics(batch)

    def _log_validation(self, run: Any, step: int) -> dict[str, float]:
        metrics = self._validate(run)
        if step == 0:  # the level to beat: random valid actions in a perfect format, on the same validation set
            cfg = run.config
            metrics["val/random_success"] = random_baseline(
                run.registries.envs, run.resolved.val_env_plan,
                [cfg.rollout.seed_val + i for i in range(cfg.rollout.val_env_groups)], cfg.rollout.val_group_size,
                cfg.rollout)
        run.write_metrics(step, metrics)
        run.log.info("validation", step=step, **{k: round(v, 4) for k, v in metrics.items()})
        warn_truncation(run.log, step, metrics, run.config.rollout.max_new_tokens)
        return metrics

    def _warm_start(self, run: Any) -> None:
        """The supervised stages before RL: dynamics pretraining, then the format warm-start (each when set)."""
        from .dynamics import pretrain_dynamics
        from .sft import demonstration_samples, warm_start

        tc, cfg = self.config, run.config
        metrics: dict[str, float] = {}
        if tc.dynamics_steps and cfg.rollout.max_turn == 1:
            # one turn per episode: the observation an action leads to is never shown to the policy, so there is
            # nothing for the stage to teach (e.g. `env=bandit` on a multi-turn preset)
            run.log.info("dynamics_skipped", reason="rollout.max_turn is 1: no observation follows an action")
        elif tc.dynamics_steps:
            metrics |= pretrain_dynamics(self.policy, run.registries, run.resolved.env_plan, self.codec, cfg.rollout,
                                         base_model=self.base_model, steps=tc.dynamics_steps,
                                         groups=tc.dynamics_groups, lr=tc.warm_start_lr,
                                         batch_size=tc.warm_start_batch, seed=tc.dynamics_seed, log=run.log)
        if tc.warm_start_steps:
            samples = demonstration_samples(run.registries, run.resolved.env_plan, self.codec, cfg.rollout,
                                            groups=tc.warm_start_groups, seed=cfg.run.seed)
            losses = warm_start(self.policy, samples, steps=tc.warm_start_steps, lr=tc.warm_start_lr,
                                batch_size=tc.warm_start_batch, seed=cfg.run.seed, log=run.log)
            metrics |= {"warm_start/loss_first": losses[0], "warm_start/loss_last": losses[-1],
                        "warm_start/samples": float(len(samples))}
        run.write_metrics(0, metrics)
        if self.ref is not None:  # the KL reference is the warm-started policy (kept for --resume)
            self.ref.load_state_dict(self.policy.model.state_dict())
            self.ref.save_pretrained(run.run_dir / "reference")
            self.policy.tokenizer.save_pretrained(run.run_dir / "reference")

    # ------------------------------------------------------------------------------------------- checkpoints
    def _save_actor(self, folder: Path) -> None:
        """The policy (merged when it trains LoRA adapters) and its tokenizer as a plain model folder."""
        model = self.policy.model
        if self.config.lora_rank:  # a merged copy: the checkpoint is a plain model folder; training keeps its adapter
            import copy

            copy.deepcopy(model).merge_and_unload().save_pretrained(folder)
        else:
            model.save_pretrained(folder)
        self.policy.tokenizer.save_pretrained(folder)

    def _keep_best(self, run: Any, step: int, metrics: dict[str, float]) -> None:
        """With ``keep_best``: when ``val/success`` beats the run's best so far, write ``checkpoints/best``."""
        value = metrics.get("val/success")
        if not self.config.keep_best or value is None or (self.best is not None and value <= self.best["val_success"]):
            return
        path = write_best(Path(run.run_dir), step, value, self._save_actor)
        self.best = {"step": step, "val_success": value, "checkpoint": str(path)}
        run.log.info("best_checkpoint", step=step, val_success=round(value, 4), checkpoint=str(path))

    def _checkpoint(self, run: Any, step: int) -> Path:
        """Write ``checkpoints/step_N`` atomically (temp dir + rename) and keep the last ``keep_last``."""
        torch = self.torch
        root = Path(run.run_dir) / "checkpoints"
        root.mkdir(exist_ok=True)
        final = root / f"step_{step:06d}"
        tmp = root / f".tmp_step_{step:06d}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        self._save_actor(tmp / "actor")
        torch.save(self.optim.state_dict(), tmp / "actor_optim.pt")
        if self.critic is not None and self.critic_optim is not None:
            torch.save(self.critic.state_dict(), tmp / "critic.pt")
            torch.save(self.critic_optim.state_dict(), tmp / "critic_optim.pt")
        state = {"step": step, "empty_steps": self.empty_steps, "python_random": repr(random.getstate()[1][:1])}
        (tmp / "state.json").write_text(json.dumps(state))
        if final.exists():  # the same step again (a resumed run): set the old one aside, never half-delete it
            _discard(final)
        os.replace(tmp, final)
        for old in sorted(p for p in root.glob("step_*"))[:-self.config.keep_last]:
            _discard(old)
        for left in root.glob(".old_step_*"):  # set aside by a clean-up that was killed before it deleted them
            shutil.rmtree(left, ignore_errors=True)
        return final


@attrs.define
class _UpdateBatch:
    """What an update computes before its gradient steps, by micro-batch (index ``k``: micro-batch ``k``), and the
    batch-wide advantages, returns and row weights (rows ``k * micro_batch_size`` on are micro-batch ``k``'s)."""

    tensors: list[dict[str, Any]] = attrs.field(factory=list)
    old_logp: list[Any] = attrs.field(factory=list)
    old_values: list[Any] = attrs.field(factory=list)
    ref_logp: list[Any] = attrs.field(factory=list)
    #: the largest gap between the sampler's and the recomputed old log-probs
    gap: float = 0.0
    adv: Any = None
    ret: Any = None
    row_w: Any = None


class _TimedPolicy:
    """Measures the time spent inside ``generate``."""

    def __init__(self, policy: Any) -> None:
        self.policy, self.tokenizer, self.seconds = policy, policy.tokenizer, 0.0

    def generate(self, requests: list[Any]) -> list[Any]:
        t0 = time.perf_counter()
        try:
            return self.policy.generate(requests)
        finally:
            self.seconds += time.perf_counter() - t0


def validation_metrics(batch: Any) -> dict[str, float]:
    """What a validation logs of :func:`~ragen_core.runner.rollout_metrics` (prefix ``val``): ``val/success``,
    ``val/reward_mean``, ``val/format_penalty_rate`` (a success rate below a random policy's is often the format),
    ``val/truncated_rate`` (answers cut by ``rollout.max_new_tokens``), ``val/env_errors`` (trajectories whose env
    raised; the other metrics are over the rest), per variant ``success``, ``pass@k``, ``reward_mean`` and the env's
    ``info/<key>`` metrics."""
    metrics = {}
    for key, value in rollout_metrics(batch, "val").items():
        parts = key.split("/")
        if (len(parts) in (2, 3) and parts[-1] in ("success", "pass@k", "reward_mean")) or (
                len(parts) == 4 and parts[2] == "info") or key in ("val/format_penalty_rate", "val/truncated_rate", "val/env_errors"):
            metrics[key] = value
    return metrics


def adjust_samples(samples: list[Any], multiple: int, mode: str, seed: int = 0) -> list[Any]:
    """Make the number of samples a multiple of ``multiple`` after filtering (RAGEN pads by random duplication or
    trims): ``duplicate`` repeats randomly chosen samples, ``trim`` drops the last ones (never to zero), ``none``
    leaves the batch as it is (the update then takes a smaller last mini-batch)."""
    n = len(samples)
    if mode == "none" or n == 0 or n % multiple == 0:
        return samples
    if mode == "trim" and n > multiple:
        return samples[: n - n % multiple]
    rng = random.Random(seed)
    extra = multiple - n % multiple
    return samples + [samples[rng.randrange(n)] for _ in range(extra)]


def _pad_np(a: np.ndarray, width: int) -> np.ndarray:
    return np.pad(a, ((0, 0), (0, width - a.shape[1])))


def recorded_steps(run_dir: Path) -> list[int]:
    """The steps whose rollouts ``run_dir`` recorded (``rollouts/step_NNNNNN.jsonl.gz``), in order."""
    return sorted(int(p.name[5:-9]) for p in (Path(run_dir) / "rollouts").glob("step_*.jsonl.gz")
                  if p.name[5:-9].isdigit())


#: the file of a replay's run directory that names the recorded run it replays (``ragen train --replay``)
REPLAY_FILE = "replay.json"


def resumed_replay(run_dir: Path) -> Path | None:
    """The recorded run a replay run (resumed with ``--resume``) replays, from its ``replay.json``; None for a run
    that samples."""
    path = run_dir / REPLAY_FILE
    return Path(json.loads(path.read_text())["run_dir"]) if path.is_file() else None


def record_replay(run_dir: Path, info: dict[str, Any]) -> dict[str, Any]:
    """Leave a replay's trace in its run directory before it trains: ``replay.json`` (``info``: the recorded run's
    directory, its count of recorded steps and the steps replayed) and a comment atop ``config.yaml`` (a comment, so
    the file loads as before, for ``--resume``). Returns ``info``."""
    (run_dir / REPLAY_FILE).write_text(json.dumps(info, indent=2))
    config = run_dir / "config.yaml"
    text = config.read_text() if config.is_file() else ""
    if text and not text.startswith("# replay:"):
        first, last = info["steps"]
        config.write_text(f"# replay: trains on the rollouts steps {first}..{last} of {info['run_dir']} "
                          f"({info['recorded_steps']} recorded) (see {REPLAY_FILE})\n" + text)
    return info


def replayed_rounds(run_dir: Path, step: int) -> list[Any]:
    """The rollout rounds ``run_dir`` recorded at ``step`` (``trainer.record_rollouts``)."""
    path = run_dir / "rollouts" / f"step_{step:06d}.jsonl.gz"
    if not path.exists():
        recorded = sorted((run_dir / "rollouts").glob("step_*.jsonl.gz"))
        have = (f"it recorded steps {int(recorded[0].name[5:11])}..{int(recorded[-1].name[5:11])}" if recorded
                else "it recorded no rollouts")
        raise RagenError(f"replay: {str(run_dir)!r} has no rollouts for step {step}: {have}",
                         hint="record with trainer.record_rollouts=true, and replay at most as many steps")
    return read_batches(path)


def _discard(folder: Path) -> None:
    """Delete a checkpoint folder so that a kill at any moment leaves it whole or gone: first renamed to
    ``.old_step_N`` (atomic; no ``step_*`` glob sees it), then deleted."""
    aside = folder.with_name(f".old_{folder.name}")
    shutil.rmtree(aside, ignore_errors=True)
    os.replace(folder, aside)
    shutil.rmtree(aside, ignore_errors=True)


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete ``checkpoints/step_N`` (one with its ``state.json``) of a run directory, or None
    (``checkpoints/best`` is never the latest)."""
    steps = sorted(p for p in (Path(run_dir) / "checkpoints").glob("step_*") if (p / "state.json").is_file())
    return steps[-1] if steps else None


BEST = "best"


def best_checkpoint(run_dir: str | Path) -> Path | None:
    """The run's ``checkpoints/best`` (``trainer.keep_best``), or None when it kept none. A replacement interrupted
    between its two renames is completed here (the previous best is put back)."""
    root = Path(run_dir) / "checkpoints"
    final, old = root / BEST, root / f".old_{BEST}"
    if not final.exists() and old.is_dir():
        os.replace(old, final)
    return final if (final / "state.json").is_file() else None


def read_best(run_dir: str | Path) -> dict[str, Any] | None:
    """``{"step", "val_success", "checkpoint"}`` of the run's best checkpoint, or None."""
    path = best_checkpoint(run_dir)
    if path is None:
        return None
    state = json.loads((path / "state.json").read_text())
    return {"step": int(state["step"]), "val_success": float(state["val_success"]), "checkpoint": str(path)}


def write_best(run_dir: Path, step: int, val_success: float, save_actor: Any) -> Path:
    """Write ``checkpoints/best`` (``save_actor(folder)`` writes the model into ``best/actor``) with a ``state.json``
    of ``step`` and ``val_success``, so that a complete ``best`` is always there: the new one is written to a temp
    folder, the old one renamed aside, the new one renamed into place, then the old one deleted."""
    root = run_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final, tmp, old = root / BEST, root / f".tmp_{BEST}", root / f".old_{BEST}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_actor(tmp / "actor")
    (tmp / "state.json").write_text(json.dumps({"step": step, "val_success": val_success, "kind": BEST}))
    if final.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return final
