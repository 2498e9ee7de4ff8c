"""The plugin module named by the ``ragen`` entry point: registration only, nothing of TextArena is imported.

It registers the env ``textarena`` (option ``game``: a TextArena env id) and the env namespace ``ta``:
``ta.TowerOfHanoi-v0`` is ``textarena`` with ``game="TowerOfHanoi-v0"``, and
``ragen envs --members ta`` lists the shipped games (:func:`ragen_plugins_textarena.games.names`).
"""

from __future__ import annotations

from typing import Any

from ragen_core import hookimpl
from ragen_core.registry import RolloutHints

__all__ = ["GUIDE", "HINTS", "ragen_register_envs"]

#: the catalogue entry of ``textarena`` (``ragen envs --long``)
GUIDE = {
    "rules": "A TextArena game (option `game`, e.g. TowerOfHanoi-v0 or TicTacToe-v0; names `ta.<game id>`): the "
             "agent is player 0; in a two-player game an opponent (option `opponent`: scripted `random` or `first`, "
             "or an `llm` endpoint) plays player 1 after each agent move. The first observation holds the game's "
             "rules and move format; each observation is what TextArena shows player 0.",
    "actions": "free text in the game's move format (most ids add missing square brackets). A move TextArena "
               "rejects is invalid: it is undone and may be retried (TextArena's `error_allowance`, usually one; a "
               "second invalid move in a row loses the game).",
    "rewards": "TextArena's reward for player 0 when the game ends (two players: +1 win, -1 loss, 0 draw; one "
               "player: 1 solved, often partial credit otherwise); 0 on other steps; `invalid_reward` (0) for a "
               "retried invalid move; 0 when `max_turns` cuts the episode.",
    "success": "the game ended with the agent winning: above the opponent's reward, or a single-player reward of "
               "at least 1.",
}

#: rollout shape: one move per turn (an opponent replies after each), short answers
HINTS = RolloutHints(max_turn=10, max_actions_per_turn=1, answer_tokens=32)


@hookimpl
def ragen_register_envs(registry: Any) -> None:
    """Register ``textarena`` and the ``ta`` namespace."""
    registry.register("textarena", "ragen_plugins_textarena.env:TextArenaEnv",
                      config="ragen_plugins_textarena.env:TextArenaConfig",
                      description="TextArena's offline single- and two-player games (option game; names ta.<id>)",
                      hints=HINTS, guide=GUIDE)
    registry.register_namespace("ta", env="textarena", option="game", names="ragen_plugins_textarena.games:names",
                                description="TextArena games (the agent is player 0)")
