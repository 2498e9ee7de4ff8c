"""Synthetic batches (char-level token ids, RAGEN's chat layout) and synthetic scorers for the diagnostics tests."""

from __future__ import annotations

import random
from collections.abc import Callable

from ragen_core.data import RolloutBatch, Trajectory, Turn
from ragen_core.protocols import DiagnosticContext
from ragen_core.starpo.chat import ChatCodec, TextTokenizer

TOK = TextTokenizer()
CODEC = ChatCodec(TOK)
SYSTEM = "You're a helpful assistant. Reach the goal."


def user(turn: int, state: str) -> str:
    return f"Turn {turn}:\nState:\n{state}\nYou have 5 actions left."


def response(reasoning: str | None, answer: str = "Up") -> list[int]:
    """Response ids after the prompt's ``<think>``: ``reasoning</think><answer>…</answer>`` plus the end token;
    ``None`` gives an answer without the closing tag."""
    text = f"{reasoning}</think><answer>{answer}</answer>" if reasoning is not None else f"<answer>{answer}</answer>"
    return [*TOK.encode(text), TOK.eos_token_id]


def trajectory(group_id: int, states: list[str], reasonings: list[str | None], *, env_error: str | None = None,
               seed: int = 0) -> Trajectory:
    """A full-mode trajectory: the first turn a whole prompt, later turns the spliced continuation."""
    turns = []
    last: list[int] = []
    for k, (state, reasoning) in enumerate(zip(states, reasonings)):
        if k == 0:
            prompt = CODEC.prompt([{"role": "system", "content": SYSTEM}, {"role": "user", "content": user(1, state)}])
        else:
            prompt = CODEC.continuation(last, user(k + 1, state))
        ids = response(reasoning)
        last = ids
        turns.append(Turn(observation=state, new_segment=k == 0, prompt_ids=prompt, response_ids=ids,
                          response_text=TOK.decode(ids), reasoning=(reasoning or "").strip(), actions=["Up"],
                          reward=0.0))
    return Trajectory(env="grid", group_id=group_id, seed=seed, turns=turns, env_error=env_error)


def copy_batch(n_groups: int, group_size: int, n_turns: int = 1, *, first_state: Callable[[int], str] | None = None
               ) -> RolloutBatch:
    """Every turn's state is one distinct character (per group for the first turn, else unique) and its reasoning
    starts with that character: the reasoning identifies its input."""
    counter = iter(range(10_000))
    trajs = []
    for g in range(n_groups):
        start = first_state(g) if first_state else chr(0x4E00 + g)
        for _m in range(group_size):
            states = [start] + [chr(0x5E00 + next(counter)) for _ in range(n_turns - 1)]
            trajs.append(trajectory(g, states, [f"{s} is here, go on" for s in states], seed=g))
    return RolloutBatch(trajs)


class CopyScorer:
    """log p(token) = 0 when the continuation's first character is the current state character of the prompt (the
    character after its last ``State:``), else -10: the policy's reasoning copies an input-specific token."""

    tokenizer = TOK

    def __init__(self) -> None:
        self.calls: list[tuple[list[list[int]], list[list[int]]]] = []

    def score(self, prompts: list[list[int]], continuations: list[list[int]]) -> list[list[float]]:
        self.calls.append((prompts, continuations))
        out = []
        for p, c in zip(prompts, continuations):
            text = TOK.decode(p)
            key = text[text.rfind("State:\n") + len("State:\n")]
            hit = bool(c) and chr(c[0]) == key
            out.append([0.0 if hit else -10.0] * len(c))
        return out


class IgnoreScorer:
    """Log-probs that depend on the continuation only: the policy ignores its input."""

    tokenizer = TOK

    def score(self, prompts: list[list[int]], continuations: list[list[int]], batch_size: int = 16
              ) -> list[list[float]]:
        return [[-0.5 - (tok % 7) / 10 for tok in c] for c in continuations]


class HashScorer:
    """Deterministic pseudo-random log-probs depending on the prompt's tail and the continuation."""

    tokenizer = TOK

    def score(self, prompts: list[list[int]], continuations: list[list[int]], batch_size: int = 16
              ) -> list[list[float]]:
        out = []
        for p, c in zip(prompts, continuations):
            base = sum(p[-12:]) + 7 * len(p)
            out.append([-((base * 31 + tok * 17 + t * 13) % 53) / 10 - 0.01 for t, tok in enumerate(c)])
        return out


def random_context(seed: int) -> DiagnosticContext:
    """A random multi-turn batch: groups with shared first states, repeated and unique reasoning, turns without
    ``</think>`` or with blank reasoning, env errors, sometimes a state shared by two groups."""
    rng = random.Random(seed)
    trajs = []
    n_groups = rng.randint(1, 6)
    words = ["push", "box", "left", "goal", "wall", "up", "I", "think", "move"]
    for g in range(n_groups):
        first = chr(0x4E00 + (g if rng.random() > 0.2 else 0))
        for _m in range(rng.randint(1, 4)):
            n_turns = rng.randint(1, 3)
            states = [first] + [chr(0x5E00 + rng.randrange(50)) for _ in range(n_turns - 1)]
            reasonings: list[str | None] = []
            for s in states:
                kind = rng.random()
                if kind < 0.15:
                    reasonings.append(None)
                elif kind < 0.25:
                    reasonings.append("  ")
                elif kind < 0.45:
                    reasonings.append("I will move up")
                else:
                    reasonings.append(s + " " + " ".join(rng.choice(words) for _ in range(rng.randint(1, 6))))
            trajs.append(trajectory(g * 5 + 1, states, reasonings, seed=g,
                                    env_error="boom" if rng.random() < 0.05 else None))
    return DiagnosticContext(batch=RolloutBatch(trajs), step=seed, scorer=HashScorer())
