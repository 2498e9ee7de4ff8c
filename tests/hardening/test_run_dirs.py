"""Run directories never mix or lose a run's data: created exclusively, names that stay under run.output_dir, and no
new run in a folder that already holds one."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragen_core import runner
from ragen_core.cli import build_cli
from ragen_core.config import load_config, resolve_config
from ragen_core.errors import ConfigError, RagenError
from ragen_core.plugins import build_plugin_manager, collect_registries
from ragen_core.runner import new_run_dir, start_run
from tests.core.toy import ToyPlugin, toy_config_overrides


class _FrozenClock(dt.datetime):
    @classmethod
    def now(cls, tz=None):  # every run starts in the same second
        return cls(2026, 12, 2, 4, 0, 0)


def test_runs_started_in_the_same_second_get_their_own_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    """Eight threads create a run folder of one name at once (as 4 parallel `ragen rollout run.name=same` did, 3 of
    which shared a folder): eight distinct, new folders, the first without a suffix."""
    monkeypatch.setattr(runner._dt, "datetime", _FrozenClock)
    made: list[Path] = []
    barrier = threading.Barrier(8)

    def make() -> None:
        barrier.wait()
        made.append(new_run_dir(tmp_path, "same", "rollout"))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    names = sorted(p.name for p in made)
    assert len(set(names)) == 8 and all(p.is_dir() and not any(p.iterdir()) for p in made)
    assert "same-rollout-20261202-040000" in names
    assert {n.removeprefix("same-rollout-20261202-040000") for n in names} == {"", *(f"-{i}" for i in range(2, 9))}


def _toy(tmp_path: Path, *overrides: str):
    pm = build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1"}, plugins=[ToyPlugin()])
    regs = collect_registries(pm)
    return resolve_config(load_config(overrides=[*toy_config_overrides(), f"run.output_dir={tmp_path / 'runs'}",
                                                 *overrides]), regs, pm), regs, pm


def test_a_new_run_refuses_a_folder_that_holds_files(tmp_path: Path) -> None:
    resolved, regs, pm = _toy(tmp_path)
    used = tmp_path / "used"
    used.mkdir()
    (used / "metrics.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(RagenError, match="is not empty") as info:
        start_run(resolved, regs, pm, "rollout", used)
    assert "--resume" in info.value.hint
    assert (used / "metrics.jsonl").read_text() == '{"step": 1}\n' and not (used / "config.yaml").exists()
    # an empty or missing folder is fine, and a resumed run continues in its own
    (tmp_path / "empty").mkdir()
    assert start_run(resolved, regs, pm, "rollout", tmp_path / "empty").run_dir == tmp_path / "empty"
    assert start_run(resolved, regs, pm, "rollout", tmp_path / "new" / "run").run_dir.is_dir()
    assert start_run(resolved, regs, pm, "rollout", used, continue_run=True).run_dir == used


def test_the_rollout_command_refuses_a_used_run_dir(tmp_path: Path) -> None:
    cli = build_cli(build_plugin_manager())
    first = CliRunner().invoke(cli, ["rollout", "env=bandit", "rollout.env_groups=1", "rollout.group_size=1",
                                     "--run-dir", str(tmp_path / "r")])
    assert first.exit_code == 0, first.output
    config = (tmp_path / "r" / "config.yaml").read_text()
    again = CliRunner().invoke(cli, ["rollout", "env=frozenlake", "--run-dir", str(tmp_path / "r")])
    assert again.exit_code != 0 and "is not empty" in again.output
    assert (tmp_path / "r" / "config.yaml").read_text() == config


@pytest.mark.parametrize("name", ["../../x", "a/b", "..", ".", "", " ", "a\\b", "bad\nname"])
def test_run_names_cannot_leave_the_output_folder(name: str) -> None:
    with pytest.raises(ConfigError, match="plain folder name"):
        load_config(overrides=[f"run.name={name!r}" if name.strip() != name or "\n" in name else f"run.name={name}"])


def test_plain_run_names_are_accepted() -> None:
    for name in ("tiny-bandit", "exp_1.5", "run name with spaces", "日本"):
        assert load_config(overrides=[f"run.name={name}"]).run.name == name
