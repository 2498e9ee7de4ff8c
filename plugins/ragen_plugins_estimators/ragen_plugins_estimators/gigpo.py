"""GiGPO (Feng et al. 2025, "Group-in-Group Policy Optimization for LLM Agent Training")."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable

import attrs
import numpy as np

from ragen_core.protocols import AdvantageInput, AdvantageOutput
from ragen_plugins_estimators._common import (
    Turn,
    episode_advantages,
    freeze_key,
    non_negative,
    output,
    positive,
    prepare,
    row_turns,
    unit_interval,
)

__all__ = ["GiGPO", "GiGPOConfig"]


@attrs.frozen
class GiGPOConfig:
    """Options of :class:`GiGPO`.

    :ivar gamma: discount of turn rewards in the step returns (the paper's 0.95).
    :ivar step_weight: ``omega``, the weight of the step-level advantage (1.0).
    :ivar epsilon: added to both standard deviations (1e-6).
    :ivar norm_by_std: divide by the std at both levels (verl-agent's ``mode="mean_std_norm"``); False is its
        ``"mean_norm"`` (subtract the mean only).
    """

    gamma: float = attrs.field(default=0.95, validator=unit_interval)
    step_weight: float = attrs.field(default=1.0, validator=non_negative)
    epsilon: float = attrs.field(default=1e-6, validator=positive)
    norm_by_std: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))


class GiGPO:
    """GiGPO: an episode-level GRPO advantage plus a step-level advantage among turns from identical states.

    Episode level (the paper's macro advantage): ``A_E = (R - mean) / (std + epsilon)`` over the episodes of a
    group (``group_ids``: same initial state), ``R`` the episode score (sum of its token rewards on generated
    tokens), unbiased std, a group of one uses mean 0 and std 1 — exactly :class:`~.outcome.GRPO`, episodes
    counted once.

    Step level (micro advantage): a turn's reward ``r_k`` is the sum of its token rewards; its step return is
    ``R_k = sum_{j >= k} gamma^(j - k) r_j`` over the rest of its episode. Within a group, all turns (of all the
    group's episodes, repeats inside one episode included) whose state key is identical form a step group:
    ``A_S = (R_k - mean) / (std + epsilon)`` with the unbiased std of the step group; a step group of one gets
    ``A_S = 0``. Token advantage on turn ``k``'s generated tokens: ``A_E + step_weight * A_S``; returns equal the
    advantages.

    Data layout: turns are runs of equal ``turn_ids`` along a row's generated tokens; turn ``k`` of row ``i`` acted
    on state ``state_keys[i][k]`` (compared by value: strings, numbers, tuples, lists — a list equals the tuple
    of its items — dicts, and arrays, which equal arrays of the same shape and items). With
    ``episode_ids`` an episode's turns are its rows' turns in row order, then turn order.

    Matched against verl-agent's ``gigpo/core_gigpo.py``: anchor-state clustering within each group
    (``build_step_group``), discounted per-step returns (``compute_step_discounted_returns``), a singleton step
    group uses its own score as the mean (advantage 0), ``torch.std`` (unbiased) and ``epsilon`` 1e-6 at both
    levels, ``step_advantage_w`` = 1. Differences: verl-agent's default ``mode`` is ``"mean_norm"`` (no std; here
    ``norm_by_std=False``), and its episode statistics by default count every step row of a trajectory
    (``compute_mean_std_cross_all_data=True``); here each episode counts once, the paper's definition.
    """

    config_cls = GiGPOConfig
    needs_critic = False
    needs_turn_ids = True
    needs_state_keys = True

    def __init__(self, config: GiGPOConfig | None = None) -> None:
        self.config = config if config is not None else GiGPOConfig()

    def compute(self, inputs: AdvantageInput) -> AdvantageOutput:
        """Return ``A_E + omega * A_S`` on every generated token (returns = advantages)."""
        c = self.config
        p = prepare(inputs, turns=True)
        b = p.rewards.shape[0]
        keys = inputs.state_keys
        if keys is None:
            raise ValueError("GiGPO needs AdvantageInput.state_keys ([batch][turn] keys of the states acted on)")
        if len(keys) != b:
            raise ValueError(f"state_keys must have one entry per row ({b}), got {len(keys)}")

        row_adv = episode_advantages(p, eps=c.epsilon, norm_by_std=c.norm_by_std)

        by_episode: dict[int, list[Turn]] = defaultdict(list)
        for i in range(b):
            by_episode[int(p.episodes[i])].extend(row_turns(p, i))

        step_returns: dict[tuple[int, int], float] = {}
        clusters: dict[tuple[int, Hashable], list[tuple[int, int]]] = defaultdict(list)
        for episode, turns in by_episode.items():
            running = 0.0
            for turn in reversed(turns):
                running = turn.reward + c.gamma * running
                step_returns[(turn.row, turn.turn_id)] = running
            group = int(p.episode_groups[episode])
            for turn in turns:
                row_keys = keys[turn.row]
                if turn.turn_id >= len(row_keys):
                    raise ValueError(f"row {turn.row}: no state key for turn {turn.turn_id} "
                                     f"(state_keys[{turn.row}] has {len(row_keys)})")
                key = freeze_key(row_keys[turn.turn_id], "state_keys")
                clusters[(group, key)].append((turn.row, turn.turn_id))

        step_adv: dict[tuple[int, int], float] = {}
        for members in clusters.values():
            r = np.array([step_returns[m] for m in members], dtype=np.float64)
            if len(r) == 1:
                a = np.zeros(1)
            else:
                a = r - r.mean()
                if c.norm_by_std:
                    a = a / (float(r.std(ddof=1)) + c.epsilon)
            for m, v in zip(members, a):
                step_adv[m] = float(v)

        adv = np.zeros(p.rewards.shape, dtype=np.float64)
        for turns in by_episode.values():
            for turn in turns:
                adv[turn.row, turn.positions] = row_adv[turn.row] + c.step_weight * step_adv[(turn.row, turn.turn_id)]
        return output(adv, adv, p.mask)
