"""The core's defaults name no plugin component: unnamed sections get the default an installed plugin offers
(``register(..., default=True)``, or the only one registered), and the env comes from the config or a preset."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from ragen_core.config import Component, RagenConfig, load_config, resolve_config, with_default_components
from ragen_core.errors import ConfigError
from ragen_core.plugins import build_plugin_manager, collect_registries
from ragen_core.registry import FilterSpec, Registry, TrainerSpec

pytestmark = pytest.mark.usefixtures("toy_plugins")


def _filters(*specs: tuple[str, bool, str]) -> Registry[FilterSpec]:
    reg: Registry[FilterSpec] = Registry(FilterSpec)
    for name, default, plugin in specs:
        with reg.owned_by(plugin):
            reg.register(name, "tests.core.toy:KeepTopFilter", default=default)
    return reg


def test_the_core_defaults_name_no_component() -> None:
    config = RagenConfig()
    assert config.envs == []
    assert (config.filter.name, config.estimator.name, config.trainer.name) == ("", "", "")
    assert all(c.name == "" for c in (config.filter, config.estimator, config.trainer))


def test_the_offered_default_wins_over_the_others() -> None:
    reg = _filters(("a", False, "p1"), ("b", True, "p2"), ("c", False, "p3"))
    assert reg.default().name == "b"
    assert reg.get("b").describe()["default"] is True and "default" not in reg.get("a").describe()


def test_an_only_component_is_not_chosen_unless_offered() -> None:
    """Disabling the plugin that offered a default must not hand its role to whatever is left."""
    with pytest.raises(ConfigError, match="no installed plugin offers a default one") as info:
        _filters(("solo", False, "p1")).default()
    assert "known: solo" in (info.value.hint or "")


def test_two_offered_defaults_name_both_plugins() -> None:
    reg = _filters(("a", True, "p1"), ("b", True, "p2"))
    with pytest.raises(ConfigError, match=r"several plugins offer a default one: 'a' \(plugin p1\), 'b' \(plugin p2\)"
                       ) as info:
        reg.default()
    assert "name one: filter: a" in (info.value.hint or "")


def test_no_default_asks_for_a_name_and_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="names no filter, and no installed plugin offers") as info:
        _filters(("a", False, "p1"), ("b", False, "p2")).default()
    assert "known: a, b" in (info.value.hint or "")
    with pytest.raises(ConfigError) as empty:
        Registry(TrainerSpec).default()
    assert "is the plugin providing one installed" in (empty.value.hint or "")


def test_a_bad_default_flag_is_a_plugin_error() -> None:
    from ragen_core.errors import PluginError

    with pytest.raises(PluginError, match="bad fields"):
        _filters(("a", "yes", "p1"))  # type: ignore[arg-type]


def test_resolution_fills_unnamed_sections_and_keeps_their_options() -> None:
    registries = collect_registries(build_plugin_manager())
    config = load_config(None, ["env=counter", "filter=keep_top", "trainer.steps=3"])
    derived: dict[str, str] = {}
    filled = with_default_components(config, registries, derived)
    assert filled.trainer == Component(name="toy", options={"steps": 3}) and filled.estimator.name == "rtg"
    assert derived["trainer.name"] == "the default of plugin tests.core.toy_plugin"
    assert config.trainer.name == ""  # the input is not modified
    resolved = resolve_config(config, registries)
    assert resolved.config.trainer.name == "toy" and resolved.trainer.steps == 3
    assert {"estimator.name", "trainer.name"} <= set(resolved.derived) and "filter.name" not in resolved.derived
    named = resolve_config(load_config(None, ["env=counter", "filter=keep_top", "trainer=toy"]), registries)
    assert "trainer.name" not in named.derived


def test_lenient_resolution_reports_a_kind_without_default(monkeypatch: pytest.MonkeyPatch) -> None:
    registries = collect_registries(build_plugin_manager())
    with registries.trainers.owned_by("other"):  # two trainers offered: the config has to name one
        registries.trainers.register("other", "tests.core.toy:ToyTrainer", default=True)
    config = load_config(None, ["env=counter", "filter=keep_top"])
    resolved = resolve_config(config, registries, strict=False)
    assert any(p.startswith("trainer: the config names no trainer, and several plugins") for p in resolved.problems)
    assert resolved.trainer is None
    with pytest.raises(ConfigError, match="names no trainer"):
        resolve_config(config, registries)


def test_a_config_without_env_is_a_clear_error() -> None:
    registries = collect_registries(build_plugin_manager())
    with pytest.raises(ConfigError, match="the config names no env") as info:
        resolve_config(load_config(None, []), registries)
    assert "env: NAME" in (info.value.hint or "")


def test_config_show_previews_the_default_trainers_preset(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """``ragen config show`` with no file shows the run ``ragen train`` would start: the preset included."""
    import yaml
    from click.testing import CliRunner

    from ragen_core.cli import build_cli

    preset = tmp_path / "preset.yaml"
    preset.write_text("env: counter\nrollout:\n  group_size: 3\n")
    registries_of = collect_registries

    def with_preset(pm: Any) -> Any:
        regs = registries_of(pm)
        spec = regs.trainers.get("toy")
        regs.trainers._specs["toy"] = attrs.evolve(spec, preset=str(preset))
        return regs

    monkeypatch.setattr("ragen_core.plugins.collect_registries", with_preset)
    monkeypatch.setattr(TrainerSpec, "preset_path", lambda self: self.preset)
    res = CliRunner().invoke(build_cli(build_plugin_manager()), ["config", "show", "rollout.max_turn=2"])
    assert res.exit_code == 0, res.output
    data = yaml.safe_load(res.output)
    assert data["envs"][0]["name"] == "counter" and data["rollout"]["group_size"] == 3
    assert data["rollout"]["max_turn"] == 2 and data["trainer"]["name"] == "toy"


def test_the_derived_comment_says_whether_a_plugin_offered_the_default() -> None:
    registries = collect_registries(build_plugin_manager())
    with registries.filters.owned_by("other"):
        registries.filters.register("fair", "tests.core.toy:KeepTopFilter", default=True)
    derived: dict[str, str] = {}
    filled = with_default_components(load_config(None, ["env=counter"]), registries, derived)  # keep_top: not offered
    assert filled.filter.name == "fair" and derived["filter.name"] == "the default of plugin other"
    assert derived["estimator.name"] == "the default of plugin tests.core.toy_plugin"
