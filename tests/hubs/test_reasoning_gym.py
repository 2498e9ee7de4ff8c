"""The reasoning-gym adapter (plugins/ragen_plugins_reasoning_gym): registration, the env contract on every dataset,
rewards against reasoning-gym's own scorer, the oracle, seeding, option errors, composites and the answer screen
(text a scorer would execute is never scored); slow: a two-step `ragen train` of the tiny model on an rg dataset."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

reasoning_gym = pytest.importorskip("reasoning_gym")
pytest.importorskip("ragen_plugins_reasoning_gym")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from reasoning_gym.factory import DATASETS  # noqa: E402

import ragen_plugins_reasoning_gym.plugin as plugin  # noqa: E402
from ragen_core.checks import check_env, fuzz_env  # noqa: E402
from ragen_core.errors import ConfigError  # noqa: E402
from ragen_plugins_reasoning_gym import screen  # noqa: E402
from ragen_plugins_reasoning_gym.catalogue import dataset_names  # noqa: E402
from ragen_plugins_reasoning_gym.env import ReasoningGymEnv, reference_answer  # noqa: E402

NAMES = dataset_names()
#: the datasets whose entries have neither a reference answer nor an example solution (no oracle)
NO_ORACLE = {"boxnet", "rush_hour"}
#: the options of the every-dataset checks: two problems each, so each is generated once and shared
SMALL = {"size": 2}


@pytest.fixture
def envs(ragen_register: Any, ragen_registries: Any) -> Any:
    """The env registry with only this plugin registered (the contract kit's fixtures)."""
    ragen_register(plugin, name="reasoning_gym")
    return ragen_registries().envs


@functools.cache
def own_dataset(name: str, seed: int = 42, size: int = 500) -> Any:
    """The dataset as reasoning-gym itself makes it: the independent reference."""
    return reasoning_gym.create_dataset(name, seed=seed, size=size)


@functools.cache
def made(name: str, **options: Any) -> ReasoningGymEnv:
    """One env per dataset and options, shared by the hypothesis examples."""
    return ReasoningGymEnv(dataset=name, **options)


# ------------------------------------------------------------------------------------------------ registration

def test_registration_through_the_contract_fixtures(envs: Any) -> None:
    spec = envs.get("reasoning_gym")
    assert spec.plugin == "reasoning_gym" and isinstance(spec.entry_point, str)
    assert set(spec.guide) == {"rules", "actions", "rewards", "success"}
    hints = envs.hints("rg.leg_counting")
    assert (hints.max_turn, hints.max_actions_per_turn, hints.answer_tokens) == (1, 1, 96)
    assert envs.namespace("rg").members() == NAMES == sorted(set(DATASETS) - {"composite"})
    assert len(NAMES) == 105 and "rg.leg_counting" in envs
    env = envs.make("rg.gcd")
    assert env.config.dataset == "gcd" and env.action_names is None and env.max_actions_per_traj == 1
    assert envs.make("reasoning_gym").config.dataset == "leg_counting"  # the default


def test_registration_and_listing_the_plugins_import_nothing_heavy() -> None:
    code = ("import sys; from ragen_core.plugins import build_plugin_manager, collect_registries; "
            "envs = collect_registries(build_plugin_manager()).envs; assert 'reasoning_gym' in envs; "
            "heavy = [m for m in ('reasoning_gym', 'sympy', 'ragen_plugins_reasoning_gym.env') if m in sys.modules]; "
            "assert not heavy, heavy")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]


# ------------------------------------------------------------------------------------------------ the contract

@pytest.mark.parametrize("name", NAMES)
def test_check_env_on_every_dataset(envs: Any, name: str) -> None:
    """The whole contract kit (60 actions: every fixed hostile string, then random text) through ``rg.<name>``."""
    check_env(lambda: envs.make(f"rg.{name}", SMALL), n_random_actions=60)


def test_the_oracle_scores_as_documented() -> None:
    """The reference answer (or the metadata's example solution) scores 1 on every dataset that has one."""
    for name in NAMES:
        env = made(name, **SMALL)
        for seed in (0, 1):
            env.reset(seed=seed)
            answer = env.oracle_action()
            if name in NO_ORACLE:
                assert answer is None, name
                continue
            assert isinstance(answer, str), name
            _obs, reward, terminated, _trunc, info = env.step(answer)
            assert (reward, terminated, info["success"]) == (1.0, True, True), (name, seed, info)
            assert env.oracle_action() is None  # the episode is over


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(["leg_counting", "countdown", "string_insertion", "graph_color", "basic_arithmetic",
                             "binary_matrix"]),
       seed=st.integers(0, 10**6), answers=st.lists(st.text(max_size=40), max_size=12))
def test_fuzzed_answers_keep_the_contract_and_score_as_reasoning_gym(name: str, seed: int, answers: list[str]) -> None:
    env = made(name)

    def check(answer: Any, step: tuple[Any, ...], before: str) -> None:
        _obs, reward, terminated, _truncated, info = step
        if not info["action_is_valid"]:
            assert reward == 0.0 and not terminated and info["error"]
            return
        entry = own_dataset(name)[env.index]  # fuzz_env resets to later seeds: the current problem
        assert reward == own_dataset(name).score_answer(answer, entry) and terminated

    fuzz_env(env, answers, seed=seed, check=check)


# ------------------------------------------------------------------------------------------------ rewards

def _answers(name: str, entry: dict[str, Any]) -> list[str]:
    """Right, partly right and wrong answers for ``entry``."""
    ref = reference_answer(entry) or "x"
    out = [ref, f" {ref} ", ref + "0", "0", "no idea", json.dumps({"0": 1}), "[[0, 1], [1, 0]]"]
    if name == "countdown":
        nums = entry["metadata"]["numbers"]
        out.append(" + ".join(map(str, nums)))  # the right numbers, usually the wrong value: partial credit
    if name == "string_insertion":
        out.append(repr(list(ref)))  # a Python list of the characters: reasoning-gym's 0.1 (a literal, so scored)
    return out


@pytest.mark.parametrize("name", ["leg_counting", "countdown", "puzzle24", "string_insertion", "graph_color",
                                  "polynomial_multiplication", "propositional_logic", "rubiks_cube", "gcd"])
def test_reward_is_reasoning_gyms_own_score_of_the_same_entry(name: str) -> None:
    env = made(name)
    scores = set()
    for seed in (3, 777):
        entry = own_dataset(name)[seed % 500]
        for answer in _answers(name, entry):
            obs, _ = env.reset(seed=seed)
            assert obs == entry["question"]
            _obs, reward, terminated, _trunc, info = env.step(answer)
            if info["action_is_valid"]:
                assert reward == own_dataset(name).score_answer(answer, entry) and terminated, answer
                scores.add(reward)
            else:
                assert info["answer_refused"] == 1.0 and reward == 0.0, (answer, info)
    assert 1.0 in scores or name in NO_ORACLE


def test_partial_credit_and_the_success_threshold() -> None:
    entry = own_dataset("countdown")[5]
    answer = " + ".join(map(str, entry["metadata"]["numbers"]))
    expected = own_dataset("countdown").score_answer(answer, entry)
    assert 0 < expected < 1
    for threshold, success in ((1.0, False), (expected, True)):
        env = ReasoningGymEnv(dataset="countdown", success_threshold=threshold)
        env.reset(seed=5)
        _obs, reward, terminated, _trunc, info = env.step(answer)
        assert (reward, terminated, info["success"]) == (expected, True, success)


# ------------------------------------------------------------------------------------------------ seeding

@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_the_same_seed_poses_the_same_problem(seed: int) -> None:
    env, other = made("gcd", size=50, seed=7), ReasoningGymEnv(dataset="gcd", size=50, seed=7)
    question = env.reset(seed=seed)[0]
    assert other.reset(seed=seed)[0] == question == env.reset(seed=seed + 50)[0]  # seed % size
    assert question == own_dataset("gcd", 7, 50)[seed % 50]["question"]


def test_the_seed_option_changes_the_problems() -> None:
    a, b = ReasoningGymEnv(dataset="gcd", seed=1), ReasoningGymEnv(dataset="gcd", seed=2)
    assert [a.reset(seed=s)[0] for s in range(5)] != [b.reset(seed=s)[0] for s in range(5)]


def test_env_workers_in_threads_keep_the_console(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The rollout may step envs from a thread pool: a chatty scorer's prints are kept off the console one thread at
    a time, so ``sys.stdout`` is never left swapped, nothing leaks, and the rewards are the scorer's."""
    import concurrent.futures
    import time

    env = made("gcd", size=8)
    original = env.problems.dataset.score_answer

    def chatty(answer: str, entry: dict[str, Any]) -> float:
        print("scoring", answer)  # as reasoning-gym's bf and codeio print
        time.sleep(0.005)  # long enough for another thread's swap to interleave without the lock
        return original(answer, entry)

    monkeypatch.setattr(env.problems.dataset, "score_answer", chatty)

    def play(seed: int) -> float:
        mine = ReasoningGymEnv(dataset="gcd", size=8)  # shares the dataset (and its chatty scorer)
        mine.reset(seed=seed)
        return mine.step(mine.oracle_action() or "")[1]

    stdout = sys.stdout
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        rewards = list(pool.map(play, range(32)))
    left, sys.stdout = sys.stdout, stdout  # restored even when the check below fails
    assert left is stdout and rewards == [1.0] * 32
    assert "scoring" not in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------ invalid answers

def test_blank_long_and_late_answers_are_invalid_and_change_nothing() -> None:
    env = ReasoningGymEnv(dataset="gcd", max_answer_length=8)
    question = env.reset(seed=1)[0]
    for answer, refused in (("", 0.0), ("  \n\t", 0.0), (None, 0.0), (12, 0.0), ("1" * 9, 1.0)):
        _obs, reward, terminated, _trunc, info = env.step(answer)  # type: ignore[arg-type]
        assert (reward, terminated, info["action_is_valid"], info["answer_refused"]) == (0.0, False, False, refused)
        assert env.render() == question
    env.step(env.oracle_action() or "")
    _obs, reward, terminated, _trunc, info = env.step("1")
    assert (reward, terminated, info["action_is_valid"]) == (0.0, True, False)


def test_a_scorer_that_raises_is_an_invalid_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    env = ReasoningGymEnv(dataset="gcd")
    question = env.reset(seed=0)[0]

    def broken(answer: str, entry: dict[str, Any]) -> float:
        raise KeyError("metadata")

    monkeypatch.setattr(env.problems.dataset, "score_answer", broken)
    _obs, reward, terminated, _trunc, info = env.step("12")
    assert (reward, terminated, info["action_is_valid"], info["score_error"]) == (0.0, False, False, 1.0)
    assert "KeyError" in info["error"] and env.render() == question
    monkeypatch.setattr(env.problems.dataset, "score_answer", lambda answer, entry: float("nan"))
    assert env.step("12")[4]["score_error"] == 1.0


# ------------------------------------------------------------------------------------------------ the screen

@pytest.mark.parametrize("name", sorted(screen.SCREENED))
def test_answers_a_scorer_would_execute_never_run(name: str, tmp_path: Path) -> None:
    """Every screened scorer would run these (reasoning-gym's eval or sympy's parse_expr): they are refused."""
    canary = tmp_path / "ran"
    env = made(name, **SMALL)
    for answer in (f"open({str(canary)!r}, 'w')", f"[open({str(canary)!r}, 'w')]",
                   "__import__('os').getcwd()", "exec('1')", "(lambda: 1)()", "x.__class__"):
        env.reset(seed=0)
        _obs, reward, terminated, _trunc, info = env.step(answer)
        assert (reward, terminated, info["answer_refused"]) == (0.0, False, 1.0), (answer, info)
    assert not canary.exists()


def test_the_screen_refuses_runaway_powers_and_keeps_plain_answers() -> None:
    for answer in ("9**9**9**9", "(9**99)**99", "2**999", "x**(2**3)", "factorial(99999)", "x!", "1 = 1"):
        assert screen.refusal("polynomial_multiplication", answer), answer
    for answer in ("x**2 + 3*x - 1", "-3*x**3/2 + sin(x) + C", "x^2", "2*exp(-x) + log(x)"):
        assert screen.refusal("simple_integration", answer) is None, answer
    assert screen.refusal("countdown", "x + 1") and screen.refusal("countdown", "sqrt(4)")
    assert screen.refusal("countdown", "(25 + 3) * 2 - 7.5 / 3") is None
    assert screen.refusal("string_insertion", "['A', 'B']") is None  # data, scored as reasoning-gym does
    assert screen.refusal("n_queens", "_ Q _ _\nQ _ _ _") is None  # not Python: eval fails harmlessly
    assert screen.refusal("leg_counting", "__import__('os')") is None  # its scorer only compares text


@st.composite
def expressions(draw: st.DrawFn, numbers: list[int]) -> str:
    """An arithmetic expression using each of ``numbers`` once, in any order, with any operators and brackets."""
    order = draw(st.permutations(numbers))
    text = str(order[0])
    for number in order[1:]:
        op = draw(st.sampled_from(["+", "-", "*", "/", " + ", " * "]))
        text = f"({text}{op}{number})" if draw(st.booleans()) else f"{text}{op}{number}"
    return text


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(["countdown", "puzzle24"]), seed=st.integers(0, 9), data=st.data())
def test_arithmetic_answers_pass_the_screen_and_score_as_reasoning_gym(name: str, seed: int, data: st.DataObject) -> None:
    env = made(name)
    env.reset(seed=seed)
    entry = own_dataset(name)[seed]
    answer = data.draw(expressions([int(n) for n in entry["metadata"]["numbers"]]))
    _obs, reward, terminated, _trunc, info = env.step(answer)
    assert info["action_is_valid"] and terminated, (answer, info)
    assert reward == own_dataset(name).score_answer(answer, entry)


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(sorted(screen.SCREENED)), text=st.text(max_size=60))
def test_the_screen_reads_any_text_without_raising(name: str, text: str) -> None:
    why = screen.refusal(name, text)
    assert why is None or (isinstance(why, str) and why.startswith("the answer"))


@pytest.mark.parametrize("name", sorted(screen.SCREENED))
def test_the_screen_lets_the_reference_answers_through(name: str) -> None:
    env = made(name, **SMALL)  # the problems the contract checks generated
    for index in range(2):
        entry = env.problems.entry(index)
        assert screen.refusal(name, reference_answer(entry) or "") is None, (index, entry["answer"])


# ------------------------------------------------------------------------------------------------ options

@pytest.mark.parametrize(("name", "options", "expected"), [
    ("rg.leg_countin", {}, ["'leg_countin'", "did you mean 'leg_counting'?"]),
    ("reasoning_gym", {"dataset": "no_such_thing"}, ["'no_such_thing'", "ragen envs --members rg"]),
    ("rg.leg_counting", {"config": {"min_animal": 2}},
     ["'min_animal'", "did you mean 'min_animals'?", "its keys: min_animals, max_animals"]),
    ("rg.leg_counting", {"config": {"seed": 3}}, ["may not set 'seed'", "env.options.seed"]),
    ("rg.leg_counting", {"config": {"min_animals": -1}}, ["'leg_counting'", "min_animals must be positive"]),
    ("rg.leg_counting", {"size": 0}, ["size", "integer in [1,"]),
    ("rg.leg_counting", {"success_threshold": 0}, ["success_threshold", "(0, 1]"]),
    ("rg.composite", {}, ["needs 'datasets'", "{name, weight, config}"]),
    ("rg.composite", {"config": {"datasets": [{"name": "gcdd"}]}}, ["datasets[0]", "did you mean 'gcd'?"]),
    ("rg.composite", {"config": {"datasets": [{"name": "gcd", "config": {"min_numbrs": 2}}]}},
     ["datasets[0]", "'min_numbrs'", "did you mean 'min_numbers'?"]),
])
def test_bad_options_are_clear_config_errors(envs: Any, name: str, options: dict[str, Any], expected: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        envs.make(name, options)
    for part in expected:
        assert part in str(err.value), str(err.value)


def test_a_composite_mixes_datasets_and_each_member_scores_and_screens_its_own(envs: Any) -> None:
    mix = {"datasets": [{"name": "gcd", "weight": 1}, {"name": "countdown", "weight": 1, "config": {"min_numbers": 3,
                                                                                                 "max_numbers": 3}}]}
    env = envs.make("reasoning_gym", {"dataset": "composite", "config": mix})
    seen = set()
    for seed in range(8):
        _obs, info = env.reset(seed=seed)
        seen.add(info["dataset"])
        assert env.step(env.oracle_action())[1] == 1.0
        env.reset(seed=seed)
        refused = env.step("__import__('os')")[4]["answer_refused"]
        assert refused == (1.0 if info["dataset"] == "countdown" else 0.0)
    assert seen == {"gcd", "countdown"}


# ------------------------------------------------------------------------------------------------ training

@pytest.mark.slow
def test_two_training_steps_of_the_tiny_model(tmp_path: Path, one_torch_thread: None) -> None:
    from tests.hubs.tiny_run import train_two_steps

    metrics, samples = train_two_steps(tmp_path / "run", "envs=[{name: rg.basic_arithmetic, groups: 2}]")
    assert metrics[2]["rollout/samples"] == 4
    for m, phases in zip(metrics, (["val"], ["rollout", "train"], ["rollout", "train", "val"])):
        for phase in phases:  # the env's own metrics, under its namespaced name
            assert 0 <= m[f"{phase}/rg.basic_arithmetic/success"] <= 1 and f"{phase}/rg.basic_arithmetic/pass@k" in m
    questions = {own_dataset("basic_arithmetic")[index]["question"] for index in range(500)}
    assert samples and all(s["turns"][0]["observation"] in questions for s in samples)
