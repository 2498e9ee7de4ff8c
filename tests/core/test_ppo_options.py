"""The shared PPO options (``ragen_core.starpo.ppo``): RAGEN's defaults, the validators, and field ordering."""

from __future__ import annotations

import attrs
import pytest

from ragen_core.starpo.ppo import PPOOptions, leading


def test_defaults_are_ragens() -> None:
    o = PPOOptions()
    assert (o.actor_lr, o.critic_lr, o.ppo_epochs, o.mini_batch_size, o.grad_clip, o.value_clip) == (
        1e-6, 1e-5, 1, 32, 1.0, 0.5)
    assert (o.clip_low, o.clip_high, o.dual_clip, o.entropy_coeff) == (0.2, 0.28, 3.0, 0.001)
    assert (o.use_kl_loss, o.kl_coeff, o.kl_estimator, o.loss_agg) == (False, 0.001, "low_var_kl", "token-mean")


@pytest.mark.parametrize("key, bad, message", [
    ("actor_lr", 0.0, "'actor_lr' must be > 0: 0.0"), ("critic_lr", -1e-5, "'critic_lr' must be > 0"),
    ("ppo_epochs", 0, "'ppo_epochs' must be > 0"), ("mini_batch_size", 0, "'mini_batch_size' must be > 0"),
    ("grad_clip", 0.0, "'grad_clip' must be > 0"), ("clip_low", -0.1, "'clip_low' must be >= 0: -0.1"),
    ("clip_high", -0.1, "'clip_high' must be >= 0"), ("entropy_coeff", -1.0, "'entropy_coeff' must be >= 0"),
    ("kl_coeff", -1.0, "'kl_coeff' must be >= 0"),
])
def test_validators_refuse_out_of_range_values(key: str, bad: float, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        PPOOptions(**{key: bad})
    PPOOptions(**{key: 1e-9 if isinstance(bad, float) else 1})  # the smallest sensible value passes


def test_leading_puts_a_subclass_fields_first() -> None:
    @attrs.define(field_transformer=leading("model", "steps"))
    class Mine(PPOOptions):
        extra: int = 0
        steps: int = 5
        model: str = "m"

    names = [f.name for f in attrs.fields(Mine)]
    assert names[:2] == ["model", "steps"] and names[-1] == "extra"
    assert names[2:-1] == [f.name for f in attrs.fields(PPOOptions)]
    assert Mine().actor_lr == 1e-6 and Mine(steps=2).steps == 2
