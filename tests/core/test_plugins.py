"""Plugin manager: entry-point loading, blocking, allow-list, required plugins, errors, tracing."""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
from pathlib import Path

import pytest

from ragen_core import hookimpl
from ragen_core.config import PluginsConfig
from ragen_core.errors import (
    ConfigError,
    DuplicateComponentError,
    MissingPluginError,
    PluginError,
    PluginLoadError,
    UnknownComponentError,
)
from ragen_core.plugins import build_plugin_manager, collect_registries, plugin_infos
from tests.core.toy import ToyPlugin


def make_dist(root: Path, dist: str, version: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    """Write an installed distribution (dist-info + modules) under ``root`` (put on sys.path by the test)."""
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = ["[ragen]"] + [f"{k} = {v}" for k, v in entry_points.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    for name, code in modules.items():
        (root / f"{name}.py").write_text(textwrap.dedent(code))


GOOD = """
from ragen_core import hookimpl

@hookimpl
def ragen_register_envs(registry):
    registry.register("counter", "tests.core.toy:CounterEnv", description="from {name}")
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("RAGEN_DISABLE_PLUGIN_AUTOLOAD")
    yield tmp_path
    for mod in [m for m in sys.modules if m.startswith("fake_")]:
        del sys.modules[mod]


def only(env: dict[str, str]) -> dict[str, str]:
    """An environment that loads only the fake distributions (by allow-list)."""
    return env


def test_no_plugins_means_empty_registries(ragen_pm) -> None:
    regs = collect_registries(ragen_pm)
    assert all(len(r) == 0 for r in regs.all().values())


def test_entry_points_load_in_sorted_order_with_origin(site: Path) -> None:
    make_dist(site, "fake-b", "2.0", {"zeta": "fake_zeta"}, {"fake_zeta": GOOD.replace("counter", "z")})
    make_dist(site, "fake-a", "1.0", {"alpha": "fake_alpha"}, {"fake_alpha": GOOD})
    pm = build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": "zeta,alpha"})
    names = [n for n, p in pm.list_name_plugin() if p is not None]
    assert names == ["alpha", "zeta"]
    assert pm.info("alpha").distribution == "fake-a" and pm.info("alpha").version == "1.0"
    regs = collect_registries(pm)
    assert regs.envs.get("counter").plugin == "alpha"
    assert regs.envs.get("z").plugin == "zeta"
    info = {p["name"]: p for p in plugin_infos(pm, regs)}
    assert info["alpha"]["hooks"] == ["ragen_register_envs"]
    assert info["alpha"]["components"] == [{"kind": "env", "name": "counter"}]


def test_plugin_raising_at_import_is_reported_by_name(site: Path) -> None:
    make_dist(site, "fake-broken", "0.3", {"broken": "fake_broken"}, {"fake_broken": "raise RuntimeError('boom')"})
    with pytest.raises(PluginLoadError) as err:
        build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": "broken"})
    msg = str(err.value)
    assert "'broken'" in msg and "fake-broken 0.3" in msg and "RuntimeError: boom" in msg
    assert "RAGEN_DISABLE_PLUGINS=broken" in msg


def test_broken_plugin_can_be_blocked(site: Path) -> None:
    make_dist(site, "fake-broken", "0.3", {"broken": "fake_broken"}, {"fake_broken": "raise RuntimeError('boom')"})
    make_dist(site, "fake-a", "1.0", {"alpha": "fake_alpha"}, {"fake_alpha": GOOD})
    env = {"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": "broken,alpha", "RAGEN_DISABLE_PLUGINS": "broken"}
    pm = build_plugin_manager(environ=env)
    assert pm.is_blocked("broken") and pm.has_plugin("alpha")
    pm = build_plugin_manager(PluginsConfig(disable=["broken"]),
                              environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": "broken,alpha"})
    assert pm.is_blocked("broken")
    assert {p["name"]: p["status"] for p in plugin_infos(pm)}["broken"] == "blocked"


TRAINER = """
from ragen_core import hookimpl

@hookimpl
def ragen_register_trainers(registry):
    registry.register("fast", "tests.core.toy:ToyTrainer", default=True)
"""


def _offline(plugins: str = "alpha,beta", **more: str) -> dict[str, str]:
    """Only the fake plugins ``plugins`` (a disabled one is blocked first, whatever the allow-list says)."""
    return {"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": plugins, **more}


def test_a_name_a_disabled_plugin_provides_says_so(site: Path) -> None:
    make_dist(site, "fake-a", "1.0", {"alpha": "fake_alpha"}, {"fake_alpha": GOOD})
    make_dist(site, "fake-b", "1.0", {"beta": "fake_beta"}, {"fake_beta": TRAINER})
    regs = collect_registries(build_plugin_manager(environ=_offline(RAGEN_DISABLE_PLUGINS="alpha")))
    assert "fake_alpha" not in sys.modules  # never loaded on the way to a working registry
    with pytest.raises(UnknownComponentError) as err:
        regs.envs.get("counter")
    assert err.value.message == "env 'counter' is provided by the plugin 'alpha', which is disabled " \
                                "(RAGEN_DISABLE_PLUGINS)"
    assert err.value.hint == "enable it: remove 'alpha' from RAGEN_DISABLE_PLUGINS"
    assert regs.trainers.default().name == "fast"  # the enabled plugin's registrations are untouched
    with pytest.raises(UnknownComponentError) as err:  # a name no disabled plugin has stays a plain unknown one
        regs.envs.get("nope")
    assert err.value.message == "unknown env 'nope'" and "disabled" not in err.value.message
    regs = collect_registries(build_plugin_manager(PluginsConfig(disable=["alpha"]), environ=_offline()))
    with pytest.raises(UnknownComponentError, match=r"'alpha', which is disabled \(plugins.disable\)"):
        regs.envs.resolve("counter")


def test_a_default_a_disabled_plugin_offers_says_so(site: Path) -> None:
    make_dist(site, "fake-a", "1.0", {"alpha": "fake_alpha"}, {"fake_alpha": GOOD})
    make_dist(site, "fake-b", "1.0", {"beta": "fake_beta"}, {"fake_beta": TRAINER})
    env = _offline(RAGEN_DISABLE_PLUGINS="beta")
    regs = collect_registries(build_plugin_manager(PluginsConfig(disable=["beta"]), environ=env))
    with pytest.raises(ConfigError) as err:
        regs.trainers.default()
    assert err.value.message == "the config names no trainer, and the plugin 'beta' that offers the default one " \
                                "('fast') is disabled (plugins.disable and RAGEN_DISABLE_PLUGINS)"
    assert "enable it (remove 'beta' from plugins.disable and RAGEN_DISABLE_PLUGINS)" in (err.value.hint or "")


def test_a_disabled_plugin_that_cannot_load_is_listed_in_the_hint(site: Path) -> None:
    make_dist(site, "fake-broken", "0.3", {"broken": "fake_broken"}, {"fake_broken": "raise RuntimeError('boom')"})
    regs = collect_registries(build_plugin_manager(environ=_offline("broken", RAGEN_DISABLE_PLUGINS="broken")))
    with pytest.raises(UnknownComponentError) as err:
        regs.envs.get("counter")
    assert err.value.message == "unknown env 'counter'"
    assert (err.value.hint or "").endswith("; disabled plugins: broken (RAGEN_DISABLE_PLUGINS)")
    with pytest.raises(ConfigError, match=r"disabled plugins: broken \(RAGEN_DISABLE_PLUGINS\)"):
        regs.trainers.default()


def test_config_resolution_names_the_disabled_plugin(site: Path) -> None:
    from ragen_core.config import load_config, resolve_config

    make_dist(site, "fake-a", "1.0", {"alpha": "fake_alpha"}, {"fake_alpha": GOOD})
    make_dist(site, "fake-b", "1.0", {"beta": "fake_beta"}, {"fake_beta": TRAINER})
    pm = build_plugin_manager(environ=_offline("beta", RAGEN_DISABLE_PLUGINS="beta"), plugins=[ToyPlugin()])
    config = load_config(overrides=["env=counter5", "trainer=fast", "filter=keep_top", "estimator=rtg"])
    with pytest.raises(ConfigError) as err:
        resolve_config(config, collect_registries(pm), pm)
    assert str(err.value) == "trainer: trainer 'fast' is provided by the plugin 'beta', which is disabled " \
                             "(RAGEN_DISABLE_PLUGINS)\n  hint: enable it: remove 'beta' from RAGEN_DISABLE_PLUGINS"


def test_autoload_off_loads_only_the_allow_list(site: Path) -> None:
    make_dist(site, "fake-a", "1.0", {"alpha": "fake_alpha"}, {"fake_alpha": GOOD})
    make_dist(site, "fake-b", "1.0", {"beta": "fake_beta"}, {"fake_beta": GOOD.replace("counter", "b")})
    pm = build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": "beta"})
    assert pm.has_plugin("beta") and not pm.has_plugin("alpha")
    pm = build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert not pm.has_plugin("beta") and not pm.has_plugin("alpha")


def test_autoload_on_loads_every_entry_point(site: Path) -> None:
    make_dist(site, "fake-a", "1.0", {"alpha": "fake_alpha"}, {"fake_alpha": GOOD})
    real = ",".join(ep.name for ep in importlib.metadata.entry_points(group="ragen") if ep.name != "alpha")
    pm = build_plugin_manager(environ={"RAGEN_DISABLE_PLUGINS": real})
    assert pm.has_plugin("alpha")


def test_allow_list_accepts_a_module_path_and_rejects_unknowns() -> None:
    pm = build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": "tests.core.toy_plugin"})
    assert "counter" in collect_registries(pm).envs
    with pytest.raises(PluginLoadError, match="no_such_plugin_xyz"):
        build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": "no_such_plugin_xyz"})


def test_misspelled_hook_fails_at_start(site: Path) -> None:
    code = "from ragen_core import hookimpl\n\n@hookimpl\ndef ragen_register_env(registry):\n    pass\n"
    make_dist(site, "fake-typo", "1.0", {"typo": "fake_typo"}, {"fake_typo": code})
    with pytest.raises(PluginLoadError) as err:
        build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": "typo"})
    assert "'typo'" in str(err.value) and "ragen_register_env" in str(err.value) and "fake-typo" in str(err.value)


def test_hook_with_wrong_arguments_fails_at_registration() -> None:
    class Bad:
        @hookimpl
        def ragen_register_envs(self, registry, extra):  # noqa: ANN001 - the point
            pass

    with pytest.raises(PluginLoadError, match="invalid hook implementation"):
        build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1"}, plugins=[Bad()])


def test_duplicate_component_names_both_plugins(site: Path) -> None:
    make_dist(site, "fake-a", "1.0", {"alpha": "fake_alpha"}, {"fake_alpha": GOOD})
    make_dist(site, "fake-b", "1.0", {"beta": "fake_beta"}, {"fake_beta": GOOD})
    for order in ("alpha,beta", "beta,alpha"):
        pm = build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": order})
        with pytest.raises(DuplicateComponentError) as err:
            collect_registries(pm)
        assert str(err.value).startswith("env 'counter' is registered twice: by plugin 'alpha' and by plugin 'beta'")


def test_duplicate_entry_point_names_across_distributions(site: Path) -> None:
    make_dist(site, "fake-a", "1.0", {"same": "fake_alpha"}, {"fake_alpha": GOOD})
    make_dist(site, "fake-b", "1.0", {"same": "fake_beta"}, {"fake_beta": GOOD.replace("counter", "b")})
    with pytest.raises(PluginLoadError) as err:
        build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": "same"})
    assert "fake-a" in str(err.value) and "fake-b" in str(err.value)


def test_plugin_failing_inside_a_registration_hook_is_named() -> None:
    class Raises:
        @hookimpl
        def ragen_register_filters(self, registry):  # noqa: ANN001
            raise KeyError("oops")

    pm = build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1"})
    pm.register(Raises(), name="raiser")
    with pytest.raises(PluginError, match="plugin 'raiser' .*ragen_register_filters: KeyError"):
        collect_registries(pm)


def test_required_plugins(site: Path) -> None:
    make_dist(site, "fake-a", "1.4", {"alpha": "fake_alpha"}, {"fake_alpha": GOOD})
    env = {"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": "alpha"}
    build_plugin_manager(PluginsConfig(required=["alpha", "fake-a>=1.2,<2", "fake_a==1.4"]), environ=env)
    with pytest.raises(MissingPluginError, match="fake-a 1.4 is installed"):
        build_plugin_manager(PluginsConfig(required=["fake-a>=2"]), environ=env)
    with pytest.raises(MissingPluginError, match="not installed"):
        build_plugin_manager(PluginsConfig(required=["gamma"]), environ=env)
    with pytest.raises(MissingPluginError, match="blocked"):
        build_plugin_manager(PluginsConfig(required=["alpha"], disable=["alpha"]), environ=env)
    with pytest.raises(MissingPluginError, match="not loaded"):
        build_plugin_manager(PluginsConfig(required=["alpha"]), environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1"})
    with pytest.raises(MissingPluginError, match="not a valid requirement"):
        build_plugin_manager(PluginsConfig(required=["al pha >="]), environ=env)


def test_hook_call_tracing_logs_calls(capsys: pytest.CaptureFixture[str]) -> None:
    from ragen_core.log import configure_logging

    configure_logging("json", "debug")
    try:
        pm = build_plugin_manager(PluginsConfig(trace=True), environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1"},
                                  plugins=[ToyPlugin()])
        collect_registries(pm)
    finally:
        configure_logging("auto", "warning")
    err = capsys.readouterr().err
    assert "ragen_register_envs" in err and '"event": "hook"' in err


def test_registration_results_do_not_depend_on_order() -> None:
    a = build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1"}, plugins=[ToyPlugin()])
    ra = collect_registries(a)
    assert ra.envs.names() == ["counter", "counter5"]
    assert [s.plugin for s in ra.envs] == [a.get_name(a.get_plugins().pop())] * 2


def test_no_module_level_plugin_manager() -> None:
    import ragen_core

    for path in Path(ragen_core.__file__).parent.glob("*.py"):
        for line in path.read_text().splitlines():
            assert not line.startswith(("pm =", "plugin_manager =", "_pm =")), f"{path.name}: {line}"
