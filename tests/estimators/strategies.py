"""Hypothesis strategies for masked multi-turn advantage inputs, and the estimators under test with their configs."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from ragen_core.protocols import AdvantageInput, random_advantage_input
from ragen_plugins_estimators.gae import GAE, BiLevelGAE, BiLevelGAEConfig, GAEConfig
from ragen_plugins_estimators.gigpo import GiGPO, GiGPOConfig
from ragen_plugins_estimators.outcome import (
    GRPO,
    RLOO,
    DrGRPO,
    DrGRPOConfig,
    GRPOConfig,
    ReinforcePP,
    ReinforcePPBaseline,
    ReinforcePPBaselineConfig,
    ReinforcePPConfig,
    RLOOConfig,
)
from tests.estimators import reference as ref

UNIT = st.one_of(st.sampled_from([0.0, 0.5, 0.9, 0.95, 1.0]), st.floats(0.0, 1.0))


def _turn_ids(mask: np.ndarray, split: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Turn ids along each row: a new turn at the first generated token, after an observation gap (unless
    ``keep``), and wherever ``split`` asks (adjacent turns with no gap between them)."""
    b, t = mask.shape
    tids = np.full((b, t), -1, dtype=np.int64)
    for i in range(b):
        tid, prev = -1, None
        for j in range(t):
            if not mask[i, j]:
                continue
            gap = prev is not None and prev != j - 1
            if tid == -1 or split[i, j] or (gap and not keep[i, j]):
                tid += 1
            tids[i, j] = tid
            prev = j
    return tids


@st.composite
def adv_inputs(draw: Any, *, episodes: bool | None = None, max_rows: int = 6, max_tokens: int = 14) -> AdvantageInput:
    """Random masked batches: observation gaps, adjacent turns, groups of one, equal scores, multi-row episodes,
    arbitrary rewards and values on masked tokens (which every estimator must ignore).

    Hypothesis draws the shape and the structural choices; a drawn seed fills the arrays (drawing every cell
    through Hypothesis is ten times slower).
    """
    b = draw(st.integers(1, max_rows), label="rows")
    t = draw(st.integers(1, max_tokens), label="tokens")
    density = draw(st.sampled_from([0.3, 0.6, 0.9, 1.0]), label="mask density")
    sparse = draw(st.booleans(), label="rewards only on turn ends")
    equal = draw(st.booleans(), label="all scores equal")
    n_groups = draw(st.integers(1, b), label="groups")
    use_episodes = draw(st.booleans(), label="multi-row episodes") if episodes is None else episodes
    n_eps = draw(st.integers(1, b), label="episodes")
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))

    mask = rng.random((b, t)) < density
    split = rng.random((b, t)) < 0.3
    keep = rng.random((b, t)) < 0.3
    tids = _turn_ids(mask, split, keep)
    rewards = rng.integers(-40, 41, size=(b, t)) / 4
    values = rng.uniform(-4.0, 4.0, size=(b, t))
    if sparse:
        # rewards on the generated tokens only at turn ends (RAGEN's placement), possibly all-equal scores
        keep_r = np.zeros((b, t), dtype=bool)
        for i in range(b):
            pos = np.flatnonzero(mask[i])
            if len(pos):
                ends = pos[np.append(tids[i, pos][1:] != tids[i, pos][:-1], True)]
                keep_r[i, ends if not equal else pos[-1:]] = True
        rewards = np.where(mask & ~keep_r, 0.0, rewards)
        if equal:
            c = rng.integers(-40, 41) / 4
            rewards = np.where(keep_r, c, rewards)
    elif equal:
        rewards = np.where(mask, 0.0, rewards)
    episode_ids = None
    if use_episodes:
        episode_ids = rng.integers(0, n_eps, size=b)
        group_ids = rng.integers(0, n_groups, size=n_eps)[episode_ids]
    else:
        group_ids = rng.integers(0, n_groups, size=b)
    state_keys = [[str(k) for k in rng.choice(list("abc"), size=int(tids[i].max()) + 1)] for i in range(b)]
    return AdvantageInput(token_rewards=rewards, response_mask=mask.astype(np.int64), group_ids=group_ids,
                          values=values, turn_ids=tids, state_keys=state_keys, episode_ids=episode_ids)


def core_input(seed: int, *, episodes: bool = False) -> AdvantageInput:
    """``random_advantage_input`` (with values); with ``episodes`` rows of one group pair up into episodes."""
    inp = random_advantage_input(seed, with_values=True)
    if not episodes:
        return inp
    groups = inp.group_ids
    episode_ids = [f"{int(g)}-{i % 2}" for i, g in enumerate(groups)]
    return AdvantageInput(token_rewards=inp.token_rewards, response_mask=inp.response_mask, group_ids=groups,
                          values=inp.values, turn_ids=inp.turn_ids, state_keys=inp.state_keys,
                          episode_ids=episode_ids)


#: name -> (class, strategy of configs, reference(inputs, config) -> (advantages, returns))
ESTIMATORS: dict[str, tuple[type, Any, Any]] = {
    "gae": (GAE, st.builds(GAEConfig, gamma=UNIT, lam=UNIT, whiten=st.booleans()),
            lambda inp, c: ref.gae(inp, c.gamma, c.lam, c.whiten)),
    "bilevel_gae": (BiLevelGAE,
                    st.builds(BiLevelGAEConfig, turn_gamma=UNIT, turn_lam=UNIT, token_gamma=UNIT, token_lam=UNIT,
                              turn_value=st.sampled_from(["first", "last"]), whiten=st.booleans()),
                    lambda inp, c: ref.bilevel_gae(inp, c.turn_gamma, c.turn_lam, c.token_gamma, c.token_lam,
                                                   c.turn_value, c.whiten)),
    "grpo": (GRPO, st.builds(GRPOConfig, epsilon=st.sampled_from([1e-6, 1e-3, 0.5]), norm_by_std=st.booleans()),
             lambda inp, c: ref.grpo(inp, c.epsilon, c.norm_by_std)),
    "drgrpo": (DrGRPO, st.just(DrGRPOConfig()), lambda inp, c: ref.drgrpo(inp)),
    "rloo": (RLOO, st.just(RLOOConfig()), lambda inp, c: ref.rloo(inp)),
    "reinforce_pp": (ReinforcePP, st.builds(ReinforcePPConfig, gamma=UNIT, reset_at_masked=st.booleans()),
                     lambda inp, c: ref.reinforce_pp(inp, c.gamma, c.reset_at_masked)),
    "reinforce_pp_baseline": (ReinforcePPBaseline, st.just(ReinforcePPBaselineConfig()),
                              lambda inp, c: ref.reinforce_pp_baseline(inp)),
    "gigpo": (GiGPO, st.builds(GiGPOConfig, gamma=UNIT, step_weight=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
                               epsilon=st.sampled_from([1e-6, 1e-3]), norm_by_std=st.booleans()),
              lambda inp, c: ref.gigpo(inp, c.gamma, c.step_weight, c.epsilon, c.norm_by_std)),
}
