"""Tests of the FrozenLake env: contract, gymnasium dynamics, maps, rendering, oracle, determinism, config."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv as GymFrozenLakeEnv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragen_core.checks import check_env, fuzz_env
from ragen_core.errors import ConfigError
from ragen_core.registry import EnvRegistry
from ragen_plugins_envs.frozenlake import (
    ACTIONS,
    FrozenLakeConfig,
    FrozenLakeEnv,
    FrozenLakeGenerationError,
    generate_map,
    shortest_path,
)
from ragen_plugins_envs.registration_grid import GRID_VARIANTS, register_grid_envs

LAKE_VARIANTS = {name: params for name, (env, params, _d) in GRID_VARIANTS.items() if env == "frozenlake"}
PARAMS = [pytest.param({}, id="frozenlake"), *(pytest.param(p, id=n) for n, p in LAKE_VARIANTS.items())]
OPEN_LAKE = ["FFFF", "FSFF", "FFFF", "FFFG"]


# ------------------------------------------------------------------------------------------------------- contract

@pytest.mark.parametrize("params", PARAMS)
def test_check_env_passes(params: dict) -> None:
    check_env(lambda: FrozenLakeEnv(**params))


def test_metadata_and_defaults() -> None:
    env = FrozenLakeEnv()
    cfg = env.config
    assert (cfg.size, cfg.p, cfg.success_rate, env.max_actions_per_traj) == (4, 0.9, 0.8, 10)
    assert env.action_names == ("Left", "Down", "Right", "Up")
    assert set(env.legend) == {"P", "_", "O", "G", "X", "√"}
    assert "slippery" in env.instruction
    assert "slippery" not in FrozenLakeEnv(success_rate=1.0).instruction


def test_registration_and_variants() -> None:
    registry = EnvRegistry()
    register_grid_envs(registry)
    assert {"frozenlake", "frozenlake_det", "frozenlake_coord"} <= set(registry.names())
    assert registry.make("frozenlake_det").config.success_rate == 1.0
    obs, _ = registry.make("frozenlake_coord").reset(seed=0)
    assert obs.startswith("Lake: 4 rows x 4 columns")


def test_the_3x3_variant_is_the_embedded_defaults_task() -> None:
    registry = EnvRegistry()
    register_grid_envs(registry)
    env = registry.make("frozenlake_3x3")
    assert (env.config.size, env.config.success_rate) == (3, 1.0)
    hints = registry.hints("frozenlake_3x3")
    assert (hints.max_turn, hints.max_actions_per_turn) == (4, 1)
    lengths = []
    for seed in range(500):  # four moves reach the goal on all but about 1 map in 500
        env.reset(seed=seed)
        path = shortest_path(env.desc, env.position)
        assert path is not None
        lengths.append(len(path))
    assert sum(n <= 4 for n in lengths) >= 495 and max(lengths) <= 6


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), size=st.sampled_from([3, 4]),
       moves=st.lists(st.lists(st.sampled_from(ACTIONS), max_size=6), min_size=2, max_size=4))
def test_state_keys_are_equal_exactly_when_map_and_tile_are(seed: int, size: int, moves: list[list[str]]) -> None:
    """GiGPO groups turns by state key: on the same map, two walks have equal keys exactly when they stand on the
    same tile (then their boards render alike too); another map never shares a key."""
    assert FrozenLakeEnv().state_key() == ""  # before reset
    seen: dict[str, tuple[tuple[int, int], str]] = {}
    for walk in moves:
        env = FrozenLakeEnv(size=size, success_rate=1.0)
        env.reset(seed=seed)
        for move in walk:
            _obs, _r, terminated, _t, _i = env.step(move)
            key = env.state_key()
            if key in seen:
                assert seen[key] == (env.position, env.render())
            seen[key] = (env.position, env.render())
            if terminated:
                break
    assert len(seen) == len({pos for pos, _render in seen.values()})
    other = FrozenLakeEnv(size=size, success_rate=1.0)
    other.reset(seed=seed + 1)
    if other.desc != env.desc:
        assert other.state_key() not in seen


# ----------------------------------------------------------------------------------------------- invalid actions

@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=st.lists(st.text(), min_size=50, max_size=50), seed=st.integers(0, 10**6))
def test_fuzzed_actions_never_raise(actions: list[str], seed: int) -> None:
    def check(action: str, step: tuple, before: str) -> None:
        _obs, reward, _terminated, truncated, info = step
        assert isinstance(reward, float) and truncated is False
        assert info["action_is_valid"] is (action.strip().lower() in {"left", "down", "right", "up"})
        if not info["action_is_valid"]:
            assert reward == 0.0  # and the state is unchanged: fuzz_env checks it

    # a valid move between fuzzed strings, so that they hit many different states
    fuzz_env(FrozenLakeEnv(), actions, seed=seed, between=ACTIONS, check=check)


@pytest.mark.parametrize("action", ["", "Left || Up", "<answer>Up</answer>", "0", "3", "west", "🙂" * 10,
                                    "x" * 50_000, "\x00", None, 2])
def test_invalid_action_keeps_state(action: object) -> None:
    env = FrozenLakeEnv()
    obs, _ = env.reset(seed=11)
    out, reward, terminated, truncated, info = env.step(action)  # type: ignore[arg-type]
    assert (out, reward, terminated, truncated) == (obs, 0.0, False, False)
    assert info["action_is_valid"] is False and info["action_is_effective"] is False


# ------------------------------------------------------------------------------------------------------- dynamics

def test_goal_reward_and_step_after_end() -> None:
    env = FrozenLakeEnv(success_rate=1.0)
    obs, info = env.reset(seed=0, options={"desc": ["SFH", "FFG"]})
    assert obs == "P_O\n__G" and info["optimal_moves"] == 3 and info["distance_to_goal"] == 3
    assert env.step("Down")[:4] == ("__O\nP_G", 0.0, False, False)
    assert env.step("right")[:4] == ("__O\n_PG", 0.0, False, False)
    obs, reward, terminated, truncated, info = env.step(" RIGHT ")
    assert (obs, reward, terminated, truncated) == ("__O\n__√", 1.0, True, False)
    assert info["success"] is True and info["distance_to_goal"] == 0
    after = env.step("Left")
    assert after[:4] == ("__O\n__√", 0.0, True, False) and after[4]["action_is_valid"] is False
    assert after[4]["success"] is True and env.oracle_action() is None


def test_hole_ends_episode_without_reward() -> None:
    env = FrozenLakeEnv(success_rate=1.0)
    env.reset(seed=0, options={"desc": ["SFH", "FFG"]})
    env.step("Right")
    obs, reward, terminated, _tr, info = env.step("Right")
    assert (obs, reward, terminated) == ("__X\n__G", 0.0, True)
    assert info["success"] is False and info["action_is_valid"] is True
    assert env.oracle_action() is None


def test_edge_move_is_valid_but_ineffective() -> None:
    env = FrozenLakeEnv(success_rate=1.0)
    obs, _ = env.reset(seed=0, options={"desc": ["SFH", "FFG"]})
    out, reward, terminated, _tr, info = env.step("Up")
    assert out == obs and reward == 0.0 and not terminated
    assert info["action_is_valid"] is True and info["action_is_effective"] is False


def test_dynamics_are_gymnasiums() -> None:
    slippery = FrozenLakeEnv(success_rate=0.8)
    slippery.reset(seed=0)
    inner = slippery.gym_env
    assert isinstance(inner, GymFrozenLakeEnv)
    start = int(inner.s)
    probs = sorted(t[0] for t in inner.P[start][2])
    assert probs == pytest.approx([0.1, 0.1, 0.8])
    det = FrozenLakeEnv(success_rate=1.0)
    det.reset(seed=0)
    assert all(len(det.gym_env.P[s][a]) == 1 for s in det.gym_env.P for a in range(4))


def test_success_rate_one_is_deterministic() -> None:
    env = FrozenLakeEnv(success_rate=1.0)
    for seed in range(100):
        env.reset(seed=seed, options={"desc": OPEN_LAKE})
        for action, target in (("Right", (1, 2)), ("Down", (2, 2)), ("Left", (2, 1)), ("Up", (1, 1))):
            env.step(action)
            assert env.position == target


def test_slip_frequencies_match_success_rate() -> None:
    env = FrozenLakeEnv(success_rate=0.8)
    landed: dict[tuple[int, int], int] = {}
    trials = 3000
    for seed in range(trials):
        env.reset(seed=seed, options={"desc": OPEN_LAKE})
        env.step("Right")
        landed[env.position] = landed.get(env.position, 0) + 1
    assert set(landed) == {(1, 2), (0, 1), (2, 1)}  # intended, or one of the two perpendicular moves
    assert landed[(1, 2)] / trials == pytest.approx(0.8, abs=0.035)
    assert landed[(0, 1)] / trials == pytest.approx(0.1, abs=0.03)
    assert landed[(2, 1)] / trials == pytest.approx(0.1, abs=0.03)


# ---------------------------------------------------------------------------------------------------------- maps

def test_every_generated_map_has_a_path() -> None:
    env = FrozenLakeEnv()
    for seed in range(500):
        _obs, info = env.reset(seed=seed)
        desc = env.desc
        text = "".join(desc)
        assert len(desc) == 4 and all(len(r) == 4 for r in desc)
        assert text.count("S") == 1 and text.count("G") == 1
        path = shortest_path(desc, env.position)
        assert path is not None and len(path) == info["optimal_moves"] >= 1


def test_frozen_probability_and_sparse_maps() -> None:
    rng = np.random.default_rng(0)
    maps = [generate_map(rng, 8, 0.9) for _ in range(200)]
    holes = sum(m.count("H") for row in maps for m in row) / (200 * 62)
    assert holes == pytest.approx(0.1, abs=0.02)
    for desc in (generate_map(rng, 6, 0.3) for _ in range(50)):
        start = divmod("".join(desc).index("S"), 6)
        assert shortest_path(desc, start) is not None


def test_generation_failure_is_clear() -> None:
    with pytest.raises(FrozenLakeGenerationError, match="had a path from start to goal in 5 draws"):
        generate_map(np.random.default_rng(0), 10, 0.0, max_tries=5)


def test_shortest_path() -> None:
    assert shortest_path(["SFF", "HHF", "GFF"], (0, 0)) == ["Right", "Right", "Down", "Down", "Left", "Left"]
    assert shortest_path(["SH", "HG"], (0, 0)) is None
    assert shortest_path(["SG"], (0, 1)) == []
    assert shortest_path(["SH", "FG"], (0, 1)) is None


def test_bad_desc_option_is_rejected() -> None:
    env = FrozenLakeEnv()
    for desc in (["SFX", "FFG"], ["SF", "FFG"], ["FF", "FG"], []):
        with pytest.raises(ValueError):
            env.reset(seed=0, options={"desc": desc})


# ------------------------------------------------------------------------------------------------------- rendering

def test_golden_text_rendering() -> None:
    assert FrozenLakeEnv().reset(seed=0)[0] == "_G__\n_O__\n_O__\n_P__"
    assert FrozenLakeEnv().reset(seed=42)[0] == "_P__\n_O__\nG__O\n____"


def test_golden_coord_rendering() -> None:
    obs, _ = FrozenLakeEnv(render_mode="coord").reset(seed=42)
    assert obs == (
        "Lake: 4 rows x 4 columns, positions are (row, col) with (0, 0) at the top left.\n"
        "Player at (row 0, col 1).\n"
        "Goal at (2, 0).\n"
        "Holes: (1, 1), (2, 3)."
    )
    both, _ = FrozenLakeEnv(render_mode="grid_coord").reset(seed=42)
    assert both == f"Coordinates:\n{obs}\nGrid:\n_P__\n_O__\nG__O\n____"


def test_custom_symbols() -> None:
    env = FrozenLakeEnv(symbols={"player": "@", "frozen": "."})
    assert env.reset(seed=42)[0] == ".@..\n.O..\nG..O\n...."
    assert env.legend["@"] == "player"


# ---------------------------------------------------------------------------------------------------------- oracle

def test_oracle_reaches_goal_on_deterministic_lake() -> None:
    env = FrozenLakeEnv(success_rate=1.0)
    for seed in range(100):
        _obs, info = env.reset(seed=seed)
        steps, terminated, total = 0, False, 0.0
        while not terminated:
            action = env.oracle_action()
            assert action in ACTIONS
            _o, reward, terminated, _tr, step_info = env.step(action)
            total += reward
            steps += 1
        assert step_info["success"] and steps == info["optimal_moves"] and total == 1.0


def test_oracle_on_slippery_lake_gives_valid_actions() -> None:
    env = FrozenLakeEnv()
    successes = 0
    for seed in range(100):
        env.reset(seed=seed)
        for _ in range(30):
            action = env.oracle_action()
            if action is None:
                break
            _o, _r, terminated, _tr, info = env.step(action)
            assert info["action_is_valid"]
            if terminated:
                successes += info["success"]
                break
    assert successes > 50


# ----------------------------------------------------------------------------------------------------- determinism

_ACTIONS_PLAYED = ("Right", "Down", "Right", "Down", "Left", "Down")

# the same trace as ``_trace``, as a script for a fresh interpreter
_TRACE_SCRIPT = """
import json, sys
from ragen_plugins_envs.frozenlake import FrozenLakeEnv
cases, seeds, actions = json.loads(sys.argv[1])
out = []
for params in cases:
    env = FrozenLakeEnv(**params)
    rows = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        row = [obs]
        for action in actions:
            obs, reward, terminated, _tr, _info = env.step(action)
            row.append([obs, reward, terminated])
        rows.append(row)
    out.append(rows)
print(json.dumps(out))
"""


def _trace(params: dict, seeds: list[int]) -> list[list[object]]:
    env = FrozenLakeEnv(**params)
    out: list[list[object]] = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        row: list[object] = [obs]
        for action in _ACTIONS_PLAYED:
            obs, reward, terminated, _tr, _info = env.step(action)
            row.append([obs, reward, terminated])
        out.append(row)
    return out


def test_determinism_across_processes() -> None:
    seeds = [0, 1, 2, 77, 31337]
    cases = [{}, {"success_rate": 1.0}, {"size": 6, "p": 0.7}]
    env_vars = {**os.environ, "PYTHONHASHSEED": "4242"}
    result = subprocess.run([sys.executable, "-c", _TRACE_SCRIPT, json.dumps([cases, seeds, _ACTIONS_PLAYED])],
                            capture_output=True, text=True, check=True, env=env_vars)
    assert json.loads(result.stdout) == json.loads(json.dumps([_trace(p, seeds) for p in cases]))


def test_same_seed_same_slips() -> None:
    assert _trace({}, [5, 6]) == _trace({}, [5, 6])


# ---------------------------------------------------------------------------------------------------------- config

@pytest.mark.parametrize(("options", "field"), [
    ({"size": 1}, "size"),
    ({"size": 65}, "size"),
    ({"p": 1.5}, "p"),
    ({"p": -0.1}, "p"),
    ({"success_rate": 1.01}, "success_rate"),
    ({"success_rate": -1.0}, "success_rate"),
    ({"max_actions_per_traj": 0}, "max_actions_per_traj"),
    ({"render_mode": "human"}, "render_mode"),
    ({"symbols": {"hole": "_"}}, "symbols"),
    ({"slippery": True}, "slippery"),
])
def test_bad_config_names_the_field(options: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        FrozenLakeEnv(**options)


def test_config_class_validates_directly() -> None:
    with pytest.raises(ValueError, match="success_rate"):
        FrozenLakeConfig(success_rate=float("nan"))
    assert FrozenLakeConfig(success_rate=1.0).is_slippery is False
    assert FrozenLakeConfig().is_slippery is True
