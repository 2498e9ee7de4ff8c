"""Every estimator equals its slow reference (``reference.py``) on random masked batches, plus structural properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragen_core.protocols import AdvantageInput
from ragen_plugins_estimators.gae import GAE, BiLevelGAE, BiLevelGAEConfig, GAEConfig
from ragen_plugins_estimators.outcome import ReinforcePP, ReinforcePPConfig
from tests.estimators import reference as ref
from tests.estimators.strategies import ESTIMATORS, UNIT, adv_inputs, core_input

TOL = 1e-9
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_matches(out, expected, mask) -> None:
    for name, got, want in (("advantages", out.advantages, expected[0]), ("returns", out.returns, expected[1])):
        got = np.asarray(got)
        want = np.asarray(want, dtype=np.float64).reshape(got.shape)
        assert got.dtype == np.float64, f"{name} dtype {got.dtype}"
        assert np.all(got[np.asarray(mask) == 0] == 0.0), f"{name} non-zero on masked tokens"
        np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL, err_msg=name)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@SETTINGS
@given(data=st.data())
def test_equals_reference_on_random_batches(name: str, data: st.DataObject) -> None:
    cls, configs, reference = ESTIMATORS[name]
    config = data.draw(configs, label="config")
    inp = data.draw(adv_inputs(), label="inputs")
    assert_matches(cls(config).compute(inp), reference(inp, config), inp.response_mask)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@pytest.mark.parametrize("episodes", [False, True])
def test_equals_reference_on_core_random_inputs(name: str, episodes: bool) -> None:
    cls, _configs, reference = ESTIMATORS[name]
    config = cls.config_cls()
    for seed in range(40):
        inp = core_input(seed, episodes=episodes)
        assert_matches(cls(config).compute(inp), reference(inp, config), inp.response_mask)


def _insert_observations(inp: AdvantageInput, cols: list[int], rewards: np.ndarray, values: np.ndarray):
    """Insert masked columns (observation tokens with arbitrary rewards and values) before the given positions."""
    r, v, m, tid = (np.asarray(x) for x in (inp.token_rewards, inp.values, inp.response_mask, inp.turn_ids))
    for k, c in enumerate(sorted(cols, reverse=True)):
        r = np.insert(r, c, rewards[:, k], axis=1)
        v = np.insert(v, c, values[:, k], axis=1)
        m = np.insert(m, c, 0, axis=1)
        tid = np.insert(tid, c, -1, axis=1)
    kept = np.insert(np.ones(np.asarray(inp.response_mask).shape[1], dtype=bool), sorted(cols), False)
    new = AdvantageInput(token_rewards=r, response_mask=m, group_ids=inp.group_ids, values=v, turn_ids=tid,
                         state_keys=inp.state_keys, episode_ids=inp.episode_ids)
    return new, kept


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@PROPERTY
@given(data=st.data())
def test_observation_tokens_do_not_break_the_recursion(name: str, data: st.DataObject) -> None:
    """Inserting masked tokens with arbitrary rewards/values anywhere leaves the generated tokens' outputs alone
    (REINFORCE++ only without veRL's reset at masked tokens, which is the point of that option)."""
    cls, configs, _reference = ESTIMATORS[name]
    config = data.draw(configs, label="config")
    if name == "reinforce_pp":
        config = ReinforcePPConfig(gamma=config.gamma, reset_at_masked=False)
    inp = data.draw(adv_inputs(), label="inputs")
    b, t = np.asarray(inp.response_mask).shape
    cols = data.draw(st.lists(st.integers(0, t), min_size=1, max_size=4), label="insert before")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="noise seed"))
    noise_r = rng.normal(scale=5.0, size=(b, len(cols)))
    noise_v = rng.normal(scale=5.0, size=(b, len(cols)))
    new, kept = _insert_observations(inp, cols, noise_r, noise_v)
    before, after = cls(config).compute(inp), cls(config).compute(new)
    for field in ("advantages", "returns"):
        a = np.asarray(getattr(after, field))
        np.testing.assert_allclose(a[:, kept], getattr(before, field), rtol=TOL, atol=TOL, err_msg=field)
        assert np.all(a[:, ~kept] == 0.0)


def test_reinforce_pp_resets_at_observation_gaps_only_when_asked() -> None:
    """Older veRL restarts the running return at masked tokens (reset_at_masked=True): an inserted gap changes the
    returns. The default (veRL 0.9.1) carries it across."""
    inp = AdvantageInput(token_rewards=np.array([[0.0, 1.0]]), response_mask=np.array([[1, 1]]), group_ids=[0])
    gap = AdvantageInput(token_rewards=np.array([[0.0, 5.0, 1.0]]), response_mask=np.array([[1, 0, 1]]),
                         group_ids=[0])
    reset = ReinforcePP(ReinforcePPConfig(reset_at_masked=True))
    assert reset.compute(inp).returns.tolist() == [[1.0, 1.0]]
    assert reset.compute(gap).returns.tolist() == [[0.0, 0.0, 1.0]]
    assert ReinforcePP().compute(gap).returns.tolist() == [[1.0, 0.0, 1.0]]


@PROPERTY
@given(inp=adv_inputs())
def test_gae_with_unit_gamma_lambda_is_return_to_go_minus_values(inp: AdvantageInput) -> None:
    out = GAE(GAEConfig(gamma=1.0, lam=1.0, whiten=False)).compute(inp)
    r, v, m = (np.asarray(x, dtype=float) for x in (inp.token_rewards, inp.values, inp.response_mask))
    for i in range(r.shape[0]):
        pos = np.flatnonzero(m[i])
        for k, j in enumerate(pos):
            to_go = sum(r[i, p] for p in pos[k:])
            assert out.advantages[i, j] == pytest.approx(to_go - v[i, j], abs=TOL)
            assert out.returns[i, j] == pytest.approx(to_go, abs=TOL)


def _with_turns(inp: AdvantageInput, tids: np.ndarray) -> AdvantageInput:
    keys = [["s"] * (int(row.max()) + 1) for row in tids]
    return AdvantageInput(token_rewards=inp.token_rewards, response_mask=inp.response_mask, group_ids=inp.group_ids,
                          values=inp.values, turn_ids=tids, state_keys=keys, episode_ids=inp.episode_ids)


@PROPERTY
@given(inp=adv_inputs(), g=UNIT, lam=UNIT, tg=UNIT, tl=UNIT, whiten=st.booleans(),
       turn_value=st.sampled_from(["first", "last"]))
def test_bilevel_single_turn_equals_token_gae(inp, g, lam, tg, tl, whiten, turn_value) -> None:
    m = np.asarray(inp.response_mask)
    single = _with_turns(inp, np.where(m == 1, 0, -1))
    cfg = BiLevelGAEConfig(turn_gamma=tg, turn_lam=tl, token_gamma=g, token_lam=lam, turn_value=turn_value,
                           whiten=whiten)
    got = BiLevelGAE(cfg).compute(single)
    want = GAE(GAEConfig(gamma=g, lam=lam, whiten=whiten)).compute(single)
    np.testing.assert_allclose(got.advantages, want.advantages, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(got.returns, want.returns, rtol=TOL, atol=TOL)


@PROPERTY
@given(inp=adv_inputs(), tg=UNIT, tl=UNIT, g=UNIT, lam=UNIT, turn_value=st.sampled_from(["first", "last"]))
def test_bilevel_one_token_turns_equal_turn_level_gae(inp, tg, tl, g, lam, turn_value) -> None:
    m = np.asarray(inp.response_mask)
    tids = np.where(m == 1, np.cumsum(m, axis=1) - 1, -1)
    one = _with_turns(inp, tids)
    cfg = BiLevelGAEConfig(turn_gamma=tg, turn_lam=tl, token_gamma=g, token_lam=lam, turn_value=turn_value,
                           whiten=False)
    got = BiLevelGAE(cfg).compute(one)
    r, v = np.asarray(inp.token_rewards, dtype=float), np.asarray(inp.values, dtype=float)
    for i in range(m.shape[0]):
        pos = np.flatnonzero(m[i])
        want = ref.turn_level_gae([r[i, j] for j in pos], [v[i, j] for j in pos], tg, tl)
        np.testing.assert_allclose(got.advantages[i, pos], want, rtol=TOL, atol=TOL)


@PROPERTY
@given(inp=adv_inputs(), tg=UNIT, tl=UNIT, g=UNIT, lam=UNIT)
def test_bilevel_last_token_gets_the_turn_advantage(inp, tg, tl, g, lam) -> None:
    """turn_value="last", rewards only on turn-final tokens (RAGEN's placement): A at a turn's last token = A_k."""
    m = np.asarray(inp.response_mask)
    tids = np.asarray(inp.turn_ids)
    r = np.zeros_like(np.asarray(inp.token_rewards, dtype=float))
    raw = np.asarray(inp.token_rewards, dtype=float)
    for i in range(m.shape[0]):
        for _tid, pos in ref.turns_of_row(inp, i):
            r[i, pos[-1]] = raw[i, pos[-1]]
    sparse = AdvantageInput(token_rewards=r, response_mask=m, group_ids=inp.group_ids, values=inp.values,
                            turn_ids=tids, state_keys=inp.state_keys)
    cfg = BiLevelGAEConfig(turn_gamma=tg, turn_lam=tl, token_gamma=g, token_lam=lam, whiten=False)
    got = BiLevelGAE(cfg).compute(sparse)
    v = np.asarray(inp.values, dtype=float)
    for i in range(m.shape[0]):
        turns = ref.turns_of_row(sparse, i)
        a_k = ref.turn_level_gae([r[i, pos[-1]] for _t, pos in turns], [v[i, pos[-1]] for _t, pos in turns], tg, tl)
        np.testing.assert_allclose([got.advantages[i, pos[-1]] for _t, pos in turns], a_k, rtol=TOL, atol=TOL)


@PROPERTY
@given(inp=adv_inputs(), tg=UNIT, tl=UNIT)
def test_bilevel_first_value_telescopes_to_the_turn_advantage(inp, tg, tl) -> None:
    """turn_value="first", token gamma = lambda = 1: A at a turn's first token = A_k, rewards anywhere in the turn."""
    cfg = BiLevelGAEConfig(turn_gamma=tg, turn_lam=tl, turn_value="first", whiten=False)
    got = BiLevelGAE(cfg).compute(inp)
    r, v, m = (np.asarray(x, dtype=float) for x in (inp.token_rewards, inp.values, inp.response_mask))
    for i in range(m.shape[0]):
        turns = ref.turns_of_row(inp, i)
        r_k = [sum(r[i, p] for p in pos) for _t, pos in turns]
        a_k = ref.turn_level_gae(r_k, [v[i, pos[0]] for _t, pos in turns], tg, tl)
        np.testing.assert_allclose([got.advantages[i, pos[0]] for _t, pos in turns], a_k, rtol=TOL, atol=TOL)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_inputs_are_not_mutated_and_output_is_fresh(name: str, data: st.DataObject) -> None:
    cls, configs, _reference = ESTIMATORS[name]
    inp = data.draw(adv_inputs())
    snapshot = {f: np.array(getattr(inp, f), copy=True) for f in
                ("token_rewards", "response_mask", "group_ids", "values", "turn_ids")}
    keys = [list(k) for k in inp.state_keys]
    out = cls(data.draw(configs)).compute(inp)
    for f, before in snapshot.items():
        assert np.array_equal(np.asarray(getattr(inp, f)), before), f"{name} mutated {f}"
    assert inp.state_keys == keys
    assert not np.shares_memory(out.advantages, np.asarray(inp.token_rewards))
    assert not np.shares_memory(out.returns, np.asarray(inp.values))
