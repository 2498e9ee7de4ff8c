"""The core's episode runner inside veRL's agent-loop API (``verl.experimental.agent_loop``, veRL 0.9.1).

One dataset row is one env group (env or variant, options, seed); veRL runs ``rollout.n`` = ``group_size`` sessions
of it. Each session is :class:`RagenAgentLoop`: it makes the env, builds the core's :class:`~ragen_core.starpo.rollout.
Episode` (prompts, parsing, rewards, format penalties — exactly as the native trainer) and drives it with
:func:`~ragen_core.starpo.rollout.run_async`, whose generation calls go to veRL's LLM servers (vLLM/SGLang) as token ids
with log-probs. The finished trajectory becomes one ``AgentLoopOutput`` (:func:`trajectory_output`): the first turn's
prompt as ``prompt_ids``, every later token as ``response_ids`` — the sampled ids themselves, never re-tokenised —
with ``response_mask`` 1 only on generated tokens, the sampler's log-probs, and the trajectory score as
``reward_score`` (veRL puts it on the last response token, which is the last generated token: where the core puts
it). The whole trajectory travels in ``extra_fields`` so the trainer mode can run ragen's filters, estimators,
diagnostics and hooks on real :class:`~ragen_core.data.Trajectory` objects.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import attrs

from ragen_core.data import RolloutBatch, Trajectory, Turn
from ragen_core.starpo.batching import build_samples
from ragen_core.starpo.rollout import Episode, GenerationRequest, GenerationResult, run_async

from .dataproto import prompt_split

__all__ = ["RagenAgentLoop", "finish_reason", "load_trajectory", "sampling_params_for", "trajectory_output"]


def sampling_params_for(request: GenerationRequest, base: dict[str, Any]) -> dict[str, Any]:
    """veRL/vLLM sampling params for a core request: the request's budget, temperature, top-p/top-k and stop strings
    (kept in the output, as the core's parser expects), log-probs on."""
    params = dict(base)
    params.update(max_tokens=request.max_new_tokens, temperature=request.temperature, top_p=request.top_p,
                  top_k=request.top_k if request.top_k > 0 else -1, stop=list(request.stop),
                  include_stop_str_in_output=True, logprobs=True)
    return params


def finish_reason(stop_reason: Any, n_tokens: int, max_new_tokens: int) -> str:
    """The core's ``finish_reason`` (``length`` or ``stop``) of a veRL ``TokenOutput``. veRL 0.9.1's vLLM server
    reports ``completed`` for both a stop and the token limit (only its retry loop says ``length``), SGLang's passes
    its own ``finish_reason`` (``length`` or ``{"type": "length", ...}``): so ``length`` when the server says so or
    the response used the whole budget."""
    kind = stop_reason.get("type") if isinstance(stop_reason, dict) else stop_reason
    return "length" if kind == "length" or n_tokens >= max_new_tokens else "stop"


def trajectory_output(traj: Trajectory, *, use_turn_scores: bool = False, pad_id: int = 0) -> dict[str, Any]:
    """The ``AgentLoopOutput`` fields (all but ``metrics``) of a finished trajectory (see the module docstring).

    ``extra_fields`` holds ``ragen_trajectory`` (the trajectory as plain data), ``ragen_token_rewards`` and
    ``ragen_turn_ids`` over the response, and ``reward_extra_info`` (``success``, ``score``) that veRL's V1 trainer
    requires. A trajectory without a trainable sample (env error, no generated token) gets a one-token response
    with mask 0 and score 0.
    """
    samples = build_samples(RolloutBatch([traj]), use_turn_scores=use_turn_scores)
    extra: dict[str, Any] = {"ragen_trajectory": attrs.asdict(traj),
                             "reward_extra_info": {"success": float(traj.success), "score": float(traj.score)}}
    if len(samples) != 1 or not any(samples[0].response_mask):
        prompt = list(traj.turns[0].prompt_ids) if traj.turns and traj.turns[0].prompt_ids else [pad_id]
        extra.update(ragen_token_rewards=[0.0], ragen_turn_ids=[-1])
        return {"prompt_ids": prompt, "response_ids": [pad_id], "response_mask": [0], "response_logprobs": [0.0],
                "reward_score": 0.0, "num_turns": 2 * len(traj.turns), "extra_fields": extra}
    s = samples[0]
    k = prompt_split(s)
    rewards = s.token_rewards[k:]
    extra.update(ragen_token_rewards=list(rewards), ragen_turn_ids=list(s.turn_ids[k:]))
    return {"prompt_ids": s.input_ids[:k], "response_ids": s.input_ids[k:], "response_mask": s.response_mask[k:],
            "response_logprobs": s.logprobs[k:], "reward_score": float(sum(rewards)),
            "num_turns": 2 * len(traj.turns), "extra_fields": extra}


def load_trajectory(data: dict[str, Any]) -> Trajectory:
    """A :class:`Trajectory` back from ``extra_fields["ragen_trajectory"]``."""
    data = dict(data)
    turns = [Turn(**t) for t in data.pop("turns", [])]
    return Trajectory(**data, turns=turns)


class _WorkerContext:
    """What every agent loop of a process shares: the ragen registries and the resolved rollout config."""

    _cache: dict[str, _WorkerContext] = {}

    def __init__(self, ragen_data: dict[str, Any]) -> None:
        from ragen_core.config import RagenConfig, resolve_config, structure
        from ragen_core.plugins import build_plugin_manager, collect_registries

        data = dict(ragen_data)
        for key in ("filter", "estimator", "trainer"):  # resolved sections are flat {name, ...options}
            if isinstance(data.get(key), dict):
                data[key] = dict(data[key])
        config = structure(RagenConfig, data, "")
        self.pm = build_plugin_manager(config)
        self.registries = collect_registries(self.pm)
        self.resolved = resolve_config(config, self.registries, strict=False)
        self.rollout = config.rollout

    @classmethod
    def get(cls, ragen_data: dict[str, Any]) -> _WorkerContext:
        key = json.dumps(ragen_data, sort_keys=True, default=str)
        if key not in cls._cache:
            cls._cache[key] = cls(ragen_data)
        return cls._cache[key]


def _agent_loop_base() -> type:
    from verl.experimental.agent_loop import AgentLoopBase

    return AgentLoopBase


class RagenAgentLoop(_agent_loop_base()):  # type: ignore[misc]
    """veRL agent loop running one ragen episode (registered in veRL as ``ragen``)."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
        """Run the episode of the row's env group; returns an ``AgentLoopOutput``."""
        from omegaconf import OmegaConf
        from verl.experimental.agent_loop import AgentLoopOutput
        from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics

        from ragen_core.starpo.chat import ChatCodec

        ragen_data: Any = OmegaConf.to_container(self.config.ragen.config, resolve=True)
        ctx = _WorkerContext.get(ragen_data)
        name = str(kwargs["ragen_env"])
        options = json.loads(kwargs.get("ragen_options") or "{}")
        session = int(kwargs.get("session_id", 0) or 0)
        group = int(kwargs["ragen_group"])
        try:
            env = ctx.registries.envs.make(name, options)
        except Exception as exc:  # a broken env costs its episode, never the run (as in the core)
            env = _Broken(exc)
        codec = ChatCodec(self.tokenizer, think=ctx.rollout.think)
        episode = Episode(env, name=name, group_id=group, seed=int(kwargs["ragen_seed"]),
                          episode_id=group * 100_000 + session, config=ctx.rollout, codec=codec,
                          temperature=float(sampling_params.get("temperature", ctx.rollout.temperature)))
        request_id = uuid.uuid4().hex  # one sticky id per episode: the server reuses the prefix cache across turns
        seconds = 0.0

        async def agenerate(request: GenerationRequest) -> GenerationResult:
            import time

            nonlocal seconds
            t0 = time.perf_counter()
            out = await self.server_manager.generate(request_id=request_id, prompt_ids=list(request.prompt_ids),
                                                     sampling_params=sampling_params_for(request, sampling_params))
            seconds += time.perf_counter() - t0
            ids = tuple(int(i) for i in out.token_ids)
            logprobs = tuple(float(x) for x in (out.log_probs or [0.0] * len(ids)))
            return GenerationResult(token_ids=ids, logprobs=logprobs,
                                    finish_reason=finish_reason(out.stop_reason, len(ids), request.max_new_tokens))

        traj = await run_async(episode, agenerate)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        fields = trajectory_output(traj, use_turn_scores=ctx.rollout.use_turn_scores, pad_id=pad)
        return AgentLoopOutput(**fields, metrics=AgentLoopMetrics(generate_sequences=seconds))


class _Broken:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def reset(self, **_: Any) -> Any:
        raise self.error
