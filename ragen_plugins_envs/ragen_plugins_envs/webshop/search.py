"""BM25 product search over a catalog (``bm25s``), standing in for WebShop's Lucene index.

WebShop indexes, per product, ``title + description + first bullet point + "name: v1, v2, and name: …"`` lower-cased
(``search_engine/convert_product_file_format.py``) with pyserini's Lucene BM25 (k1 = 0.9, b = 0.4) and returns the
top 50 hits. Here the same documents are indexed with ``bm25s`` (``method="lucene"``, same k1 and b) through an
analyzer close to pyserini's default English one: possessive ``'s`` removed, alphanumeric tokens, Lucene's English
stop words, Porter stemming (``snowballstemmer``'s ``porter``). Only documents with a positive score are returned,
best first, ties by catalog order. The index is built once per catalog and reused by
every env on it (:func:`get_search_engine`); query results are memoised.
"""

from __future__ import annotations

import functools
import re
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from ragen_plugins_envs.webshop.catalog import Catalog

__all__ = ["LUCENE_STOPWORDS", "SEARCH_RETURN_N", "SearchEngine", "get_search_engine", "stem", "tokenize"]

#: how many hits a search returns (WebShop's SEARCH_RETURN_N)
SEARCH_RETURN_N = 50

#: Lucene's English stop words
LUCENE_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these they "
    "this to was will with".split())

_POSSESSIVE = re.compile(r"['’]s\b")
_TOKEN = re.compile(r"[a-z0-9]+")


@functools.lru_cache(maxsize=1 << 16)
def stem(token: str) -> str:
    """Porter stem of a lower-case token (Lucene's ``PorterStemFilter``, via ``snowballstemmer``)."""
    return _porter().stemWord(token)


@functools.lru_cache(maxsize=1)
def _porter() -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer("porter")


def tokenize(text: str) -> list[str]:
    """Analyzer tokens of ``text`` (see the module docstring)."""
    text = _POSSESSIVE.sub("", text.lower())
    return [stem(t) for t in _TOKEN.findall(text) if t not in LUCENE_STOPWORDS]


class SearchEngine:
    """BM25 index of one catalog. :meth:`search` returns product indices, best first."""

    def __init__(self, catalog: Catalog, k1: float = 0.9, b: float = 0.4, cache_size: int = 4096) -> None:
        import bm25s

        self.catalog = catalog
        corpus = [tokenize(p.search_document) for p in catalog.products]
        self._retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
        self._retriever.index(corpus, show_progress=False)
        self._vocab = self._retriever.vocab_dict
        self._cache: OrderedDict[tuple[str, int], tuple[int, ...]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every product for ``query`` (zeros when no query token is indexed)."""
        ids = [self._vocab[t] for t in tokenize(query) if t and t in self._vocab]
        if not ids:
            return np.zeros(len(self.catalog), dtype=np.float32)
        return np.asarray(self._retriever.get_scores(ids), dtype=np.float32)

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> tuple[int, ...]:
        """Indices of the top ``k`` products with a positive score for ``query``."""
        key = (query, k)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        scores = self.scores(query)
        positive = np.flatnonzero(scores > 0)
        order = positive[np.argsort(-scores[positive], kind="stable")][:k]
        result = tuple(int(i) for i in order)
        with self._lock:
            self._cache[key] = result
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return result


_ENGINES: OrderedDict[tuple[object, ...], SearchEngine] = OrderedDict()
_ENGINES_LOCK = threading.Lock()
_MAX_ENGINES = 16


def get_search_engine(catalog: Catalog) -> SearchEngine:
    """The search engine of ``catalog``, built once per catalog (the 16 most recent are kept)."""
    with _ENGINES_LOCK:
        engine = _ENGINES.get(catalog.key)
        if engine is None or engine.catalog is not catalog:
            engine = SearchEngine(catalog)
            _ENGINES[catalog.key] = engine
            while len(_ENGINES) > _MAX_ENGINES:
                _ENGINES.popitem(last=False)
        _ENGINES.move_to_end(catalog.key)
        return engine
