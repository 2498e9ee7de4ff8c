"""Format warm-start: supervised training on demonstrations that teach the output format, never the task.

Demonstrations come from the envs through the real rollout loop (so prompts are exactly what RL will show): the
reasoning is a generic sentence and the actions are chosen uniformly at random among the valid ones (a random short
answer for free-form envs). Any success gained later is RL's.
"""

from __future__ import annotations

import random
from typing import Any

import torch

from ragen_core.batching import build_samples
from ragen_core.chat import ChatCodec
from ragen_core.rollout import GenerationRequest, GenerationResult, make_episodes, run_lockstep

from .forward import masked_logprobs
from .policy import pad_right

__all__ = ["DemoPolicy", "demonstration_samples", "warm_start"]

REASONING = [
    "Let me look at the state and pick an action.",
    "I will choose my next move.",
    "I need to decide what to do next.",
    "Thinking about the current state.",
]


class DemoPolicy:
    """Writes ``<generic reasoning></think><answer>random valid action(s)</answer>`` with the real tokenizer; with
    ``think=False`` (the prompt then ends with ``<answer>``) only ``random valid action(s)</answer>``."""

    def __init__(self, tokenizer: Any, episodes: list[Any], *, max_actions: int, action_sep: str, seed: int,
                 think: bool = True) -> None:
        self.tokenizer, self.rng = tokenizer, random.Random(seed)
        self.envs = {ep.episode_id: ep.env for ep in episodes}
        self.max_actions, self.sep, self.think = max_actions, action_sep, think

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        out = []
        for req in requests:
            names = getattr(self.envs[req.episode_id], "action_names", None)
            if names:
                k = self.rng.randint(1, self.max_actions)
                answer = f" {self.sep} ".join(self.rng.choice(list(names)) for _ in range(k))
            else:
                answer = str(self.rng.randint(0, 100))
            text = (f" {self.rng.choice(REASONING)} </think> <answer> {answer} </answer>" if self.think
                    else f" {answer} </answer>")
            ids = tuple(self.tokenizer.encode(text, add_special_tokens=False))
            out.append(GenerationResult(token_ids=ids, logprobs=(0.0,) * len(ids)))
        return out


def demonstration_samples(registries: Any, plan: list[Any], codec: ChatCodec, rollout: Any, *, groups: int,
                          seed: int) -> list[Any]:
    """Demonstration samples for ``groups`` groups of one trajectory each, seeds disjoint from training's."""
    episodes = make_episodes(registries.envs, _scale(plan, groups), seeds=[10**6 + seed + i for i in range(groups)],
                             group_size=1, config=rollout, codec=codec)
    policy = DemoPolicy(codec.tokenizer, episodes, max_actions=rollout.max_actions_per_turn,
                        action_sep=rollout.action_sep, seed=seed, think=rollout.think)
    return build_samples(run_lockstep(episodes, policy))


def _scale(plan: list[Any], groups: int) -> list[Any]:
    total = sum(n for _name, n, _o in plan)
    out, left = [], groups
    for i, (name, n, opts) in enumerate(plan):
        k = left if i == len(plan) - 1 else max(1, round(groups * n / total))
        out.append((name, min(k, left), opts))
        left -= min(k, left)
    return [p for p in out if p[1] > 0]


def warm_start(policy: Any, samples: list[Any], *, steps: int, lr: float, batch_size: int, seed: int,
               log: Any = None) -> list[float]:
    """Cross-entropy on the response tokens of ``samples`` for ``steps`` optimiser steps; returns the losses."""
    model = policy.model
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    rng = random.Random(seed)
    losses = []
    for step in range(steps):
        chunk = rng.sample(samples, min(batch_size, len(samples)))
        ids = pad_right([s.input_ids for s in chunk], policy.pad_id, torch.long).to(policy.device)
        attn = pad_right([[1] * len(s.input_ids) for s in chunk], 0, torch.long).to(policy.device)
        mask = pad_right([s.response_mask for s in chunk], 0, torch.float32).to(policy.device)[:, 1:]
        logp, _ = masked_logprobs(model, ids, attn, mask > 0)
        loss = -(logp * mask).sum() / mask.sum().clamp(min=1.0)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if log is not None and (step % 10 == 0 or step == steps - 1):
            log.info("warm_start", step=step, loss=round(losses[-1], 4))
    return losses
