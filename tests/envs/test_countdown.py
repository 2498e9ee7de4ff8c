"""Tests of the Countdown env: contract, expression parser (properties, hostile input), solver, generator, dataset
loader, rewards, determinism and fuzzing."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragen_plugins_envs.countdown as countdown_module
from ragen_core.checks import check_env, fuzz_env
from ragen_core.errors import ConfigError
from ragen_plugins_envs.countdown import (
    CountdownConfig,
    CountdownEnv,
    CountdownProblem,
    ExpressionError,
    generate_problem,
    load_problems,
    parse_expression,
    reachable_values,
    solve,
)
from ragen_plugins_envs.registration_text import TEXT_ENV_VARIANTS

DATA = Path(__file__).parent / "data" / "countdown_sample.jsonl"
VARIANTS = {name: params for name, (env, params, _d) in TEXT_ENV_VARIANTS.items() if env == "countdown"}
PARAMS = [pytest.param({}, id="countdown"), *(pytest.param(p, id=n) for n, p in VARIANTS.items()),
          pytest.param({"data_path": str(DATA)}, id="jsonl-data")]
FUZZ = settings(max_examples=200,  # x 50 actions = 10,000 strings per env
                deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def one_problem(tmp_path: Path, target: int, nums: list[int], **options: Any) -> CountdownEnv:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"target": target, "nums": nums}) + "\n")
    env = CountdownEnv(data_path=str(path), **options)
    env.reset(seed=0)
    return env


# ------------------------------------------------------------------------------------------------------- contract

@pytest.mark.parametrize("params", PARAMS)
def test_check_env_passes(params: dict) -> None:
    check_env(lambda: CountdownEnv(**params))


def test_metadata_and_variants() -> None:
    env = CountdownEnv()
    assert env.action_names is None and env.legend == {} and env.max_actions_per_traj == 1
    assert "Countdown" in env.instruction
    assert CountdownEnv(num_count=3).config.num_count == (3, 3)
    assert CountdownEnv().config.num_count == (3, 4)
    env3, env4, mixed = CountdownEnv(num_count=3), CountdownEnv(num_count=4), CountdownEnv()
    sizes = set()
    for seed in range(20):
        env3.reset(seed=seed)
        env4.reset(seed=seed)
        mixed.reset(seed=seed)
        assert len(env3.problem.nums) == 3 and len(env4.problem.nums) == 4
        sizes.add(len(mixed.problem.nums))
    assert sizes == {3, 4}


# ------------------------------------------------------------------------------------------------------- parser

def test_parser_basics() -> None:
    cases = {
        "2 + 3 * 4": 14, "(2 + 3) * 4": 20, "8 - 3 - 2": 3, "8 / 4 / 2": 1, "8 - (3 - 2)": 7,
        "2 * 3 / 4": Fraction(3, 2),
        "3 x 4": 12, "3X4": 12, "3 \u00d7 4 \u00f7 2": 6, "7 \u2212 2": 5, "((((1))))": 1, "1.5 * 2": 3, "0.25+0.75": 1,
        " \t1+1\n": 2, "007 + 1": 8,
    }
    for text, value in cases.items():
        assert parse_expression(text).value == Fraction(value), text
    parsed = parse_expression("(6 - 4) * (3 + 9)")
    assert parsed.numbers == (6, 4, 3, 9) and parsed.value == 24
    assert parse_expression("3.0 + 1").numbers == (3, 1)


def test_division_by_zero_is_undefined_not_an_error() -> None:
    assert parse_expression("1 / 0").value is None
    assert parse_expression("5 / (3 - 3) + 2").value is None
    assert parse_expression("0 / 5").value == 0


HOSTILE = [
    "", " ", "\n", "\x00", "-3", "+3", "-(1+2)", "3 + -2", "2(3+4)", "(3+4)2", "3 4", "3 +", "* 3", "(3+4", "3+4)",
    ")(",
    "()", "2**3", "2^3", "1e3", "1.", ".5", "1..2", "3,4", "3 = 3", "3*8=24", "abs(3)", "sqrt(4)", "x", "3 x", "x 3",
    "__import__('os').system('echo hi')", "lambda: 1", "<answer>3+4</answer>", "\u0663+\u0664", "\uff13+4",
    "nan", "inf", "None", "[3]+[4]", "{3}", "3;4", "3 % 2", "3 // 2", "\u202e3+4", "3\u200b+4", "1" * 201, "%s%n",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_inputs_are_rejected(text: str) -> None:
    with pytest.raises(ExpressionError):
        parse_expression(text)


def test_deep_nesting_never_recurses() -> None:
    deep = "(" * 10_000 + "1" + ")" * 10_000
    with pytest.raises(ExpressionError, match="longer"):
        parse_expression(deep)
    assert parse_expression(deep, max_length=10**6).value == 1
    with pytest.raises(ExpressionError):
        parse_expression("(" * 10_000 + "1", max_length=10**6)
    env = CountdownEnv()
    env.reset(seed=0)
    before = env.render()
    _o, reward, terminated, _t, info = env.step(deep)
    assert (reward, terminated, info["action_is_valid"]) == (0.0, False, False) and env.render() == before


def test_number_literals_are_bounded() -> None:
    with pytest.raises(ExpressionError, match="literal"):
        parse_expression("1" * 101, max_length=1000)
    assert parse_expression("9" * 100 + " * " + "9" * 100, max_length=1000).value == (10**100 - 1) ** 2


def test_non_string_is_rejected() -> None:
    with pytest.raises(ExpressionError):
        parse_expression(None)  # type: ignore[arg-type]


# Random expression trees: a leaf is a literal's text; a node is (op, left, right).
LITERALS = st.one_of(st.integers(0, 10**6).map(str),
                     st.tuples(st.integers(0, 999), st.integers(0, 999)).map(lambda t: f"{t[0]}.{t[1]:03d}"))
TREES = st.recursive(LITERALS, lambda kids: st.tuples(st.sampled_from("+-*/"), kids, kids), max_leaves=14)
PREC = {"+": 1, "-": 1, "*": 2, "/": 2}
GLYPHS = {"+": ["+"], "-": ["-", "\u2212"], "*": ["*", "\u00d7", "x", "X"], "/": ["/", "\u00f7"]}


def tree_value(tree: Any) -> Fraction | None:
    if isinstance(tree, str):
        return Fraction(tree)
    op, left, right = tree
    a, b = tree_value(left), tree_value(right)
    if a is None or b is None:
        return None
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    return None if b == 0 else a / b


def tree_leaves(tree: Any) -> list[Fraction]:
    return [Fraction(tree)] if isinstance(tree, str) else tree_leaves(tree[1]) + tree_leaves(tree[2])


def render_tree(tree: Any, rng: random.Random) -> str:
    """Minimal parentheses (plus random redundant ones), random operator glyphs and whitespace."""
    if isinstance(tree, str):
        text = tree
    else:
        op, left, right = tree
        lt, rt = render_tree(left, rng), render_tree(right, rng)
        if not isinstance(left, str) and PREC[left[0]] < PREC[op]:
            lt = f"({lt})"
        if not isinstance(right, str) and PREC[right[0]] <= PREC[op]:
            rt = f"({rt})"
        space = rng.choice(["", " ", "  ", "\t"])
        text = f"{lt}{space}{rng.choice(GLYPHS[op])}{space}{rt}"
    return f"({text})" if rng.random() < 0.15 else text


@settings(max_examples=300, deadline=None, database=None)
@given(tree=TREES, decoration=st.integers(0, 2**32 - 1))
def test_parser_matches_direct_tree_evaluation(tree: Any, decoration: int) -> None:
    text = render_tree(tree, random.Random(decoration))
    parsed = parse_expression(text, max_length=10**6)
    assert parsed.value == tree_value(tree), text
    assert list(parsed.numbers) == tree_leaves(tree), text


# ------------------------------------------------------------------------------------------------------- solver

def test_solve_examples() -> None:
    for nums, target in [([3, 4, 5, 6], 24), ([44, 19, 35], 98), ([8, 2, 4], 64), ([7, 7], 1), ([5], 5),
                         ([1, 5, 5, 5], 24), ([3, 3, 8, 8], 24)]:
        text = solve(nums, target)
        assert text is not None, (nums, target)
        parsed = parse_expression(text)
        assert parsed.value == target and sorted(parsed.numbers) == sorted(map(Fraction, nums))
    assert solve([1, 1, 1], 100) is None
    assert solve([], 3) is None
    assert solve([2, 2], 5) is None
    with pytest.raises(ValueError):
        solve(list(range(1, 9)), 10)


def test_reachable_values_small_cases() -> None:
    assert reachable_values([2, 3]) == {Fraction(v) for v in (5, 6, -1, 1)} | {Fraction(2, 3), Fraction(3, 2)}
    assert reachable_values([0, 4]) == {Fraction(v) for v in (4, 0, -4)}
    assert reachable_values([]) == frozenset()


def test_generated_targets_are_solvable_for_seeds_0_to_199() -> None:
    env = CountdownEnv()
    for seed in range(200):
        obs, info = env.reset(seed=seed)
        problem = env.problem
        assert 1 <= problem.target <= 99 and all(1 <= n <= 99 for n in problem.nums) and len(problem.nums) in (3, 4)
        assert obs.startswith(f"Target: {problem.target}, nums: {list(problem.nums)}")
        answer = env.oracle_action()
        assert answer is not None
        _o, reward, terminated, _t, step_info = env.step(answer)
        assert reward == 1.0 and terminated and step_info["success"], (seed, answer)


def test_generator_respects_ranges() -> None:
    import numpy as np

    rng = np.random.default_rng(7)
    for _ in range(20):
        p = generate_problem(rng, num_count=(2, 2), number_range=(5, 9), target_range=(40, 50))
        assert len(p.nums) == 2 and all(5 <= n <= 9 for n in p.nums) and 40 <= p.target <= 50
        assert solve(p.nums, p.target) is not None


# ------------------------------------------------------------------------------------------------------- rewards

def test_golden_render() -> None:
    env = CountdownEnv()
    obs, info = env.reset(seed=0)
    assert obs == ("Target: 9, nums: [64, 51, 27, 31]\n"
                   "Use each number exactly once with + - * / and parentheses; answer with the expression.")
    assert info == {"num_count": 4, "target": 9}
    obs, reward, *_ = env.step("  64 - 51 +   27 - 31 ")
    assert obs == "Target: 9, nums: [64, 51, 27, 31]\nYour answer: 64 - 51 + 27 - 31 = 9 (correct)"
    assert reward == 1.0


def test_reward_rules(tmp_path: Path) -> None:
    env = one_problem(tmp_path, 24, [3, 4, 5, 6])
    assert env.render().startswith("Target: 24, nums: [3, 4, 5, 6]")
    _o, reward, terminated, truncated, info = env.step("(3 - 4 + 5) * 6")
    assert (reward, terminated, truncated, info["success"], info["numbers_match"]) == (1.0, True, False, True, 1.0)

    env.reset(seed=0)
    obs, reward, terminated, _t, info = env.step("3 + 4 + 5 + 6")
    assert (reward, terminated, info["success"], info["action_is_valid"]) == (0.1, True, False, True)
    assert obs.endswith("= 18 (wrong value)")

    env.reset(seed=0)
    obs, reward, terminated, _t, info = env.step("4 * 6")
    assert (reward, terminated, info["action_is_valid"], info["numbers_match"]) == (0.0, True, True, 0.0)
    assert obs.endswith("(does not use exactly the given numbers)")

    env.reset(seed=0)
    _o, reward, _te, _t, info = env.step("(3 - 4 + 5) * 6 * 1")
    assert reward == 0.0 and not info["success"]

    env.reset(seed=0)
    _o, reward, _te, _t, _i = env.step("3.0 * 4 + 5 + 6 + 1 - 1")
    assert reward == 0.0

    env.reset(seed=0)
    _o, reward, _te, _t, info = env.step("(3.0 - 4 + 5) * 6.00")
    assert reward == 1.0 and info["success"]

    env.reset(seed=0)
    before = env.render()
    obs, reward, terminated, truncated, info = env.step("(3 - 4 + 5) * 6 = 24")
    assert (reward, terminated, truncated, info["action_is_valid"]) == (0.0, False, False, False)
    assert obs == before == env.render()


def test_division_by_zero_with_the_right_numbers_gets_the_format_reward(tmp_path: Path) -> None:
    env = one_problem(tmp_path, 24, [2, 2, 6])
    obs, reward, terminated, _t, info = env.step("6 / (2 - 2)")
    assert (reward, terminated, info["action_is_valid"], info["success"]) == (0.1, True, True, False)
    assert "undefined" in obs


def test_exact_fraction_arithmetic(tmp_path: Path) -> None:
    env = one_problem(tmp_path, 24, [1, 3, 4, 6])
    _o, reward, *_ = env.step("6 / (1 - 3 / 4)")
    assert reward == 1.0


def test_custom_rewards_and_length_cap(tmp_path: Path) -> None:
    env = one_problem(tmp_path, 24, [3, 4, 5, 6], correct_reward=2.0, format_reward=0.5, max_expression_length=10)
    assert env.step("(3 - 4 + 5) * 6")[3:] == (False, {"success": False, "action_is_valid": False,
                                                       "action_is_effective": False, "numbers_match": 0.0})
    assert env.step("3+4+5+6")[1] == 0.5


def test_step_after_answer_and_before_reset() -> None:
    env = CountdownEnv()
    _o, reward, terminated, _t, info = env.step("1+1")
    assert terminated and reward == 0.0 and not info["action_is_valid"]
    env.reset(seed=3)
    env.step(env.oracle_action())
    assert env.oracle_action() is None
    before = env.render()
    _o, reward, terminated, _t, info = env.step("1+1")
    assert terminated and reward == 0.0 and not info["action_is_valid"] and env.render() == before


# ------------------------------------------------------------------------------------------------------- data

def test_jsonl_loader_reads_the_public_format() -> None:
    problems = load_problems(str(DATA))
    assert problems == (CountdownProblem(24, (3, 4, 5, 6)), CountdownProblem(98, (44, 19, 35)),
                        CountdownProblem(64, (8, 2, 4)), CountdownProblem(1, (7, 7)))
    env = CountdownEnv(data_path=str(DATA))
    seen = set()
    for seed in range(60):
        env.reset(seed=seed)
        seen.add(env.problem)
        assert solve(env.problem.nums, env.problem.target) is not None
    assert seen == set(problems)


@pytest.mark.parametrize(("content", "message"), [
    ('{"target": 3}\n', "nums"),
    ('{"target": 3, "nums": "1 2"}\n', "nums"),
    ('{"target": "x", "nums": [1, 2]}\n', "target"),
    ('{"target": 3, "nums": [1, -2]}\n', "non-negative"),
    ("{not json}\n", "invalid JSON"),
    ("[1, 2]\n", "objects"),
    ("\n", "no Countdown rows"),
])
def test_bad_data_fails_at_construction(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        CountdownEnv(data_path=str(path))


def test_missing_data_file_fails_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        CountdownEnv(data_path=str(tmp_path / "missing.jsonl"))


def test_datasets_loader_when_installed() -> None:
    pytest.importorskip("datasets")
    assert load_problems(str(DATA), loader="datasets") == load_problems(str(DATA), loader="jsonl")


# ------------------------------------------------------------------------------------------------------- config

@pytest.mark.parametrize(("options", "field"), [
    ({"num_count": 1}, "num_count"),
    ({"num_count": 7}, "num_count"),
    ({"num_count": [4, 3]}, "num_count"),
    ({"number_range": [0, 9]}, "number_range"),
    ({"number_range": [9, 1]}, "number_range"),
    ({"target_range": [10**6, 10**6 + 1], "number_range": [1, 2], "num_count": 2}, "target_range"),
    ({"loader": "pandas"}, "loader"),
    ({"max_expression_length": 0}, "max_expression_length"),
    ({"max_expression_length": 1001}, "max_expression_length"),
    ({"correct_reward": float("inf")}, "correct_reward"),
    ({"data_path": " "}, "data_path"),
    ({"num_cout": 3}, "num_cout"),
])
def test_bad_config_fails_naming_the_field(options: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        CountdownEnv(**options)


def test_config_class_validates_directly() -> None:
    with pytest.raises(ValueError, match="num_count"):
        CountdownConfig(num_count=9)
    with pytest.raises(ValueError, match="number_range"):
        CountdownConfig(number_range=5)  # type: ignore[arg-type]
    assert CountdownConfig(num_count=[3, 4]).num_count == (3, 4)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------------- seeding

def test_determinism_across_processes() -> None:
    code = ("import json; from ragen_plugins_envs.countdown import CountdownEnv; e = CountdownEnv();"
            "print(json.dumps([e.reset(seed=s)[0] for s in range(6)]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                         env={**os.environ, "PYTHONHASHSEED": "777"})
    env = CountdownEnv()
    assert json.loads(out.stdout) == [env.reset(seed=s)[0] for s in range(6)]


# ------------------------------------------------------------------------------------------------------- fuzzing

NEAR_VALID = st.text(alphabet="0123456789 ()+-*/x\u00d7\u00f7.", max_size=30)


@FUZZ
@given(seed=st.integers(0, 2**32 - 1), actions=st.lists(st.one_of(st.text(), NEAR_VALID), min_size=50, max_size=50))
def test_fuzz_actions_never_raise(seed: int, actions: list[str]) -> None:
    def check(action: str, step: tuple, before: str) -> None:
        _obs, reward, _terminated, _truncated, info = step
        assert type(reward) is float  # finite, and the contract's types: fuzz_env checks them
        assert all(type(info[k]) is bool for k in ("success", "action_is_valid", "action_is_effective"))
        assert reward in ((0.0, 0.1, 1.0) if info["action_is_valid"] else (0.0,))

    fuzz_env(CountdownEnv(), actions, seed=seed % 1000, check=check)


def test_no_dynamic_code_execution_in_the_module() -> None:
    source = Path(countdown_module.__file__).read_text(encoding="utf-8")
    assert not re.search(r"(^|[^\w.])(eval|exec)\s*\(", source)
