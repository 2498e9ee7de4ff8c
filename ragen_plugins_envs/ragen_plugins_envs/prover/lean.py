"""Lean 4 theorem proving, one tactic per step, checked by a Kimina Lean server over HTTP (RAGEN's Lean env).

**Protocol** (project-numina/kimina-lean-server). :class:`KiminaClient` speaks both of the server's APIs:

- ``api="check"`` (default): ``POST {server_url}/api/check`` with
  ``{"snippets": [{"id": ID, "code": LEAN}], "timeout": S, "debug": false, "reuse": true, "infotree": ...}``;
  the answer is ``{"results": [{"id": ID, "time": T, "error": E | absent, "response": R | absent}]}`` (a bare
  result object or a list of them, as older servers send, is accepted too);
- ``api="verify"`` (the backward-compatible one): ``POST {server_url}/verify`` with
  ``{"codes": [{"custom_id": ID, "proof": LEAN}], "timeout": S, "infotree_type": ..., "disable_cache": false}``;
  the answer is ``{"results": [{"custom_id": ID, "error": E | absent, "response": R + {"time": T}}]}``.

``R`` is the Lean REPL's command response: ``{"env": N, "messages": [{"severity": "error"|"warning"|"info",
"pos": {"line", "column"}, "endPos": ..., "data": TEXT}], "sorries": [{"pos", "endPos", "goal": TEXT,
"proofState": K}], "infotree": ...}`` (empty lists omitted), or ``{"message": TEXT}`` when the REPL itself failed.
A top-level ``error`` containing "timed out" means Lean ran out of time on the snippet. An ``Authorization: Bearer
KEY`` header is sent when ``api_key`` is set. Requests have an HTTP timeout (``http_timeout``) and are retried on
connection errors, timeouts, HTTP 5xx/429/408 and non-JSON answers, at most ``max_retries`` times with exponential
backoff (``retry_backoff`` × 2^i s); other 4xx answers are not retried. After that the client returns a
``server_error`` result; it never raises. A server found unreachable (every attempt failed to connect or timed
out) is not contacted again for ``server_cooldown`` seconds (5): requests fail at once meanwhile, so a dead server
costs one round of retries, not one per reset.

**Steps** (RAGEN's tactic-step semantics). Each step sends the whole theorem: the header (imports), the statement
(``theorem ... := by``), every accepted tactic on its own line indented by two spaces, the new tactic, and the
*goal probe* ``all_goals sorry`` (``goal_probe``; ``"sorry"`` appends a bare ``sorry``, ``"none"`` nothing, as RAGEN
does). The answer is read as follows: an error message whose text starts with "unsolved goals" lists remaining
goals (not a rejection), as do the ``sorries`` the probe creates; any other error rejects the tactic (a
"(deterministic) timeout"/heartbeat error or a top-level "timed out" error counts as a prover timeout); an error
"no goals" on the probe's own line only says no goal is left. The proof is complete when nothing is left: no
blocking error, no goal, no sorry and no "declaration uses 'sorry'" warning. An unreachable or failing server
(after the retries) is a *prover error*: ``info["prover_error"]=True`` and the episode is truncated (see
:mod:`~ragen_plugins_envs.prover.common` for all rewards).

**Actions**: one tactic, e.g. ``intro hp``, ``linarith``, ``rw [Nat.add_zero]``; several lines are allowed (they are
re-indented under the proof). Invalid: empty, longer than ``max_action_chars``, control characters, ``sorry`` or
``admit``, the character ``#`` (``#eval`` and friends), ``@[``, and the words that start a new Lean command and so
could leave the proof (``theorem``, ``lemma``, ``def``, ``example``, ``axiom``, ``instance``, ``import``,
``namespace``, ``section``, ``end``, ``macro``, ``syntax``, ``elab``, ``run_cmd``, ``run_tac``, ``initialize`` ...).
This filter keeps honest tactics inside the ``by`` block; it is not a sandbox — the Kimina server must run Lean in
its own sandbox, as it does for any submitted code.

**Theorems**: the built-in set (:data:`THEOREMS_PATH`, 9 miniF2F-style statements written for ragen, with recorded
proofs, for Lean 4 + Mathlib) or ``theorems_path`` (JSONL/JSON records with ``name``, ``statement``/
``formal_statement``, optional ``header``/``imports``, ``proof``, ``informal``/``natural_language_statement``;
e.g. a miniF2F export). No Lean binary can be installed in this project's CI, so the tests run against
:mod:`~ragen_plugins_envs.prover.kimina_double`; the variant ``lean_double`` does the same for offline demos.
"""

from __future__ import annotations

import functools
import http.client
import json
import re
import socket
import textwrap
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

import attrs

from ragen_core.validators import constraint, integer, number, one_of
from ragen_plugins_envs.prover.common import (
    ProverConfig,
    StepOutcome,
    TacticProofEnv,
    Theorem,
    check_text,
    normalize_space,
    parse_theorem_record,
    select_theorems,
)

__all__ = [
    "DEFAULT_HEADER",
    "GOAL_PROBES",
    "THEOREMS_PATH",
    "KiminaClient",
    "KiminaResult",
    "LeanBackend",
    "LeanConfig",
    "LeanEnv",
    "build_code",
    "interpret_response",
    "load_lean_theorems",
    "normalize_statement",
]

#: the built-in theorem set (with the recorded proofs and goals the protocol double serves)
THEOREMS_PATH = Path(__file__).with_name("theorems_lean.json")
#: the header of statements that carry none: RAGEN's, but with a heartbeat limit (RAGEN sets 0, unlimited) so a
#: runaway tactic fails inside Lean (a heartbeat timeout) before the server's time limit
DEFAULT_HEADER = ("import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\n"
                  "open BigOperators Real Nat Topology Rat")
#: goal probe name -> the line appended after the tactics
GOAL_PROBES = {"all_goals sorry": "all_goals sorry", "sorry": "sorry", "none": ""}

_COMMAND_WORDS = (
    "theorem", "lemma", "def", "example", "abbrev", "instance", "axiom", "axioms", "opaque", "structure", "class",
    "inductive", "coinductive", "import", "namespace", "section", "end", "variable", "universe", "macro",
    "macro_rules", "syntax", "elab", "elab_rules", "notation", "infix", "infixl", "infixr", "prefix", "postfix",
    "initialize", "builtin_initialize", "attribute", "deriving", "mutual", "run_cmd", "run_tac", "run_meta",
    "run_elab", "private", "protected", "noncomputable", "unsafe", "partial", "export", "omit", "include",
    "declare_syntax_cat",
)
_FORBIDDEN = re.compile(r"(?<![\w.'])(sorry|admit|" + "|".join(_COMMAND_WORDS) + r")(?![\w'!?])")
_RETRY_STATUS = {408, 429, 500, 502, 503, 504}
_TIMEOUT_TEXT = re.compile(r"timed out|deterministic\) timeout|maximum number of heartbeats", re.I)


# --------------------------------------------------------------------------------------------- HTTP client

@dataclass(frozen=True)
class KiminaResult:
    """One checked snippet.

    :ivar status: ``ok`` (``response`` holds the REPL response), ``timeout`` (Lean ran out of time on it) or
        ``server_error`` (unreachable server, HTTP error after the retries, malformed answer).
    :ivar response: the REPL command response (``env``, ``messages``, ``sorries`` ...) or ``{"message": ...}``.
    :ivar error: the server's or the client's error text.
    :ivar time: Lean's time as reported by the server (0 when absent).
    :ivar attempts: HTTP attempts made.
    """

    status: Literal["ok", "timeout", "server_error"]
    response: dict[str, Any] | None = None
    error: str = ""
    time: float = 0.0
    attempts: int = 1


class _HTTPStatusError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status


class KiminaClient:
    """A small HTTP client of the Kimina Lean server (stdlib only; one keep-alive connection per client).

    :param server_url: ``http(s)://host:port[/prefix]``.
    :param api: ``check`` (``/api/check``) or ``verify`` (``/verify``).
    :param api_key: sent as ``Authorization: Bearer KEY``.
    :param timeout: Lean-side time limit per snippet (seconds), sent in the request.
    :param http_timeout: socket timeout per HTTP attempt (seconds).
    :param max_retries: retries after the first attempt.
    :param retry_backoff: seconds before the first retry; doubles each retry (capped at 10 s).
    :param infotree: the ``infotree`` option (``original``, ``synthetic``, ``tactics``, ``full``, ``substantive``) or
        None.
    :param cooldown: after a request failed for want of a server (connection error or timeout on every attempt),
        requests in the next ``cooldown`` seconds fail at once without contacting it (0: always try).
    """

    def __init__(self, server_url: str, *, api: str = "check", api_key: str | None = None, timeout: int = 30,
                 http_timeout: float = 60.0, max_retries: int = 2, retry_backoff: float = 0.5,
                 infotree: str | None = None, cooldown: float = 5.0) -> None:
        parts = urlsplit(server_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"server_url must be http(s)://host[:port][/prefix], got {server_url!r}")
        if api not in ("check", "verify"):
            raise ValueError(f"api must be 'check' or 'verify', got {api!r}")
        self.server_url = server_url.rstrip("/")
        self.scheme, self.host = parts.scheme, parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.api, self.api_key = api, api_key
        self.timeout, self.http_timeout = int(timeout), float(http_timeout)
        self.max_retries, self.retry_backoff = max(0, int(max_retries)), max(0.0, float(retry_backoff))
        self.infotree = infotree
        self.cooldown = max(0.0, float(cooldown))
        self._down_until = 0.0
        self._down_error = ""
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------------------ public

    def check(self, code: str, custom_id: str | None = None) -> KiminaResult:
        """Check one Lean snippet; never raises (see :class:`KiminaResult`)."""
        snippet_id = custom_id or f"ragen-{uuid.uuid4().hex}"
        if self.api == "check":
            path = "/api/check"
            body: dict[str, Any] = {"snippets": [{"id": snippet_id, "code": code}], "timeout": self.timeout,
                                    "debug": False, "reuse": True}
            if self.infotree:
                body["infotree"] = self.infotree
        else:
            path = "/verify"
            body = {"codes": [{"custom_id": snippet_id, "proof": code}], "timeout": self.timeout,
                    "disable_cache": False}
            if self.infotree:
                body["infotree_type"] = self.infotree
        payload, attempts, error = self._post(path, body)
        if payload is None:
            return KiminaResult(status="server_error", error=error, attempts=attempts)
        return self._result(payload, attempts)

    def health(self) -> bool:
        """True when ``GET /health`` answers ``{"status": "ok"}`` (one attempt)."""
        try:
            data = self._request("GET", "/health", None, self.http_timeout)
        except Exception:  # noqa: BLE001 - health is a yes/no question
            self.close()
            return False
        return isinstance(data, dict) and data.get("status") == "ok"

    def close(self) -> None:
        """Close the keep-alive connection."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    # ------------------------------------------------------------------------------------------ internals

    def _post(self, path: str, body: dict[str, Any]) -> tuple[Any, int, str]:
        if time.monotonic() < self._down_until:
            return None, 0, self._down_error  # the same text, so episodes stay reproducible
        error = ""
        attempts = 0
        unreachable = False
        for attempt in range(self.max_retries + 1):
            attempts = attempt + 1
            if attempt:
                time.sleep(min(10.0, self.retry_backoff * 2 ** (attempt - 1)))
            try:
                return self._request("POST", path, body, self.http_timeout), attempts, ""
            except _HTTPStatusError as exc:
                self.close()
                unreachable = False
                error = f"Kimina server at {self.server_url}: {exc}"
                if exc.status not in _RETRY_STATUS:
                    break
            except (OSError, http.client.HTTPException, ValueError) as exc:
                self.close()
                unreachable = isinstance(exc, OSError)
                kind = "timed out" if isinstance(exc, (socket.timeout, TimeoutError)) else type(exc).__name__
                error = f"Kimina server at {self.server_url} unreachable: {kind}: {exc}"
        error = f"{error} (after {attempts} attempt{'s' if attempts != 1 else ''})"
        if unreachable and self.cooldown:
            self._down_until, self._down_error = time.monotonic() + self.cooldown, error
        return None, attempts, error

    def _request(self, method: str, path: str, body: dict[str, Any] | None, timeout: float) -> Any:
        with self._lock:
            if self._conn is None:
                cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
                self._conn = cls(self.host, self.port, timeout=timeout)
            conn = self._conn
            headers = {"Accept": "application/json"}
            data = None
            if body is not None:
                data = json.dumps(body).encode("utf-8")
                headers["Content-Type"] = "application/json"
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            conn.request(method, self.prefix + path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
            if resp.getheader("Connection", "").lower() == "close":
                self.close()
            if resp.status >= 400:
                raise _HTTPStatusError(resp.status, raw.decode("utf-8", "replace"))
            try:
                return json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ValueError(f"the server answered non-JSON: {raw[:200]!r}") from exc

    def _result(self, payload: Any, attempts: int) -> KiminaResult:
        item: Any = payload
        if isinstance(payload, dict) and isinstance(payload.get("results"), list):
            item = payload["results"][0] if payload["results"] else None
        elif isinstance(payload, list):
            item = payload[0] if payload else None
        if not isinstance(item, dict):
            return KiminaResult(status="server_error", attempts=attempts,
                                error=f"malformed answer from the Kimina server: {str(payload)[:300]}")
        response = item.get("response")
        seconds = item.get("time", response.get("time", 0.0) if isinstance(response, dict) else 0.0)
        seconds = float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else 0.0
        error = item.get("error")
        if error:
            return KiminaResult(status="timeout" if _TIMEOUT_TEXT.search(str(error)) else "server_error",
                                error=str(error), time=seconds, attempts=attempts)
        if not isinstance(response, dict):
            return KiminaResult(status="server_error", attempts=attempts, time=seconds,
                                error=f"the Kimina server returned no response: {str(item)[:300]}")
        return KiminaResult(status="ok", response=response, time=seconds, attempts=attempts)


# --------------------------------------------------------------------------------------------- Lean text

def normalize_statement(statement: str) -> str:
    """The statement ending in ``:= by`` (a trailing ``sorry``/``by sorry`` is dropped, ``:=``/``by`` added)."""
    text = statement.rstrip()
    text = re.sub(r"\s*:=\s*(by\s+)?sorry$", "", text)
    if re.search(r":=\s*by$", text):
        return text
    if text.endswith(":="):
        return text + " by"
    return text + " := by"


def build_code(header: str, statement: str, tactics: Sequence[str], probe: str) -> tuple[str, int]:
    """The Lean snippet for ``tactics`` (each re-indented under the proof) and the 1-based line of the probe (0 if
    none)."""
    lines = [*header.strip().splitlines(), "", *normalize_statement(statement).splitlines()] if header.strip() else \
        normalize_statement(statement).splitlines()
    for tactic in tactics:
        body = textwrap.dedent(tactic).strip("\n")
        lines.extend("  " + line if line.strip() else "" for line in body.splitlines())
    probe_line = 0
    if probe:
        lines.append("  " + probe)
        probe_line = len(lines)
    return "\n".join(lines) + "\n", probe_line


def _split_goals(text: str) -> list[str]:
    return [g.strip("\n") for g in re.split(r"\n\s*\n", text.strip("\n")) if g.strip()]


def _where(message: dict[str, Any]) -> str:
    pos = message.get("pos")
    if isinstance(pos, dict) and isinstance(pos.get("line"), int):
        return f"line {pos['line']}, column {pos.get('column', 0)}: "
    return ""


def interpret_response(response: dict[str, Any], probe_line: int = 0, header_lines: int = 0) -> StepOutcome:
    """Read a REPL command response (see the module docstring): accepted with goals, complete, rejected or timeout.

    ``header_lines`` is subtracted from reported line numbers so messages count lines from the statement.
    """
    if "message" in response and "messages" not in response and "env" not in response:
        text = str(response.get("message", "Lean REPL error"))
        return StepOutcome(kind="timeout" if _TIMEOUT_TEXT.search(text) else "rejected", message=text)
    goals: list[str] = []
    blocking: list[str] = []
    timed_out = False
    sorry_warning = False
    messages = response.get("messages") or []
    for msg in messages if isinstance(messages, list) else []:
        if not isinstance(msg, dict):
            continue
        severity = str(msg.get("severity", "")).lower()
        data = str(msg.get("data", msg.get("message", "")))
        if severity == "error":
            if data.startswith("unsolved goals"):
                goals.extend(_split_goals(data[len("unsolved goals"):]))
                continue
            pos = msg.get("pos")
            if probe_line and isinstance(pos, dict) and pos.get("line") == probe_line and "no goals" in data:
                continue
            timed_out = timed_out or bool(_TIMEOUT_TEXT.search(data))
            where = _where(msg)
            if where and header_lines and isinstance(pos, dict):
                where = f"line {pos['line'] - header_lines}, column {pos.get('column', 0)}: "
            blocking.append(where + data)
        elif severity == "warning" and "declaration uses 'sorry'" in data:
            sorry_warning = True
    sorries = response.get("sorries") or []
    for entry in sorries if isinstance(sorries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("goal"), str) and entry["goal"].strip():
            goals.extend(_split_goals(entry["goal"]))
    if blocking:
        return StepOutcome(kind="timeout" if timed_out else "rejected", message="\n".join(blocking[:3]))
    if goals:
        n = len(goals)
        display = f"{n} goal{'s' if n != 1 else ''}\n" + "\n\n".join(goals)
        return StepOutcome(kind="accepted", goals=display, goal_count=n)
    if sorry_warning or sorries:
        return StepOutcome(kind="accepted", goals="(the server reported 'sorry' but no goal text)", goal_count=-1)
    return StepOutcome(kind="accepted", goals="", complete=True, goal_count=0)


# --------------------------------------------------------------------------------------------- theorems

def load_lean_theorems(path: str | Path) -> tuple[tuple[Theorem, ...], dict[str, Any]]:
    """Theorems and the raw file data from a Lean theorem file.

    A ``.json`` file is ``{"header": H, "theorems": [...]}`` or a list; records with ``proofs`` (lists of
    ``{"tactic", "goals"}`` steps, the double's format) get ``proof`` from the first one. Other files are JSONL.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data = json.loads(text)
        records = data.get("theorems") if isinstance(data, dict) else data
        header = data.get("header", "") if isinstance(data, dict) else ""
    else:
        data, header = {}, ""
        records = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{lineno}: not valid JSON: {exc}") from exc
    if not isinstance(records, list) or not records:
        raise ValueError(f"{path}: no theorems")
    theorems = []
    for i, record in enumerate(records):
        if isinstance(record, dict) and "proof" not in record and isinstance(record.get("proofs"), list) \
                and record["proofs"]:
            record = {**record, "proof": [step["tactic"] for step in record["proofs"][0]]}
        theorem = parse_theorem_record(record, f"{path}[{i}]")
        if not theorem.header and header:
            theorem = Theorem(theorem.name, theorem.statement, theorem.proof, theorem.topic, header, theorem.informal)
        theorems.append(theorem)
    names = [t.name for t in theorems]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"{path}: duplicate theorem names {dupes}")
    return tuple(theorems), data if isinstance(data, dict) else {"theorems": records}


@functools.lru_cache(maxsize=8)
def _cached_theorems(path: str) -> tuple[Theorem, ...]:
    return load_lean_theorems(path)[0]


# --------------------------------------------------------------------------------------------- env

def _is_http_url(value: Any) -> bool:
    parts = urlsplit(value) if isinstance(value, str) else None
    return parts is not None and parts.scheme in ("http", "https") and bool(parts.hostname)


@attrs.define(kw_only=True)
class LeanConfig(ProverConfig):
    """Options of :class:`LeanEnv` (rewards and theorem selection as in :class:`ProverConfig`).

    :ivar server_url: the Kimina Lean server (a real one is expected; see ``use_double``).
    :ivar use_double: ignore ``server_url`` and start the protocol double on 127.0.0.1 (shared per process).
    :ivar api: ``check`` (``POST /api/check``) or ``verify`` (``POST /verify``).
    :ivar api_key: sent as a bearer token.
    :ivar request_timeout: Lean's time limit per check, in seconds (sent to the server).
    :ivar http_timeout: seconds per HTTP attempt.
    :ivar max_retries: HTTP retries after the first attempt.
    :ivar retry_backoff: seconds before the first retry (doubling).
    :ivar infotree: the server's ``infotree`` option (None: not requested).
    :ivar server_cooldown: seconds during which requests fail at once after the server was found unreachable
        (connection errors or timeouts on every attempt), so a dead server does not cost the retries on every
        reset; 0 disables.
    :ivar goal_probe: what follows the tactics: ``all_goals sorry`` (default), ``sorry`` or ``none`` (RAGEN).
    :ivar header: imports/options before each statement without its own (None: the theorem file's, else
        :data:`DEFAULT_HEADER`).
    :ivar query_initial_goals: ask the server for the goals at reset (else the statement stands for them).
    """

    server_url: str = attrs.field(default="http://127.0.0.1:8000",
                                  validator=constraint("an http(s)://host[:port] URL", _is_http_url))
    use_double: bool = False
    api: str = attrs.field(default="check", validator=one_of("check", "verify"))
    api_key: str | None = None
    request_timeout: int = attrs.field(default=30, validator=number(0, 86_400, low_open=True))
    http_timeout: float = attrs.field(default=60.0, validator=number(0, 86_400, low_open=True))
    max_retries: int = attrs.field(default=2, validator=integer(0, 20))
    retry_backoff: float = attrs.field(default=0.5, validator=number(0, 60))
    infotree: str | None = attrs.field(
        default=None, validator=one_of(None, "original", "synthetic", "tactics", "full", "substantive"))
    server_cooldown: float = attrs.field(default=5.0, validator=number(0, 60, note="0: off"))
    goal_probe: str = attrs.field(default="all_goals sorry", validator=one_of(*GOAL_PROBES))
    header: str | None = None
    query_initial_goals: bool = True


class LeanBackend:
    """The :class:`~ragen_plugins_envs.prover.common.ProverBackend` over a :class:`KiminaClient`."""

    def __init__(self, config: LeanConfig, server_url: str | None = None) -> None:
        self.config = config
        self._server_url = server_url
        self._client: KiminaClient | None = None
        self.theorem: Theorem | None = None
        self.checks = 0

    @property
    def client(self) -> KiminaClient:
        if self._client is None:
            cfg = self.config
            url = self._server_url
            if url is None:
                if cfg.use_double:
                    from ragen_plugins_envs.prover.kimina_double import shared_double

                    url = shared_double().url
                else:
                    url = cfg.server_url
            self._client = KiminaClient(url, api=cfg.api, api_key=cfg.api_key, timeout=int(cfg.request_timeout),
                                        http_timeout=cfg.http_timeout, max_retries=cfg.max_retries,
                                        retry_backoff=cfg.retry_backoff, infotree=cfg.infotree,
                                        cooldown=cfg.server_cooldown)
        return self._client

    def validate(self, action: str) -> tuple[str | None, str]:
        text, why = check_text(action, self.config.max_action_chars, allow_newlines=True)
        if text is None:
            return None, why
        if "#" in text or "@[" in text:
            return None, "'#' commands and '@[' attributes are not allowed in a tactic"
        match = _FORBIDDEN.search(text)
        if match:
            word = match.group(1)
            if word in ("sorry", "admit"):
                return None, f"{word!r} is not allowed (it would fake a proof)"
            return None, f"{word!r} starts a Lean command, not a tactic: only tactics are allowed"
        lines = textwrap.dedent(text).strip("\n").splitlines()
        if len(lines) == 1:
            return normalize_space(lines[0]), ""
        return "\n".join(line.rstrip() for line in lines), ""

    def _header(self, theorem: Theorem) -> str:
        if theorem.header:
            return theorem.header
        return self.config.header if self.config.header is not None else DEFAULT_HEADER

    def _check(self, tactics: Sequence[str]) -> StepOutcome:
        assert self.theorem is not None
        header = self._header(self.theorem)
        probe = GOAL_PROBES[self.config.goal_probe]
        code, probe_line = build_code(header, self.theorem.statement, tactics, probe)
        self.checks += 1
        result = self.client.check(code)
        if result.status == "timeout":
            return StepOutcome(kind="timeout", message=f"Lean timed out: {result.error}")
        if result.status != "ok" or result.response is None:
            return StepOutcome(kind="prover_error", message=result.error or "no response from the Kimina server")
        header_lines = len(header.strip().splitlines()) + 1 if header.strip() else 0
        return interpret_response(result.response, probe_line, header_lines)

    def start(self, theorem: Theorem) -> StepOutcome:
        self.theorem = theorem
        if not self.config.query_initial_goals:
            return StepOutcome(kind="accepted", goals="(the goal is the theorem statement)", goal_count=1)
        outcome = self._check(())
        if outcome.kind == "accepted" and not outcome.complete:
            return outcome
        if outcome.kind == "prover_error":
            return outcome
        why = outcome.message or "the statement closes without any tactic"
        return StepOutcome(kind="prover_error", message=f"the statement of {theorem.name!r} could not be set up: {why}")

    def attempt(self, tactic: str, history: Sequence[str]) -> StepOutcome:
        if self.theorem is None:
            return StepOutcome(kind="prover_error", message="no theorem was started")
        outcome = self._check([*history, tactic])
        return StepOutcome(kind=outcome.kind, goals=outcome.goals, complete=outcome.complete,
                           goal_count=outcome.goal_count, message=outcome.message, display=tactic)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


class LeanEnv(TacticProofEnv):
    """Prove Lean 4 theorems tactic by tactic through a Kimina Lean server (see the module docstring).

    ``server_url`` must point at a running Kimina server (``use_double=True`` / the variant ``lean_double`` start the
    local protocol double instead). Nothing connects before the first reset.
    """

    config_cls: ClassVar[type] = LeanConfig
    config: LeanConfig

    def __init__(self, config: LeanConfig | None = None, render_mode: str | None = "ansi", **options: Any) -> None:
        super().__init__(config, render_mode, **options)
        cfg = self.config
        theorems = select_theorems(_cached_theorems(cfg.theorems_path or str(THEOREMS_PATH)), cfg)
        self._setup(LeanBackend(cfg), theorems, "Lean 4")
        self.instruction = (
            "You are proving a Lean 4 (Mathlib) theorem with tactics, one tactic per action, e.g. "
            "<answer>intro hp</answer>, <answer>constructor</answer>, <answer>linarith</answer>, "
            "<answer>rw [Nat.add_zero]</answer>. The state shows the theorem, your accepted tactics and the current "
            "goals. Only tactics are allowed (no sorry/admit, no commands). An accepted tactic that reaches a new "
            f"proof state earns {cfg.valid_step_reward:g}, a rejected one {cfg.invalid_step_reward:g} (nothing "
            f"changes), each step costs {-cfg.step_penalty:g}, and completing the proof earns {cfg.success_reward:g} "
            "more."
        )
