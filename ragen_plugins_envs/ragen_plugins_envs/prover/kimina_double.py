"""A **test double** of the Kimina Lean server: its HTTP request/response JSON, for a fixed set of theorems.

No Lean binary (nor Mathlib) can be installed in this project's CI, so :class:`~ragen_plugins_envs.prover.lean.LeanEnv`
is tested against this local server instead. It does **not** run Lean: it knows, for each theorem of its set
(:data:`~ragen_plugins_envs.prover.lean.THEOREMS_PATH` by default), the accepted tactic sequences and the goals
after each prefix — hand-written in Lean's pretty-printed form, not produced by Lean — and answers like the real
server would for them. Use it for tests and offline demos only; a real proof check needs a real Kimina server.

What it implements (the shapes of project-numina/kimina-lean-server and the Lean REPL):

- ``GET /`` and ``GET /health`` → ``{"status": "ok"}``;
- ``POST /api/check`` with ``{"snippets": [{"id", "code"}], "timeout", "debug", "reuse", "infotree"}`` →
  ``{"results": [{"id", "time", "response" | "error", "diagnostics" (debug only)}]}``; with the older single
  ``{"snippet": {...}}`` body it answers the one result object; ``POST /api/checks`` answers the bare list;
- ``POST /verify`` (and ``/one_pass_verify_batch``) with ``{"codes": [{"custom_id", "proof" | "code"}], "timeout",
  "infotree_type", "disable_cache"}`` → ``{"results": [{"custom_id", "error" | "response" (with "time")}]}``;
- ``response`` = ``{"env": N, "messages": [{"severity", "pos": {"line", "column"}, "endPos", "data"}],
  "sorries": [{"pos", "endPos", "goal", "proofState"}], "infotree": [...]}`` with empty lists omitted, as the REPL
  does; ``env`` counts the commands served;
- optional ``Authorization`` check (``api_key``), FastAPI-like ``422``/``404``/``401`` error bodies ``{"detail"}``.

How a snippet is judged: the double finds the statement of one of its theorems in the code (the header before it is
not checked), splits the lines after it into tactics (a line at the proof's indentation starts a tactic, deeper
lines continue it) and walks the recorded proofs:

- a tactic that is not a recorded next step from the current state → an ``error`` message on its line (a real
  server would explain why; the double says it does not know the step), and nothing after it is checked;
- a tactic after the last goal is closed → ``error`` "no goals to be proved";
- a tactic listed in the theorem's ``timeouts`` → the server-level ``error`` "Lean REPL command timed out in T
  seconds";
- after the tactics: ``all_goals sorry`` → one ``sorries`` entry per remaining goal and the warning "declaration
  uses 'sorry'" (nothing when no goal is left); a bare ``sorry`` → a sorry for the first goal, "unsolved goals" for
  the rest, and "no goals to be proved" when none is left; no probe → the error "unsolved goals" listing them, or no
  message at all when the proof is complete;
- a statement it does not know → an ``error`` message saying so.

Knobs for tests: ``fail_next(n, status)`` answers the next ``n`` requests with an HTTP error, ``delay`` sleeps
before each answer (a slow server), ``requests`` counts the requests served.

Run it standalone with ``python -m ragen_plugins_envs.prover.kimina_double --port 8000``.
"""

from __future__ import annotations

import argparse
import atexit
import json
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["DoubleChecker", "KiminaDouble", "main", "shared_double"]

_MAX_BODY = 10 << 20
_PROBES = ("all_goals sorry", "sorry")


def _norm(text: str) -> str:
    return " ".join(text.split())


@dataclass
class _Node:
    goals: list[str]
    children: dict[str, _Node] = field(default_factory=dict)


@dataclass
class _Known:
    name: str
    statement: str
    root: _Node
    timeouts: set[str]


def _pos(line: int, column: int) -> dict[str, int]:
    return {"line": line, "column": column}


class DoubleChecker:
    """The double's judgement of Lean snippets (no HTTP): see the module docstring.

    :param theorems_path: a JSON theorem file with ``statement``, ``goals`` (initial) and ``proofs`` (lists of
        ``{"tactic", "goals"}``) per theorem, and optional ``timeouts``.
    """

    def __init__(self, theorems_path: str | Path | None = None) -> None:
        if theorems_path is None:  # the Lean env's built-in set (lean.THEOREMS_PATH), the file beside this module
            theorems_path = Path(__file__).with_name("theorems_lean.json")
        data = json.loads(Path(theorems_path).read_text(encoding="utf-8"))
        records = data["theorems"] if isinstance(data, dict) else data
        self.known: list[_Known] = []
        for record in records:
            root = _Node(goals=list(record["goals"]))
            for proof in record.get("proofs", []):
                node = root
                for step in proof:
                    key = _norm(step["tactic"])
                    if key not in node.children:
                        node.children[key] = _Node(goals=list(step["goals"]))
                    node = node.children[key]
            statement = record["statement"].strip()
            self.known.append(_Known(record["name"], statement, root, {_norm(t) for t in record.get("timeouts", [])}))
        self._env = 0
        self._lock = threading.Lock()

    def _next_env(self) -> int:
        with self._lock:
            self._env += 1
            return self._env

    def check(self, code: str, *, timeout: float = 30, infotree: str | None = None) -> dict[str, Any]:
        """``{"response": R}`` or ``{"error": E}`` for one snippet (R as the Lean REPL writes it)."""
        lines = code.splitlines()
        found = self._locate(lines)
        env = self._next_env()
        if found is None:
            return {"response": {"env": env, "messages": [{
                "severity": "error", "pos": _pos(1, 0), "endPos": _pos(1, 0),
                "data": "kimina_double: unknown declaration: this test double only checks the theorems of its set"}]}}
        known, start, span = found
        tactics, messages = _split_tactics(lines, start + span)
        probe = tactics.pop() if tactics and _norm(tactics[-1][2]) in _PROBES else None
        node, path = known.root, list[tuple[str, list[str], list[str]]]()
        if not messages:
            walked = _walk(known, tactics, messages)
            if walked is None:
                return {"error": f"Lean REPL command timed out in {timeout:g} seconds"}
            node, path = walked
        sorries: list[dict[str, Any]] = []
        if not messages:
            sorries = _close(known, lines, start, span, node.goals, probe, messages)
        response: dict[str, Any] = {"env": env}
        if messages:
            response["messages"] = messages
        if sorries:
            response["sorries"] = sorries
        if infotree:
            response["infotree"] = [
                {"node": {"kind": "TacticInfo", "stx": {"pp": key}, "goalsBefore": before, "goalsAfter": after},
                 "children": []} for key, before, after in path]
        return {"response": response}

    def _locate(self, lines: list[str]) -> tuple[Any, int, int] | None:
        """The known theorem whose statement the snippet holds: ``(theorem, first line index, statement lines)``."""
        for known in self.known:
            target = _norm(known.statement)
            for i, line in enumerate(lines):
                if _norm(line) == target or (line.strip() and _norm("\n".join(lines[i:i + 8])).startswith(target)):
                    return known, i, len(known.statement.splitlines())
        return None


def _split_tactics(lines: list[str], first: int) -> tuple[list[tuple[int, int, str]], list[dict[str, Any]]]:
    """The proof's tactics from line index ``first`` on, as ``(line, column, text)`` (continuation lines, indented
    deeper, joined to their tactic), and an error when a command follows the proof."""
    tactics: list[tuple[int, int, str]] = []
    messages: list[dict[str, Any]] = []
    base: int | None = None
    for offset, line in enumerate(lines[first:]):
        number = first + offset + 1
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        if base is None:
            base = indent
        if indent == 0 or indent < base:
            messages.append({"severity": "error", "pos": _pos(number, indent), "endPos": _pos(number, len(line)),
                             "data": "kimina_double: unexpected command after the proof (only proofs are checked)"})
            break
        if indent == base:
            tactics.append((number, indent, line.strip()))
        elif tactics:
            ln, col, text = tactics[-1]
            tactics[-1] = (ln, col, text + " " + line.strip())
    return tactics, messages


def _walk(known: Any, tactics: list[tuple[int, int, str]], messages: list[dict[str, Any]]) -> tuple[Any, list[Any]] | None:
    """Follow the recorded proof tree along ``tactics``; an unknown step or one past the last goal appends its
    error to ``messages`` and stops. Returns the node reached and the path, or None for a recorded timeout."""
    node, path = known.root, list[tuple[str, list[str], list[str]]]()
    for number, column, text in tactics:
        key = _norm(text)
        if key in known.timeouts:
            return None
        end = _pos(number, column + len(text))
        if not node.goals:
            messages.append({"severity": "error", "pos": _pos(number, column), "endPos": end,
                             "data": "no goals to be proved"})
            break
        child = node.children.get(key)
        if child is None:
            messages.append({
                "severity": "error", "pos": _pos(number, column), "endPos": end,
                "data": f"kimina_double: `{key}` is not a recorded step of any known proof from this state "
                        "(this test double accepts only its recorded proofs; a real Lean server decides by "
                        "elaborating the tactic)"})
            break
        path.append((key, node.goals, child.goals))
        node = child
    return node, path


def _close(known: Any, lines: list[str], start: int, span: int, goals: list[str], probe: Any,
           messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The end of the proof: the ``sorry`` probe's goals, or the unsolved goals as an error (into ``messages``);
    returns the sorries."""
    statement_line = start + 1
    by_column = max(0, lines[start + span - 1].rfind("by")) if span else 0
    name_column = max(0, lines[start].find(known.name))
    sorries: list[dict[str, Any]] = []
    if probe is not None and probe[2] == "all_goals sorry":
        if goals:
            number, column, _text = probe
            sorry_col = column + len("all_goals ")
            sorries = [{"pos": _pos(number, sorry_col), "endPos": _pos(number, sorry_col + 5), "goal": g,
                        "proofState": k} for k, g in enumerate(goals)]
    elif probe is not None:
        number, column, _text = probe
        if not goals:
            messages.append({"severity": "error", "pos": _pos(number, column),
                             "endPos": _pos(number, column + 5), "data": "no goals to be proved"})
        else:
            sorries = [{"pos": _pos(number, column), "endPos": _pos(number, column + 5), "goal": goals[0],
                        "proofState": 0}]
            if len(goals) > 1:
                messages.append({"severity": "error", "pos": _pos(statement_line, by_column),
                                 "endPos": _pos(number, column + 5),
                                 "data": "unsolved goals\n" + "\n\n".join(goals[1:])})
    elif goals:
        messages.append({"severity": "error", "pos": _pos(statement_line, by_column),
                         "endPos": _pos(statement_line, by_column + 2),
                         "data": "unsolved goals\n" + "\n\n".join(goals)})
    if sorries:
        messages.insert(0, {"severity": "warning", "pos": _pos(statement_line, name_column),
                            "endPos": _pos(statement_line, name_column + len(known.name)),
                            "data": "declaration uses 'sorry'"})
    return sorries


class KiminaDouble:
    """The HTTP server of the double (a ``ThreadingHTTPServer`` on a daemon thread).

    :param theorems_path: the theorem file (default: the Lean env's built-in set).
    :param host: bind address (default 127.0.0.1).
    :param port: 0 picks a free port; see :attr:`url`.
    :param api_key: when set, requests other than health checks need ``Authorization: [Bearer ]KEY``.
    :param delay: seconds to sleep before each answer.
    """

    def __init__(self, theorems_path: str | Path | None = None, *, host: str = "127.0.0.1", port: int = 0,
                 api_key: str | None = None, delay: float = 0.0) -> None:
        self.checker = DoubleChecker(theorems_path)
        self.api_key = api_key
        self.delay = delay
        self.requests = 0
        self._fail: list[int] = []
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._server = _Server((host, port), _handler_for(self))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"  # a TCP server: the host is a str

    def start(self) -> KiminaDouble:
        """Serve on a daemon thread (idempotent); returns self."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="kimina-double",
                                            daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, drop the open keep-alive connections and release the port."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self._server.server_close()
        with self._lock:
            connections, self._connections = list(self._connections), set()
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def fail_next(self, n: int, status: int = 503) -> None:
        """Answer the next ``n`` requests with HTTP ``status``."""
        with self._lock:
            self._fail.extend([status] * n)

    def __enter__(self) -> KiminaDouble:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------ request handling

    def _take_failure(self) -> int | None:
        with self._lock:
            self.requests += 1
            return self._fail.pop(0) if self._fail else None

    def handle(self, method: str, path: str, headers: Any, body: bytes) -> tuple[int, Any]:
        """``(status, JSON body)`` for one request."""
        failure = self._take_failure()
        if self.delay:
            time.sleep(self.delay)
        if failure is not None:
            return failure, {"detail": "kimina_double: simulated failure"}
        path = path.split("?", 1)[0].rstrip("/") or "/"
        if method == "GET":
            if path in ("/", "/health"):
                return 200, {"status": "ok"}
            return 404, {"detail": "Not Found"}
        if path not in ("/api/check", "/api/checks", "/verify", "/one_pass_verify_batch"):
            return 404, {"detail": "Not Found"}
        if self.api_key is not None:
            auth = str(headers.get("Authorization") or "")
            if not auth:
                return 401, {"detail": "Missing API key"}
            if auth.removeprefix("Bearer ").strip() != self.api_key:
                return 401, {"detail": "Invalid API key"}
        try:
            data = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return 422, {"detail": f"invalid JSON body: {exc}"}
        if not isinstance(data, dict):
            return 422, {"detail": "the body must be a JSON object"}
        timeout = data.get("timeout", 30)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            return 422, {"detail": "timeout must be a non-negative number"}
        if path in ("/verify", "/one_pass_verify_batch"):
            return self._verify(data, timeout)
        return self._check(path, data, timeout)

    def _check(self, path: str, data: dict[str, Any], timeout: float) -> tuple[int, Any]:
        single = path == "/api/check" and "snippets" not in data and "snippet" in data
        snippets = [data.get("snippet")] if single else data.get("snippets")
        if not isinstance(snippets, list) or not snippets:
            return 422, {"detail": "`snippets` must be provided and non empty"}
        ids = []
        for i, snip in enumerate(snippets):
            if not isinstance(snip, dict) or not isinstance(snip.get("id"), str) or \
                    not isinstance(snip.get("code"), str):
                return 422, {"detail": f"`snippets[{i}]` needs a string `id` and `code`"}
            ids.append(snip["id"])
        if len(set(ids)) != len(ids):
            return 422, {"detail": "`snippets` must have unique ids"}
        infotree = data.get("infotree")
        results = []
        for snip in snippets:
            started = time.perf_counter()
            outcome = self.checker.check(snip["code"], timeout=timeout, infotree=infotree)
            result: dict[str, Any] = {"id": snip["id"], "time": round(time.perf_counter() - started, 6), **outcome}
            if data.get("debug"):
                result["diagnostics"] = {"repl_uuid": uuid.uuid4().hex, "cpu_max": 0.0, "memory_max": 0.0}
            results.append(result)
        if single:
            return 200, results[0]
        if path == "/api/checks":
            return 200, results
        return 200, {"results": results}

    def _verify(self, data: dict[str, Any], timeout: float) -> tuple[int, Any]:
        codes = data.get("codes")
        if not isinstance(codes, list) or not codes:
            return 422, {"detail": "`codes` must be a non-empty list"}
        results = []
        for i, item in enumerate(codes):
            if not isinstance(item, dict) or not isinstance(item.get("custom_id"), (str, int)):
                return 422, {"detail": f"`codes[{i}]` needs a `custom_id`"}
            code = item.get("proof") if item.get("proof") is not None else item.get("code")
            if not isinstance(code, str):
                return 422, {"detail": f"`codes[{i}]` needs a string `proof` (or `code`)"}
            started = time.perf_counter()
            outcome = self.checker.check(code, timeout=timeout, infotree=data.get("infotree_type"))
            entry: dict[str, Any] = {"custom_id": str(item["custom_id"])}
            if "error" in outcome:
                entry["error"] = outcome["error"]
            else:
                entry["response"] = {**outcome["response"], "time": round(time.perf_counter() - started, 6)}
            results.append(entry)
        return 200, {"results": results}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (timed out, closed) is normal here; anything else is reported."""
        error = sys.exc_info()[1]
        if not isinstance(error, (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


def _handler_for(double: KiminaDouble) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "kimina-double"

        def setup(self) -> None:
            super().setup()
            # headers and body go out in two writes: without this, Nagle + delayed ACK add ~40 ms per answer
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with double._lock:
                double._connections.add(self.connection)

        def finish(self) -> None:
            with double._lock:
                double._connections.discard(self.connection)
            try:
                super().finish()
            except OSError:
                pass

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
            return

        def _answer(self, status: int, payload: Any) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            self._answer(*double.handle("GET", self.path, self.headers, b""))

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= _MAX_BODY:
                self.close_connection = True
                self._answer(413, {"detail": "body too large or without a valid Content-Length"})
                return
            body = self.rfile.read(length)
            self._answer(*double.handle("POST", self.path, self.headers, body))

    return Handler


_SHARED: KiminaDouble | None = None
_SHARED_LOCK = threading.Lock()


def shared_double() -> KiminaDouble:
    """The process-wide double on 127.0.0.1 (started on first use, stopped at exit); used by ``use_double``."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = KiminaDouble().start()
            atexit.register(_SHARED.close)
        return _SHARED


def main(argv: list[str] | None = None) -> int:
    """Serve the double until interrupted."""
    parser = argparse.ArgumentParser(description="Kimina Lean server protocol double (a test double: no Lean).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--theorems", default=None, help="theorem JSON file (default: the built-in set)")
    parser.add_argument("--api-key", default=None)
    args = parser.parse_args(argv)
    double = KiminaDouble(args.theorems, host=args.host, port=args.port, api_key=args.api_key)
    print(f"kimina_double (test double, no Lean) serving {len(double.checker.known)} theorems on {double.url}",
          flush=True)
    try:
        double._server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        double._server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
