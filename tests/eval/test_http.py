"""The OpenAI-compatible HTTP path end to end: ``ragen serve``'s API on the tiny model, ``ragen eval`` through the
``openai`` backend against it (completions and chat), a real interruption and resume, and endpoints that do not
answer."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from click.testing import CliRunner  # noqa: E402

from ragen_core.cli import build_cli  # noqa: E402
from ragen_core.plugins import build_plugin_manager  # noqa: E402
from ragen_core.starpo.rollout import GenerationRequest  # noqa: E402
from ragen_plugins_torch.serve import HFBackend, HFBackendConfig, ModelServer  # noqa: E402
from tests.http_server import background_server  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # the tiny model, here and in `ragen serve`/`ragen eval`

ROOT = Path(__file__).resolve().parents[2]
FAST = ["rollout.max_turn=2", "rollout.max_new_tokens=12", "run.log_level=error"]


@pytest.fixture(scope="module")
def server(one_torch_thread: None) -> Any:
    with ModelServer(HFBackend(HFBackendConfig(model="tiny")), name="tiny", port=0) as srv:
        yield srv


def post(url: str, body: Any) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def ragen(*args: str) -> Any:
    return CliRunner().invoke(build_cli(build_plugin_manager()), list(args))


def lines(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "trajectories.jsonl").read_text().splitlines()]


PROMPT = "<|im_start|>user\nTurn 1:\nState:\n#P_O#<|im_end|>\n<|im_start|>assistant\n<think>"


def test_the_completions_api(server: ModelServer) -> None:
    with urllib.request.urlopen(server.url + "/models", timeout=30) as resp:
        assert json.loads(resp.read())["data"][0]["id"] == "tiny"
    status, out = post(server.url + "/completions", {"prompt": PROMPT, "max_tokens": 20, "temperature": 0,
                                                     "logprobs": 1, "n": 2})
    assert status == 200 and out["object"] == "text_completion" and len(out["choices"]) == 2
    first = out["choices"][0]
    assert first["text"] == out["choices"][1]["text"]  # greedy
    assert len(first["logprobs"]["token_logprobs"]) == len(first["logprobs"]["tokens"]) <= 20
    assert all(lp <= 0 for lp in first["logprobs"]["token_logprobs"])
    assert out["usage"]["completion_tokens"] == 2 * len(first["logprobs"]["tokens"])
    assert out["usage"]["prompt_tokens"] == len(server.policy.tokenizer(PROMPT)["input_ids"])
    text = first["text"]
    if first["finish_reason"] != "length" or len(text) < 4:
        pytest.skip("the greedy continuation is too short to cut")
    stop = text[len(text) // 2:len(text) // 2 + 2]  # a stop string the greedy answer certainly contains
    cut = text[:text.find(stop)]
    status, out = post(server.url + "/completions", {"prompt": PROMPT, "max_tokens": 20, "temperature": 0,
                                                     "stop": stop})
    assert status == 200 and out["choices"][0]["text"] == cut
    assert out["choices"][0]["finish_reason"] == "stop" and out["choices"][0]["stop_reason"] == stop
    status, out = post(server.url + "/completions", {"prompt": PROMPT, "max_tokens": 20, "temperature": 0,
                                                     "stop": [stop], "include_stop_str_in_output": True})
    assert out["choices"][0]["text"] == cut + stop


def test_the_chat_api_and_seeds(server: ModelServer) -> None:
    body = {"messages": [{"role": "user", "content": "Turn 1: #P_O#"}], "max_tokens": 8, "seed": 5}
    status, a = post(server.url + "/chat/completions", body)
    assert status == 200 and a["object"] == "chat.completion"
    assert a["choices"][0]["message"]["role"] == "assistant" and a["usage"]["completion_tokens"] >= 1
    _, b = post(server.url + "/chat/completions", body)
    assert a["choices"][0]["message"] == b["choices"][0]["message"]  # a seeded request is reproducible


def test_a_chats_next_request_continues_from_the_stored_cache(server: ModelServer) -> None:
    """The next message of a conversation repeats the earlier prompt and answer: the server runs only what is new
    (the store's hit covers the rest) and answers what a sampler without the store answers."""
    from ragen_plugins_torch.policy import HFPolicy

    store = server.policy.policy.store
    assert store is not None
    status, first = post(server.url + "/completions", {"prompt": PROMPT, "max_tokens": 12, "temperature": 0})
    assert status == 200
    follow = PROMPT + first["choices"][0]["text"] + "<|im_end|>\n<|im_start|>user\nTurn 2:\nState:\n#_PO#<|im_end|>\n"
    hits, reused = store.hits, store.reused_tokens
    status, second = post(server.url + "/completions", {"prompt": follow, "max_tokens": 12, "temperature": 0,
                                                        "logprobs": 1})
    assert status == 200 and store.hits == hits + 1
    assert store.reused_tokens - reused >= len(server.policy.tokenizer(PROMPT)["input_ids"])
    plain = HFPolicy(server.policy.policy.model, server.policy.tokenizer, prefix_cache_mb=0)
    ids = tuple(server.policy.tokenizer(follow)["input_ids"])
    want = plain.generate([GenerationRequest(prompt_ids=ids, max_new_tokens=12, temperature=0.0)])[0]
    got = second["choices"][0]["logprobs"]["token_logprobs"]  # (an end token is not among the answer's tokens)
    assert len(want.token_ids) - 1 <= len(got) <= len(want.token_ids)
    assert got == pytest.approx(list(want.logprobs)[:len(got)], abs=1e-4)


@pytest.mark.parametrize(("path", "body", "status", "words"), [
    ("/completions", {"prompt": 3}, 400, "'prompt' must be"),
    ("/completions", {"prompt": "x", "max_tokens": "many"}, 400, "'max_tokens' must be int"),
    ("/completions", {"prompt": "x", "temperature": -1}, 400, "temperature >= 0"),
    ("/completions", {"prompt": [10**9]}, 400, "valid token ids"),
    ("/chat/completions", {"messages": "hi"}, 400, "'messages' must be"),
    ("/embeddings", {"input": "x"}, 404, "no route POST"),
])
def test_bad_requests_get_openai_style_errors(server: ModelServer, path: str, body: Any, status: int,
                                              words: str) -> None:
    code, out = post(server.url + path, body)
    assert code == status and words in out["error"]["message"]


def test_eval_over_http_completions(server: ModelServer, tmp_path: Path) -> None:
    res = ragen("eval", "-m", server.url, "--env", "sokoban", "--env", "bandit", "--groups", "2", "--group-size", "2",
                *FAST, "--run-dir", str(tmp_path / "e"))
    assert res.exit_code == 0, res.output
    records = lines(tmp_path / "e")
    assert len(records) == 8 and {r["env"] for r in records} == {"sokoban", "bandit"}
    for r in records:
        assert r["messages"][2]["role"] == "assistant" and r["messages"][2]["content"].startswith("<think>")
        assert r["prompt_tokens"] > 0 and r["env_error"] is None
    summary = json.loads((tmp_path / "e" / "summary.json").read_text())
    assert summary["backend"] == "openai" and summary["token_unit"] == "char"
    assert summary["usage"]["requests"] == sum(r["turns"] for r in records)
    assert summary["usage"]["completion_tokens"] > 0 and summary["usage"]["prompt_tokens"] > 0
    assert "pass@2" in res.output


def test_eval_over_http_chat(server: ModelServer, tmp_path: Path) -> None:
    res = ragen("eval", "-m", server.url + "/chat/completions", "--env", "bandit", "--groups", "1", "--group-size",
                "2", *FAST, "--run-dir", str(tmp_path / "e"))
    assert res.exit_code == 0, res.output
    records = lines(tmp_path / "e")
    assert len(records) == 2 and all(1 <= r["turns"] <= 2 for r in records)
    assert all(m["role"] == "assistant" for r in records for m in r["messages"][2::2])
    assert json.loads((tmp_path / "e" / "eval.json").read_text())["backend"] == "openai"


def test_the_first_turn_over_http_is_the_local_models_greedy_answer(server: ModelServer, tmp_path: Path) -> None:
    common = ["--env", "sokoban", "--groups", "1", "--group-size", "1", "--temperature", "0", "rollout.max_turn=1",
              "rollout.max_new_tokens=16", "run.log_level=error"]
    assert ragen("eval", "-m", "tiny", *common, "--run-dir", str(tmp_path / "local")).exit_code == 0
    assert ragen("eval", "-m", server.url, *common, "--run-dir", str(tmp_path / "http")).exit_code == 0
    local, http = lines(tmp_path / "local")[0], lines(tmp_path / "http")[0]
    assert http["messages"] == local["messages"]  # the same prompt text, the same greedy continuation
    assert http["reward"] == local["reward"] and http["success"] == local["success"]


def test_a_real_interruption_resumes(server: ModelServer, tmp_path: Path) -> None:
    run = tmp_path / "e"
    cmd = [sys.executable, "-m", "ragen_core", "eval", "-m", server.url, "--env", "sokoban", "--groups", "6",
           "--group-size", "2", "--batch-groups", "1", "-o", "concurrency=1", *FAST, "--run-dir", str(run)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    path = run / "trajectories.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and path.read_text().count("\n") >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    written = path.read_text().count("\n")
    if proc.returncode == 0:
        pytest.skip("the eval finished before it could be interrupted")
    assert proc.returncode == 130, err
    assert "continue with: ragen eval --resume" in err and 2 <= written < 12
    res = ragen("eval", "--resume", str(run))
    trace = "".join(traceback.format_exception(*res.exc_info)) if res.exc_info else ""
    assert res.exit_code == 0, res.output + trace + err
    records = lines(run)
    assert len(records) == 12 and len({(r["seed"], r["episode_id"]) for r in records}) == 12
    assert sorted({r["seed"] for r in records}) == list(range(123, 129))


def test_connection_refused_is_one_clear_error(tmp_path: Path) -> None:
    # a port bound and never listened on refuses connections, and stays ours: a port found free and released could be
    # taken by a server another test (another xdist worker) starts meanwhile
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        res = ragen("eval", "-m", f"http://127.0.0.1:{closed.getsockname()[1]}/v1", "--env", "bandit", "-o",
                    "retries=0", "--run-dir", str(tmp_path / "e"))
    assert res.exit_code == 1
    assert "does not answer: connection refused" in res.output and "ragen serve" in res.output
    assert "Traceback" not in res.output and not (tmp_path / "e").exists()


def test_a_silent_endpoint_times_out(tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        t0 = time.monotonic()
        res = ragen("eval", "-m", f"http://127.0.0.1:{port}", "--env", "bandit", "-o", "timeout=0.5", "-o",
                    "retries=1", "--run-dir", str(tmp_path / "e"))
    assert res.exit_code == 1 and time.monotonic() - t0 < 30
    assert "does not answer: no answer within 0.5 s (timeout" in res.output and "Traceback" not in res.output


def test_a_server_that_is_not_openai_compatible(tmp_path: Path) -> None:
    class NotFound(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_error(404, "nothing here")

        def log_message(self, *args: Any) -> None:
            pass

    with background_server(NotFound) as (url, _httpd):
        res = ragen("eval", "-m", f"{url}/v1", "--env", "bandit", "--run-dir", str(tmp_path / "e"))
    assert res.exit_code == 1 and "/v1/models answered HTTP 404" in res.output


def test_ragen_serve_command(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "ragen_core", "serve", "tiny", "--port", "0"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving tiny") and " at http://127.0.0.1:" in line, proc.stderr.read()
        url = line.split(" at ")[-1].strip()
        res = ragen("eval", "-m", url, "--env", "bandit", "--groups", "2", "--group-size", "2", *FAST,
                    "--run-dir", str(tmp_path / "e"))
        assert res.exit_code == 0, res.output
        assert len(lines(tmp_path / "e")) == 4
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0


# ------------------------------------------------------------------------------------------------ hardening

class _FakeBackend:
    """The tiny model's tokenizer, and answers of one token after ``delay`` seconds (no model)."""

    def __init__(self, tokenizer: Any, delay: float = 0.0, context_length: int | None = None) -> None:
        self.tokenizer, self.delay, self.context_length = tokenizer, delay, context_length

    def generate(self, requests: list[Any]) -> list[Any]:
        from ragen_core.starpo.rollout import GenerationResult

        time.sleep(self.delay)
        return [GenerationResult(token_ids=(5,), logprobs=(-0.5,), finish_reason="stop", mean_entropy=1.0)
                for _ in requests]

    def seed(self, n: int) -> None:
        pass


def post_raw(url: str, data: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any], Any]:
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read()), resp.headers
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), exc.headers


@pytest.mark.parametrize(("body", "words"), [
    ({"prompt": ""}, "an empty prompt"),
    ({"prompt": "x", "max_tokens": 10**30}, "exceed the model's context of"),
    ({"prompt": "x" * 3000, "max_tokens": 4}, "exceed the model's context of"),
    ({"prompt": "x", "stop": ["a"] * 1000}, "at most 16 strings"),
    ({"prompt": "x", "stop": "y" * 1000}, "of at most 256 characters"),
])
def test_oversized_and_empty_requests_are_client_errors(server: ModelServer, body: Any, words: str) -> None:
    code, out = post(server.url + "/completions", body)
    assert code == 400 and words in out["error"]["message"]
    assert "Traceback" not in out["error"]["message"]


def test_a_deeply_nested_body_is_a_client_error(server: ModelServer) -> None:
    code, out, _ = post_raw(server.url + "/completions", b'{"prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    assert code == 400 and "nested too deeply" in out["error"]["message"]
    assert post(server.url + "/completions", {"prompt": "x", "max_tokens": 2})[0] == 200  # still serving


def test_the_api_key_is_required_when_set(server: ModelServer) -> None:
    with ModelServer(_FakeBackend(server.policy.tokenizer), port=0, api_key="s3cret") as guarded:
        body = json.dumps({"prompt": "x", "max_tokens": 2}).encode()
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            code, out, got = post_raw(guarded.url + "/completions", body, headers)
            assert code == 401 and out["error"]["type"] == "authentication_error"
            assert got["WWW-Authenticate"] == "Bearer"
        code, out, _ = post_raw(guarded.url + "/completions", body, {"Authorization": "Bearer s3cret"})
        assert code == 200 and out["choices"]
        try:
            urllib.request.urlopen(guarded.url + "/models", timeout=30)
            raise AssertionError("GET /v1/models without the key was answered")
        except urllib.error.HTTPError as exc:
            assert exc.code == 401
        with urllib.request.urlopen(guarded.url.removesuffix("/v1") + "/health", timeout=30) as resp:
            assert resp.status == 200  # the health check stays open


def test_a_full_queue_answers_503_with_retry_after(server: ModelServer) -> None:
    with ModelServer(_FakeBackend(server.policy.tokenizer, delay=0.2), port=0, max_queue=2) as small:
        code, out, headers = post_raw(small.url + "/completions", json.dumps({"prompt": "x", "n": 3}).encode())
        assert code == 503 and headers["Retry-After"] == "1" and "queue is full" in out["error"]["message"]
        assert post(small.url + "/completions", {"prompt": "x", "n": 2})[0] == 200  # what fits is served


def test_a_stalled_body_is_dropped_and_the_server_goes_on(server: ModelServer) -> None:
    with ModelServer(_FakeBackend(server.policy.tokenizer), port=0, read_timeout_s=0.5) as srv:
        host, port = srv._httpd.server_address[:2]
        with socket.create_connection((host, port), timeout=10) as sock:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100\r\n\r\n{\"prompt\": ")
            start = time.monotonic()
            assert sock.recv(1024) == b""  # closed by the server once the read timed out
            assert time.monotonic() - start < 5
        assert post(srv.url + "/completions", {"prompt": "x", "max_tokens": 2})[0] == 200


def test_64_concurrent_clients_get_no_connection_errors(server: ModelServer, capfd: pytest.CaptureFixture) -> None:
    """A burst of 64 clients (the stdlib's listen backlog of 5 reset 35-42 of 200 such requests): every request
    answered, and clients that hang up early leave no traceback."""
    with ModelServer(_FakeBackend(server.policy.tokenizer, delay=0.01), port=0) as srv:
        errors: list[str] = []
        body = json.dumps({"prompt": "x", "max_tokens": 2}).encode()

        def client() -> None:
            for _ in range(3):
                try:
                    code, _out, _h = post_raw(srv.url + "/completions", body)
                    if code != 200:
                        errors.append(str(code))
                except Exception as exc:  # a reset or refused connection
                    errors.append(repr(exc))

        threads = [threading.Thread(target=client) for _ in range(64)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        host, port = srv._httpd.server_address[:2]
        for _ in range(8):  # ask and leave before the answer
            with socket.create_connection((host, port), timeout=10) as sock:
                sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                             str(len(body)).encode() + b"\r\n\r\n" + body)
        time.sleep(0.5)
    assert "Traceback" not in capfd.readouterr().err
