"""The env contract, check_env, and gymnasium.make integration."""

from __future__ import annotations

from typing import Any

import gymnasium
import pytest

from ragen_core.checks import check_env, fuzz_env, hostile_strings
from ragen_core.env import TextSpace, register_gymnasium_envs
from ragen_core.plugins import build_plugin_manager, collect_registries
from tests.core.toy import CounterEnv, ToyPlugin


def test_toy_env_passes_check_env() -> None:
    check_env(lambda: CounterEnv())
    check_env(lambda: CounterEnv(target=2, random_start=True))
    check_env(CounterEnv())  # an instance works too


def test_env_takes_config_or_options_not_both() -> None:
    from tests.core.toy import CounterConfig

    assert CounterEnv(CounterConfig(target=4)).config.target == 4
    assert CounterEnv(target=4).config.target == 4
    with pytest.raises(TypeError, match="either a config object or keyword options"):
        CounterEnv(CounterConfig(), target=4)


class RaisesOnGarbage(CounterEnv):
    def step(self, action: str) -> Any:
        if action.strip().lower() not in ("inc", "dec"):
            raise ValueError("bad action")
        return super().step(action)


class Nondeterministic(CounterEnv):
    calls = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        obs, info = super().reset(seed=seed)
        Nondeterministic.calls += 1
        return f"{obs} ({Nondeterministic.calls})", info


class MissingInfo(CounterEnv):
    def step(self, action: str) -> Any:
        obs, r, te, tr, info = super().step(action)
        info.pop("action_is_effective")
        return obs, r, te, tr, info


class InvalidChangesState(CounterEnv):
    def step(self, action: str) -> Any:
        result = super().step(action)
        if not result[4]["action_is_valid"]:
            self.value += 10
        return (self.render(), *result[1:])


class BadOracle(CounterEnv):
    def oracle_action(self) -> str | None:
        return "Jump"


class NoInstruction(CounterEnv):
    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        self.instruction = ""


@pytest.mark.parametrize(("cls", "needle"), [
    (RaisesOnGarbage, "raised ValueError: bad action"),
    (Nondeterministic, "gave a different episode"),
    (MissingInfo, "lacks the required key 'action_is_effective'"),
    (InvalidChangesState, "changed the state"),
    (BadOracle, "oracle's action 'Jump' was invalid"),
    (NoInstruction, "instruction must be a non-empty string"),
])
def test_check_env_catches_broken_envs(cls: type, needle: str) -> None:
    with pytest.raises(AssertionError, match=needle):
        check_env(lambda: cls())


@pytest.mark.parametrize(("cls", "needle"), [
    (RaisesOnGarbage, "raised ValueError: bad action"),
    (MissingInfo, "lacks the required key 'action_is_effective'"),
    (InvalidChangesState, "changed the state"),
])
def test_fuzz_env_catches_broken_envs(cls: type, needle: str) -> None:
    with pytest.raises(AssertionError, match=needle):
        fuzz_env(cls(), ["Inc", "Dec", "jump", "🙂"], seed=0)


def test_fuzz_env_checks_each_fuzzed_step_and_plays_the_valid_moves_between() -> None:
    seen: list[tuple[str, bool, str]] = []
    env = CounterEnv()
    fuzz_env(env, hostile_strings(60, seed=1), seed=5, between=["Inc"],
             check=lambda action, step, before: seen.append((action, step[4]["action_is_valid"], before)))
    assert [a for a, _v, _b in seen] == hostile_strings(60, seed=1)  # the fuzzed ones only, in order
    assert not any(valid for a, valid, _b in seen if a.strip().lower() not in ("inc", "dec"))
    assert len({before for _a, _v, before in seen}) > 1  # the moves between reached other states
    fuzz_env(CounterEnv(), [None, 3, b"Inc"], seed=0)  # non-strings are actions too, and invalid ones


def test_hostile_strings_are_varied_and_seeded() -> None:
    a = hostile_strings(500, seed=3)
    assert a == hostile_strings(500, seed=3) and len(set(a)) > 400
    assert "" in a and any(len(s) >= 10_000 for s in a)


def test_text_space() -> None:
    space = TextSpace(max_length=5, seed=0)
    assert space.contains("héllo") and not space.contains("toolong") and not space.contains(3)
    assert isinstance(space.sample(), str) and space == TextSpace(5)


def test_gymnasium_make_after_one_line() -> None:
    registries = collect_registries(build_plugin_manager(plugins=[ToyPlugin()]))
    ids = register_gymnasium_envs(registries)
    assert ids == ["ragen/counter", "ragen/counter5"]
    env = gymnasium.make("ragen/counter5", random_start=False)
    obs, _ = env.reset(seed=1)
    assert obs == "n = 0" and env.unwrapped.config.target == 5
    steps = 0
    truncated = terminated = False
    while not (terminated or truncated):
        _o, _r, terminated, truncated, _i = env.step("Dec")
        steps += 1
    assert truncated and steps == 8  # TimeLimit at max_actions_per_traj


def test_no_import_side_effects_on_gymnasium_registry() -> None:
    import subprocess
    import sys

    code = ("import gymnasium, ragen_core, ragen_core.env, ragen_core.cli, ragen_core.plugins;"
            "print(sum(k.startswith('ragen/') for k in gymnasium.registry))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"
