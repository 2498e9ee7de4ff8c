"""A local model as a policy backend (``hf``, for ``ragen eval``) and behind a small OpenAI-compatible HTTP server
(``ragen serve MODEL``).

:class:`HFBackend` loads any model :func:`~ragen_plugins_torch.models.load_model_and_tokenizer` loads (a folder,
``tiny``, ``smollm2-135m``, a hub id) or a training checkpoint (``RUN/checkpoints/step_N`` or the best validation's
``RUN/checkpoints/best``, its ``actor`` folder is loaded; a run directory means its newest checkpoint) and samples
exactly like the trainer: token ids in, token ids out, no text round trip.

:class:`ModelServer` serves a backend over HTTP with the standard library (``ThreadingHTTPServer``):

- ``GET /v1/models``, ``GET /health``;
- ``POST /v1/completions``: ``prompt`` (a string, a list of strings, token ids or lists of token ids), ``max_tokens``
  (16), ``temperature`` (1), ``top_p`` (1), ``top_k`` (0 or -1: off), ``n`` (1), ``stop`` (a string or list),
  ``seed``, ``logprobs`` (any integer: the sampled tokens' log-probs), ``include_stop_str_in_output`` (false, as
  vLLM); a string prompt is tokenized with the tokenizer's special tokens (as vLLM does);
- ``POST /v1/chat/completions``: ``messages`` rendered with the model's chat template and the generation prompt,
  same sampling fields, ``max_tokens`` 256 by default.

Answers carry ``choices[i].text`` (or ``.message.content``), ``finish_reason`` (``stop`` or ``length``),
``stop_reason`` (the stop string that ended it, else null) and ``usage`` in tokens. Concurrent requests are batched
(requests arriving within ``batch_wait_s`` are generated together); a request with a ``seed`` is generated alone
after ``torch.manual_seed(seed)``, so it is reproducible. It is a development and test server, not a production one,
but it holds its ground: an optional API key (401), a bounded queue (503 with ``Retry-After``), a listen backlog of
128, prompts and ``max_tokens`` bounded by the model's context, bounded stop strings and bodies, a read timeout for
stalled bodies, 4xx (one line, no traceback) for every client error, silence for clients that hang up, and a
shutdown that finishes the queued requests.
"""

from __future__ import annotations

import concurrent.futures
import hmac
import json
import os
import queue
import signal
import sys
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

import attrs
import click

from ragen_core.errors import RagenError
from ragen_core.starpo.rollout import GenerationRequest, GenerationResult

__all__ = ["HFBackend", "HFBackendConfig", "ModelServer", "add_serve_command", "check_best_spelling",
           "resolve_checkpoint"]

MAX_BODY_BYTES = 8 << 20
#: the most stop strings of a request, and characters of each
MAX_STOP_STRINGS, MAX_STOP_CHARS = 16, 256
#: prompt plus answer tokens when the model does not say how long its context is
MAX_TOKENS_WITHOUT_CONTEXT = 32_768
#: the environment variable ``ragen serve`` reads its API key from (``--api-key`` wins)
API_KEY_ENV = "RAGEN_SERVE_API_KEY"


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


@attrs.define
class HFBackendConfig:
    """Options of the ``hf`` policy backend (``ragen eval -o device=cuda``).

    :ivar model: a model folder, ``tiny``, ``smollm2-135m``, a hub id, a checkpoint or a run directory.
    :ivar device: ``auto`` (cuda when available), ``cpu``, ``cuda``, ``cuda:1``.
    :ivar dtype: ``auto`` (bfloat16 on cuda, float32 on cpu), ``float32``, ``bfloat16`` or ``float16``.
    :ivar generation_batch: the most sequences sampled in one batch.
    :ivar prefix_cache_mb: megabytes of key/value caches kept between calls, keyed by token prefix: a request whose
        prompt continues an earlier one (the next turn of an episode in the ``full`` context mode, a chat's next
        message) runs only its new tokens (:class:`ragen_plugins_torch.decoding.PrefixStore`); ``0``: off.
    """

    model: str = "tiny"
    device: str = "auto"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    generation_batch: int = attrs.field(default=64, validator=attrs.validators.gt(0))
    prefix_cache_mb: float = attrs.field(default=512.0, validator=attrs.validators.ge(0))


def resolve_checkpoint(model: str) -> str:
    """The folder to load for ``model``: a checkpoint's ``actor`` folder (``RUN/checkpoints/step_N``, or
    ``RUN/checkpoints/best``: the best validation's, ``trainer.keep_best``), a run directory's newest checkpoint;
    anything else unchanged. A checkpoint or run directory without a model, or ``RUN:best`` (write
    ``RUN/checkpoints/best``), is a :class:`RagenError`."""
    p = Path(model).expanduser()
    if (p / "actor" / "config.json").is_file():
        return str(p / "actor")
    check_best_spelling(model)
    if p.parent.name == "checkpoints" and not p.exists():
        steps = sorted(s.name for s in p.parent.glob("step_*")) + [s.name for s in p.parent.glob("best")]
        there = f"checkpoints there: {', '.join(steps)}" if steps else "the run has no checkpoint"
        if p.name == "best":
            raise RagenError(f"run {str(p.parent.parent)!r} kept no best checkpoint",
                             hint=f"it trained with trainer.keep_best=false or never validated; {there}")
        raise RagenError(f"checkpoint {model!r} does not exist", hint=there)
    if (p / "config.yaml").is_file() and (p / "checkpoints").is_dir():
        step_dirs = sorted((p / "checkpoints").glob("step_*"))
        if not step_dirs:
            raise RagenError(f"run directory {model!r} has no checkpoint under checkpoints/")
        return resolve_checkpoint(str(step_dirs[-1]))
    if p.name.startswith("step_") and p.is_dir():
        raise RagenError(f"checkpoint {model!r} holds no model (no actor/config.json)",
                         hint="it may be incomplete; use an earlier checkpoint")
    return model


def check_best_spelling(model: str) -> None:
    """``RUN:best`` (a run directory, a colon, ``best``) is not a model name: a :class:`RagenError` pointing to
    ``RUN/checkpoints/best``, the one spelling of the best checkpoint."""
    run, sep, name = model.rpartition(":")
    if sep and name == "best" and not Path(model).expanduser().exists() and \
            (Path(run).expanduser() / "config.yaml").is_file():
        raise RagenError(f"{model!r} is not a model: the best checkpoint of a run is a folder",
                         hint=f"use {str(Path(run) / 'checkpoints' / 'best')!r}")


class HFBackend:
    """The ``hf`` policy backend: an :class:`~ragen_plugins_torch.policy.HFPolicy` (the trainer's sampler) loaded
    from a config. ``seed(n)`` seeds torch; ``ragen eval`` calls it before each batch of groups, so an eval is
    reproducible on the same machine and settings."""

    config_cls = HFBackendConfig
    token_unit = "token"

    def __init__(self, config: HFBackendConfig) -> None:
        import torch

        from .devices import check_device
        from .models import load_model_and_tokenizer
        from .policy import HFPolicy

        check_device(config.device, config.dtype)  # before loading: one clear ConfigError
        device = config.device if config.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = None if config.dtype == "auto" and not device.startswith("cuda") else (
            "bfloat16" if config.dtype == "auto" else config.dtype)
        self.source = resolve_checkpoint(config.model)
        model, tokenizer = load_model_and_tokenizer(self.source, dtype=dtype, device=device)
        self.policy = HFPolicy(model.eval(), tokenizer, device=device, generation_batch=config.generation_batch,
                               prefix_cache_mb=config.prefix_cache_mb)
        self.tokenizer = tokenizer

    @property
    def context_length(self) -> int | None:
        """The most tokens (prompt and answer) the model attends to (``max_position_embeddings``), if it says."""
        value = getattr(getattr(self.policy.model, "config", None), "max_position_embeddings", None)
        return int(value) if isinstance(value, int) and value > 0 else None

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        """Sample one continuation per request (batched, token ids in and out)."""
        return self.policy.generate(requests)

    def seed(self, n: int) -> None:
        """Seed torch's generators."""
        import torch

        torch.manual_seed(n)


# --------------------------------------------------------------------------------------------------------- server

class _Batcher:
    """Generates queued requests on one worker thread, batching the unseeded ones that arrive together."""

    def __init__(self, policy: Any, max_batch: int, wait_s: float, max_queue: int = 256) -> None:
        self.policy, self.max_batch, self.wait_s, self.max_queue = policy, max_batch, wait_s, max_queue
        self.queue: queue.Queue[Any] = queue.Queue()
        self._lock = threading.Lock()
        self.closed = False
        self.thread = threading.Thread(target=self._loop, name="ragen-serve-batcher", daemon=True)
        self.thread.start()

    def submit(self, requests: list[GenerationRequest], seed: int | None) -> list[Any]:
        """Queue ``requests`` and wait for their results; :class:`_Busy` when the queue cannot take them all (the
        request is refused whole, nothing of it queued) or the server is stopping."""
        futures = []
        with self._lock:
            if self.closed:
                raise _Busy("the server is shutting down")
            if self.queue.qsize() + len(requests) > self.max_queue:
                raise _Busy(f"the request queue is full ({self.max_queue} sequences waiting)")
            for req in requests:
                fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
                self.queue.put((req, seed, fut))
                futures.append(fut)
        return [f.result() for f in futures]

    def close(self, wait_s: float = 0.0) -> None:
        """Take no more requests; the queued ones are still generated. ``wait_s``: wait that long for the worker to
        finish them (a clean shutdown: no generation is cut off by the interpreter's exit)."""
        with self._lock:
            if not self.closed:
                self.closed = True
                self.queue.put(None)
        if wait_s > 0:
            self.thread.join(timeout=wait_s)

    def _loop(self) -> None:
        while (item := self.queue.get()) is not None:
            items = [item]
            deadline = time.monotonic() + self.wait_s
            while len(items) < self.max_batch and (left := deadline - time.monotonic()) > 0:
                try:
                    nxt = self.queue.get(timeout=left)
                except queue.Empty:
                    break
                if nxt is None:
                    self.queue.put(None)
                    break
                items.append(nxt)
            plain = [it for it in items if it[1] is None]
            seeded = [it for it in items if it[1] is not None]
            try:
                if plain:
                    for (_r, _s, fut), res in zip(plain, self.policy.generate([it[0] for it in plain])):
                        fut.set_result(res)
                for req, seed, fut in seeded:
                    self.policy.seed(seed)
                    fut.set_result(self.policy.generate([req])[0])
            except Exception as exc:  # reported to every waiting request (HTTP 500), the server goes on
                for _r, _s, fut in items:
                    if not fut.done():
                        fut.set_exception(exc)


class _BadRequest(Exception):
    pass


class _Busy(Exception):
    """The server cannot take the request now (HTTP 503 with Retry-After)."""


def _field(body: dict[str, Any], key: str, kind: Any, default: Any) -> Any:
    value = body.get(key, default)
    if value is None:
        return default
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise _BadRequest(f"{key!r} must be {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _stop_strings(body: dict[str, Any]) -> list[str]:
    """The request's ``stop``: a string or a list of non-empty strings (at most :data:`MAX_STOP_STRINGS` of at most
    :data:`MAX_STOP_CHARS` characters), as a list."""
    stop = body.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise _BadRequest("'stop' must be a string or a list of non-empty strings")
    if len(stop) > MAX_STOP_STRINGS or any(len(s) > MAX_STOP_CHARS for s in stop):
        raise _BadRequest(f"'stop' takes at most {MAX_STOP_STRINGS} strings of at most {MAX_STOP_CHARS} "
                          f"characters each")
    return stop


def _sampling_options(body: dict[str, Any], chat: bool) -> tuple[dict[str, Any], int]:
    """A request's :class:`GenerationRequest` options (``max_tokens`` defaults to 256 in a chat, 16 in a completion)
    and its ``n``, checked."""
    n = _field(body, "n", int, 1)
    top_k = _field(body, "top_k", int, 0)
    stop = _stop_strings(body)
    req = dict(max_new_tokens=_field(body, "max_tokens", int, 256 if chat else 16),
               temperature=_field(body, "temperature", float, 1.0), top_p=_field(body, "top_p", float, 1.0),
               top_k=max(top_k, 0), stop=tuple(stop))
    if req["max_new_tokens"] < 1 or not 0 < req["top_p"] <= 1 or req["temperature"] < 0 or not 1 <= n <= 64:
        raise _BadRequest("need max_tokens >= 1, 0 < top_p <= 1, temperature >= 0, 1 <= n <= 64")
    return req, n


class ModelServer:
    """Serve a policy (an :class:`HFBackend`: ``tokenizer``, ``generate``, ``seed``) over OpenAI's HTTP API (see the
    module docstring). ``start()`` serves on a daemon thread (``port=0`` picks a free port, see :attr:`url`);
    :meth:`serve_forever` on the calling thread; :meth:`stop` shuts down.

    :param name: the model name in ``/v1/models`` and the answers (requests may name any model).
    """

    def __init__(self, policy: Any, *, name: str = "ragen", host: str = "127.0.0.1", port: int = 0,
                 max_batch: int = 32, batch_wait_s: float = 0.01, api_key: str | None = None,
                 max_queue: int = 256, read_timeout_s: float = 30.0, shutdown_wait_s: float = 120.0) -> None:
        self.policy, self.name = policy, name
        self.api_key = api_key or None
        self.read_timeout_s, self.shutdown_wait_s = read_timeout_s, shutdown_wait_s
        self.context_length: int | None = getattr(policy, "context_length", None)
        self.batcher = _Batcher(policy, max_batch, batch_wait_s, max_queue)
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.owner = self  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://host:port/v1``, the base URL clients use."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"  # a TCP server: the host is a str

    def start(self) -> ModelServer:
        """Serve on a daemon thread; returns self."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                            name="ragen-serve", daemon=True)
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve on the calling thread until :meth:`stop` is called from another thread."""
        self._httpd.serve_forever(poll_interval=0.2)

    def stop(self) -> None:
        """Stop serving (idempotent): accept no more connections, finish the requests already queued (up to
        ``shutdown_wait_s``), close the socket."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self.batcher.close(wait_s=self.shutdown_wait_s)
        self._httpd.server_close()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ----------------------------------------------------------------------------------------------- the API
    def complete(self, body: dict[str, Any], chat: bool) -> dict[str, Any]:
        """The answer to a (chat) completion request body; a bad body raises ``_BadRequest``."""
        prompts = self._chat_prompt(body.get("messages")) if chat else self._prompts(body.get("prompt"))
        req, n = _sampling_options(body, chat)
        self._check_length(prompts, req["max_new_tokens"])
        seed = body.get("seed")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise _BadRequest(f"'seed' must be an integer, got {seed!r}")
        requests = [GenerationRequest(prompt_ids=tuple(p), **req) for p in prompts for _ in range(n)]
        results = self.batcher.submit(requests, seed)
        include = bool(body.get("include_stop_str_in_output", False))
        want_logprobs = body.get("logprobs") not in (None, False) and not chat
        choices = [self._choice(i, res, chat, req["stop"], include, want_logprobs) for i, res in enumerate(results)]
        used = sum(len(r.token_ids) for r in results)
        prompt_tokens = sum(len(p) for p in prompts)
        return {"id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:24]}",
                "object": "chat.completion" if chat else "text_completion", "created": int(time.time()),
                "model": self.name, "choices": choices,
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": used,
                          "total_tokens": prompt_tokens + used}}

    def _chat_prompt(self, messages: Any) -> list[list[int]]:
        """The one prompt of a chat request: its ``messages`` through the chat template, with the generation
        prompt."""
        tok = self.policy.tokenizer
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in messages):
            raise _BadRequest("'messages' must be a non-empty list of {role, content} strings")
        text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return [list(tok.encode(text, add_special_tokens=False))]

    def _check_length(self, prompts: list[list[int]], max_new_tokens: int) -> None:
        """Refuse a request whose longest prompt and ``max_tokens`` exceed the model's context (or, when the model
        does not say, :data:`MAX_TOKENS_WITHOUT_CONTEXT`)."""
        limit = self.context_length or MAX_TOKENS_WITHOUT_CONTEXT
        longest = max(len(p) for p in prompts)
        if longest + max_new_tokens > limit:
            what = "the model's context" if self.context_length else "the server's limit"
            raise _BadRequest(f"a prompt of {longest} tokens and max_tokens {_short(max_new_tokens)} exceed "
                              f"{what} of {limit} tokens; shorten the prompt or lower max_tokens (at most "
                              f"{max(limit - longest, 0)} here)")

    def _choice(self, i: int, res: Any, chat: bool, stop: tuple[str, ...], include: bool,
                want_logprobs: bool) -> dict[str, Any]:
        """Choice ``i`` of the answer: the generated text cut at the earliest stop string (kept with
        ``include_stop_str_in_output``), the finish and stop reasons, and for a completion its log-probs when asked."""
        tok = self.policy.tokenizer
        ids = list(res.token_ids)
        text = tok.decode(ids, skip_special_tokens=True)
        hits = [(text.find(s), s) for s in stop if s in text]
        stop_reason = min(hits)[1] if hits else None
        if hits:
            at, s = min(hits)
            text = text[:at + len(s)] if include else text[:at]
        choice: dict[str, Any] = {"index": i, "finish_reason": "length" if res.finish_reason == "length"
                                  else "stop", "stop_reason": stop_reason}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
            choice["logprobs"] = ({"tokens": [tok.decode([t]) for t in ids],
                                   "token_logprobs": list(res.logprobs)} if want_logprobs else None)
        return choice

    def _prompts(self, prompt: Any) -> list[list[int]]:
        tok = self.policy.tokenizer
        if isinstance(prompt, str):
            prompt = [prompt]
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            prompt = [prompt]
        if not isinstance(prompt, list) or not prompt:
            raise _BadRequest("'prompt' must be a string, a list of strings, token ids or lists of token ids")
        out = []
        for p in prompt:
            if isinstance(p, str):
                ids = list(tok(p)["input_ids"])
                if not ids:
                    raise _BadRequest("an empty prompt: give at least one token of text")
                out.append(ids)
            elif isinstance(p, list) and p and all(isinstance(t, int) and 0 <= t < len(tok) for t in p):
                out.append(list(p))
            else:
                raise _BadRequest(f"bad prompt {str(p)[:80]!r}: a string or a non-empty list of valid token ids")
        return out


class _HTTPServer(ThreadingHTTPServer):
    """A listen backlog for bursts of clients (the standard library's is 5), and no traceback for a client that
    left or stalled: those are the client's business."""

    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError, OSError)):
            return
        sys.stderr.write(f"ragen serve: {type(error).__name__} while answering {client_address[0]}: {error}\n")


class _Handler(BaseHTTPRequestHandler):
    server_version = "ragen-serve"
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        self.timeout = self.server.owner.read_timeout_s  # type: ignore[attr-defined, misc]  # a stalled body ends here
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (ConnectionError, TimeoutError):  # the client left before its answer: nothing to tell anyone
            self.close_connection = True

    def _error(self, status: HTTPStatus, message: str, headers: dict[str, str] | None = None) -> None:
        kind = ("authentication_error" if status == HTTPStatus.UNAUTHORIZED else
                "invalid_request_error" if status < 500 else "server_error")
        self._send(status, {"error": {"message": message, "type": kind, "code": int(status)}}, headers)

    def _authorised(self) -> bool:
        """With an API key, every route but /health needs ``Authorization: Bearer KEY`` (else 401)."""
        key = self.server.owner.api_key  # type: ignore[attr-defined]
        if key is None or self.path.rstrip("/") == "/health":
            return True
        given = self.headers.get("Authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), key.encode()):
            return True
        self.close_connection = True
        self._error(HTTPStatus.UNAUTHORIZED, "a valid API key is required: Authorization: Bearer <key>",
                    {"WWW-Authenticate": "Bearer"})
        return False

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        owner = self.server.owner  # type: ignore[attr-defined]
        if not self._authorised():
            return
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": owner.name, "object": "model", "created": 0,
                                                         "owned_by": "ragen"}]})
        elif self.path.rstrip("/") == "/health":
            self._send(200, {"status": "ok", "model": owner.name})
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no route GET {self.path}; try /v1/models")

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        owner = self.server.owner  # type: ignore[attr-defined]
        if not self._authorised():
            return
        route = self.path.rstrip("/").removeprefix("/v1")
        length = self.headers.get("Content-Length", "")
        if not length.isdigit() or int(length) > MAX_BODY_BYTES:
            self.close_connection = True
            return self._error(HTTPStatus.BAD_REQUEST, "a JSON body with a Content-Length up to 8 MiB is required")
        try:
            raw = self.rfile.read(int(length))
        except (TimeoutError, ConnectionError):  # a body shorter than its Content-Length, or a client gone
            self.close_connection = True
            return None
        if len(raw) < int(length):
            self.close_connection = True
            return self._error(HTTPStatus.BAD_REQUEST, "the body ended before its Content-Length")
        if route not in ("/completions", "/chat/completions"):
            return self._error(HTTPStatus.NOT_FOUND, f"no route POST {self.path}; use /v1/completions or "
                                                     "/v1/chat/completions")
        try:
            try:
                body = json.loads(raw)
            except RecursionError:
                raise _BadRequest("the JSON body is nested too deeply") from None
            if not isinstance(body, dict):
                raise _BadRequest("the body must be a JSON object")
            self._send(200, owner.complete(body, chat=route == "/chat/completions"))
        except _Busy as exc:
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, f"{exc}; retry shortly", {"Retry-After": "1"})
        except (_BadRequest, ValueError) as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
        except Exception as exc:  # a generation failure answers 500 (one line, no traceback); the server goes on
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")


def add_serve_command(cli: click.Group) -> None:
    """Add ``ragen serve MODEL`` to ``cli``."""

    @cli.command("serve")
    @click.argument("model")
    @click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
    @click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="0: a free port.")
    @click.option("--name", default=None, help="Model name in /v1/models [default: MODEL].")
    @click.option("--device", default="auto", show_default=True,
                  help="Torch device: auto (cuda when available, else cpu), cpu, cuda, cuda:N or mps.")
    @click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16", "float16"]), default="auto",
                  show_default=True, help="Weights' dtype: auto is bfloat16 on a GPU, float32 on the CPU.")
    @click.option("--max-batch", type=click.IntRange(min=1), default=32, show_default=True,
                  help="Most requests generated together.")
    @click.option("--max-queue", type=click.IntRange(min=1), default=256, show_default=True,
                  help="Most sequences waiting; beyond it a request gets 503 with Retry-After.")
    @click.option("--api-key", default=None, help=f"Require 'Authorization: Bearer KEY' (401 otherwise; /health "
                                                  f"stays open) [default: ${API_KEY_ENV}, else no key].")
    @click.option("--prefix-cache-mb", type=click.FloatRange(min=0), default=512.0, show_default=True,
                  help="Key/value caches kept between requests (MB): a request that continues an earlier one (a "
                       "chat's next message) runs only its new tokens. 0: off.")
    def serve(model: str, host: str, port: int, name: str | None, device: str, dtype: str, max_batch: int,
              max_queue: int, api_key: str | None, prefix_cache_mb: float) -> None:
        """Serve MODEL (a folder, tiny, smollm2-135m, a checkpoint such as RUN/checkpoints/best, or a run) over an
        OpenAI-compatible HTTP API."""
        from ragen_core.log import configure_logging

        from .devices import check_device

        check_device(device, dtype, "--")  # before the model loads
        configure_logging("auto", "warning")  # on a terminal: the model's loading progress on standard error
        policy = HFBackend(HFBackendConfig(model=model, device=device, dtype=dtype,  # type: ignore[arg-type]
                                           prefix_cache_mb=prefix_cache_mb))
        server = ModelServer(policy, name=name or model, host=host, port=port, max_batch=max_batch,
                             max_queue=max_queue, api_key=api_key or os.environ.get(API_KEY_ENV) or None)

        def stop(_signum: int, _frame: Any) -> None:
            threading.Thread(target=server._httpd.shutdown, daemon=True).start()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        click.echo(f"serving {name or model} ({policy.source}) at {server.url}")
        sys.stdout.flush()
        server.serve_forever()
        server.stop()
        click.echo("stopped", err=True)

