"""Small cases computed by hand, one group of them per estimator."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragen_core.protocols import AdvantageInput
from ragen_plugins_estimators._common import masked_whiten
from ragen_plugins_estimators.gae import GAE, BiLevelGAE, BiLevelGAEConfig, GAEConfig
from ragen_plugins_estimators.gigpo import GiGPO, GiGPOConfig
from ragen_plugins_estimators.outcome import (
    GRPO,
    RLOO,
    DrGRPO,
    GRPOConfig,
    ReinforcePP,
    ReinforcePPBaseline,
    ReinforcePPConfig,
)


def outcome_input(scores, groups, *, width: int = 3, episode_ids=None) -> AdvantageInput:
    """One row per score, reward on the last of ``width`` generated tokens."""
    rewards = np.zeros((len(scores), width))
    rewards[:, -1] = scores
    return AdvantageInput(token_rewards=rewards, response_mask=np.ones((len(scores), width), dtype=int),
                          group_ids=list(groups), episode_ids=episode_ids)


# ------------------------------------------------------------------------------------------------ GRPO family

def test_grpo_two_successes_two_failures() -> None:
    out = GRPO().compute(outcome_input([1.0, 0.0, 0.0, 1.0], [0, 0, 0, 0]))
    std = math.sqrt(1 / 3)  # unbiased std of [1, 0, 0, 1]
    expected = np.array([0.5, -0.5, -0.5, 0.5]) / (std + 1e-6)
    assert np.allclose(out.advantages, expected[:, None])
    assert out.advantages[0, 0] == pytest.approx(0.8660239, abs=1e-6)
    assert np.array_equal(out.returns, out.advantages)


def test_grpo_single_member_and_equal_scores() -> None:
    out = GRPO().compute(outcome_input([2.0, 3.0, 3.0, 3.0], [7, 1, 1, 1]))
    assert out.advantages[0, 0] == pytest.approx(2.0 / (1.0 + 1e-6), rel=1e-12)  # mean 0, std 1
    assert np.all(out.advantages[1:] == 0.0)
    no_std = GRPO(GRPOConfig(norm_by_std=False)).compute(outcome_input([1.0, 0.0, 0.0, 1.0], [0] * 4))
    assert np.allclose(no_std.advantages[:, 0], [0.5, -0.5, -0.5, 0.5])


def test_grpo_score_is_the_sum_of_generated_token_rewards_only() -> None:
    inp = AdvantageInput(token_rewards=np.array([[0.5, 9.0, 0.5], [0.0, 0.0, 0.0]]),
                         response_mask=np.array([[1, 0, 1], [1, 1, 0]]), group_ids=[0, 0])
    out = DrGRPO().compute(inp)  # scores 1 and 0 (the 9 is on an observation token)
    assert out.advantages.tolist() == [[0.5, 0.0, 0.5], [-0.5, -0.5, 0.0]]


def test_grpo_counts_each_episode_once() -> None:
    # episode e0 spans rows 0 and 1 (scores 1 + 0.5), episode e1 is row 2 (0.5), all in group 0
    inp = outcome_input([1.0, 0.5, 0.5], [0, 0, 0], episode_ids=["e0", "e0", "e1"])
    out = GRPO().compute(inp)
    a = 0.5 / (math.sqrt(0.5) + 1e-6)  # episode scores [1.5, 0.5]: mean 1, unbiased std sqrt(0.5)
    assert np.allclose(out.advantages[:, 0], [a, a, -a])
    # without episode ids the same rows are three samples
    assert not np.allclose(GRPO().compute(outcome_input([1.0, 0.5, 0.5], [0, 0, 0])).advantages[:, 0], [a, a, -a])


def test_one_row_episodes_equal_no_episode_ids() -> None:
    base = outcome_input([1.0, 0.0, 2.0, 5.0], [0, 0, 1, 1])
    same = outcome_input([1.0, 0.0, 2.0, 5.0], [0, 0, 1, 1], episode_ids=[10, 11, 12, 13])
    for est in (GRPO(), DrGRPO(), RLOO(), ReinforcePPBaseline()):
        assert np.array_equal(est.compute(base).advantages, est.compute(same).advantages)


def test_episode_in_two_groups_is_an_error() -> None:
    with pytest.raises(ValueError, match="share a group"):
        GRPO().compute(outcome_input([1.0, 0.0], [0, 1], episode_ids=[5, 5]))


def test_drgrpo() -> None:
    out = DrGRPO().compute(outcome_input([1.0, 0.0, 0.0, 1.0, 4.0], [0, 0, 0, 0, 1]))
    assert np.allclose(out.advantages[:, 1], [0.5, -0.5, -0.5, 0.5, 4.0])


def test_rloo() -> None:
    out = RLOO().compute(outcome_input([1.0, 0.0, 0.0, 1.0, 4.0], [0, 0, 0, 0, 1]))
    assert np.allclose(out.advantages[:, 2], [2 / 3, -2 / 3, -2 / 3, 2 / 3, 4.0])  # singleton keeps its score
    # veRL's form: score * n / (n - 1) - mean * n / (n - 1)
    s = np.array([3.0, 1.0, 2.0])
    verl = s * 3 / 2 - s.mean() * 3 / 2
    assert np.allclose(RLOO().compute(outcome_input(s, [0, 0, 0])).advantages[:, 0], verl)


# ------------------------------------------------------------------------------------------------ REINFORCE++

def test_reinforce_pp_returns() -> None:
    inp = AdvantageInput(token_rewards=np.array([[0.0, 1.0, 7.0, 0.0, 2.0]]),
                         response_mask=np.array([[1, 1, 0, 1, 1]]), group_ids=[0])
    reset = ReinforcePP(ReinforcePPConfig(reset_at_masked=True)).compute(inp)  # older veRL: reset at the gap
    assert reset.returns.tolist() == [[1.0, 1.0, 0.0, 2.0, 2.0]]
    carry = ReinforcePP().compute(inp)  # veRL 0.9.1: carried across the gap
    assert carry.returns.tolist() == [[3.0, 3.0, 0.0, 2.0, 2.0]]
    half = ReinforcePP(ReinforcePPConfig(gamma=0.5, reset_at_masked=False)).compute(inp)
    assert half.returns.tolist() == [[0.75, 1.5, 0.0, 1.0, 2.0]]
    adv = ReinforcePP(ReinforcePPConfig(reset_at_masked=True)).compute(inp).advantages
    x = np.array([1.0, 1.0, 2.0, 2.0])  # mean 1.5, unbiased var 1/3
    assert np.allclose(adv[0, [0, 1, 3, 4]], (x - 1.5) / math.sqrt(1 / 3 + 1e-8))
    assert adv[0, 2] == 0.0


def test_reinforce_pp_baseline() -> None:
    inp = AdvantageInput(token_rewards=np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
                         response_mask=np.array([[1, 0, 0], [1, 1, 1]]), group_ids=[0, 0])
    out = ReinforcePPBaseline().compute(inp)
    # score - mean = [0.5, -0.5] on 1 and 3 tokens: token mean -0.25, unbiased var 0.25
    scale = math.sqrt(0.25 + 1e-8)
    assert np.allclose(out.advantages, [[0.75 / scale, 0, 0], [-0.25 / scale] * 3])
    assert np.array_equal(out.returns, out.advantages)


# ------------------------------------------------------------------------------------------------ whitening

def test_masked_whiten_matches_verl() -> None:
    x = np.array([[1.0, 2.0, 100.0], [3.0, 4.0, -50.0]])
    m = np.array([[1, 1, 0], [1, 1, 0]], dtype=bool)
    w = masked_whiten(x, m)
    vals = np.array([1.0, 2.0, 3.0, 4.0])
    assert np.allclose(w[m], (vals - 2.5) / math.sqrt(vals.var(ddof=1) + 1e-8))
    assert np.all(w[~m] == 0)
    assert masked_whiten(np.array([[5.0, 1.0]]), np.array([[True, False]])).tolist() == [[0.0, 0.0]]
    assert masked_whiten(np.array([[5.0]]), np.array([[False]])).tolist() == [[0.0]]


# ------------------------------------------------------------------------------------------------ GAE

def gae_input(rewards, values, mask, turn_ids=None) -> AdvantageInput:
    return AdvantageInput(token_rewards=np.array([rewards], dtype=float), response_mask=np.array([mask]),
                          group_ids=[0], values=np.array([values], dtype=float),
                          turn_ids=None if turn_ids is None else np.array([turn_ids]))


def test_gae_is_return_to_go_minus_values() -> None:
    inp = gae_input([0.0, 5.0, 0.0, 1.0], [0.5, 9.0, 0.2, 0.1], [1, 0, 1, 1])  # the 5 and the 9 are an observation
    out = GAE(GAEConfig(whiten=False)).compute(inp)
    assert np.allclose(out.advantages, [[0.5, 0.0, 0.8, 0.9]])
    assert np.allclose(out.returns, [[1.0, 0.0, 1.0, 1.0]])


def test_gae_discounting_skips_observations() -> None:
    inp = gae_input([0.0, 3.0, 1.0], [0.2, -7.0, 0.4], [1, 0, 1])
    out = GAE(GAEConfig(gamma=0.5, lam=0.5, whiten=False)).compute(inp)
    # last: delta = 1 - 0.4 = 0.6; first: delta = 0 + 0.5 * 0.4 - 0.2 = 0, A = 0 + 0.25 * 0.6
    assert np.allclose(out.advantages, [[0.15, 0.0, 0.6]])
    assert np.allclose(out.returns, [[0.35, 0.0, 1.0]])


def test_gae_whitened_by_default() -> None:
    inp = gae_input([0.0, 0.0, 1.0], [0.5, 0.2, 0.1], [1, 1, 1])
    out = GAE().compute(inp)
    raw = np.array([0.5, 0.8, 0.9])
    assert np.allclose(out.advantages[0], (raw - raw.mean()) / math.sqrt(raw.var(ddof=1) + 1e-8))
    assert np.allclose(out.returns, [[1.0, 1.0, 1.0]])


def test_gae_needs_values() -> None:
    with pytest.raises(ValueError, match="critic values"):
        GAE().compute(outcome_input([1.0], [0]))


# ------------------------------------------------------------------------------------------------ bi-level GAE

def test_bilevel_two_turns_by_hand() -> None:
    # turn 0: tokens 0, 1 (reward 0.5 on token 1), observation token 2, turn 1: token 3 (reward 1)
    inp = gae_input([0.0, 0.5, 4.0, 1.0], [0.1, 0.2, 9.0, 0.3], [1, 1, 0, 1], [0, 0, -1, 1])
    out = BiLevelGAE(BiLevelGAEConfig(whiten=False)).compute(inp)  # turn gamma .95, lambdas 1, V_k at last token
    a1 = 1.0 - 0.3                          # last turn: r - V
    a0 = 0.5 + 0.95 * 0.3 - 0.2 + 0.95 * a1  # = 0.5 + 0.95 * (V_1 + A_1) - V_0
    assert np.allclose(out.advantages[0], [a0 + 0.2 - 0.1, a0, 0.0, a1])
    assert np.allclose(out.returns[0], [a0 + 0.2, a0 + 0.2, 0.0, 1.0])


def test_bilevel_uses_turn_ids_not_reward_positions() -> None:
    # RAGEN's bi-level GAE finds turn ends where the reward is non-zero; a turn with reward 0 must still be a turn
    inp = gae_input([0.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1, 1, 1], [0, 1, 2])
    out = BiLevelGAE(BiLevelGAEConfig(whiten=False)).compute(inp)
    assert np.allclose(out.advantages[0], [0.95**2, 0.95, 1.0])


def test_bilevel_turn_lambda_and_first_value() -> None:
    inp = gae_input([0.0, 0.0, 1.0], [0.4, 0.1, 0.5], [1, 1, 1], [0, 0, 1])
    cfg = BiLevelGAEConfig(turn_gamma=0.5, turn_lam=0.5, turn_value="first", whiten=False)
    out = BiLevelGAE(cfg).compute(inp)
    a1 = 1.0 - 0.5
    b1 = 0.5 + 0.5 * a1                       # V_1 + lam A_1
    last0 = 0.0 + 0.5 * b1 - 0.1             # last token of turn 0 bootstraps from turn_gamma * B_1
    first0 = 0.0 + 0.1 - 0.4 + last0         # token gamma = lambda = 1 inside the turn
    a0 = 0.0 + 0.5 * 0.5 - 0.4 + 0.25 * a1   # turn-level GAE with V_0 = V at the first token
    assert np.allclose(out.advantages[0], [first0, last0, a1])
    assert first0 == pytest.approx(a0)


def test_bilevel_rejects_bad_turn_ids() -> None:
    with pytest.raises(ValueError, match="no turn id"):
        BiLevelGAE().compute(gae_input([0.0, 1.0], [0.0, 0.0], [1, 1], [0, -1]))
    with pytest.raises(ValueError, match="must not decrease"):
        BiLevelGAE().compute(gae_input([0.0, 1.0], [0.0, 0.0], [1, 1], [1, 0]))
    with pytest.raises(ValueError, match="turn ids"):
        BiLevelGAE().compute(gae_input([0.0, 1.0], [0.0, 0.0], [1, 1]))


# ------------------------------------------------------------------------------------------------ GiGPO

def gigpo_input(turn_rewards, keys, groups, episode_ids=None) -> AdvantageInput:
    """One row per trajectory, each turn two generated tokens then one observation token, reward on the turn end."""
    b, k = len(turn_rewards), max(len(r) for r in turn_rewards)
    rewards, mask, tids = np.zeros((b, 3 * k)), np.zeros((b, 3 * k), dtype=int), np.full((b, 3 * k), -1)
    for i, rs in enumerate(turn_rewards):
        for j, r in enumerate(rs):
            mask[i, 3 * j:3 * j + 2] = 1
            tids[i, 3 * j:3 * j + 2] = j
            rewards[i, 3 * j + 1] = r
            rewards[i, 3 * j + 2] = 100.0  # on the observation: ignored
    return AdvantageInput(token_rewards=rewards, response_mask=mask, group_ids=groups, turn_ids=tids,
                          state_keys=keys, episode_ids=episode_ids)


def test_gigpo_by_hand() -> None:
    inp = gigpo_input([[0.0, 1.0], [0.0, 0.0]], [["s0", "s1"], ["s0", "s2"]], [0, 0])
    out = GiGPO().compute(inp)
    a_e = 0.5 / (math.sqrt(0.5) + 1e-6)           # episode scores 1, 0
    a_s = (0.95 - 0.475) / (0.95 / math.sqrt(2) + 1e-6)  # s0: returns 0.95 and 0; s1, s2 are singletons -> 0
    assert np.allclose(out.advantages[0], [a_e + a_s] * 2 + [0] + [a_e] * 2 + [0])
    assert np.allclose(out.advantages[1], [-a_e - a_s] * 2 + [0] + [-a_e] * 2 + [0])
    half = GiGPO(GiGPOConfig(step_weight=0.5, norm_by_std=False)).compute(inp)
    assert np.allclose(half.advantages[0, :2], 0.5 + 0.5 * 0.475)


def test_gigpo_step_groups_stay_inside_their_group() -> None:
    inp = gigpo_input([[1.0], [0.0]], [["s"], ["s"]], [0, 1])
    out = GiGPO().compute(inp)  # two groups of one: A_E = score / (1 + eps), step groups of one -> 0
    assert np.allclose(out.advantages[:, 0], [1 / (1 + 1e-6), 0.0])


def test_gigpo_episode_spanning_rows() -> None:
    # episode "a" is rows 0 (turn 0) and 1 (turn 1); episode "b" is row 2; same group; both first turns at "s"
    inp = gigpo_input([[0.0], [1.0], [0.0]], [["s"], ["t", "u"], ["s"]], [0, 0, 0], episode_ids=["a", "a", "b"])
    tids = np.array(inp.turn_ids)
    tids[1] = np.where(tids[1] >= 0, 1, -1)  # row 1 holds turn 1 of episode a
    inp = AdvantageInput(token_rewards=inp.token_rewards, response_mask=inp.response_mask, group_ids=inp.group_ids,
                         turn_ids=tids, state_keys=inp.state_keys, episode_ids=inp.episode_ids)
    out = GiGPO(GiGPOConfig(gamma=0.5)).compute(inp)
    a_e = 0.5 / (math.sqrt(0.5) + 1e-6)                 # episode scores 1 and 0
    a_s = 0.25 / (0.5 / math.sqrt(2) + 1e-6)            # at "s": returns 0 + 0.5 * 1 = 0.5 (a) and 0 (b)
    assert np.allclose(out.advantages[:, 0], [a_e + a_s, a_e, -a_e - a_s])


def test_gigpo_needs_state_keys() -> None:
    inp = gigpo_input([[1.0]], [["s"]], [0])
    bare = AdvantageInput(token_rewards=inp.token_rewards, response_mask=inp.response_mask, group_ids=[0],
                          turn_ids=inp.turn_ids)
    with pytest.raises(ValueError, match="state_keys"):
        GiGPO().compute(bare)
    short = AdvantageInput(token_rewards=inp.token_rewards, response_mask=inp.response_mask, group_ids=[0],
                           turn_ids=inp.turn_ids, state_keys=[[]])
    with pytest.raises(ValueError, match="no state key"):
        GiGPO().compute(short)


def test_gigpo_keys_compare_by_value() -> None:
    keys = [[np.array([1, 2])], [[1, 2]]]  # an array and a list with the same content are different keys
    same = [[(1, 2)], [(1, 2)]]
    out = GiGPO().compute(gigpo_input([[1.0], [0.0]], same, [0, 0]))
    assert not np.allclose(out.advantages, GiGPO().compute(gigpo_input([[1.0], [0.0]], keys, [0, 0])).advantages)
    arrays = [[np.array([1, 2])], [np.array([1, 2])]]
    assert np.allclose(out.advantages, GiGPO().compute(gigpo_input([[1.0], [0.0]], arrays, [0, 0])).advantages)


def test_lists_are_accepted() -> None:
    inp = AdvantageInput(token_rewards=[[0.0, 1.0], [0.0, 0.0]], response_mask=[[1, 1], [1, 1]], group_ids=[0, 0],
                         values=[[0.0, 0.0], [0.0, 0.0]], turn_ids=[[0, 0], [0, 0]], state_keys=[["x"], ["x"]])
    for est in (GAE(), BiLevelGAE(), GRPO(), DrGRPO(), RLOO(), ReinforcePP(), ReinforcePPBaseline(), GiGPO()):
        out = est.compute(inp)
        assert out.advantages.dtype == np.float64 and out.advantages.shape == (2, 2)


def test_tuple_group_and_episode_ids() -> None:
    inp = outcome_input([1.0, 0.0, 2.0], [("a", 1), ("a", 1), ("b", 2)], episode_ids=[("x", 0), ("x", 1), ("y", 0)])
    out = DrGRPO().compute(inp)
    assert np.allclose(out.advantages[:, 0], [0.5, -0.5, 2.0])
