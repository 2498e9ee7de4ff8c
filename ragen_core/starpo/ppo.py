"""The PPO options every StarPO trainer takes, in one place (no torch here: configs are validated before any
trainer is built).

A trainer's config class subclasses :class:`PPOOptions`, so the options keep the same keys (``trainer.actor_lr``,
``trainer.clip_high``, ...), defaults (RAGEN's) and validators under ``trainer: torch`` and ``trainer: verl``, and a
config moves between trainers by changing the name. A subclass may redocument a field for its trainer (an
``:ivar name:`` line in its own docstring wins) and add cross-field checks in ``__attrs_post_init__``; attrs puts
inherited fields first, so ``field_transformer=leading("model", "steps")`` lists the trainer's own leading fields
before them (in the docs and in ``config.yaml``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import attrs

__all__ = ["PPOOptions", "leading"]


def leading(*names: str) -> Callable[[type, list[attrs.Attribute[Any]]], list[attrs.Attribute[Any]]]:
    """An attrs ``field_transformer`` that puts the fields ``names`` first, in this order."""
    def transform(_cls: type, fields: list[attrs.Attribute[Any]]) -> list[attrs.Attribute[Any]]:
        first = sorted((f for f in fields if f.name in names), key=lambda f: names.index(f.name))
        return [*first, *(f for f in fields if f.name not in names)]

    return transform


@attrs.define
class PPOOptions:
    """The PPO options shared by the trainers (RAGEN's defaults; tiny CPU models need larger lrs).

    :ivar actor_lr: AdamW learning rate of the policy.
    :ivar lr_warmup_steps: the policy's learning rate rises linearly over the first this many training steps
        (``actor_lr * step / lr_warmup_steps`` at steps 1, 2, ...; veRL's ``actor.optim.lr_warmup_steps``, whose
        first step has rate 0). A fresh AdamW moves every parameter by about the full rate in its first updates,
        which can break a warm-started format in one step. 0: none.
    :ivar critic_lr: AdamW learning rate of the critic (estimators that need one: ``gae``, ``bilevel_gae``).
    :ivar ppo_epochs: passes over each step's samples.
    :ivar mini_batch_size: samples per optimiser step.
    :ivar clip_low: PPO ratio clip below 1: the ratio is clipped to ``[1 - clip_low, 1 + clip_high]``.
    :ivar clip_high: PPO ratio clip above 1 (decoupled, DAPO's clip-higher).
    :ivar dual_clip: dual-clip constant ``c``: for negative advantages the loss is capped at ``-c * A`` (None: off).
    :ivar entropy_coeff: weight of the entropy bonus subtracted from the policy loss.
    :ivar use_kl_loss: add a KL loss to a frozen copy of ``model`` (the reference; loaded once more).
    :ivar kl_coeff: weight of the KL loss.
    :ivar kl_estimator: per-token KL estimate: ``k1`` (log-ratio), ``k2`` (half squared log-ratio), ``k3`` or
        ``low_var_kl`` (``(r - 1) - log r``, clamped to [-10, 10]).
    :ivar loss_agg: loss aggregation: ``token-mean`` (every token weighs the same; PPO), ``seq-mean-token-mean``
        (mean per sequence, then over sequences; GRPO) or ``seq-mean-token-sum`` (sum per sequence; Dr.GRPO).
    :ivar grad_clip: gradient norm clip of the actor and the critic.
    :ivar value_clip: clip of the value change in the critic loss (None: off).
    """

    actor_lr: float = attrs.field(default=1e-6, validator=attrs.validators.gt(0))
    lr_warmup_steps: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    critic_lr: float = attrs.field(default=1e-5, validator=attrs.validators.gt(0))
    ppo_epochs: int = attrs.field(default=1, validator=attrs.validators.gt(0))
    mini_batch_size: int = attrs.field(default=32, validator=attrs.validators.gt(0))
    clip_low: float = attrs.field(default=0.2, validator=attrs.validators.ge(0))
    clip_high: float = attrs.field(default=0.28, validator=attrs.validators.ge(0))
    dual_clip: float | None = 3.0
    entropy_coeff: float = attrs.field(default=0.001, validator=attrs.validators.ge(0))
    use_kl_loss: bool = False
    kl_coeff: float = attrs.field(default=0.001, validator=attrs.validators.ge(0))
    kl_estimator: Literal["k1", "k2", "k3", "low_var_kl"] = "low_var_kl"
    loss_agg: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"] = "token-mean"
    grad_clip: float = attrs.field(default=1.0, validator=attrs.validators.gt(0))
    value_clip: float | None = 0.5
