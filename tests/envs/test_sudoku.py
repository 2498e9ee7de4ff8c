"""Tests of the Sudoku env: contract, solver and unique-solution generator, action spellings, rewards, overwrite rule,
determinism and fuzzing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragen_plugins_envs.sudoku as sudoku_module
from ragen_core.checks import check_env, fuzz_env
from ragen_core.errors import ConfigError
from ragen_plugins_envs.registration_text import TEXT_ENV_VARIANTS
from ragen_plugins_envs.sudoku import (
    DIFFICULTY_FRACTIONS,
    SudokuConfig,
    SudokuEnv,
    count_solutions,
    generate_puzzle,
    is_valid_solution,
    parse_action,
)

VARIANTS = {name: params for name, (env, params, _d) in TEXT_ENV_VARIANTS.items() if env == "sudoku"}
PARAMS = [pytest.param({}, id="sudoku"), *(pytest.param(p, id=n) for n, p in VARIANTS.items()),
          pytest.param({"allow_overwrite": True}, id="overwrite")]
FUZZ = settings(max_examples=200,  # x 50 actions = 10,000 strings per env
                deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

GOLDEN_4X4_SEED_0 = (
    "   1 2 | 3 4\n"
    "1  2 _ | 3 4\n"
    "2  4 3 | _ 2\n"
    "   ----+----\n"
    "3  3 4 | 2 _\n"
    "4  _ _ | 4 _"
)
SOLUTION_4X4_SEED_0 = (2, 1, 3, 4, 4, 3, 1, 2, 3, 4, 2, 1, 1, 2, 4, 3)


# ------------------------------------------------------------------------------------------------------- contract

@pytest.mark.parametrize("params", PARAMS)
def test_check_env_passes(params: dict) -> None:
    check_env(lambda: SudokuEnv(**params))


def test_metadata() -> None:
    env = SudokuEnv()
    assert env.action_names is None and env.legend["_"] == "empty cell"
    assert env.max_actions_per_traj == 6 + 4
    assert SudokuEnv(size=9, difficulty="hard").max_actions_per_traj == 49 + 9
    assert SudokuEnv(max_steps=5).max_actions_per_traj == 5
    assert "4x4 Sudoku" in env.instruction and "place N at row R col C" in env.instruction
    assert {"sudoku_4x4_medium", "sudoku_9x9_easy", "sudoku_9x9_hard"} <= set(VARIANTS)


# ------------------------------------------------------------------------------------------------------- solver

def test_count_solutions_basics() -> None:
    assert count_solutions([[0] * 4 for _ in range(4)], limit=1000) == 288
    assert count_solutions([0] * 16, limit=2) == 2
    assert count_solutions([0] * 81, limit=2) == 2
    solved = [list(SOLUTION_4X4_SEED_0[r * 4:(r + 1) * 4]) for r in range(4)]
    assert count_solutions(solved) == 1 and is_valid_solution(solved)
    conflict = [row[:] for row in solved]
    conflict[0][0] = conflict[0][1]
    assert count_solutions(conflict) == 0 and not is_valid_solution(conflict)
    partial = [row[:] for row in solved]
    partial[3][3] = 0
    assert not is_valid_solution(partial) and count_solutions(partial) == 1
    for bad in ([[0] * 5 for _ in range(5)], [[0, 0], [0, 0, 0]], [0] * 15, [[7, 0, 0, 0]] + [[0] * 4] * 3):
        with pytest.raises(ValueError):
            count_solutions(bad)
    assert not is_valid_solution([0] * 15)


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_4x4_puzzles_have_exactly_one_solution(difficulty: str) -> None:
    env = SudokuEnv(size=4, difficulty=difficulty)
    target = round(DIFFICULTY_FRACTIONS[difficulty] * 16 + 0.01)
    for seed in range(50):
        _obs, info = env.reset(seed=seed)
        puzzle = env.puzzle
        assert count_solutions(puzzle.puzzle, limit=3) == 1
        assert is_valid_solution(puzzle.solution)
        assert all(p in (0, s) for p, s in zip(puzzle.puzzle, puzzle.solution))
        removed = puzzle.puzzle.count(0)
        assert 0 < removed <= target and info["removed_fraction"] == removed / 16


@pytest.mark.parametrize("seed", range(4))
def test_9x9_hard_puzzles_have_exactly_one_solution(seed: int) -> None:
    env = SudokuEnv(size=9, difficulty="hard")
    _obs, info = env.reset(seed=seed)
    assert count_solutions(env.puzzle.puzzle, limit=3) == 1
    assert is_valid_solution(env.puzzle.solution)
    assert 0.5 < info["removed_fraction"] <= 49 / 81


def test_generate_puzzle_directly() -> None:
    p = generate_puzzle(9, 0.4, np.random.default_rng(0))
    assert p.puzzle.count(0) == 32 and count_solutions(p.puzzle) == 1 and is_valid_solution(p.solution)
    assert generate_puzzle(4, 0.0, np.random.default_rng(0)).puzzle.count(0) == 0
    with pytest.raises(ValueError):
        generate_puzzle(5, 0.4, np.random.default_rng(0))
    with pytest.raises(ValueError):
        generate_puzzle(4, 1.5, np.random.default_rng(0))


# ------------------------------------------------------------------------------------------------------- actions

SPELLINGS = [
    "place 3 at row 1 col 2", "Place 3 at row 1 column 2", "place 3 at row 1, col 2", "put 3 in row 1 column 2",
    "place number 3 in cell row 1, col 2", "3 at row 1 col 2", "place 3 at (1, 2)", "place 3 at 1,2", "3 at (1,2)",
    "1,2,3", "1, 2, 3", " 1 ,2 , 3 ", "(1, 2, 3)", "(1,2,3)", "[1, 2, 3]", "1 2 3", "row 1 col 2 3", "row 1 col 2: 3",
    "row 1, column 2 = 3", "Row 1 Col 2 is 3", "r1c2=3", "R1C2 3", "r1 c2: 3", "R1C2=3", "(1, 2) = 3", "(1,2): 3",
    "1,2: 3", "1,2=3", "PLACE 3 AT ROW 1 COL 2", "place 3 at row 1 col 2\n",
]


@pytest.mark.parametrize("text", SPELLINGS)
def test_every_spelling_parses(text: str) -> None:
    assert parse_action(text) == (1, 2, 3)


@pytest.mark.parametrize("text", [
    "", "place", "place 3", "row 1 col 2", "1,2", "1,2,3,4", "9,9,9,0", "(1, 2, 3", "<answer>1,2,3</answer>",
    "place three at row one col two", "1;2;3", "\u0661,\u0662,\u0663", "1,2,3" + " " * 100, "1.5,2,3", "-1,2,3",
    "place 3 at row 1 col 2 and place 4 at row 2 col 1", "1,2,3 || 2,3,4", None,
])
def test_malformed_actions_do_not_parse(text: str) -> None:
    assert parse_action(text) is None  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------------- rewards

def fresh(**options: object) -> SudokuEnv:
    env = SudokuEnv(**options)
    env.reset(seed=0)
    return env


def test_golden_render() -> None:
    env = SudokuEnv()
    obs, info = env.reset(seed=0)
    assert obs == GOLDEN_4X4_SEED_0 == env.render()
    assert env.puzzle.solution == SOLUTION_4X4_SEED_0
    assert info == {"removed_fraction": 0.375, "empty_cells": 6, "correct_cells": 10}
    assert env.state_key() == "2034430234200040"


def test_golden_render_9x9_layout() -> None:
    lines = SudokuEnv(size=9).reset(seed=0)[0].splitlines()
    assert lines[0] == "   1 2 3 | 4 5 6 | 7 8 9"
    assert lines[4] == "   ------+-------+------"
    assert len(lines) == 12 and all(len(line) == len(lines[0]) for line in lines)


def test_correct_placement() -> None:
    env = fresh()
    obs, reward, terminated, truncated, info = env.step("place 1 at row 1 col 2")
    assert (reward, terminated, truncated) == (1.0, False, False) and type(reward) is float
    assert info["action_is_valid"] and info["action_is_effective"] and not info["success"]
    assert obs.splitlines()[1] == "1  2 1 | 3 4" and info["empty_cells"] == 5 and info["correct_cells"] == 11


def test_rule_valid_wrong_placement_stays() -> None:
    env = fresh()
    obs, reward, terminated, _t, info = env.step("4,2,1")
    assert (reward, terminated, info["action_is_valid"]) == (0.5, False, True)
    assert obs.splitlines()[-1] == "4  _ 1 | 4 _" and info["correct_cells"] == 10


@pytest.mark.parametrize("action", [
    "place 3 at row 1 col 2",  # conflict in the row
    "place 4 at row 4 col 2",  # conflict in the row (given 4)
    "place 1 at row 1 col 1",  # given cell
    "place 2 at row 1 col 1",  # given cell, same number
    "5,1,1", "1,5,1", "1,2,5", "0,2,1", "1,2,0",  # out of range
    "hello", "", "1,2", "place 1 at row 1 col 2 please",  # malformed
])
def test_invalid_actions_cost_and_change_nothing(action: str) -> None:
    env = fresh()
    before = env.render()
    obs, reward, terminated, truncated, info = env.step(action)
    assert (reward, terminated, truncated) == (-0.1, False, False)
    assert not info["action_is_valid"] and not info["action_is_effective"]
    assert obs == before == env.render()


def test_filled_cells_are_locked_by_default() -> None:
    env = fresh()
    env.step("4,2,1")
    before = env.render()
    for action in ("4,2,2", "4,2,1"):
        _o, reward, _te, _tr, info = env.step(action)
        assert reward == -0.1 and not info["action_is_valid"] and env.render() == before


def test_overwrite_rewards_cannot_be_farmed() -> None:
    env = fresh(allow_overwrite=True)
    assert env.step("4,2,1")[1] == 0.5
    assert env.step("4,2,2")[1] == 1.0
    assert env.step("4,2,1")[1] == -1.0
    before = env.render()
    _o, reward, _te, _tr, info = env.step("4,2,1")
    assert reward == -0.1 and not info["action_is_valid"] and env.render() == before
    assert env.step("1,1,1")[1] == -0.1
    assert env.step("1,2,1")[1] == -0.1  # the wrong 1 at row 4 col 2 blocks the solution's 1 in column 2
    assert env.step("2,3,1")[1] == 1.0
    _o, reward, _te, _tr, info = env.step("2,3,3")
    assert reward == -0.1 and not info["action_is_valid"]


def test_overwrite_conflict_restores_the_cell() -> None:
    env = fresh(allow_overwrite=True)
    env.step("4,2,1")
    before = env.render()
    assert env.step("4,2,4")[1] == -0.1
    assert env.render() == before
    assert env.step("4,2,2")[1] == 1.0


def test_solving_earns_the_bonus_and_ends() -> None:
    env = fresh()
    rewards = []
    while True:
        action = env.oracle_action()
        assert action is not None
        _o, reward, terminated, truncated, info = env.step(action)
        rewards.append(reward)
        assert info["action_is_valid"] and not truncated
        if terminated:
            break
    assert rewards == [1.0] * 5 + [11.0] and info["success"]
    assert tuple(env.grid) == SOLUTION_4X4_SEED_0 and env.oracle_action() is None
    _o, reward, terminated, _t, info = env.step("1,2,1")
    assert (reward, terminated, info["action_is_valid"]) == (0.0, True, False)


def test_oracle_solves_9x9_and_custom_rewards() -> None:
    env = SudokuEnv(size=9, difficulty="medium", correct_reward=2.0, solve_bonus=5.0)
    env.reset(seed=3)
    empties = env.grid.count(0)
    total, steps = 0.0, 0
    terminated = False
    while not terminated:
        _o, reward, terminated, _t, _i = env.step(env.oracle_action())
        total += reward
        steps += 1
    assert steps == empties and total == 2.0 * empties + 5.0


def test_oracle_stays_valid_after_wrong_placements() -> None:
    for seed in range(30):
        env = SudokuEnv(difficulty="hard")
        env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        for _ in range(30):
            action = env.oracle_action()
            if action is None:
                break
            if rng.random() < 0.5:
                empties = [i for i, v in enumerate(env.grid) if v == 0]
                i = empties[int(rng.integers(len(empties)))]
                env.step(f"{i // 4 + 1},{i % 4 + 1},{int(rng.integers(1, 5))}")
                continue
            _o, _r, terminated, _t, info = env.step(action)
            assert info["action_is_valid"], (seed, action)
            if terminated:
                break


def test_no_self_truncation_and_step_before_reset() -> None:
    env = SudokuEnv()
    _o, reward, terminated, _t, info = env.step("1,1,1")
    assert terminated and reward == 0.0 and not info["action_is_valid"]
    env.reset(seed=0)
    for _ in range(100):
        assert env.step("nope")[2:4] == (False, False)


# ------------------------------------------------------------------------------------------------------- config

@pytest.mark.parametrize(("options", "field"), [
    ({"size": 5}, "size"),
    ({"size": 16}, "size"),
    ({"difficulty": "expert"}, "difficulty"),
    ({"max_steps": 0}, "max_steps"),
    ({"allow_overwrite": 1}, "allow_overwrite"),
    ({"invalid_reward": float("nan")}, "invalid_reward"),
    ({"siz": 4}, "siz"),
])
def test_bad_config_fails_naming_the_field(options: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        SudokuEnv(**options)


def test_config_class_validates_directly() -> None:
    with pytest.raises(ValueError, match="size"):
        SudokuConfig(size=6)
    with pytest.raises(ValueError, match="difficulty"):
        SudokuConfig(difficulty="medium ")


# ------------------------------------------------------------------------------------------------------- seeding

def test_same_seed_same_puzzle_and_cache_is_safe() -> None:
    a, b = SudokuEnv(size=9), SudokuEnv(size=9)
    for seed in range(5):
        assert a.reset(seed=seed) == b.reset(seed=seed)
    a.reset(seed=1)
    a.step(a.oracle_action())
    assert b.reset(seed=1)[0] != a.render() and b.puzzle.puzzle.count(0) == a.grid.count(0) + 1


def test_determinism_across_processes() -> None:
    code = ("import json; from ragen_plugins_envs.sudoku import SudokuEnv; e = SudokuEnv(); n = SudokuEnv(size=9);"
            "print(json.dumps([e.reset(seed=s)[0] for s in range(5)] + [n.reset(seed=s)[0] for s in range(3)]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                         env={**os.environ, "PYTHONHASHSEED": "2024"})
    e, n = SudokuEnv(), SudokuEnv(size=9)
    assert json.loads(out.stdout) == [e.reset(seed=s)[0] for s in range(5)] + [n.reset(seed=s)[0] for s in range(3)]


# ------------------------------------------------------------------------------------------------------- fuzzing

NEAR_VALID = st.builds(
    lambda template, r, c, n: template.format(r=r, c=c, n=n),
    st.sampled_from(["{r},{c},{n}", "place {n} at row {r} col {c}", "({r}, {c}, {n})", "r{r}c{c}={n}", "{r} {c} {n}",
                     "row {r} col {c}: {n}", "{r},{c}", "place {n} at ({r},{c})", "{r},{c},{n},{n}"]),
    st.integers(-1, 10), st.integers(-1, 10), st.integers(-1, 10))


@FUZZ
@given(seed=st.integers(0, 2**32 - 1), actions=st.lists(st.one_of(st.text(), NEAR_VALID), min_size=50, max_size=50))
def test_fuzz_actions_never_raise(seed: int, actions: list[str]) -> None:
    def check(action: str, step: tuple, before: str) -> None:
        _obs, reward, _terminated, _truncated, info = step
        assert type(reward) is float  # finite, and the contract's types: fuzz_env checks them
        assert all(type(info[k]) is bool for k in ("success", "action_is_valid", "action_is_effective"))
        assert reward in ((1.0, 0.5, -1.0, 0.0, 11.0) if info["action_is_valid"] else (-0.1, 0.0))

    fuzz_env(SudokuEnv(allow_overwrite=bool(seed % 2)), actions, seed=seed % 500, check=check)


def test_no_dynamic_code_execution_in_the_module() -> None:
    source = Path(sudoku_module.__file__).read_text(encoding="utf-8")
    assert not re.search(r"(^|[^\w.])(eval|exec)\s*\(", source)
