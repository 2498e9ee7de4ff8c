"""The embedded default and the documented example configs resolve to the runs their comments and docs describe (the
figures are bench/learning.py's; these tests pin the settings those figures were measured with)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragen_core.config import load_config, resolve_config
from ragen_core.plugins import build_plugin_manager, collect_registries

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.fixture(scope="module")
def registries() -> Any:
    return collect_registries(build_plugin_manager())


def test_the_embedded_default_is_the_multi_turn_lake(registries: Any) -> None:
    preset = registries.trainers.get("torch").preset_path()
    resolved = resolve_config(load_config(None, [], preset=preset), registries, strict=True)
    cfg, tc, ro = resolved.config, resolved.trainer, resolved.config.rollout
    assert [e.name for e in cfg.envs] == ["frozenlake_3x3"] and cfg.run.name == "tiny-frozenlake_3x3"
    assert (ro.max_turn, ro.max_actions_per_turn, ro.max_new_tokens, ro.think) == (4, 1, 16, False)
    assert (ro.context_mode, ro.window, ro.env_groups, ro.group_size) == ("limited_multi_turn", 1, 16, 8)
    assert cfg.estimator.name == "gigpo" and cfg.estimator.options == {"norm_by_std": False}
    assert (tc.model, tc.steps, tc.actor_lr, tc.lr_warmup_steps, tc.old_logprobs) == ("tiny", 80, 5e-4, 10, "rollout")
    assert (tc.dynamics_steps, tc.dynamics_seed, tc.warm_start_steps, tc.turn_weight) == (1000, 1, 400, "episode")


def test_env_overrides_on_the_default_take_the_envs_shape(registries: Any) -> None:
    preset = registries.trainers.get("torch").preset_path()
    ro = resolve_config(load_config(None, ["env=bandit"], preset=preset), registries, strict=True).config.rollout
    assert (ro.max_turn, ro.max_actions_per_turn) == (1, 1)  # so the trainer skips the dynamics stage


def test_the_bandit_example_is_the_single_turn_recipe(registries: Any) -> None:
    resolved = resolve_config(load_config(str(EXAMPLES / "bandit.yaml"), []), registries, strict=True)
    cfg, tc, ro = resolved.config, resolved.trainer, resolved.config.rollout
    assert [e.name for e in cfg.envs] == ["bandit"] and cfg.run.name == "tiny-bandit"
    assert (ro.max_turn, ro.max_actions_per_turn, ro.think) == (1, 1, False)
    assert cfg.estimator.name == "drgrpo" and (tc.actor_lr, tc.warm_start_steps, tc.dynamics_steps) == (2e-4, 400, 0)
