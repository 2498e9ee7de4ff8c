"""Config: YAML + typed overrides, strict validation with key paths and suggestions, component resolution."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragen_core import hookimpl
from ragen_core.config import (
    RagenConfig,
    apply_overrides,
    load_config,
    parse_override,
    resolve_config,
    structure,
    unstructure,
)
from ragen_core.errors import ConfigError
from ragen_core.plugins import build_plugin_manager, collect_registries
from tests.core.toy import ToyPlugin, toy_config_overrides


@pytest.fixture
def toy() -> tuple[Any, Any]:
    pm = build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1"}, plugins=[ToyPlugin()])
    return pm, collect_registries(pm)


def test_defaults_are_ragens() -> None:
    cfg = load_config()
    assert (cfg.rollout.env_groups, cfg.rollout.group_size, cfg.rollout.max_turn) == (8, 16, 5)
    assert cfg.rollout.max_actions_per_turn == 2 and cfg.rollout.action_sep == "||"
    assert cfg.rollout.seed_val == 123
    assert cfg.filter.name == ""  # the core names no component: resolution takes the installed default


@pytest.mark.parametrize(("text", "keys", "value"), [
    ("rollout.group_size=8", ["rollout", "group_size"], 8),
    ("a.b=0.5", ["a", "b"], 0.5),
    ("x=true", ["x"], True),
    ("x=null", ["x"], None),
    ("x=[1, 2]", ["x"], [1, 2]),
    ("x={a: 1}", ["x"], {"a": 1}),
    ("x=hello world", ["x"], "hello world"),
    ("x=", ["x"], ""),
    ("x=a=b", ["x"], "a=b"),
    ("x=[unclosed", ["x"], "[unclosed"),
])
def test_parse_override(text: str, keys: list[str], value: Any) -> None:
    assert parse_override(text) == (keys, value)


@pytest.mark.parametrize("bad", ["novalue", "=3", "a..b=1", ".a=1"])
def test_bad_override_syntax(bad: str) -> None:
    with pytest.raises(ConfigError, match="bad override"):
        parse_override(bad)


@given(st.one_of(st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.booleans(),
                 st.lists(st.integers(), max_size=5)))
def test_override_values_round_trip_through_yaml(value: Any) -> None:
    import yaml

    text = "k=" + yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
    assert parse_override(text)[1] == value


def test_unknown_key_suggests_nearest() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(overrides=["rollout.group_sze=4"])
    assert "rollout.group_sze" in str(err.value) and "did you mean 'rollout.group_size'" in str(err.value)
    with pytest.raises(ConfigError, match="did you mean 'rollout'"):
        load_config(overrides=["rolout.group_size=4"])


@pytest.mark.parametrize(("override", "needle"), [
    ("rollout.group_size=abc", "rollout.group_size: expected an integer, got str 'abc'"),
    ("rollout.group_size=1.5", "expected an integer"),
    ("rollout.group_size=true", "expected an integer, got bool"),
    ("rollout.group_size=0", "rollout.group_size: must be an integer in [1, 4096]: 0"),
    ("run.log_format=xml", "run.log_format: 'xml' is not one of"),
    ("plugins.disable=envs", "plugins.disable: expected a list"),
    ("plugins.trace=1", "expected true or false"),
])
def test_wrong_types_and_ranges_name_the_path(override: str, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(overrides=[override])
    assert needle in str(err.value)


def test_yaml_file_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("run: {name: exp1}\nrollout:\n  group_size: 4\nfilter: {name: top_p, value: 0.9}\n")
    cfg = load_config(path, ["rollout.group_size=2", "filter.value=0.5"])
    assert cfg.run.name == "exp1" and cfg.rollout.group_size == 2 and cfg.rollout.env_groups == 8
    assert cfg.filter.name == "top_p" and cfg.filter.options == {"value": 0.5}
    cfg = load_config(path, ["filter=none"])
    assert cfg.filter.name == "none" and cfg.filter.options == {}


def test_config_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("run: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    bad.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping at the top level"):
        load_config(bad)


def test_env_shorthands() -> None:
    assert [e.name for e in load_config(overrides=["env=frozenlake"]).envs] == ["frozenlake"]
    cfg = load_config(overrides=["env=counter", "env.options={target: 4}"])
    assert cfg.envs[0].options == {"target": 4}
    cfg = load_config(overrides=["envs=[{name: a, groups: 6}, b]"])
    assert [(e.name, e.groups) for e in cfg.envs] == [("a", 6), ("b", None)]
    cfg = load_config(overrides=["envs=[a, b]", "envs.1.groups=3"])
    assert cfg.envs[1].groups == 3
    with pytest.raises(ConfigError, match="not a valid list index"):
        load_config(overrides=["envs=[a]", "envs.5.groups=3"])


def test_component_options_validated_by_the_plugins_class(toy: tuple[Any, Any]) -> None:
    pm, regs = toy
    cfg = load_config(overrides=[*toy_config_overrides(), "filter.k=3"])
    resolved = resolve_config(cfg, regs, pm)
    assert resolved.filter.k == 3 and resolved.trainer.steps == 2
    with pytest.raises(ConfigError) as err:
        resolve_config(load_config(overrides=[*toy_config_overrides(), "filter.kk=3"]), regs, pm)
    assert "unknown config key 'filter.kk'" in str(err.value) and "did you mean 'filter.k'" in str(err.value)
    with pytest.raises(ConfigError, match="filter.k: must be >= 1: 0"):
        resolve_config(load_config(overrides=[*toy_config_overrides(), "filter.k=0"]), regs, pm)
    with pytest.raises(ConfigError, match=r"envs\[0\].options.target: expected an integer"):
        resolve_config(load_config(overrides=[*toy_config_overrides(), "env.options.target=x"]), regs, pm)


def test_unknown_component_suggests_and_lists(toy: tuple[Any, Any]) -> None:
    pm, regs = toy
    with pytest.raises(ConfigError) as err:
        resolve_config(load_config(overrides=[*toy_config_overrides(), "filter=keep_tpo"]), regs, pm)
    assert "unknown filter 'keep_tpo'; did you mean 'keep_top'?" in str(err.value)
    assert "known filters: keep_top" in str(err.value)
    with pytest.raises(ConfigError, match="unknown env 'countr'; did you mean 'counter'"):
        resolve_config(load_config(overrides=[*toy_config_overrides(), "env=countr"]), regs, pm)


def test_lenient_resolution_reports_missing_components(toy: tuple[Any, Any]) -> None:
    pm, regs = toy
    resolved = resolve_config(load_config(overrides=["env=counter", "trainer=nope"]), regs, pm, strict=False)
    assert any("unknown trainer 'nope'" in p for p in resolved.problems)
    data = resolved.to_data()
    assert data["trainer"] == {"name": "nope"} and data["filter"] == {"name": ""}  # the toy filter is not offered
    assert any(p.startswith("filter: the config names no filter") for p in resolved.problems)


def test_env_group_plan(toy: tuple[Any, Any]) -> None:
    pm, regs = toy
    cfg = load_config(overrides=[*toy_config_overrides(), "rollout.env_groups=5",
                                 "envs=[{name: counter, groups: 2}, counter5, counter]"])
    plan = resolve_config(cfg, regs, pm).env_plan
    assert [(n, g) for n, g, _ in plan] == [("counter", 2), ("counter5", 2), ("counter", 1)]
    with pytest.raises(ConfigError, match="do not add up to rollout.env_groups=2"):
        resolve_config(load_config(overrides=[*toy_config_overrides(), "envs=[{name: counter, groups: 3}]"]), regs, pm)


def test_variants_declared_in_config(toy: tuple[Any, Any], tmp_path: Path) -> None:
    pm, regs = toy
    path = tmp_path / "c.yaml"
    path.write_text("variants:\n  far:\n    env: counter5\n    params: {target: 7}\n    instruction: Go far.\n"
                    "env: far\n")
    resolved = resolve_config(load_config(path, toy_config_overrides()[1:]), regs, pm)
    assert resolved.env_plan[0][0] == "far"
    env = regs.envs.make("far")
    assert env.config.target == 7 and env.config.max_actions == 8 and env.instruction == "Go far."
    path.write_text("variants:\n  far:\n    env: counter\n    parmas: {}\n")
    with pytest.raises(ConfigError, match="did you mean 'variants.far.params'"):
        resolve_config(load_config(path, toy_config_overrides()), regs, pm)


@pytest.mark.parametrize(("yaml", "key", "hint"), [
    # a typo in a config variant's params is named where it was written, not under the env's resolved options
    ("variants: {far: {env: counter, params: {targt: 7}}}\nenvs: [{name: far}]\n",
     "variants.far.params.targt", "did you mean 'variants.far.params.target'?"),
    # ... in the variant the used one derives from, too
    ("variants: {far: {env: counter, params: {targt: 7}}, farther: {env: far, params: {max_actions: 9}}}\n"
     "envs: [{name: farther}]\n", "variants.far.params.targt", "did you mean 'variants.far.params.target'?"),
    # a typo in the env's own options stays under envs[i].options, variant or not
    ("variants: {far: {env: counter, params: {target: 7}}}\nenvs: [{name: far, options: {max_actoins: 3}}]\n",
     "envs[0].options.max_actoins", "did you mean 'envs[0].options.max_actions'?"),
    ("envs: [{name: counter, options: {targt: 7}}]\n", "envs[0].options.targt",
     "did you mean 'envs[0].options.target'?"),
    # a plugin's variant (counter5) is not the user's text: the user's options are
    ("envs: [{name: counter5, options: {targt: 7}}]\n", "envs[0].options.targt", "'envs[0].options.target'"),
    # options written flat beside 'env' belong under params
    ("variants: {far: {env: counter, targt: 7}}\nenvs: [{name: far}]\n", "variants.far.targt",
     "the env's options go under 'variants.far.params'"),
], ids=["variant", "base-variant", "options-over-variant", "options", "plugin-variant", "flat-variant-option"])
def test_env_option_errors_name_the_key_the_user_wrote(toy: tuple[Any, Any], tmp_path: Path, yaml: str, key: str,
                                                        hint: str) -> None:
    pm, regs = toy
    path = tmp_path / "c.yaml"
    path.write_text(yaml)
    with pytest.raises(ConfigError) as err:
        resolve_config(load_config(path, [o for o in toy_config_overrides() if not o.startswith("env=")]), regs, pm)
    assert err.value.message == f"unknown config key {key!r}" and hint in (err.value.hint or "")


def test_a_bad_variant_value_is_named_under_the_variant(toy: tuple[Any, Any], tmp_path: Path) -> None:
    pm, regs = toy
    path = tmp_path / "c.yaml"
    path.write_text("variants: {far: {env: counter, params: {target: many}}}\nenvs: [{name: far}]\n")
    with pytest.raises(ConfigError, match=r"^variants\.far\.params\.target: expected an integer"):
        resolve_config(load_config(path, [o for o in toy_config_overrides() if not o.startswith("env=")]), regs, pm)


def test_cross_field_checks_from_plugins(toy: tuple[Any, Any]) -> None:
    pm, regs = toy

    class Checker:
        @hookimpl
        def ragen_check_config(self, config: Any, registries: Any) -> list[str]:
            if config.config.rollout.group_size < 2 and config.estimator is not None:
                return ["estimator 'rtg' needs rollout.group_size >= 2"]
            return []

    pm.register(Checker())
    resolve_config(load_config(overrides=toy_config_overrides()), regs, pm)
    with pytest.raises(ConfigError, match="needs rollout.group_size >= 2"):
        resolve_config(load_config(overrides=[*toy_config_overrides(), "rollout.group_size=1"]), regs, pm)


@attrs.define
class Inner:
    x: int = 0

@attrs.define
class Outer:
    a: float = 0.0
    b: tuple[int, int] = (1, 2)
    c: tuple[str, ...] = ()
    d: dict[str, Inner] = attrs.field(factory=dict)
    e: int | None = None
    f: Literal["x", "y"] = "x"
    g: list[Inner] = attrs.field(factory=list)



def test_structure_supports_the_documented_types() -> None:
    got = structure(Outer, {"a": 1, "b": [3, 4], "c": ["p"], "d": {"k": {"x": 2}}, "e": None, "f": "y",
                            "g": [{"x": 5}]})
    assert got == Outer(1.0, (3, 4), ("p",), {"k": Inner(2)}, None, "y", [Inner(5)])
    assert unstructure(got)["d"] == {"k": {"x": 2}}
    with pytest.raises(ConfigError, match=r"o.b: expected 2 items"):
        structure(Outer, {"b": [1]}, "o")
    with pytest.raises(ConfigError, match=r"o.g\[0\].x: expected an integer"):
        structure(Outer, {"g": [{"x": "no"}]}, "o")
    with pytest.raises(ConfigError, match=r"did you mean 'o.d.k.x'"):
        structure(Outer, {"d": {"k": {"xx": 1}}}, "o")


def test_overrides_do_not_mutate_input() -> None:
    data = {"a": {"b": 1}}
    out = apply_overrides(data, ["a.b=2", "a.c.d=3"])
    assert data == {"a": {"b": 1}} and out == {"a": {"b": 2, "c": {"d": 3}}}


def test_resolved_config_round_trips(toy: tuple[Any, Any], tmp_path: Path) -> None:
    import yaml

    pm, regs = toy
    resolved = resolve_config(load_config(overrides=toy_config_overrides()), regs, pm)
    path = tmp_path / "resolved.yaml"
    path.write_text(yaml.safe_dump(resolved.to_data()))
    again = resolve_config(load_config(path), regs, pm)
    assert again.to_data() == resolved.to_data()
    assert isinstance(load_config(path), RagenConfig)


@pytest.mark.parametrize(("raw", "want"), [("1e-6", 1e-6), ("1.5e3", 1500.0), ("-2E-3", -2e-3), (".5e1", 5.0),
                                           ("12", 12), ("1e", "1e"), ("1e-6x", "1e-6x"), ("[1e-3, 2]", [1e-3, 2])])
def test_scientific_notation_is_a_number_in_overrides_and_files(tmp_path, raw, want) -> None:
    from ragen_core.overrides import load_yaml

    assert parse_override(f"trainer.actor_lr={raw}")[1] == want
    assert load_yaml(f"x: {raw}\n") == {"x": want}


def test_the_validation_plan_splits_val_env_groups(toy: tuple[Any, Any], tmp_path: Path) -> None:
    """val_envs share rollout.val_env_groups (not env_groups); without val_envs the training envs split it evenly,
    whatever their training shares; the plan written to config.yaml loads back to itself (what --resume reads)."""
    import yaml

    pm, regs = toy
    base = [*toy_config_overrides(), "rollout.env_groups=4", "rollout.val_env_groups=6",
            "envs=[{name: counter, groups: 3}, {name: counter5, groups: 1}]"]
    resolved = resolve_config(load_config(overrides=base), regs, pm)
    assert [(n, g) for n, g, _ in resolved.val_env_plan] == [("counter", 3), ("counter5", 3)]
    explicit = resolve_config(load_config(overrides=[*base, "val_envs=[{name: counter5, groups: 6}]"]), regs, pm)
    assert [(n, g) for n, g, _ in explicit.val_env_plan] == [("counter5", 6)]
    with pytest.raises(ConfigError, match="do not add up to rollout.val_env_groups=6"):
        resolve_config(load_config(overrides=[*base, "val_envs=[{name: counter, groups: 4}]"]), regs, pm)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(resolved.to_data()))
    again = resolve_config(load_config(path), regs, pm)
    assert again.val_env_plan == resolved.val_env_plan and again.env_plan == resolved.env_plan
