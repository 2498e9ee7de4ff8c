"""Tests of the MetaMathQA env: contract, generated problem set, answer normalisation, rewards per attempt, the
dataset loaders (plain JSONL and ``datasets``), determinism and fuzzing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragen_plugins_envs.metamath as metamath_module
from ragen_core.checks import check_env, fuzz_env
from ragen_core.errors import ConfigError
from ragen_plugins_envs.metamath import (
    MathProblem,
    MetaMathConfig,
    MetaMathEnv,
    answers_match,
    extract_gold_answer,
    generate_problem,
    load_problems,
    load_records,
    normalize_answer,
    parse_number,
)
from ragen_plugins_envs.registration_text import TEXT_ENV_VARIANTS

DATA = Path(__file__).parent / "data" / "metamathqa_sample.jsonl"
VARIANTS = {name: params for name, (env, params, _d) in TEXT_ENV_VARIANTS.items() if env == "metamathqa"}
PARAMS = [pytest.param({}, id="metamathqa"), *(pytest.param(p, id=n) for n, p in VARIANTS.items()),
          pytest.param({"data_path": str(DATA)}, id="jsonl-data")]
FUZZ = settings(max_examples=200,  # x 50 actions = 10,000 strings per env
                deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ------------------------------------------------------------------------------------------------------- contract

@pytest.mark.parametrize("params", PARAMS)
def test_check_env_passes(params: dict) -> None:
    check_env(lambda: MetaMathEnv(**params))


def test_metadata() -> None:
    env = MetaMathEnv()
    assert env.action_names is None and env.legend == {} and env.max_actions_per_traj == 3
    assert "math word problem" in env.instruction
    assert MetaMathEnv(max_attempts=5).max_actions_per_traj == 5
    assert {"metamath_easy", "metamath_hard"} <= set(VARIANTS)


# ------------------------------------------------------------------------------------------------------- generator

def test_thousands_of_distinct_problems() -> None:
    env = MetaMathEnv()
    questions = set()
    for seed in range(5000):
        obs, _info = env.reset(seed=seed)
        questions.add(obs)
    assert len(questions) >= 3000, len(questions)


@pytest.mark.parametrize(("difficulty", "level"), [("easy", 0), ("medium", 1), ("hard", 2)])
def test_difficulty_levels(difficulty: str, level: int) -> None:
    rng = np.random.default_rng(11)
    problems = [generate_problem(rng, difficulty) for _ in range(1500)]
    assert {p.level for p in problems} == {level}
    assert len({p.question for p in problems}) >= 1000
    assert len({p.family for p in problems}) == 18


def test_mixed_draws_every_level_and_family() -> None:
    rng = np.random.default_rng(3)
    problems = [generate_problem(rng) for _ in range(2000)]
    assert {p.level for p in problems} == {0, 1, 2}
    assert len({(p.family, p.level) for p in problems}) == 54


def test_gold_answers_are_exact_numbers() -> None:
    rng = np.random.default_rng(5)
    for _ in range(3000):
        p = generate_problem(rng)
        value = parse_number(normalize_answer(p.answer))
        assert value is not None, p
        assert answers_match(p.answer, p.answer)
        assert p.question.endswith(("?", ".")) and "{" not in p.question


def _check_by_rederivation(p: MathProblem) -> bool:
    """Recompute the answer of some families from the numbers in the question; True if one applied."""
    gold = parse_number(normalize_answer(p.answer))
    q = p.question
    if m := re.fullmatch(r"Solve for x: x \+ (\d+) = (-?\d+)\.", q):
        assert gold == int(m[2]) - int(m[1])
    elif m := re.fullmatch(r"Solve for x: (\d+)x = (-?\d+)\.", q):
        assert gold == Fraction(int(m[2]), int(m[1]))
    elif m := re.fullmatch(r"Solve for x: (\d+)x \+ (\d+) = (-?\d+)\.", q):
        assert int(m[1]) * gold + int(m[2]) == int(m[3])
    elif m := re.fullmatch(r"Solve for x: (\d+)\(x - (\d+)\) = (\d*)x ([+-]) (\d+)\.", q):
        d = int(m[5]) * (1 if m[4] == "+" else -1)
        assert int(m[1]) * (gold - int(m[2])) == int(m[3] or 1) * gold + d
    elif m := re.fullmatch(r"What is (\d+)% of (\d+)\?", q):
        assert gold == Fraction(int(m[1]) * int(m[2]), 100)
    elif m := re.fullmatch(r"What is the remainder when (\d+) is divided by (\d+)\?", q):
        assert gold == int(m[1]) % int(m[2])
    elif m := re.fullmatch(r"What is (\d+) ([+\-×]) (\d+)\?", q):
        a, b = int(m[1]), int(m[3])
        assert gold == {"+": a + b, "-": a - b, "×": a * b}[m[2]]
    elif m := re.fullmatch(r"If (\d?)x \+ (\d?)y = (-?\d+) and (\d?)x \+ (\d?)y = (-?\d+), what is x \+ y\?", q):
        a, b, e, c, d, f = (int(v or 1) for v in m.groups())
        det = a * d - b * c
        x, y = Fraction(e * d - b * f, det), Fraction(a * f - e * c, det)
        assert gold == x + y
    elif m := re.fullmatch(r"What is (\d+)/(\d+) ([+-]) (\d+)/(\d+)\? Give your answer as a fraction in lowest terms\.",
                           q):
        a, c = Fraction(int(m[1]), int(m[2])), Fraction(int(m[4]), int(m[5]))
        assert gold == (a + c if m[3] == "+" else a - c) and (gold.denominator == 1 or "/" in p.answer)
    else:
        return False
    return True


def test_answers_of_several_families_rederived_from_the_question() -> None:
    rng = np.random.default_rng(17)
    checked = sum(_check_by_rederivation(generate_problem(rng)) for _ in range(4000))
    assert checked >= 600


# ------------------------------------------------------------------------------------------------------- answers

@pytest.mark.parametrize(("prediction", "gold", "expected"), [
    ("1/2", "0.5", True), ("3.0", "3", True), ("1,000", "1000", True), ("$1,234.50", "1234.5", True),
    ("  42. ", "42", True), ("The answer is: 7", "7", True), ("\\frac{3}{4}", "3/4", True),
    ("\\dfrac{3}{4}", "0.75", True), ("\\boxed{12}", "12", True), ("12 cm", "12", True), ("50%", "50", True),
    ("x = 5", "5", True), ("-0.50", "-1/2", True), ("90^\\circ", "90", True), ("\\text{Monday}", "monday", True),
    ("Yes", "yes", True), ("2/4", "1/2", True), ("\\$15", "15 dollars", True), (".5", "1/2", True),
    ("41", "42", False), ("", "0", False), ("0", "", False), ("1/0", "0", False), ("1e309", "1", False),
    ("9" * 5000, "1", False), ("1,2", "12", False), ("12", "1,2", False), ("4", "-4", False), ("x=5", "y=5", True),
])
def test_answer_normalisation(prediction: str, gold: str, expected: bool) -> None:
    assert answers_match(prediction, gold) is expected


def test_normalize_and_parse() -> None:
    assert normalize_answer("  The answer is:  $1,000.  ") == "1000"
    assert normalize_answer("\\left( 3, 4 \\right)") == "(3,4)"
    assert parse_number("3/4") == Fraction(3, 4) and parse_number("-2.5") == Fraction(-5, 2)
    assert parse_number("abc") is None and parse_number("1/0") is None and parse_number("1" * 100) is None
    assert extract_gold_answer("so 2 + 2 = 4.\nThe answer is: 4") == "4"
    assert extract_gold_answer("The answer is: 1\nThe answer is: 2") == "2"
    assert extract_gold_answer("no gold here") is None
    assert normalize_answer(None) == ""  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------------- rewards

def test_golden_render_and_attempts() -> None:
    env = MetaMathEnv()
    obs, info = env.reset(seed=0)
    question = ("Question: A recipe uses flour, sugar and butter in the ratio 5:3:3 by weight. If 9 grams of sugar are "
                "used, how many grams of flour and butter are used in total?")
    assert obs == question and info == {"level": 2} and env.oracle_action() == "24"
    obs, reward, terminated, truncated, info = env.step(" 23 ")
    assert obs == question + "\nAttempt 1: 23 is wrong.\nAttempts left: 2."
    assert (reward, terminated, truncated, info["success"], info["action_is_valid"], info["attempts"]) == (
        0.0, False, False, False, True, 1)
    obs, reward, terminated, _t, info = env.step("24 grams")
    assert obs == question + "\nAttempt 1: 23 is wrong.\nAttempt 2: 24 grams is correct."
    assert (reward, terminated, info["success"]) == (0.5, True, True)
    assert env.oracle_action() is None


@pytest.mark.parametrize("wrong_first", [0, 1, 2])
def test_reward_halves_per_attempt(wrong_first: int) -> None:
    env = MetaMathEnv(difficulty="easy")
    for seed in range(10):
        env.reset(seed=seed)
        gold = env.oracle_action()
        for _ in range(wrong_first):
            _o, reward, terminated, _t, info = env.step("not the answer")
            assert reward == 0.0 and not terminated and info["action_is_valid"] and not info["success"]
        _o, reward, terminated, _t, info = env.step(gold)
        assert reward == 0.5 ** wrong_first and type(reward) is float and terminated and info["success"]


def test_attempts_run_out() -> None:
    env = MetaMathEnv(max_attempts=2)
    env.reset(seed=1)
    assert env.step("-999999")[2] is False
    obs, reward, terminated, _t, info = env.step("wrong again")
    assert (reward, terminated, info["success"], info["attempts"]) == (0.0, True, False, 2)
    assert obs.endswith("Attempts left: 0.")
    _o, reward, terminated, _t, info = env.step(env.problem.answer)
    assert (reward, terminated, info["action_is_valid"]) == (0.0, True, False)


@pytest.mark.parametrize("action", ["", " ", "\n\t", None])
def test_empty_answer_is_invalid_and_free(action: str) -> None:
    env = MetaMathEnv()
    env.reset(seed=2)
    before = env.render()
    obs, reward, terminated, truncated, info = env.step(action)
    assert (reward, terminated, truncated, info["action_is_valid"], info["attempts"]) == (0.0, False, False, False, 0)
    assert obs == before == env.render()


def test_long_answers_are_shortened_in_the_render() -> None:
    env = MetaMathEnv()
    env.reset(seed=2)
    obs = env.step("7" * 10_000)[0]
    assert len(obs) < len(env.problem.question) + 200 and "..." in obs


def test_step_before_reset() -> None:
    _o, reward, terminated, _t, info = MetaMathEnv().step("1")
    assert terminated and reward == 0.0 and not info["action_is_valid"]


# ------------------------------------------------------------------------------------------------------- data

GOLD = ["18", "\\frac{3}{4}", "10", "48", "1,200"]


def test_plain_jsonl_loader() -> None:
    rows = load_records(str(DATA), loader="jsonl")
    assert len(rows) == 5 and all({"query", "response", "type", "original_question"} <= set(r) for r in rows)
    problems = load_problems(str(DATA))
    assert [p.answer for p in problems] == GOLD
    assert problems[0].question.startswith("Mia bakes 4 trays") and problems[0].level == -1


def test_env_on_the_dataset() -> None:
    env = MetaMathEnv(data_path=str(DATA))
    seen = set()
    equivalents = {"18": "18", "\\frac{3}{4}": "0.75", "10": "x = 10", "48": "$48", "1,200": "1200"}
    for seed in range(60):
        obs, _ = env.reset(seed=seed)
        seen.add(env.problem.answer)
        assert obs == f"Question: {env.problem.question}"
        _o, reward, terminated, _t, info = env.step(equivalents[env.problem.answer])
        assert (reward, terminated, info["success"]) == (1.0, True, True)
    assert seen == set(GOLD)


def test_datasets_loader_when_installed() -> None:
    pytest.importorskip("datasets")
    assert load_problems(str(DATA), loader="datasets") == load_problems(str(DATA), loader="jsonl")
    env = MetaMathEnv(data_path=str(DATA), loader="datasets")
    env.reset(seed=0)
    assert env.problem.answer in GOLD


def test_parquet_needs_datasets_or_pyarrow(tmp_path: Path) -> None:
    path = tmp_path / "rows.parquet"
    path.write_bytes(b"PAR1")
    try:
        import datasets  # noqa: F401
    except ImportError:
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            with pytest.raises(ValueError, match="datasets"):
                MetaMathEnv(data_path=str(path))
            return
    with pytest.raises(Exception):  # noqa: B017 - a corrupt file fails inside the reader
        MetaMathEnv(data_path=str(path))


def test_json_array_file(tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([{"query": "What is 1 + 1?", "response": "1 + 1 = 2.\nThe answer is: 2"}]))
    assert load_problems(str(path)) == (MathProblem("What is 1 + 1?", "2"),)


@pytest.mark.parametrize(("content", "message"), [
    ('{"query": "q"}\n', "response"),
    ('{"query": "q", "response": "no gold"}\n', "The answer is"),
    ('{"query": 3, "response": "The answer is: 3"}\n', "query"),
    ("not json\n", "invalid JSON"),
    ("\n\n", "no MetaMathQA rows"),
])
def test_bad_rows_fail_at_construction(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        MetaMathEnv(data_path=str(path))


def test_missing_file_and_reload_after_change(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        MetaMathEnv(data_path=str(tmp_path / "missing.jsonl"))
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"query": "A?", "response": "The answer is: 1"}) + "\n")
    assert load_problems(str(path))[0].answer == "1"
    path.write_text(json.dumps({"query": "B?", "response": "The answer is: 22"}) + "\n")
    assert load_problems(str(path))[0].answer == "22"


# ------------------------------------------------------------------------------------------------------- config

@pytest.mark.parametrize(("options", "field"), [
    ({"difficulty": "extreme"}, "difficulty"),
    ({"max_attempts": 0}, "max_attempts"),
    ({"max_attempts": 21}, "max_attempts"),
    ({"max_attempts": True}, "max_attempts"),
    ({"loader": "pandas"}, "loader"),
    ({"data_path": ""}, "data_path"),
    ({"dificulty": "easy"}, "dificulty"),
])
def test_bad_config_fails_naming_the_field(options: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        MetaMathEnv(**options)


def test_config_class_validates_directly() -> None:
    with pytest.raises(ValueError, match="difficulty"):
        MetaMathConfig(difficulty="impossible")
    with pytest.raises(ValueError, match="difficulty"):
        generate_problem(np.random.default_rng(0), "impossible")


# ------------------------------------------------------------------------------------------------------- seeding

def test_determinism_across_processes() -> None:
    code = ("import json; from ragen_plugins_envs.metamath import MetaMathEnv; e = MetaMathEnv();"
            "h = MetaMathEnv(difficulty='hard'); print(json.dumps([e.reset(seed=s)[0] for s in range(6)]"
            " + [h.reset(seed=s)[0] for s in range(6)]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                         env={**os.environ, "PYTHONHASHSEED": "31337"})
    e, h = MetaMathEnv(), MetaMathEnv(difficulty="hard")
    assert json.loads(out.stdout) == [e.reset(seed=s)[0] for s in range(6)] + [h.reset(seed=s)[0] for s in range(6)]


# ------------------------------------------------------------------------------------------------------- fuzzing

NEAR_VALID = st.builds(
    lambda prefix, number, suffix: f"{prefix}{number}{suffix}",
    st.sampled_from(["", " ", "$", "-", "x = ", "The answer is: ", "\\boxed{"]),
    st.one_of(st.integers(-100, 10**6).map(str), st.fractions(max_denominator=50).map(str),
              st.decimals(allow_nan=False, allow_infinity=False, places=2).map(str)),
    st.sampled_from(["", ".", " cm", "%", " dollars", "}", ",000", "/0"]))


@FUZZ
@given(seed=st.integers(0, 2**32 - 1), actions=st.lists(st.one_of(st.text(), NEAR_VALID), min_size=50, max_size=50))
def test_fuzz_actions_never_raise(seed: int, actions: list[str]) -> None:
    def check(action: str, step: tuple, before: str) -> None:
        _obs, reward, _terminated, _truncated, info = step
        assert type(reward) is float  # finite, and the contract's types: fuzz_env checks them
        assert all(type(info[k]) is bool for k in ("success", "action_is_valid", "action_is_effective"))
        assert reward in ((0.0, 1.0, 0.5, 0.25) if info["action_is_valid"] else (0.0,))

    fuzz_env(MetaMathEnv(), actions, seed=seed, check=check)


def test_no_dynamic_code_execution_in_the_module() -> None:
    source = Path(metamath_module.__file__).read_text(encoding="utf-8")
    assert not re.search(r"(^|[^\w.])(eval|exec)\s*\(", source)
