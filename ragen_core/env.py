"""The environment contract.

A ragen env is a :class:`gymnasium.Env` whose observations and actions are strings:

- ``reset(seed=None, options=None) -> (observation: str, info: dict)``; the same seed gives the same episode;
- ``step(action: str) -> (observation, reward: float, terminated: bool, truncated: bool, info: dict)``;
- ``info`` always holds ``success``, ``action_is_valid`` and ``action_is_effective`` (bools); any other numeric
  ``info`` entry becomes a metric;
- an action the env cannot use (unknown name, malformed text, out of range) is *invalid*: the env returns its
  documented invalid-action reward, ``action_is_valid=False`` and leaves the state unchanged — it never raises;
- ``render()`` returns the current state as text.

It also carries what the prompt needs: ``instruction`` (the task in one paragraph), ``action_names`` (the valid
action names, or ``None`` for free-form actions such as an answer or a program), ``legend`` (symbol → meaning for
the rendered state) and ``max_actions_per_traj``. Optional methods: ``oracle_action()`` (an action a known-good
policy takes now, or None when there is none) and ``state_key()`` (a hashable key of the current state, for
estimators that group identical states, such as GiGPO; without it the rollout keys a turn by its observation text,
so define it when two different states can render alike or one state can render differently).

How its rollouts should be shaped (turns, actions per turn, the per-turn token budget) is the env's to say too: a
:class:`~ragen_core.registry.RolloutHints` given at registration (``registry.register(..., hints=...)``, read
without importing the env) or, failing that, the class attribute ``rollout_hints``.

:class:`TextEnv` is a convenient base class implementing the plumbing; any gymnasium env that follows the contract
works (``ragen_core.checks.check_env`` verifies it).
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium import spaces

from ragen_core.registry import NoOptions, RolloutHints

__all__ = ["REQUIRED_INFO_KEYS", "TextEnv", "TextSpace", "register_gymnasium_envs"]

REQUIRED_INFO_KEYS = ("success", "action_is_valid", "action_is_effective")


class TextSpace(spaces.Space[str]):
    """Any Python string of at most ``max_length`` characters (gymnasium's ``Text`` limits the charset).

    ``sample()`` draws printable ASCII; ``contains`` accepts any ``str`` within the length.
    """

    def __init__(self, max_length: int = 1 << 20, seed: int | None = None) -> None:
        self.max_length = max_length
        super().__init__(shape=None, dtype=str, seed=seed)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        n = int(self.np_random.integers(0, min(self.max_length, 64) + 1))
        chars = np.array(list(string.printable))
        return "".join(self.np_random.choice(chars, size=n))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, TextSpace) and other.max_length == self.max_length


class TextEnv(gymnasium.Env[str, str]):
    """Base class for ragen envs: text in, text out, config as an attrs instance.

    Subclasses set ``config_cls`` (an attrs class with the env's options and defaults), the prompt metadata, and
    implement ``reset``/``step``/``render`` (calling ``super().reset(seed=seed)`` first so ``self.np_random`` is
    seeded). Construct with ``Env(config)`` or ``Env(**options)``.
    """

    config_cls: ClassVar[type] = NoOptions
    metadata: dict[str, Any] = {"render_modes": ["ansi"]}  # an instance variable in gymnasium.Env

    #: the task, shown in the system prompt
    instruction: str = ""
    #: valid action names, or None when actions are free-form text
    action_names: tuple[str, ...] | None = None
    #: symbol -> meaning for the rendered state
    legend: Mapping[str, str] = {}
    #: how many actions one trajectory may take
    max_actions_per_traj: int = 10
    #: how rollouts of this env should be shaped, used when the registration gives no ``hints`` (None: no opinion)
    rollout_hints: ClassVar[RolloutHints | None] = None

    def __init__(self, config: Any = None, render_mode: str | None = "ansi", **options: Any) -> None:
        if config is None:
            from ragen_core.config import structure

            config = structure(self.config_cls, options, type(self).__name__)
        elif options:
            raise TypeError("pass either a config object or keyword options, not both")
        self.config = config
        self.render_mode = render_mode
        self.observation_space = TextSpace()
        self.action_space = TextSpace()

    def oracle_action(self) -> str | None:
        """The action a known-good policy takes in the current state, or None (no oracle / episode over)."""
        return None

    def state_key(self) -> str:
        """A key equal for identical states (default: the rendered state)."""
        return str(self.render())


def register_gymnasium_envs(registries: Any = None, namespace: str = "ragen") -> list[str]:
    """Register every ragen env and variant with gymnasium as ``"{namespace}/{name}"``.

    After ``ragen_core.env.register_gymnasium_envs()``, ``gymnasium.make("ragen/sokoban")`` works (the env is
    wrapped in gymnasium's ``TimeLimit`` at its ``max_actions_per_traj``). ``registries`` defaults to those of a
    freshly built plugin manager. Keyword arguments to ``gymnasium.make`` are env options. Returns the ids.
    """
    if registries is None:
        from ragen_core.plugins import build_plugin_manager, collect_registries

        registries = collect_registries(build_plugin_manager())
    ids = []
    for name in registries.envs.names():
        env_id = f"{namespace}/{name}"
        if env_id in gymnasium.registry:
            del gymnasium.registry[env_id]
        gymnasium.register(id=env_id, entry_point=_GymFactory(registries.envs, name), disable_env_checker=True)
        ids.append(env_id)
    return ids


class _GymFactory:
    """Picklable-enough callable that makes a registered env for ``gymnasium.make``."""

    def __init__(self, envs: Any, name: str) -> None:
        self.envs, self.name = envs, name

    def __call__(self, render_mode: str | None = None, **options: Any) -> gymnasium.Env:
        env = self.envs.make(self.name, options)
        if render_mode is not None:
            env.render_mode = render_mode
        limit = getattr(env, "max_actions_per_traj", None)
        return gymnasium.wrappers.TimeLimit(env, int(limit)) if limit else env
