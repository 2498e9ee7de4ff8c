"""Envs that live in another process: ``openenv`` (any OpenEnv server, by URL) and ``remote`` (a ragen env served by
``ragen env serve``).

Each episode is one OpenEnv session (:class:`~.client.Session`): opened at ``reset``, closed when the rollout closes
the env. Every wait is bounded (``connect_timeout``, ``timeout``); a server that fails, hangs or dies raises
:class:`~ragen_core.errors.EnvError` from ``reset``/``step``, which costs the episode using it (counted as
``rollout/env_errors``), never the run. The key, when the server wants one, is read from the environment variable
named by ``key_env`` (default ``RAGEN_ENV_API_KEY``), so it never lands in a run's ``config.yaml``.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import attrs

from ragen_core.env import TextEnv
from ragen_core.errors import EnvError
from ragen_core.validators import integer

from .client import ServerError, Session, get_json

__all__ = ["OpenEnvConfig", "OpenEnvEnv", "RemoteConfig", "RemoteEnv"]

_URL = attrs.validators.matches_re(r"(https?|wss?)://[^\s/]+(/\S*)?")
_POSITIVE = attrs.validators.gt(0.0)
_INVALID = {"success": False, "action_is_valid": False, "action_is_effective": False}


@attrs.define
class _Connection:
    """Where the server is and how long to wait for it.

    :ivar url: the server, ``http://HOST:PORT`` (``https://``, ``ws://`` and ``wss://`` too).
    :ivar key_env: the environment variable holding the server's key (sent as ``Authorization: Bearer KEY``), so
        the key never lands in a run's config.yaml; unset or empty: no key.
    :ivar connect_timeout: seconds to open a session.
    :ivar timeout: seconds to wait for each answer; a server that takes longer, or dies, fails the episode.
    """

    url: str = attrs.field(default="http://127.0.0.1:8100", validator=_URL)
    key_env: str = "RAGEN_ENV_API_KEY"
    connect_timeout: float = attrs.field(default=10.0, converter=float, validator=_POSITIVE)
    timeout: float = attrs.field(default=60.0, converter=float, validator=_POSITIVE)


@attrs.define
class OpenEnvConfig(_Connection):
    """Any OpenEnv server.

    :ivar action_field: the action field that gets the answer text, converted to the field's JSON type; None: the
        action schema's only required field (read from ``/schema``).
    :ivar observation_field: the observation field shown to the model; None: ``text``, ``prompt``, ``message`` or
        ``observation`` when one is a string, else the whole observation as JSON.
    :ivar success_field: a boolean observation field meaning success at the end; None: ``success`` when the
        observation has it, else a positive final reward.
    :ivar instruction: the task, as the system prompt tells it (an OpenEnv server does not say).
    :ivar max_actions: actions one trajectory may take.
    :ivar invalid_reward: the reward of an answer that cannot be converted or that the server's schema refuses.
    :ivar reset_options: extra fields sent with every reset (beside the seed).
    """

    action_field: str | None = None
    observation_field: str | None = None
    success_field: str | None = None
    instruction: str = "Act in the environment to complete its task."
    max_actions: int = attrs.field(default=20, validator=integer(1))
    invalid_reward: float = attrs.field(default=-0.1, converter=float)
    reset_options: dict[str, Any] = attrs.field(factory=dict)


_TEXT_FIELDS = ("text", "prompt", "message", "observation")


def _mapping(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (a server may send anything)."""
    return value if isinstance(value, dict) else {}


def _obs(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer's observation (an empty one when the server sent none)."""
    return _mapping(answer.get("observation"))
_COERCE = {"integer": int, "number": float}


def _coerce(text: str, kind: str | None) -> Any:
    """The answer text as the action field's JSON type wants it; ValueError when it cannot be."""
    text = text.strip()
    if kind in _COERCE:
        value = _COERCE[kind](text)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(text)
        return value
    if kind == "boolean":
        return {"true": True, "false": False}[text.lower()]
    if kind in ("object", "array"):
        return json.loads(text)
    return text


class OpenEnvEnv(TextEnv):
    """Any OpenEnv server as a ragen env (see the module docstring and :class:`OpenEnvConfig`)."""

    config_cls = OpenEnvConfig

    def __init__(self, config: Any = None, render_mode: str | None = "ansi", **options: Any) -> None:
        super().__init__(config, render_mode, **options)
        self.instruction = getattr(self.config, "instruction", "")
        self.action_names = None
        self.legend = {}
        self.max_actions_per_traj = getattr(self.config, "max_actions", 20)
        self._session: Session | None = None
        self._last = ""
        self._done = False
        self._field: tuple[str, str | None] | None = None

    # -- the connection -------------------------------------------------------------------------------------

    def _key(self) -> str | None:
        return os.environ.get(self.config.key_env) or None if self.config.key_env else None

    def _open(self) -> Session:
        if self._session is None:
            self._session = Session(self.config.url, key=self._key(), connect_timeout=self.config.connect_timeout,
                                    timeout=self.config.timeout)
        return self._session

    def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()

    # -- the episode --------------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        data = {**self._reset_data(), **({"seed": int(seed)} if seed is not None else {})}
        answer = self._open().request("reset", data)
        self._done = bool(answer.get("done", False))
        self._last = self._read(answer)
        return self._last, {"success": False, "action_is_valid": True, "action_is_effective": True}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._done or self._session is None:
            return self._last, 0.0, self._done, False, dict(_INVALID)
        try:
            payload = self._payload(action if isinstance(action, str) else "")
        except (ValueError, KeyError, TypeError):
            return self._last, self._invalid_reward(), False, False, dict(_INVALID)
        try:
            answer = self._session.request("step", payload)
        except ServerError as exc:
            if exc.code != "VALIDATION_ERROR":  # the server's schema refused the action: invalid, not a failure
                raise
            return self._last, self._invalid_reward(), False, False, dict(_INVALID)
        self._last = self._read(answer)
        terminated, truncated = self._ending(answer)
        self._done = terminated or truncated
        reward = float(answer.get("reward") or 0.0)
        info = {"success": self._success(answer, reward) if terminated else False, "action_is_valid": True,
                "action_is_effective": True, **self._info(answer)}
        return self._last, reward, terminated, truncated, info

    def render(self) -> str:
        return self._last

    # -- what a generic OpenEnv server means ----------------------------------------------------------------

    def _invalid_reward(self) -> float:
        return float(self.config.invalid_reward)

    def _reset_data(self) -> dict[str, Any]:
        return dict(self.config.reset_options)

    def _payload(self, text: str) -> dict[str, Any]:
        name, kind = self._action_field()
        return {name: _coerce(text, kind)}

    def _action_field(self) -> tuple[str, str | None]:
        """The action field and its JSON type: the configured one, else the schema's only required field."""
        if self._field is None:
            schema = get_json(self.config.url, "/schema", key=self._key(), timeout=self.config.timeout)
            action = _mapping(schema.get("action"))
            props = _mapping(action.get("properties"))
            name = self.config.action_field
            if name is None:
                required = [r for r in action.get("required", []) if r != "metadata"]
                if len(required) != 1:
                    raise EnvError(f"{self.config.url}: cannot tell which action field takes the answer (required "
                                   f"fields: {required or 'none'})", hint="set the env option action_field")
                name = required[0]
            elif props and name not in props:
                raise EnvError(f"{self.config.url}: the action has no field {name!r}",
                               hint=f"its fields: {', '.join(sorted(props))}")
            self._field = (name, _mapping(props.get(name)).get("type"))
        return self._field

    def _read(self, answer: dict[str, Any]) -> str:
        obs = _obs(answer)
        name = self.config.observation_field
        if name is not None:
            value = obs.get(name, "")
            return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        for field in _TEXT_FIELDS:
            if isinstance(obs.get(field), str):
                return str(obs[field])
        return json.dumps(obs, sort_keys=True, default=str)

    def _ending(self, answer: dict[str, Any]) -> tuple[bool, bool]:
        return bool(answer.get("done", False)), False

    def _success(self, answer: dict[str, Any], reward: float) -> bool:
        obs = _obs(answer)
        field = self.config.success_field or ("success" if "success" in obs else None)
        return bool(obs.get(field)) if field else reward > 0

    def _info(self, answer: dict[str, Any]) -> dict[str, Any]:
        return {}


@attrs.define
class RemoteConfig(_Connection):
    """A ragen env served by ``ragen env serve``.

    :ivar env: the served env's name, checked at reset (a server serving another env fails the episode); None: any.
    """

    env: str | None = attrs.field(default=None, validator=attrs.validators.optional(
        attrs.validators.matches_re(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")))


class RemoteEnv(OpenEnvEnv):
    """A ragen env served by ``ragen env serve`` in another process or machine, used exactly like a local one: its
    instruction, action names, legend and action budget come with the first reset, its info and state keys with
    every step, its terminated and truncated stay apart."""

    config_cls = RemoteConfig  # type: ignore[assignment]  # the connection options, without the generic ones

    def __init__(self, config: Any = None, render_mode: str | None = "ansi", **options: Any) -> None:
        super().__init__(config, render_mode, **options)
        self.instruction = f"(the instruction of the served env {self.config.env or ''} comes with its first reset)"
        self.max_actions_per_traj = 10
        self._key_of_state: str | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        TextEnv.reset(self, seed=seed)
        answer = self._open().request("reset", {"seed": int(seed)} if seed is not None else {})
        obs = _obs(answer)
        self._adopt(obs.get("prompt"))
        self._done, self._last = False, self._read(answer)
        self._key_of_state = obs.get("state_key")
        return self._last, {"success": False, "action_is_valid": True, "action_is_effective": True,
                            **_mapping(obs.get("info"))}

    def _adopt(self, prompt: Any) -> None:
        if not isinstance(prompt, dict):
            raise EnvError(f"{self.config.url} is not a ragen env server (its reset carries no prompt)",
                           hint="serve the env with `ragen env serve NAME`; for any other OpenEnv server use "
                                "`env: openenv`")
        if self.config.env is not None and prompt.get("env") != self.config.env:
            raise EnvError(f"{self.config.url} serves the env {prompt.get('env')!r}, not {self.config.env!r}")
        self.instruction = str(prompt.get("instruction") or "")
        names = prompt.get("action_names")
        self.action_names = tuple(str(n) for n in names) if isinstance(names, list) and names else None
        legend = prompt.get("legend")
        self.legend = {str(k): str(v) for k, v in legend.items()} if isinstance(legend, dict) else {}
        self.max_actions_per_traj = int(prompt.get("max_actions_per_traj") or 10)

    def _payload(self, text: str) -> dict[str, Any]:
        return {"text": text}

    def _invalid_reward(self) -> float:
        return 0.0  # the served env judges its actions; only an oversized text is refused before it

    def _read(self, answer: dict[str, Any]) -> str:
        obs = _obs(answer)
        self._key_of_state = obs.get("state_key") if isinstance(obs.get("state_key"), str) else None
        return str(obs.get("text", ""))

    def _ending(self, answer: dict[str, Any]) -> tuple[bool, bool]:
        obs = _obs(answer)
        done, truncated = bool(answer.get("done", False)), bool(obs.get("truncated", False))
        return done and not truncated, truncated

    def _success(self, answer: dict[str, Any], reward: float) -> bool:
        return bool(self._info(answer).get("success", False))

    def _info(self, answer: dict[str, Any]) -> dict[str, Any]:
        obs = _obs(answer)
        return dict(_mapping(obs.get("info")))

    def state_key(self) -> str:
        return self._key_of_state if self._key_of_state is not None else self._last

