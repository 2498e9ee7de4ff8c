"""(Built-in plugins loaded, as a user has them.) Bad config gets one clear line, never a traceback, a silent choice
or an exhausted memory: non-UTF-8 files, deep nesting, duplicate keys, alias bombs, NaN and infinity, absurd
resource sizes, unknown component names on every command, unknown command-line options, and hook functions a plugin
forgot to mark."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_core import hookimpl
from ragen_core.cli import build_cli
from ragen_core.config import load_config
from ragen_core.errors import ConfigError, PluginWarning
from ragen_core.overrides import YAML_MAX_DEPTH, YAML_MAX_NODES, load_yaml
from ragen_core.plugins import RagenPluginManager, build_plugin_manager
from ragen_core.structuring import ECHO_LIMIT


def _cli(*args: str):
    return CliRunner().invoke(build_cli(build_plugin_manager()), list(args))


def _one_clear_line(res) -> str:
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    line = next(x for x in res.output.splitlines() if x.startswith("ragen: error:"))
    assert len(line) < 400
    return line


def _bomb(levels: int) -> str:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for i in range(levels):
        prev, cur = chr(97 + i), chr(98 + i)
        lines.append(f"{cur}: &{cur} [{','.join(['*' + prev] * 9)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("content", "expected"), [
    (b"rollout:\n  group_size: \xff\xfe\n", "is not UTF-8 text (byte 0xff at offset 23)"),
    (("a: " + "[" * 5000 + "]" * 5000 + "\n").encode(), f"nested more than {YAML_MAX_DEPTH} levels deep"),
    (b"rollout:\n  group_size: 4\n  group_size: 8\n", "duplicate key 'group_size' (line 3, first on line 2)"),
    (_bomb(8).encode(), f"expands to more than {YAML_MAX_NODES:,} values"),
    (_bomb(9).encode(), f"expands to more than {YAML_MAX_NODES:,} values"),
])
def test_bad_yaml_files_give_one_clear_line(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    line = _one_clear_line(_cli("config", "show", str(path)))
    assert expected in line and "bad.yaml" in line


def test_yaml_limits_keep_what_yaml_allows() -> None:
    # merge keys may repeat a merged key; aliases within the budget are fine; floats as in YAML 1.2
    data = load_yaml("base: &b {group_size: 4, env_groups: 1}\nrollout:\n  <<: *b\n  group_size: 8\n"
                     "lists: [*b, *b]\nlr: 1e-6\n")
    assert data["rollout"] == {"group_size": 8, "env_groups": 1} and data["lists"] == [data["base"]] * 2
    assert data["lr"] == 1e-6
    nested = "[" * (YAML_MAX_DEPTH - 1) + "]" * (YAML_MAX_DEPTH - 1)
    assert load_yaml(nested) is not None
    with pytest.raises(yaml.YAMLError, match="duplicate key"):
        load_yaml("{a: 1, b: 2, a: 3}")


@pytest.mark.parametrize("override", ["rollout.format_penalty=.nan", "rollout.format_penalty=.inf",
                                      "rollout.temperature=-.inf", "rollout.format_penalty=1e400"])
def test_nan_and_infinity_are_refused(override: str) -> None:
    with pytest.raises(ConfigError, match="expected a finite number"):
        load_config(overrides=[override])


@pytest.mark.parametrize("override", ["trainer.actor_lr=.nan", "trainer.actor_lr=.inf"])
def test_nan_is_refused_in_component_options_too(override: str) -> None:
    line = _one_clear_line(_cli("config", "show", override))
    assert "trainer.actor_lr: expected a finite number" in line


@settings(max_examples=40, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_every_float_key_accepts_exactly_the_finite_numbers(value: float) -> None:
    if math.isfinite(value) and value >= 0:
        assert load_config(overrides=[f"rollout.temperature={value!r}"]).rollout.temperature == value
    elif not math.isfinite(value):
        text = ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
        with pytest.raises(ConfigError, match="finite"):
            load_config(overrides=[f"rollout.temperature={text}"])


@pytest.mark.parametrize(("override", "limit"), [("rollout.group_size=100000000000000000000", "4096"),
                                                 ("rollout.env_groups=10000000", "65536"),
                                                 ("rollout.max_new_tokens=100000000000", "1048576")])
def test_resource_keys_have_upper_bounds(override: str, limit: str) -> None:
    with pytest.raises(ConfigError, match=rf"must be an integer in \[1, {limit}\]"):
        load_config(overrides=[override])


def test_a_huge_value_is_not_echoed_whole() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(overrides=["rollout.group_size=[" + ",".join(["123456789"] * 10_000) + "]"])
    assert len(str(info.value)) < ECHO_LIMIT + 100


@pytest.mark.parametrize("command", [["config", "show"], ["rollout", "env=bandit", "rollout.env_groups=1",
                                                          "rollout.group_size=1"]])
@pytest.mark.parametrize(("override", "wanted"), [("filter=top_pp", "did you mean 'top_p'"),
                                                  ("estimator=gaee", "did you mean 'gae'"),
                                                  ("trainer=torhc", "did you mean 'torch'"),
                                                  ("diagnostics=[colapse]", "did you mean 'collapse'")])
def test_unknown_component_names_are_refused_by_every_command(tmp_path: Path, command: list[str], override: str,
                                                              wanted: str) -> None:
    extra = ["--run-dir", str(tmp_path / "r")] if command[0] == "rollout" else []
    line = _one_clear_line(_cli(*command, override, *extra))
    assert wanted in line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("args", "wanted"), [(["train", "--steps", "3"], "No such option '--steps'"),
                                              (["train", "--run-dri", "x"], "Did you mean '--run-dir'?"),
                                              (["rollout", "--step", "2"], "Did you mean '--steps'?")])
def test_unknown_flags_are_click_errors(args: list[str], wanted: str) -> None:
    res = _cli(*args)
    assert res.exit_code == 2 and wanted in res.output and "two config files" not in res.output


def test_a_hook_function_without_hookimpl_is_named_in_a_warning() -> None:
    class Forgetful:
        @hookimpl
        def ragen_register_filters(self, registry):  # marked: fine
            pass

        def ragen_register_envs(self, registry):  # not marked: pluggy would ignore it
            pass

        def ragen_helper(self):  # not a hook name: no warning
            pass

    pm = RagenPluginManager()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pm.register(Forgetful(), name="forgetful")
    messages = [str(w.message) for w in caught if issubclass(w.category, PluginWarning)]
    assert messages == ["plugin 'forgetful': ragen_register_envs is not marked @hookimpl, so it is never called; "
                        "decorate it with ragen_core.hookimpl"]
