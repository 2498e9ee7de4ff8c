"""Registration of the grid-world envs (Sokoban, FrozenLake) and their named variants (RAGEN's tags).

This module is imported when plugins register, so it stays light: entry points are strings and nothing heavy
(numpy, gymnasium, the env modules) is imported until an env is made.

Envs and variants:

- ``sokoban``: 6x6 room, one box, 10 actions per trajectory (RAGEN's SimpleSokoban).
- ``sokoban_8x8_2box``: 8x8 room, two boxes, generated like RAGEN's LargerSokoban (search depth 10, so optimal
  solutions take at most about 10 moves). The action budget is 20 instead of RAGEN's 10, which leaves room to
  recover from a detour with two boxes; pass ``max_actions_per_traj=10`` for RAGEN's exact tag.
- ``sokoban_coord``, ``sokoban_grid_coord``: the state as coordinates, or coordinates and the grid.
- ``sokoban_symbols``: the grid in other symbols (RAGEN's SokobanDifferentGridVocab: ``W . G C B A @``).
- ``frozenlake``: random 4x4 lake, frozen probability 0.9, success rate 0.8 (slippery), 10 actions.
- ``frozenlake_det``: success rate 1.0 (not slippery, RAGEN's main experiment setting).
- ``frozenlake_coord``: the state as coordinates.
- ``frozenlake_3x3``: not slippery, 3x3 maps, four turns of one move (the embedded default's task: a multi-turn
  agent a CPU trains in minutes; the goal is at most 4 moves away on all but about 1 map in 500).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragen_core.registry import RolloutHints
from ragen_plugins_envs.registration_guides import GUIDES

if TYPE_CHECKING:
    from ragen_core.registry import EnvRegistry

__all__ = ["GRID_HINTS", "GRID_VARIANTS", "register_grid_envs"]

#: env or variant name -> how its rollouts are shaped (a variant's over its env's): the 10 actions of a trajectory
#: as 5 turns of up to 2 moves (RAGEN's setting), 10 turns for the 20 actions of the 8x8 room; an answer is two move
#: names (``Right || Down </answer>``), its reasoning a sentence
GRID_HINTS: dict[str, RolloutHints] = {
    "sokoban": RolloutHints(max_turn=5, max_actions_per_turn=2, answer_tokens=16, think_tokens=32),
    "sokoban_8x8_2box": RolloutHints(max_turn=10),
    "frozenlake": RolloutHints(max_turn=5, max_actions_per_turn=2, answer_tokens=16, think_tokens=32),
    "frozenlake_3x3": RolloutHints(max_turn=4, max_actions_per_turn=1),
}

#: variant name -> (base env, params, description)
GRID_VARIANTS: dict[str, tuple[str, dict[str, object], str]] = {
    "sokoban_8x8_2box": (
        "sokoban",
        {"dim_room": [8, 8], "num_boxes": 2, "search_depth": 10, "max_actions_per_traj": 20},
        "Sokoban, 8x8 room with 2 boxes (RAGEN's LargerSokoban generation), 20 actions per trajectory",
    ),
    "sokoban_coord": (
        "sokoban",
        {"render_mode": "coord"},
        "Sokoban, state given as coordinates of the player, boxes, targets and walls",
    ),
    "sokoban_grid_coord": (
        "sokoban",
        {"render_mode": "grid_coord"},
        "Sokoban, state given as coordinates followed by the grid",
    ),
    "sokoban_symbols": (
        "sokoban",
        {"symbols": {"wall": "W", "empty": ".", "target": "G", "box_on_target": "C", "box": "B", "player": "A",
                     "player_on_target": "@"}},
        "Sokoban with a different grid vocabulary (W wall, . empty, G target, B box, C box on target, A player)",
    ),
    "frozenlake_det": (
        "frozenlake",
        {"success_rate": 1.0},
        "FrozenLake without slipping (success_rate 1.0, RAGEN's main setting)",
    ),
    "frozenlake_coord": (
        "frozenlake",
        {"render_mode": "coord"},
        "FrozenLake, state given as coordinates of the player, goal and holes",
    ),
    "frozenlake_3x3": (
        "frozenlake",
        {"success_rate": 1.0, "size": 3},
        "FrozenLake without slipping on 3x3 maps, four turns of one move (the embedded default's task)",
    ),
}


def register_grid_envs(registry: EnvRegistry) -> None:
    """Register ``sokoban`` and ``frozenlake`` and their variants (see the module docstring) with ``registry``."""
    registry.register(
        "sokoban", "ragen_plugins_envs.sokoban:SokobanEnv",
        description="Sokoban: push every box onto a target; procedurally generated 6x6 room with 1 box (RAGEN)",
        hints=GRID_HINTS["sokoban"], guide=GUIDES["sokoban"],
    )
    registry.register(
        "frozenlake", "ragen_plugins_envs.frozenlake:FrozenLakeEnv",
        description="FrozenLake: reach the goal without falling into a hole; random 4x4 map, slippery (RAGEN)",
        hints=GRID_HINTS["frozenlake"], guide=GUIDES["frozenlake"],
    )
    for name, (env, params, description) in GRID_VARIANTS.items():
        registry.register_variant(name, env=env, params=params, description=description, hints=GRID_HINTS.get(name))
