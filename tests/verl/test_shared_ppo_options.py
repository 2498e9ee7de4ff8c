"""Both trainer configs take their PPO options from ``ragen_core.starpo.ppo.PPOOptions`` (none redefines one), so the keys,
defaults and validators cannot drift apart; a PPO option is accepted or refused the same way by both."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ragen_core.starpo.ppo import PPOOptions
from ragen_plugins_verl.config import VerlTrainerConfig

PPO_KEYS = [f.name for f in attrs.fields(PPOOptions)]


def _torch_config() -> type:
    from ragen_plugins_torch.trainer import TorchTrainerConfig

    return TorchTrainerConfig


def test_both_trainer_configs_inherit_every_ppo_option_unchanged() -> None:
    assert len(PPO_KEYS) >= 14
    for cls in (_torch_config(), VerlTrainerConfig):
        assert issubclass(cls, PPOOptions)
        fields = attrs.fields_dict(cls)
        for key in PPO_KEYS:
            assert fields[key].inherited, f"{cls.__name__} redefines the PPO option {key!r}"
            assert fields[key].default == attrs.fields_dict(PPOOptions)[key].default
        assert [f.name for f in attrs.fields(cls)][:2] == ["model", "steps"]


_values = st.one_of(st.floats(-2, 2, allow_nan=False), st.integers(-2, 3), st.none(),
                    st.sampled_from(["k1", "k3", "token-mean", "seq-mean-token-sum"]))


def _outcome(cls: type, key: str, value: object) -> str:
    # the torch trainer's own cross-field check needs a micro-batch that divides the mini-batch
    extra = {"micro_batch_size": 1} if cls.__name__ == "TorchTrainerConfig" else {}
    try:
        cls(**{key: value}, **extra)
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return f"{type(exc).__name__}: {exc}"
    return "ok"


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([k for k in PPO_KEYS if k != "dual_clip"]), _values)
def test_a_ppo_option_is_validated_alike_by_both_trainers(key: str, value: object) -> None:
    """(``dual_clip`` aside: veRL alone refuses values <= 1, its ``clip_ratio_c``; and the torch trainer's own
    check that ``micro_batch_size`` divides ``mini_batch_size`` is not a PPO option's validator.)"""
    assume(key != "mini_batch_size" or isinstance(value, int))
    torch_cfg = _torch_config()
    assert _outcome(torch_cfg, key, value) == _outcome(VerlTrainerConfig, key, value) == _outcome(PPOOptions, key,
                                                                                                   value)


def test_the_config_keys_users_write_are_unchanged() -> None:
    from ragen_core.config import load_config, resolve_config
    from ragen_core.plugins import build_plugin_manager, collect_registries

    overrides = [f"trainer.{k}={v}" for k, v in [("actor_lr", "2e-6"), ("critic_lr", "3e-5"), ("ppo_epochs", 2),
                                                  ("mini_batch_size", 8), ("clip_low", 0.1), ("clip_high", 0.3),
                                                  ("dual_clip", 2.5), ("entropy_coeff", 0.01), ("use_kl_loss", "true"),
                                                  ("kl_coeff", 0.02), ("kl_estimator", "k2"),
                                                  ("loss_agg", "seq-mean-token-mean"), ("grad_clip", 0.5),
                                                  ("value_clip", 0.2)]]
    for trainer in ("torch", "verl"):
        config = load_config(None, ["env=sokoban", f"trainer={trainer}", "rollout.group_size=4", "rollout.env_groups=4",
                                    "trainer.micro_batch_size=4", *overrides])
        pm = build_plugin_manager(config)
        tc = resolve_config(config, collect_registries(pm), pm).trainer
        assert (tc.actor_lr, tc.critic_lr, tc.ppo_epochs, tc.mini_batch_size) == (2e-6, 3e-5, 2, 8), trainer
        assert (tc.clip_low, tc.clip_high, tc.dual_clip, tc.entropy_coeff) == (0.1, 0.3, 2.5, 0.01), trainer
        assert (tc.use_kl_loss, tc.kl_coeff, tc.kl_estimator, tc.loss_agg) == (True, 0.02, "k2",
                                                                              "seq-mean-token-mean"), trainer
        assert (tc.grad_clip, tc.value_clip) == (0.5, 0.2), trainer
    with pytest.raises(Exception, match="trainer.actor_lr"):
        config = load_config(None, ["env=sokoban", "trainer=torch", "trainer.actor_lr=0"])
        pm = build_plugin_manager(config)
        resolve_config(config, collect_registries(pm), pm)
