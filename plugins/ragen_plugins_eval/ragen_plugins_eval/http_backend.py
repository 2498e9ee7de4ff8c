"""The ``openai`` policy backend: an OpenAI-compatible HTTP endpoint (vLLM, SGLang, llama.cpp's server, ``ragen
serve``) behind the rollout loop's policy protocol, with the standard library's ``urllib``.

The rollout loop works on token ids; an endpoint works on text. This backend's tokenizer is
:class:`ChatMLTextTokenizer`: ids are characters (and one id per ChatML marker), prompts are rendered with the ChatML
template (``<|im_start|>role\\ncontent<|im_end|>\\n``, then ``<|im_start|>assistant\\n<think>``), which is the
template of ragen's tiny model, SmolLM2 and Qwen. Each generation request is decoded to text and sent:

- ``api=completions`` (``/v1/completions``): the rendered prompt as text, so the model continues inside
  ``<think>`` exactly as in training; right only for a ChatML model (the server tokenizes the text);
- ``api=chat`` (``/v1/chat/completions``): the conversation as messages, rendered by the server's own template; the
  ``<think>`` prefix cannot be forced, so the model writes its own tags (a leading ``<think>`` in the answer is
  taken as the prefix).

The answer text comes back as characters, so trajectories are exact as text but not as the server's tokens: the
server re-tokenizes earlier turns from text (a model's own output can tokenize differently the second time), token
counts in the trajectories are characters (the server's token usage is summed in ``summary.json``), and log-probs
are not collected (zeros). Stop strings are sent with ``include_stop_str_in_output`` (vLLM) and restored from
``stop_reason`` when a server strips them anyway; the text is also cut at the first stop string here.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import attrs

from ragen_core.errors import RagenError
from ragen_core.starpo.rollout import GenerationRequest, GenerationResult

__all__ = ["ChatMLTextTokenizer", "OpenAIConfig", "OpenAIPolicy"]

_MARKERS = ("<|im_start|>", "<|im_end|>")
_BASE = 0x110000  # above every Unicode code point: the ids of the ChatML markers
_MARKER_RE = re.compile("(" + "|".join(re.escape(m) for m in _MARKERS) + ")")
_MESSAGE_RE = re.compile(r"<\|im_start\|>(\w+)\n(.*?)<\|im_end\|>\n?", re.S)


class ChatMLTextTokenizer:
    """Characters as ids, each ChatML marker one id (``<|im_end|>`` is the end token), and the ChatML template."""

    eos_token = "<|im_end|>"
    eos_token_id = _BASE + 1
    pad_token_id = _BASE + 1

    def apply_chat_template(self, conversation: list[dict[str, str]], *, add_generation_prompt: bool = False,
                            tokenize: bool = False) -> Any:
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in conversation)
        text += "<|im_start|>assistant\n" if add_generation_prompt else ""
        return self.encode(text) if tokenize else text

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids: list[int] = []
        for part in _MARKER_RE.split(text):
            ids += [_BASE + _MARKERS.index(part)] if part in _MARKERS else [ord(c) for c in part]
        return ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(("" if skip_special_tokens else _MARKERS[i - _BASE]) if i >= _BASE else chr(i) for i in ids)


@attrs.define
class OpenAIConfig:
    """Options of the ``openai`` backend (``ragen eval -m http://host:8000/v1 -o api=chat``).

    :ivar model: the endpoint: ``http://host:port/v1`` (``/v1`` is added when missing), or a full
        ``.../v1/completions`` or ``.../v1/chat/completions`` URL, which also selects ``api``.
    :ivar api: ``completions`` (text prompts in ChatML, the default) or ``chat`` (messages).
    :ivar served_model: the ``model`` field of requests [default: the first model of ``GET /v1/models``].
    :ivar api_key: sent as a bearer token [default: ``$OPENAI_API_KEY`` when set].
    :ivar timeout: seconds to wait for one answer.
    :ivar retries: retries of a request that failed to connect, timed out or got a 5xx answer.
    :ivar concurrency: requests in flight at once.
    """

    model: str
    api: Literal["auto", "completions", "chat"] = "auto"
    served_model: str | None = None
    api_key: str | None = None
    timeout: float = attrs.field(default=120.0, validator=attrs.validators.gt(0))
    retries: int = attrs.field(default=2, validator=attrs.validators.ge(0))
    concurrency: int = attrs.field(default=8, validator=attrs.validators.gt(0))


class OpenAIPolicy:
    """The ``openai`` policy backend (see the module docstring). Constructing it asks ``GET /models``, so an endpoint
    that does not answer is reported before an eval starts. ``usage`` sums the server's token counts."""

    config_cls = OpenAIConfig
    token_unit = "char"

    def __init__(self, config: OpenAIConfig) -> None:
        self.config = config
        url = config.model.rstrip("/")
        api = "chat" if url.endswith("/chat/completions") else "completions" if url.endswith("/completions") else None
        url = re.sub(r"(/chat)?/completions$", "", url)
        self.base = url if re.search(r"/v\d+$", url) else url + "/v1"
        self.api = config.api if config.api != "auto" else (api or "completions")
        self.tokenizer = ChatMLTextTokenizer()
        self.key = config.api_key or os.environ.get("OPENAI_API_KEY")
        self.usage = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
        self._lock = threading.Lock()
        self._seed: int | None = None
        self.served_model = config.served_model
        if self.served_model is None:
            models = self._call("GET", "/models").get("data") or [{}]
            self.served_model = models[0].get("id")
            if not isinstance(self.served_model, str):
                raise RagenError(f"endpoint {self.base} lists no model at /models", hint="pass -o served_model=NAME")

    def seed(self, n: int) -> None:
        """Seed the following requests: each one sends ``seed`` = n + its episode id (servers that honour it, vLLM
        and ``ragen serve``, then sample reproducibly)."""
        self._seed = n

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        """One HTTP request per generation request, ``concurrency`` at a time."""
        if len(requests) <= 1:
            return [self._one(r) for r in requests]
        with ThreadPoolExecutor(min(self.config.concurrency, len(requests))) as pool:
            return list(pool.map(self._one, requests))

    def _one(self, req: GenerationRequest) -> GenerationResult:
        text = self.tokenizer.decode(list(req.prompt_ids))
        body: dict[str, Any] = {"model": self.served_model, "max_tokens": req.max_new_tokens,
                                "temperature": req.temperature, "top_p": req.top_p}
        if req.top_k:
            body["top_k"] = req.top_k
        if req.stop:
            body.update(stop=list(req.stop), include_stop_str_in_output=True)
        if self._seed is not None:
            body["seed"] = self._seed + req.episode_id * 1000 + len(req.prompt_ids) % 1000
        prefix = ""
        if self.api == "chat":
            messages = [{"role": r, "content": c} for r, c in _MESSAGE_RE.findall(text)]
            prefix = text[text.rfind("<|im_start|>assistant\n") + len("<|im_start|>assistant\n"):]
            body["messages"] = messages
            answer = self._call("POST", "/chat/completions", body)
        else:
            body["prompt"] = text
            answer = self._call("POST", "/completions", body)
        try:
            choice = answer["choices"][0]
            out = choice["message"]["content"] if self.api == "chat" else choice["text"]
            out = out or ""
        except (KeyError, IndexError, TypeError):
            raise RagenError(f"endpoint {self.base} answered without choices: {str(answer)[:300]}") from None
        if prefix and out.lstrip().startswith(prefix):
            out = out.lstrip()[len(prefix):]
        stop_reason = choice.get("stop_reason")
        if isinstance(stop_reason, str) and stop_reason in req.stop and stop_reason not in out:
            out += stop_reason
        hits = [(out.find(s), s) for s in req.stop if s in out]
        if hits:
            at, s = min(hits)
            out = out[:at + len(s)]
        usage = answer.get("usage") or {}
        with self._lock:
            self.usage["requests"] += 1
            for key in ("prompt_tokens", "completion_tokens"):
                self.usage[key] += int(usage.get(key) or 0)
        ids = tuple(self.tokenizer.encode(out))
        return GenerationResult(token_ids=ids, logprobs=(0.0,) * len(ids),
                                finish_reason="length" if choice.get("finish_reason") == "length" else "stop")

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        url = self.base + path
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        data = json.dumps(body).encode() if body is not None else None
        for attempt in range(self.config.retries + 1):
            last = attempt == self.config.retries
            try:
                request = urllib.request.Request(url, data=data, method=method, headers=headers)
                with urllib.request.urlopen(request, timeout=self.config.timeout) as resp:
                    raw = resp.read()
                break
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:400].decode("utf-8", "replace").strip()
                if exc.code >= 500 and not last:
                    time.sleep(0.5 * 2 ** attempt)
                    continue
                raise RagenError(f"endpoint {url} answered HTTP {exc.code}: {detail or exc.reason}",
                                 hint="check the URL, -o served_model=NAME and -o api_key=KEY") from None
            except (urllib.error.URLError, OSError) as exc:
                if not last:
                    time.sleep(0.5 * 2 ** attempt)
                    continue
                raise RagenError(f"endpoint {self.base} does not answer: {self._why(exc)}",
                                 hint="is the server running? e.g. `ragen serve tiny --port 8000` or `vllm serve "
                                      "MODEL`; the URL looks like http://host:port/v1") from None
        try:
            return json.loads(raw)
        except ValueError:
            raise RagenError(f"endpoint {url} answered something that is not JSON: {raw[:200]!r}",
                             hint="is this an OpenAI-compatible server? the URL looks like http://host:port/v1") from None

    def _why(self, exc: BaseException) -> str:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, (TimeoutError, socket.timeout)):
            return f"no answer within {self.config.timeout:g} s (timeout; raise it with -o timeout=SECONDS)"
        if isinstance(reason, ConnectionRefusedError):
            return "connection refused"
        if isinstance(reason, socket.gaierror):
            return f"unknown host ({reason})"
        return f"{type(reason).__name__}: {reason}"
