"""Driving one TextArena game from outside: the loop TextArena's own ``make`` / ``get_observation`` / ``step``
would run, with what an RL env needs added.

- **Messages.** Each player's messages (``(sender id, text, ObservationType)``, TextArena's ``Message``) are drained
  from the game into :attr:`TextArenaGame.logs` when that player is about to move (through the game's own
  ``get_observation``, which some games extend) and, for player 0, when the game ends.
- **Views.** The game id's TextArena *observation* wrapper (``LLMObservationWrapper`` for most ids, a board view for
  the ``-train`` ids, none for ``-raw``) is kept as a class and applied to a player's log on demand
  (:meth:`TextArenaGame.view`); its *action* wrappers (``ActionFormattingWrapper`` adds the square brackets a move
  lacks, ``ClipCharactersActionWrapper`` clips long chat) are applied to every action, as ``ta.make`` would.
- **Randomness.** TextArena games draw from the global ``random`` module (``State.__init__`` calls
  ``random.seed(seed)``) and a few from ``numpy.random``. Every call into the game runs under one process-wide
  lock with the game's own saved generator states swapped in and the caller's swapped back after, so a game is
  deterministic under its seed however many games (or threads) run side by side. What a game prints to stdout
  during the call (a few print debugging lines) is dropped.
- **Invalid moves.** A game reports one through its state's ``set_invalid_move``; an instance-level spy records
  each report (the reason) on the state itself, so copies of the game carry their own records.
- **Copies.** :meth:`TextArenaGame.snapshot` / :meth:`restore` and :meth:`clone` deep-copy the game, which lets the
  env undo a rejected move exactly and lets an opponent try a move before playing it.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import math
import random
import threading
from collections.abc import Iterator
from typing import Any

import attrs
import numpy as np

__all__ = ["GAME_ID", "Played", "Snapshot", "TextArenaGame", "message_text"]

#: TextArena's sender id of game messages (``textarena.GAME_ID``)
GAME_ID = -1
#: every call into a TextArena game holds this lock (the global generators are swapped in and out under it)
_LOCK = threading.RLock()
_SPY_RECORDS = "_ragen_invalid_reports"


@attrs.frozen
class Played:
    """What one action did: ``player`` acted; ``invalid``: the reasons the game gave for rejecting it (empty when
    it was accepted); ``done``: the game is over."""

    player: int
    invalid: tuple[str, ...]
    done: bool


@attrs.frozen
class Snapshot:
    """A deep copy of a game's state, its players' logs and its generator states (see :meth:`TextArenaGame.snapshot`)."""

    base: Any
    logs: dict[int, list[Any]]
    randomness: tuple[Any, Any]


def message_text(messages: list[Any], role_mapping: dict[int, str] | None = None) -> str:
    """Messages as TextArena's ``LLMObservationWrapper`` writes them: one ``[SENDER] text`` line each (``GAME`` for
    the game, the role name or ``Player N`` for a player)."""
    roles = role_mapping or {}
    lines = []
    for sender, text, _kind in messages:
        name = "GAME" if sender == GAME_ID else roles.get(sender, f"Player {sender}")
        lines.append(f"[{name}] {text}")
    return "\n".join(lines)


def _number(value: Any) -> float:
    """A reward as a float: a finite number as it is, anything else (None, a game's misplaced reason text) 0."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return 0.0


def _spy(state: Any, original: Any, *args: Any, **kwargs: Any) -> Any:
    """Record the reason of an invalid-move report on ``state``, then let the state handle it as usual."""
    reason = kwargs.get("reason") or next((a for a in args if isinstance(a, str)), "")
    state.__dict__.setdefault(_SPY_RECORDS, []).append(str(reason or "invalid move"))
    return original(state, *args, **kwargs)


class TextArenaGame:
    """One TextArena game (by id) with ``players`` players; :meth:`reset` starts an episode.

    Nothing of TextArena is imported before the first instance is made.
    """

    def __init__(self, game_id: str, players: int) -> None:
        import textarena as ta

        env = ta.make(game_id)
        self.game_id, self.players = game_id, players
        self.actions: list[Any] = []  # action wrappers, outermost (applied first) first
        self.view_cls: type | None = None
        while isinstance(env, ta.Wrapper):
            if isinstance(env, ta.ActionWrapper):
                self.actions.append(env)
            elif isinstance(env, ta.ObservationWrapper) and self.view_cls is None:
                self.view_cls = type(env)
            env = env.env
        self.base: Any = env
        self.logs: dict[int, list[Any]] = {pid: [] for pid in range(players)}
        self._randomness: tuple[Any, Any] = (random.Random(0).getstate(), np.random.RandomState(0).get_state())

    # -- randomness -------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _inside(self) -> Iterator[None]:
        """Run the block under the lock, with this game's generator states in ``random`` and ``numpy.random`` and
        stdout dropped."""
        with _LOCK, contextlib.redirect_stdout(io.StringIO()):
            outer = (random.getstate(), np.random.get_state())
            random.setstate(self._randomness[0])
            np.random.set_state(self._randomness[1])
            try:
                yield
            finally:
                self._randomness = (random.getstate(), np.random.get_state())
                random.setstate(outer[0])
                np.random.set_state(outer[1])

    # -- the episode ------------------------------------------------------------------------------------------

    def reset(self, seed: int) -> None:
        """Start an episode: both generators seeded with ``seed``, then TextArena's ``reset(num_players, seed)``."""
        self._randomness = (random.Random(seed).getstate(), np.random.RandomState(seed % 2**32).get_state())
        self.logs = {pid: [] for pid in range(self.players)}
        with self._inside():
            self.base.reset(num_players=self.players, seed=seed)
        self._install_spy()

    def _install_spy(self) -> None:
        state = self.base.state
        if not isinstance(getattr(state, "set_invalid_move", None), functools.partial):
            state.set_invalid_move = functools.partial(_spy, state, type(state).set_invalid_move)
        state.__dict__[_SPY_RECORDS] = []

    @property
    def state(self) -> Any:
        """TextArena's state object of the episode."""
        return self.base.state

    @property
    def done(self) -> bool:
        return bool(self.base.state.done)

    @property
    def current(self) -> int:
        """The id of the player to move."""
        return int(self.base.state.current_player_id)

    def observe(self) -> list[Any]:
        """Drain the messages of the player to move (TextArena's ``get_observation``) into its log; the new ones."""
        with self._inside():
            pid, new = self.base.get_observation()
        new = list(new or [])
        self.logs.setdefault(int(pid), []).extend(new)
        return new

    def drain(self, pid: int) -> list[Any]:
        """Move the messages waiting for ``pid`` into its log (at the end of a game); the new ones."""
        waiting = self.base.state.observations.get(pid) or []
        self.base.state.observations[pid] = []
        self.logs.setdefault(pid, []).extend(waiting)
        return list(waiting)

    def play(self, action: str) -> Played:
        """The player to move plays ``action`` (through the id's action wrappers). An exception of the game
        propagates (the caller restores a snapshot)."""
        pid = self.current
        for wrapper in self.actions:
            action = wrapper.action(action)
        records = self.base.state.__dict__.setdefault(_SPY_RECORDS, [])
        before = len(records)
        with self._inside():
            self.base.step(action)
        if self.base.state is not None and not isinstance(self.base.state.set_invalid_move, functools.partial):
            self._install_spy()  # a game that made a fresh state object mid-episode
        return Played(player=pid, invalid=tuple(records[before:]), done=self.done)

    def error_count(self) -> int | None:
        """TextArena's count of consecutive invalid moves of the player to move (None where the state has none)."""
        value = getattr(self.base.state, "error_count", None)
        return int(value) if isinstance(value, int) else None

    def set_error_count(self, count: int | None) -> None:
        """Set TextArena's count of consecutive invalid moves (after :meth:`restore`, to keep the count a rejected
        move raised)."""
        if count is not None and hasattr(self.base.state, "error_count"):
            self.base.state.error_count = count

    def set_error_allowance(self, allowance: int) -> None:
        """Let each player make ``allowance`` invalid moves in a row before TextArena ends the game."""
        if hasattr(self.base.state, "error_allowance"):
            self.base.state.error_allowance = allowance

    def outcome(self) -> tuple[dict[int, float], dict[int, Any]]:
        """The final rewards by player (missing ones: 0) and TextArena's per-player game info."""
        state = self.base.state
        rewards = state.rewards if isinstance(getattr(state, "rewards", None), dict) else {}
        info = state.game_info if isinstance(getattr(state, "game_info", None), dict) else {}
        return {pid: _number(rewards.get(pid)) for pid in range(self.players)}, info

    # -- views ------------------------------------------------------------------------------------------------

    def roles(self) -> dict[int, str]:
        mapping = getattr(self.base.state, "role_mapping", None)
        return dict(mapping) if isinstance(mapping, dict) else {}

    def view(self, pid: int, messages: list[Any] | None = None) -> str:
        """``messages`` (default: the player's whole log) as the id's TextArena observation wrapper shows them, or
        as ``LLMObservationWrapper`` lines where the id has none or its wrapper cannot show them."""
        messages = list(self.logs.get(pid, []) if messages is None else messages)
        if self.view_cls is not None:
            try:
                shown = self.view_cls(self.base).observation(pid, messages)
                if isinstance(shown, str):
                    return shown.strip("\n")
            except Exception:  # noqa: BLE001 - e.g. a board view before the game showed a board
                pass
        return message_text(messages, self.roles())

    # -- copies -----------------------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Everything needed to put the game back exactly as it is now."""
        return Snapshot(copy.deepcopy(self.base), {p: list(m) for p, m in self.logs.items()}, self._randomness)

    def restore(self, snap: Snapshot) -> None:
        """Put the game back to ``snap`` (which is used up: the game takes over its copy)."""
        self.base, self.logs, self._randomness = snap.base, snap.logs, snap.randomness

    def clone(self) -> TextArenaGame:
        """An independent copy (to try a move on)."""
        twin = copy.copy(self)
        twin.base = copy.deepcopy(self.base)
        twin.logs = {p: list(m) for p, m in self.logs.items()}
        return twin

    def adopt(self, twin: TextArenaGame) -> None:
        """Take over the state of ``twin`` (a :meth:`clone` that played on)."""
        self.base, self.logs, self._randomness = twin.base, twin.logs, twin._randomness
