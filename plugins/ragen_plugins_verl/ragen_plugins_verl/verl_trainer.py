"""ragen's trainer mode in veRL 0.9.1's V1 trainer (``trainer.v1.trainer_mode=ragen``), running inside Ray.

A subclass of veRL's synchronous ``PPOTrainerSync`` (colocated FSDP actor + vLLM/SGLang servers, weights synced to
the servers once per step) that changes three things:

- ``_compute_advantage``: ragen's score normalisation and estimator (:mod:`ragen_plugins_verl.advantages`) on the
  batch veRL assembled (critic values included), instead of veRL's estimator — so ``gae``, ``bilevel_gae`` and
  ``gigpo`` work with their critic values, turn ids and state keys, and every estimator honours its options;
- the replay buffer is :class:`~ragen_plugins_verl.filtering.FilteringReplayBuffer` with the run's filter;
- after veRL's metrics, a ragen step: the trajectories (carried in the agent loop's ``extra_fields``) go through
  the core's step sequence (``RunContext.begin_step``: env errors to ``ragen_on_error``, ``ragen_on_rollout_end``;
  the diagnostics, cross-scoring through the actor's log-prob computation; ``RunContext.end_step``:
  ``ragen_collect_metrics``, ``ragen_on_step_end``, ``metrics.jsonl``, ``ragen_on_metrics``). A ``stop_reason``
  set by a hook ends training after a checkpoint.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transfer_queue as tq
from tensordict import TensorDict
from verl.protocol import DataProto
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.workers.utils.padding import response_to_nested

from ragen_core.data import RolloutBatch
from ragen_core.protocols import DiagnosticContext
from ragen_core.runner import rollout_metrics

from .advantages import compute_advantages, is_padding, prepare_dataproto
from .agent_loop import load_trajectory
from .dataproto import _objects

__all__ = ["ActorScorer", "RagenPPOTrainer", "fetch_dataproto"]

_FIELDS = ["uid", "response_mask", "rm_scores", "responses", "values", "extra_fields"]


def fetch_dataproto(batch: Any, fields: list[str] | None = None) -> DataProto:
    """The rows of a ``KVBatchMeta`` from TransferQueue as a padded ``DataProto`` (``uid`` and ``extra_fields`` as
    non-tensor columns), as veRL's own ``_compute_advantage`` reads them."""
    td = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                         select_fields=[f for f in (fields or _FIELDS) if f != "values" or _has_values(batch)])
    extra = td.pop("extra_fields").tolist() if "extra_fields" in td.keys() else [{} for _ in range(len(batch))]
    uid = td.pop("uid").tolist()
    data = DataProto(batch=td.to_padded_tensor())
    data.non_tensor_batch["uid"] = np.array(uid, dtype=object)
    data.non_tensor_batch["extra_fields"] = _objects(extra)
    if "rm_scores" in data.batch.keys():
        data.batch["token_level_scores"] = data.batch["rm_scores"].float()
    return data


def _has_values(batch: Any) -> bool:
    return bool(getattr(batch, "extra_info", {}).get("ragen_has_values", False))


class ActorScorer:
    """The diagnostics' scorer (``score(prompts, continuations) -> log-probs``) on veRL's actor.

    ``logprob_fn(rows, prompt_lengths)`` returns, per row (``prompt + continuation`` ids), the log-prob of every
    response token (the continuation). In the trainer mode it runs the actor workers' ``compute_log_prob``; tests
    give it a local model.
    """

    def __init__(self, tokenizer: Any, logprob_fn: Any) -> None:
        self.tokenizer = tokenizer
        self.logprob_fn = logprob_fn

    def score(self, prompts: list[list[int]], continuations: list[list[int]], batch_size: int = 64
              ) -> list[list[float]]:
        """Log-prob of each continuation token given its prompt (teacher forcing)."""
        out: list[list[float]] = []
        for s in range(0, len(prompts), batch_size):
            ps, cs = prompts[s:s + batch_size], continuations[s:s + batch_size]
            rows = self.logprob_fn([list(p) for p in ps], [list(c) for c in cs])
            for c, row in zip(cs, rows):
                out.append([float(x) for x in list(row)[:len(c)]])
        return out


class RagenPPOTrainer(PPOTrainerSync):
    """veRL's synchronous V1 trainer with ragen's estimator, filter, diagnostics and hooks (module docstring)."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        from omegaconf import OmegaConf

        from .agent_loop import _WorkerContext

        data: Any = OmegaConf.to_container(config.ragen.config, resolve=True)
        self.ragen = _WorkerContext.get(data)
        res, regs = self.ragen.resolved, self.ragen.registries
        cfg = res.config
        self.estimator = regs.estimators.get(cfg.estimator.name).create(res.estimator)
        self.ragen_filter = regs.filters.get(cfg.filter.name).create(res.filter) if res.filter is not None else None
        self.diagnostics = [(n, regs.diagnostics.get(n).create(c)) for n, c in res.diagnostics]
        if hasattr(self.replay_buffer, "set_filter"):
            self.replay_buffer.set_filter(self.ragen_filter)
        self.run_dir = Path(config.ragen.run_dir)
        self._run = self._run_context()

    def _run_context(self) -> Any:
        from ragen_core.context import RunContext
        from ragen_core.log import get_logger

        return RunContext(resolved=self.ragen.resolved, registries=self.ragen.registries, pm=self.ragen.pm,
                          run_dir=self.run_dir, log=get_logger("ragen.verl", run=self.run_dir.name), mode="train")

    def _save_checkpoint(self) -> None:
        """veRL's checkpoint, then ``<run>/checkpoints/step_N/verl.json`` pointing at it (``ragen train --resume``)."""
        super()._save_checkpoint()
        from .export import latest_verl_step, link_checkpoint

        last = latest_verl_step(self.config.trainer.default_local_dir)
        if last is not None:
            link_checkpoint(self.run_dir, last)

    # ------------------------------------------------------------------------------------------ advantage
    def _compute_advantage(self, batch: Any, metrics: dict) -> Any:
        batch.extra_info["ragen_has_values"] = bool(self.use_critic)
        data = fetch_dataproto(batch)
        response_mask = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                                        select_fields=["response_mask"])["response_mask"]
        prepare_dataproto(data, list(data.non_tensor_batch.pop("extra_fields")))
        ro = self.ragen.resolved.config.rollout
        result = getattr(self.replay_buffer, "last_result", None)
        scale = 0.0 if getattr(self.replay_buffer, "last_empty", False) else (
            float(result.metrics.get("rollout/filter_loss_scale", 1.0)) if result is not None else 1.0)
        compute_advantages(data, self.estimator, reward_norm=ro.reward_norm, reward_norm_by=ro.reward_norm_by,
                           use_turn_scores=ro.use_turn_scores, scale=scale)
        adv = data.batch["advantages"]
        real = data.batch["response_mask"].bool()
        metrics["actor/advantages_mean"] = float(adv[real].mean()) if real.any() else 0.0
        output = {f: response_to_nested(data.batch[f], response_mask) for f in ("advantages", "returns")}
        return tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id,
                               fields=TensorDict(output, batch_size=len(batch)))

    # ------------------------------------------------------------------------------------------ ragen step
    def _compute_metrics(self, batch: Any, metrics: dict, timing_raw: dict, global_steps: int, epoch: int) -> None:
        super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
        t0 = time.perf_counter()
        data = fetch_dataproto(batch, ["uid", "extra_fields"])
        trajs = [load_trajectory(e["ragen_trajectory"]) for u, e in
                 zip(data.non_tensor_batch["uid"], data.non_tensor_batch["extra_fields"])
                 if not is_padding(u) and e and "ragen_trajectory" in e]
        rollout = RolloutBatch(trajs)
        run = self._run
        ctx = run.begin_step(global_steps, rollout)
        ragen_metrics = rollout_metrics(rollout, "rollout")
        ragen_metrics["train/success"] = ragen_metrics.get("rollout/success", 0.0)
        every = self.ragen.resolved.trainer.diagnostics_every
        if self.diagnostics and (global_steps == 1 or global_steps % every == 0):
            scorer = ActorScorer(self.tokenizer, self._actor_logprobs)
            for _name, diag in self.diagnostics:
                ragen_metrics.update(diag.compute(DiagnosticContext(batch=rollout, step=global_steps, scorer=scorer)))
        for key, value in metrics.items():  # veRL's numeric metrics, under their own names
            if isinstance(value, (int, float, np.number)) and key not in ragen_metrics and np.isfinite(value):
                ragen_metrics[key] = float(value)
        ragen_metrics["timing_s/ragen_step"] = time.perf_counter() - t0
        run.end_step(ctx, ragen_metrics, "verl trainer")
        if ctx.stop_reason:
            run.log.info("stop", step=global_steps, reason=ctx.stop_reason)
            self._save_checkpoint()
            self.total_training_steps = global_steps  # veRL's loop ends after this step

    def _actor_logprobs(self, prompts: list[list[int]], continuations: list[list[int]]) -> list[list[float]]:
        """Teacher-forced log-probs of ``continuations`` after ``prompts`` through the actor workers (the same path
        as veRL's ``old_log_prob``): the rows go to TransferQueue under a scratch partition, ``compute_log_prob``
        runs, the log-probs come back."""
        from transfer_queue import KVBatchMeta
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict
        from verl.workers.utils.padding import response_from_nested

        keys, fields = [], []
        for i, (p, c) in enumerate(zip(prompts, continuations)):
            ids = torch.tensor([*p, *c], dtype=torch.int64)
            fields.append({"prompts": torch.tensor(p, dtype=torch.int64), "responses": torch.tensor(c, dtype=torch.int64),
                           "input_ids": ids, "position_ids": torch.arange(len(ids), dtype=torch.int64),
                           "response_mask": torch.ones(len(c), dtype=torch.int64),
                           "loss_mask": torch.ones(len(c), dtype=torch.int64)})
            keys.append(f"ragenscore{i}_0_0")
        tq.kv_batch_put(keys=keys, fields=list_of_dict_to_tensordict(fields), partition_id="ragen_scoring",
                        tags=[{"status": "success", "prompt_len": len(p), "response_len": len(c),
                               "seq_len": len(p) + len(c)} for p, c in zip(prompts, continuations)])
        meta = KVBatchMeta(partition_id="ragen_scoring", keys=keys,
                           tags=[{"seq_len": len(p) + len(c)} for p, c in zip(prompts, continuations)])
        try:
            meta.extra_info.update({"calculate_entropy": False, "compute_loss": False,
                                    "temperature": self.config.actor_rollout_ref.rollout.temperature})
            self.actor_rollout_wg.compute_log_prob(meta)
            got = tq.kv_batch_get(keys=keys, partition_id="ragen_scoring", select_fields=["log_probs", "response_mask"])
            logp = response_from_nested(got["log_probs"], got["response_mask"])
            return [logp[i, :len(c)].tolist() for i, c in enumerate(continuations)]
        finally:
            tq.kv_clear(keys=keys, partition_id="ragen_scoring")
