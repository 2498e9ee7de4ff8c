"""Registries and specs: lazy loading, names, did-you-mean, variants."""

from __future__ import annotations

import sys

import pytest

from ragen_core.errors import DuplicateComponentError, PluginError, RagenError, UnknownComponentError
from ragen_core.registry import EnvRegistry, FilterSpec, NoOptions, Registry, TrainerSpec, load_object, suggest
from tests.core.toy import CounterConfig, CounterEnv


def test_register_is_lazy() -> None:
    reg = Registry(FilterSpec)
    sys.modules.pop("tests.core.lazy_never_imported", None)
    with reg.owned_by("p"):
        spec = reg.register("x", "tests.core.lazy_never_imported:Thing", description="d")
    assert spec.plugin == "p" and spec.kind == "filter"
    assert "tests.core.lazy_never_imported" not in sys.modules
    with pytest.raises(PluginError) as err:
        spec.load()
    assert "filter 'x' (from plugin p) could not be loaded" in str(err.value)
    assert "RAGEN_DISABLE_PLUGINS=p" in str(err.value)


def test_unknown_name_did_you_mean_and_known_list() -> None:
    reg = Registry(FilterSpec)
    for name in ("top_p", "top_k", "min_p"):
        reg.register(name, f"m:{name}")
    with pytest.raises(UnknownComponentError) as err:
        reg.get("top_pp")
    assert str(err.value) == "unknown filter 'top_pp'; did you mean 'top_p'?\n  hint: known filters: min_p, top_k, top_p"
    with pytest.raises(UnknownComponentError, match="did you mean 'top_k'"):
        reg.get("TOP_K")
    assert "no filter is registered" in str(Registry(FilterSpec)._unknown("x"))


def test_suggest() -> None:
    assert suggest("sokobna", ["sokoban", "bandit"]) == "sokoban"
    assert suggest("zzz", ["sokoban"]) is None


@pytest.mark.parametrize("name", ["", "has space", "-lead", "a/b", "ü"])
def test_invalid_names_are_refused(name: str) -> None:
    with pytest.raises(PluginError, match="invalid name"):
        Registry(FilterSpec).register(name, "m:x")


def test_entry_point_must_be_module_colon_object() -> None:
    with pytest.raises(PluginError, match="package.module:Object"):
        Registry(FilterSpec).register("x", "no_colon_here")
    with pytest.raises(ValueError, match="package.module:Object"):
        load_object("nocolon")


def test_duplicate_names() -> None:
    reg = Registry(TrainerSpec)
    with reg.owned_by("one"):
        reg.register("t", "m:a", install_hint="pip install a")
    with reg.owned_by("two"), pytest.raises(DuplicateComponentError) as err:
        reg.register("t", "m:b")
    assert "by plugin 'one' and by plugin 'two'" in str(err.value)


def test_bad_spec_fields_name_the_plugin() -> None:
    reg = Registry(FilterSpec)
    with reg.owned_by("p"), pytest.raises(PluginError, match="plugin p registered filter 'x' with bad fields"):
        reg.register("x", "m:x", no_such_field=1)


def test_config_class_from_object_spec_or_lazy_string() -> None:
    reg = EnvRegistry()
    a = reg.register("a", "tests.core.toy:CounterEnv")
    b = reg.register("b", CounterEnv, config="tests.core.toy:CounterConfig")
    c = reg.register("c", "tests.core.toy:ToyTrainer", config="tests.core.toy:Nope")
    assert a.config_class() is CounterConfig and b.config_class() is CounterConfig
    with pytest.raises(PluginError, match="config class 'tests.core.toy:Nope'"):
        c.config_class()
    d = reg.register("d", "tests.core.toy:ReturnToGo")
    assert d.config_class() is NoOptions
    assert b.describe()["entry_point"] == "tests.core.toy:CounterEnv"


def test_variants_resolve_through_chains() -> None:
    reg = EnvRegistry()
    reg.register("counter", "tests.core.toy:CounterEnv")
    reg.register_variant("c5", env="counter", params={"target": 5, "max_actions": 9})
    reg.register_variant("c5_short", env="c5", params={"max_actions": 5}, instruction="Hurry.")
    spec, params, instruction = reg.resolve("c5_short")
    assert spec.name == "counter" and params == {"target": 5, "max_actions": 5} and instruction == "Hurry."
    env = reg.make("c5_short", {"random_start": True})
    assert env.config == CounterConfig(target=5, max_actions=5, random_start=True)
    assert env.instruction == "Hurry." and env.max_actions_per_traj == 5
    assert [v.name for v in reg.variants()] == ["c5", "c5_short"] and [e.name for e in reg.envs()] == ["counter"]
    reg.register_variant("loop1", env="loop2")
    reg.register_variant("loop2", env="loop1")
    with pytest.raises(RagenError, match="cycle: loop1 -> loop2 -> loop1"):
        reg.resolve("loop1")


def test_env_option_errors_name_the_env() -> None:
    reg = EnvRegistry()
    reg.register("counter", "tests.core.toy:CounterEnv")
    with pytest.raises(RagenError, match="env counter.target: must be >= 1: 0"):
        reg.make("counter", {"target": 0})
    with pytest.raises(RagenError, match="did you mean 'env counter.target'"):
        reg.make("counter", {"targte": 3})


def test_an_env_guide_with_an_unknown_part_or_a_non_string_is_refused_naming_the_plugin() -> None:
    from ragen_core.errors import PluginError
    from ragen_core.registry import EnvRegistry

    reg = EnvRegistry()
    with reg.owned_by("mine"):
        spec = reg.register("ok", "x.y:Z", guide={"rules": "r", "success": "s"})
        assert spec.guide == {"rules": "r", "success": "s"} and spec.describe()["guide"] == spec.guide
        with pytest.raises(PluginError, match=r"plugin mine registered env 'bad' with bad fields"):
            reg.register("bad", "x.y:Z", guide={"howto": "?"})
        with pytest.raises(PluginError, match="bad fields"):
            reg.register("bad2", "x.y:Z", guide={"rules": 3})


class _KeywordEnv:
    """Written with keyword options instead of a config object: ``Env(config)`` passes the config as ``size``."""

    def __init__(self, size: int = 3) -> None:
        self.cells = list(range(size * size))


class _NoArgsEnv:
    def __init__(self) -> None:
        self.cells: list[int] = []


class _ConfigEnv:
    """Takes its config, then fails inside with a TypeError of its own: that error stands as raised."""

    def __init__(self, config: object = None) -> None:
        raise TypeError("a bug inside the env")


@pytest.mark.parametrize("cls", [_KeywordEnv, _NoArgsEnv])
def test_an_env_constructed_the_wrong_way_gets_one_clear_error(cls: type) -> None:
    reg = EnvRegistry()
    with reg.owned_by("mine"):
        reg.register("kw", cls)
    with pytest.raises(PluginError) as err:
        reg.make("kw")
    assert str(err.value).startswith(f"env 'kw' (plugin mine) cannot be made as {cls.__name__}(config): ")
    assert "one positional argument" in str(err.value.hint) and "attrs config class" in str(err.value.hint)
    assert "docs/plugins.md" in str(err.value.hint)


def test_a_type_error_inside_an_env_taking_its_config_is_not_rewritten() -> None:
    reg = EnvRegistry()
    reg.register("cfg", _ConfigEnv)
    with pytest.raises(TypeError, match="a bug inside the env"):
        reg.make("cfg")
    reg.register("counter", CounterEnv, config=CounterConfig)
    assert reg.make("counter").config == CounterConfig()
