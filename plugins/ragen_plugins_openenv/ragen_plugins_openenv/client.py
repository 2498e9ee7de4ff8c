"""OpenEnv's session protocol, spoken synchronously.

An OpenEnv server keeps one environment per WebSocket connection to ``/ws`` (its HTTP ``/reset`` and ``/step`` make a
fresh environment per request, so they cannot play an episode). Messages are JSON objects:

- ``{"type": "reset", "data": {"seed": 3}}`` and ``{"type": "step", "data": ACTION}`` are answered by
  ``{"type": "observation", "data": {"observation": {...}, "reward": float | null, "done": bool}}``;
- ``{"type": "state"}`` by ``{"type": "state", "data": {...}}``; ``{"type": "close"}`` ends the session;
- a failure by ``{"type": "error", "data": {"message": ..., "code": ...}}``.

:class:`Session` is that protocol over ``websockets``' synchronous client: one connection, no event loop or thread of
its own (a rollout holds one session per running episode), every wait bounded by a timeout. Every failure raises
:class:`~ragen_core.errors.EnvError` naming the server, so the rollout counts it against the episode alone.
``GET`` endpoints (``/schema``, ``/metadata``, ``/health``) are read by :func:`get_json`.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ragen_core.errors import EnvError

__all__ = ["API_KEY_ENV", "ServerError", "Session", "get_json", "headers_for"]

#: the environment variable holding the key of ``ragen env serve`` and of the ``remote`` env
API_KEY_ENV = "RAGEN_ENV_API_KEY"

#: the largest message a session accepts (an observation with a screenshot or a page fits)
MAX_MESSAGE_BYTES = 64 << 20


class ServerError(EnvError):
    """The server answered a message with an OpenEnv error (``code``: ``VALIDATION_ERROR``, ``EXECUTION_ERROR``,
    ``CAPACITY_REACHED``, ...); the session stays open."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def headers_for(key: str | None) -> dict[str, str]:
    """The request headers carrying ``key`` (``Authorization: Bearer KEY``), or none."""
    return {"Authorization": f"Bearer {key}"} if key else {}


def _base(url: str, scheme: str) -> str:
    parts = urllib.parse.urlsplit(url.rstrip("/"))
    if parts.scheme not in ("http", "https", "ws", "wss") or not parts.netloc:
        raise EnvError(f"not an OpenEnv server URL: {url!r}", hint="give http://HOST:PORT (or ws://HOST:PORT)")
    secure = parts.scheme in ("https", "wss")
    return urllib.parse.urlunsplit(((scheme + "s") if secure else scheme, parts.netloc, parts.path, "", ""))


def get_json(url: str, path: str, *, key: str | None = None, timeout: float = 10.0) -> dict[str, Any]:
    """``GET url + path`` as a JSON object; any failure raises :class:`EnvError` naming the URL."""
    target = _base(url, "http") + path
    request = urllib.request.Request(target, headers=headers_for(key))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = json.loads(response.read(MAX_MESSAGE_BYTES))
    except urllib.error.HTTPError as exc:
        hint = "the server wants a key: set the env's `key` option" if exc.code in (401, 403) else None
        raise EnvError(f"{target}: HTTP {exc.code} {exc.reason}", hint=hint) from None
    except (OSError, ValueError) as exc:
        raise EnvError(f"{target}: {type(exc).__name__}: {exc}",
                       hint="is the server running? (ragen env serve NAME, or the OpenEnv server's own command)") from None
    if not isinstance(data, dict):
        raise EnvError(f"{target}: expected a JSON object, got {type(data).__name__}")
    return data


def _last_words(ws: Any) -> Any:
    """The message a closing server sent before it closed, or None."""
    try:
        return json.loads(ws.recv(timeout=0))
    except Exception:  # noqa: BLE001 - nothing was left to read
        return None


class Session:
    """One OpenEnv session (one environment on the server) over a WebSocket; see the module docstring.

    :param url: the server, ``http://HOST:PORT`` (``ws://`` works too); the session connects on first use.
    :param key: sent as ``Authorization: Bearer KEY``.
    :param connect_timeout: seconds to open the connection.
    :param timeout: seconds to wait for each answer; a server that takes longer (or dies) fails the call.
    """

    def __init__(self, url: str, *, key: str | None = None, connect_timeout: float = 10.0,
                 timeout: float = 60.0) -> None:
        self.url = _base(url, "ws") + "/ws"
        self.key, self.connect_timeout, self.timeout = key, connect_timeout, timeout
        self._ws: Any = None

    def _connect(self) -> Any:
        from websockets.exceptions import InvalidStatus
        from websockets.sync.client import connect

        try:  # the connection is a context manager, entered here and exited by close()
            self._ws = connect(self.url, additional_headers=headers_for(self.key), open_timeout=self.connect_timeout,
                               max_size=MAX_MESSAGE_BYTES, close_timeout=1.0).__enter__()
        except InvalidStatus as exc:
            code = exc.response.status_code
            hint = "the server wants a key: set the env's `key` option" if code in (401, 403) else None
            raise EnvError(f"OpenEnv server {self.url} refused the session: HTTP {code}", hint=hint) from None
        except (OSError, TimeoutError) as exc:
            raise EnvError(f"OpenEnv server {self.url} is unreachable: {type(exc).__name__}: {exc}") from None
        return self._ws

    def request(self, kind: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one message and return the answer's ``data``; a failure closes the session and raises."""
        from websockets.exceptions import WebSocketException

        message: dict[str, Any] = {"type": kind} if data is None else {"type": kind, "data": data}
        ws = self._ws or self._connect()
        try:
            ws.send(json.dumps(message))
            answer = json.loads(ws.recv(timeout=self.timeout))
        except TimeoutError:
            self.close(polite=False)
            raise EnvError(f"OpenEnv server {self.url} did not answer {kind!r} within {self.timeout:g} s") from None
        except (WebSocketException, OSError, ValueError) as exc:
            answer = _last_words(ws)  # a server that refuses a session says why, then closes
            self.close(polite=False)
            if answer is None:
                raise EnvError(f"OpenEnv server {self.url} failed during {kind!r}: {type(exc).__name__}: {exc}"
                               ) from None
        if not isinstance(answer, dict) or not isinstance(answer.get("data"), dict):
            self.close(polite=False)
            raise EnvError(f"OpenEnv server {self.url} sent a malformed answer to {kind!r}: {str(answer)[:200]}")
        if answer.get("type") == "error":
            error = answer["data"]
            code = str(error.get("code", "?"))
            raise ServerError(f"OpenEnv server {self.url}: {error.get('message', 'error')} ({code})", code)
        return dict(answer["data"])

    def close(self, polite: bool = True) -> None:
        """End the session: tell the server and wait (a second at most) for it to close the connection, or, when
        ``polite`` is false (after a failure: the server may be hung or gone), drop the connection at once."""
        ws, self._ws = self._ws, None
        if ws is None:
            return
        if polite:
            try:
                ws.send(json.dumps({"type": "close"}))
                ws.recv(timeout=1.0)  # the server ends the session by closing the connection: wait for it to say so
            except Exception:  # noqa: BLE001 - closed (as expected), or already gone
                pass
        else:
            ws.close_timeout = 0
        try:
            ws.__exit__(None, None, None)
        except Exception:  # noqa: BLE001
            pass
