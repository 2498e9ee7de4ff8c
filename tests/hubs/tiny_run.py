"""The two-step ``ragen train`` of the tiny model that each hub adapter's tests run on one of its envs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.needs import needs_plugin
from tests.plain_recipe import PLAIN

__all__ = ["train_two_steps"]

#: a plain recipe at the smallest shape: 2 groups of 2, one validation group, no warm-start, no checkpoints
TINY = [*PLAIN, "rollout.env_groups=2", "rollout.group_size=2", "rollout.max_new_tokens=8", "rollout.val_env_groups=1",
        "rollout.val_group_size=1", "trainer.name=torch", "trainer.model=tiny", "estimator=grpo", "filter=none",
        "trainer.mini_batch_size=4", "trainer.micro_batch_size=2", "trainer.warm_start_steps=0", "trainer.save_every=0",
        "trainer.val_every=0", "trainer.steps=2", "run.log_level=error"]


def train_two_steps(run: Path, envs: str, *overrides: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Train two steps on ``envs`` (an ``envs=[...]`` override) in process; the run's metrics and samples."""
    needs_plugin("ragen-plugins-torch", "the training run uses the torch trainer and its tiny model")
    pytest.importorskip("torch")
    from click.testing import CliRunner

    from ragen_core.cli import build_cli
    from ragen_core.plugins import build_plugin_manager

    res = CliRunner().invoke(build_cli(build_plugin_manager()), ["train", *TINY, envs, *overrides, "--run-dir", str(run)])
    assert res.exit_code == 0, res.output
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [0, 1, 2] and samples
    return metrics, samples
