"""A third-party plugin declaring rollout hints (for ``RAGEN_PLUGINS=tests.core.hints_plugin``).

``maze`` gives its hints at registration (nothing is imported), ``ladder`` through the env class's ``rollout_hints``
attribute, ``plain`` gives none; ``maze_long`` is a variant overriding one hint; the ``hinted`` trainer ships a preset
that sets rollout-shape keys and a run name, as an embedded default does.
"""

from __future__ import annotations

from typing import Any

from ragen_core import hookimpl
from ragen_core.registry import RolloutHints
from tests.core.toy import CounterEnv


class LadderEnv(CounterEnv):
    """The counter, declaring its hints on the class."""

    rollout_hints = RolloutHints(max_turn=7, max_actions_per_turn=3, answer_tokens=200, think=False)


@hookimpl
def ragen_register_envs(registry: Any) -> None:
    registry.register("maze", "tests.core.toy:CounterEnv", description="count, single turn",
                      hints=RolloutHints(max_turn=1, max_actions_per_turn=1, answer_tokens=8, think_tokens=32))
    registry.register("ladder", "tests.core.hints_plugin:LadderEnv", description="count, hints on the class")
    registry.register("plain", "tests.core.toy:CounterEnv", description="count, no hints")
    registry.register_variant("maze_long", env="maze", params={"target": 4}, hints={"max_turn": 4})


@hookimpl
def ragen_register_trainers(registry: Any) -> None:
    registry.register("hinted", "tests.core.toy:ToyTrainer", description="oracle rollouts, with a preset",
                      preset="tests.core:hints_preset.yaml")


__all__ = ["LadderEnv"]
