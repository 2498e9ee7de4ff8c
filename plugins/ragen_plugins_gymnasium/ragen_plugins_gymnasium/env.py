"""The ``gymnasium`` env: any registered gymnasium env with a Discrete action space, shown to the model as text.

What the model sees, by the first rule that applies:

1. the observation itself, when the env's observation space holds strings (``gymnasium.spaces.Text``);
2. the env's ``"ansi"`` render, colour escapes turned into plain text that keeps the grid layout
   (:func:`ragen_plugins_gymnasium.ansi.ansi_to_text`: for the toy-text games a coloured tile becomes a symbol, e.g.
   FrozenLake's player ``P``, and coloured letters become note lines, e.g. Taxi's ``destination: Y``);
3. an observation made of integers (``Discrete``, ``MultiDiscrete``, ``MultiBinary`` or a ``Tuple`` of them), as
   text: ``Observation: (14, 10, 0)``, or a sentence for a game the adapter knows (Blackjack).

An env with none of these (CartPole's ``Box`` of floats and no "ansi" render) is refused when it is made, with the
reason. Actions are the Discrete action's name (case-insensitive, surrounding spaces ignored) or its integer value;
anything else is invalid: reward ``invalid_action_reward`` (0.0), ``action_is_valid=False``, the state unchanged,
never an exception. Rewards, ``terminated`` and ``truncated`` are gymnasium's own. Seeds go to gymnasium's
``reset(seed=...)``, so the same seed and actions give gymnasium's own episode.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import attrs
import gymnasium
from gymnasium import spaces

from ragen_core.env import TextEnv
from ragen_core.errors import ConfigError, suggest
from ragen_core.validators import constraint, integer, number, one_of
from ragen_plugins_gymnasium.ansi import ansi_to_text
from ragen_plugins_gymnasium.games import Game, game_for

__all__ = ["DEFAULT_MAX_ACTIONS", "GymnasiumConfig", "GymnasiumEnv", "find_spec", "observation_mode"]

#: actions per trajectory when neither the config nor the env's spec (``max_episode_steps``) gives a limit
DEFAULT_MAX_ACTIONS = 100
#: keyword arguments of ``gymnasium.make`` that the adapter sets itself
_OWN_KWARGS = {"render_mode": "the adapter picks it", "max_episode_steps": "use max_actions_per_traj",
               "disable_env_checker": "the adapter disables it"}
_SUCCESS = ("auto", "positive_reward", "terminated", "is_success")
_INTEGER_SPACES = (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


def find_spec(env_id: str) -> gymnasium.envs.registration.EnvSpec:
    """The gymnasium spec of ``env_id`` (``"Name-vN"``, ``"namespace/Name-vN"``, or ``"module:Name-vN"`` to import
    ``module`` first, as ``gymnasium.make`` does).

    :raises ValueError: ``'id' must be a registered gymnasium id: ...`` with gymnasium's reason and the nearest
        registered id.
    """
    if not isinstance(env_id, str) or not env_id.strip():
        raise ValueError(f"'id' must be a registered gymnasium id (a non-empty string): {env_id!r}")
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any failure of the user's module is reported the same way
            raise ValueError(f"'id' must be a registered gymnasium id: {env_id!r} (importing {module!r} failed: "
                             f"{type(exc).__name__}: {exc})") from None
    try:
        return gymnasium.spec(name)
    except gymnasium.error.Error as exc:
        close = suggest(name, list(gymnasium.registry))
        reason = re.sub(r"\s*Did you mean:? .*$", "", str(exc), flags=re.S) if close else str(exc)
        hint = f" (did you mean {close!r}?)" if close else ""
        raise ValueError(f"'id' must be a registered gymnasium id: {name!r} ({reason}){hint}") from None


def _registered_id(_inst: Any, _attribute: Any, value: Any) -> None:
    """a registered gymnasium id ("Name-vN", "namespace/Name-vN", or "module:Name-vN" to import a module first)"""
    find_spec(value)


def _distinct_names(value: Any) -> bool:
    keys = [v.casefold() for v in value]
    return bool(value) and all(v == v.strip() and v for v in value) and len(set(keys)) == len(keys)


def _own_kwargs_absent(value: Any) -> bool:
    return isinstance(value, Mapping) and all(isinstance(k, str) for k in value) and not set(value) & set(_OWN_KWARGS)


@attrs.define
class GymnasiumConfig:
    """Options of :class:`GymnasiumEnv`.

    :ivar id: the gymnasium id to play (``FrozenLake-v1``, ``ns/Name-v0``, or ``module:Name-v0`` to import a module
        that registers it); the namespace ``gym.<id>`` sets it.
    :ivar kwargs: keyword arguments for ``gymnasium.make`` (the env class's options, e.g. ``{is_slippery: false}``).
    :ivar action_names: names of the Discrete actions in index order (default: the known names of the toy-text games,
        e.g. FrozenLake's Left, Down, Right, Up; otherwise the numbers ``0`` .. ``n-1``).
    :ivar max_actions_per_traj: actions one trajectory may take (default: the id's ``max_episode_steps``, else 100).
    :ivar success: ``positive_reward`` (the episode terminated on a positive reward), ``terminated`` (it terminated),
        ``is_success`` (gymnasium's ``info["is_success"]``), or ``auto`` (``terminated`` for CliffWalking, whose every
        reward is negative; ``positive_reward`` otherwise).
    :ivar instruction: the task shown in the system prompt (default: generated from the id, the rules of a known
        game and the action names).
    :ivar invalid_action_reward: the reward of an action that is not an action name or number (nothing happens).
    """

    id: str = attrs.field(default="FrozenLake-v1", validator=_registered_id)
    kwargs: dict[str, Any] = attrs.field(factory=dict, validator=constraint(
        "keyword arguments of the env class, without render_mode, max_episode_steps or disable_env_checker "
        "(the adapter sets those)", _own_kwargs_absent))
    action_names: list[str] | None = attrs.field(default=None, validator=attrs.validators.optional(constraint(
        "a non-empty list of distinct names (ignoring case) without surrounding spaces", _distinct_names)))
    max_actions_per_traj: int | None = attrs.field(default=None, validator=attrs.validators.optional(integer(1)))
    success: Literal["auto", "positive_reward", "terminated", "is_success"] = attrs.field(
        default="auto", validator=one_of(*_SUCCESS))
    instruction: str | None = attrs.field(default=None, validator=attrs.validators.optional(
        constraint("a non-blank string", lambda v: isinstance(v, str) and bool(v.strip()))))
    invalid_action_reward: float = attrs.field(default=0.0, validator=number())


def observation_mode(env: gymnasium.Env[Any, Any], render_modes: Any) -> str | None:
    """How the adapter shows ``env``'s state: ``"text"`` (string observations), ``"ansi"`` (its render), ``"value"``
    (integer observations), or None (none of them: the adapter cannot run it)."""
    space = env.observation_space
    if isinstance(space, spaces.Text) or getattr(space, "dtype", None) is str:
        return "text"
    if "ansi" in (render_modes or ()):
        return "ansi"
    return "value" if _integer_valued(space) else None


def _integer_valued(space: Any) -> bool:
    if isinstance(space, spaces.Tuple):
        return all(_integer_valued(s) for s in space.spaces)
    return isinstance(space, _INTEGER_SPACES)


def _plain(value: Any) -> Any:
    """An observation as plain Python data (numpy scalars and arrays to ints, floats and lists)."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (tuple, list)):
        return tuple(_plain(v) for v in value)
    return value


class GymnasiumEnv(TextEnv):
    """A registered gymnasium env played through text (see the module docstring)."""

    config_cls: ClassVar[type] = GymnasiumConfig
    config: GymnasiumConfig

    def __init__(self, config: GymnasiumConfig | None = None, render_mode: str | None = "ansi",
                 **options: Any) -> None:
        super().__init__(config, render_mode, **options)
        cfg = self.config
        spec = find_spec(cfg.id)
        self.env_id: str = spec.id
        self.game: Game | None = game_for(spec.entry_point)
        self.max_actions_per_traj = cfg.max_actions_per_traj or spec.max_episode_steps or DEFAULT_MAX_ACTIONS
        self._gym, modes = _make(spec, cfg, self.max_actions_per_traj)
        try:
            self._mode, self._values, self.action_names = _check_spaces(self._gym, spec.id, modes, cfg, self.game)
        except ConfigError:
            self._gym.close()
            raise
        self._by_name = {name.casefold(): value for name, value in zip(self.action_names, self._values)}
        self.legend = dict(self.game.legend) if self.game else {}
        self.instruction = cfg.instruction or _instruction(spec.id, self.game, self.action_names, self._values)
        rule = cfg.success if cfg.success != "auto" else (self.game.success if self.game else "positive_reward")
        self.success_rule: str = rule
        self.last_info: dict[str, Any] = {}
        self._text, self._key = "", ""
        self._started = self._terminated = self._truncated = self._success = False

    @property
    def gym_env(self) -> gymnasium.Env[Any, Any]:
        """The gymnasium env being played (made by ``gymnasium.make``, wrappers included)."""
        return self._gym

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start gymnasium's episode for ``seed`` (``options`` go to gymnasium's ``reset``)."""
        super().reset(seed=seed)
        obs, info = self._gym.reset(seed=seed, options=options)
        self._observe(obs)
        self.last_info = dict(info)
        self._terminated = self._truncated = self._success = False
        self._started = True
        return self._text, self._info(valid=True, effective=False)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Play one action name or number through gymnasium; anything else (or any action after the episode
        ended, or before a reset) is invalid and changes nothing."""
        value = self._parse(action)
        if value is None or self._terminated or self._truncated or not self._started:
            penalty = 0.0 if self._terminated or self._truncated else float(self.config.invalid_action_reward)
            return self._text, penalty, self._terminated, self._truncated, self._info(valid=False, effective=False)
        before = self._key
        obs, reward, terminated, truncated, info = self._gym.step(value)
        self._observe(obs)
        self.last_info = dict(info)
        self._terminated, self._truncated = bool(terminated), bool(truncated)
        self._success = self._succeeded(float(reward), self.last_info)
        return self._text, float(reward), self._terminated, self._truncated, self._info(True, self._key != before)

    def render(self) -> str:
        """The state as the model sees it ("" before the first reset)."""
        return self._text

    def state_key(self) -> str:
        """gymnasium's observation (plain data, or the text itself): the same key for the same state, whatever the
        render adds (FrozenLake's and Taxi's line naming the last move)."""
        return self._key

    def close(self) -> None:
        """Close the gymnasium env."""
        self._gym.close()

    def _parse(self, action: Any) -> int | None:
        """The gymnasium action of a name or number, or None when it is neither."""
        if not isinstance(action, str):
            return None
        text = action.strip()
        if text.casefold() in self._by_name:
            return self._by_name[text.casefold()]
        number = re.fullmatch(r"(-?)0*([0-9]{1,18})", text)  # ASCII digits only; leading zeros are allowed
        if number and int(number.group(1) + number.group(2)) in self._values:
            return int(number.group(1) + number.group(2))
        return None

    def _observe(self, obs: Any) -> None:
        if self._mode == "text":
            self._text = str(obs)
        elif self._mode == "ansi":
            self._text = ansi_to_text(str(self._gym.render() or ""), self.game.marks if self.game else None)
        else:
            describe = self.game.describe if self.game else None
            self._text = describe(obs) if describe else f"Observation: {_plain(obs)}"
        plain = _plain(obs)
        self._key = plain if isinstance(plain, str) else f"{self.env_id}:{plain!r}"

    def _succeeded(self, reward: float, info: Mapping[str, Any]) -> bool:
        if self.success_rule == "is_success":
            return bool(info.get("is_success", False))
        if self.success_rule == "terminated":
            return self._terminated
        return self._terminated and reward > 0

    def _info(self, valid: bool, effective: bool) -> dict[str, Any]:
        return {"success": bool(self._success), "action_is_valid": valid, "action_is_effective": bool(effective)}


def _make(spec: Any, cfg: GymnasiumConfig, limit: int) -> tuple[gymnasium.Env[Any, Any], tuple[str, ...]]:
    """``gymnasium.make`` of ``spec`` with the config's kwargs and the "ansi" render when the class offers it;
    returns the env and the class's render modes. A failure is a :class:`ConfigError` naming the cause."""
    creator = spec.entry_point
    if isinstance(creator, str):
        try:
            creator = gymnasium.envs.registration.load_env_creator(creator)
        except Exception as exc:  # noqa: BLE001 - a missing optional package is the usual cause
            raise ConfigError(f"env option id: gymnasium id {spec.id!r} cannot be loaded from {spec.entry_point!r}: "
                              f"{type(exc).__name__}: {exc}",
                              hint="install the package that provides it (gymnasium's error above names it)") from exc
    modes = tuple(getattr(creator, "metadata", {}).get("render_modes", ()) or ())
    render = {"render_mode": "ansi"} if "ansi" in modes else {}
    try:
        env = gymnasium.make(spec, max_episode_steps=limit, disable_env_checker=True, **render, **cfg.kwargs)
    except TypeError as exc:
        bad = re.search(r"unexpected keyword argument '(\w+)'", str(exc))
        if bad is None:
            raise ConfigError(f"env option kwargs: gymnasium.make({spec.id!r}) failed: TypeError: {exc}") from exc
        raise _bad_kwarg(spec.id, creator, bad.group(1)) from exc
    except Exception as exc:  # noqa: BLE001 - a bad kwargs value fails inside the env class, in any way
        given = f", **{cfg.kwargs!r}" if cfg.kwargs else ""
        raise ConfigError(f"env option {'kwargs' if cfg.kwargs else 'id'}: gymnasium.make({spec.id!r}{given}) "
                          f"failed: {type(exc).__name__}: {exc}") from exc
    return env, modes


def _bad_kwarg(env_id: str, creator: Any, name: str) -> ConfigError:
    try:
        known = [p for p in inspect.signature(creator).parameters if p not in ("self", "render_mode", "kwargs")]
    except (TypeError, ValueError):
        known = []
    close = suggest(name, known) if known else None
    return ConfigError(f"env option kwargs: {env_id} takes no keyword argument {name!r}"
                       + (f"; did you mean {close!r}?" if close else ""),
                       hint=f"{env_id} takes: {', '.join(known)}" if known else None)


def _check_spaces(env: gymnasium.Env[Any, Any], env_id: str, modes: tuple[str, ...], cfg: GymnasiumConfig,
                  game: Game | None) -> tuple[str, tuple[int, ...], tuple[str, ...]]:
    """The observation mode, the action values and their names; a :class:`ConfigError` saying why when the env
    cannot be played through text."""
    mode = observation_mode(env, modes)
    if mode is None:
        raise ConfigError(
            f"env option id: gymnasium env {env_id!r} cannot be shown as text: its observation space "
            f"{_space_name(env.observation_space)} is neither text nor integers, and its render modes "
            f"({', '.join(modes) or 'none'}) have no 'ansi'",
            hint="the gymnasium adapter plays envs with a Text observation, an 'ansi' render or integer observations "
            "(Discrete, MultiDiscrete, MultiBinary, Tuple of those)")
    space = env.action_space
    if not isinstance(space, spaces.Discrete):
        raise ConfigError(f"env option id: gymnasium env {env_id!r} has the action space {_space_name(space)}, not "
                          "Discrete",
                          hint="the gymnasium adapter plays envs whose actions are numbered (gymnasium.spaces.Discrete)")
    values = tuple(int(space.start) + i for i in range(int(space.n)))
    return mode, values, _action_names(env_id, cfg, game, values)


def _space_name(space: Any) -> str:
    """A space in a few words: ``Box(float32, shape (4,))`` rather than its bounds."""
    if isinstance(space, spaces.Box):
        return f"Box({space.dtype}, shape {space.shape})"
    text = str(space)
    return text if len(text) <= 80 else text[:77] + "..."


def _action_names(env_id: str, cfg: GymnasiumConfig, game: Game | None, values: tuple[int, ...]) -> tuple[str, ...]:
    """The configured names, a known game's, or the action numbers; names that read as numbers must be their own."""
    if cfg.action_names is not None:
        names = tuple(cfg.action_names)
        if len(names) != len(values):
            raise ConfigError(f"env option action_names: {env_id} has {len(values)} actions, got {len(names)} names "
                              f"{list(names)}", hint=f"name its actions {', '.join(map(str, values))} in order")
    else:
        names = game.action_names if game and len(game.action_names) == len(values) else tuple(map(str, values))
    for name, value in zip(names, values):
        if re.fullmatch(r"-?[0-9]+", name) and int(name) != value:
            raise ConfigError(f"env option action_names: the name {name!r} of action {value} reads as the number "
                              f"of action {int(name)}", hint="give actions names that are not numbers, or their own")
    return names


def _instruction(env_id: str, game: Game | None, names: tuple[str, ...], values: tuple[int, ...]) -> str:
    """The default instruction: the id, the rules of a known game, the actions."""
    rules = game.rules if game else ("Its state is shown as text after every action; act to collect as much reward "
                                     "as you can.")
    if [str(v) for v in values] == list(names):
        actions = f"Each action is one of the numbers {', '.join(names)}."
    else:
        actions = ("Each action is one of " + ", ".join(f"{n} ({v})" for n, v in zip(names, values))
                   + ": its name or its number.")
    return f"You are playing {env_id}, an environment of the gymnasium library. {rules} {actions}"

