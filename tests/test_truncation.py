"""Truncated answers (a response that hit ``rollout.max_new_tokens`` before ``</answer>``): the per-turn flag, the
``…/truncated_rate`` metrics, the record/replay of the flag and the step's ``responses_truncated`` warning."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_core.config import RolloutConfig
from ragen_core.data import RolloutBatch, Trajectory, Turn, random_batch, read_batches, write_batches
from ragen_core.runner import TRUNCATION_WARNING_RATE, rollout_metrics, warn_truncation
from ragen_core.starpo.chat import ChatCodec, TextTokenizer
from ragen_core.starpo.rollout import Episode, GenerationRequest, GenerationResult, is_truncated, run_lockstep
from tests.core.toy import CounterEnv


class BudgetPolicy:
    """Answers ``<reasoning of n chars></think><answer>Inc</answer>`` with ``n`` taken in turn from ``lengths``, cut
    at the request's ``max_new_tokens`` as a model's sampler is: ``finish_reason`` is ``length`` when the cut
    response used the whole budget (what the HF policy reports)."""

    def __init__(self, lengths: list[int]) -> None:
        self.tokenizer = TextTokenizer()
        self.lengths, self.calls, self.texts = lengths, 0, []

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        out = []
        for req in requests:
            text = "x" * self.lengths[self.calls % len(self.lengths)] + "</think><answer>Inc</answer>"
            self.calls += 1
            self.texts.append(text)
            ids = tuple(self.tokenizer.encode(text))[: req.max_new_tokens]
            out.append(GenerationResult(ids, (0.0,) * len(ids),
                                        finish_reason="length" if len(ids) == req.max_new_tokens else "stop"))
        return out


ANSWER = len("</think><answer>Inc</answer>")


def play(lengths: list[int], budget: int, episodes: int = 2, max_turn: int = 3) -> tuple[RolloutBatch, list[str]]:
    config = RolloutConfig(max_turn=max_turn, max_actions_per_turn=1, max_new_tokens=budget)
    codec = ChatCodec(TextTokenizer())
    eps = [Episode(CounterEnv(target=50, max_actions=50), name="counter", group_id=i, seed=i, episode_id=i,
                   config=config, codec=codec) for i in range(episodes)]
    policy = BudgetPolicy(lengths)
    return run_lockstep(eps, policy), policy.texts


def test_a_cut_answer_is_truncated_a_closed_one_is_not() -> None:
    batch, _ = play([10, 40, 2], budget=10 + ANSWER, episodes=1)
    turns = batch.trajectories[0].turns
    # 10 chars: the answer closes on the last allowed token (finish_reason length, not truncated); 40: cut; 2: short
    assert [t.truncated for t in turns] == [False, True, False]
    assert turns[1].actions == [] and turns[1].format_penalty == -0.1  # a cut turn takes no action
    assert turns[0].actions == ["Inc"] and turns[2].actions == ["Inc"]
    assert rollout_metrics(batch)["rollout/truncated_rate"] == pytest.approx(1 / 3)


def test_is_truncated() -> None:
    cut = GenerationResult((1, 2), (0.0, 0.0), finish_reason="length")
    assert is_truncated(cut, "<think>long reasoning")
    assert not is_truncated(cut, "ok</think><answer>Up</answer>")
    assert not is_truncated(GenerationResult((1,), (0.0,), finish_reason="stop"), "no answer at all")
    assert not is_truncated(cut, "done STOP", stop=("STOP",))


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(0, 60), min_size=1, max_size=6), budget=st.integers(1, 80),
       episodes=st.integers(1, 3))
def test_the_rate_is_the_share_of_turns_whose_answer_did_not_fit(lengths: list[int], budget: int,
                                                                episodes: int) -> None:
    batch, texts = play(lengths, budget, episodes)
    turns = [turn for t in batch for turn in t.turns]
    # the lock-step driver asks for the turns in order, so the i-th generated text is the i-th turn's (per round)
    assert len(turns) == len(texts)
    expected = sum(len(text) > budget for text in texts) / len(texts)
    assert rollout_metrics(batch)["rollout/truncated_rate"] == pytest.approx(expected)
    assert rollout_metrics(batch, "val")["val/truncated_rate"] == pytest.approx(expected)
    for turn in turns:
        assert turn.truncated == (len(turn.response_ids) == budget and "</answer>" not in turn.response_text)


def test_no_turns_no_rate() -> None:
    failed = RolloutBatch([Trajectory(env="e", group_id=0, seed=0, env_error="boom")])
    assert "rollout/truncated_rate" not in rollout_metrics(failed)
    assert rollout_metrics(RolloutBatch([Trajectory(env="e", group_id=0, seed=0, turns=[Turn()])]))[
        "rollout/truncated_rate"] == 0.0


def test_the_flag_survives_record_and_replay_and_old_recordings_read_as_complete(tmp_path: Path) -> None:
    batch, _ = play([0, 50], budget=40)
    assert {t.truncated for traj in batch for t in traj.turns} == {True, False}
    path = tmp_path / "step_000001.jsonl.gz"
    write_batches(path, [batch])
    back = read_batches(path)[0]
    assert back.fingerprint() == batch.fingerprint()
    assert [t.truncated for traj in back for t in traj.turns] == [t.truncated for traj in batch for t in traj.turns]
    # a recording made before the flag existed: its turns have no 'truncated' key
    with gzip.open(path, "rt") as fh:
        rows = [json.loads(line) for line in fh]
    for row in rows:
        for turn in row["turns"]:
            del turn["truncated"]
    with gzip.open(path, "wt") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in rows))
    assert not any(t.truncated for traj in read_batches(path)[0] for t in traj.turns)


def test_one_warning_names_the_rates_the_budget_and_the_key() -> None:
    class Log:  # a logger of its own: structlog's global level may be left at "error" by an earlier CLI test
        def __init__(self) -> None:
            self.entries: list[dict] = []

        def warning(self, event: str, **kw: object) -> None:
            self.entries.append({"log_level": "warning", "event": event, **kw})

    log = Log()
    metrics = {"rollout/truncated_rate": 0.5, "val/truncated_rate": 0.25, "rollout/success": 0.1}
    high = warn_truncation(log, 7, metrics, 64)
    assert warn_truncation(log, 8, {"rollout/truncated_rate": TRUNCATION_WARNING_RATE - 0.01}, 64) == {}
    assert warn_truncation(log, 9, {"rollout/success": 1.0}, 64) == {}
    assert high == {"rollout/truncated_rate": 0.5, "val/truncated_rate": 0.25}
    assert len(log.entries) == 1
    (entry,) = log.entries
    assert entry["log_level"] == "warning" and entry["event"] == "responses_truncated" and entry["step"] == 7
    assert entry["rollout/truncated_rate"] == 0.5 and entry["val/truncated_rate"] == 0.25
    assert entry["max_new_tokens"] == 64
    assert "rollout.max_new_tokens=64" in entry["hint"] and "rollout.max_new_tokens=128" in entry["hint"]


def test_random_batches_have_no_truncation() -> None:
    assert all(rollout_metrics(random_batch(s))["rollout/truncated_rate"] == 0.0 for s in range(5))


@pytest.mark.usefixtures("one_torch_thread")
def test_the_hf_policy_reports_length_at_the_budget() -> None:
    """The HF policy's finish_reason, which the flag rests on (the tiny model, where torch is installed)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import torch

    from ragen_plugins_torch.models import load_model_and_tokenizer
    from ragen_plugins_torch.policy import HFPolicy

    model, tok = load_model_and_tokenizer("tiny")
    policy = HFPolicy(model, tok, device="cpu")
    prompt = tuple(tok.encode("<|im_start|>user\nTurn 1:\nn = 0<|im_end|>\n<|im_start|>assistant\n<think>"))
    torch.manual_seed(0)
    results = policy.generate([GenerationRequest(prompt_ids=prompt, max_new_tokens=3, temperature=1.0)] * 4)
    for res in results:
        text = tok.decode(list(res.token_ids), skip_special_tokens=False)
        if len(res.token_ids) == 3:
            assert res.finish_reason == "length"
            assert is_truncated(res, text) == ("</answer>" not in text)
        else:  # the model ended before the budget (an end token or the stop string)
            assert res.finish_reason == "stop"
    assert any(res.finish_reason == "length" for res in results)  # the untrained tiny model rambles
