"""The rollout loop: parsing, prompts, token-exact sequences, context modes, drivers, failures, samples."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_core.config import RolloutConfig
from ragen_core.data import RolloutBatch, Trajectory
from ragen_core.registry import EnvRegistry
from ragen_core.starpo.batching import advantage_input, build_samples, normalise_scores
from ragen_core.starpo.chat import ChatCodec, TextTokenizer, parse_response, user_message
from ragen_core.starpo.rollout import (
    Episode,
    GenerationResult,
    ScriptedPolicy,
    make_episodes,
    run_async,
    run_lockstep,
)
from tests.core.toy import CounterEnv

NAMES = ("Up", "Down", "Left", "Right")


# ------------------------------------------------------------------------------------------------ parsing

def test_parse_worked_examples() -> None:
    p = parse_response("<think>go</think><answer>up || Jump || left || down</answer>", valid_actions=NAMES)
    assert (p.reasoning, p.actions, p.dropped, p.penalised) == ("go", ("Up", "Left"), ("Jump",), True)
    p = parse_response("<think>a</think> <answer> Right </answer> <think>b</think><answer>Up</answer>",
                       valid_actions=NAMES)
    assert p.actions == ("Right",) and not p.penalised
    assert parse_response("<answer>Up</answer>", valid_actions=NAMES).format_ok is False
    assert parse_response("<answer>Up</answer>", think=False, valid_actions=NAMES).actions == ("Up",)
    assert parse_response("<think>x</think><answer> || </answer>").penalised
    assert parse_response("<think>x</think><answer>3 + 4</answer>").actions == ("3 + 4",)


@settings(max_examples=300, deadline=None)
@given(text=st.text(), k=st.integers(1, 4), think=st.booleans())
def test_parse_never_raises_and_respects_limits(text: str, k: int, think: bool) -> None:
    for candidate in (text, f"<think>{text}</think><answer>{text}</answer>", f"<answer>{text} || Up</answer>"):
        p = parse_response(candidate, think=think, max_actions=k, valid_actions=NAMES)
        assert len(p.actions) <= k and set(p.actions) <= set(NAMES)
        assert p.penalised == (not p.format_ok or not p.actions or bool(p.dropped))


@settings(max_examples=200, deadline=None)
@given(actions=st.lists(st.sampled_from([*NAMES, "up", "LEFT", "jump", " ", "x y"]), max_size=6))
def test_parse_matches_a_slow_reference(actions: list[str]) -> None:
    text = "<think>t</think><answer>" + " || ".join(actions) + "</answer>"
    p = parse_response(text, max_actions=2, valid_actions=NAMES)
    stripped = [a.strip() for a in actions if a.strip()]
    valid = [next(n for n in NAMES if n.lower() == a.lower()) for a in stripped if a.lower() in
             {n.lower() for n in NAMES}]
    assert list(p.actions) == valid[:2]
    assert len(p.dropped) == len(stripped) - len(valid)


# ------------------------------------------------------------------------------------------------ episodes

def cfg(**kw: Any) -> RolloutConfig:
    base = {"max_turn": 5, "max_actions_per_turn": 2, "max_new_tokens": 64}
    return RolloutConfig(**{**base, **kw})


def episodes(n: int = 4, *, config: RolloutConfig | None = None, env_cls: type = CounterEnv,
             **env_kw: Any) -> list[Episode]:
    codec = ChatCodec(TextTokenizer(), think=(config or cfg()).think)
    return [Episode(env_cls(**env_kw), name="counter", group_id=i // 2, seed=i // 2, episode_id=i,
                    config=config or cfg(), codec=codec) for i in range(n)]


class Canned:
    """Answers from a list of texts (per call, cycling), with a char-level tokenizer."""

    def __init__(self, texts: list[str]) -> None:
        self.tokenizer = TextTokenizer()
        self.texts, self.calls = texts, 0

    def generate(self, requests: list[Any]) -> list[GenerationResult]:
        out = []
        for _ in requests:
            ids = tuple(self.tokenizer.encode(self.texts[self.calls % len(self.texts)]))
            self.calls += 1
            out.append(GenerationResult(ids, tuple(-0.5 for _ in ids), mean_entropy=1.0))
        return out


def test_oracle_episode_succeeds_and_records_everything() -> None:
    eps = episodes(2, target=3, max_actions=6)
    batch = run_lockstep(eps, ScriptedPolicy.for_episodes(eps, "oracle"))
    t = batch.trajectories[0]
    assert t.success and t.env_error is None
    assert [turn.actions for turn in t.turns] == [["Inc"], ["Inc"], ["Inc"]]  # one oracle action per turn
    assert t.score == pytest.approx(1.0) and [turn.reward for turn in t.turns] == [0.0, 0.0, 1.0]
    assert t.turns[0].new_segment and not t.turns[1].new_segment
    text = TextTokenizer().decode(t.turns[1].prompt_ids)
    assert text.startswith("<|im_end|>\n<|im_start|>user\nReward:\n0\nTurn 2:") and text.endswith("assistant\n<think>")


class KeyedCounter(CounterEnv):
    def state_key(self) -> str:
        return f"count={self.value}"


class BrokenKeyCounter(CounterEnv):
    def state_key(self) -> str:
        raise RuntimeError("no key today")


@pytest.mark.parametrize(("env_cls", "keyed"), [(CounterEnv, False), (KeyedCounter, True), (BrokenKeyCounter, False)])
def test_turns_are_keyed_by_the_envs_state_key_or_else_by_their_observation(env_cls: type, keyed: bool) -> None:
    """GiGPO groups turns by key: an env without ``state_key`` (or with one that fails) keys a turn by the
    observation it acted on, never by one empty key that would make every state look the same."""
    eps = episodes(2, target=3, max_actions=6, env_cls=env_cls)
    batch = run_lockstep(eps, ScriptedPolicy.for_episodes(eps, "oracle"))
    for traj in batch.trajectories:
        keys = [turn.state_key for turn in traj.turns]
        assert len(set(keys)) == len(keys) == 3  # the counter moves every turn: three different states
        if keyed:
            assert keys == ["count=0", "count=1", "count=2"]
        else:
            assert keys == [turn.observation for turn in traj.turns]


def test_full_mode_is_token_exact() -> None:
    """Concatenated ids equal the chat template's rendering of the conversation with the sampled texts."""
    tok = TextTokenizer()
    eps = episodes(1, target=4, max_actions=8)
    t = run_lockstep(eps, ScriptedPolicy.for_episodes(eps, "oracle")).trajectories[0]
    ids = [i for turn in t.turns for i in (*turn.prompt_ids, *turn.response_ids)]
    env = CounterEnv(target=4, max_actions=8)
    from ragen_core.starpo.chat import system_message

    messages = [{"role": "system", "content": system_message(env, max_actions_per_turn=2, action_sep="||")}]
    previous = None
    for n, turn in enumerate(t.turns, 1):
        left = 8 - (n - 1)
        messages.append({"role": "user", "content": user_message(n, turn.observation, left, max_new_tokens=64,
                                                                 think=True, previous_reward=previous)})
        messages.append({"role": "assistant", "content": "<think>" + turn.response_text})
        previous = turn.reward
    rendered = tok.apply_chat_template(messages, tokenize=False)
    assert tok.decode(ids) == rendered[: len(tok.decode(ids))]
    assert len(rendered) - len(tok.decode(ids)) == len("<|im_end|>\n")


def test_garbage_output_gets_format_penalty_and_warning() -> None:
    eps = episodes(1, config=cfg(max_turn=3))
    t = run_lockstep(eps, Canned(["no tags here", "<think>x</think><answer>Jump</answer>",
                                  "<think>x</think><answer>Inc</answer>"])).trajectories[0]
    assert [turn.format_penalty for turn in t.turns] == [-0.1, -0.1, 0.0]
    assert "no valid action, so the state did not change" in TextTokenizer().decode(t.turns[1].prompt_ids)
    assert t.score == pytest.approx(-0.2)
    assert t.turns[0].logprobs == [-0.5] * len(t.turns[0].response_ids)


def test_budget_and_turn_limits() -> None:
    eps = episodes(1, config=cfg(max_turn=10, max_actions_per_turn=3), target=50, max_actions=5)
    t = run_lockstep(eps, Canned(["<think>x</think><answer>Inc || Inc || Inc</answer>"])).trajectories[0]
    assert [len(turn.actions) for turn in t.turns] == [3, 2] and not t.success
    eps = episodes(1, config=cfg(max_turn=2, max_actions_per_turn=1), target=50, max_actions=50)
    assert len(run_lockstep(eps, Canned(["<think>x</think><answer>Inc</answer>"])).trajectories[0].turns) == 2


@pytest.mark.parametrize("mode", ["limited_multi_turn", "single_turn"])
def test_per_turn_modes_start_a_segment_each_turn(mode: str) -> None:
    eps = episodes(1, config=cfg(context_mode=mode, window=2, max_actions_per_turn=1), target=3, max_actions=6)
    t = run_lockstep(eps, ScriptedPolicy.for_episodes(eps, "oracle")).trajectories[0]
    assert len(t.turns) == 3 and all(turn.new_segment for turn in t.turns)
    third = TextTokenizer().decode(t.turns[2].prompt_ids)
    assert "Turn 3:" in third
    if mode == "limited_multi_turn":
        assert "Turn 2:" in third and "Turn 1:" not in third  # window of 2: the previous turn as a chat turn
    else:
        assert "Earlier turns:" in third and third.count("<|im_start|>user") == 1


def test_context_cap_drops_oldest_turns_and_counts() -> None:
    eps = episodes(1, config=cfg(max_context_tokens=1400, max_actions_per_turn=1), target=5, max_actions=5)
    t = run_lockstep(eps, ScriptedPolicy.for_episodes(eps, "oracle")).trajectories[0]
    assert t.context_truncations >= 1 and t.success
    seq: list[int] = []
    for turn in t.turns:
        seq = list(turn.prompt_ids) if turn.new_segment else seq + list(turn.prompt_ids)
        assert len(seq) + 64 <= 1400 or turn is t.turns[0]
        seq += turn.response_ids


def test_lockstep_async_and_threaded_drivers_agree() -> None:
    a = run_lockstep(eps := episodes(6, target=2), ScriptedPolicy.for_episodes(eps, "random", seed=5))
    b = run_lockstep(eps := episodes(6, target=2), ScriptedPolicy.for_episodes(eps, "random", seed=5), env_workers=3)

    async def main() -> list[Trajectory]:
        eps = episodes(6, target=2)
        pol = ScriptedPolicy.for_episodes(eps, "random", seed=5)
        out = []
        for ep in eps:  # sequential so that the random choices come in the same order
            async def agen(req: Any) -> GenerationResult:
                return pol.generate([req])[0]
            out.append(await run_async(ep, agen))
        return out

    c = asyncio.run(main())
    assert a.fingerprint() == b.fingerprint()
    lock_first = [(t.episode_id, [x.actions for x in t.turns][:1]) for t in a]
    assert [(t.episode_id, [x.actions for x in t.turns][:1]) for t in c][:1] == lock_first[:1]


class StepExplodes(CounterEnv):
    def step(self, action: str) -> Any:
        raise RuntimeError("boom")


def test_env_failures_mark_the_trajectory() -> None:
    eps = episodes(2, env_cls=StepExplodes)
    batch = run_lockstep(eps, ScriptedPolicy.for_episodes(eps, "oracle"))
    assert all(t.env_error == "RuntimeError: boom" for t in batch)
    reg = EnvRegistry()
    reg.register("counter", "tests.core.toy:CounterEnv")
    eps = make_episodes(reg, [("counter", 1, {"target": -5})], seeds=[0], group_size=2, config=cfg(),
                        codec=ChatCodec(TextTokenizer()))
    batch = run_lockstep(eps, ScriptedPolicy.for_episodes(eps, "oracle"))
    assert all("must be >= 1" in t.env_error for t in batch)
    assert build_samples(batch) == []


class Closing(CounterEnv):
    """Counts its closes; ``explode`` makes the step or the close raise."""

    closed: list[int] = []
    explode = ""

    def step(self, action: str) -> Any:
        if self.explode == "step":
            raise RuntimeError("boom")
        return super().step(action)

    def close(self) -> None:
        Closing.closed.append(id(self))
        if self.explode == "close":
            raise OSError("the server is gone")


@pytest.mark.parametrize("explode", ["", "step", "close"])
def test_every_episode_closes_its_env_once_when_it_ends(explode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Closing, "closed", [])
    monkeypatch.setattr(Closing, "explode", explode)
    eps = episodes(4, env_cls=Closing, target=2)
    batch = run_lockstep(eps, ScriptedPolicy.for_episodes(eps, "oracle"), env_workers=2)
    assert sorted(Closing.closed) == sorted(id(ep.env) for ep in eps)
    assert all(t.success for t in batch) if explode != "step" else all(t.env_error for t in batch)

    async def one() -> Trajectory:
        ep = episodes(1, env_cls=Closing, target=2)[0]
        pol = ScriptedPolicy.for_episodes([ep], "oracle")

        async def agen(req: Any) -> GenerationResult:
            return pol.generate([req])[0]
        return await run_async(ep, agen)

    Closing.closed.clear()
    traj = asyncio.run(one())
    assert len(Closing.closed) == 1 and (traj.success or explode == "step")


# ------------------------------------------------------------------------------------------------ samples

def test_samples_mask_only_generated_tokens_and_place_rewards() -> None:
    eps = episodes(2, target=3, max_actions=6)
    batch = run_lockstep(eps, ScriptedPolicy.for_episodes(eps, "oracle"))
    (s, _), t = build_samples(batch), batch.trajectories[0]
    assert len(s.input_ids) == len(s.response_mask) == len(s.logprobs) == len(s.turn_ids)
    resp = [i for turn in t.turns for i in turn.response_ids]
    assert [i for i, m in zip(s.input_ids, s.response_mask) if m] == resp
    last = max(i for i, m in enumerate(s.response_mask) if m)
    assert s.token_rewards[last] == pytest.approx(t.score) and sum(s.token_rewards) == pytest.approx(t.score)
    turn_level = build_samples(batch, use_turn_scores=True)[0]
    ends = [max(i for i, k in enumerate(s.turn_ids) if k == j) for j in range(len(t.turns))]
    assert [turn_level.token_rewards[e] for e in ends] == [turn.reward + turn.format_penalty for turn in t.turns]
    inp = advantage_input(build_samples(batch))
    assert inp.token_rewards.shape == inp.response_mask.shape and inp.episode_ids is None
    assert (inp.token_rewards[inp.response_mask == 0] == 0).all()


def test_per_turn_samples_share_the_episode() -> None:
    eps = episodes(2, config=cfg(context_mode="limited_multi_turn", max_actions_per_turn=1), target=2, max_actions=4)
    batch = run_lockstep(eps, ScriptedPolicy.for_episodes(eps, "oracle"))
    samples = build_samples(batch)
    assert len(samples) == 4 and [s.episode_id for s in samples] == [0, 0, 1, 1]
    inp = advantage_input(samples)
    assert list(inp.episode_ids) == [0, 0, 1, 1]
    assert inp.token_rewards.sum() == pytest.approx(sum(t.score for t in batch))


def traj(score: float, group: int, env: str = "e", episode: int = 0) -> Trajectory:
    return Trajectory(env=env, group_id=group, seed=0, score=score, episode_id=episode)


def test_score_normalisation_modes() -> None:
    batch = RolloutBatch([traj(1, 0, episode=0), traj(3, 0, episode=1), traj(5, 1, episode=2), traj(5, 1, episode=3)])
    assert normalise_scores(batch, "mean") == {0: -1.0, 1: 1.0, 2: 0.0, 3: 0.0}
    ms = normalise_scores(batch, "mean_std")
    assert ms[0] == pytest.approx(-1.0, abs=1e-5) and ms[2] == 0.0
    b = normalise_scores(batch, "mean", by="batch")
    assert b[0] == pytest.approx(1 - 3.5)
    big = RolloutBatch([traj(0, 0, episode=i) for i in range(19)] + [traj(100, 0, episode=19)])
    assert max(normalise_scores(big, "asym_clip").values()) == 3.0
    with pytest.raises(ValueError, match="group 0"):
        normalise_scores(RolloutBatch([traj(float("nan"), 0)]), "mean")


def test_advantage_input_pads_right() -> None:
    eps = episodes(3, target=2)
    batch = run_lockstep(eps, ScriptedPolicy.for_episodes(eps, "random", seed=1))
    samples = build_samples(batch)
    inp = advantage_input(samples)
    for i, s in enumerate(samples):
        assert list(inp.response_mask[i, : len(s.input_ids)]) == s.response_mask
        assert not inp.response_mask[i, len(s.input_ids):].any()
    assert np.array_equal(inp.group_ids, [s.group_id for s in samples])
