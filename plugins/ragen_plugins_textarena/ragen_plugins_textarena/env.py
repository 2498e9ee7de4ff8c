"""The ``textarena`` env: one TextArena game as a multi-turn ragen env, the agent playing player 0.

**A step.** The agent's action (any text) goes through the game id's TextArena action wrappers (most ids add the
square brackets a move lacks) to the game; then, in a two-player game, the opponent (player 1, see
:mod:`ragen_plugins_textarena.opponents`) moves until it is the agent's turn again or the game is over. A game in
which player 1 moves first gets the opponent's opening moves before the first observation.

**Observations.** ``observation="textarena"`` (the default): what TextArena shows player 0 for this game id, i.e.
its observation wrapper applied to every message the agent has received (``LLMObservationWrapper``'s
``[GAME] ...`` / ``[Player 1] ...`` lines for most ids, the prompt with the current board for the ``-train`` ids;
the ``-raw`` ids have no wrapper and show the messages since the agent's previous move). ``observation="new"``:
only the messages since the agent's previous move (the first observation holds the rules), for runs that keep the
whole conversation in context. ``render()`` is always the whole history of player 0's messages.

**Rewards and success.** TextArena gives rewards once, when the game ends (``state.rewards``): the step that ends
the game returns player 0's reward (two-player games: +1 win, -1 loss, 0 draw; single-player games: 1 for a solved
puzzle or won game, often a fraction of progress otherwise); other steps return 0. ``success`` is true when the game
ended (not by the turn limit) and the agent *won*: in a two-player game its reward is above the opponent's; in a
single-player game its reward is at least 1 (TextArena's full reward; partial credit is no success).

**Invalid moves** are those TextArena reports (its state's ``set_invalid_move``). While TextArena lets the player
try again (``error_allowance``: by default one invalid move, so a second in a row loses the game), the env undoes
the attempt exactly (a snapshot of the game is restored, keeping only TextArena's count of invalid moves), returns
``invalid_reward``, ``action_is_valid=False`` and the observation with TextArena's reason appended; ``render()`` is
unchanged. An invalid move that exhausts the allowance ends the game with TextArena's reward (a loss). An action
that is not a string, or on which the game raises, is invalid the same way (the game is restored) without counting
toward the allowance. ``max_turns`` agent actions end the episode as truncated (reward 0, no success); so does an
opponent that cannot move on (its endpoint failed; the game rejected its moves more often in a row than the
allowance plus one without ending; or 100 opponent moves without the agent's turn coming back).

**Determinism.** The same seed gives the same episode: TextArena's ``random`` / ``numpy.random`` draws are
isolated per game (:mod:`ragen_plugins_textarena.game`) and the scripted opponents are seeded by the episode's seed.
"""

from __future__ import annotations

from typing import Any

import attrs

from ragen_core.env import TextEnv
from ragen_core.validators import integer, number, one_of
from ragen_plugins_textarena.game import Played, TextArenaGame, message_text
from ragen_plugins_textarena.games import game_problem, players
from ragen_plugins_textarena.opponents import OpponentError, make_opponent

__all__ = ["MAX_OPPONENT_MOVES", "TextArenaConfig", "TextArenaEnv"]

#: opponent moves in one agent step after which the episode is cut (truncated)
MAX_OPPONENT_MOVES = 100


def known_game(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """a TextArena game id that runs offline (``ragen envs --members ta`` lists them)"""
    problem = game_problem(value)
    if problem:
        raise ValueError(f"'{attribute.name}' {problem}")


@attrs.define
class TextArenaConfig:
    """Options of the ``textarena`` env.

    :ivar game: the TextArena env id (``TowerOfHanoi-v0``, ``TicTacToe-v0``, ``Chess-v0-raw``...); the ids that
        reset offline with one or two players (``ragen envs --members ta``).
    :ivar opponent: player 1 of a two-player game: ``random`` (scripted, a random move the game accepts among those
        its observation shows), ``first`` (scripted, the first such move), ``llm`` (an OpenAI-compatible endpoint).
    :ivar opponent_url: the ``llm`` opponent's base URL (``http://127.0.0.1:8000/v1``).
    :ivar opponent_model: the ``llm`` opponent's model name.
    :ivar opponent_max_tries: candidate moves a scripted opponent tries per move.
    :ivar max_turns: agent actions per episode (the episode is truncated after them).
    :ivar error_allowance: invalid moves in a row TextArena lets a player retry before it loses (None: the game's
        own, usually 1); applies to both players.
    :ivar invalid_reward: reward of an invalid move that TextArena lets the agent retry.
    :ivar observation: ``textarena`` (what TextArena shows player 0: its whole history for most ids) or ``new``
        (the messages since the agent's previous move).
    """

    game: str = attrs.field(default="TicTacToe-v0", validator=known_game)
    opponent: str = attrs.field(default="random", validator=one_of("random", "first", "llm"))
    opponent_url: str | None = None
    opponent_model: str = ""
    opponent_max_tries: int = attrs.field(default=100, validator=integer(1, 100_000))
    max_turns: int = attrs.field(default=20, validator=integer(1, 100_000))
    error_allowance: int | None = attrs.field(default=None, validator=attrs.validators.optional(integer(0)))
    invalid_reward: float = attrs.field(default=0.0, validator=number())
    observation: str = attrs.field(default="textarena", validator=one_of("textarena", "new"))

    def __attrs_post_init__(self) -> None:
        for name, example in (("opponent_url", "http://127.0.0.1:8000/v1"), ("opponent_model", "the served name")):
            if self.opponent == "llm" and not getattr(self, name):
                raise ValueError(f"'{name}' must be set for opponent 'llm' (the OpenAI-compatible endpoint's "
                                 f"{'base URL, such as ' if name == 'opponent_url' else 'model, '}{example})")


def _instruction(game: str, n_players: int) -> str:
    against = " against an opponent (Player 1)" if n_players == 2 else ""
    return (f"You play the TextArena game {game} as Player 0{against}. The first observation gives the game's rules "
            "and the move format; later ones show the game's messages and board. Answer with one move in the format "
            "the rules ask for, usually in square brackets such as [4].")


class TextArenaEnv(TextEnv):
    """A TextArena game as a ragen env (see the module docstring for steps, rewards, success and invalid moves)."""

    config_cls = TextArenaConfig

    def __init__(self, config: Any = None, render_mode: str | None = "ansi", **options: Any) -> None:
        super().__init__(config, render_mode, **options)
        cfg: TextArenaConfig = self.config
        self.players = players(cfg.game)
        self.instruction = _instruction(cfg.game, self.players)
        self.action_names = None  # free-form: the move is text in the game's own format
        self.legend = {}
        self.max_actions_per_traj = cfg.max_turns
        self._opponent = make_opponent(cfg) if self.players == 2 else None
        self._game: TextArenaGame | None = None
        self._moves = 0
        self._end: dict[str, Any] | None = None  # the final step's flags and info, once the episode is over
        self._last = ""  # the last observation returned (shown again, with the reason, after an invalid move)
        self._stats = {"opponent_moves": 0, "opponent_tries": 0, "opponent_rejected": 0}

    # -- reset ------------------------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        episode_seed = int(seed) if seed is not None else int(self.np_random.integers(0, 2**31 - 1))
        self._game = game = TextArenaGame(self.config.game, self.players)
        game.reset(episode_seed)
        if self.config.error_allowance is not None:
            game.set_error_allowance(self.config.error_allowance)
        if self._opponent is not None:
            self._opponent.reset(episode_seed)
        self._moves, self._end = 0, None
        try:
            self._advance()
        except OpponentError as exc:
            self._end = self._ending(False, True, {"textarena_error": str(exc)})
        self._last = self._observation(0)
        info = {"game": self.config.game, "players": self.players, "seed": episode_seed, **self._stats}
        return self._last, info

    def _advance(self) -> None:
        """Let the opponent move until it is player 0's turn or the game is over; then collect player 0's messages.

        An opponent whose moves the game rejects more times in a row than TextArena's allowance (plus one) without
        the game ending, or that makes :data:`MAX_OPPONENT_MOVES` moves, raises :class:`OpponentError`."""
        game = self._game
        assert game is not None
        self._stats = dict.fromkeys(self._stats, 0)
        rejected, patience = 0, (self.config.error_allowance or 1) + 2
        while not game.done and game.current != 0:
            if self._opponent is None or self._stats["opponent_moves"] >= MAX_OPPONENT_MOVES or rejected >= patience:
                raise OpponentError(f"the opponent cannot move on ({self._stats['opponent_moves']} moves, the last "
                                    f"{rejected} rejected, without the agent's turn coming back)")
            move = self._opponent.move(game)
            rejected = 0 if move.found else rejected + 1
            self._stats["opponent_moves"] += 1
            self._stats["opponent_tries"] += move.tries
            self._stats["opponent_rejected"] += not move.found
        if game.done:
            game.drain(0)
        else:
            game.observe()

    # -- step -------------------------------------------------------------------------------------------------

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        game = self._game
        if game is None or self._end is not None:
            return self._after_end()
        self._moves += 1
        mark = len(game.logs[0])
        if not isinstance(action, str):
            return self._rejected([f"the action must be text, got {type(action).__name__}"], [])
        snap = game.snapshot()
        try:
            played = game.play(action)
        except Exception as exc:  # noqa: BLE001 - a game bug on odd text: the move is invalid, nothing changes
            game.restore(snap)
            return self._rejected([f"TextArena raised {type(exc).__name__}: {exc}"], [])
        if played.invalid and not played.done:
            errors, feedback = game.error_count(), game.observe()
            game.restore(snap)
            game.set_error_count(errors)
            return self._rejected(list(played.invalid), feedback)
        return self._accepted(played, mark)

    def _accepted(self, played: Played, mark: int) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """The agent's action was taken (or was invalid and ended the game): the opponent replies, the game may end."""
        game = self._game
        assert game is not None
        valid = not played.invalid
        extra: dict[str, Any] = {"invalid_reason": " ".join(played.invalid)} if played.invalid else {}
        try:
            self._advance()
        except OpponentError as exc:
            self._end = self._ending(False, True, {"textarena_error": str(exc)})
            return self._result(0.0, valid, self._end, extra, mark)
        if game.done:
            self._end = self._ending(True, False, {})
            return self._result(self._end["reward"], valid, self._end, extra, mark)
        if self._moves >= self.config.max_turns:
            self._end = self._ending(False, True, {})
        return self._result(0.0, valid, self._end, extra, mark)

    def _rejected(self, reasons: list[str], feedback: list[Any]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """An invalid move TextArena lets the agent retry (or a non-string / raising action): nothing changed."""
        if self._moves >= self.config.max_turns:
            self._end = self._ending(False, True, {})
        game = self._game
        assert game is not None
        shown = [m for m in feedback if getattr(m[2], "name", "") == "GAME_ADMIN"] or feedback
        note = message_text(shown, game.roles()) if shown else "[GAME] Invalid move: " + " ".join(reasons)
        info = {"invalid_reason": " ".join(reasons)}
        return f"{self._last}\n{note}".lstrip("\n"), float(self.config.invalid_reward), *self._flags(self._end), \
            self._info(False, self._end, info)

    def _after_end(self) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """A step after the episode ended (or before any reset): invalid, no reward, the episode stays over."""
        end = self._end or {"terminated": True, "truncated": False, "success": False}
        info = self._info(False, end, {"invalid_reason": "the episode is over"})
        return self.render(), 0.0, bool(end["terminated"]), bool(end["truncated"]), info

    # -- the outcome ------------------------------------------------------------------------------------------

    def _ending(self, terminated: bool, truncated: bool, extra: dict[str, Any]) -> dict[str, Any]:
        """The episode's final flags, player 0's reward and success, with TextArena's reason."""
        game = self._game
        assert game is not None
        rewards, game_info = game.outcome()
        mine = rewards.get(0, 0.0)
        if not terminated:
            won = False
        elif self.players == 1:
            won = mine >= 1.0
        else:
            won = mine > max(r for pid, r in rewards.items() if pid != 0)
        reason = (game_info.get(0) or {}).get("reason") if isinstance(game_info.get(0), dict) else None
        end = {"terminated": terminated, "truncated": truncated, "success": won,
               "reward": mine if terminated else 0.0, **extra}
        if reason:
            end["textarena_reason"] = str(reason)
        return end

    @staticmethod
    def _flags(end: dict[str, Any] | None) -> tuple[bool, bool]:
        return (bool(end["terminated"]), bool(end["truncated"])) if end else (False, False)

    def _info(self, valid: bool, end: dict[str, Any] | None, extra: dict[str, Any]) -> dict[str, Any]:
        info: dict[str, Any] = {"success": bool(end and end["success"]), "action_is_valid": valid,
                                "action_is_effective": valid, **{k: float(v) for k, v in self._stats.items()}}
        if end:
            info["textarena_reward"] = float(end.get("reward", 0.0))
            info.update({k: end[k] for k in ("textarena_reason", "textarena_error") if k in end})
        info.update(extra)
        return info

    def _result(self, reward: float, valid: bool, end: dict[str, Any] | None, extra: dict[str, Any],
                mark: int) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._last = self._observation(mark)
        return self._last, float(reward), *self._flags(end), self._info(valid, end, extra)

    # -- text -------------------------------------------------------------------------------------------------

    def _observation(self, mark: int) -> str:
        """The observation after player 0's messages from index ``mark`` of its log arrived."""
        game = self._game
        if game is None:
            return ""
        new = game.logs[0][mark:]
        if self.config.observation == "new" or game.view_cls is None:
            return message_text(new, game.roles())
        return game.view(0)

    def render(self) -> str:
        """Every message player 0 has received this episode, as ``[SENDER] text`` lines."""
        game = self._game
        return message_text(game.logs[0], game.roles()) if game is not None else ""
