"""Rollout hints: an env's registration (or class) says how its rollouts are shaped; a config's own keys win.

Precedence, later wins: class defaults < trainer preset < env hints (and the run name from model and envs) < the
user's config file < ``key=value`` overrides.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_core.cli import build_cli
from ragen_core.config import (
    EnvChoice,
    RagenConfig,
    derived_run_name,
    explicit_keys,
    load_config,
    resolve_config,
    unstructure,
)
from ragen_core.errors import ConfigError, PluginError
from ragen_core.plugins import build_plugin_manager, collect_registries
from ragen_core.registry import DEFAULT_THINK_TOKENS, EnvRegistry, RolloutHints

PLUGINS = "tests.core.toy_plugin,tests.core.hints_plugin"
BASE = ["trainer=toy", "estimator=rtg", "filter=keep_top", "rollout.env_groups=2", "rollout.group_size=2"]


@pytest.fixture(autouse=True)
def _hints_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGEN_PLUGINS", PLUGINS)


def resolve(path: Any = None, overrides: list[str] = (), *, preset: Any = None) -> Any:
    config = load_config(path, [*BASE, *overrides], preset=preset)
    pm = build_plugin_manager(config)
    return resolve_config(config, collect_registries(pm), pm)


def shape(resolved: Any) -> tuple[int, int, int, bool]:
    ro = resolved.config.rollout
    return ro.max_turn, ro.max_actions_per_turn, ro.max_new_tokens, ro.think


def test_registration_hints_apply_when_the_config_sets_none() -> None:
    resolved = resolve(None, ["env=maze"])
    assert shape(resolved) == (1, 1, 40, True)  # think: no opinion, the default stays
    assert resolved.derived["rollout.max_turn"] == "hints of maze"
    assert "rollout.think" not in resolved.derived  # maze has no opinion on it


def test_hints_on_the_env_class_are_read_when_the_registration_gives_none() -> None:
    assert shape(resolve(None, ["env=ladder"])) == (7, 3, 200, False)


def test_an_env_without_hints_keeps_the_defaults() -> None:
    defaults = RagenConfig().rollout
    assert shape(resolve(None, ["env=plain"])) == (defaults.max_turn, defaults.max_actions_per_turn,
                                                   defaults.max_new_tokens, defaults.think)


def test_a_variant_overrides_its_base_key_by_key() -> None:
    assert shape(resolve(None, ["env=maze_long"])) == (4, 1, 40, True)


def test_the_users_overrides_and_file_win_over_hints(tmp_path: Path) -> None:
    # without thinking the budget is the answer's alone
    assert shape(resolve(None, ["env=maze", "rollout.max_turn=2", "rollout.think=false"])) == (2, 1, 8, False)
    assert shape(resolve(None, ["env=maze", "rollout={max_new_tokens: 64}"])) == (1, 1, 64, True)
    cfg = tmp_path / "mine.yaml"
    cfg.write_text("env: maze\nrollout:\n  max_actions_per_turn: 3\n")
    resolved = resolve(cfg)
    assert shape(resolved) == (1, 3, 40, True) and "rollout.max_actions_per_turn" not in resolved.derived
    # an explicit value equal to the class default is still the user's
    assert shape(resolve(None, ["env=maze", "rollout.max_turn=5"]))[0] == 5


def test_preset_values_are_defaults_that_hints_override(tmp_path: Path) -> None:
    preset = Path(__file__).with_name("hints_preset.yaml")
    resolved = resolve(None, [], preset=preset)
    assert shape(resolved) == (1, 1, 40, True)  # the preset's 3 / 2 / 24 give way to maze's hints
    assert resolved.config.rollout.temperature == 0.5  # keys no env hints keep the preset's value
    assert resolved.config.run.name == "maze"  # the preset's run name is a default too (the toy trainer: no model)
    assert shape(resolve(None, ["env=plain"], preset=preset)) == (3, 2, 24, True)  # no hints: the preset's values
    assert shape(resolve(None, ["rollout.max_new_tokens=30"], preset=preset))[2] == 30


def test_several_envs_get_the_values_that_fit_all() -> None:
    resolved = resolve(None, ["envs=[maze, ladder]"])
    assert shape(resolved)[:3] == (7, 3, 200)
    assert shape(resolved)[3] is False  # maze has no opinion on think: ladder's false is the only one stated
    # validation envs count too
    assert shape(resolve(None, ["env=maze", "val_envs=[maze_long]"]))[0] == 4


hint_strategy = st.builds(RolloutHints, max_turn=st.none() | st.integers(1, 50),
                          max_actions_per_turn=st.none() | st.integers(1, 9),
                          answer_tokens=st.none() | st.integers(1, 4096), think_tokens=st.none() | st.integers(1, 512),
                          think=st.none() | st.booleans())


@settings(max_examples=60, deadline=None)
@given(st.lists(hint_strategy, min_size=1, max_size=5), st.booleans())
def test_the_combined_hints_fit_every_env(hints: list[RolloutHints], think: bool) -> None:
    combined = RolloutHints.fitting_all(hints)
    for key in ("max_turn", "max_actions_per_turn", "answer_tokens"):
        stated = [getattr(h, key) for h in hints if getattr(h, key) is not None]
        assert getattr(combined, key) == (max(stated) if stated else None)
    budgets = [h.max_new_tokens(think) for h in hints if h.max_new_tokens(think) is not None]
    assert (combined.max_new_tokens(think) is None) == (not budgets)
    assert all(combined.max_new_tokens(think) >= b for b in budgets)  # every env's answers fit
    thinks = {h.think for h in hints if h.think is not None}
    assert combined.think == (next(iter(thinks)) if len(thinks) == 1 else None)
    assert RolloutHints.fitting_all(hints) == RolloutHints.fitting_all(list(reversed(hints)))  # order-free


def test_the_token_budget_is_the_answer_plus_the_reasoning_when_thinking() -> None:
    assert RolloutHints(answer_tokens=10, think_tokens=20).max_new_tokens(True) == 30
    assert RolloutHints(answer_tokens=10, think_tokens=20).max_new_tokens(False) == 10
    assert RolloutHints(answer_tokens=10).max_new_tokens(True) == 10 + DEFAULT_THINK_TOKENS
    assert RolloutHints(think_tokens=20).max_new_tokens(True) is None


def test_config_variants_can_declare_hints(tmp_path: Path) -> None:
    cfg = tmp_path / "v.yaml"
    cfg.write_text("variants:\n  quick_maze: {env: maze, hints: {answer_tokens: 16}}\nenv: quick_maze\n")
    assert shape(resolve(cfg)) == (1, 1, 16 + 32, True)
    cfg.write_text("variants:\n  quick_maze: {env: maze, hints: {max_tokens: 16}}\nenv: quick_maze\n")
    with pytest.raises(ConfigError, match="variants.quick_maze.hints: .*'max_tokens'"):
        resolve(cfg)


def test_bad_hints_are_refused_at_registration() -> None:
    reg = EnvRegistry()
    with reg.owned_by("mine"), pytest.raises(PluginError, match="plugin mine registered env 'x' .*max_turn"):
        reg.register("x", "m:X", hints={"max_turn": 0})
    with reg.owned_by("mine"), pytest.raises(PluginError, match="plugin mine registered env variant 'y' .*'turns'"):
        reg.register_variant("y", env="x", hints={"turns": 2})
    with pytest.raises(TypeError, match="think"):
        RolloutHints(think="yes")


def test_registration_hints_import_nothing() -> None:
    reg = EnvRegistry()
    sys.modules.pop("tests.core.never_imported_env", None)
    reg.register("lazy", "tests.core.never_imported_env:Env", hints=RolloutHints(max_turn=2))
    assert reg.hints("lazy").max_turn == 2
    assert "tests.core.never_imported_env" not in sys.modules


def test_a_config_built_in_code_is_taken_as_it_is() -> None:
    """A RagenConfig not made by load_config has no record of what was chosen: nothing is replaced."""
    pm = build_plugin_manager()
    config = load_config(None, ["env=maze", *BASE])
    config.explicit = None
    resolved = resolve_config(config, collect_registries(pm), pm)
    assert shape(resolved) == (5, 2, 128, True) and resolved.config.run.name == "ragen" and not resolved.derived


def test_resolving_leaves_the_input_config_alone_and_is_stable() -> None:
    config = load_config(None, ["env=maze", *BASE])
    pm = build_plugin_manager(config)
    registries = collect_registries(pm)
    first = resolve_config(config, registries, pm)
    assert config.rollout.max_turn == 5 and first.config.rollout.max_turn == 1
    assert first.config.explicit == config.explicit  # kept through the copy
    again = resolve_config(first.config, registries, pm)
    assert again.to_data() == first.to_data()


def test_explicit_keys_is_not_a_config_key() -> None:
    config = load_config(None, ["env=maze", "rollout.max_turn=2"])
    assert "explicit" not in unstructure(config)
    with pytest.raises(ConfigError, match="unknown config key 'explicit'"):
        load_config(None, ["explicit=[a]"])
    assert explicit_keys(None, ["env.options.target=2", "rollout={max_turn: 2}"]) >= {
        "envs.0.options.target", "rollout.max_turn"}
    assert explicit_keys(None, ["env=maze"]) == {"envs"}


# ------------------------------------------------------------------------------------------------- run name

def test_the_run_is_named_after_the_model_and_envs() -> None:
    def name(envs: list[str], model: Any = None) -> str:
        config = load_config(None, [f"envs={json.dumps(envs)}"] + ([f"trainer.model={model}"] if model else []))
        return derived_run_name(config)

    assert name(["bandit"], "tiny") == "tiny-bandit"
    assert name(["sokoban", "bandit"], "tiny") == "tiny-sokoban-bandit"
    assert name(["a", "b", "c", "d"], "tiny") == "tiny-multi"
    assert name(["bandit", "bandit"], "tiny") == "tiny-bandit"
    assert name(["bandit"], "HuggingFaceTB/SmolLM2-135M-Instruct") == "SmolLM2-135M-Instruct-bandit"
    assert name(["bandit"], "/runs/x/checkpoints/step_10/actor/") == "actor-bandit"
    assert name(["bandit"]) == "bandit"


@settings(max_examples=80, deadline=None)
@given(model=st.text(max_size=40), env=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,20}", fullmatch=True))
def test_the_derived_run_name_is_one_safe_path_component(model: str, env: str) -> None:
    config = RagenConfig()
    config = attrs.evolve(config, envs=[EnvChoice(name=env)],
                          trainer=attrs.evolve(config.trainer, options={"model": model}))
    name = derived_run_name(config)
    assert name and len(name) <= 80 and name not in (".", "..")
    assert all(c.isascii() and (c.isalnum() or c in "_.-") for c in name), name


def test_the_run_name_comes_from_the_env_unless_the_user_sets_it() -> None:
    assert resolve(None, ["env=maze_long"]).config.run.name == "maze_long"
    assert resolve(None, ["env=maze", "run.name=mine"]).config.run.name == "mine"


# ------------------------------------------------------------------------------------------------- commands

def invoke(*args: str) -> Any:
    return CliRunner().invoke(build_cli(build_plugin_manager()), list(args))


def test_config_show_shows_the_hinted_values_and_says_where_they_came_from() -> None:
    res = invoke("config", "show", "env=maze", *BASE)
    assert res.exit_code == 0, res.output
    data = yaml.safe_load(res.output)
    assert (data["rollout"]["max_turn"], data["rollout"]["max_new_tokens"], data["run"]["name"]) == (1, 40, "maze")
    assert "# rollout.max_turn: from hints of maze (not set in the config)" in res.output


def test_train_uses_what_config_show_shows(tmp_path: Path) -> None:
    args = ["env=maze_long", *BASE, "rollout.max_new_tokens=33"]
    shown = yaml.safe_load(invoke("config", "show", *args).output)
    res = invoke("train", *args, "--run-dir", str(tmp_path / "t"))
    assert res.exit_code == 0, res.output
    used = yaml.safe_load((tmp_path / "t" / "config.yaml").read_text())
    assert used["rollout"] == shown["rollout"] and used["run"] == shown["run"]
    assert (used["rollout"]["max_turn"], used["rollout"]["max_new_tokens"]) == (4, 33)


def test_train_with_the_embedded_preset_follows_the_env(tmp_path: Path) -> None:
    res = invoke("train", "trainer=hinted", "env=ladder", "--run-dir", str(tmp_path / "t"))
    assert res.exit_code == 0, res.output
    used = yaml.safe_load((tmp_path / "t" / "config.yaml").read_text())
    assert (used["rollout"]["max_turn"], used["rollout"]["max_actions_per_turn"],
            used["rollout"]["max_new_tokens"], used["rollout"]["think"]) == (7, 3, 200, False)
    assert used["rollout"]["temperature"] == 0.5 and used["run"]["name"] == "ladder"
    # the saved config is all explicit: resuming or evaluating it reproduces the same shape
    again = resolve(tmp_path / "t" / "config.yaml", ["env=plain"])
    assert shape(again) == (7, 3, 200, False)
