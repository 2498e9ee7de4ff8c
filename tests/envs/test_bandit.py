"""Tests of the Bandit env (contract, pairs, rewards, determinism, fuzzing) and of the text-env registration."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragen_plugins_envs.bandit as bandit_module
from ragen_core.checks import check_env, fuzz_env
from ragen_core.errors import ConfigError
from ragen_core.registry import EnvRegistry
from ragen_plugins_envs.bandit import TEST_PAIRS, TRAIN_PAIRS, BanditConfig, BanditEnv
from ragen_plugins_envs.registration_text import TEXT_ENV_VARIANTS, TEXT_ENVS, register_text_envs

VARIANTS = {name: params for name, (env, params, _d) in TEXT_ENV_VARIANTS.items() if env == "bandit"}
PARAMS = [pytest.param({}, id="bandit"), *(pytest.param(p, id=n) for n, p in VARIANTS.items())]
FUZZ = settings(max_examples=200,  # x 50 actions = 10,000 strings per env
                deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def registry() -> EnvRegistry:
    reg = EnvRegistry()
    register_text_envs(reg)
    return reg


# ------------------------------------------------------------------------------------------------------- contract

@pytest.mark.parametrize("params", PARAMS)
def test_check_env_passes(params: dict) -> None:
    check_env(lambda: BanditEnv(**params))


def test_metadata() -> None:
    env = BanditEnv()
    assert env.max_actions_per_traj == 1
    assert env.legend == {}
    assert "bandit" in env.instruction
    assert env.action_names == tuple(sorted(n for pair in TRAIN_PAIRS for n in pair))
    env.reset(seed=3)
    assert env.action_names == env.arms and len(env.action_names) == 2


def test_pairs() -> None:
    assert len(TRAIN_PAIRS) == 12 and len(TEST_PAIRS) == 8
    train_names = {n for pair in TRAIN_PAIRS for n in pair}
    test_names = {n for pair in TEST_PAIRS for n in pair}
    assert len(train_names) == 24 and len(test_names) == 16 and not train_names & test_names
    assert all(re.fullmatch(r"[A-Z][a-z]+", n) for n in train_names | test_names)


@pytest.mark.parametrize(("split", "pairs"), [("train", TRAIN_PAIRS), ("test", TEST_PAIRS)])
def test_split_uses_its_pairs_in_both_orders(split: str, pairs: tuple) -> None:
    env = BanditEnv(split=split)
    seen = set()
    for seed in range(300):
        env.reset(seed=seed)
        assert env.arms is not None
        low, high = sorted(env.arms, key=lambda n: env.high_risk_arm == n)
        assert (low, high) in pairs
        seen.add(env.arms)
    assert len(seen) == 2 * len(pairs)


# ------------------------------------------------------------------------------------------------------- rules

def test_golden_render() -> None:
    env = BanditEnv()
    obs, info = env.reset(seed=0)
    assert obs == "Arms: Racer, Tailor. Pull one arm by answering with its name."
    assert env.render() == obs and info == {"pair_index": 10}
    obs, reward, terminated, truncated, _ = env.step("Tailor")
    assert obs == "Arms: Racer, Tailor. Pull one arm by answering with its name.\nYou pulled Tailor and received 0.1."
    assert (reward, terminated, truncated) == (0.1, True, False)


def test_low_arm_pays_low_reward() -> None:
    env = BanditEnv()
    for seed in range(20):
        env.reset(seed=seed)
        low = next(a for a in env.arms if a != env.high_risk_arm)
        obs, reward, terminated, truncated, info = env.step(low)
        assert type(reward) is float and reward == 0.1
        assert terminated and not truncated
        assert info["action_is_valid"] and info["action_is_effective"] and not info["success"]
        assert info["chose_high_risk"] == 0.0


def test_high_arm_pays_one_or_zero_and_succeeds() -> None:
    env = BanditEnv()
    for seed in range(40):
        env.reset(seed=seed)
        _obs, reward, terminated, _tr, info = env.step(env.oracle_action())
        assert reward in (0.0, 1.0) and terminated and info["success"] and info["chose_high_risk"] == 1.0
        assert env.oracle_action() is None


def test_matching_is_case_insensitive_and_stripped() -> None:
    env = BanditEnv()
    env.reset(seed=0)
    _o, _r, terminated, _t, info = env.step("  rACER \n")
    assert terminated and info["action_is_valid"] and info["success"]


@pytest.mark.parametrize("action", ["", "Racer Tailor", "Racer || Tailor", "<answer>Racer</answer>", "1", "Teacher",
                                    "Race", "Racers", "R\u0430cer", "Racer" * 1000])
def test_invalid_actions_change_nothing(action: str) -> None:
    env = BanditEnv()
    env.reset(seed=0)
    before = env.render()
    obs, reward, terminated, truncated, info = env.step(action)
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert not info["action_is_valid"] and not info["action_is_effective"] and not info["success"]
    assert env.render() == before == obs


def test_step_after_the_pull_and_before_reset() -> None:
    env = BanditEnv()
    obs, reward, terminated, _t, info = env.step("Teacher")
    assert terminated and reward == 0.0 and not info["action_is_valid"] and isinstance(obs, str)
    env.reset(seed=1)
    env.step(env.oracle_action())
    _o, reward, terminated, _t, info = env.step(env.oracle_action() or env.arms[0])
    assert terminated and reward == 0.0 and not info["action_is_valid"]


def test_empirical_high_arm_payout() -> None:
    env = BanditEnv()
    rewards = []
    for seed in range(4000):
        env.reset(seed=seed)
        rewards.append(env.step(env.high_risk_arm)[1])
    mean = sum(rewards) / len(rewards)
    assert abs(mean - 0.25) < 0.03, mean


def test_custom_rewards_and_probability() -> None:
    env = BanditEnv(low_reward=0.3, high_reward=2.0, high_prob=1.0)
    env.reset(seed=5)
    assert env.step(env.high_risk_arm)[1] == 2.0
    env.reset(seed=5)
    low = next(a for a in env.arms if a != env.high_risk_arm)
    assert env.step(low)[1] == 0.3
    env = BanditEnv(high_prob=0.0)
    assert all(env.reset(seed=s) and env.step(env.high_risk_arm)[1] == 0.0 for s in range(30))


# ------------------------------------------------------------------------------------------------------- seeding

def test_same_seed_same_pair_and_order() -> None:
    a, b = BanditEnv(), BanditEnv()
    for seed in range(100):
        assert a.reset(seed=seed) == b.reset(seed=seed)
        assert a.arms == b.arms and a.high_risk_arm == b.high_risk_arm
        assert a.step(a.arms[0])[:2] == b.step(b.arms[0])[:2]


def test_determinism_across_processes() -> None:
    code = ("import json; from ragen_plugins_envs.bandit import BanditEnv;"
            "e = BanditEnv(); t = BanditEnv(split='test');"
            "print(json.dumps([e.reset(seed=s)[0] for s in range(8)] + [t.reset(seed=s)[0] for s in range(8)]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                         env={**os.environ, "PYTHONHASHSEED": "4321"})
    e, t = BanditEnv(), BanditEnv(split="test")
    assert json.loads(out.stdout) == [e.reset(seed=s)[0] for s in range(8)] + [t.reset(seed=s)[0] for s in range(8)]


# ------------------------------------------------------------------------------------------------------- fuzzing

NEAR_VALID = st.from_regex(r" ?(teacher|trader|TRADER|Racer|tailor|Gambler|Librarian|arm ?[12]) ?[.!]?", fullmatch=True)


@FUZZ
@given(seed=st.integers(0, 2**32 - 1), actions=st.lists(st.one_of(st.text(), NEAR_VALID), min_size=50, max_size=50))
def test_fuzz_actions_never_raise(seed: int, actions: list[str]) -> None:
    def check(action: str, step: tuple, before: str) -> None:
        _obs, reward, _terminated, _truncated, info = step
        assert type(reward) is float  # finite, and the contract's types: fuzz_env checks them
        assert all(type(info[k]) is bool for k in ("success", "action_is_valid", "action_is_effective"))
        if not info["action_is_valid"]:
            assert reward == 0.0

    fuzz_env(BanditEnv(), actions, seed=seed, check=check)


# ------------------------------------------------------------------------------------------------------- config

@pytest.mark.parametrize(("options", "field"), [
    ({"split": "val"}, "split"),
    ({"high_prob": 1.5}, "high_prob"),
    ({"high_prob": -0.1}, "high_prob"),
    ({"low_reward": float("nan")}, "low_reward"),
    ({"high_reward": "1"}, "high_reward"),
    ({"splitt": "train"}, "splitt"),
])
def test_bad_config_fails_naming_the_field(options: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        BanditEnv(**options)


def test_config_class_validates_directly() -> None:
    with pytest.raises(ValueError, match="high_prob"):
        BanditConfig(high_prob=2.0)
    assert BanditEnv(BanditConfig(split="test")).pairs == TEST_PAIRS


# ------------------------------------------------------------------------------------------------------- registration

def test_register_text_envs() -> None:
    reg = registry()
    assert set(TEXT_ENVS) == {"bandit", "countdown", "metamathqa", "sudoku"}
    assert {"bandit", "bandit_test", "countdown", "countdown_3", "countdown_4", "metamathqa", "metamath_easy",
            "metamath_hard", "sudoku", "sudoku_4x4_medium", "sudoku_9x9_easy", "sudoku_9x9_hard"} <= set(reg.names())
    for name in reg.names():
        assert reg.get(name).description
    for spec in reg.envs():
        assert spec.config_class() is spec.load().config_cls
    for variant in reg.variants():
        spec, params, _instruction = reg.resolve(variant.name)
        spec.make_config(params)
    assert isinstance(reg.make("bandit_test"), BanditEnv) and reg.make("bandit_test").config.split == "test"


def test_registration_module_is_light() -> None:
    code = ("import sys, ragen_plugins_envs.registration_text as r; from ragen_core.registry import EnvRegistry;"
            "r.register_text_envs(EnvRegistry());"
            "print([m for m in ('numpy', 'gymnasium', 'datasets', 'ragen_plugins_envs.bandit') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"


def test_no_dynamic_code_execution_in_the_module() -> None:
    source = Path(bandit_module.__file__).read_text(encoding="utf-8")
    assert not re.search(r"(^|[^\w.])(eval|exec)\s*\(", source)
