"""Overrides that take `ragen train`'s embedded preset back to plain settings, for tests that run the native trainer
without a config file to test its machinery rather than the preset's recipe.

The preset (plugins/ragen_plugins_torch/.../presets/cpu_default.yaml, the 3x3 lake) pretrains on the env's dynamics
for 1,000 steps, uses GiGPO, per-turn context, the sampler's log-probs and a learning-rate warmup. A test that
states its own envs and batch shape should not pay for the pretraining nor depend on the recipe; each test's own
overrides come after these, so they still win."""

from __future__ import annotations

__all__ = ["PLAIN"]

PLAIN = [
    "estimator=drgrpo", "rollout.context_mode=full", "trainer.dynamics_steps=0", "trainer.old_logprobs=recompute",
    "trainer.lr_warmup_steps=0", "trainer.dynamics_seed=0", "trainer.actor_lr=0.0002", "trainer.mini_batch_size=32",
    "trainer.micro_batch_size=32", "trainer.warm_start_lr=0.002",
]
