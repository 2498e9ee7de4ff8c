"""The gymnasium adapter (plugins/ragen_plugins_gymnasium): registration, the env contract on every listed id, its
episodes against gymnasium's own env, action parsing, option errors, the ANSI conversion and the listing; slow: a
two-step `ragen train` of the tiny model on it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium
import pytest
from gymnasium import spaces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragen_plugins_gymnasium.plugin as plugin
from ragen_core.checks import check_env, fuzz_env
from ragen_core.errors import ConfigError
from ragen_plugins_gymnasium.ansi import IGNORE, Mark, ansi_to_text, describe_style, styled_lines
from ragen_plugins_gymnasium.env import GymnasiumEnv
from ragen_plugins_gymnasium.games import GAMES
from ragen_plugins_gymnasium.listing import runnable_ids, screen_source

#: the ids gymnasium 1.x registers that the adapter plays without optional packages
TOY_TEXT = ["Blackjack-v1", "CliffWalking-v1", "CliffWalkingSlippery-v1", "FrozenLake-v1", "FrozenLake8x8-v1", "Taxi-v4"]
LISTED = runnable_ids()
_SGR = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def envs(ragen_register: Any, ragen_registries: Any) -> Any:
    """The env registry with only this plugin registered (the contract kit's fixtures)."""
    ragen_register(plugin, name="gymnasium")
    return ragen_registries().envs


def make(**options: Any) -> GymnasiumEnv:
    return GymnasiumEnv(**options)


# ------------------------------------------------------------------------------------------------ registration

def test_registration_through_the_contract_fixtures(envs: Any) -> None:
    spec = envs.get("gymnasium")
    assert spec.plugin == "gymnasium" and isinstance(spec.entry_point, str)
    assert set(spec.guide) == {"rules", "actions", "rewards", "success"}
    hints = envs.hints("gymnasium")
    assert hints.max_turn == 6 and hints.max_actions_per_turn == 2 and hints.answer_tokens == 16
    env = envs.make("gymnasium")  # the default id
    assert env.env_id == "FrozenLake-v1" and env.action_names == ("Left", "Down", "Right", "Up")
    assert hints.max_turn <= env.max_actions_per_traj == 100  # FrozenLake-v1's max_episode_steps


def test_the_gym_namespace_names_every_listed_id(envs: Any) -> None:
    space = envs.namespace("gym")
    assert (space.env, space.option, space.plugin) == ("gymnasium", "id", "gymnasium")
    assert space.members() == sorted([*LISTED, "ragen_test/Echo-v0"])  # the text env registered below
    taxi = envs.make("gym.Taxi-v4")
    assert taxi.env_id == "Taxi-v4" and taxi.action_names[4:] == ("Pickup", "Dropoff")
    assert envs.hints("gym.Taxi-v4") == envs.hints("gymnasium")
    lake = envs.make("gym.FrozenLake8x8-v1", {"kwargs": {"is_slippery": False}, "max_actions_per_traj": 30})
    assert lake.max_actions_per_traj == 30 and lake.reset(seed=0)[0].count("\n") == 7
    with pytest.raises(ConfigError, match=r"gym.FrozenLak-v1.id: must be a registered .*did you mean 'FrozenLake-v1'"):
        envs.make("gym.FrozenLak-v1")


def test_registering_imports_neither_gymnasium_nor_the_env() -> None:
    code = ("import sys\nfrom ragen_core.plugins import build_plugin_manager, collect_registries\n"
            "pm = build_plugin_manager(environ={'RAGEN_DISABLE_PLUGIN_AUTOLOAD': '1'})\n"
            "import ragen_plugins_gymnasium.plugin as p\npm.register(p, name='gymnasium')\n"
            "assert 'gymnasium' in collect_registries(pm).envs\n"
            "print(*sorted(m for m in sys.modules if m.startswith(('ragen_plugins_gymnasium.', "
            "'gymnasium.envs.toy_text'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["ragen_plugins_gymnasium.plugin"]


# ------------------------------------------------------------------------------------------------ the contract

def test_the_toy_text_ids_are_listed() -> None:
    assert set(TOY_TEXT) <= set(LISTED)
    assert not {"CartPole-v1", "MountainCarContinuous-v0", "Reacher-v2"} & set(LISTED)


@pytest.mark.parametrize("env_id", LISTED)
def test_check_env_on_every_listed_id(envs: Any, env_id: str) -> None:
    check_env(lambda: envs.make("gymnasium", {"id": env_id}), n_random_actions=100, max_steps=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=st.lists(st.one_of(st.text(), st.sampled_from(["left", " UP ", "3", "4", "-1", "01", "Right\n"])),
                        min_size=1, max_size=30),
       env_id=st.sampled_from(["FrozenLake-v1", "Taxi-v4"]), seed=st.integers(0, 10**6))
def test_fuzz_with_arbitrary_text(actions: list[str], env_id: str, seed: int) -> None:
    env = make(id=env_id, invalid_action_reward=-0.25)
    names = {n.casefold(): i for i, n in enumerate(env.action_names)}

    def check(action: Any, step: tuple[Any, ...], before: str) -> None:
        text = action.strip()
        expected = text.casefold() in names or (re.fullmatch(r"-?[0-9]+", text) is not None
                                                and int(text) in range(len(names)))
        assert step[4]["action_is_valid"] == expected, action
        if not expected and not (step[2] or step[3]):
            assert step[1] == -0.25

    fuzz_env(env, actions, seed=seed, between=list(env.action_names), check=check)


# ------------------------------------------------------------------------------------------------ the reference

def _plain_lines(raw: str) -> list[str]:
    """A render without its colour codes, trailing spaces and surrounding blank lines (no ragen code involved)."""
    lines = [line.rstrip() for line in _SGR.sub("", raw).split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _put(lines: list[str], row: int, col: int, symbol: str) -> None:
    lines[row] = lines[row][:col] + symbol + lines[row][col + 1:]


def expected_board(ref: Any, obs: Any) -> str:
    """What the adapter must show for gymnasium's env ``ref``, built from gymnasium's state, not from the adapter's
    ANSI reader."""
    base = ref.unwrapped
    if isinstance(base, gymnasium.envs.toy_text.BlackjackEnv):
        return f"Your cards sum to {obs[0]}. The dealer shows {'an ace' if obs[1] == 1 else obs[1]}."
    lines = _plain_lines(ref.render())
    moved = 1 if lines[0].startswith("  (") else 0  # FrozenLake names the last move above the grid
    if isinstance(base, gymnasium.envs.toy_text.FrozenLakeEnv):
        row, col = divmod(int(base.s), base.ncol)
        _put(lines, moved + row, col, "P")
    elif isinstance(base, gymnasium.envs.toy_text.TaxiEnv):
        row, col, passenger, dest = base.decode(base.s)
        _put(lines, 1 + row, 2 * col + 1, "T" if passenger < 4 else "@")
        lines += [f"destination: {'RGYB'[dest]}"]
        lines += [f"passenger waiting at: {'RGYB'[passenger]}"] if passenger < 4 else []
    return "\n".join(lines)


def _same_board(text: str, expected: str) -> bool:
    if expected.startswith("Your cards"):
        return text.startswith(expected)
    # the adapter writes its note lines in the order it meets them; compare them as a set
    notes = ("destination:", "passenger waiting at:")
    split = [[line for line in t.split("\n") if line.startswith(notes) == n] for t in (text, expected) for n in (0, 1)]
    return split[0] == split[2] and sorted(split[1]) == sorted(split[3])


@pytest.mark.parametrize("env_id", TOY_TEXT)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), data=st.data())
def test_an_episode_equals_gymnasiums_own(env_id: str, seed: int, data: st.DataObject) -> None:
    env = make(id=env_id)
    ref = gymnasium.make(env_id, render_mode=None if env_id == "Blackjack-v1" else "ansi")  # Blackjack has none
    actions = data.draw(st.lists(st.integers(0, ref.action_space.n - 1), max_size=40))
    text, _ = env.reset(seed=seed)
    obs, _ = ref.reset(seed=seed)
    assert _same_board(text, expected_board(ref, obs)), (text, expected_board(ref, obs))
    for a in actions:
        mine = env.step(str(a) if a % 2 else env.action_names[a].upper())
        obs, reward, terminated, truncated, _ = ref.step(a)
        assert mine[1:4] == (float(reward), terminated, truncated)
        assert mine[4]["action_is_valid"] and env.state_key() == f"{env_id}:{_plain_obs(obs)!r}"
        assert _same_board(mine[0], expected_board(ref, obs)), (mine[0], expected_board(ref, obs))
        if terminated or truncated:
            assert mine[4]["success"] == (reward > 0 if "Cliff" not in env_id else terminated)
            break


def _plain_obs(obs: Any) -> Any:
    return tuple(int(v) for v in obs) if isinstance(obs, tuple) else int(obs)


# ------------------------------------------------------------------------------------------------ actions

@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10**6), picks=st.lists(st.integers(0, 5), max_size=25), data=st.data())
def test_names_in_any_case_and_numbers_play_the_same_episode(seed: int, picks: list[int], data: st.DataObject) -> None:
    by_name, by_number = make(id="Taxi-v4"), make(id="Taxi-v4")
    trace = []
    for env in (by_name, by_number):
        steps = [env.reset(seed=seed)[0]]
        for a in picks:
            name = env.action_names[a]
            spelled = data.draw(st.sampled_from([name, name.lower(), name.upper(), f"  {name}\n"]))
            steps.append(env.step(spelled if env is by_name else str(a))[:4])
        trace.append(steps)
    assert trace[0] == trace[1]


def test_invalid_actions_leave_the_state_unchanged_and_cost_the_configured_reward() -> None:
    env = make(id="FrozenLake-v1", kwargs={"is_slippery": False}, invalid_action_reward=-0.5)
    env.reset(seed=3)
    env.step("Right")
    before = (env.render(), env.state_key(), int(env.gym_env.unwrapped.s))
    for bad in ["Jump", "4", "-1", "1.0", "", "Left Left", "Left || Down", "⁰", "١", "LEFT!", None, 1, ["Left"]]:
        obs, reward, terminated, truncated, info = env.step(bad)  # type: ignore[arg-type]
        assert (reward, terminated, truncated, info["action_is_valid"], info["action_is_effective"]) == \
            (-0.5, False, False, False, False), bad
        assert (obs, env.state_key(), int(env.gym_env.unwrapped.s)) == before, bad
    assert env.step("Down")[4]["action_is_effective"]


def test_after_the_end_every_action_is_invalid_and_the_end_is_repeated() -> None:
    env = make(id="FrozenLake-v1", kwargs={"is_slippery": False})
    env.reset(seed=0)
    for a in ["Right", "Right", "Down", "Down", "Down", "Right"]:  # SFFF / FHFH / FFFH / HFFG: to the goal
        *_, terminated, _truncated, info = env.step(a)
    assert terminated and info["success"]
    board = env.render()
    assert env.step("Right") == (board, 0.0, True, False, {"success": True, "action_is_valid": False,
                                                           "action_is_effective": False})


def test_a_step_before_reset_is_invalid() -> None:
    env = make(id="Taxi-v4")
    assert env.step("South") == ("", 0.0, False, False, {"success": False, "action_is_valid": False,
                                                         "action_is_effective": False})


# ------------------------------------------------------------------------------------------------ success rules

def test_success_rules() -> None:
    walk = make(id="CliffWalking-v1")  # auto -> terminated: every reward is negative
    walk.reset(seed=0)
    steps = [walk.step(a) for a in ["Up"] + ["Right"] * 11 + ["Down"]]
    assert steps[-1][1] == -1.0 and steps[-1][2] and steps[-1][4]["success"]
    assert not any(s[4]["success"] for s in steps[:-1])
    for rule, expected in (("auto", False), ("positive_reward", False), ("terminated", True)):
        lake = make(id="FrozenLake-v1", kwargs={"is_slippery": False}, success=rule)
        lake.reset(seed=0)
        lake.step("Right")
        *_, terminated, _, info = lake.step("Down")  # (1, 1) is a hole
        assert terminated and info["success"] == expected, rule


class _Echo(gymnasium.Env[str, int]):
    """A text-observation env for the tests: the observation says which of three words was picked last."""

    metadata = {"render_modes": []}

    def __init__(self, words: tuple[str, ...] = ("alpha", "beta", "gamma")) -> None:
        self.words = words
        self.observation_space = spaces.Text(max_length=64)
        self.action_space = spaces.Discrete(len(words), start=1)
        self.picked = ""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.picked = self.words[int(self.np_random.integers(len(self.words)))]
        return f"start: {self.picked}", {}

    def step(self, action: int) -> tuple[str, float, bool, bool, dict[str, Any]]:
        done = self.words[action - 1] == "gamma"
        self.picked = self.words[action - 1]
        return f"picked {self.picked}", 1.0 if done else -1.0, done, False, {"is_success": done}


class _Floats(_Echo):
    def __init__(self) -> None:
        super().__init__()
        self.observation_space = spaces.Box(0.0, 1.0, (2,))


class _Steer(_Echo):
    def __init__(self) -> None:
        super().__init__()
        self.action_space = spaces.Box(-1.0, 1.0, (1,))


@pytest.fixture(scope="module", autouse=True)
def registered_test_envs() -> Any:
    """Registers the test envs above in gymnasium's registry, under the namespace ``ragen_test``."""
    ids = {"ragen_test/Echo-v0": _Echo, "ragen_test/Floats-v0": _Floats, "ragen_test/Steer-v0": _Steer}
    for env_id, cls in ids.items():
        gymnasium.register(env_id, entry_point=cls, max_episode_steps=5)
    yield
    for env_id in ids:
        del gymnasium.registry[env_id]


def test_a_text_observation_env_with_a_namespaced_id_and_numbered_actions(envs: Any) -> None:
    env = envs.make("gym.ragen_test/Echo-v0", {"action_names": ["Alpha", "Beta", "Gamma"], "success": "is_success",
                                               "instruction": "Pick gamma."})
    assert env.instruction == "Pick gamma." and env.max_actions_per_traj == 5
    obs, _ = env.reset(seed=4)
    assert obs.startswith("start: ") and env.state_key() == obs
    assert env.step("0")[4]["action_is_valid"] is False  # the actions are 1..3 (Discrete start=1)
    assert env.step("1")[:2] == ("picked alpha", -1.0)
    assert env.step("gamma")[:3] == ("picked gamma", 1.0, True) and env.step("beta")[4]["success"]
    check_env(lambda: envs.make("gymnasium", {"id": "ragen_test/Echo-v0"}))
    assert make(id="ragen_test/Echo-v0").action_names == ("1", "2", "3")
    assert "ragen_test/Echo-v0" in runnable_ids() and "ragen_test/Floats-v0" not in runnable_ids()


# ------------------------------------------------------------------------------------------------ option errors

@pytest.mark.parametrize("options, message", [
    ({"id": "FrozenLak-v1"}, r"id: must be a registered gymnasium id: 'FrozenLak-v1' .*did you mean 'FrozenLake-v1'"),
    ({"id": "Taxi-v9"}, r"version `v9` .* doesn't exist.*did you mean 'Taxi-v4'"),
    ({"id": "no_such_module:X-v0"}, r"importing 'no_such_module' failed: ModuleNotFoundError"),
    ({"id": "CartPole-v1"}, r"'CartPole-v1' cannot be shown as text: its observation space Box\(float32.*no 'ansi'"),
    ({"id": "ragen_test/Floats-v0"}, r"cannot be shown as text"),
    ({"id": "ragen_test/Steer-v0"}, r"action space Box\(float32, shape \(1,\)\), not Discrete"),
    ({"kwargs": {"map_nam": "8x8"}}, r"no keyword argument 'map_nam'; did you mean 'map_name'"),
    ({"kwargs": {"map_name": "9x9"}}, r"gymnasium.make\('FrozenLake-v1', \*\*\{'map_name': '9x9'\}\) failed: KeyError"),
    ({"kwargs": {"render_mode": "human"}}, r"kwargs: must be keyword arguments .* without render_mode"),
    ({"action_names": ["a", "b"]}, r"FrozenLake-v1 has 4 actions, got 2 names"),
    ({"action_names": ["a", "b", "c", "A"]}, r"action_names: must be a non-empty list of distinct names"),
    ({"action_names": ["1", "0", "x", "y"]}, r"the name '1' of action 0 reads as the number of action 1"),
    ({"success": "terminate"}, r"(?s)success: 'terminate' is not one of .*did you mean 'terminated'"),
    ({"max_actions_per_traj": 0}, r"max_actions_per_traj: must be an integer >= 1"),
    ({"instruction": "  "}, r"instruction: must be a non-blank string"),
    ({"sucess": "auto"}, r"(?s)unknown config key .*did you mean .*success"),
])
def test_bad_options_name_themselves(envs: Any, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        envs.make("gymnasium", options)


def test_the_config_check_makes_each_gymnasium_env_of_the_run_once(envs: Any, ragen_registries: Any) -> None:
    from ragen_core.config import load_config, resolve_config

    registries = ragen_registries()
    mix = "[gym.Taxi-v4, gym.CartPole-v1, {name: gymnasium, options: {kwargs: {map_nam: 4x4}}}]"
    resolved = resolve_config(load_config(None, [f"envs={mix}"]), registries, strict=False)
    assert plugin.ragen_check_config(resolved, registries) == [
        "env gym.CartPole-v1: env option id: gymnasium env 'CartPole-v1' cannot be shown as text: its observation "
        "space Box(float32, shape (4,)) is neither text nor integers, and its render modes (human, rgb_array) have no "
        "'ansi'",
        "env gymnasium: env option kwargs: FrozenLake-v1 takes no keyword argument 'map_nam'; did you mean 'map_name'?"]
    good = resolve_config(load_config(None, ["env=gym.Blackjack-v1"]), registries, strict=False)
    assert plugin.ragen_check_config(good, registries) == []


# ------------------------------------------------------------------------------------------------ ANSI text

@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x1b")))
def test_text_without_escapes_keeps_its_layout(text: str) -> None:
    expected = [re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "", line).rstrip()
                for line in text.replace("\r\n", "\n").split("\n")]
    while expected and not expected[0].strip():
        expected.pop(0)
    while expected and not expected[-1].strip():
        expected.pop()
    assert ansi_to_text(text) == "\n".join(expected)


@settings(max_examples=100, deadline=None)
@given(rows=st.integers(1, 6), cols=st.integers(1, 8), data=st.data())
def test_a_marked_cell_becomes_its_symbol_in_place(rows: int, cols: int, data: st.DataObject) -> None:
    grid = [data.draw(st.text(alphabet="SFHG.#", min_size=cols, max_size=cols)) for _ in range(rows)]
    r, c = data.draw(st.integers(0, rows - 1)), data.draw(st.integers(0, cols - 1))
    coloured = [row if i != r else f"{row[:c]}\x1b[41m{row[c]}\x1b[0m{row[c + 1:]}" for i, row in enumerate(grid)]
    expected = [row if i != r else row[:c] + "P" + row[c + 1:] for i, row in enumerate(grid)]
    assert ansi_to_text("\n" + "\n".join(coloured) + "\n", {"bg:red": Mark("you", "P")}) == "\n".join(expected)
    unknown = ansi_to_text("\n".join(coloured))
    assert unknown.split("\n")[:rows] == grid
    assert unknown.split("\n")[rows:] == [f"red background: {grid[r][c]!r} at line {r + 1}, column {c + 1}"]


def test_notes_styles_and_other_escapes() -> None:
    marks = {"fg:blue": Mark("passenger waiting at"), "fg:magenta": Mark("destination"), "bold": IGNORE,
             "bg:yellow": Mark("taxi", "T")}
    raw = "|\x1b[35mY\x1b[0m| : |\x1b[34;1mB\x1b[0m: |\x1b[43m \x1b[0m\x1b]0;title\x07\x1b[2K\r\n"
    assert ansi_to_text(raw, marks) == "|Y| : |B: |T\ndestination: Y\npassenger waiting at: B"
    assert [ch for ch, _ in styled_lines("a\x1b[1;31mb\x1b[22mc\x1b[39md")[0]] == list("abcd")
    styles = [s for _, s in styled_lines("a\x1b[1;31mb\x1b[22mc\x1b[39md\x1b[38;5;200me\x1b[48;2;1;2;3mf")[0]]
    assert styles[:4] == [frozenset(), {"bold", "fg:red"}, {"fg:red"}, frozenset()]
    assert styles[4:] == [{"fg:colour200"}, {"fg:colour200", "bg:#010203"}]
    assert describe_style(frozenset({"fg:blue", "bold"})) == "bold blue text"
    assert describe_style(frozenset({"fg:blue", "bg:bright-green"})) == "blue text on bright-green background"


# ------------------------------------------------------------------------------------------------ the listing

def test_the_screen_reads_render_modes_and_observation_spaces() -> None:
    assert screen_source('metadata = {"render_modes": ["ansi"]}')
    assert screen_source("self.observation_space = spaces.Tuple((Discrete(2), Discrete(3)))")
    assert screen_source("observation_space: Any = Text(10)")
    assert not screen_source("self.observation_space = spaces.Box(0, 1)\nself.action_space = Discrete(2)")
    assert not screen_source("def broken(:")


def test_listing_imports_no_optional_package_module() -> None:
    code = ("import sys\nseen = []\nclass Spy:\n    def find_spec(self, name, path=None, target=None):\n"
            "        seen.append(name)\nsys.meta_path.insert(0, Spy())\n"
            "from ragen_plugins_gymnasium.listing import runnable_ids\nids = runnable_ids()\n"
            "heavy = ('mujoco', 'Box2D', 'jax', 'gymnasium.envs.mujoco', 'gymnasium.envs.box2d', "
            "'gymnasium.envs.phys2d', 'gymnasium.envs.tabular', 'gymnasium.envs.classic_control')\n"
            "print([n for n in seen if n.startswith(heavy)], len(ids))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["[]", str(len(LISTED))], out.stdout


def test_the_known_games_name_every_action() -> None:
    for entry_point, game in GAMES.items():
        module, _, name = entry_point.partition(":")
        cls = getattr(__import__(module, fromlist=[name]), name)
        env_id = next(i for i, s in gymnasium.registry.items() if s.entry_point == entry_point)
        assert cls is type(gymnasium.make(env_id).unwrapped)
        assert len(game.action_names) == gymnasium.make(env_id).action_space.n


# ------------------------------------------------------------------------------------------------ training

@pytest.mark.slow
def test_two_training_steps_of_the_tiny_model(tmp_path: Path, one_torch_thread: None) -> None:
    from tests.hubs.tiny_run import train_two_steps

    metrics, samples = train_two_steps(tmp_path / "run", "envs=[{name: gym.FrozenLake-v1, groups: 2, options: "
                                       "{kwargs: {is_slippery: false}}}]", "rollout.max_turn=2")
    assert metrics[2]["rollout/samples"] == 4
    assert samples and all(s["env"] == "gym.FrozenLake-v1" for s in samples)
    assert all(s["turns"][0]["observation"] == "PFFF\nFHFH\nFFFH\nHFFG" for s in samples)  # the 4x4 map, P at S
    assert "val/gym.FrozenLake-v1/success" in metrics[0] and "train/gym.FrozenLake-v1/success" in metrics[2]
