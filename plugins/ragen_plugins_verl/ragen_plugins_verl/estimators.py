"""ragen's advantage estimators inside veRL 0.9.1.

veRL's registry (``verl.trainer.ppo.core_algos.register_adv_est``) calls an estimator with the token-level rewards,
the response mask, the ``uid`` group index, the algorithm config and optional reward baselines — no critic values, no
turn structure. :class:`VerlAdvantageFn` wraps any core estimator that needs nothing more (``grpo``, ``drgrpo``,
``rloo``, ``reinforce_pp``, ``reinforce_pp_baseline``, and third-party ones alike) in that signature;
:func:`register_into_verl` registers each under ``ragen_<name>`` (veRL's own ``gae`` and ``grpo`` cannot be
re-registered, and ragen's differ in details such as episode-level statistics). Estimators that need critic values,
turn ids or state keys (``gae``, ``bilevel_gae``, ``gigpo``) are applied by ragen's V1 trainer mode instead
(:mod:`ragen_plugins_verl.verl_trainer`), which has those columns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ragen_core.errors import RagenError
from ragen_core.protocols import AdvantageInput

from .config import VERL_ESTIMATOR_PREFIX
from .dataproto import dense_groups

__all__ = ["VerlAdvantageFn", "register_into_verl", "verl_incompatibility", "verl_name"]


def verl_name(name: str) -> str:
    """The name a ragen estimator has in veRL's registry."""
    return f"{VERL_ESTIMATOR_PREFIX}{name}"


def verl_incompatibility(spec: Any, estimator_cls: Any = None) -> str | None:
    """Why an estimator cannot go through veRL's registry signature, or None when it can."""
    cls = estimator_cls if estimator_cls is not None else spec.load()
    if getattr(spec, "needs_critic", False) or getattr(cls, "needs_critic", False):
        return "it needs critic values, which veRL's registry does not pass (ragen's trainer mode applies it)"
    if getattr(cls, "needs_turn_ids", False):
        return "it needs turn ids, which veRL's registry does not pass (ragen's trainer mode applies it)"
    if getattr(cls, "needs_state_keys", False):
        return "it needs env state keys, which veRL's registry does not pass (ragen's trainer mode applies it)"
    return None


class VerlAdvantageFn:
    """A core estimator in veRL's registered-estimator signature.

    ``fn(token_level_rewards, response_mask, index=None, config=None, reward_baselines=None, **kwargs)`` →
    ``(advantages, returns)`` as tensors like ``token_level_rewards``. ``index`` (veRL's ``uid`` array) groups the
    rows; without it every row is its own group. ``reward_baselines`` (ReMax's) are not used by ragen's estimators
    and are refused rather than ignored.
    """

    def __init__(self, name: str, estimator: Any) -> None:
        self.name = name
        self.estimator = estimator

    def __call__(self, token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None,
                 config: Any = None, reward_baselines: Any = None, **_: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if reward_baselines is not None:
            raise ValueError(f"{verl_name(self.name)}: reward_baselines (ReMax) are not supported by ragen estimators")
        b = token_level_rewards.shape[0]
        groups = dense_groups(list(index))[0] if index is not None else np.arange(b, dtype=np.int64)
        inputs = AdvantageInput(token_rewards=token_level_rewards.detach().double().cpu().numpy(),
                                response_mask=response_mask.detach().long().cpu().numpy(), group_ids=groups)
        out = self.estimator.compute(inputs)
        dtype, device = token_level_rewards.dtype, token_level_rewards.device
        return (torch.as_tensor(np.asarray(out.advantages), dtype=dtype, device=device),
                torch.as_tensor(np.asarray(out.returns), dtype=dtype, device=device))

    def __repr__(self) -> str:
        return f"<ragen estimator {self.name!r} for veRL>"


def register_into_verl(registries: Any) -> dict[str, str]:
    """Register every compatible ragen estimator (default options) in veRL's registry as ``ragen_<name>``.

    Idempotent (a second call in the same process changes nothing). Returns ``{verl name: ragen name}`` of what is
    registered; incompatible estimators are skipped (see :func:`verl_incompatibility`).
    """
    from verl.trainer.ppo import core_algos

    done: dict[str, str] = {}
    for spec in registries.estimators:
        try:
            cls = spec.load()
        except RagenError:
            continue  # a broken third-party estimator must not break veRL's import in every process
        if verl_incompatibility(spec, cls) is not None:
            continue
        name = verl_name(spec.name)
        existing = core_algos.ADV_ESTIMATOR_REGISTRY.get(name)
        if existing is None:
            core_algos.register_adv_est(name)(VerlAdvantageFn(spec.name, spec.create()))
        elif not (isinstance(existing, VerlAdvantageFn) and existing.name == spec.name):
            raise RagenError(f"veRL already has an advantage estimator named {name!r}: {existing!r}",
                             hint="another plugin registered this name in veRL; disable it")
        done[name] = spec.name
    return done
