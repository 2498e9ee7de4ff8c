"""HTTP client of the retrieval server (standard library only), with a timeout and bounded retries.

:class:`RetrievalClient` sends ``POST /retrieve`` and ``GET /health`` (contract: :mod:`.server`). Each request is
tried at most ``1 + retries`` times: a connection failure (refused, reset, DNS), a timeout (no answer within
``timeout`` seconds) or a ``5xx`` answer is retried after ``backoff * 2**attempt`` seconds; a ``4xx`` answer or a
malformed ``200`` body is not (retrying would not help). When the tries are spent a :class:`RetrievalError` says
what failed, how many times, and the URL. So a server that is down costs about ``backoff * (2**retries - 1)``
seconds, and a server that hangs about ``(1 + retries) * timeout`` plus that, never more.

Connections are kept alive per thread (HTTP/1.1); the client is safe to share between threads.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragen_core.errors import RagenError

__all__ = ["RetrievalClient", "RetrievalError", "SearchResult"]


class RetrievalError(RagenError):
    """The retrieval server could not answer (down, too slow, or it rejected the request).

    :ivar status: the HTTP status of the last answer, or None when there was none (connection failure, timeout).
    :ivar attempts: how many tries were made.
    """

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.attempts = attempts


@dataclass(frozen=True)
class SearchResult:
    """One hit as the client sees it."""

    id: str
    title: str
    content: str
    score: float


class _Transient(Exception):
    """A failure worth retrying."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RetrievalClient:
    """Talk to a retrieval server at ``url`` (e.g. ``http://127.0.0.1:8001``, ``ragen retrieval-serve``'s default port).

    :param url: the server's base URL (``http://`` only; a trailing slash is ignored).
    :param timeout: seconds to wait to connect and for each read.
    :param retries: extra tries after the first (0: no retry).
    :param backoff: seconds before the first retry; doubled after each.
    """

    def __init__(self, url: str, *, timeout: float = 10.0, retries: int = 2, backoff: float = 0.1) -> None:
        parsed = urllib.parse.urlsplit(url.rstrip("/"))
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(f"the retrieval server URL must look like http://HOST:PORT, got {url!r}")
        if timeout <= 0 or retries < 0 or backoff < 0:
            raise ValueError("timeout must be > 0, retries and backoff >= 0")
        self.url = url.rstrip("/")
        self.host = parsed.hostname
        self.port = parsed.port or 80
        self.prefix = parsed.path
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self._local = threading.local()

    # ------------------------------------------------------------------------------------------ public API

    def search(self, query: str, top_k: int = 5) -> list[SearchResult]:
        """Hits for one query, best first.

        :raises RetrievalError: after the bounded retries, or at once for a rejected request.
        """
        payload = self._request("POST", "/retrieve", {"query": query, "top_k": int(top_k)})
        return self._parse_hits(payload, 1)[0]

    def search_batch(self, queries: Sequence[str], top_k: int = 5) -> list[list[SearchResult]]:
        """Hits for each query (Search-R1's ``queries`` form)."""
        payload = self._request("POST", "/retrieve", {"queries": list(queries), "top_k": int(top_k)})
        return self._parse_hits(payload, len(queries))

    def health(self) -> dict[str, Any]:
        """The server's ``/health`` payload."""
        payload = self._request("GET", "/health", None)
        if payload.get("status") not in ("ok", "healthy"):  # "healthy": rLLM's server
            raise RetrievalError(f"retrieval server {self.url} is not healthy: {payload!r:.200}")
        return payload

    def close(self) -> None:
        """Close this thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # ------------------------------------------------------------------------------------------ internals

    def _parse_hits(self, payload: dict[str, Any], n: int) -> list[list[SearchResult]]:
        result = payload.get("result")
        if not isinstance(result, list) or len(result) != n:
            raise RetrievalError(f"retrieval server {self.url} sent a malformed answer (no 'result' list of {n})")
        out = []
        for hits in result:
            row = []
            for hit in hits if isinstance(hits, list) else []:
                if not isinstance(hit, dict):
                    continue
                doc = found if isinstance(found := hit.get("document"), dict) else {}
                content = hit.get("content", doc.get("contents", ""))
                score = hit.get("score", 0.0)
                row.append(SearchResult(id=str(hit.get("id", doc.get("id", ""))),
                                        title=str(hit.get("title", doc.get("title", ""))),
                                        content=content if isinstance(content, str) else str(content),
                                        score=float(score) if isinstance(score, (int, float)) else 0.0))
            out.append(row)
        return out

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self._local.conn = conn
        return conn

    def _request(self, method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        data = json.dumps(body).encode("utf-8") if body is not None else None
        last: _Transient | None = None
        attempts = 0
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            attempts += 1
            try:
                return self._once(method, path, data)
            except _Transient as exc:
                last = exc
                self.close()
        assert last is not None
        raise RetrievalError(
            f"retrieval server {self.url} failed {attempts} time(s) on {method} {path}: {last}",
            status=last.status, attempts=attempts,
            hint="is the server running? start one with: ragen retrieval-serve --port PORT")

    def _exchange(self, method: str, path: str, data: bytes | None) -> tuple[int, bytes]:
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        reused = getattr(self._local, "conn", None) is not None
        try:
            conn = self._connection()
            conn.request(method, self.prefix + path, body=data, headers=headers)
            response = conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            if not reused:
                raise
            # the server closed an idle kept-alive connection: reconnect once, at no cost to the retry budget
            self.close()
            conn = self._connection()
            conn.request(method, self.prefix + path, body=data, headers=headers)
            response = conn.getresponse()
        raw = response.read()
        if response.will_close:
            self.close()
        return response.status, raw

    def _once(self, method: str, path: str, data: bytes | None) -> dict[str, Any]:
        try:
            status, raw = self._exchange(method, path, data)
        except TimeoutError as exc:
            raise _Transient(f"no answer within {self.timeout:g} s ({type(exc).__name__})") from None
        except (OSError, http.client.HTTPException) as exc:
            raise _Transient(f"{type(exc).__name__}: {exc}") from None
        if status >= 500:
            raise _Transient(f"HTTP {status}: {_error_text(raw)}", status=status)
        if status != 200:
            raise RetrievalError(f"retrieval server {self.url} rejected {method} {path}: HTTP {status}: "
                                 f"{_error_text(raw)}", status=status)
        try:
            payload = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RetrievalError(f"retrieval server {self.url} sent invalid JSON: {exc}", status=status) from None
        if not isinstance(payload, dict):
            raise RetrievalError(f"retrieval server {self.url} sent a {type(payload).__name__}, not a JSON object",
                                 status=status)
        return payload


def _error_text(raw: bytes) -> str:
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return raw[:200].decode("utf-8", "replace")
    if isinstance(payload, dict) and "error" in payload:
        return str(payload["error"])[:500]
    return str(payload)[:200]
