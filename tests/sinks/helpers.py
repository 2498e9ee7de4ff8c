"""Helpers of the sink tests: run ``ragen rollout`` through the CLI, read back metrics.jsonl, TensorBoard event files
and W&B offline runs with the packages' own readers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.needs import needs_plugin

ROLLOUT = ["env=sokoban", "rollout.env_groups=2", "rollout.group_size=2", "rollout.max_turn=2"]


def require(module: str) -> Any:
    """Import ``module``; skip the test where it is not installed, except in CI (``RAGEN_REQUIRE_SINKS`` or ``CI``
    set), where it fails."""
    if os.environ.get("RAGEN_REQUIRE_SINKS") or os.environ.get("CI"):
        return __import__(module)
    return pytest.importorskip(module)


def rollout(run_dir: Path, *overrides: str, steps: int = 3) -> Any:
    """``ragen rollout`` (random policy) through the real CLI and the installed plugins; returns click's result."""
    from ragen_core.cli import build_cli
    from ragen_core.plugins import build_plugin_manager

    # the runs use the built-in Sokoban: with only the core and this plugin installed, these tests skip
    needs_plugin("ragen-plugins-envs", "the sink runs use the envs plugin's sokoban")
    args = ["rollout", *ROLLOUT, *overrides, "--steps", str(steps), "--run-dir", str(run_dir)]
    return CliRunner().invoke(build_cli(build_plugin_manager()), args)


def records(run_dir: Path) -> list[dict[str, float]]:
    """The lines of ``metrics.jsonl``."""
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def tb_scalars(log_dir: Path) -> tuple[dict[str, dict[int, float]], dict[str, str]]:
    """Scalars (tag -> step -> value) and texts (tag -> text) of the event files in ``log_dir``, read with
    TensorBoard's EventAccumulator."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    tags = acc.Tags()
    scalars = {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in tags["scalars"]}
    texts = {tag: acc.Tensors(tag)[0].tensor_proto.string_val[0].decode() for tag in tags["tensors"]}
    return scalars, texts


def wandb_records(run_dir: Path) -> list[dict[str, Any]]:
    """The records of the one W&B offline run under ``run_dir/wandb``, read with W&B's own transaction-log reader
    (``wandb leet inspect --json``)."""
    found = sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(found) == 1, f"expected one offline W&B run under {run_dir}/wandb, found {found}"
    out = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(found[0])],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0 and "No such command" in out.stderr + out.stdout:
        pytest.skip("this wandb has no 'wandb leet inspect' to read offline runs back")
    assert out.returncode == 0, out.stderr[-2000:]
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def log_events(output: str, event: str) -> list[dict[str, Any]]:
    """The JSON log lines of ``output`` whose ``event`` is ``event``."""
    found = []
    for line in output.splitlines():
        if line.startswith("{") and f'"{event}"' in line:
            data = json.loads(line)
            if data.get("event") == event:
                found.append(data)
    return found
