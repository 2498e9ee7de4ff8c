"""Tests of the Coq prover env against the real coqtop: contract, the built-in proofs, rewards, invalid actions,
rollback, timeouts, crash recovery and fuzzing.

They need ``coqtop`` (``apt-get install -y coq``); without it the module is skipped, unless ``RAGEN_REQUIRE_COQ=1``
(CI) turns the absence into a failure.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragen_core.checks import check_env
from ragen_core.errors import ConfigError
from ragen_core.registry import EnvRegistry
from ragen_plugins_envs.registration_prover import PROVER_VARIANTS, register_prover_envs
from tests.envs.prover_support import fuzz_prover

if shutil.which("coqtop") is None:
    if os.environ.get("RAGEN_REQUIRE_COQ") == "1":
        raise RuntimeError("coqtop is required (RAGEN_REQUIRE_COQ=1): apt-get install -y coq")
    pytest.skip("coqtop is not installed (apt-get install -y coq)", allow_module_level=True)

import ragen_plugins_envs.prover.coq as coq_module
from ragen_plugins_envs.prover.coq import (
    THEOREMS_PATH,
    CoqConfig,
    CoqEnv,
    CoqSession,
    clean_output,
    coq_version,
    count_goals,
)

_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
# 200 x 50 actions = 10,000 strings, every one that passes validation run by the real coqtop (about 16 s: slow)
FUZZ = settings(max_examples=200, deadline=None, database=None, suppress_health_check=_HEALTH)
FUZZ_QUICK = settings(max_examples=10, deadline=None, database=None, suppress_health_check=_HEALTH)


@pytest.fixture(scope="module")
def env() -> CoqEnv:
    """One env (one coqtop) shared by the module's tests; every test resets it."""
    e = CoqEnv(max_steps=1000)
    yield e
    e.close()


def light(name: str, **options: object) -> CoqEnv:
    """A fresh env without the preamble (coqtop starts in about 0.2 s instead of 0.8 s) for one theorem."""
    env = CoqEnv(preamble=[], theorem_names=[name], **options)
    env.reset(seed=0)
    return env


def start(env: CoqEnv, name: str) -> str:
    obs, info = env.reset(options={"theorem": name})
    assert not info["prover_error"], info
    return obs


# ------------------------------------------------------------------------------------------------------- contract

def test_check_env_passes() -> None:
    check_env(lambda: CoqEnv())


@pytest.mark.slow
@pytest.mark.parametrize("name", ["coq", "coq_logic"])
def test_check_env_through_the_registry(name: str) -> None:
    reg = EnvRegistry()
    register_prover_envs(reg)
    check_env(lambda: reg.make(name))


def test_registry_makes_the_envs() -> None:
    reg = EnvRegistry()
    register_prover_envs(reg)
    assert {"coq", "coq_nat", "coq_list", "coq_logic", "coq_bool", "lean", "lean_double"} <= set(reg.names())
    env = reg.make("coq_logic", {"max_steps": 9})
    assert isinstance(env, CoqEnv) and env.max_actions_per_traj == 9 and {t.topic for t in env.theorems} == {"logic"}


def test_metadata_and_version() -> None:
    env = CoqEnv()
    assert coq_version().startswith("8.")
    assert env.action_names is None and env.max_actions_per_traj == 20
    assert "Coq 8." in env.instruction and "one tactic per action" in env.instruction
    assert CoqEnv(max_steps=7).max_actions_per_traj == 7
    assert {t.topic for t in env.theorems} == {"nat", "bool", "list", "logic"}
    for variant, (_base, params, _d) in PROVER_VARIANTS.items():
        if variant.startswith("coq_"):
            assert {t.topic for t in CoqEnv(**params).theorems} == {params["topic"]}


def test_theorem_file() -> None:
    records = [json.loads(line) for line in THEOREMS_PATH.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(records) >= 30
    assert len({r["name"] for r in records}) == len(records)
    for r in records:
        assert r["statement"].startswith(f"Theorem {r['name']} : ") and r["statement"].endswith(".")
        assert r["proof"] and all(t.endswith(".") for t in r["proof"])


# ------------------------------------------------------------------------------------------------------- proofs

def test_every_known_proof_is_accepted_by_coq(env: CoqEnv) -> None:
    for theorem in env.theorems:
        start(env, theorem.name)
        rewards = []
        while (action := env.oracle_action()) is not None:
            _o, reward, terminated, truncated, info = env.step(action)
            rewards.append(reward)
            assert info["action_is_valid"] and not truncated, (theorem.name, action, info)
            if terminated:
                break
        assert info["success"] and terminated, (theorem.name, info)
        assert len(rewards) == len(theorem.proof)
        assert all(math.isclose(r, 0.9) for r in rewards[:-1]) and math.isclose(rewards[-1], 10.9), theorem.name
        assert info["goals_remaining"] == 0 and env.oracle_action() is None


def test_observation_shows_theorem_tactics_and_goals(env: CoqEnv) -> None:
    obs = start(env, "ex_add_0_r")
    assert obs.splitlines()[1] == "Theorem ex_add_0_r : forall n : nat, n + 0 = n."
    assert "Tactics so far: none" in obs and "forall n : nat, n + 0 = n" in obs.split("Current goals:")[1]
    obs, reward, *_ = env.step("intros n")
    assert math.isclose(reward, 0.9)
    assert "Tactics so far (1):\n  intros n." in obs
    assert "n : nat" in obs and "(ID" not in obs
    obs, *_ = env.step("induction n as [|n IH].")
    assert "2 goals" in obs and "goal 2 is:" in obs and "S n + 0 = S n" in obs
    assert env.state_key().startswith("ex_add_0_r\n2 goals")


def test_wrong_tactic_is_rejected_and_changes_nothing(env: CoqEnv) -> None:
    start(env, "ex_add_0_r")
    env.step("intros n.")
    goals, key = env.goals, env.state_key()
    obs, reward, terminated, truncated, info = env.step("reflexivity.")
    assert math.isclose(reward, -1.1) and not (terminated or truncated)
    assert info["action_is_valid"] and not info["action_is_effective"] and not info["success"]
    assert env.goals == goals and env.state_key() == key and env.tactics == ["intros n."]
    assert "Last tactic rejected: reflexivity." in obs and "Unable to unify" in obs
    # the proof goes on from the unchanged state
    for action in ["induction n as [|n IH].", "reflexivity.", "simpl.", "rewrite IH."]:
        assert math.isclose(env.step(action)[1], 0.9)
    _o, reward, terminated, _t, info = env.step("reflexivity.")
    assert math.isclose(reward, 10.9) and terminated and info["success"]
    _o, reward, terminated, _t, info = env.step("reflexivity.")
    assert (reward, terminated, info["action_is_valid"]) == (0.0, True, False)


INVALID = [
    "", "   ", ".", "Qed.", "Admitted.", "Abort.", "Require Import Classical.", "Drop.", "Undo.", "Restart.",
    "Print nat.", "Unshelve.", "Defined", "admit.", "give_up.", "exact ltac:(admit).", "native_compute.",
    "intros n. simpl.", "intros n.. ", "intros n. Qed.", "(* comment *) intros n.", "idtac \"hi\".", "intros *)",
    "x" * 401, "intros\x00n.", "intros\u202en.", "intros\u2028n", "idtac <prompt>Coq < 1 || 0 < </prompt>",
    "intros (.", "1:", "all:", "-+ simpl.", "Theorem t : True.",
]


@pytest.mark.parametrize("action", INVALID)
def test_invalid_actions_cost_and_change_nothing(env: CoqEnv, action: str) -> None:
    start(env, "ex_and_comm")
    env.step("intros P Q H.")
    before, tactics = env.render(), list(env.tactics)
    obs, reward, terminated, truncated, info = env.step(action)
    assert math.isclose(reward, -1.1) and not (terminated or truncated)
    assert not info["action_is_valid"] and not info["action_is_effective"] and info["prover_message"]
    assert obs == before == env.render() and env.tactics == tactics
    _o, reward, *_ = env.step("destruct H as [HP HQ].")  # the session is still in the same state
    assert math.isclose(reward, 0.9)


@pytest.mark.parametrize(("action", "display"), [
    ("intros n", "intros n."), ("  intros   n  . ", "intros n."), ("intros\nn.", "intros n."),
    ("- simpl", "- simpl."), ("all: simpl", "all: simpl."), ("2 : reflexivity.", "2 : reflexivity."),
    ("{", "{"), ("}", "}"), ("-", "-"), ("simpl; rewrite IH; reflexivity", "simpl; rewrite IH; reflexivity."),
    ("rewrite Nat.add_comm.", "rewrite Nat.add_comm."), ("exact (fun x => x).", "exact (fun x => x)."),
])
def test_action_normal_forms(action: str, display: str) -> None:
    backend = CoqEnv().backend
    assert backend.validate(action) == (display, "")


def test_sentences_sent_to_coq() -> None:
    backend = CoqEnv(tactic_timeout=3).backend
    assert backend.parse("intros n").sentences == ("Timeout 3 1: intros n .",)
    assert backend.parse("- simpl.").sentences == ("-", "Timeout 3 1: simpl .")
    assert backend.parse("all: lia").sentences == ("Timeout 3 all: lia .",)
    assert backend.parse("[x]: exact I").sentences == ("Timeout 3 [x]: exact I .",)


def test_noop_and_cycles_earn_no_accept_reward(env: CoqEnv) -> None:
    start(env, "ex_add_comm")
    assert math.isclose(env.step("intros n m.")[1], 0.9)
    _o, reward, _te, _tr, info = env.step("idtac.")
    assert math.isclose(reward, -0.1) and info["action_is_valid"] and not info["action_is_effective"]
    assert math.isclose(env.step("symmetry.")[1], 0.9)
    _o, reward, _te, _tr, info = env.step("symmetry.")  # back to the goal seen before
    assert math.isclose(reward, -0.1) and not info["action_is_effective"]
    assert env.tactics == ["intros n m.", "idtac.", "symmetry.", "symmetry."]


def test_ragen_rule_rewards_repeated_states() -> None:
    env = light("ex_add_0_r", reward_repeated_states=True)
    env.step("intros n.")
    _o, reward, _te, _tr, info = env.step("idtac.")
    assert math.isclose(reward, 0.9) and not info["action_is_effective"]
    env.close()


def test_step_limit_penalty_and_truncation() -> None:
    env = light("ex_add_0_r", max_steps=3)
    assert math.isclose(env.step("reflexivity.")[1], -1.1)
    assert math.isclose(env.step("Qed.")[1], -1.1)
    _o, reward, terminated, truncated, info = env.step("intros n.")
    assert math.isclose(reward, 0.9 - 2.0) and truncated and not terminated and not info["success"]
    _o, reward, terminated, _t, info = env.step("intros n.")
    assert (reward, terminated, info["action_is_valid"]) == (0.0, True, False)
    # completing the proof on the last allowed step is a success without the penalty
    env.close()
    env = light("ex_pred_succ", max_steps=1)
    _o, reward, terminated, truncated, info = env.step("intros n; reflexivity.")
    assert math.isclose(reward, 10.9) and terminated and not truncated and info["success"]
    env.close()


def test_custom_rewards() -> None:
    env = light("ex_add_0_r", step_penalty=0.0, valid_step_reward=0.5, invalid_step_reward=-0.25,
                success_reward=3.0)
    assert env.step("reflexivity.")[1] == -0.25
    assert env.step("intros n.")[1] == 0.5
    assert env.step("induction n; simpl; congruence.")[1] == 3.5
    env.close()


# ------------------------------------------------------------------------------------------------------- soundness

def test_bullet_then_failing_tactic_is_rolled_back(env: CoqEnv) -> None:
    start(env, "ex_and_comm")
    env.step("intros P Q H.")
    env.step("destruct H as [HP HQ].")
    env.step("split.")
    goals = env.goals
    _o, reward, _te, _tr, info = env.step("- exact HP.")  # the bullet focuses, the tactic fails: both undone
    assert math.isclose(reward, -1.1) and info["action_is_valid"] and env.goals == goals
    assert math.isclose(env.step("- exact HQ.")[1], 0.9)
    assert "This subproof is complete" in env.goals and env.goal_count == 1
    _o, reward, terminated, _t, info = env.step("- exact HP.")
    assert math.isclose(reward, 10.9) and terminated and info["success"]


def test_qed_rejects_an_ill_guarded_fixpoint(env: CoqEnv) -> None:
    start(env, "ex_add_0_r")
    assert math.isclose(env.step("fix f 1.")[1], 0.9)
    _o, reward, terminated, _t, info = env.step("exact f.")  # closes the goal, but the term is not well founded
    assert math.isclose(reward, -1.1) and not terminated and not info["success"]
    assert "Qed" in info["prover_message"] and "ill-formed" in info["prover_message"]
    assert env.tactics == ["fix f 1."] and env.goal_count == 1


def test_shelved_goals_are_not_a_proof(env: CoqEnv) -> None:
    start(env, "ex_exists_sum")
    env.step("eexists.")
    _o, _r, terminated, _t, info = env.step("shelve.")
    assert not terminated and not info["success"]


def test_check_assumptions_option() -> None:
    env = light("ex_and_comm", check_assumptions=True)
    while (action := env.oracle_action()) is not None:
        _o, reward, terminated, _t, info = env.step(action)
    assert terminated and info["success"] and math.isclose(reward, 10.9)
    env.close()


def test_timeout_penalty_and_state_kept() -> None:
    env = light("ex_add_0_r", tactic_timeout=1)
    env.step("intros n.")
    goals = env.goals
    started = time.monotonic()
    _o, reward, terminated, truncated, info = env.step("do 1000000 (assert True by trivial).")
    assert time.monotonic() - started < 5
    assert math.isclose(reward, -2.1) and info["prover_timeout"] and info["action_is_valid"]
    assert not (terminated or truncated) and env.goals == goals
    assert math.isclose(env.step("induction n.")[1], 0.9)
    env.close()


def test_unresponsive_coqtop_is_restarted_and_the_proof_replayed() -> None:
    env = light("ex_add_0_r", tactic_timeout=1, hard_timeout_grace=0.5)
    env.step("intros n.")
    session = env.backend.session
    os.kill(session.proc.pid, signal.SIGSTOP)  # coqtop stops answering
    _o, reward, _te, _tr, info = env.step("induction n.")
    assert info["prover_timeout"] and math.isclose(reward, -2.1) and "restarted" in info["prover_message"]
    assert session.starts == 2 and env.tactics == ["intros n."]
    assert math.isclose(env.step("induction n.")[1], 0.9)  # the replayed session has the accepted tactics
    env.close()


def test_a_killed_coqtop_is_restarted() -> None:
    env = light("ex_add_0_r")
    env.step("intros n.")
    os.killpg(env.backend.session.proc.pid, signal.SIGKILL)
    env.backend.session.proc.wait(timeout=10)
    _o, reward, _te, _tr, info = env.step("induction n as [|n IH].")
    assert math.isclose(reward, 0.9) and not info["prover_error"] and env.goal_count == 2
    assert env.backend.session.starts == 2
    env.close()


def test_output_floods_are_bounded(env: CoqEnv) -> None:
    start(env, "ex_add_0_r")
    env.step("intros n.")
    _o, reward, _te, _tr, info = env.step("do 20000 (idtac 1).")
    assert math.isclose(reward, -0.1) and len(info["prover_message"]) <= 2000
    assert env.goal_count == 1 and "n + 0 = n" in env.goals


def test_missing_coqtop_is_a_prover_error_not_an_exception() -> None:
    env = CoqEnv(coqtop="/nonexistent/coqtop")
    obs, info = env.reset(seed=0)
    assert info["prover_error"] and "apt-get install" in info["prover_message"] and "unavailable" in obs
    _o, reward, terminated, truncated, info = env.step("intros.")
    assert (reward, terminated, truncated) == (0.0, False, True) and info["prover_error"]
    check_env(lambda: CoqEnv(coqtop="/nonexistent/coqtop"))


def test_close_kills_coqtop_and_reset_restarts() -> None:
    env = light("ex_add_0_r")
    proc = env.backend.session.proc
    env.close()
    assert proc.poll() is not None
    _obs, info = env.reset(seed=0)
    assert not info["prover_error"] and env.backend.session.alive
    env.close()


# ------------------------------------------------------------------------------------------------------- parsing

def test_clean_output_and_goal_count() -> None:
    text = ("<infomsg>1</infomsg>\n<warning>\nWarning: deprecated [deprecated]</warning>\n"
            "2 goals (ID 7)\n  \n  ============================\n  0 + 0 = 0\n\ngoal 2 (ID 10) is:\n S n + 0 = S n\n\n")
    display, messages = clean_output(text)
    assert display.startswith("2 goals\n") and "(ID" not in display and "goal 2 is:" in display
    assert messages == "Warning: deprecated [deprecated]\n1"
    assert count_goals(display) == 2 and count_goals("No more goals.") == 0 and count_goals("") == -1
    assert count_goals("1 focused goal (shelved: 1)\n\n  ?n = ?n") == 1


def test_session_reports_state_and_errors() -> None:
    session = CoqSession(preamble=())
    session.start()
    reply = session.send("Theorem t : True.", 10)
    assert not reply.error and reply.in_proof and reply.name == "t"
    bad = session.send("Timeout 5 1: foo .", 10)
    assert bad.error and bad.state == reply.state and "foo" in bad.error_message
    session.kill()
    assert not session.alive


# ------------------------------------------------------------------------------------------------------- config

@pytest.mark.parametrize(("options", "field"), [
    ({"tactic_timeout": 0}, "tactic_timeout"),
    ({"tactic_timeout": 1.5}, "tactic_timeout"),
    ({"memory_limit_mb": 10}, "memory_limit_mb"),
    ({"max_steps": 0}, "max_steps"),
    ({"step_penalty": float("inf")}, "step_penalty"),
    ({"theorem_names": []}, "theorem_names"),
    ({"tactic_timout": 5}, "tactic_timout"),
])
def test_bad_config_fails_naming_the_field(options: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        CoqEnv(**options)


def test_theorem_selection() -> None:
    with pytest.raises(ValueError, match="unknown theorems"):
        CoqEnv(theorem_names=["nope"])
    with pytest.raises(ValueError, match="topic"):
        CoqEnv(topic="geometry")
    assert CoqConfig().check_assumptions is False


def test_seeded_theorem_choice(env: CoqEnv) -> None:
    names = []
    for seed in range(6):
        env.reset(seed=seed)
        names.append(env.theorem.name)
    again = []
    for seed in range(6):
        env.reset(seed=seed)
        again.append(env.theorem.name)
    assert names == again and len(set(names)) > 1
    env.reset(options={"theorem": 3})
    assert env.theorem == env.theorems[3]


def test_custom_theorem_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"name": "mine", "statement": "Theorem mine : 1 + 1 = 2.", "proof": "reflexivity."})
                    + "\n", encoding="utf-8")
    env = CoqEnv(theorems_path=str(path), preamble=[])
    env.reset(seed=0)
    _o, reward, terminated, _t, info = env.step(env.oracle_action())
    assert terminated and info["success"] and math.isclose(reward, 10.9)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"name": "bad", "statement": "Theorem bad : 1 + 1 = 3 +."}) + "\n", encoding="utf-8")
    env2 = CoqEnv(theorems_path=str(bad), preamble=[])
    _obs, info = env2.reset(seed=0)
    assert info["prover_error"] and "statement" in info["prover_message"]
    env.close()
    env2.close()


# ------------------------------------------------------------------------------------------------------- fuzzing

TACTIC_WORDS = ["intros", "intro", "simpl", "reflexivity", "lia", "auto", "split", "left", "right", "exact",
                "apply", "rewrite", "induction", "destruct", "assumption", "Qed", "admit", "idtac", "{", "}", "-",
                "+", "*", "all:", "1:", "2:", "H", "n", "m", "IH", "HP", "Nat.add_comm", "(", ")", "[", "]", "|",
                ";", ".", "..", ",", "as", "in", "by", "->", "<-", "=", "0", "S", "\"", "(*", "*)", "∀", "→"]
NEAR_VALID = st.lists(st.sampled_from(TACTIC_WORDS), min_size=1, max_size=6).map(" ".join)


ACTIONS = st.lists(st.one_of(st.text(max_size=60), NEAR_VALID), min_size=50, max_size=50)


@pytest.mark.slow
@FUZZ
@given(seed=st.integers(0, 2**32 - 1), actions=ACTIONS)
def test_fuzz_10000_actions_through_coqtop_never_raise(env: CoqEnv, seed: int, actions: list[str]) -> None:
    fuzz_prover(env, seed, actions)


@FUZZ_QUICK
@given(seed=st.integers(0, 2**32 - 1), actions=ACTIONS)
def test_fuzz_actions_never_raise(env: CoqEnv, seed: int, actions: list[str]) -> None:
    fuzz_prover(env, seed, actions)


def test_no_dynamic_code_execution_in_the_modules() -> None:
    for module in (coq_module, __import__("ragen_plugins_envs.prover.common", fromlist=["x"])):
        source = Path(module.__file__).read_text(encoding="utf-8")
        assert not re.search(r"(^|[^\w.])(eval|exec)\s*\(", source)
