"""Learning regression tests: the native trainer must take the tiny model from chance to >= 0.9 validation success.

The task is ``pair`` (tests/torch/learning_envs.py): two turns, a reward decided by the first turn's answer and paid
only after the second, so learning it needs the gradient's sign, the response masks, the advantage broadcast (GRPO)
or the value bootstrapping (PPO with GAE) and the sampled-token bookkeeping all to be right, and credit to reach an
earlier turn. Chance is 0.5 (two names, format learned by the warm-start). Each run takes about a minute on one CPU
thread. Breaking the policy-gradient sign in ``plugins/ragen_plugins_torch/losses.py`` makes both fail (validation
success falls towards 0).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from click.testing import CliRunner  # noqa: E402

from ragen_core.cli import build_cli  # noqa: E402
from ragen_core.plugins import build_plugin_manager  # noqa: E402
from tests.plain_recipe import PLAIN  # noqa: E402

from . import learning_envs  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CUE = [
    *PLAIN, "envs=[{name: pair}]", "run.seed=0", "filter=none",
    "rollout.think=false", "rollout.max_turn=2", "rollout.max_actions_per_turn=1", "rollout.max_new_tokens=4",
    "rollout.env_groups=16", "rollout.group_size=8", "rollout.val_env_groups=32", "rollout.val_group_size=2",
    "trainer.name=torch", "trainer.model=tiny", "trainer.warm_start_steps=100", "trainer.warm_start_lr=0.002",
    "trainer.warm_start_groups=256", "trainer.actor_lr=0.0005", "trainer.critic_lr=0.001", "trainer.ppo_epochs=1",
    "trainer.mini_batch_size=32", "trainer.micro_batch_size=32", "trainer.val_every=0", "trainer.save_every=0",
]


def train(run_dir: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> list[dict[str, Any]]:
    monkeypatch.setenv("RAGEN_PLUGINS", learning_envs.__name__)  # the trainer builds its own plugin manager
    res = CliRunner().invoke(build_cli(build_plugin_manager()), ["train", *CUE, *extra, "--run-dir", str(run_dir)])
    assert res.exit_code == 0, res.output + repr(res.exception)
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def validations(lines: list[dict[str, Any]]) -> list[float]:
    return [line["val/success"] for line in lines if "val/success" in line]


@pytest.mark.parametrize(("estimator", "steps"), [("grpo", 10), ("gae", 12)])
def test_the_trainer_learns_a_task_that_needs_credit_across_turns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  estimator: str, steps: int) -> None:
    lines = train(tmp_path / "run", monkeypatch, f"estimator={estimator}", f"trainer.steps={steps}")
    vals = validations(lines)
    assert len(vals) == 2, vals  # step 0 (after the format warm-start) and the end
    assert 0.3 <= vals[0] <= 0.7, f"{estimator}: the warm-start should leave the policy at chance, got {vals}"
    assert vals[-1] >= 0.9, f"{estimator}: validation success {vals[0]:.3f} -> {vals[-1]:.3f}, want >= 0.9"
