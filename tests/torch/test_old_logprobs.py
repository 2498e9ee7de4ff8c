"""``trainer.old_logprobs``: the sampler's log-probs are the trainer's, so using them as PPO's old log-probs trains
alike without the extra pass."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

from safetensors.torch import load_file  # noqa: E402

from tests.torch.test_trainer import step_lines, train  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

#: several mini-batches and two epochs, so that the ratio's denominator matters after the first mini-batch
SHAPE = ["estimator=grpo", "trainer.steps=1", "trainer.mini_batch_size=2", "trainer.micro_batch_size=2",
         "trainer.ppo_epochs=2", "trainer.actor_lr=0.01"]


def test_rollout_log_probs_train_like_recomputed_ones(tmp_path: Path) -> None:
    recomputed = step_lines(train(tmp_path / "recompute", *SHAPE))[1]
    reused = step_lines(train(tmp_path / "rollout", *SHAPE, "trainer.old_logprobs=rollout"))[1]
    # the sampler's log-probs are the trainer's to float noise (the recompute run measures the gap) ...
    assert 0.0 <= recomputed["actor/rollout_logp_diff_max"] < 1e-4
    assert "actor/rollout_logp_diff_max" not in reused
    # ... so the update is the same: the clipped surrogate, the clip fraction, the KL to the old policy (non-zero
    # here: the later mini-batches and the second epoch are off the old policy) and the trained weights
    assert recomputed["actor/ppo_kl"] != 0.0
    for key in ("actor/pg_loss", "actor/pg_clipfrac", "actor/ppo_kl", "actor/grad_norm"):
        assert reused[key] == pytest.approx(recomputed[key], rel=1e-3, abs=1e-5), key
    a = load_file(tmp_path / "recompute" / "checkpoints" / "step_000001" / "actor" / "model.safetensors")
    b = load_file(tmp_path / "rollout" / "checkpoints" / "step_000001" / "actor" / "model.safetensors")
    assert a.keys() == b.keys()
    for name in a:
        assert (a[name] - b[name]).abs().max() < 1e-5, name
