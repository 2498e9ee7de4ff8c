"""The plugin module named by the entry point (group ``ragen``, name ``gymnasium``): registration only.

Nothing is imported here beyond the hook marker: the env class, gymnasium's registry and the listing of the ``gym``
namespace load when an env is made or the names are listed. ``ragen_check_config`` makes each gymnasium env of a
run's config once, so an unplayable id fails before the run.
"""

from __future__ import annotations

from typing import Any

from ragen_core import hookimpl

#: the env class, loaded when an env is made
ENTRY_POINT = "ragen_plugins_gymnasium.env:GymnasiumEnv"

#: the catalogue entry of ``ragen envs --long``
GUIDE = {
    "rules": "Any registered gymnasium env with a Discrete action space, chosen by `id` (or the name `gym.<id>`): "
             "the toy-text games FrozenLake, Taxi, CliffWalking and Blackjack, or an env of another package. The "
             "model sees the observation when it is text, else the env's 'ansi' render (colours turned into "
             "symbols and notes, the grid kept), else integer observations as text.",
    "actions": "an action's name (case-insensitive: FrozenLake's Left, Down, Right, Up; Taxi's South, North, East, "
               "West, Pickup, Dropoff; CliffWalking's Up, Right, Down, Left; Blackjack's Stick, Hit; else the "
               "numbers) or its number; anything else is invalid and changes nothing.",
    "rewards": "gymnasium's own rewards; an invalid action gets `invalid_action_reward` (0).",
    "success": "by `success`: the episode terminated on a positive reward (the default; CliffWalking: it "
               "terminated), or gymnasium's info['is_success'].",
}


@hookimpl
def ragen_register_envs(registry: Any) -> None:
    """Register the ``gymnasium`` env and the namespace ``gym``: ``gym.<id>`` is ``gymnasium`` with ``id=<id>``."""
    registry.register("gymnasium", ENTRY_POINT,
                      config="ragen_plugins_gymnasium.env:GymnasiumConfig",
                      description="any gymnasium env with text, 'ansi' or integer observations and Discrete actions "
                                  "(option id; default FrozenLake-v1)",
                      hints={"max_turn": 6, "max_actions_per_turn": 2, "answer_tokens": 16, "think_tokens": 32},
                      guide=GUIDE)
    registry.register_namespace("gym", env="gymnasium", option="id", names="ragen_plugins_gymnasium.listing:runnable_ids",
                                description="gymnasium ids: gym.FrozenLake-v1, gym.Taxi-v4, gym.CliffWalking-v1, "
                                            "gym.Blackjack-v1, ...")


@hookimpl
def ragen_check_config(config: Any, registries: Any) -> list[str]:
    """Make every gymnasium env of the run once (training and validation plans), so an id the adapter cannot play
    (CartPole's float observations, a missing optional package) or a bad ``kwargs`` fails before the run starts
    instead of costing every episode. Only a bad ``id`` is caught by option validation alone."""
    problems: list[str] = []
    seen: list[tuple[str, dict[str, Any]]] = []
    for name, _groups, options in [*config.env_plan, *config.val_env_plan]:
        if (name, options) in seen:
            continue
        seen.append((name, options))
        spec, _params, _instruction = registries.envs.resolve(name)
        if spec.entry_point != ENTRY_POINT:
            continue
        try:
            registries.envs.make(name, options).close()
        except Exception as exc:  # noqa: BLE001 - reported as the config's problem, whatever failed
            problems.append(f"env {name}: {getattr(exc, 'message', None) or f'{type(exc).__name__}: {exc}'}")
    return problems
