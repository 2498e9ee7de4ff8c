"""A test plugin (``RAGEN_PLUGINS=tests.eval.scripted_backend``): a scripted policy backend and two toy envs.

The ``scripted`` backend answers ``Inc`` with probability ``p_inc`` (else ``Dec``) from a random generator that
``seed(n)`` reseeds, in characters of :class:`~ragen_core.starpo.chat.TextTokenizer`; ``interrupt_after=N`` raises
``KeyboardInterrupt`` in its N-th ``generate`` call (an interrupted eval). Model ``missing`` does not exist.
"""

from __future__ import annotations

import random
from typing import Any

import attrs

from ragen_core import hookimpl
from ragen_core.errors import RagenError
from ragen_core.starpo.chat import TextTokenizer
from ragen_core.starpo.rollout import GenerationRequest, GenerationResult
from tests.core.toy import CounterEnv


@attrs.define
class ScriptedConfig:
    model: str = "scripted"
    p_inc: float = 0.6
    interrupt_after: int = 0


class ScriptedBackend:
    config_cls = ScriptedConfig
    token_unit = "char"

    def __init__(self, config: ScriptedConfig) -> None:
        if config.model.endswith("missing"):
            raise RagenError(f"scripted model {config.model!r} does not exist")
        self.config = config
        self.tokenizer = TextTokenizer()
        self.rng = random.Random(0)
        self.calls = 0

    def seed(self, n: int) -> None:
        self.rng = random.Random(n)

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        self.calls += 1
        if self.config.interrupt_after and self.calls >= self.config.interrupt_after:
            raise KeyboardInterrupt
        out = []
        for _req in requests:
            action = "Inc" if self.rng.random() < self.config.p_inc else "Dec"
            ids = tuple(self.tokenizer.encode(f"I count.</think><answer>{action}</answer>"))
            out.append(GenerationResult(token_ids=ids, logprobs=(0.0,) * len(ids)))
        return out


class FlakyCounter(CounterEnv):
    """A counter whose reset raises for odd seeds (env errors must be recorded, not crash the eval)."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        if seed is not None and seed % 2:
            raise RuntimeError(f"flaky reset for seed {seed}")
        return super().reset(seed=seed, options=options)


@hookimpl
def ragen_register_policies(registry: Any) -> None:
    registry.register("scripted", ScriptedBackend, schemes=("scripted",), description="scripted Inc/Dec answers")


@hookimpl
def ragen_register_envs(registry: Any) -> None:
    registry.register("eval_counter", CounterEnv, description="count to a target")
    registry.register_variant("eval_counter_far", env="eval_counter", params={"target": 4, "random_start": True})
    registry.register("eval_flaky", FlakyCounter, description="a counter whose reset fails on odd seeds")
