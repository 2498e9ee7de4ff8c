"""Bad sink set-ups: a configured sink whose package is missing stops before the run starts with the install line;
a sink that fails while the run goes on is reported once, switched off, and nothing else is lost."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.sinks.helpers import log_events, records, require, rollout, tb_scalars


@pytest.mark.parametrize(("sink", "module"), [("tensorboard", "tensorboard"), ("wandb", "wandb")])
def test_a_missing_package_is_a_config_error_before_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            sink: str, module: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed: find_spec → None, import → ImportError
    res = rollout(tmp_path / "run", f"sinks=[console, {sink}]")
    assert res.exit_code == 2
    assert (f"ragen: error: sinks[1]: sink '{sink}' needs {module}, which is not installed" in res.output
            and f"pip install 'ragen[{sink}]'" in res.output), res.output
    assert not (tmp_path / "run").exists()


def test_unknown_sink_gets_a_did_you_mean(tmp_path: Path) -> None:
    res = rollout(tmp_path / "run", "sinks=[tensorbord]")
    assert res.exit_code == 2 and "unknown sink 'tensorbord'; did you mean 'tensorboard'?" in res.output
    assert "known sinks: console, tensorboard, wandb" in res.output


def test_a_failing_sink_warns_once_and_the_run_continues(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require("tensorboard")
    from ragen_plugins_sinks.tensorboard_sink import TensorBoardSink

    real_write = TensorBoardSink.write

    def write(self: Any, step: int, metrics: Any) -> None:
        if step == 2:
            raise OSError(28, "No space left on device")
        real_write(self, step, metrics)

    monkeypatch.setattr(TensorBoardSink, "write", write)
    run_dir = tmp_path / "run"
    res = rollout(run_dir, "sinks=[tensorboard, {name: console, every: 1}]", "run.log_format=json", steps=4)
    assert res.exit_code == 0, res.output
    warnings = log_events(res.output, "sink_failed")
    assert len(warnings) == 1, res.output
    assert warnings[0]["sink"] == "sinks[0] (tensorboard)" and "No space left" in warnings[0]["error"]
    assert [r["step"] for r in records(run_dir)] == [1, 2, 3, 4]  # JSONL has everything
    scalars, _ = tb_scalars(run_dir / "tensorboard")
    assert sorted(scalars["rollout/success"]) == [1]  # written before the failure, flushed at close
    assert "run · step 4" in res.stdout  # the other sink went on
