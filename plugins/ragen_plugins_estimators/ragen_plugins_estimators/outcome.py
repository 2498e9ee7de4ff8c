"""Critic-free estimators: GRPO, Dr.GRPO, RLOO, REINFORCE++ and REINFORCE++ with a group baseline.

Scores: a row's score is the sum of its token rewards on generated tokens (veRL sums the whole row; rewards outside
the mask are ignored here). Group-based estimators work on *episodes*: without ``episode_ids`` every row is its own
episode; with them, an episode's score is the sum of the scores of all its rows, each episode counts once in its
group's statistics, and every row of the episode receives the episode's advantage on its generated tokens.
"""

from __future__ import annotations

import attrs
import numpy as np

from ragen_core.protocols import AdvantageInput, AdvantageOutput
from ragen_plugins_estimators._common import (
    episode_advantages,
    episode_scores,
    masked_whiten,
    output,
    positive,
    prepare,
    unit_interval,
)

__all__ = [
    "GRPO",
    "RLOO",
    "DrGRPO",
    "DrGRPOConfig",
    "GRPOConfig",
    "RLOOConfig",
    "ReinforcePP",
    "ReinforcePPBaseline",
    "ReinforcePPBaselineConfig",
    "ReinforcePPConfig",
]


@attrs.frozen
class GRPOConfig:
    """Options of :class:`GRPO`.

    :ivar epsilon: added to the group standard deviation (veRL: 1e-6).
    :ivar norm_by_std: divide by the group std (False gives Dr.GRPO's advantage; veRL's
        ``norm_adv_by_std_in_grpo``).
    """

    epsilon: float = attrs.field(default=1e-6, validator=positive)
    norm_by_std: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))


class GRPO:
    """GRPO: ``A = (score - mean_group) / (std_group + epsilon)`` broadcast to the row's generated tokens.

    ``std`` is the unbiased standard deviation of the group's episode scores; a group with one episode uses mean 0
    and std 1 (so ``A = score / (1 + epsilon)``); equal scores give 0. As veRL's ``compute_grpo_outcome_advantage``
    (``verl/trainer/ppo/core_algos.py``), returns equal the advantages. Episodes: see the module docstring.
    """

    config_cls = GRPOConfig
    needs_critic = False

    def __init__(self, config: GRPOConfig | None = None) -> None:
        self.config = config if config is not None else GRPOConfig()

    def compute(self, inputs: AdvantageInput) -> AdvantageOutput:
        """Return group-normalised outcome advantages (returns = advantages)."""
        p = prepare(inputs)
        row_adv = episode_advantages(p, eps=self.config.epsilon, norm_by_std=self.config.norm_by_std)
        adv = np.broadcast_to(row_adv[:, None], p.mask.shape)
        return output(adv, adv, p.mask)


@attrs.frozen
class DrGRPOConfig:
    """Dr.GRPO takes no options (no std, so no epsilon)."""


class DrGRPO:
    """Dr.GRPO's advantage: ``A = score - mean_group`` (GRPO without the division by the std).

    A group with one episode uses mean 0 (``A = score``). Dr.GRPO's length correction is not here: it is the loss
    aggregation ``seq-mean-token-sum``. Returns equal the advantages. Episodes: see the module docstring.
    """

    config_cls = DrGRPOConfig
    needs_critic = False

    def __init__(self, config: DrGRPOConfig | None = None) -> None:
        self.config = config if config is not None else DrGRPOConfig()

    def compute(self, inputs: AdvantageInput) -> AdvantageOutput:
        """Return mean-centred outcome advantages (returns = advantages)."""
        p = prepare(inputs)
        row_adv = episode_advantages(p, eps=1.0, norm_by_std=False)
        adv = np.broadcast_to(row_adv[:, None], p.mask.shape)
        return output(adv, adv, p.mask)


@attrs.frozen
class RLOOConfig:
    """RLOO takes no options."""


class RLOO:
    """RLOO: ``A = score - mean(scores of the other episodes of the group)``; a group of one gives ``A = score``.

    Matches veRL's ``compute_rloo_outcome_advantage`` (``verl/trainer/ppo/core_algos.py``), which computes
    ``score * n / (n - 1) - mean * n / (n - 1)`` for a group of ``n > 1`` (the same quantity) and leaves the score
    unchanged for ``n = 1``; no whitening, returns equal the advantages. Episodes: see the module docstring.
    """

    config_cls = RLOOConfig
    needs_critic = False

    def __init__(self, config: RLOOConfig | None = None) -> None:
        self.config = config if config is not None else RLOOConfig()

    def compute(self, inputs: AdvantageInput) -> AdvantageOutput:
        """Return leave-one-out outcome advantages (returns = advantages)."""
        p = prepare(inputs)
        scores = episode_scores(p)
        ep_adv = scores.copy()
        for g in np.unique(p.episode_groups):
            idx = p.episode_groups == g
            n = int(idx.sum())
            if n > 1:
                s = scores[idx]
                ep_adv[idx] = s - (s.sum() - s) / (n - 1)
        adv = np.broadcast_to(ep_adv[p.episodes][:, None], p.mask.shape)
        return output(adv, adv, p.mask)


@attrs.frozen
class ReinforcePPConfig:
    """Options of :class:`ReinforcePP`.

    :ivar gamma: discount per token (veRL's ``algorithm.gamma``, 1.0).
    :ivar reset_at_masked: False (default, veRL 0.9.1's ``compute_reinforce_plus_plus_outcome_advantage``): the
        running return is carried across masked tokens over generated tokens only (as :class:`GAE` does),
        ``G_t = r_t + gamma * G_{next generated token}``. True restarts the running return at every masked token
        (older veRL releases, RAGEN's fork), so in a multi-turn row each turn only sees the rewards of its own
        tokens.
    """

    gamma: float = attrs.field(default=1.0, validator=unit_interval)
    reset_at_masked: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))


class ReinforcePP:
    """REINFORCE++ (veRL's ``compute_reinforce_plus_plus_outcome_advantage``): discounted returns, then whitened.

    veRL 0.9.1 walks each row backwards with ``running = r_t + gamma * running`` at generated tokens and carries
    ``running`` unchanged through masked ones: the return at a generated token is ``r_t + gamma * G`` of the next
    generated token. ``reset_at_masked=True`` (older veRL) instead restarts it at a masked token. Masked rewards
    never count. Advantages are the returns whitened over all generated tokens of the batch (veRL's
    ``masked_whiten``, unbiased variance, ``+ 1e-8``); returns are the unwhitened discounted returns.
    """

    config_cls = ReinforcePPConfig
    needs_critic = False

    def __init__(self, config: ReinforcePPConfig | None = None) -> None:
        self.config = config if config is not None else ReinforcePPConfig()

    def compute(self, inputs: AdvantageInput) -> AdvantageOutput:
        """Return whitened discounted returns as advantages, and the raw returns."""
        p = prepare(inputs)
        gamma = self.config.gamma
        b, t = p.rewards.shape
        returns = np.zeros((b, t), dtype=np.float64)
        running = np.zeros(b, dtype=np.float64)
        for j in range(t - 1, -1, -1):
            m = p.mask[:, j]
            g = p.rewards[:, j] + gamma * running
            returns[:, j] = np.where(m, g, 0.0)
            if self.config.reset_at_masked:
                running = np.where(m, g, 0.0)
            else:
                running = np.where(m, g, running)
        adv = masked_whiten(returns, p.mask)
        return output(adv, returns, p.mask)


@attrs.frozen
class ReinforcePPBaselineConfig:
    """REINFORCE++ with baseline takes no options (veRL's epsilon argument is unused there)."""


class ReinforcePPBaseline:
    """REINFORCE++ with a group baseline (veRL's ``compute_reinforce_plus_plus_baseline_outcome_advantage``).

    ``score - mean_group`` (a group of one uses mean 0) broadcast to the generated tokens, then whitened over all
    generated tokens of the batch (veRL's ``masked_whiten``). Returns equal the advantages, as in veRL. Episodes:
    see the module docstring.
    """

    config_cls = ReinforcePPBaselineConfig
    needs_critic = False

    def __init__(self, config: ReinforcePPBaselineConfig | None = None) -> None:
        self.config = config if config is not None else ReinforcePPBaselineConfig()

    def compute(self, inputs: AdvantageInput) -> AdvantageOutput:
        """Return whitened group-baselined outcome advantages (returns = advantages)."""
        p = prepare(inputs)
        row_adv = episode_advantages(p, eps=1.0, norm_by_std=False)
        adv = masked_whiten(np.broadcast_to(row_adv[:, None], p.mask.shape), p.mask)
        return output(adv, adv, p.mask)
