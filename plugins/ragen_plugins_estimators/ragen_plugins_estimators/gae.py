"""Critic-based estimators: token-level GAE over generated tokens, and a working bi-level (turn, token) GAE."""

from __future__ import annotations

from typing import Literal

import attrs
import numpy as np

from ragen_core.protocols import AdvantageInput, AdvantageOutput
from ragen_plugins_estimators._common import masked_whiten, output, prepare, row_turns, unit_interval

__all__ = ["GAE", "GAEConfig", "BiLevelGAE", "BiLevelGAEConfig"]


@attrs.frozen
class GAEConfig:
    """Options of :class:`GAE`.

    :ivar gamma: discount per generated token (RAGEN: 1.0).
    :ivar lam: GAE lambda (RAGEN: 1.0).
    :ivar whiten: normalise the advantages over all generated tokens of the batch (veRL's ``masked_whiten``).
    """

    gamma: float = attrs.field(default=1.0, validator=unit_interval)
    lam: float = attrs.field(default=1.0, validator=unit_interval)
    whiten: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))


class GAE:
    """Generalised advantage estimation over the generated tokens of each row (veRL/RAGEN's PPO estimator).

    Observation, prompt and padding tokens are skipped: walking a row backwards, at generated token ``t`` with
    ``n(t)`` the next *generated* token of the row (none after the last one)::

        delta_t = r_t + gamma * V_{n(t)} - V_t               (V_{n(t)} = 0 after the last generated token)
        A_t     = delta_t + gamma * lam * A_{n(t)}            (A_{n(t)} = 0 after the last generated token)
        returns_t = A_t + V_t                                 (before whitening)

    Rewards and values on masked tokens are ignored. This is exactly veRL's ``compute_gae_advantage_return``
    (``verl/trainer/ppo/core_algos.py``), which carries ``nextvalues`` and ``lastgaelam`` across tokens whose
    ``response_mask`` is 0. With ``whiten`` the advantages are ``(A - mean) / sqrt(var + 1e-8)`` with the mean and
    the unbiased variance over all generated tokens of the batch (veRL's ``masked_whiten``; see
    :func:`ragen_plugins_estimators._common.masked_whiten`); the returns are never whitened.
    """

    config_cls = GAEConfig
    needs_critic = True

    def __init__(self, config: GAEConfig | None = None) -> None:
        self.config = config if config is not None else GAEConfig()

    def compute(self, inputs: AdvantageInput) -> AdvantageOutput:
        """Return whitened (by default) advantages and unwhitened returns ``A + V``."""
        p = prepare(inputs, values=True)
        assert p.values is not None
        c = self.config
        adv = _token_gae(p.rewards, p.values, p.mask, gamma=c.gamma, lam=c.lam)
        returns = adv + p.values
        if c.whiten:
            adv = masked_whiten(adv, p.mask)
        return output(adv, returns, p.mask)


def _token_gae(rewards: np.ndarray, values: np.ndarray, mask: np.ndarray, *, gamma: float, lam: float,
               turn_end: np.ndarray | None = None, bootstrap: np.ndarray | None = None) -> np.ndarray:
    """Backward GAE recursion over the generated tokens of every row (vectorised over rows).

    Where ``turn_end`` is True the recursion is cut: the next-value term is ``bootstrap`` (already discounted)
    instead of ``gamma * V_next`` and nothing is carried from later tokens.
    """
    b, t = rewards.shape
    adv = np.zeros((b, t), dtype=np.float64)
    next_value = np.zeros(b, dtype=np.float64)
    next_adv = np.zeros(b, dtype=np.float64)
    for j in range(t - 1, -1, -1):
        m = mask[:, j]
        if not m.any():
            continue
        future = gamma * next_value
        carry = gamma * lam * next_adv
        if turn_end is not None and bootstrap is not None:
            e = turn_end[:, j]
            future = np.where(e, bootstrap[:, j], future)
            carry = np.where(e, 0.0, carry)
        a = rewards[:, j] + future - values[:, j] + carry
        adv[:, j] = np.where(m, a, 0.0)
        next_value = np.where(m, values[:, j], next_value)
        next_adv = np.where(m, a, next_adv)
    return adv


@attrs.frozen
class BiLevelGAEConfig:
    """Options of :class:`BiLevelGAE`.

    :ivar turn_gamma: discount between turns (RAGEN's ``high_level_gamma``, 0.95).
    :ivar turn_lam: GAE lambda between turns (1.0: RAGEN's bi-level GAE applies its token ``lam``, 1.0 by
        default, at the turn level too).
    :ivar token_gamma: discount between the tokens of one turn.
    :ivar token_lam: GAE lambda between the tokens of one turn.
    :ivar turn_value: which critic value stands for the turn state ``V_k``: ``"last"`` (the value at the turn's
        last generated token, as RAGEN) or ``"first"`` (at its first generated token).
    :ivar whiten: normalise the advantages over all generated tokens of the batch (veRL's ``masked_whiten``).
    """

    turn_gamma: float = attrs.field(default=0.95, validator=unit_interval)
    turn_lam: float = attrs.field(default=1.0, validator=unit_interval)
    token_gamma: float = attrs.field(default=1.0, validator=unit_interval)
    token_lam: float = attrs.field(default=1.0, validator=unit_interval)
    turn_value: Literal["first", "last"] = attrs.field(default="last",
                                                        validator=attrs.validators.in_(("first", "last")))
    whiten: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))


class BiLevelGAE:
    """Bi-level GAE: turn-level GAE across a row's assistant turns, then token-level GAE inside each turn.

    Turns are the runs of equal ``turn_ids`` along a row's generated tokens (observation tokens between them are
    skipped, as in :class:`GAE`). For turn ``k = 0 .. K-1`` of a row, with tokens ``t_1 < ... < t_n``::

        r_k = sum of the token rewards of turn k
        V_k = V[t_n]  (turn_value="last", default)   or   V[t_1]  (turn_value="first")
        delta_k = r_k + turn_gamma * V_{k+1} - V_k                      (V_K = 0)
        A_k     = delta_k + turn_gamma * turn_lam * A_{k+1}             (A_K = 0)
        B_k     = V_k + turn_lam * A_k                                  (B_K = 0)

    ``A_k + V_k = r_k + turn_gamma * B_{k+1}`` is the turn's lambda-return; ``B_{k+1}`` is what turn ``k``
    bootstraps from (``(1 - turn_lam) V_{k+1} + turn_lam (A_{k+1} + V_{k+1})``). Token level, inside turn ``k``
    (no recursion crosses a turn end)::

        last token:   A_{t_n} = r_{t_n} + turn_gamma * B_{k+1} - V_{t_n}
        other tokens: A_{t_j} = r_{t_j} + token_gamma * V_{t_{j+1}} - V_{t_j} + token_gamma * token_lam * A_{t_{j+1}}
        returns = A + V (before whitening)

    Properties (tested): with one-token turns ``A_t = A_k`` (pure turn-level GAE); with a single turn per row the
    result is token-level GAE with ``token_gamma``/``token_lam`` (``B_1 = 0``); with ``turn_value="last"`` and each
    turn's reward on its last token (RAGEN's placement) the last token gets exactly the turn advantage
    ``A_{t_n} = A_k`` — this is RAGEN's scheme (replace the turn-final token's reward by the turn target
    ``A_k + V_k`` and run token GAE inside the turn with no bootstrap past its end) with turn ends taken from
    ``turn_ids`` instead of RAGEN's "tokens with a non-zero reward", which loses every turn whose reward is 0.
    With ``token_gamma = token_lam = 1`` the recursion telescopes: ``A_{t_j} = sum_{i>=j} r_{t_i} +
    turn_gamma B_{k+1} - V_{t_j}``, so with ``turn_value="first"`` the turn's first token gets ``A_k`` exactly,
    wherever the rewards lie inside the turn. A reward inside a turn is credited only to the tokens at or before
    it (it is not moved to the turn end), which keeps the single-turn identity exact.
    """

    config_cls = BiLevelGAEConfig
    needs_critic = True
    needs_turn_ids = True

    def __init__(self, config: BiLevelGAEConfig | None = None) -> None:
        self.config = config if config is not None else BiLevelGAEConfig()

    def compute(self, inputs: AdvantageInput) -> AdvantageOutput:
        """Return whitened (by default) advantages and unwhitened returns ``A + V``."""
        p = prepare(inputs, values=True, turns=True)
        assert p.values is not None
        c = self.config
        b, t = p.rewards.shape
        turn_end = np.zeros((b, t), dtype=bool)
        bootstrap = np.zeros((b, t), dtype=np.float64)
        for i in range(b):
            turns = row_turns(p, i)
            next_b = 0.0       # B_{k+1}
            next_v = 0.0       # V_{k+1}
            next_a = 0.0       # A_{k+1}
            for turn in reversed(turns):
                pos = turn.positions
                v_k = float(p.values[i, pos[-1] if c.turn_value == "last" else pos[0]])
                a_k = turn.reward + c.turn_gamma * next_v - v_k + c.turn_gamma * c.turn_lam * next_a
                turn_end[i, pos[-1]] = True
                bootstrap[i, pos[-1]] = c.turn_gamma * next_b
                next_b = v_k + c.turn_lam * a_k
                next_v, next_a = v_k, a_k
        adv = _token_gae(p.rewards, p.values, p.mask, gamma=c.token_gamma, lam=c.token_lam, turn_end=turn_end,
                         bootstrap=bootstrap)
        returns = adv + p.values
        if c.whiten:
            adv = masked_whiten(adv, p.mask)
        return output(adv, returns, p.mask)
