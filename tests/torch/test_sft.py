"""The format warm-start's demonstrations: parseable in both thinking modes, valid random actions, no task."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from ragen_core.chat import ChatCodec  # noqa: E402
from ragen_core.config import RolloutConfig  # noqa: E402
from ragen_core.plugins import build_plugin_manager, collect_registries  # noqa: E402
from ragen_core.rollout import make_episodes, run_lockstep  # noqa: E402
from ragen_plugins_torch import models  # noqa: E402
from ragen_plugins_torch.sft import DemoPolicy, demonstration_samples  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = models.build_tiny_model(tmp_path_factory.mktemp("models"), hidden=32, intermediate=64)
    return models.load_model_and_tokenizer(str(path))[1]


@pytest.fixture(scope="module")
def registries() -> Any:
    return collect_registries(build_plugin_manager())


@pytest.mark.parametrize("think", [True, False])
@pytest.mark.parametrize("env", ["sokoban", "frozenlake_det", "bandit"])
def test_every_demonstration_turn_parses_and_acts(tokenizer: Any, registries: Any, think: bool, env: str) -> None:
    """With ``think=False`` the prompt ends with ``<answer>``: a demonstration that still wrote ``</think> <answer>``
    would teach a format that every turn then pays the format penalty for (it did, before this test)."""
    rollout = RolloutConfig(max_turn=3, max_actions_per_turn=2, think=think, max_new_tokens=64)
    codec = ChatCodec(tokenizer, think=think)
    episodes = make_episodes(registries.envs, [(env, 6, {})], seeds=list(range(6)), group_size=1, config=rollout,
                             codec=codec)
    batch = run_lockstep(episodes, DemoPolicy(tokenizer, episodes, max_actions=2, action_sep="||", seed=0,
                                              think=think))
    turns = [turn for traj in batch for turn in traj.turns]
    assert turns and all(traj.env_error is None for traj in batch)
    assert all(turn.format_penalty == 0 for turn in turns), [tokenizer.decode(t.response_ids) for t in turns]
    names = {name.lower() for ep in episodes for name in ep.env.action_names}
    assert all(1 <= len(turn.actions) <= 2 and {a.lower() for a in turn.actions} <= names for turn in turns)
    if not think:
        assert not any("think>" in tokenizer.decode(turn.response_ids) for turn in turns)


def test_demonstrations_use_seeds_apart_from_training_and_train_only_responses(tokenizer: Any,
                                                                              registries: Any) -> None:
    rollout = RolloutConfig(max_turn=2, max_actions_per_turn=2)
    samples = demonstration_samples(registries, [("sokoban", 1, {})], ChatCodec(tokenizer), rollout, groups=4,
                                    seed=0)
    assert len(samples) == 4
    for s in samples:
        assert len(s.input_ids) == len(s.response_mask) and 0 < sum(s.response_mask) < len(s.input_ids)
        assert s.response_mask[0] == 0  # the prompt is never a target
