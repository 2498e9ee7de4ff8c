"""The format warm-start's demonstrations: parseable in both thinking modes, valid random actions, no task; never
more actions than the rollout runs, and refused when they do not fit the token budget."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")
pytest.importorskip("transformers")

from ragen_core.config import RolloutConfig  # noqa: E402
from ragen_core.errors import ConfigError  # noqa: E402
from ragen_core.plugins import build_plugin_manager, collect_registries  # noqa: E402
from ragen_core.starpo.chat import ChatCodec  # noqa: E402
from ragen_core.starpo.rollout import make_episodes, run_lockstep  # noqa: E402
from ragen_plugins_torch import models  # noqa: E402
from ragen_plugins_torch.sft import DemoPolicy, check_demonstration_budget, demonstration_samples  # noqa: E402


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


# ------------------------------------------------------------------------------------- actions and token budget

#: every built-in env and variant but searchqa_dense (making it embeds the corpus with a MiniLM model; its actions,
#: free-form, are searchqa's)
BUILTIN = [n for n in collect_registries(build_plugin_manager()).envs.names() if n != "searchqa_dense"]
NAMED = ["sokoban", "sokoban_8x8_2box", "frozenlake_det", "bandit", "bandit_test"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(env=st.sampled_from(NAMED), per_turn=st.integers(1, 4), per_traj=st.integers(1, 6), turns=st.integers(1, 4),
       think=st.booleans(), seed=st.integers(0, 10**6))
def test_demo_policy_never_writes_more_actions_than_the_rollout_runs(
        tokenizer: Any, registries: Any, env: str, per_turn: int, per_traj: int, turns: int, think: bool,
        seed: int) -> None:
    """At most min(max_actions_per_turn, actions left in the trajectory) per answer, so every action written is
    executed (Bandit: exactly one); none is cut by the parser."""
    options = {} if env.startswith("bandit") else {"max_actions_per_traj": per_traj}
    rollout = RolloutConfig(max_turn=turns, max_actions_per_turn=per_turn, think=think, max_new_tokens=96)
    episodes = make_episodes(registries.envs, [(env, 3, options)], seeds=[seed, seed + 1, seed + 2], group_size=1,
                             config=rollout, codec=ChatCodec(tokenizer, think=think))
    limit = episodes[0].env.max_actions_per_traj
    policy = DemoPolicy(tokenizer, episodes, max_actions=per_turn, action_sep="||", seed=seed, think=think)
    batch = run_lockstep(episodes, policy)
    for traj in batch:
        used = 0
        for turn in traj.turns:
            text = tokenizer.decode(turn.response_ids)
            written = [a for a in text.split("<answer>")[-1].split("</answer>")[0].split("||") if a.strip()]
            assert 1 <= len(written) <= min(per_turn, limit - used), text
            assert len(turn.actions) == len(written)  # the parser kept them all
            used += len(written)
        assert used <= limit
        if env.startswith("bandit"):
            assert [len(t.actions) for t in traj.turns] == [1]


@pytest.mark.parametrize("think", [True, False])
def test_every_builtin_envs_demonstrations_fit_its_own_hinted_budget(tokenizer: Any, registries: Any,
                                                                      think: bool) -> None:
    """`env=NAME` alone (hints shape the rollout) gives a warm-start that the budget check lets through."""
    from ragen_core.config import load_config, resolve_config

    needed = {}
    for name in BUILTIN:
        config = load_config(None, [f"env={name}", f"rollout.think={str(think).lower()}"])
        rollout = resolve_config(config, registries, strict=False).config.rollout
        env = registries.envs.make(name)
        needed[name] = (check_demonstration_budget(tokenizer, [(name, env)], rollout), rollout.max_new_tokens)
    assert all(need <= budget for need, budget in needed.values()), needed


def test_a_demonstration_that_does_not_fit_is_refused_before_anything_is_generated(
        tokenizer: Any, registries: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import ragen_plugins_torch.sft as sft

    rollout = RolloutConfig(max_turn=1, max_actions_per_turn=1, max_new_tokens=5)
    need = sft.longest_demonstration(tokenizer, registries.envs.make("bandit"), max_actions_per_turn=1,
                                     action_sep="||", think=True)
    assert need > 5
    monkeypatch.setattr(sft, "run_lockstep", lambda *a, **k: pytest.fail("demonstrations were generated"))
    with pytest.raises(ConfigError) as err:
        sft.demonstration_samples(registries, [("bandit", 2, {})], ChatCodec(tokenizer), rollout, groups=2, seed=0,
                                  model="tiny")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"warm-start demonstrations need up to {need} new tokens (env bandit, tokenizer of "
                              f"'tiny') but rollout.max_new_tokens is 5: raise rollout.max_new_tokens to at least "
                              f"{need}")
    without = sft.longest_demonstration(tokenizer, registries.envs.make("bandit"), max_actions_per_turn=1,
                                        action_sep="||", think=False)
    assert ("or set rollout.think=false" in message) == (without <= 5)


def test_the_think_false_way_out_is_offered_only_when_it_fits(tokenizer: Any, registries: Any) -> None:
    env = registries.envs.make("sokoban")
    short = longest(tokenizer, env, think=False)
    with pytest.raises(ConfigError, match="or set rollout.think=false"):
        check_demonstration_budget(tokenizer, [("sokoban", env)], RolloutConfig(max_new_tokens=short))
    with pytest.raises(ConfigError) as err:
        check_demonstration_budget(tokenizer, [("sokoban", env)], RolloutConfig(max_new_tokens=short - 1))
    assert "think=false" not in str(err.value)
    assert check_demonstration_budget(tokenizer, [("sokoban", env)], RolloutConfig(
        max_new_tokens=longest(tokenizer, env, think=True))) == longest(tokenizer, env, think=True)


def longest(tokenizer: Any, env: Any, *, think: bool, per_turn: int = 2) -> int:
    from ragen_plugins_torch.sft import longest_demonstration

    return longest_demonstration(tokenizer, env, max_actions_per_turn=per_turn, action_sep="||", think=think)


def test_the_check_covers_every_demonstration_the_policy_writes(tokenizer: Any, registries: Any) -> None:
    """The measured worst case bounds the real demonstrations (and a response over the request's budget raises)."""
    rollout = RolloutConfig(max_turn=3, max_actions_per_turn=2, max_new_tokens=200)
    for env in ["sokoban", "bandit", "countdown"]:
        episodes = make_episodes(registries.envs, [(env, 8, {})], seeds=list(range(8)), group_size=1,
                                 config=rollout, codec=ChatCodec(tokenizer))
        bound = longest(tokenizer, episodes[0].env, think=True)
        batch = run_lockstep(episodes, DemoPolicy(tokenizer, episodes, max_actions=2, action_sep="||", seed=1))
        assert max(len(t.response_ids) for traj in batch for t in traj.turns) <= bound
    episodes = make_episodes(registries.envs, [("sokoban", 1, {})], seeds=[0], group_size=1,
                             config=RolloutConfig(max_new_tokens=3), codec=ChatCodec(tokenizer))
    with pytest.raises(ConfigError, match="rollout.max_new_tokens is 3"):
        run_lockstep(episodes, DemoPolicy(tokenizer, episodes, max_actions=2, action_sep="||", seed=0))
