"""Env namespaces: ``<prefix>.<member>`` names stand for one env with one option set (the envs of another hub)."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from ragen_core import hookimpl
from ragen_core.cli import build_cli
from ragen_core.config import load_config, resolve_config
from ragen_core.env import TextEnv
from ragen_core.errors import ConfigError, DuplicateComponentError, PluginError, UnknownComponentError
from ragen_core.plugins import build_plugin_manager, collect_registries, plugin_infos
from ragen_core.registry import EnvNamespace, EnvRegistry, EnvVariant
from tests.core.toy import ToyPlugin, toy_config_overrides

LISTED: list[str] = []


@attrs.define
class WordConfig:
    """``word``: lower-case letters (a hub's env names are text, so a member is always a string)."""

    word: str = attrs.field(default="abc", validator=attrs.validators.matches_re(r"[a-z]+"))
    max_actions: int = 3


class WordEnv(TextEnv):
    """Spell the word: the smallest env with a text option."""

    config_cls = WordConfig

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        return self.render(), {}

    def render(self) -> str:
        return f"spell {self.config.word}"


def words() -> list[str]:
    """The namespace's member lister (a module function, reached through a lazy entry-point string)."""
    LISTED.append("called")
    return ["cab", "ab", "b"]


class WordHub:
    """A plugin that offers every word as ``spell.<word>``."""

    @hookimpl
    def ragen_register_envs(self, registry: EnvRegistry) -> None:
        registry.register("word", f"{__name__}:WordEnv")
        registry.register_namespace("spell", env="word", option="word", names=f"{__name__}:words",
                                    description="spell a word")
        registry.register_variant("spell.special", env="word", params={"word": "zz"}, description="explicit")


#: this module as a plugin module (for ``RAGEN_PLUGINS``, as the CLI loads plugins itself)
ragen_register_envs = WordHub().ragen_register_envs


@pytest.fixture
def hub() -> tuple[Any, Any]:
    pm = build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1"},
                              plugins=[ToyPlugin(), WordHub()])
    return pm, collect_registries(pm)


def test_a_member_resolves_to_the_env_with_its_option(hub: tuple[Any, Any]) -> None:
    envs = hub[1].envs
    assert "spell.ab" in envs and "spell" not in envs and "spell." not in envs and "other.ab" not in envs
    member = envs.get("spell.ab")
    assert isinstance(member, EnvVariant) and member.env == "word" and dict(member.params) == {"word": "ab"}
    spec, params, instruction = envs.resolve("spell.ab")
    assert spec.name == "word" and params == {"word": "ab"} and instruction is None
    env = envs.make("spell.ab")
    assert isinstance(env, WordEnv) and env.reset(seed=0)[0] == "spell ab"
    assert envs.make("spell.ab", {"max_actions": 2}).config.max_actions == 2


def test_a_registered_name_wins_over_the_namespace(hub: tuple[Any, Any]) -> None:
    envs = hub[1].envs
    assert envs.get("spell.special").description == "explicit"
    assert envs.make("spell.special").config.word == "zz"


@given(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,20}", fullmatch=True))
def test_any_member_text_is_passed_to_the_env_option_unchanged(member: str) -> None:
    envs = EnvRegistry()
    envs.register("word", WordEnv)
    envs.register_namespace("spell", env="word", option="word")
    assert envs.resolve(f"spell.{member}")[1] == {"word": member}


def test_members_are_listed_on_demand_only(hub: tuple[Any, Any]) -> None:
    LISTED.clear()
    pm, regs = hub
    assert LISTED == []  # loading plugins and resolving names never lists the members
    regs.envs.resolve("spell.b")
    assert LISTED == []
    assert regs.envs.namespace("spell").members() == ["ab", "b", "cab"]
    assert regs.envs.namespace("spell.*").name == "spell" and LISTED == ["called"]


def test_namespace_errors() -> None:
    envs = EnvRegistry()
    with envs.owned_by("a"):
        envs.register_namespace("hub", env="x", option="id")
    with envs.owned_by("b"), pytest.raises(DuplicateComponentError, match="'hub' is registered twice: by plugin "
                                           "'a' and by plugin 'b'"):
        envs.register_namespace("hub", env="y", option="id")
    for bad in ("", "a.b", "-x", "a b", 3):
        with pytest.raises(PluginError, match="invalid env namespace"):
            envs.register_namespace(bad, env="x", option="id")  # type: ignore[arg-type]
    with pytest.raises(UnknownComponentError, match="unknown env namespace 'hbu'; did you mean 'hub'"):
        envs.namespace("hbu")
    broken = EnvNamespace(name="b", env="x", option="id", names="no_such_module_anywhere:names", plugin="p")
    with pytest.raises(PluginError, match="namespace 'b' \\(plugin p\\) could not list its members"):
        broken.members()
    assert EnvNamespace(name="n", env="x", option="id").members() == []


def test_an_unknown_name_lists_the_namespaces(hub: tuple[Any, Any]) -> None:
    with pytest.raises(UnknownComponentError) as err:
        hub[1].envs.get("sepll.ab")
    assert "spell.<name>" in str(err.value)


def test_configs_use_members_and_the_env_validates_them(hub: tuple[Any, Any]) -> None:
    pm, regs = hub
    base = [o for o in toy_config_overrides() if not o.startswith("env=")]
    resolved = resolve_config(load_config(overrides=[*base, "env=spell.ab"]), regs, pm)
    assert [name for name, _n, _o in resolved.env_plan] == ["spell.ab"]
    with pytest.raises(ConfigError, match="word"):
        resolve_config(load_config(overrides=[*base, "env=spell.AB"]), regs, pm)


def test_plugins_and_envs_commands_show_namespaces(hub: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    pm, regs = hub
    assert any({"kind": "env namespace", "name": "spell"} in p["components"] for p in plugin_infos(pm, regs))
    monkeypatch.setenv("RAGEN_PLUGINS", f"tests.core.toy_plugin,{__name__}")
    cli = build_cli()
    listed = json.loads(CliRunner().invoke(cli, ["envs", "--json"]).output)
    assert {"name": "spell.*", "kind": "env namespace", "env": "word", "option": "word",
            "description": "spell a word", "plugin": __name__} in listed
    table = CliRunner().invoke(cli, ["envs"])
    assert table.exit_code == 0 and "spell.*" in table.output and "(word=<name>)" in table.output
    members = CliRunner().invoke(cli, ["envs", "--members", "spell"])
    assert members.exit_code == 0 and members.output.split() == ["spell.ab", "spell.b", "spell.cab"]
    bad = CliRunner().invoke(cli, ["envs", "--members", "cnt"])
    assert bad.exit_code != 0 and "unknown env namespace 'cnt'" in bad.output
