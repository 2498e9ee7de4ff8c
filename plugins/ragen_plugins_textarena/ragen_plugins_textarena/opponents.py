"""The opponents that play player 1 of a two-player TextArena game.

``random`` (the default) and ``first`` are scripted, offline and deterministic under the episode's seed. Neither
knows any game: each reads the square-bracketed tokens of its own observation (the moves TextArena's boards list,
such as ``Available Moves: [a2 b4], [a2 c3]`` or ``'[check]', '[bet X]'``, and the examples of the rules, such as
``'[col 4]'``) and **tries each on a copy of the game**, keeping the first that the game accepts. Candidates come
in three tiers, each tried before the next:

1. the tokens of the messages it received since its previous move (the current board and its move list);
2. the tokens of all its earlier messages (the rules' examples);
3. fillings of those tokens: their numbers replaced by numbers from 0 to the largest number on the board (at least
   10, at most 100), their board squares (``a2``) by squares of a board up to the largest file and rank on it (a
   second square within two files and ranks of the first), and a placeholder capital (``X`` in ``[bet X]``) by such
   a number (mostly up to 10); where no token has such a part, the bare numbers ``[0]`` .. ``[largest]``.

``random`` shuffles each tier with a generator seeded by the episode's seed (so the move it plays is drawn
uniformly from the valid candidates of the first tier that has one); ``first`` keeps the reading order (the first
listed valid move, a weak and fully predictable player). At most ``max_tries`` candidates are tried per move;
when none is accepted the opponent plays its first candidate anyway, and TextArena's invalid-move rule decides:
after too many such moves the opponent loses (a won game for the agent), or, in a game that does not end that way,
the env cuts the episode (see :mod:`ragen_plugins_textarena.env`).

``llm`` asks an OpenAI-compatible chat endpoint (``opponent_url``, e.g. a local vLLM or ``ragen serve``) through
TextArena's own ``OpenAIAgent``, showing it the observation TextArena shows player 1 (the game id's observation
wrapper); its answer is played as it is, and TextArena's invalid-move rule applies to it like to any player.
"""

from __future__ import annotations

import itertools
import os
import random
import re
from collections.abc import Iterator
from typing import Any

import attrs

from ragen_plugins_textarena.game import GAME_ID, Played, TextArenaGame

__all__ = ["ChatOpponent", "OpponentError", "OpponentMove", "ScriptedOpponent", "bracketed", "fillings", "make_opponent"]

_BRACKETED = re.compile(r"\[([^\[\]\n]{1,60})\]")
_SLOT = re.compile(r"(?<![A-Za-z])([a-z])(\d{1,2})(?!\d)|(\d+)|(?<![A-Za-z])([A-Z])(?![A-Za-z0-9])")
_SQUARE = re.compile(r"(?<![A-Za-z])([a-z])(\d{1,2})(?!\d)")
_NUMBER = re.compile(r"\d+")


class OpponentError(RuntimeError):
    """The opponent could not make a move (its chat endpoint failed, or the game raised on its move)."""


@attrs.frozen
class OpponentMove:
    """One opponent move: ``tries`` candidates tried; ``found``: the move played was accepted (a scripted opponent
    that found none plays a fallback, which the game may reject)."""

    tries: int
    found: bool


def _outer_spans(text: str) -> list[str]:
    """The outermost ``[...]`` spans of ``text`` (nested brackets inside, such as Tak's ``[place () {(3,2): [C0]}]``;
    none across lines or longer than 80 characters)."""
    spans, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "\n":
            depth = 0
        elif ch == "[":
            start = i if depth == 0 else start
            depth += 1
        elif ch == "]" and depth:
            depth -= 1
            if depth == 0 and i - start <= 80:
                spans.append(text[start:i + 1])
    return spans


def bracketed(texts: list[str], skip: frozenset[str] = frozenset()) -> list[str]:
    """The distinct ``[token]`` strings of ``texts`` in reading order: the outermost spans, then the innermost
    tokens not among them (those whose inside is in ``skip``, such as role tags, left out)."""
    seen: dict[str, None] = {}
    for text in texts:
        for token in [*_outer_spans(text), *(f"[{inner}]" for inner in _BRACKETED.findall(text))]:
            if token[1:-1].strip() and token[1:-1].strip() not in skip:
                seen.setdefault(token, None)
    return list(seen)


def _board_limits(texts: list[str]) -> tuple[int, str, int]:
    """The largest number (10..100), file letter (at least h) and rank (at least 8) written in ``texts``."""
    numbers = [int(n) for t in texts for n in _NUMBER.findall(t) if len(n) < 4]
    squares = [m for t in texts for m in _SQUARE.findall(t)]
    top = min(100, max([10, *numbers]))
    file = max(["h", *(f for f, _ in squares)])
    rank = min(26, max([8, *(int(r) for _, r in squares)]))
    return top, file, rank


def _fill(template: str, rng: random.Random, top: int, last_file: int, rank: int) -> str:
    """``template`` with each number, square and placeholder capital replaced by a random value: numbers in
    ``0..top`` (in ``0..10`` seven times in ten: counts and indices are mostly small), squares on files ``a..``
    (index ``last_file``) and ranks ``1..rank``, a square after the first within two files and ranks of the one
    before it (most board moves are short)."""
    previous: list[tuple[int, int]] = []

    def fill(match: re.Match[str]) -> str:
        if not match.group(1):
            return str(rng.randint(0, top if rng.random() < 0.3 else min(top, 10)))
        if previous:
            f, r = previous[-1]
            f, r = min(max(f + rng.randint(-2, 2), 0), last_file), min(max(r + rng.randint(-2, 2), 1), rank)
        else:
            f, r = rng.randint(0, last_file), rng.randint(1, rank)
        previous.append((f, r))
        return f"{chr(ord('a') + f)}{r}"

    return _SLOT.sub(fill, template)


def fillings(tokens: list[str], texts: list[str], rng: random.Random, limit: int) -> Iterator[str]:
    """Up to ``limit`` distinct new tokens made from ``tokens`` by :func:`_fill`, within the limits the ``texts``
    show (:func:`_board_limits`)."""
    templates = [t for t in tokens if _SLOT.search(t)]
    if not templates:
        return
    top, file, rank = _board_limits(texts)
    seen = set(tokens)
    for _ in range(limit * 4):
        candidate = _fill(rng.choice(templates), rng, top, ord(file) - ord("a"), rank)
        if candidate not in seen:
            seen.add(candidate)
            yield candidate
            limit -= 1
            if limit <= 0:
                return


class ScriptedOpponent:
    """The offline opponents ``random`` and ``first`` (see the module docstring)."""

    def __init__(self, order: str = "random", max_tries: int = 100) -> None:
        self.order, self.max_tries = order, max_tries
        self.rng = random.Random(0)

    def reset(self, seed: int) -> None:
        """Seed the candidate order for an episode."""
        self.rng = random.Random(f"textarena-opponent-{seed}")

    def candidates(self, game: TextArenaGame, new: list[Any]) -> Iterator[str]:
        """The candidate moves of the player to move, tier by tier (``new``: its messages since its last move)."""
        skip = frozenset(["GAME", *game.roles().values()])
        recent = [str(m[1]) for m in new if m[0] == GAME_ID]  # the game's messages: no other player's words
        history = [str(m[1]) for m in game.logs.get(game.current, []) if m[0] == GAME_ID]
        first = bracketed(recent, skip)
        second = [t for t in bracketed(history, skip) if t not in first]
        for tier in (first, second):
            if self.order == "random":
                self.rng.shuffle(tier)
        yield from itertools.chain(first, second)
        numbers = [f"[{n}]" for n in range(_board_limits(recent or history)[0] + 1)]
        if self.order == "random":
            self.rng.shuffle(numbers)
        yield from fillings(first + second, recent or history, self.rng, self.max_tries)
        yield from (n for n in numbers if n not in first and n not in second)

    def move(self, game: TextArenaGame) -> OpponentMove:
        """Play one move for the player to move of ``game``."""
        new = game.observe()
        fallback, tries = None, 0
        for candidate in itertools.islice(self.candidates(game, new), self.max_tries):
            fallback = fallback or candidate
            tries += 1
            twin = game.clone()
            try:
                played = twin.play(candidate)
            except Exception:  # noqa: BLE001 - a move the game cannot take is no candidate
                continue
            if not played.invalid:
                game.adopt(twin)
                return OpponentMove(tries, True)
        played = _play_on_copy(game, fallback or "[pass]")
        return OpponentMove(tries, not played.invalid)


class ChatOpponent:
    """The ``llm`` opponent: TextArena's ``OpenAIAgent`` against ``url`` (an OpenAI-compatible ``/v1`` base URL)
    with ``model``; the API key is ``OPENAI_API_KEY`` where set (a local server ignores it)."""

    def __init__(self, url: str, model: str) -> None:
        self.url, self.model = url, model
        self._agent: Any = None

    def reset(self, seed: int) -> None:
        """Nothing to seed: the endpoint's sampling decides."""

    def move(self, game: TextArenaGame) -> OpponentMove:
        """Ask the endpoint for the move of the player to move, and play it."""
        if self._agent is None:
            from textarena.agents import OpenAIAgent

            self._agent = OpenAIAgent(model_name=self.model, base_url=self.url,
                                      api_key=os.environ.get("OPENAI_API_KEY") or "EMPTY")
        game.observe()
        try:
            answer = self._agent(game.view(game.current))
        except Exception as exc:
            raise OpponentError(f"the llm opponent's endpoint {self.url} (model {self.model!r}) failed: "
                                f"{type(exc).__name__}: {exc}") from exc
        played = _play_on_copy(game, str(answer))
        return OpponentMove(1, not played.invalid)


def _play_on_copy(game: TextArenaGame, action: str) -> Played:
    """Play ``action`` on a copy and keep it; a game that raises leaves ``game`` untouched (:class:`OpponentError`)."""
    twin = game.clone()
    try:
        played = twin.play(action)
    except Exception as exc:
        raise OpponentError(f"TextArena raised on the opponent's move {action!r:.60}: {type(exc).__name__}: {exc}") \
            from exc
    game.adopt(twin)
    return played


def make_opponent(config: Any) -> ScriptedOpponent | ChatOpponent:
    """The opponent a :class:`~ragen_plugins_textarena.env.TextArenaConfig` asks for."""
    if config.opponent == "llm":
        return ChatOpponent(str(config.opponent_url), config.opponent_model)
    return ScriptedOpponent(config.opponent, config.opponent_max_tries)
