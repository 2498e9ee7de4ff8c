"""The built-in envs' rollout hints: every env and variant declares its shape, `env=X` on the embedded preset runs
X's shape under X's name, and declaring hints imports no env module."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from ragen_core.config import load_config, resolve_config
from ragen_core.plugins import build_plugin_manager, collect_registries


@pytest.fixture(scope="module")
def registries() -> Any:
    return collect_registries(build_plugin_manager())


def test_every_builtin_env_and_variant_declares_its_rollout_shape(registries: Any) -> None:
    for name in registries.envs.names():
        hints = registries.envs.hints(name)
        assert hints.max_turn and hints.max_actions_per_turn and hints.answer_tokens, name
        assert hints.max_new_tokens(True) > hints.max_new_tokens(False) >= 8, name
    bandit = registries.envs.hints("bandit")
    assert (bandit.max_turn, bandit.max_actions_per_turn) == (1, 1)
    assert registries.envs.hints("bandit_test") == bandit
    for single in ("countdown", "countdown_3", "metamathqa", "deepcoder"):
        assert registries.envs.hints(single).max_turn == 1
    assert registries.envs.hints("sokoban").max_turn > 1 and registries.envs.hints("frozenlake").max_turn > 1
    assert registries.envs.hints("sokoban_8x8_2box").max_turn == 10  # its 20 actions, 2 a turn


@pytest.mark.parametrize("name", [n for n in collect_registries(build_plugin_manager()).envs.names()
                                  if n != "searchqa_dense"])  # making it embeds the corpus with a MiniLM model
def test_no_hint_asks_for_more_than_the_env_allows(registries: Any, name: str) -> None:
    hints, env = registries.envs.hints(name), registries.envs.make(name)
    assert hints.max_actions_per_turn <= env.max_actions_per_traj, name
    assert hints.max_turn <= env.max_actions_per_traj, name  # a turn without an action left is never played


@pytest.mark.parametrize("env", ["bandit", "sokoban", "countdown", "webshop", "sokoban_8x8_2box"])
def test_train_on_the_embedded_preset_follows_the_env(registries: Any, env: str) -> None:
    """What ``ragen train env=X`` resolves (the torch trainer's preset as defaults, then the override), whatever
    the preset says about the rollout shape or the run name."""
    preset = registries.trainers.get("torch").preset_path()
    config = load_config(None, [f"env={env}"], preset=preset)
    resolved = resolve_config(config, registries, strict=False)
    ro, hints = resolved.config.rollout, registries.envs.hints(env)
    assert (ro.max_turn, ro.max_actions_per_turn) == (hints.max_turn, hints.max_actions_per_turn)
    assert ro.max_new_tokens == hints.max_new_tokens(ro.think)
    assert resolved.config.run.name == f"{resolved.trainer.model}-{env}"
    mine = resolve_config(load_config(None, [f"env={env}", "rollout.max_turn=2", "run.name=mine"], preset=preset),
                          registries, strict=False).config
    assert mine.rollout.max_turn == 2 and mine.run.name == "mine"


def test_a_mix_of_builtin_envs_gets_the_shape_that_fits_all(registries: Any) -> None:
    config = load_config(None, ["envs=[bandit, sokoban]", "rollout.think=true"])
    ro = resolve_config(config, registries, strict=False).config.rollout
    bandit, sokoban = registries.envs.hints("bandit"), registries.envs.hints("sokoban")
    assert ro.max_turn == max(bandit.max_turn, sokoban.max_turn)
    assert ro.max_actions_per_turn == max(bandit.max_actions_per_turn, sokoban.max_actions_per_turn)
    assert ro.max_new_tokens >= max(bandit.max_new_tokens(True), sokoban.max_new_tokens(True))


def test_hints_are_read_without_importing_any_env_module() -> None:
    code = (
        "import sys\n"
        "from ragen_core.plugins import build_plugin_manager, collect_registries\n"
        "r = collect_registries(build_plugin_manager())\n"
        "[r.envs.hints(n) for n in r.envs.names()]\n"
        "print(sorted(m for m in sys.modules if m.startswith('ragen_plugins_envs.')"
        " and not m.startswith('ragen_plugins_envs.registration')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
