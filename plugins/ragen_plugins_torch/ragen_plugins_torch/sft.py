"""Format warm-start: supervised training on demonstrations that teach the output format, never the task.

Demonstrations come from the envs through the real rollout loop (so prompts are exactly what RL will show): the
reasoning is a generic sentence and the actions are chosen uniformly at random among the valid ones (a random short
answer for free-form envs). Any success gained later is RL's.

A demonstration never shows a format the run then penalises: each answer holds at most
``min(rollout.max_actions_per_turn, actions left in the trajectory)`` actions (one for Bandit), and before any is
generated :func:`check_demonstration_budget` measures the longest one with the run's tokenizer against
``rollout.max_new_tokens`` (sampled answers are cut there): a warm-start whose demonstrations do not fit is refused
with one line naming the numbers and the key to change.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import torch

from ragen_core.errors import ConfigError
from ragen_core.log import stage
from ragen_core.starpo.batching import build_samples
from ragen_core.starpo.chat import ChatCodec
from ragen_core.starpo.rollout import GenerationRequest, GenerationResult, make_episodes, run_lockstep

from .forward import grouped_logprobs, masked_logprobs
from .policy import pad_right

#: what the progress line calls each supervised stage (by its log event)
_STAGE_NAMES = {"warm_start": "format warm-start", "dynamics": "dynamics pretraining"}

__all__ = ["DemoPolicy", "check_demonstration_budget", "demonstration_samples", "demonstration_text",
           "longest_demonstration", "scale_plan", "warm_start"]

REASONING = [
    "Let me look at the state and pick an action.",
    "I will choose my next move.",
    "I need to decide what to do next.",
    "Thinking about the current state.",
]


#: the answers of free-form envs (an answer, an expression, a program): a random number in this range
FREE_FORM_ANSWERS = range(0, 101)
#: most action combinations :func:`longest_demonstration` tokenizes per env and reasoning
MAX_COMBINATIONS = 256


def demonstration_text(reasoning: str, actions: list[str], *, action_sep: str, think: bool) -> str:
    """One demonstration response: `` reasoning </think> <answer> a || b </answer>`` (``think=False``: the prompt
    already ends with ``<answer>``, so `` a || b </answer>``)."""
    answer = f" {action_sep} ".join(actions)
    return f" {reasoning} </think> <answer> {answer} </answer>" if think else f" {answer} </answer>"


def actions_allowed(env: Any, max_actions_per_turn: int, used: int = 0) -> int:
    """How many actions one answer may hold: ``max_actions_per_turn``, and no more than the trajectory has left
    (``env.max_actions_per_traj`` less ``used``); at least 1."""
    left = int(getattr(env, "max_actions_per_traj", max_actions_per_turn) or max_actions_per_turn) - used
    return max(1, min(int(max_actions_per_turn), left))


class DemoPolicy:
    """Writes ``<generic reasoning></think><answer>random valid action(s)</answer>`` with the real tokenizer; with
    ``think=False`` (the prompt then ends with ``<answer>``) only ``random valid action(s)</answer>``.

    Each answer holds 1 to ``min(max_actions, actions left in the episode's trajectory)`` actions, so never more than
    the rollout executes. A response longer than the request's ``max_new_tokens`` (what sampling would cut) raises
    :class:`~ragen_core.errors.ConfigError`: :func:`check_demonstration_budget` refuses such runs before this."""

    def __init__(self, tokenizer: Any, episodes: list[Any], *, max_actions: int, action_sep: str, seed: int,
                 think: bool = True) -> None:
        self.tokenizer, self.rng = tokenizer, random.Random(seed)
        self.envs = {ep.episode_id: ep.env for ep in episodes}
        self.names = {ep.episode_id: ep.name for ep in episodes}
        self.used = dict.fromkeys(self.envs, 0)
        self.max_actions, self.sep, self.think = max_actions, action_sep, think

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        out = []
        for req in requests:
            env = self.envs[req.episode_id]
            names = getattr(env, "action_names", None)
            if names:
                k = self.rng.randint(1, actions_allowed(env, self.max_actions, self.used[req.episode_id]))
                actions = [self.rng.choice(list(names)) for _ in range(k)]
            else:
                actions = [str(self.rng.choice(FREE_FORM_ANSWERS))]
            self.used[req.episode_id] += len(actions)
            text = demonstration_text(self.rng.choice(REASONING), actions, action_sep=self.sep, think=self.think)
            ids = tuple(self.tokenizer.encode(text, add_special_tokens=False))
            if len(ids) > req.max_new_tokens:
                raise ConfigError(_too_long(len(ids), self.names[req.episode_id], self.tokenizer,
                                            req.max_new_tokens, False))
            out.append(GenerationResult(token_ids=ids, logprobs=(0.0,) * len(ids)))
        return out


def longest_demonstration(tokenizer: Any, env: Any, *, max_actions_per_turn: int, action_sep: str,
                          think: bool) -> int:
    """Tokens of the longest response :class:`DemoPolicy` can write for ``env`` (every reasoning sentence, answers
    of as many actions as one may hold, made of the env's longest action names; every free-form answer)."""
    def length(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False))

    names = getattr(env, "action_names", None)
    k = actions_allowed(env, max_actions_per_turn)
    if names:
        by_length = sorted(dict.fromkeys(names), key=lambda n: -length(f" {n}"))
        m = max(1, int(MAX_COMBINATIONS ** (1 / k)))
        while m > 1 and m ** k > MAX_COMBINATIONS:
            m -= 1
        answers = [list(c) for c in itertools.product(by_length[:m], repeat=k)]
    else:
        answers = [[str(n)] for n in FREE_FORM_ANSWERS]
    reasons = REASONING if think else REASONING[:1]
    return max(length(demonstration_text(r, a, action_sep=action_sep, think=think)) for r in reasons for a in answers)


def check_demonstration_budget(tokenizer: Any, envs: list[tuple[str, Any]], rollout: Any, *,
                               model: str | None = None) -> int:
    """Refuse a warm-start whose demonstrations would not fit ``rollout.max_new_tokens``.

    :param envs: ``(name, env)`` pairs, one per env or variant the demonstrations come from.
    :returns: the longest demonstration's length in tokens.
    :raises ConfigError: one line naming the tokens needed, the env, the tokenizer and ``rollout.max_new_tokens``.
    """
    worst, worst_env = 0, ""
    for name, env in envs:
        n = longest_demonstration(tokenizer, env, max_actions_per_turn=rollout.max_actions_per_turn,
                                  action_sep=rollout.action_sep, think=rollout.think)
        if n > worst:
            worst, worst_env = n, name
    if worst > rollout.max_new_tokens:
        fits_without_think = rollout.think and all(
            longest_demonstration(tokenizer, env, max_actions_per_turn=rollout.max_actions_per_turn,
                                  action_sep=rollout.action_sep, think=False) <= rollout.max_new_tokens
            for _name, env in envs)
        raise ConfigError(_too_long(worst, worst_env, tokenizer, rollout.max_new_tokens, fits_without_think,
                                    model=model))
    return worst


def _too_long(need: int, env: str, tokenizer: Any, budget: int, think_fix: bool, *, model: str | None = None) -> str:
    source = model or Path(str(getattr(tokenizer, "name_or_path", "") or "?")).name
    return (f"warm-start demonstrations need up to {need} new tokens (env {env}, tokenizer of {source!r}) but "
            f"rollout.max_new_tokens is {budget}: raise rollout.max_new_tokens to at least {need}"
            + (", or set rollout.think=false" if think_fix else "")
            + " (or trainer.warm_start_steps=0 for no warm-start)")


def demonstration_samples(registries: Any, plan: list[Any], codec: ChatCodec, rollout: Any, *, groups: int,
                          seed: int, model: str | None = None) -> list[Any]:
    """Demonstration samples for ``groups`` groups of one trajectory each, seeds disjoint from training's.

    First checks that the longest demonstration fits ``rollout.max_new_tokens`` (:func:`check_demonstration_budget`;
    ``model`` names the tokenizer in its message), so nothing is generated or trained for a run that is refused."""
    episodes = make_episodes(registries.envs, scale_plan(plan, groups),
                             seeds=[10**6 + seed + i for i in range(groups)],
                             group_size=1, config=rollout, codec=codec)
    first: dict[str, Any] = {}
    for ep in episodes:
        first.setdefault(ep.name, ep.env)
    check_demonstration_budget(codec.tokenizer, list(first.items()), rollout, model=model)
    policy = DemoPolicy(codec.tokenizer, episodes, max_actions=rollout.max_actions_per_turn,
                        action_sep=rollout.action_sep, seed=seed, think=rollout.think)
    return build_samples(run_lockstep(episodes, policy))


def scale_plan(plan: list[Any], groups: int) -> list[Any]:
    """The env plan ``(name, groups, options)`` scaled to ``groups`` groups in all, in the same proportions (each
    variant keeps at least one while groups are left)."""
    total = sum(n for _name, n, _o in plan)
    out, left = [], groups
    for i, (name, n, opts) in enumerate(plan):
        k = left if i == len(plan) - 1 else max(1, round(groups * n / total))
        out.append((name, min(k, left), opts))
        left -= min(k, left)
    return [p for p in out if p[1] > 0]


def warm_start(policy: Any, samples: list[Any], *, steps: int, lr: float, batch_size: int, seed: int,
               log: Any = None, event: str = "warm_start") -> list[float]:
    """Cross-entropy on the ``response_mask`` tokens of ``samples`` for ``steps`` optimiser steps (progress logged
    as ``event`` every 10 steps); returns the losses. Shared context runs once per batch when the policy shares
    prompts (``trainer.share_prompts``, :func:`~ragen_plugins_torch.forward.grouped_logprobs`)."""
    model = policy.model
    model.train()
    # the prompts' shared context (the system prompt; a demonstration group's prompt) once per batch, as in RL
    forward = grouped_logprobs if getattr(policy, "share_prompts", True) else masked_logprobs
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    rng = random.Random(seed)
    losses = []
    with stage(_STAGE_NAMES.get(event, event), total=steps, unit="steps") as advance:
        for step in range(steps):
            losses.append(_sft_step(policy, model, forward, opt, rng.sample(samples, min(batch_size, len(samples)))))
            advance(1)
            if log is not None and (step % 10 == 0 or step == steps - 1):
                log.info(event, step=step, loss=round(losses[-1], 4))
    return losses


def _sft_step(policy: Any, model: Any, forward: Any, opt: Any, chunk: list[Any]) -> float:
    """One optimiser step of cross-entropy on ``chunk``'s response tokens; returns the loss."""
    ids = pad_right([s.input_ids for s in chunk], policy.pad_id, torch.long).to(policy.device)
    attn = pad_right([[1] * len(s.input_ids) for s in chunk], 0, torch.long).to(policy.device)
    mask = pad_right([s.response_mask for s in chunk], 0, torch.float32).to(policy.device)[:, 1:]
    logp, _ = forward(model, ids, attn, mask > 0)
    loss = -(logp * mask).sum() / mask.sum().clamp(min=1.0)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return float(loss.item())
