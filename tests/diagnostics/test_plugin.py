"""The plugin: lazy registration, config validation, components built through the registry."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ragen_core.errors import ConfigError
from ragen_core.plugins import build_plugin_manager, collect_registries
from ragen_core.protocols import Diagnostic

from .helpers import random_context

ENV = {"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": "ragen_plugins_diagnostics"}


@pytest.fixture(scope="module")
def registries():
    return collect_registries(build_plugin_manager(environ=ENV))


def test_registers_both_diagnostics_lazily(registries):
    assert {"collapse", "echo_trap"} <= set(registries.diagnostics.names())
    spec = registries.diagnostics.get("collapse")
    assert spec.entry_point == "ragen_plugins_diagnostics.collapse:Collapse"
    assert spec.plugin == "ragen_plugins_diagnostics"


def test_importing_the_plugin_imports_nothing_heavy():
    code = ("import sys, ragen_plugins_diagnostics; "
            "bad = [m for m in ('numpy', 'matplotlib', 'ragen_plugins_diagnostics.collapse', "
            "'ragen_plugins_diagnostics.report') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": "plugins"})
    assert out.stdout.strip() == "[]"


def test_components_are_built_from_validated_configs(registries):
    collapse = registries.diagnostics.get("collapse").create(pairs=8, families=["trajectory"])
    assert isinstance(collapse, Diagnostic)
    assert collapse.config.pairs == 8 and collapse.config.families == ("trajectory",)
    metrics = collapse.compute(random_context(2))
    assert all(k.startswith(("collapse/valid_thinking_rate", "collapse/trajectory/")) for k in metrics)
    echo = registries.diagnostics.get("echo_trap").create()
    assert isinstance(echo, Diagnostic)
    assert echo.compute(random_context(2))


@pytest.mark.parametrize(("options", "message"), [
    ({"pairs": 0}, "collapse.pairs: must be an integer >= 1"),
    ({"families": ["first_turn", "turns"]}, "collapse.families"),
    ({"families": []}, "collapse.families"),
    ({"families": ["trajectory", "trajectory"]}, "must not repeat"),
    ({"ema_decay": 1.0}, "collapse.ema_decay: must be a number in [0, 1)"),
    ({"batch_size": 0}, "collapse.batch_size"),
    ({"mi_fraction_threshold": 0.0}, "collapse.mi_fraction_threshold"),
    ({"entropy_threshold": -1.0}, "collapse.entropy_threshold"),
    ({"regime_mi": "both"}, "collapse.regime_mi"),
    ({"pair": 3}, "did you mean 'collapse.pairs'"),
])
def test_config_errors_name_the_key(registries, options, message):
    with pytest.raises(ConfigError) as info:
        registries.diagnostics.get("collapse").make_config(options, path="collapse")
    assert message in str(info.value) + " " + str(getattr(info.value, "hint", ""))


def test_defaults():
    from ragen_plugins_diagnostics.collapse import CollapseConfig

    cfg = CollapseConfig()
    assert (cfg.pairs, cfg.families, cfg.seed, cfg.ema_decay, cfg.batch_size) == (
        64, ("first_turn", "trajectory"), 0, 0.9, 16)
    assert (cfg.entropy_threshold, cfg.mi_fraction_threshold, cfg.regime_mi) == (0.5, 0.5, "seq")


def test_echo_trap_takes_no_options(registries):
    with pytest.raises(ConfigError, match="unknown config key"):
        registries.diagnostics.get("echo_trap").make_config({"n": 2}, path="echo_trap")
