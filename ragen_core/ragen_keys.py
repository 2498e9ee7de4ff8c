"""RAGEN's own config keys, mapped to ragen's for the "unknown config key" hint.

A user coming from RAGEN writes its Hydra keys (``es_manager.train.env_groups=8``); ragen refuses them as unknown,
and :func:`ragen_hint` says which ragen key to use instead. The table holds the most used keys of the mapping in
docs/from_ragen.md (a test checks that every one is there, with the same ragen key); any other key under one of
RAGEN's own sections gets a pointer to that page.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["RAGEN_KEYS", "RAGEN_SECTIONS", "ragen_hint"]

#: RAGEN's key -> the ragen key (or component section) that replaces it
RAGEN_KEYS = {
    "es_manager.train.env_groups": "rollout.env_groups",
    "es_manager.train.group_size": "rollout.group_size",
    "es_manager.val.env_groups": "rollout.val_env_groups",
    "es_manager.val.group_size": "rollout.val_group_size",
    "es_manager.format_penalty": "rollout.format_penalty",
    "agent_proxy.max_turn": "rollout.max_turn",
    "agent_proxy.max_actions_per_turn": "rollout.max_actions_per_turn",
    "agent_proxy.enable_think": "rollout.think",
    "actor_rollout_ref.rollout.response_length": "rollout.max_new_tokens",
    "actor_rollout_ref.rollout.temperature": "rollout.temperature",
    "actor_rollout_ref.rollout.rollout_filter_strategy": "filter",
    "actor_rollout_ref.rollout.rollout_filter_value": "filter.value",
    "actor_rollout_ref.actor.optim.lr": "trainer.actor_lr",
    "actor_rollout_ref.actor.ppo_epochs": "trainer.ppo_epochs",
    "actor_rollout_ref.actor.entropy_coeff": "trainer.entropy_coeff",
    "actor_rollout_ref.actor.loss_agg_mode": "trainer.loss_agg",
    "algorithm.adv_estimator": "estimator",
    "critic.optim.lr": "trainer.critic_lr",
    "model_path": "trainer.model",
    "trainer.total_training_steps": "trainer.steps",
    "trainer.test_freq": "trainer.val_every",
    "trainer.save_freq": "trainer.save_every",
    "trainer.experiment_name": "run.name",
}

#: top-level sections of RAGEN's config that ragen has no section of the same name for
RAGEN_SECTIONS = ("es_manager", "agent_proxy", "actor_rollout_ref", "algorithm", "critic", "custom_envs", "lora",
                  "model_path", "system")


def ragen_hint(key: str, value: Any = None) -> str | None:
    """The hint for unknown config key ``key`` (a dotted path) holding ``value``, when it is RAGEN's, else None.

    ``value`` is searched for RAGEN's full keys: ``es_manager.train.env_groups=8`` reaches the config as the unknown
    top-level key ``es_manager`` holding ``{"train": {"env_groups": 8}}``.
    """
    keys, todo = [], [(key, value)]
    while todo:
        path, data = todo.pop(0)
        keys.append(path)
        todo += [(f"{path}.{k}", v) for k, v in data.items()] if isinstance(data, Mapping) else []
    known = [f"{k!r} is RAGEN's key; ragen's is {RAGEN_KEYS[k]!r}" for k in keys if k in RAGEN_KEYS]
    if known:
        return "; ".join(known) + " (docs/from_ragen.md)"
    return "RAGEN's keys map to ragen's in docs/from_ragen.md" if key.split(".")[0] in RAGEN_SECTIONS else None
