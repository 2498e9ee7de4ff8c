"""Tests of the Lean env and its Kimina client against the local protocol double (no Lean binary can be installed
here): contract, the recorded proofs, rewards, invalid actions, the request/response JSON of both APIs, reading of
REPL responses, retries, slow and dead servers, and fuzzing."""

from __future__ import annotations

import contextlib
import json
import math
import re
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragen_plugins_envs.prover.kimina_double as double_module
import ragen_plugins_envs.prover.lean as lean_module
from ragen_core.checks import check_env
from ragen_core.errors import ConfigError
from ragen_core.registry import EnvRegistry
from ragen_plugins_envs.prover.kimina_double import DoubleChecker, KiminaDouble, shared_double
from ragen_plugins_envs.prover.lean import (
    THEOREMS_PATH,
    KiminaClient,
    LeanEnv,
    build_code,
    interpret_response,
    load_lean_theorems,
    normalize_statement,
)
from ragen_plugins_envs.registration_prover import register_prover_envs
from tests.envs.prover_support import fuzz_prover
from tests.http_server import background_server

_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
# 200 x 50 actions = 10,000 strings per env; the valid-looking ones go over HTTP to the double
FUZZ = settings(max_examples=200, deadline=None, database=None, suppress_health_check=_HEALTH)
FUZZ_QUICK = settings(max_examples=10, deadline=None, database=None, suppress_health_check=_HEALTH)
DOWN = "http://127.0.0.1:9"  # nothing listens on the discard port


@pytest.fixture(scope="module")
def double() -> KiminaDouble:
    with KiminaDouble() as server:
        yield server


@pytest.fixture
def env(double: KiminaDouble) -> LeanEnv:
    e = LeanEnv(server_url=double.url, max_steps=1000)
    yield e
    e.close()


def start(env: LeanEnv, name: str) -> str:
    obs, info = env.reset(options={"theorem": name})
    assert not info["prover_error"], info
    return obs


# ------------------------------------------------------------------------------------------------------- contract

def test_check_env_passes(double: KiminaDouble) -> None:
    check_env(lambda: LeanEnv(server_url=double.url))


@pytest.mark.parametrize("options", [{}, {"goal_probe": "sorry"}, {"goal_probe": "none"}, {"api": "verify"}])
def test_check_env_through_the_registry_variant(options: dict) -> None:
    reg = EnvRegistry()
    register_prover_envs(reg)
    check_env(lambda: reg.make("lean_double", options))


def test_check_env_with_the_server_down() -> None:
    check_env(lambda: LeanEnv(server_url=DOWN, max_retries=0))


def test_metadata() -> None:
    env = LeanEnv()
    assert env.action_names is None and env.max_actions_per_traj == 20 and "Lean 4" in env.instruction
    assert env.config.server_url == "http://127.0.0.1:8000" and not env.config.use_double
    assert len(env.theorems) == 9 and all(t.proof and t.header.startswith("import Mathlib") for t in env.theorems)
    reg = EnvRegistry()
    register_prover_envs(reg)
    assert reg.make("lean_double").config.use_double and not reg.make("lean").config.use_double


def test_nothing_connects_before_reset() -> None:
    env = LeanEnv(server_url=DOWN)
    assert env.backend._client is None
    env.close()


# ------------------------------------------------------------------------------------------------------- proofs

@pytest.mark.parametrize("probe", ["all_goals sorry", "sorry", "none"])
@pytest.mark.parametrize("api", ["check", "verify"])
def test_every_recorded_proof_completes(double: KiminaDouble, probe: str, api: str) -> None:
    env = LeanEnv(server_url=double.url, goal_probe=probe, api=api)
    for theorem in env.theorems:
        start(env, theorem.name)
        rewards = []
        while (action := env.oracle_action()) is not None:
            _o, reward, terminated, truncated, info = env.step(action)
            rewards.append(reward)
            assert info["action_is_valid"] and info["action_is_effective"] and not truncated
        assert terminated and info["success"] and info["goals_remaining"] == 0, theorem.name
        assert all(math.isclose(r, 0.9) for r in rewards[:-1]) and math.isclose(rewards[-1], 10.9)
    env.close()


def test_every_recorded_alternative_proof_completes(double: KiminaDouble) -> None:
    data = json.loads(THEOREMS_PATH.read_text(encoding="utf-8"))
    env = LeanEnv(server_url=double.url)
    for record in data["theorems"]:
        for proof in record["proofs"]:
            start(env, record["name"])
            for step in proof:
                _o, _r, terminated, _t, info = env.step(step["tactic"])
                assert info["action_is_effective"]
                assert env.goal_count == len(step["goals"])
            assert terminated and info["success"]
    env.close()


def test_observation_and_goals(env: LeanEnv) -> None:
    obs = start(env, "ragen_and_swap")
    assert "theorem ragen_and_swap (p q : Prop) (hp : p) (hq : q) : q ∧ p := by" in obs
    assert "Informally: From p and q" in obs and "1 goal\np q : Prop\nhp : p\nhq : q\n⊢ q ∧ p" in obs
    obs, reward, *_ = env.step("constructor")
    assert math.isclose(reward, 0.9) and "2 goals\ncase left" in obs and "Tactics so far (1):\n  constructor" in obs
    assert env.goal_count == 2 and env.state_key().startswith("ragen_and_swap\n2 goals")


def test_wrong_tactic_is_rejected_and_changes_nothing(env: LeanEnv) -> None:
    start(env, "ragen_and_swap")
    env.step("constructor")
    goals = env.goals
    obs, reward, terminated, truncated, info = env.step("exact hp")
    assert math.isclose(reward, -1.1) and not (terminated or truncated)
    assert info["action_is_valid"] and not info["action_is_effective"]
    assert env.goals == goals and env.tactics == ["constructor"]
    assert "Last tactic rejected: exact hp" in obs and "line 3, column 2" in obs
    assert math.isclose(env.step("exact hq")[1], 0.9)
    _o, reward, terminated, _t, info = env.step("exact hp")
    assert math.isclose(reward, 10.9) and terminated and info["success"]


INVALID = [
    "", "  ", "sorry", "admit", "exact sorry", "simp; sorry", "#eval IO.println 1", "norm_num #exit",
    "rfl\ntheorem foo : False := by sorry", "theorem foo : True := trivial", "end", "@[simp] lemma x : True := trivial",
    "run_tac pure ()", "example : True := trivial", "import Mathlib", "x" * 401, "simp\x00", "simp\u200b",
    "exact h\u2029",
]


@pytest.mark.parametrize("action", INVALID)
def test_invalid_actions_cost_and_change_nothing(env: LeanEnv, action: str) -> None:
    start(env, "ragen_imp_trans")
    env.step("intro hp")
    before, requests = env.render(), env.backend.checks
    obs, reward, terminated, truncated, info = env.step(action)
    assert math.isclose(reward, -1.1) and not (terminated or truncated)
    assert not info["action_is_valid"] and info["prover_message"]
    assert obs == before == env.render() and env.backend.checks == requests  # no request was sent


def test_valid_looking_words_are_not_over_rejected(env: LeanEnv) -> None:
    for action in ["exact hqr (hpq hp)", "simp [Nat.add_zero] at h ⊢", "nlinarith [sq_nonneg (a - b)]",
                   "obtain ⟨x, hx⟩ := h", "exact?", "set_option maxRecDepth 1000 in norm_num", "open Real in simp",
                   "rw [show (2 : ℝ) = 1 + 1 by norm_num]", "exact Nat.lemma_sorry_free"]:
        assert env.backend.validate(action)[0] is not None, action


def test_multiline_tactic_is_reindented() -> None:
    code, probe_line = build_code("import Mathlib", "theorem t (n : ℕ) : n = n := by", [
        "induction n with\n| zero => rfl\n| succ k ih => rfl", "  skip"], "all_goals sorry")
    assert code == ("import Mathlib\n\ntheorem t (n : ℕ) : n = n := by\n  induction n with\n  | zero => rfl\n"
                    "  | succ k ih => rfl\n  skip\n  all_goals sorry\n")
    assert probe_line == 8
    assert build_code("", "theorem t : True := by", ["trivial"], "")[1] == 0


def test_normalize_statement() -> None:
    assert normalize_statement("theorem t : True := by sorry") == "theorem t : True := by"
    assert normalize_statement("theorem t : True := sorry") == "theorem t : True := by"
    assert normalize_statement("theorem t : True :=") == "theorem t : True := by"
    assert normalize_statement("theorem t : True") == "theorem t : True := by"
    assert normalize_statement("theorem t : True := by\n") == "theorem t : True := by"


# ------------------------------------------------------------------------------------------------------- rewards

def test_noop_is_not_rewarded_and_step_limit(double: KiminaDouble) -> None:
    env = LeanEnv(server_url=double.url, max_steps=2, theorem_names=["ragen_add_zero"])
    env.reset(seed=0)
    _o, reward, _te, _tr, info = env.step("exact bogus")
    assert math.isclose(reward, -1.1)
    _o, reward, terminated, truncated, info = env.step("exact bogus")
    assert math.isclose(reward, -3.1) and truncated and not terminated and not info["success"]
    assert env.step("simp")[1:3] == (0.0, True)
    env.close()


def test_timeout_penalty(env: LeanEnv) -> None:
    start(env, "ragen_system")
    slow = "nlinarith [sq_nonneg (x - y), sq_nonneg (x + y), sq_nonneg (x - 6), sq_nonneg (y - 4)]"
    _o, reward, terminated, truncated, info = env.step(slow)
    assert math.isclose(reward, -2.1) and info["prover_timeout"] and info["action_is_valid"]
    assert not (terminated or truncated) and env.tactics == []


def test_dead_server_marks_the_trajectory_and_truncates() -> None:
    env = LeanEnv(server_url=DOWN, max_retries=1, retry_backoff=0.01)
    obs, info = env.reset(seed=0)
    assert info["prover_error"] and "unreachable" in info["prover_message"] and "after 2 attempts" in obs
    _o, reward, terminated, truncated, info = env.step("simp")
    assert (reward, terminated, truncated) == (0.0, False, True) and info["prover_error"] and info["action_is_valid"]


def test_a_dead_server_is_not_retried_during_the_cooldown() -> None:
    env = LeanEnv(server_url=DOWN, max_retries=2, retry_backoff=0.2)
    started = time.monotonic()
    first = env.reset(seed=0)
    assert 0.5 < time.monotonic() - started < 5  # two backoffs: 0.2 s + 0.4 s
    started = time.monotonic()
    again = env.reset(seed=0)
    assert time.monotonic() - started < 0.1 and again == first  # same failure, same observation
    client = KiminaClient(DOWN, max_retries=1, retry_backoff=0.0, cooldown=0.0)
    assert client.check("x").attempts == 2 and client.check("x").attempts == 2


def test_server_dying_mid_episode() -> None:
    server = KiminaDouble().start()
    env = LeanEnv(server_url=server.url, max_retries=1, retry_backoff=0.01, theorem_names=["ragen_imp_trans"])
    env.reset(seed=0)
    assert math.isclose(env.step("intro hp")[1], 0.9)
    server.close()
    _o, reward, terminated, truncated, info = env.step("apply hqr")
    assert (reward, terminated, truncated) == (0.0, False, True) and info["prover_error"]
    assert env.tactics == ["intro hp"]
    env.close()


def test_slow_server_is_bounded() -> None:
    with KiminaDouble(delay=1.0) as server:
        env = LeanEnv(server_url=server.url, http_timeout=0.2, max_retries=1, retry_backoff=0.05,
                      query_initial_goals=False)
        started = time.monotonic()
        env.reset(seed=0)
        _o, _reward, _te, truncated, info = env.step("linarith")
        assert time.monotonic() - started < 1.0
        assert info["prover_error"] and truncated and "timed out" in info["prover_message"]
        env.close()


def test_retries_recover_from_transient_errors(double: KiminaDouble) -> None:
    client = KiminaClient(double.url, max_retries=2, retry_backoff=0.01)
    code, _ = build_code("", "theorem ragen_add_zero (n : ℕ) : n + 0 = n := by", ["simp"], "all_goals sorry")
    double.fail_next(2, 503)
    result = client.check(code)
    assert result.status == "ok" and result.attempts == 3 and interpret_response(result.response).complete
    double.fail_next(3, 502)
    result = client.check(code)
    assert result.status == "server_error" and result.attempts == 3 and "502" in result.error
    double.fail_next(1, 400)  # a client error is not retried
    result = client.check(code)
    assert result.status == "server_error" and result.attempts == 1
    client.close()


def test_api_key(double: KiminaDouble) -> None:
    with KiminaDouble(api_key="s3cret") as server:
        ok = LeanEnv(server_url=server.url, api_key="s3cret", theorem_names=["ragen_add_zero"])
        assert not ok.reset(seed=0)[1]["prover_error"] and ok.step("simp")[4]["success"]
        bad = LeanEnv(server_url=server.url, api_key="wrong", max_retries=3, retry_backoff=0.01)
        _obs, info = bad.reset(seed=0)
        assert info["prover_error"] and "401" in info["prover_message"] and "after 1 attempt" in info["prover_message"]
        assert KiminaClient(server.url).health()


def test_use_double_shares_one_server() -> None:
    a, b = LeanEnv(use_double=True), LeanEnv(use_double=True)
    a.reset(seed=0)
    b.reset(seed=1)
    assert a.backend.client.server_url == b.backend.client.server_url == shared_double().url
    assert KiminaClient(shared_double().url).health()


# ------------------------------------------------------------------------------------------------------- protocol

class Recorder:
    """A fake server that records requests and answers a canned payload."""

    def __init__(self, payload: Any, status: int = 200) -> None:
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                recorder.requests.append(("POST", self.path, dict(self.headers), body))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._stack = contextlib.ExitStack()
        self.url, self.server = self._stack.enter_context(background_server(Handler))

    def close(self) -> None:
        self._stack.close()


def test_check_request_and_response_shapes() -> None:
    response = {"env": 3, "messages": [{"severity": "error", "pos": {"line": 3, "column": 2},
                                        "endPos": {"line": 3, "column": 9},
                                        "data": "unsolved goals\nx : ℕ\n⊢ x = x"}]}
    rec = Recorder({"results": [{"id": "abc", "time": 0.5, "response": response}]})
    client = KiminaClient(rec.url + "/prefix", api_key="k", timeout=17, infotree="original")
    result = client.check("theorem t : True := by\n  trivial\n", custom_id="abc")
    method, path, headers, body = rec.requests[0]
    assert (method, path) == ("POST", "/prefix/api/check") and headers["Authorization"] == "Bearer k"
    assert body == {"snippets": [{"id": "abc", "code": "theorem t : True := by\n  trivial\n"}], "timeout": 17,
                    "debug": False, "reuse": True, "infotree": "original"}
    assert result.status == "ok" and result.response == response and result.time == 0.5
    outcome = interpret_response(result.response)
    assert outcome.kind == "accepted" and outcome.goals == "1 goal\nx : ℕ\n⊢ x = x" and outcome.goal_count == 1
    rec.close()


def test_verify_request_and_response_shapes() -> None:
    rec = Recorder({"results": [{"custom_id": "abc", "response": {"env": 0, "time": 0.25}}]})
    client = KiminaClient(rec.url, api="verify", timeout=9)
    result = client.check("theorem t : True := by\n  trivial\n", custom_id="abc")
    _m, path, headers, body = rec.requests[0]
    assert path == "/verify" and "Authorization" not in headers
    assert body == {"codes": [{"custom_id": "abc", "proof": "theorem t : True := by\n  trivial\n"}], "timeout": 9,
                    "disable_cache": False}
    assert result.status == "ok" and result.time == 0.25 and interpret_response(result.response).complete
    rec.close()


@pytest.mark.parametrize(("payload", "status"), [
    ({"results": [{"id": "a", "error": "Lean REPL command timed out in 30 seconds"}]}, "timeout"),
    ({"results": [{"id": "a", "error": "No available REPLs"}]}, "server_error"),
    ({"results": []}, "server_error"),
    ({"id": "a", "time": 1, "response": {"env": 0}}, "ok"),  # older single-snippet answer
    ([{"id": "a", "time": 1, "response": {"env": 0}}], "ok"),  # /api/checks list answer
    ({"results": [{"id": "a"}]}, "server_error"),
    ("hello", "server_error"),
])
def test_answer_variants(payload: Any, status: str) -> None:
    rec = Recorder(payload)
    assert KiminaClient(rec.url, max_retries=0).check("x").status == status
    rec.close()


REPL = {
    "complete": ({"env": 1}, "complete"),
    "complete_with_info": ({"env": 1, "messages": [{"severity": "info", "pos": {"line": 2, "column": 2},
                                                    "data": "Try this: simp"}]}, "complete"),
    "sorries": ({"env": 1, "messages": [{"severity": "warning", "pos": {"line": 1, "column": 8},
                                         "data": "declaration uses 'sorry'"}],
                 "sorries": [{"pos": {"line": 3, "column": 12}, "endPos": {"line": 3, "column": 17},
                              "goal": "case left\n⊢ q", "proofState": 0},
                             {"pos": {"line": 3, "column": 12}, "endPos": {"line": 3, "column": 17},
                              "goal": "case right\n⊢ p", "proofState": 1}]}, "accepted:2"),
    "unsolved": ({"env": 1, "messages": [{"severity": "error", "pos": {"line": 1, "column": 60},
                                          "data": "unsolved goals\ncase left\n⊢ q\n\ncase right\n⊢ p"}]},
                 "accepted:2"),
    "error": ({"env": 1, "messages": [{"severity": "error", "pos": {"line": 2, "column": 2},
                                       "data": "unknown identifier 'hz'"}]}, "rejected"),
    "error_and_unsolved": ({"env": 1, "messages": [
        {"severity": "error", "pos": {"line": 2, "column": 2}, "data": "linarith failed to find a contradiction"},
        {"severity": "error", "pos": {"line": 1, "column": 60}, "data": "unsolved goals\n⊢ p"}]}, "rejected"),
    "heartbeats": ({"env": 1, "messages": [{"severity": "error", "pos": {"line": 2, "column": 2},
                                            "data": "(deterministic) timeout at `whnf`, maximum number of heartbeats "
                                                    "(200000) has been reached"}]}, "timeout"),
    "no_goals_on_probe": ({"env": 1, "messages": [{"severity": "error", "pos": {"line": 4, "column": 2},
                                                   "data": "no goals to be proved"}]}, "complete"),
    "no_goals_elsewhere": ({"env": 1, "messages": [{"severity": "error", "pos": {"line": 3, "column": 2},
                                                    "data": "no goals to be proved"}]}, "rejected"),
    "sorry_warning_only": ({"env": 1, "messages": [{"severity": "warning", "pos": {"line": 1, "column": 8},
                                                    "data": "declaration uses 'sorry'"}]}, "accepted:-1"),
    "repl_error": ({"message": "Lean error: unknown environment"}, "rejected"),
}


@pytest.mark.parametrize("case", list(REPL))
def test_interpret_repl_responses(case: str) -> None:
    response, expected = REPL[case]
    outcome = interpret_response(response, probe_line=4)
    if expected == "complete":
        assert outcome.kind == "accepted" and outcome.complete and outcome.goal_count == 0
    elif expected.startswith("accepted:"):
        assert outcome.kind == "accepted" and not outcome.complete
        assert outcome.goal_count == int(expected.split(":")[1])
    else:
        assert outcome.kind == expected and not outcome.complete and outcome.message


def test_double_answers_like_the_repl() -> None:
    checker = DoubleChecker()
    stmt = "theorem ragen_and_swap (p q : Prop) (hp : p) (hq : q) : q ∧ p := by"
    r = checker.check(f"import Mathlib\n\n{stmt}\n  constructor\n  all_goals sorry\n")["response"]
    assert [m["data"] for m in r["messages"]] == ["declaration uses 'sorry'"]
    assert [s["goal"].splitlines()[0] for s in r["sorries"]] == ["case left", "case right"]
    assert r["sorries"][0]["pos"] == {"line": 5, "column": 12} and isinstance(r["env"], int)
    r = checker.check(f"{stmt}\n  constructor\n")["response"]
    assert "sorries" not in r and r["messages"][0]["data"].startswith("unsolved goals\ncase left")
    r = checker.check(f"{stmt}\n  constructor\n  sorry\n")["response"]
    assert len(r["sorries"]) == 1 and r["messages"][1]["data"] == "unsolved goals\ncase right\np q : Prop\nhp : p\n" \
        "hq : q\n⊢ p"
    r = checker.check(f"{stmt}\n  exact ⟨hq, hp⟩\n  sorry\n")["response"]
    assert r["messages"] == [{"severity": "error", "pos": {"line": 3, "column": 2}, "endPos": {"line": 3, "column": 7},
                              "data": "no goals to be proved"}]
    assert checker.check(f"{stmt}\n  exact ⟨hq, hp⟩\n  all_goals sorry\n")["response"].keys() == {"env"}
    r = checker.check(f"{stmt}\n  exact hp\n  all_goals sorry\n")["response"]
    assert r["messages"][0]["severity"] == "error" and r["messages"][0]["pos"] == {"line": 2, "column": 2}
    assert "sorries" not in r
    r = checker.check(f"{stmt}\n  constructor\n#eval 1\n")["response"]
    assert "unexpected command" in r["messages"][0]["data"]
    r = checker.check("theorem other : True := by\n  trivial\n")["response"]
    assert "unknown declaration" in r["messages"][0]["data"]
    r = checker.check(f"{stmt}\n  constructor\n  all_goals sorry\n", infotree="original")["response"]
    assert r["infotree"][0]["node"]["stx"]["pp"] == "constructor"


def test_double_http_endpoints(double: KiminaDouble) -> None:
    client = KiminaClient(double.url)
    assert client.health()
    stmt = "theorem ragen_add_zero (n : ℕ) : n + 0 = n := by\n  simp\n"
    single = client._request("POST", "/api/check", {"snippet": {"id": "x", "code": stmt}}, 10)
    assert single["id"] == "x" and single["response"].keys() == {"env"}
    listed = client._request("POST", "/api/checks", {"snippets": [{"id": "a", "code": stmt},
                                                                  {"id": "b", "code": stmt}], "debug": True}, 10)
    assert [r["id"] for r in listed] == ["a", "b"] and "diagnostics" in listed[0]
    verify = client._request("POST", "/one_pass_verify_batch", {"codes": [{"custom_id": 7, "code": stmt}]}, 10)
    assert verify["results"][0]["custom_id"] == "7" and "time" in verify["results"][0]["response"]
    for path, body, status in [("/api/check", {"snippets": []}, 422), ("/api/check", {"snippets": [
            {"id": "a", "code": "x"}, {"id": "a", "code": "y"}]}, 422), ("/nope", {}, 404),
            ("/verify", {"codes": [{"custom_id": 1}]}, 422), ("/api/check", {"timeout": -1, "snippets": []}, 422)]:
        with pytest.raises(Exception, match=str(status)):
            client._request("POST", path, body, 10)
    client.close()


# ------------------------------------------------------------------------------------------------------- config

@pytest.mark.parametrize(("options", "field"), [
    ({"server_url": "localhost:8000"}, "server_url"),
    ({"api": "rest"}, "api"),
    ({"goal_probe": "admit"}, "goal_probe"),
    ({"http_timeout": 0}, "http_timeout"),
    ({"max_retries": -1}, "max_retries"),
    ({"infotree": "everything"}, "infotree"),
    ({"sever_url": "http://x"}, "sever_url"),
])
def test_bad_config_fails_naming_the_field(options: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        LeanEnv(**options)


def test_theorem_files(tmp_path: Path, double: KiminaDouble) -> None:
    theorems, data = load_lean_theorems(THEOREMS_PATH)
    assert theorems[0].proof == tuple(s["tactic"] for s in data["theorems"][0]["proofs"][0])
    path = tmp_path / "minif2f.jsonl"
    path.write_text(json.dumps({"problem_id": "p1", "formal_statement": "theorem p1 : 1 + 1 = 2 := by sorry",
                                "natural_language_statement": "one plus one"}) + "\n", encoding="utf-8")
    env = LeanEnv(server_url=double.url, theorems_path=str(path), header="import Mathlib")
    obs, info = env.reset(seed=0)
    assert env.theorem.header == "" and env.oracle_action() is None
    assert info["prover_error"] and "unknown declaration" in info["prover_message"]  # the double does not know it
    assert "Informally: one plus one" in obs
    with pytest.raises(ValueError, match="duplicate"):
        bad = tmp_path / "dupe.jsonl"
        bad.write_text("\n".join([json.dumps({"name": "a", "statement": "theorem a : True := by"})] * 2),
                       encoding="utf-8")
        load_lean_theorems(bad)


# ------------------------------------------------------------------------------------------------------- fuzzing

NEAR_VALID = st.lists(st.sampled_from([
    "intro", "hp", "exact", "apply", "hqr", "hpq", "constructor", "linarith", "simp", "rfl", "omega", "norm_num",
    "use", "n", "ring", "[", "]", "(", ")", "⟨", "⟩", ",", ":=", "by", "have", "h₁", "sorry", "#eval", "theorem",
    "\n", "  ", "·", "<;>", "<|>", "||", "at", "⊢", "fun", "=>", "end", "@[simp]",
]), min_size=1, max_size=6).map(" ".join)
ACTIONS = st.lists(st.one_of(st.text(max_size=60), NEAR_VALID), min_size=50, max_size=50)


@pytest.mark.slow
@FUZZ
@given(seed=st.integers(0, 2**32 - 1), actions=ACTIONS)
def test_fuzz_10000_actions_never_raise(env: LeanEnv, seed: int, actions: list[str]) -> None:
    fuzz_prover(env, seed, actions)


@FUZZ_QUICK
@given(seed=st.integers(0, 2**32 - 1), actions=ACTIONS)
def test_fuzz_actions_never_raise(env: LeanEnv, seed: int, actions: list[str]) -> None:
    fuzz_prover(env, seed, actions)


def test_no_dynamic_code_execution_in_the_modules() -> None:
    for module in (lean_module, double_module):
        source = Path(module.__file__).read_text(encoding="utf-8")
        assert not re.search(r"(^|[^\w.])(eval|exec)\s*\(", source)


def test_the_protocol_double_serves_the_lean_envs_built_in_theorems_by_default() -> None:
    import inspect

    from ragen_plugins_envs.prover import kimina_double

    # the double names the file itself (no import of lean.py, which imports the double: no cycle)
    assert (Path(kimina_double.__file__).with_name("theorems_lean.json")) == THEOREMS_PATH
    assert "theorems_lean.json" in inspect.getsource(kimina_double)
