"""The eval engine's pieces: pass@k and avg@k against slow obvious references, the JSONL reader's repair of an
interrupted write, and the trajectory records' chat messages against the token ids the policy really saw."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_core.config import RolloutConfig
from ragen_core.plugins import build_plugin_manager, collect_registries
from ragen_core.starpo.chat import ChatCodec, TextTokenizer
from ragen_core.starpo.rollout import make_episodes, run_lockstep
from ragen_plugins_eval.engine import eval_metrics, pass_at_k, read_trajectories, trajectory_record
from tests.eval import scripted_backend
from tests.eval.scripted_backend import ScriptedBackend, ScriptedConfig


def slow_pass_at_k(outcomes: list[bool], k: int) -> float:
    """The share of all k-subsets of the group that hold a success."""
    subsets = list(itertools.combinations(range(len(outcomes)), k))
    return sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=10), st.data())
def test_pass_at_k_is_the_share_of_k_subsets_with_a_success(outcomes: list[bool], data: Any) -> None:
    k = data.draw(st.integers(1, len(outcomes)))
    assert pass_at_k(len(outcomes), sum(outcomes), k) == pytest.approx(slow_pass_at_k(outcomes, k), abs=1e-12)


def test_pass_at_k_edges() -> None:
    assert pass_at_k(5, 0, 5) == 0.0 and pass_at_k(5, 1, 5) == 1.0 and pass_at_k(4, 2, 1) == 0.5
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


records_st = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3), st.booleans(), st.booleans(),
                                st.floats(-2, 2)), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(records_st, st.integers(1, 4))
def test_eval_metrics_match_a_slow_reference(rows: list[tuple[str, int, bool, bool, float]], group_size: int) -> None:
    records = [{"env": env, "seed": seed, "success": ok, "env_error": "boom" if err else None, "reward": r,
                "score": r - 0.1, "turns": 1, "response_tokens": 7} for env, seed, ok, err, r in rows]
    metrics = eval_metrics(records, group_size)
    for name in [*sorted({r["env"] for r in records}), "all"]:
        mine = [r for r in records if name in ("all", r["env"])]
        ok = [r for r in mine if r["env_error"] is None]
        m = metrics[name]
        assert m["env_errors"] == len(mine) - len(ok) and m["trajectories"] == len(ok)
        if not ok:
            assert "success" not in m
            continue
        groups = {}
        for r in ok:
            groups.setdefault((r["env"], r["seed"]), []).append(r["success"])
        assert m["groups"] == len(groups)
        assert m["success"] == pytest.approx(sum(r["success"] for r in ok) / len(ok))
        assert m[f"avg@{group_size}"] == pytest.approx(sum(sum(g) / len(g) for g in groups.values()) / len(groups))
        assert m["reward_mean"] == pytest.approx(sum(r["score"] for r in ok) / len(ok))  # penalties included
        assert m["env_reward_mean"] == pytest.approx(sum(r["reward"] for r in ok) / len(ok))
        for k in range(1, group_size + 1):
            eligible = [g for g in groups.values() if len(g) >= k]
            listed = k == group_size or (k & (k - 1) == 0)
            if not listed or not eligible:
                assert f"pass@{k}" not in m
                continue
            expected = sum(slow_pass_at_k(g, k) for g in eligible) / len(eligible)
            assert m[f"pass@{k}"] == pytest.approx(expected)


def test_pass_at_group_size_is_any_success_and_pass_at_1_the_success_rate() -> None:
    records = [{"env": "e", "seed": s, "success": ok, "env_error": None, "reward": 0.0, "score": 0.0, "turns": 1,
                "response_tokens": 1} for s, ok in [(0, True), (0, False), (1, False), (1, False), (2, True),
                                                     (2, True)]]
    m = eval_metrics(records, 2)["e"]
    assert m["pass@2"] == pytest.approx(2 / 3) and m["pass@1"] == pytest.approx(m["success"]) == pytest.approx(0.5)
    assert m["avg@2"] == pytest.approx(0.5) and math.isclose(m["groups"], 3)


def _line(env: str, seed: int) -> str:
    return json.dumps({"env": env, "seed": seed, "success": False}) + "\n"


def test_reading_repairs_an_interrupted_file(tmp_path: Path) -> None:
    path = tmp_path / "trajectories.jsonl"
    complete = _line("a", 1) + _line("a", 1) + _line("b", 1) + _line("b", 1)
    path.write_text(complete + _line("a", 2) + '{"env": "a", "se')  # one group half written, then a torn line
    records = read_trajectories(path, group_size=2)
    assert [(r["env"], r["seed"]) for r in records] == [("a", 1), ("a", 1), ("b", 1), ("b", 1)]
    assert path.read_text() == complete
    assert read_trajectories(tmp_path / "absent.jsonl", 2) == []


def test_a_trailing_line_without_newline_is_dropped_even_when_it_parses(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(_line("a", 1) + _line("a", 1).rstrip("\n"))
    assert read_trajectories(path, 1) == [{"env": "a", "seed": 1, "success": False}]
    assert path.read_text() == _line("a", 1)


@pytest.mark.parametrize("mode", ["full", "limited_multi_turn", "single_turn"])
def test_messages_are_the_conversation_the_policy_saw(mode: str) -> None:
    pm = build_plugin_manager(plugins=[scripted_backend])
    registries = collect_registries(pm)
    rollout = RolloutConfig(max_turn=4, max_actions_per_turn=1, context_mode=mode, max_new_tokens=20)
    codec = ChatCodec(TextTokenizer())
    episodes = make_episodes(registries.envs, [("eval_counter_far", 3, {})], seeds=[1, 2, 3], group_size=2,
                             config=rollout, codec=codec)
    policy = ScriptedBackend(ScriptedConfig(p_inc=0.5))
    batch = run_lockstep(episodes, policy)
    for traj, ep in zip(batch, episodes):
        rec = trajectory_record(traj, ep.env, codec, rollout)
        msgs = rec["messages"]
        assert [m["role"] for m in msgs] == ["system"] + ["user", "assistant"] * len(traj.turns)
        assert rec["turns"] == len(traj.turns) and rec["response_tokens"] == traj.response_length
        assert rec["prompt_tokens"] == sum(len(t.prompt_ids) for t in traj.turns)
        for n, turn in enumerate(traj.turns):  # each turn's first prompt is the system message and its user turn
            if n == 0 or mode == "limited_multi_turn" and rollout.window == 1:
                assert codec.tokenizer.decode(turn.prompt_ids) == codec.render(msgs[:2], generation=True) + "<think>"
        if mode == "full":
            ids = [i for t in traj.turns for i in (*t.prompt_ids, *t.response_ids)]
            assert codec.tokenizer.decode(ids) + "<|im_end|>\n" == codec.render(msgs, generation=False)
        elif mode == "limited_multi_turn" and len(traj.turns) > 1:  # window 2: the previous turn, then this one
            last = traj.turns[-1]
            window = [msgs[0], *msgs[-4:-1]]
            assert codec.tokenizer.decode(last.prompt_ids) == codec.render(window, generation=True) + "<think>"
