"""Shared helpers of the SearchQA tests: fixture paths, real servers on 127.0.0.1, a dead port, a slow server."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ragen_plugins_envs.searchqa.corpus import load_corpus
from ragen_plugins_envs.searchqa.retriever import BM25Retriever
from ragen_plugins_envs.searchqa.server import RetrievalServer
from tests.http_server import background_server

DATA = Path(__file__).parent / "data"
CORPUS = DATA / "searchqa_corpus.jsonl"
HOTPOT = DATA / "hotpotqa_sample.json"
HOTPOT_HF = DATA / "hotpotqa_sample_hf.jsonl"


@contextlib.contextmanager
def fixture_server(corpus: Path = CORPUS, **options: object) -> Iterator[RetrievalServer]:
    """A real BM25 retrieval server over ``corpus`` on 127.0.0.1 (ephemeral port), on a thread."""
    server = RetrievalServer(BM25Retriever(load_corpus(corpus)), **options)  # type: ignore[arg-type]
    with server:
        yield server


#: the sockets behind :func:`dead_url`, held open until the process ends
_DEAD: list[socket.socket] = []


def dead_url() -> str:
    """The URL of a port on 127.0.0.1 where nothing listens: bound and never listened on, so it refuses connections,
    and held for the whole session, so that no server another test (another xdist worker) starts can take it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    _DEAD.append(sock)
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


class _SlowHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    delay = 5.0

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        return

    def _reply(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.server.hits += 1  # type: ignore[attr-defined]
        deadline = time.monotonic() + self.delay
        while time.monotonic() < deadline and not self.server.closing.is_set():  # type: ignore[attr-defined]
            time.sleep(0.02)
        body = json.dumps({"status": "ok", "result": [[]]}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass

    do_GET = do_POST = _reply  # noqa: N815


@contextlib.contextmanager
def slow_server(delay: float = 5.0) -> Iterator[tuple[str, ThreadingHTTPServer]]:
    """A server on 127.0.0.1 that answers every request only after ``delay`` seconds."""
    handler = type("SlowHandler", (_SlowHandler,), {"delay": delay})
    with background_server(handler, hits=0, closing=threading.Event()) as (url, httpd):
        try:
            yield url, httpd
        finally:
            httpd.closing.set()  # type: ignore[attr-defined]  # release the waiting handlers before the shutdown


class _StatusHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    status = 503

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        return

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.server.hits += 1  # type: ignore[attr-defined]
        body = json.dumps({"error": f"status {self.status}"}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextlib.contextmanager
def status_server(status: int) -> Iterator[tuple[str, ThreadingHTTPServer]]:
    """A server on 127.0.0.1 that answers every POST with ``status`` and a JSON error."""
    handler = type("StatusHandler", (_StatusHandler,), {"status": status})
    with background_server(handler, hits=0) as served:
        yield served
