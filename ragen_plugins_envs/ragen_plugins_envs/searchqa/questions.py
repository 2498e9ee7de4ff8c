"""Questions for SearchQA: a HotpotQA loader and a question set generated from a corpus.

**HotpotQA** (:func:`load_hotpotqa`) reads the official JSON array (``hotpot_train_v1.1.json``: ``_id``,
``question``, ``answer``, ``supporting_facts`` as ``[[title, sentence_id], ...]``, ``context`` as
``[[title, [sentence, ...]], ...]``, ``type``, ``level``), Hugging Face ``hotpot_qa`` rows (``id``; ``supporting_facts``
and ``context`` as column dicts ``{"title": [...], "sent_id"/"sentences": [...]}``), or JSONL of either. Rows with
``golden_answers``/``answers`` lists (Search-R1/FlashRAG) are accepted too. Every row needs a question and a
non-empty answer. :func:`hotpotqa_context_corpus` turns the rows' ``context`` paragraphs into a corpus (one document
per distinct title, its sentences joined), which makes a HotpotQA file self-contained ("distractor" setting).

**Generated questions** (:func:`generate_questions`) come from a corpus's documents (title, text, one-line
description — the offline wiki corpus has all three), deterministic for a corpus and seed. Facts are read from a
document's description and checked against its text; every answer is verified to appear (after SQuAD
normalisation, as whole words) in the title + text of its supporting document. Single-hop families:

- ``creator`` — description ``"<year> <kind> by <Name>"`` (film, novel, opera, painting, ...) with ``<Name>`` in
  the text: "Who directed the 1942 film "Casablanca"?" → the name;
- ``year`` — the same descriptions with the year in the text: "In what year was the novel "X" published?";
- ``capital`` — "Its capital (and largest city) is <Name>" in the text: "What is the capital of X?";
- ``nationality`` — a person's description ``"<Demonym> <occupation> (<born>–<died>)"`` (the occupation's head
  word must name a person: ``-er``, ``-ist``, ``-ian``, ... or a listed word such as ``poet``) with the demonym in the
  text: "What nationality was the painter X?";
- ``born``/``died`` — the same descriptions, with the year in the text: "In what year was the Russian writer X born?";
- ``describe`` — a description that is unique in the corpus and specific (a digit and 3+ words, or a proper name
  and 4+ words):
  "What is the name of the 1875 opera by Georges Bizet?" → the title (without a trailing ``(qualifier)``).

Two-hop (``bridge:<family>``) questions chain two documents: a document A whose text mentions document B by its
title (case-sensitive whole words; titles shared by two documents are skipped), and a fact of B from the families
above except ``describe``. B's name is replaced by a type phrase and the bridge: "Who directed the 1942 film
mentioned in the summary of "Humphrey Bogart"?". A bridge is kept only when the answer does not appear in A (so
both documents are needed) and no other document mentioned in A fits the type phrase.

Each question carries ``support`` (the ids of the documents that hold the answer chain, B last) and ``query`` (a
question-derived search query: the oracle's first action).
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragen_core.errors import RagenError
from ragen_plugins_envs.searchqa.corpus import Corpus, Document
from ragen_plugins_envs.searchqa.scoring import normalize_answer

__all__ = [
    "HOPS",
    "Question",
    "QuestionError",
    "generate_questions",
    "hotpotqa_context_corpus",
    "load_hotpotqa",
    "load_hotpotqa_rows",
]

#: which generated questions to use: single-hop, two-hop or both
HOPS = ("mixed", "single", "multi")


class QuestionError(RagenError, ValueError):
    """A question file could not be read, or a corpus yields no questions."""


@dataclass(frozen=True)
class Question:
    """A question with its gold answer(s).

    :ivar id: stable id (HotpotQA's ``_id``; ``gen-<family>-<n>`` for generated ones).
    :ivar question: the question text.
    :ivar answers: the gold answers (any exact match counts).
    :ivar hops: 1 or 2 (HotpotQA questions count as 2).
    :ivar kind: the family (``creator``, ``bridge:capital``, ``hotpotqa:bridge``, ...).
    :ivar support: ids/titles of the supporting documents.
    :ivar query: the search query an oracle issues (derived from the question).
    """

    id: str
    question: str
    answers: tuple[str, ...]
    hops: int = 1
    kind: str = ""
    support: tuple[str, ...] = ()
    query: str = ""


# ================================================================================================ HotpotQA

def _read_json_rows(path: Path) -> list[tuple[Any, str]]:
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise QuestionError(f"cannot read question file {path}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise QuestionError(f"question file {path} is not UTF-8: {exc}") from exc
    if raw.lstrip().startswith("["):
        try:
            rows = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise QuestionError(f"{path}: invalid JSON: {exc}") from exc
        return [(row, f"{path}: row {i}") for i, row in enumerate(rows)]
    out = []
    for number, line in enumerate(raw.splitlines(), start=1):
        if line.strip():
            try:
                out.append((json.loads(line), f"{path}:{number}"))
            except json.JSONDecodeError as exc:
                raise QuestionError(f"{path}:{number}: invalid JSON: {exc}") from exc
    return out


@functools.lru_cache(maxsize=8)
def _cached_rows(resolved: str, _mtime_ns: int, _size: int) -> tuple[tuple[Any, str], ...]:
    return tuple(_read_json_rows(Path(resolved)))


def load_hotpotqa_rows(path: str | Path) -> tuple[tuple[Any, str], ...]:
    """The raw rows of a HotpotQA-format file with a location string each (cached until the file changes)."""
    local = Path(path).expanduser()
    if not local.is_file():
        raise QuestionError(f"question file {str(path)!r} does not exist")
    stat = local.stat()
    return _cached_rows(str(local.resolve()), stat.st_mtime_ns, stat.st_size)


def _supporting_titles(value: Any) -> tuple[str, ...]:
    titles: list[str] = []
    if isinstance(value, Mapping):
        titles = [str(t) for t in value.get("title", []) or []]
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (list, tuple)) and item:
                titles.append(str(item[0]))
    return tuple(dict.fromkeys(titles))


def _context_paragraphs(value: Any) -> list[tuple[str, str]]:
    """``[(title, text)]`` from either context layout."""
    out: list[tuple[str, str]] = []
    if isinstance(value, Mapping):
        for title, sentences in zip(value.get("title", []) or [], value.get("sentences", []) or []):
            out.append((str(title), _join_sentences(sentences)))
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (list, tuple)) and len(item) == 2:
                out.append((str(item[0]), _join_sentences(item[1])))
    return out


def _join_sentences(sentences: Any) -> str:
    if isinstance(sentences, str):
        return sentences.strip()
    if isinstance(sentences, (list, tuple)):
        return " ".join(str(s).strip() for s in sentences if str(s).strip())
    return ""


def _row_answers(row: Mapping[str, Any], where: str) -> tuple[str, ...]:
    raw: Any = row.get("answer")
    if raw is None:
        raw = row.get("golden_answers", row.get("answers"))
    if isinstance(raw, str):
        answers = [raw]
    elif isinstance(raw, (list, tuple)) and all(isinstance(a, str) for a in raw):
        answers = list(raw)
    else:
        raise QuestionError(f"{where}: a row needs an 'answer' string (or a 'golden_answers' list)")
    answers = [a.strip() for a in answers if normalize_answer(a)]
    if not answers:
        raise QuestionError(f"{where}: the answer is empty after normalisation")
    return tuple(dict.fromkeys(answers))


def load_hotpotqa(path: str | Path) -> tuple[Question, ...]:
    """Questions of a HotpotQA-format file (layouts in the module docstring).

    :raises QuestionError: unreadable file, a row without a question or answer, or no rows.
    """
    questions = []
    for i, (row, where) in enumerate(load_hotpotqa_rows(path)):
        if not isinstance(row, dict):
            raise QuestionError(f"{where}: each row must be a JSON object, got {type(row).__name__}")
        text = row.get("question")
        if not isinstance(text, str) or not text.strip():
            raise QuestionError(f"{where}: a row needs a non-empty 'question' string (has {sorted(row)})")
        answers = _row_answers(row, where)
        qid = str(row.get("_id", row.get("id", f"row-{i}")))
        kind = str(row.get("type") or "question")
        question = " ".join(text.split())
        questions.append(Question(id=qid, question=question, answers=answers, hops=2, kind=f"hotpotqa:{kind}",
                                  support=_supporting_titles(row.get("supporting_facts")), query=question))
    if not questions:
        raise QuestionError(f"{path}: no questions")
    return tuple(questions)


def hotpotqa_context_corpus(path: str | Path) -> Corpus:
    """A corpus of the ``context`` paragraphs of a HotpotQA file (first occurrence of each title wins).

    :raises QuestionError: no row has context paragraphs.
    """
    seen: dict[str, Document] = {}
    for row, _where in load_hotpotqa_rows(path):
        if not isinstance(row, dict):
            continue
        for title, text in _context_paragraphs(row.get("context")):
            title = title.strip()
            if title and text and title not in seen:
                seen[title] = Document(id=title, title=title, text=text)
    if not seen:
        raise QuestionError(f"{path}: no 'context' paragraphs to build a corpus from",
                            hint="pass a corpus file instead (corpus: PATH)")
    return Corpus.from_documents(seen.values(), name=f"hotpotqa-context:{Path(path).name}")


# ================================================================================================ generation

_PAREN_SUFFIX = re.compile(r"\s*\([^()]*\)\s*$")
_CREATOR = re.compile(r"^(?P<year>\d{4}) (?P<kind>[a-z][a-z\- ]*?) (?:by|directed by|written by|painted by) "
                      r"(?P<name>[A-Z][^,;()]*[^,;()\s])$")
_YEAR_KIND = re.compile(r"^(?P<year>\d{4}) (?P<kind>[a-z][a-z\- ]*?)(?: (?:by|directed by|written by) .*)?$")
_CAPITAL = re.compile(r"\b[Ii]ts capital(?: and (?:largest|most populous) city)?(?: city)? is "
                      r"(?P<name>[A-Z][\w'\-]+(?: [A-Z][\w'\-]+){0,3})")
_PERSON = re.compile(r"^(?P<demonym>[A-Z][a-z]+(?:-[A-Z][a-z]+)?) (?P<job>[a-z][a-z\- ]*?(?: and [a-z][a-z\- ]*?)?) "
                     r"\((?:c\. ?)?(?P<born>\d{3,4}) ?[–-] ?(?:c\. ?)?(?P<died>\d{3,4})\)$")
_NOT_DEMONYMS = frozenset({"Ancient", "Medieval", "Classical", "Former", "Fictional", "Legendary", "Mythological",
                           "Islamic", "Christian", "Catholic", "Muslim", "Jewish", "Buddhist", "Hindu", "Early",
                           "Late", "Prominent", "Famous", "Renaissance", "Baroque", "Romantic"})
_WORD = re.compile(r"\w+")

# kind (last word of the description's kind) -> (creator verb, year verb)
_KIND_VERBS: dict[str, tuple[str, str]] = {
    "film": ("directed", "released"), "movie": ("directed", "released"),
    "novel": ("wrote", "published"), "novella": ("wrote", "published"), "book": ("wrote", "published"),
    "poem": ("wrote", "published"), "play": ("wrote", "first performed"), "essay": ("wrote", "published"),
    "treatise": ("wrote", "published"), "tragedy": ("wrote", "written"), "comedy": ("wrote", "written"),
    "painting": ("painted", "painted"), "fresco": ("painted", "painted"), "mural": ("painted", "painted"),
    "opera": ("composed", "composed"), "symphony": ("composed", "composed"), "ballet": ("composed", "composed"),
    "composition": ("composed", "composed"), "oratorio": ("composed", "composed"), "concerto": ("composed", "composed"),
    "song": ("recorded", "released"), "single": ("recorded", "released"), "album": ("recorded", "released"),
    "sculpture": ("sculpted", "made"), "statue": ("sculpted", "made"),
}


def _clean_title(title: str) -> str:
    """The title without a trailing ``(qualifier)``: ``Casablanca (film)`` → ``Casablanca``."""
    cleaned = _PAREN_SUFFIX.sub("", title).strip()
    return cleaned or title


_normalized = functools.lru_cache(maxsize=1 << 15)(normalize_answer)


def _norm_contains(haystack: str, needle: str) -> bool:
    """Whether ``needle`` occurs in ``haystack`` as whole words, both SQuAD-normalised."""
    n = _normalized(needle)
    return bool(n) and f" {n} " in f" {_normalized(haystack)} "


def _proper_words(corpus: Corpus) -> frozenset[str]:
    """Words written capitalised after a lower-case word more often than in lower case (``Dutch``, ``Veldorian``):
    a description starting with one keeps its capital."""
    text = "\n".join(doc.text for doc in corpus)
    capital = Counter(_MID_CAPITAL.findall(text))
    lower = Counter(_LOWER_WORD.findall(text))
    return frozenset(w for w, n in capital.items() if n > lower[w.lower()])


_MID_CAPITAL = re.compile(r"(?:(?<=[a-z] )|(?<=[a-z], ))([A-Z][a-z]+)\b")
_LOWER_WORD = re.compile(r"\b[a-z]+\b")


def _lower_first(phrase: str, proper: frozenset[str]) -> str:
    """Lower-case a description's first letter unless its first word is a proper word: written with more capitals
    (``NATO``), followed by another capitalised word (``Prime Minister``), or one of ``proper``."""
    words = phrase.split(" ")
    first = words[0]
    if not first or not first[0].isupper() or (len(first) > 1 and not first[1:].islower()):
        return phrase
    if (len(words) > 1 and words[1][:1].isupper()) or first in proper:
        return phrase
    return phrase[0].lower() + phrase[1:]


_PERSON_SUFFIX = re.compile(r"(?:er|or|ist|ian|man|woman|ess)$")
_PERSON_WORDS = frozenset({
    "pope", "king", "queen", "saint", "monk", "nun", "general", "chief", "pharaoh", "sultan", "caliph", "shah",
    "tsar", "khan", "prince", "princess", "duke", "lord", "cardinal", "bishop", "rabbi", "imam", "guru", "sage",
    "yogi", "lama", "admiral", "marshal", "pilot", "chef", "architect", "diplomat", "bard", "friar", "hermit",
    "abbot", "prophet", "hero", "heroine", "poet", "mystic", "cleric", "critic", "scholar", "athlete", "president",
    "student", "agent", "merchant", "servant", "soprano", "tenor", "baritone", "aviator", "astronaut", "cosmonaut",
    "polymath", "economist", "emperor", "empress", "regent", "consul", "senator", "statesman", "jurist", "satirist",
})


_STOP_HEAD = frozenset({"of", "in", "from", "by", "for", "to", "at", "on", "with", "who", "that", "during", "and"})


def _is_person_job(job: str) -> bool:
    """Whether a description's role words name a person (``painter and illustrator``, ``king of the Franks``), not
    a thing (``empire``, ``state ruled by the pope``): the last word before the first preposition or ``and``."""
    words = []
    for word in job.split():
        if word in _STOP_HEAD:
            break
        words.append(word)
    head = words[-1] if words else ""
    return head in _PERSON_WORDS or bool(_PERSON_SUFFIX.search(head))


@dataclass(frozen=True)
class _Fact:
    """A single-hop fact about one document, phrased two ways."""

    family: str
    doc: Document
    answer: str
    template: str  # the question with {ref} where the subject goes
    named_ref: str  # the subject by name (single-hop)
    type_ref: str  # the subject by type (two-hop), '' when the family does not bridge
    head: str  # the type's head word, for the ambiguity check


def _facts_of(doc: Document, proper: frozenset[str]) -> list[_Fact]:
    facts: list[_Fact] = []
    desc, text, name = doc.description, doc.text, _clean_title(doc.title)
    searchable = doc.searchable
    m = _CREATOR.match(desc)
    if m:
        kind = m["kind"]
        head = kind.split()[-1]
        verbs = _KIND_VERBS.get(head)
        creator = m["name"].strip()
        if verbs and _norm_contains(text, creator) and not _norm_contains(name, creator):
            facts.append(_Fact("creator", doc, creator, f"Who {verbs[0]} {{ref}}?",
                               f'the {m["year"]} {kind} "{name}"', f'the {m["year"]} {kind}', head))
    m = _YEAR_KIND.match(desc)
    if m:
        kind = m["kind"]
        head = kind.split()[-1]
        verbs = _KIND_VERBS.get(head)
        year = m["year"]
        if verbs and _norm_contains(text, year) and not _norm_contains(name, year):
            creator = _CREATOR.match(desc)
            type_ref = f"the {kind} by {creator['name'].strip()}" if creator else f"the {kind}"
            facts.append(_Fact("year", doc, year, f"In what year was {{ref}} {verbs[1]}?", f'the {kind} "{name}"',
                               type_ref, head))
    m = _CAPITAL.search(text)
    if m and not _norm_contains(name, m["name"]) and m["name"] != name:
        type_ref = ""
        if desc and not _norm_contains(desc, m["name"]) and len(desc.split()) <= 8:
            type_ref = "the " + _lower_first(_PAREN_SUFFIX.sub("", desc), proper)
        facts.append(_Fact("capital", doc, m["name"], "What is the capital of {ref}?", name, type_ref,
                           desc.split()[0].lower() if desc else ""))
    m = _PERSON.match(desc)
    if m and m["demonym"] not in _NOT_DEMONYMS and _is_person_job(m["job"]):
        demonym, job = m["demonym"], m["job"].strip()
        head = job.split(" and ")[0].split()[-1] if job.split() else ""
        if re.search(r"\b" + re.escape(demonym) + r"\b", text):
            facts.append(_Fact("nationality", doc, demonym, "What nationality was {ref}?", f"the {job} {name}",
                               f"the {job}", head))
        for family, year, verb in (("born", m["born"], "born"), ("died", m["died"], "die")):
            if _norm_contains(text, year):
                template = (f"In what year was {{ref}} {verb}?" if family == "born"
                            else f"In what year did {{ref}} {verb}?")
                facts.append(_Fact(family, doc, year, template, f"the {demonym} {job} {name}",
                                   f"the {demonym} {job}", head))
    return [f for f in facts if _norm_contains(searchable, f.answer)]


def _describe_question(doc: Document, desc_counts: Counter[str], proper: frozenset[str]) -> Question | None:
    desc = doc.description.strip()
    name = _clean_title(doc.title)
    if not desc or desc_counts[desc.lower()] != 1:
        return None
    has_digit = any(ch.isdigit() for ch in desc)
    if len(desc.split()) < (3 if has_digit else 4):
        return None
    specific = has_digit or any(w[:1].isupper() for w in desc.split()[1:])
    if not specific or _norm_contains(desc, name) or len(name.split()) > 6 or not _norm_contains(doc.searchable, name):
        return None
    phrase = _lower_first(desc, proper)
    person = (m := _PERSON.match(desc)) is not None and _is_person_job(m["job"])
    question = f"Who was the {phrase}?" if person else f"What is the name of the {phrase}?"
    return Question(id="", question=question, answers=(name,), hops=1, kind="describe", support=(doc.id,),
                    query=question)


def _mention_index(corpus: Corpus, targets: Iterable[Document]) -> dict[tuple[str, ...], Document]:
    """Token tuple of each target's clean title → target, skipping titles that two documents share."""
    counts = Counter(_clean_title(d.title) for d in corpus)
    index: dict[tuple[str, ...], Document] = {}
    for doc in targets:
        name = _clean_title(doc.title)
        tokens = tuple(_WORD.findall(name))
        if name != doc.title.strip() or counts[name] != 1 or not tokens or len(name) < 4 or not name[0].isupper():
            continue  # a "(qualifier)" title is ambiguous by its own admission: "Prince (musician)"
        index[tokens] = doc
    return index


def _mentions(text: str, index: Mapping[tuple[str, ...], Document], first: set[str], longest: int) -> list[Document]:
    """Targets whose title occurs in ``text`` as whole words, not glued (by spaces only) to another capitalised
    word: "Magdalena Carmen Frida" does not mention "Carmen"."""
    tokens = _WORD.findall(text)
    found: dict[str, Document] = {}
    spans: list[re.Match[str]] = []

    def glued(a: int, b: int) -> bool:  # tokens a and b are neighbours and b is capitalised
        if not (0 <= a < len(tokens) and 0 <= b < len(tokens) and tokens[b][:1].isupper()):
            return False
        if not spans:
            spans.extend(_WORD.finditer(text))
        return not text[spans[min(a, b)].end():spans[max(a, b)].start()].strip()

    for i, tok in enumerate(tokens):
        if tok not in first:
            continue
        for n in range(min(longest, len(tokens) - i), 0, -1):
            doc = index.get(tuple(tokens[i:i + n]))
            if doc is None:
                continue
            if not glued(i, i - 1) and not glued(i + n - 1, i + n):
                found.setdefault(doc.id, doc)
            break
    return list(found.values())


def _single_hop(corpus: Corpus) -> tuple[list[Question], dict[str, list[_Fact]]]:
    desc_counts = Counter(d.description.strip().lower() for d in corpus if d.description)
    proper = _proper_words(corpus)
    singles: list[Question] = []
    facts_by_doc: dict[str, list[_Fact]] = {}
    for doc in corpus:
        facts = _facts_of(doc, proper)
        if facts:
            facts_by_doc[doc.id] = facts
        for fact in facts:
            question = fact.template.format(ref=fact.named_ref)
            singles.append(Question(id="", question=question, answers=(fact.answer,), hops=1, kind=fact.family,
                                    support=(doc.id,), query=question))
        described = _describe_question(doc, desc_counts, proper)
        if described is not None:
            singles.append(described)
    return singles, facts_by_doc


def _two_hop(corpus: Corpus, facts_by_doc: Mapping[str, list[_Fact]]) -> list[Question]:
    targets = [corpus.get(doc_id) for doc_id in facts_by_doc]
    index = _mention_index(corpus, [d for d in targets if d is not None])
    if not index:
        return []
    first = {key[0] for key in index}
    longest = max(len(key) for key in index)
    out: list[Question] = []
    for a in corpus:
        mentioned = [b for b in _mentions(a.text, index, first, longest) if b.id != a.id]
        if not mentioned:
            continue
        a_name = _clean_title(a.title)
        for b in mentioned:
            for fact in facts_by_doc.get(b.id, []):
                if not fact.type_ref or not fact.head or _norm_contains(a.searchable, fact.answer):
                    continue
                rivals = [o for o in mentioned if o.id != b.id and re.search(
                    r"\b" + re.escape(fact.head) + r"\b", f"{o.description} {o.title}", re.IGNORECASE)]
                if rivals:
                    continue
                ref = f'{fact.type_ref} mentioned in the summary of "{a_name}"'
                question = fact.template.format(ref=ref)
                out.append(Question(id="", question=question, answers=(fact.answer,), hops=2,
                                    kind=f"bridge:{fact.family}", support=(a.id, b.id),
                                    query=f"{a_name} {fact.type_ref[4:]}"))
    return out


@functools.lru_cache(maxsize=8)
def _generate_all(fingerprint: str, corpus_ref: _CorpusRef) -> tuple[tuple[Question, ...], tuple[Question, ...]]:
    corpus = corpus_ref.corpus
    singles, facts_by_doc = _single_hop(corpus)
    multis = _two_hop(corpus, facts_by_doc)

    def number(items: Sequence[Question]) -> tuple[Question, ...]:
        seen: set[tuple[str, str]] = set()
        out = []
        counters: Counter[str] = Counter()
        for q in items:
            key = (q.question, q.answers[0])
            if key in seen:
                continue
            seen.add(key)
            counters[q.kind] += 1
            out.append(Question(id=f"gen-{q.kind.replace(':', '-')}-{counters[q.kind]}", question=q.question,
                                answers=q.answers, hops=q.hops, kind=q.kind, support=q.support, query=q.query))
        return tuple(out)

    return number(singles), number(multis)


class _CorpusRef:
    """Hashes by corpus fingerprint so the generator's cache does not hash the documents."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus

    def __hash__(self) -> int:
        return hash(self.corpus.fingerprint)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _CorpusRef) and other.corpus.fingerprint == self.corpus.fingerprint


def generate_questions(corpus: Corpus, *, hops: str = "mixed", seed: int | None = 0) -> tuple[Question, ...]:
    """Questions generated from ``corpus`` (families in the module docstring).

    :param hops: ``single`` (one document), ``multi`` (two-hop bridges) or ``mixed`` (both).
    :param seed: the order is shuffled with ``numpy.random.default_rng(seed)``; None keeps corpus order.
    :raises QuestionError: the corpus yields no question of the requested kind.
    """
    if hops not in HOPS:
        raise QuestionError(f"hops must be one of {', '.join(HOPS)}, got {hops!r}")
    singles, multis = _generate_all(corpus.fingerprint, _CorpusRef(corpus))
    chosen = {"single": singles, "multi": multis, "mixed": singles + multis}[hops]
    if not chosen:
        raise QuestionError(f"corpus {corpus.name} yields no {hops}-hop questions",
                            hint="documents need one-line descriptions (title, text, description) to generate "
                                 "questions from; or use a HotpotQA question file")
    if seed is None:
        return chosen
    order = np.random.default_rng(seed).permutation(len(chosen))
    return tuple(chosen[int(i)] for i in order)
