"""Tests of the FrozenLake env: contract, gymnasium dynamics, maps, rendering, oracle, determinism, config, and maps and
episodes against plain references (RAGEN's lake generator written plainly; gymnasium's env stepped side by side)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv as GymFrozenLakeEnv
from gymnasium.envs.toy_text.frozen_lake import generate_random_map
from gymnasium.utils import seeding
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


# --------------------------------------------------------------------------------------- maps against references

def _drawing_state(generator: np.random.Generator) -> dict:
    """The part of a generator's state that decides its next numbers: numpy leaves the last 32-bit half-word in
    ``uinteger`` after using it (``has_uint32=0``), where it is never read again."""
    state = dict(generator.bit_generator.state)
    if not state["has_uint32"]:
        state["uinteger"] = 0
    return state


def _reference_has_path(desc: list[str], start: int, goal: int) -> bool:
    """Depth-first search over non-hole tiles, written plainly (like gymnasium's ``is_valid``, from the start)."""
    rows, cols = len(desc), len(desc[0])
    stack, seen = [divmod(start, cols)], set()
    while stack:
        r, c = stack.pop()
        if (r, c) == divmod(goal, cols):
            return True
        if (r, c) in seen or desc[r][c] == "H":
            continue
        seen.add((r, c))
        stack.extend((r + dr, c + dc) for dr, dc in ((1, 0), (0, 1), (-1, 0), (0, -1))
                     if 0 <= r + dr < rows and 0 <= c + dc < cols)
    return False


def _reference_map(rng: np.random.Generator, size: int, p: float) -> list[str]:
    """RAGEN's lake as this env draws it (module docstring), written plainly with numpy's own calls: the frozen
    tiles, then two distinct tiles for start and goal, redrawn until a path joins them."""
    while True:
        frozen = rng.random((size, size)) < p
        start, goal = (int(i) for i in rng.choice(size * size, size=2, replace=False))
        grid = [["F" if f else "H" for f in row] for row in frozen.tolist()]
        grid[start // size][start % size] = "S"
        grid[goal // size][goal % size] = "G"
        desc = ["".join(row) for row in grid]
        if _reference_has_path(desc, start, goal):
            return desc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**40), size=st.integers(2, 10), p=st.floats(0.35, 1.0), draws=st.integers(1, 3))
def test_maps_are_the_plain_references(seed: int, size: int, p: float, draws: int) -> None:
    """generate_map draws the map of the plain reference, and leaves the generator where the reference does (so the
    maps after it, and the slips, follow on), whatever half-word numpy had buffered before."""
    ours, ref = seeding.np_random(seed)[0], seeding.np_random(seed)[0]
    if seed % 2:  # an odd seed starts with a buffered 32-bit word
        ours.integers(7), ref.integers(7)
    for _ in range(draws):
        assert generate_map(ours, size, p) == _reference_map(ref, size, p)
    assert _drawing_state(ours) == _drawing_state(ref)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(3, 8), p=st.floats(0.5, 1.0))
def test_holes_are_gymnasiums_first_board(seed: int, size: int, p: float) -> None:
    """gymnasium's ``generate_random_map`` puts the start top-left and the goal bottom-right (RAGEN's lake draws
    both), so the maps differ by design; the frozen tiles are the same draw: when gymnasium keeps its first board and
    our first map has a path, both have the same holes outside the start and goal tiles."""
    board = seeding.np_random(seed)[0].choice(["F", "H"], (size, size), p=[p, 1 - p])  # gymnasium's first board
    board[0][0], board[-1][-1] = "S", "G"
    gym_map = generate_random_map(size=size, p=p, seed=seed)
    if gym_map != ["".join(row) for row in board]:
        return  # gymnasium redrew its board (no path from corner to corner)
    try:
        ours = generate_map(seeding.np_random(seed)[0], size, p, max_tries=1)
    except FrozenLakeGenerationError:
        return  # our first start and goal had no path: we redraw from other numbers
    special = {0, size * size - 1, "".join(ours).index("S"), "".join(ours).index("G")}
    for i, (a, b) in enumerate(zip("".join(ours), "".join(gym_map))):
        if i not in special:
            assert (a == "H") == (b == "H"), (seed, ours, gym_map)


# ------------------------------------------------------------------------------- episodes against gymnasium's env

class _GymnasiumLake:
    """The lake as this env played it through gymnasium before its dynamics were written out: the map from the plain
    reference, then gymnasium's ``FrozenLakeEnv`` on it, seeded with ``np_random.integers(2**31 - 1)``."""

    def __init__(self, size: int, p: float, success_rate: float) -> None:
        self.size, self.p, self.success_rate = size, p, success_rate

    def reset(self, seed: int | None, desc: list[str] | None) -> tuple[str, int]:
        if seed is not None:
            self.np_random = seeding.np_random(seed)[0]
        self.desc = desc if desc is not None else _reference_map(self.np_random, self.size, self.p)
        self.inner = GymFrozenLakeEnv(desc=self.desc, is_slippery=self.success_rate < 1,
                                      success_rate=self.success_rate)
        self.inner.reset(seed=int(self.np_random.integers(2**31 - 1)))
        self.done = False
        row, col = divmod(int(self.inner.s), len(self.desc[0]))
        path = shortest_path(self.desc, (row, col))
        return self.render(), len(path) if path is not None else -1

    def step(self, action: str) -> tuple[str, float, bool, bool]:
        index = ACTIONS.index(action) if action in ACTIONS else None
        if index is None or self.done:
            return self.render(), 0.0, self.done, False
        before = int(self.inner.s)
        state, reward, terminated, _truncated, _info = self.inner.step(index)
        self.done = bool(terminated)
        return self.render(), float(reward), self.done, int(state) != before

    def render(self) -> str:
        row, col = divmod(int(self.inner.s), len(self.desc[0]))
        player = {"H": "X", "G": "√"}.get(self.desc[row][col], "P")
        cells = [[{"H": "O", "G": "G"}.get(ch, "_") for ch in line] for line in self.desc]
        cells[row][col] = player
        return "\n".join("".join(line) for line in cells)


_EPISODE = st.tuples(st.sampled_from([None, "seed", "seed", "seed", "desc"]), st.integers(0, 2**33),
                     st.lists(st.sampled_from([*ACTIONS, "up", "jump"]), max_size=12))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.integers(2, 6), p=st.floats(0.5, 1.0), success_rate=st.sampled_from([1.0, 0.8, 1 / 3, 0.5, 0.0]),
       episodes=st.lists(_EPISODE, min_size=1, max_size=4))
def test_episodes_are_gymnasiums(size: int, p: float, success_rate: float, episodes: list) -> None:
    """Same maps, observations, rewards, ends and slips as gymnasium's env on the same seeds and actions (seeded and
    unseeded resets, generated and given maps), and the same generator state after every reset."""
    env = FrozenLakeEnv(size=size, p=p, success_rate=success_rate)
    ref = _GymnasiumLake(size, p, success_rate)
    for number, (kind, seed, actions) in enumerate(episodes):
        seed_arg = None if kind is None and number else seed  # an unseeded reset continues the previous stream
        desc = OPEN_LAKE if kind == "desc" else None
        obs, info = env.reset(seed=seed_arg, options={"desc": desc} if desc else None)
        assert (obs, info["optimal_moves"]) == ref.reset(seed_arg, desc)
        assert env.desc == ref.desc
        assert _drawing_state(env.np_random) == _drawing_state(ref.np_random)
        for action in actions:
            obs, reward, terminated, truncated, info = env.step(action)
            ref_obs, ref_reward, ref_done, ref_effective = ref.step("Up" if action == "up" else action)
            assert (obs, reward, terminated, truncated) == (ref_obs, ref_reward, ref_done, False)
            assert info["action_is_effective"] is bool(ref_effective)
            assert info["success"] is (ref.desc[env.position[0]][env.position[1]] == "G")


def _episodes_digest(env: FrozenLakeEnv, seeds: range, actions: list[str]) -> str:
    digest = hashlib.sha256()
    for seed in seeds:
        digest.update(json.dumps(env.reset(seed=seed), sort_keys=True).encode())
        for action in actions:
            digest.update(json.dumps(env.step(action)[:4]).encode())
    return digest.hexdigest()[:16]


@pytest.mark.parametrize(("params", "expected"), [({}, "060cac90661913c7"),
                                                  ({"size": 6, "p": 0.7, "success_rate": 1.0}, "99cb2fc4e4d9548e")])
def test_episodes_of_200_seeds_are_unchanged(params: dict, expected: str) -> None:
    """The maps, infos and moves of seeds 0..199 are those of the env before its dynamics were written out (the
    digest was taken from that version)."""
    actions = ["Right", "Down", "Left", "Down", "Up", "Right"]
    assert _episodes_digest(FrozenLakeEnv(**params), range(200), actions) == expected
