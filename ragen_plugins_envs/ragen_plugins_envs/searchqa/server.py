"""The retrieval server: a small HTTP/JSON service over a retriever (standard library ``ThreadingHTTPServer``).

It speaks the contract of RAGEN's SearchQA env (adapted from rLLM's retrieval server, itself following
Search-R1's ``retrieval_server.py``), so clients of either work against it. Binds ``127.0.0.1`` by default.

``GET /health`` → ``200``::

    {"status": "ok", "retriever": "bm25", "corpus": "wiki:en-us", "corpus_size": 10033,
     "corpus_fingerprint": "<sha256 hex>", "default_top_k": 5, "max_top_k": 100}

``POST /retrieve`` with a JSON object body:

- ``query``: one query string, **or** ``queries``: a list of 1..256 query strings (Search-R1's batch form) — exactly
  one of the two; each query non-empty after stripping, at most 4,096 characters, valid Unicode (no lone
  surrogate);
- ``top_k`` (aliases ``topk`` and ``k``, as Search-R1 and rLLM spell it): an integer in ``[1, 100]``; default 5;
- ``return_scores``: optional bool (Search-R1); default true; false omits ``score`` from the hits;
- any other key is rejected.

→ ``200`` with one list of hits per query, best first (fewer than ``top_k`` when fewer documents match)::

    {"result": [[HIT, ...], ...], "retriever": "bm25", "top_k": 5}

and, for the single ``query`` form, also rLLM's flat fields ``"query": "...", "results": [HIT, ...],
"num_results": n``. A hit is::

    {"id": "Casablanca (film)", "title": "Casablanca (film)", "content": "<passage text>", "score": 11.07,
     "document": {"id": "Casablanca (film)", "title": "Casablanca (film)",
                  "contents": "\\"Casablanca (film)\\"\\n<passage text>"}}

(``id``/``content``/``score`` are RAGEN's fields; ``document.contents`` is Search-R1's and rLLM's.)

Errors are JSON ``{"error": "<message>"}``: ``400`` for a body that is not JSON, not an object, or breaks a rule
above; ``404`` for another path; ``405`` for another method; ``411``/``413`` for a missing or over-1-MiB
``Content-Length``; ``500`` if the retriever fails.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ragen_plugins_envs.searchqa.retriever import Hit

__all__ = [
    "DEFAULT_TOP_K",
    "MAX_BATCH",
    "MAX_BODY_BYTES",
    "MAX_QUERY_CHARS",
    "MAX_TOP_K",
    "BadRequest",
    "RetrievalServer",
    "RetrieveRequest",
    "hit_to_json",
    "parse_retrieve_request",
]

DEFAULT_TOP_K = 5
MAX_TOP_K = 100
MAX_BATCH = 256
MAX_QUERY_CHARS = 4096
MAX_BODY_BYTES = 1 << 20
_ALLOWED_KEYS = ("query", "queries", "top_k", "topk", "k", "return_scores")


class BadRequest(ValueError):
    """A request that breaks the contract (answered with ``400``)."""


@dataclass(frozen=True)
class RetrieveRequest:
    """A validated ``/retrieve`` request."""

    queries: tuple[str, ...]
    top_k: int
    single: bool
    return_scores: bool = True


def parse_retrieve_request(body: Any, *, default_top_k: int = DEFAULT_TOP_K, max_top_k: int = MAX_TOP_K,
                           max_batch: int = MAX_BATCH, max_query_chars: int = MAX_QUERY_CHARS) -> RetrieveRequest:
    """Validate a decoded JSON body (rules in the module docstring).

    :raises BadRequest: naming the offending field.
    """
    if not isinstance(body, dict):
        raise BadRequest(f"the body must be a JSON object, got {type(body).__name__}")
    unknown = sorted(str(k) for k in body if k not in _ALLOWED_KEYS)
    if unknown:
        raise BadRequest(f"unknown field(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(_ALLOWED_KEYS)}")
    has_query, has_queries = "query" in body, "queries" in body
    if has_query == has_queries:
        raise BadRequest("give exactly one of 'query' (a string) or 'queries' (a list of strings)")
    if has_query:
        raw = [body["query"]]
        if not isinstance(body["query"], str):
            raise BadRequest(f"'query' must be a string, got {type(body['query']).__name__}")
    else:
        raw = body["queries"]
        if not isinstance(raw, list):
            raise BadRequest(f"'queries' must be a list of strings, got {type(raw).__name__}")
        if not raw:
            raise BadRequest("'queries' must not be empty")
        if len(raw) > max_batch:
            raise BadRequest(f"'queries' holds {len(raw)} queries; at most {max_batch} per request")
    queries = []
    for i, q in enumerate(raw):
        where = "'query'" if has_query else f"'queries[{i}]'"
        if not isinstance(q, str):
            raise BadRequest(f"{where} must be a string, got {type(q).__name__}")
        if not q.strip():
            raise BadRequest(f"{where} must not be empty")
        if len(q) > max_query_chars:
            raise BadRequest(f"{where} has {len(q)} characters; at most {max_query_chars}")
        try:
            q.encode("utf-8")
        except UnicodeEncodeError:
            raise BadRequest(f"{where} is not valid Unicode (it holds a lone surrogate)") from None
        queries.append(q)
    top_k = default_top_k
    for key in ("top_k", "topk", "k"):
        if key in body and body[key] is not None:
            value = body[key]
            if isinstance(value, bool) or not isinstance(value, int):
                raise BadRequest(f"'{key}' must be an integer, got {value!r:.40}")
            if not 1 <= value <= max_top_k:
                raise BadRequest(f"'{key}' must be in [1, {max_top_k}], got {value}")
            top_k = value
            break
    return_scores = body.get("return_scores", True)
    if not isinstance(return_scores, bool):
        raise BadRequest(f"'return_scores' must be true or false, got {return_scores!r:.40}")
    return RetrieveRequest(queries=tuple(queries), top_k=top_k, single=has_query, return_scores=return_scores)


def hit_to_json(hit: Hit, *, with_score: bool = True) -> dict[str, Any]:
    """The JSON form of a hit (see the module docstring)."""
    doc = hit.doc
    out: dict[str, Any] = {"id": doc.id, "title": doc.title, "content": doc.text}
    if with_score:
        out["score"] = round(float(hit.score), 6)
    out["document"] = {"id": doc.id, "title": doc.title, "contents": doc.contents}
    return out


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"
    timeout = 60  # seconds a connection may sit idle or send slowly before it is dropped
    disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK stall
    wbufsize = 1 << 16  # ... and are buffered into one send (flushed after each request)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's signature
        if self.server.owner.verbose:
            super().log_message(format, *args)

    # -------------------------------------------------------------------------------------- responses

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, message: str, *, close: bool = False) -> None:
        if close:
            self.close_connection = True
        self._send(status, {"error": message})

    # -------------------------------------------------------------------------------------- methods

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        path = self.path.split("?", 1)[0]
        if path == "/health":
            self._send(HTTPStatus.OK, self.server.owner.health())
        elif path == "/retrieve":
            self._error(HTTPStatus.METHOD_NOT_ALLOWED, "use POST /retrieve with a JSON body")
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no such endpoint {path!r}; endpoints: GET /health, POST /retrieve")

    def do_POST(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0]
        body = self._read_body()
        if body is None:
            return
        if path != "/retrieve":
            if path == "/health":
                self._error(HTTPStatus.METHOD_NOT_ALLOWED, "use GET /health")
            else:
                self._error(HTTPStatus.NOT_FOUND, f"no such endpoint {path!r}; endpoints: GET /health, POST /retrieve")
            return
        try:
            decoded = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            self._error(HTTPStatus.BAD_REQUEST, f"the body is not valid UTF-8 JSON: {exc}")
            return
        owner = self.server.owner
        try:
            request = parse_retrieve_request(decoded, default_top_k=owner.default_top_k, max_top_k=owner.max_top_k)
        except BadRequest as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
            return
        try:
            payload = owner.retrieve(request)
        except Exception as exc:  # noqa: BLE001 - a retriever failure must become a 500, not a dropped connection
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"retrieval failed: {type(exc).__name__}: {exc}")
            return
        self._send(HTTPStatus.OK, payload)

    def _read_body(self) -> bytes | None:
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            self._error(HTTPStatus.LENGTH_REQUIRED, "chunked bodies are not supported; send Content-Length",
                        close=True)
            return None
        if length is None:
            self._error(HTTPStatus.LENGTH_REQUIRED, "a Content-Length header is required", close=True)
            return None
        try:
            size = int(length)
        except ValueError:
            self._error(HTTPStatus.BAD_REQUEST, f"bad Content-Length {length!r}", close=True)
            return None
        if size < 0:
            self._error(HTTPStatus.BAD_REQUEST, f"bad Content-Length {length!r}", close=True)
            return None
        if size > MAX_BODY_BYTES:
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"the body exceeds {MAX_BODY_BYTES} bytes", close=True)
            return None
        return self.rfile.read(size)

    def _not_allowed(self) -> None:
        self._read_body_quietly()
        self._error(HTTPStatus.METHOD_NOT_ALLOWED, f"method {self.command} is not allowed; use GET /health or "
                    "POST /retrieve")

    def _read_body_quietly(self) -> None:
        length = self.headers.get("Content-Length")
        if length and length.isdigit() and int(length) <= MAX_BODY_BYTES:
            self.rfile.read(int(length))
        elif length:
            self.close_connection = True

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed  # noqa: N815


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: RetrievalServer


class RetrievalServer:
    """Serve a retriever over HTTP (the contract is in the module docstring).

    ``RetrievalServer(retriever).start()`` serves on a background thread (``port=0`` picks a free port; read
    :attr:`url`); :meth:`serve_forever` serves on the calling thread (the CLI); :meth:`stop` shuts down. Also a
    context manager (start on enter, stop on exit).

    :param retriever: a :class:`~ragen_plugins_envs.searchqa.retriever.Retriever`.
    :param host: the address to bind (``127.0.0.1``: only this machine can connect).
    :param port: the port (0: an ephemeral one).
    :param default_top_k: hits per query when the request gives none.
    :param max_top_k: the largest ``top_k`` accepted.
    :param verbose: log each request to stderr.
    """

    def __init__(self, retriever: Any, *, host: str = "127.0.0.1", port: int = 0, default_top_k: int = DEFAULT_TOP_K,
                 max_top_k: int = MAX_TOP_K, verbose: bool = False) -> None:
        if not 1 <= default_top_k <= max_top_k:
            raise ValueError(f"default_top_k must be in [1, {max_top_k}], got {default_top_k}")
        self.retriever = retriever
        self.default_top_k = default_top_k
        self.max_top_k = max_top_k
        self.verbose = verbose
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.owner = self
        self._thread: threading.Thread | None = None
        self.requests_served = 0
        self._count_lock = threading.Lock()

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://host:port`` (no trailing slash)."""
        host = self.host
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    def health(self) -> dict[str, Any]:
        """The ``/health`` payload."""
        corpus = self.retriever.corpus
        return {"status": "ok", "retriever": self.retriever.name, "corpus": corpus.name, "corpus_size": len(corpus),
                "corpus_fingerprint": corpus.fingerprint, "default_top_k": self.default_top_k,
                "max_top_k": self.max_top_k}

    def retrieve(self, request: RetrieveRequest) -> dict[str, Any]:
        """The ``/retrieve`` payload for a validated request."""
        batches: Sequence[list[Hit]] = self.retriever.search_batch(list(request.queries), request.top_k)
        result = [[hit_to_json(h, with_score=request.return_scores) for h in hits] for hits in batches]
        with self._count_lock:
            self.requests_served += 1
        payload: dict[str, Any] = {"result": result, "retriever": self.retriever.name, "top_k": request.top_k}
        if request.single:
            payload.update(query=request.queries[0], results=result[0], num_results=len(result[0]))
        return payload

    def start(self) -> RetrievalServer:
        """Serve on a daemon thread; returns self."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                            name=f"retrieval-server-{self.port}", daemon=True)
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve on the calling thread until :meth:`stop` (from another thread) or ``KeyboardInterrupt``."""
        self._httpd.serve_forever(poll_interval=0.2)

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> RetrievalServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
