"""Dynamics pretraining: random-play transitions in the run's prompt format whose targets are exactly the env's
next observations (replayed independently), the loss on those tokens only, and the trained weights cached."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")
pytest.importorskip("transformers")

from ragen_core.config import RolloutConfig  # noqa: E402
from ragen_core.plugins import build_plugin_manager, collect_registries  # noqa: E402
from ragen_core.starpo.chat import ChatCodec  # noqa: E402
from ragen_plugins_torch import models  # noqa: E402
from ragen_plugins_torch.dynamics import (  # noqa: E402
    MARKER_TEXT,
    SEED_BASE,
    dynamics_cache_folder,
    pretrain_dynamics,
    transition_samples,
)
from ragen_plugins_torch.policy import HFPolicy  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return models.build_tiny_model(tmp_path_factory.mktemp("models"), hidden=32, intermediate=64)


@pytest.fixture(scope="module")
def tokenizer(tiny: Path) -> Any:
    return models.load_model_and_tokenizer(str(tiny))[1]


@pytest.fixture(scope="module")
def registries() -> Any:
    return collect_registries(build_plugin_manager())


def replayed_observations(registries: Any, env: str, seed: int, turns: list[list[str]]) -> list[str]:
    """The observation after each turn's actions, from a fresh env (independent of the rollout loop)."""
    e = registries.envs.make(env, {})
    obs, _ = e.reset(seed=seed)
    out = []
    for actions in turns:
        for a in actions:
            obs, _r, terminated, truncated, _i = e.step(a)
            if terminated or truncated:
                break
        out.append(str(obs))
    return out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(env=st.sampled_from(["frozenlake_det", "sokoban", "bandit"]), think=st.booleans(),
       mode=st.sampled_from(["limited_multi_turn", "full"]), per_turn=st.integers(1, 2), seed=st.integers(0, 50))
def test_each_transition_targets_the_observation_its_answer_led_to(tokenizer: Any, registries: Any, env: str,
                                                                   think: bool, mode: str, per_turn: int,
                                                                   seed: int) -> None:
    rollout = RolloutConfig(max_turn=3, max_actions_per_turn=per_turn, think=think, max_new_tokens=64,
                            context_mode=mode, window=1)
    codec = ChatCodec(tokenizer, think=think)
    samples = transition_samples(registries, [(env, 1, {})], codec, rollout, groups=3, seed=seed)
    assert samples
    from ragen_core.starpo.rollout import make_episodes, run_lockstep
    from ragen_plugins_torch.sft import DemoPolicy

    # the same random play, run again through the public loop, gives the turns the samples were made of
    episodes = make_episodes(registries.envs, [(env, 3, {})], seeds=[SEED_BASE + seed + i for i in range(3)],
                             group_size=1, config=rollout, codec=codec)
    batch = run_lockstep(episodes, DemoPolicy(tokenizer, episodes, max_actions=per_turn, action_sep="||",
                                              seed=seed, think=think))
    expected = []
    for traj in batch:
        after = replayed_observations(registries, env, traj.seed, [t.actions for t in traj.turns])
        expected += [(turn, obs) for turn, obs in zip(traj.turns, after, strict=True)]
    assert len(samples) == len(expected)
    for s, (turn, obs) in zip(samples, expected, strict=True):
        assert len(s.input_ids) == len(s.response_mask)
        first = s.response_mask.index(1)
        assert set(s.response_mask[first:]) == {1} and set(s.response_mask[:first]) == {0}  # the target only
        target = tokenizer.decode(s.input_ids[first:])
        assert target == MARKER_TEXT + obs
        context = s.input_ids[:first]
        n = len(turn.response_ids)
        assert context[-n:] == turn.response_ids  # the answer that led there, right before the target
        assert context[-n - len(turn.prompt_ids):-n] == turn.prompt_ids  # after the exact prompt of that turn
        if mode == "full" or turn.new_segment:
            assert turn.observation in tokenizer.decode(context)


def test_pretraining_learns_the_transitions_and_a_rerun_loads_the_cached_weights(
        tiny: Path, registries: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setenv("RAGEN_CACHE_DIR", str(tmp_path / "cache"))
    rollout = RolloutConfig(max_turn=3, max_actions_per_turn=1, think=False, max_new_tokens=16)
    plan = [("frozenlake_det", 1, {"size": 3})]

    def policy() -> HFPolicy:
        torch.manual_seed(0)
        model, tok = models.load_model_and_tokenizer(str(tiny))
        return HFPolicy(model, tok, device="cpu")

    first = policy()
    codec = ChatCodec(first.tokenizer, think=False)
    kwargs = {"base_model": str(tiny), "steps": 40, "groups": 16, "lr": 3e-3, "batch_size": 16, "seed": 0}
    out = pretrain_dynamics(first, registries, plan, codec, rollout, **kwargs)
    assert out["dynamics/cached"] == 0.0 and out["dynamics/samples"] >= 16
    assert out["dynamics/loss_last"] < 0.5 * out["dynamics/loss_first"]
    folders = list((tmp_path / "cache").glob("dynamics-*"))
    assert len(folders) == 1 and (folders[0] / models.MARKER).is_file()

    second = policy()
    again = pretrain_dynamics(second, registries, plan, codec, rollout, **kwargs)
    assert again["dynamics/cached"] == 1.0 and again["dynamics/loss_last"] == out["dynamics/loss_last"]
    for (k, a), (_k, b) in zip(first.model.state_dict().items(), second.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), k
    # other settings, another folder: nothing is reused across them
    settings = {k: kwargs[k] for k in ("steps", "groups", "lr", "batch_size", "seed")}
    assert dynamics_cache_folder(str(tiny), plan, rollout, settings) != \
        dynamics_cache_folder(str(tiny), plan, rollout, {**settings, "seed": 1})
    # the batch shape of training and validation is not in the data: a smoke run loads the same weights; a prompt
    # setting or another mix of envs is
    import attrs

    smoke = attrs.evolve(rollout, env_groups=2, group_size=2, val_env_groups=1, temperature=0.7)
    assert dynamics_cache_folder(str(tiny), [("frozenlake_det", 7, {"size": 3})], smoke, settings) == \
        dynamics_cache_folder(str(tiny), plan, rollout, settings)
    assert dynamics_cache_folder(str(tiny), plan, attrs.evolve(rollout, window=rollout.window + 1), settings) != \
        dynamics_cache_folder(str(tiny), plan, rollout, settings)
    mix = [("frozenlake_det", 1, {"size": 3}), ("sokoban", 1, {})]
    assert dynamics_cache_folder(str(tiny), mix, rollout, settings) != \
        dynamics_cache_folder(str(tiny), plan, rollout, settings)
    # a model whose parameters are named otherwise (e.g. LoRA-wrapped) gets its own folder, not a failing load
    import peft

    wrapped = policy()
    wrapped.model = peft.get_peft_model(wrapped.model, peft.LoraConfig(r=2, target_modules="all-linear"))
    lora = pretrain_dynamics(wrapped, registries, plan, codec, rollout, **kwargs)  # the same settings
    assert lora["dynamics/cached"] == 0.0 and len(list((tmp_path / "cache").glob("dynamics-*"))) == 2


def test_the_documented_multi_turn_example_is_a_valid_config_with_dynamics_pretraining(registries: Any) -> None:
    from ragen_core.config import load_config, resolve_config

    path = Path(__file__).parents[2] / "examples" / "frozenlake_multiturn.yaml"
    resolved = resolve_config(load_config(str(path), []), registries, build_plugin_manager(), strict=True)
    ro, tc = resolved.config.rollout, resolved.trainer
    assert [(e.name, e.options) for e in resolved.config.envs] == [("frozenlake_det", {"size": 3})]
    assert (ro.max_turn, ro.max_actions_per_turn, ro.context_mode) == (4, 1, "limited_multi_turn")
    assert tc.dynamics_steps > 0 and tc.warm_start_steps > 0 and tc.turn_weight == "episode"
