"""The random baseline a trained policy must beat (``ragen_core.starpo.rollout.random_baseline``), and scripted policies in
both thinking modes."""

from __future__ import annotations

import pytest

from ragen_core.config import load_config, resolve_config
from ragen_core.plugins import build_plugin_manager, collect_registries
from ragen_core.starpo.chat import ChatCodec, TextTokenizer
from ragen_core.starpo.rollout import ScriptedPolicy, make_episodes, random_baseline, run_lockstep


def resolved(*overrides: str):
    config = load_config(None, list(overrides))
    pm = build_plugin_manager(config)
    registries = collect_registries(pm)
    return resolve_config(config, registries, pm), registries


@pytest.mark.parametrize("think", [True, False])
def test_scripted_answers_parse_in_both_thinking_modes(think: bool) -> None:
    res, registries = resolved("env=frozenlake_det", "rollout.env_groups=3", f"rollout.think={str(think).lower()}")
    r = res.config.rollout
    episodes = make_episodes(registries.envs, res.env_plan, seeds=[1, 2, 3], group_size=2, config=r,
                             codec=ChatCodec(TextTokenizer(), think=think))
    batch = run_lockstep(episodes, ScriptedPolicy.for_episodes(episodes, "oracle"))
    turns = [t for traj in batch.trajectories for t in traj.turns]
    assert turns and all(t.format_penalty == 0.0 and t.actions for t in turns)
    assert all(traj.success for traj in batch.trajectories)  # the oracle solves deterministic FrozenLake


def test_bandit_random_baseline_is_a_coin_flip_and_reproducible() -> None:
    res, registries = resolved("env=bandit", "rollout.think=false")
    r = res.config.rollout
    seeds = [r.seed_val + i for i in range(32)]
    value = random_baseline(registries.envs, res.val_env_plan, seeds, 4, r)
    assert 0.4 <= value <= 0.6  # 512 pulls of one arm of two: the high-risk arm half the time
    assert random_baseline(registries.envs, res.val_env_plan, seeds, 4, r) == value


def test_random_baseline_of_frozenlake_is_far_below_the_oracle() -> None:
    res, registries = resolved("env=frozenlake_det")
    r = res.config.rollout
    value = random_baseline(registries.envs, res.val_env_plan, list(range(100, 132)), 4, r)
    assert 0.0 < value < 0.5
