"""``ragen env serve NAME``: any registered ragen env behind OpenEnv's own server.

The env is wrapped as an OpenEnv ``Environment`` (:class:`ServedEnv`) and served by ``openenv-core``'s FastAPI app,
so the protocol is OpenEnv's exactly: sessions over the WebSocket ``/ws`` (one env per connection, up to
``--max-sessions`` at once, idle ones reaped after ``--session-timeout``), ``/schema``, ``/metadata``, ``/health``.
OpenEnv's own clients can play a served env, and so can ragen's ``remote`` env.

The action is ``{"text": ...}`` (the answer the rollout parsed, as a ragen env takes it). The observation carries
what the env returned: ``text``, ``info`` (JSON-safe), ``truncated`` (``done`` is terminated or truncated), the
env's ``state_key``, and at reset its ``prompt``: ``env`` (the served name), ``instruction``, ``action_names``,
``legend`` and ``max_actions_per_traj``. An env that raises answers an OpenEnv error for that session only.

Binds 127.0.0.1 by default. With a key (``--api-key`` or ``$RAGEN_ENV_API_KEY``) every route but ``/health`` wants
``Authorization: Bearer KEY``: HTTP answers 401, a WebSocket handshake 403.
"""

from __future__ import annotations

import functools
import hmac
import json
import socket
import uuid
from collections.abc import Callable
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field

__all__ = ["KeyMiddleware", "RagenAction", "RagenObservation", "ServedEnv", "build_app", "jsonable", "prompt_of"]



class RagenAction(Action):
    """One action for a served ragen env: the text the env's ``step`` takes."""

    text: str = Field(description="the action, as the env's step takes it (an action name, an answer, a program)",
                      max_length=1 << 20)


class RagenObservation(Observation):
    """What a served ragen env returned (``reward`` and ``done`` are OpenEnv's own fields)."""

    text: str = Field(default="", description="the observation (the env's rendered state)")
    info: dict[str, Any] = Field(default_factory=dict, description="the env's info: success, action_is_valid, ...")
    truncated: bool = Field(default=False, description="the episode was cut (done is terminated or truncated)")
    state_key: str | None = Field(default=None, description="the env's key of the current state")
    prompt: dict[str, Any] | None = Field(default=None, description="at reset: env, instruction, action_names, "
                                                                      "legend, max_actions_per_traj")


def jsonable(value: Any) -> Any:
    """``value`` as JSON data: numpy scalars become numbers, anything else unknown its ``str``."""
    def default(x: Any) -> Any:
        item = getattr(x, "item", None)
        return item() if callable(item) else str(x)

    return json.loads(json.dumps(value, default=default))


def prompt_of(env: Any, name: str) -> dict[str, Any]:
    """The prompt metadata a client needs to show the env to a model as a local one is shown."""
    names = getattr(env, "action_names", None)
    return {"env": name, "instruction": str(getattr(env, "instruction", "") or ""),
            "action_names": list(names) if names else None,
            "legend": {str(k): str(v) for k, v in dict(getattr(env, "legend", {}) or {}).items()},
            "max_actions_per_traj": int(getattr(env, "max_actions_per_traj", 10))}


def _state_key(env: Any) -> str | None:
    fn = getattr(env, "state_key", None)
    try:
        return str(fn()) if callable(fn) else None
    except Exception:  # noqa: BLE001 - a failing key: the client falls back to the observation text
        return None


class ServedEnv(Environment):
    """One session's ragen env, as an OpenEnv ``Environment``."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, make: Callable[[], Any], name: str) -> None:
        super().__init__()
        self._env, self._name = make(), name
        self._state = State(episode_id=None, step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **_: Any) -> RagenObservation:
        obs, info = self._env.reset(seed=seed)
        self._state = State(episode_id=episode_id or uuid.uuid4().hex, step_count=0)
        return RagenObservation(text=str(obs), info=jsonable(dict(info or {})), state_key=_state_key(self._env),
                                prompt=prompt_of(self._env, self._name), done=False, reward=None)

    def step(self, action: Any, timeout_s: float | None = None, **_: Any) -> RagenObservation:
        obs, reward, terminated, truncated, info = self._env.step(action.text)
        self._state.step_count += 1
        return RagenObservation(text=str(obs), info=jsonable(dict(info or {})), truncated=bool(truncated),
                                state_key=_state_key(self._env), done=bool(terminated or truncated),
                                reward=float(reward))

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        close = getattr(self._env, "close", None)
        if callable(close):
            close()

    def get_metadata(self) -> EnvironmentMetadata:
        import ragen_core

        return EnvironmentMetadata(name=self._name, version=ragen_core.__version__,
                                   description=f"the ragen env {self._name!r}, served by ragen env serve")


class KeyMiddleware:
    """ASGI middleware: every route but ``/health`` wants ``Authorization: Bearer KEY`` (HTTP: 401; a WebSocket
    handshake: closed before it is accepted, which the client sees as HTTP 403)."""

    def __init__(self, app: Any, key: str) -> None:
        self.app, self.key = app, f"Bearer {key}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and scope.get("path") != "/health":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.key):
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                body = b'{"detail": "missing or wrong key (Authorization: Bearer KEY)"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def build_app(make: Callable[[], Any], name: str, *, max_sessions: int = 64, session_timeout: float | None = 600.0,
              key: str | None = None) -> Any:
    """OpenEnv's FastAPI app serving env ``name`` (each session gets ``make()``), behind the key when given."""
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.types import ConcurrencyConfig

    app = create_fastapi_app(functools.partial(ServedEnv, make, name), RagenAction, RagenObservation,
                             concurrency_config=ConcurrencyConfig(max_concurrent_envs=max_sessions,
                                                                  session_timeout=session_timeout))
    return KeyMiddleware(app, key) if key else app


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one), so the address is known before serving."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock
