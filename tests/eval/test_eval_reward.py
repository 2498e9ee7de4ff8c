"""``eval/<env>/reward_mean`` is the trajectory score, format penalties included, as ``rollout/reward_mean`` in
training; ``env_reward_mean`` holds the env's rewards alone."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_core.config import RolloutConfig
from ragen_core.plugins import build_plugin_manager, collect_registries
from ragen_core.runner import rollout_metrics
from ragen_core.starpo.chat import ChatCodec, TextTokenizer
from ragen_core.starpo.rollout import GenerationResult, make_episodes, run_lockstep
from ragen_plugins_eval.engine import eval_metrics, trajectory_record
from tests.eval import scripted_backend


class SloppyPolicy:
    """Answers ``Inc``/``Dec`` in the format, or (with probability ``p_garbage``) text without an answer tag, which
    costs the turn the format penalty."""

    def __init__(self, seed: int, p_garbage: float) -> None:
        self.tokenizer = TextTokenizer()
        self.rng, self.p_garbage = random.Random(seed), p_garbage

    def generate(self, requests: list) -> list[GenerationResult]:
        out = []
        for _ in requests:
            if self.rng.random() < self.p_garbage:
                text = "hmm, no idea"
            else:
                text = f"ok</think><answer>{self.rng.choice(['Inc', 'Dec'])}</answer>"
            ids = tuple(self.tokenizer.encode(text))
            out.append(GenerationResult(token_ids=ids, logprobs=(0.0,) * len(ids)))
        return out


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from([0.0, 0.3, 0.7, 1.0]), st.sampled_from([-0.1, -0.5]))
def test_eval_reward_mean_is_the_rollout_reward_mean(seed: int, p_garbage: float, penalty: float) -> None:
    registries = collect_registries(build_plugin_manager(plugins=[scripted_backend]))
    rollout = RolloutConfig(max_turn=3, max_actions_per_turn=1, max_new_tokens=40, format_penalty=penalty)
    codec = ChatCodec(TextTokenizer())
    plan = [("eval_counter", 2, {}), ("eval_counter_far", 2, {})]
    episodes = make_episodes(registries.envs, plan, seeds=[5, 6, 7, 8], group_size=3, config=rollout, codec=codec)
    batch = run_lockstep(episodes, SloppyPolicy(seed, p_garbage))
    records = [trajectory_record(t, ep.env, codec, rollout) for t, ep in zip(batch, episodes)]
    ours, training = eval_metrics(records, group_size=3), rollout_metrics(batch, "rollout")
    for env in ("eval_counter", "eval_counter_far"):
        mine = [t for t in batch if t.env == env]
        assert ours[env]["reward_mean"] == pytest.approx(training[f"rollout/{env}/reward_mean"])
        assert ours[env]["env_reward_mean"] == pytest.approx(sum(t.total_reward for t in mine) / len(mine))
        penalties = sum(turn.format_penalty for t in mine for turn in t.turns) / len(mine)
        assert ours[env]["reward_mean"] == pytest.approx(ours[env]["env_reward_mean"] + penalties)
    assert ours["all"]["reward_mean"] == pytest.approx(training["rollout/reward_mean"])
    if p_garbage == 1.0:  # every turn penalised, no action ever taken
        assert ours["all"]["env_reward_mean"] == 0.0
        assert ours["all"]["reward_mean"] == pytest.approx(penalty * rollout.max_turn)
    assert "score_mean" not in ours["all"]


class RamblingPolicy:
    """Answers in the format after reasoning of a random length, cut at ``max_new_tokens`` (``finish_reason``
    ``length`` at the budget, as a sampler reports)."""

    def __init__(self, seed: int) -> None:
        self.tokenizer = TextTokenizer()
        self.rng = random.Random(seed)

    def generate(self, requests: list) -> list[GenerationResult]:
        out = []
        for req in requests:
            text = "x" * self.rng.randint(0, 30) + f"</think><answer>{self.rng.choice(['Inc', 'Dec'])}</answer>"
            ids = tuple(self.tokenizer.encode(text))[: req.max_new_tokens]
            out.append(GenerationResult(token_ids=ids, logprobs=(0.0,) * len(ids),
                                        finish_reason="length" if len(ids) == req.max_new_tokens else "stop"))
        return out


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from([20, 35, 60]))
def test_eval_truncated_rate_is_the_rollout_truncated_rate(seed: int, budget: int) -> None:
    registries = collect_registries(build_plugin_manager(plugins=[scripted_backend]))
    rollout = RolloutConfig(max_turn=3, max_actions_per_turn=1, max_new_tokens=budget)
    codec = ChatCodec(TextTokenizer())
    plan = [("eval_counter", 2, {}), ("eval_counter_far", 2, {})]
    episodes = make_episodes(registries.envs, plan, seeds=[5, 6, 7, 8], group_size=3, config=rollout, codec=codec)
    batch = run_lockstep(episodes, RamblingPolicy(seed))
    records = [trajectory_record(t, ep.env, codec, rollout) for t, ep in zip(batch, episodes)]
    ours = eval_metrics(records, group_size=3)
    assert ours["all"]["truncated_rate"] == pytest.approx(rollout_metrics(batch)["rollout/truncated_rate"])
    for env in ("eval_counter", "eval_counter_far"):
        mine = [turn for t in batch if t.env == env for turn in t.turns]
        assert ours[env]["truncated_rate"] == pytest.approx(sum(t.truncated for t in mine) / len(mine))
    assert [d["truncated"] for r in records for d in r["turn_details"]] == [
        turn.truncated for t in batch for turn in t.turns]
    if budget == 20:  # 28 characters of answer never fit
        assert ours["all"]["truncated_rate"] == 1.0
    for r in records:  # a record written before the field existed counts its turns as complete
        for d in r["turn_details"]:
            del d["truncated"]
    assert eval_metrics(records, group_size=3)["all"]["truncated_rate"] == 0.0
