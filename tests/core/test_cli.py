"""The ragen command line, in process (click's runner) and as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from ragen_core import hookimpl
from ragen_core.cli import build_cli
from ragen_core.plugins import build_plugin_manager

pytestmark = pytest.mark.usefixtures("toy_plugins")


def invoke(*args: str, input: str | None = None, pm: Any = None) -> Any:
    return CliRunner().invoke(build_cli(pm or build_plugin_manager()), list(args), input=input)


def test_plugins_json_lists_plugins_components_and_hooks() -> None:
    res = invoke("plugins", "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    toy = next(p for p in data if p["name"] == "tests.core.toy_plugin")
    assert "ragen_register_envs" in toy["hooks"]
    assert {"kind": "trainer", "name": "toy"} in toy["components"]
    table = invoke("plugins")
    assert table.exit_code == 0 and "trainer:toy" in table.output


def test_envs_json() -> None:
    res = invoke("envs", "--json")
    assert res.exit_code == 0
    items = {e["name"]: e for e in json.loads(res.output)}
    assert items["counter"]["kind"] == "env" and items["counter5"]["env"] == "counter"
    assert invoke("envs").exit_code == 0


def test_envs_long_shows_each_plugin_envs_guide_in_order() -> None:
    res = invoke("envs", "--long")
    assert res.exit_code == 0, res.output
    block = res.output[res.output.index("counter (env, plugin tests.core.toy_plugin)"):]
    assert block.index("  rules: Inc adds one, Dec takes one.") < block.index("  success: the counter equals the target.")
    assert "counter5 (env variant" in res.output
    items = {e["name"]: e for e in json.loads(invoke("envs", "--json").output)}
    assert items["counter"]["guide"]["rules"] == "Inc adds one, Dec takes one."


def test_config_show_resolves_every_default() -> None:
    import yaml

    res = invoke("config", "show", "env=counter", "trainer=toy", "estimator=rtg", "filter=keep_top", "filter.k=1")
    assert res.exit_code == 0, res.output
    data = yaml.safe_load(res.output)
    assert data["filter"] == {"name": "keep_top", "k": 1}
    assert data["trainer"] == {"name": "toy", "steps": 2}
    assert data["rollout"]["group_size"] == 16
    opts = invoke("config", "show", "env=counter", "trainer=toy", "estimator=rtg", "filter=keep_top",
                  "env.options={target: 4}")  # the train and validation plans share these options
    assert "&id" not in opts.output and "*id" not in opts.output  # written out twice, not as a YAML alias
    assert yaml.safe_load(opts.output)["val_envs"][0]["options"] == {"target": 4}
    defaulted = invoke("config", "show", "env=counter", "filter=keep_top")  # the toy plugin offers its trainer
    assert defaulted.exit_code == 0, defaulted.output
    assert "# trainer.name: from the default of plugin tests.core.toy_plugin (not set in the config)" in \
        defaulted.output
    assert yaml.safe_load(defaulted.output)["trainer"]["name"] == "toy"
    unoffered = invoke("config", "show", "env=counter")  # keep_top is the only filter, but not offered as default
    assert "# not resolved: filter: the config names no filter, and no installed plugin offers" in unoffered.output
    unknown = invoke("config", "show", "env=counter", "trainer=torch")
    assert unknown.exit_code == 0 and "# not resolved: trainer: unknown trainer 'torch'" in unknown.output


def test_config_errors_are_one_clear_message() -> None:
    res = invoke("config", "show", "rollout.gruop_size=2")
    assert res.exit_code == 2
    assert res.output.startswith("ragen: error: unknown config key 'rollout.gruop_size'")
    assert "did you mean 'rollout.group_size'" in res.output and "Traceback" not in res.output


def test_play_a_full_episode() -> None:
    res = invoke("play", "counter", "target=2", "--seed", "3", input="Jump\nInc\nInc\n")
    assert res.exit_code == 0, res.output
    assert "Instruction: Move the counter to 2." in res.output
    assert "invalid" in res.output and "Episode over: success" in res.output


def test_play_handles_end_of_input_and_quit() -> None:
    assert "(end of input)" in invoke("play", "counter", input="").output
    assert invoke("play", "counter", input="q\n").exit_code == 0
    res = invoke("play", "countre")
    assert res.exit_code == 1 and "did you mean 'counter'" in res.output


def test_rollout_command(tmp_path: Path) -> None:
    res = invoke("rollout", "env=counter", "rollout.env_groups=2", "rollout.group_size=2", "--policy", "oracle",
                 "--steps", "2", "--run-dir", str(tmp_path / "r"), "trainer=toy", "estimator=rtg")
    assert res.exit_code == 0, res.output
    assert "status: completed" in res.output and "rollout/success" in res.output
    assert len((tmp_path / "r" / "metrics.jsonl").read_text().splitlines()) == 2


def test_train_and_eval_dispatch_to_the_configured_trainer(tmp_path: Path) -> None:
    args = ["env=counter", "trainer=toy", "estimator=rtg", "filter=keep_top", "rollout.env_groups=2",
            "rollout.group_size=2"]
    res = invoke("train", *args, "--run-dir", str(tmp_path / "t"))
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "t" / "summary.json").read_text())["steps"] == 2
    res = invoke("eval", *args, "--run-dir", str(tmp_path / "e"))
    assert res.exit_code == 0, res.output


def test_train_with_missing_trainer_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    res = invoke("train", "env=counter", "trainer=torhc", "estimator=rtg")
    assert res.exit_code == 2 and "unknown trainer 'torhc'" in res.output
    monkeypatch.setenv("RAGEN_DISABLE_PLUGINS", "tests.core.toy_plugin")
    monkeypatch.setenv("RAGEN_PLUGINS", "tests.core.toy_plugin,tests.core.test_cli")
    res = invoke("train", "env=counter2")
    assert res.exit_code == 1 and "no trainer is installed" in res.output and "pip install" in res.output


@hookimpl
def ragen_register_envs(registry: Any) -> None:
    """(Used when this module is loaded as a plugin: an env without trainers.)"""
    registry.register("counter2", "tests.core.toy:CounterEnv")


def test_plugins_add_commands() -> None:
    class Commands:
        @hookimpl
        def ragen_register_commands(self, cli: click.Group) -> None:
            @cli.command("hello")
            def hello() -> None:
                click.echo("hello from a plugin")

    pm = build_plugin_manager(plugins=[Commands()])
    res = invoke("hello", pm=pm)
    assert res.exit_code == 0 and res.output == "hello from a plugin\n"


def run_ragen(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "ragen_core", *args], capture_output=True, text=True, env=full,
                          cwd=Path(__file__).resolve().parents[2], timeout=120)


def test_broken_plugin_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "broken_ragen_plugin.py").write_text("import nonexistent_dependency_xyz\n")
    res = run_ragen("plugins", env={"RAGEN_PLUGINS": "broken_ragen_plugin",
                                    "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})
    assert res.returncode == 1
    assert res.stderr.startswith("ragen: error: RAGEN_PLUGINS names 'broken_ragen_plugin'")
    assert "nonexistent_dependency_xyz" in res.stderr and "Traceback" not in res.stderr


def test_version_and_help() -> None:
    res = run_ragen("--version")
    assert res.returncode == 0 and "ragen, version" in res.stdout
    assert "plugins" in run_ragen("--help").stdout


@pytest.mark.parametrize("extra", [[], ["filter=keep_top", "filter.k=1", "rollout.group_size=3"]])
def test_config_show_prints_the_config_a_run_writes(tmp_path: Path, extra: list[str]) -> None:
    """What ``config show`` previews is what the run records in its ``config.yaml``, for the same arguments."""
    import yaml

    args = ["env=counter", "rollout.env_groups=2", *extra]
    shown = invoke("config", "show", *args)
    assert shown.exit_code == 0, shown.output
    ran = invoke("rollout", *args, "--run-dir", str(tmp_path / "r"))
    assert ran.exit_code == 0, ran.output
    recorded = yaml.safe_load((tmp_path / "r" / "config.yaml").read_text())
    assert yaml.safe_load(shown.output) == recorded
    assert invoke("config", "show", "--command", "rollout", *args).output == shown.output


def test_config_show_for_the_cores_eval_is_the_training_config() -> None:
    """Without the eval plugin, ``ragen eval`` validates the trainer's model with the training config."""
    args = ["env=counter", "rollout.env_groups=2"]
    assert invoke("config", "show", "--command", "eval", *args).output == invoke("config", "show", *args).output
