"""The four env-hub adapters as installed distributions: found through their entry points, listed by ``ragen plugins``
and ``ragen envs`` with their namespaces, their members listed on demand, and usable by name in a config."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from ragen_core.cli import build_cli
from ragen_core.config import load_config, resolve_config
from ragen_core.plugins import build_plugin_manager, collect_registries
from tests.needs import needs_plugin

#: plugin name -> (distribution, its envs, its namespace or None)
HUBS = {"reasoning_gym": ("ragen-plugins-reasoning-gym", {"reasoning_gym"}, "rg"),
        "textarena": ("ragen-plugins-textarena", {"textarena"}, "ta"),
        "gymnasium": ("ragen-plugins-gymnasium", {"gymnasium"}, "gym"),
        "openenv": ("ragen-plugins-openenv", {"openenv", "remote"}, None)}


@pytest.fixture(params=sorted(HUBS))
def hub(request: pytest.FixtureRequest) -> tuple[str, str, set[str], str | None]:
    dist, envs, space = HUBS[request.param]
    needs_plugin(dist, "the adapter is tested as installed")
    return request.param, dist, envs, space


def ragen(*args: str) -> Any:
    res = CliRunner().invoke(build_cli(build_plugin_manager()), list(args))
    assert res.exit_code == 0, res.output
    return res.output


def test_an_installed_adapter_is_a_plugin_with_its_envs_and_namespace(hub: tuple[str, str, set[str], Any]) -> None:
    name, dist, envs, space = hub
    plugin = next(p for p in json.loads(ragen("plugins", "--json")) if p["name"] == name)
    assert plugin["distribution"] == dist and plugin["status"] == "loaded"
    components = {(c["kind"], c["name"]) for c in plugin["components"]}
    assert {("env", e) for e in envs} <= components
    listed = {e["name"]: e for e in json.loads(ragen("envs", "--json"))}
    assert all(listed[e]["plugin"] == name for e in envs)
    if space is not None:
        assert ("env namespace", space) in components and listed[f"{space}.*"]["plugin"] == name


@pytest.mark.parametrize(("space", "member", "count"), [("rg", "rg.leg_counting", 105), ("ta", "ta.TicTacToe-v0", 501),
                                                         ("gym", "gym.FrozenLake-v1", 6)])
def test_each_namespace_lists_its_members_and_a_config_uses_one(space: str, member: str, count: int) -> None:
    """``count``: what the pinned hubs give here (reasoning-gym 0.1.25, TextArena 0.7.4, gymnasium 1.4); a newer
    release may add members."""
    needs_plugin(HUBS[{"rg": "reasoning_gym", "ta": "textarena", "gym": "gymnasium"}[space]][0], "the adapter")
    names = json.loads(ragen("envs", "--members", space, "--json"))
    assert member in names and len(names) >= count and all(n.startswith(f"{space}.") for n in names)
    pm = build_plugin_manager()
    resolved = resolve_config(load_config(overrides=[f"env={member}"]), collect_registries(pm), pm, strict=False)
    assert [n for n, _g, _o in resolved.env_plan] == [member]
