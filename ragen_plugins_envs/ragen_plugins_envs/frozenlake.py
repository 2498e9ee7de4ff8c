"""FrozenLake: walk over a frozen lake to the goal without falling into a hole (RAGEN's FrozenLake).

Rules:

- The map is a ``size x size`` grid (default 4x4) of frozen tiles and holes with one start and one goal. Actions are
  ``Left``, ``Down``, ``Right``, ``Up`` (gymnasium's order, ids 0..3); a move into the edge stays in place.
- The dynamics are gymnasium's ``FrozenLakeEnv`` (``gymnasium.envs.toy_text.frozen_lake``), which RAGEN subclasses:
  with ``success_rate < 1`` the lake is slippery and a move goes where intended with probability ``success_rate``,
  otherwise to one of the two perpendicular directions (``(1 - success_rate) / 2`` each); ``success_rate == 1`` is
  deterministic. They are written out here instead of stepping a gymnasium env, because building gymnasium's env
  (its table of every state's transitions) was most of a reset's cost; the slips use the very numbers gymnasium's
  env would draw, so an episode is the same, move for move (``tests/envs/test_frozenlake.py`` plays both side by
  side). :attr:`FrozenLakeEnv.gym_env` builds the gymnasium env of the current episode on demand.
- Reward ``+1.0`` on reaching the goal, otherwise ``0.0``. The episode ends (``terminated=True``) in a hole or at the
  goal; ``success`` means the player is on the goal.
- Anything that is not one of the four action names (matched case-insensitively after stripping whitespace) is
  invalid: reward ``0.0``, state unchanged, ``action_is_valid=False``. A step after the episode ended is invalid too
  and returns the final state with ``terminated=True``. ``action_is_effective`` is True when the player moved
  (a slip that ends where the player stood, e.g. into the edge, is not effective).
- The step limit (``max_actions_per_traj``) is applied by the rollout loop or gymnasium's ``TimeLimit``.

Maps: each tile is frozen with probability ``p`` (0.9, RAGEN's frozen probability), start and goal are two distinct
random tiles (always frozen), and a map is redrawn until a path of frozen tiles joins them (at most
``max_generation_tries`` draws, then :class:`FrozenLakeGenerationError`). All draws use ``self.np_random``, in this
order: per map ``random((size, size)) < p`` (the frozen tiles) and ``choice(size * size, 2, replace=False)``
(start, goal), then ``integers(2**31 - 1)``, the seed of the slips (gymnasium seeds its env with it: the slip of
each step is the next ``random()`` of ``np.random.default_rng(slip_seed)``, the first one skipped, as gymnasium's
reset draws it). :mod:`ragen_plugins_envs.fast_rng` makes these draws in Python, number for number as numpy does.
``reset(options={"desc": [...]})`` plays a given map instead, in gymnasium's letters (``S`` start, ``F`` frozen,
``H`` hole, ``G`` goal).

Why not gymnasium's ``generate_random_map``: it always puts the start in the top-left corner and the goal in the
bottom-right one, while RAGEN's lake draws both at random (its ``generate_random_map`` replaces gymnasium's). The
frozen tiles are drawn exactly as gymnasium draws them (``choice(["F", "H"], p=[p, 1 - p])`` reads the same
``random()`` numbers against ``p``), so on the same seed a first map that both accept has the same holes; only the
start and the goal differ. RAGEN's own generator draws the start and the goal as two independent uniform tiles and
redraws the whole map when they coincide: the same distribution as two distinct uniform tiles, from other numbers,
so its maps for a given seed differ from these.

Success rate: RAGEN's base FrozenLake tag uses 0.8 and its main experiment configs 1.0; the default here is 0.8 and
the variant ``frozenlake_det`` sets 1.0.

Text rendering uses RAGEN's symbols: ``P`` player, ``_`` frozen (the start too), ``O`` hole, ``G`` goal, ``X``
player in a hole, ``√`` player on the goal. ``render_mode="coord"`` lists positions instead and ``"grid_coord"``
shows both. :func:`shortest_path` (breadth-first over frozen tiles, ignoring slips) powers the oracle.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv as GymFrozenLakeEnv

from ragen_core.config import structure
from ragen_core.env import TextEnv
from ragen_core.validators import integer, number
from ragen_plugins_envs.fast_rng import DOUBLE_SCALE, Pcg64Doubles, RawDraws, seed_env
from ragen_plugins_envs.grid_symbols import merge_symbols, symbols_validator

__all__ = ["ACTIONS", "DEFAULT_SYMBOLS", "FrozenLakeConfig", "FrozenLakeEnv", "FrozenLakeGenerationError",
           "generate_map", "shortest_path"]

#: action names in gymnasium's order (LEFT=0, DOWN=1, RIGHT=2, UP=3)
ACTIONS: tuple[str, ...] = ("Left", "Down", "Right", "Up")
_ACTION_INDEX = {name.lower(): i for i, name in enumerate(ACTIONS)}
_MOVES: tuple[tuple[int, int], ...] = ((0, -1), (1, 0), (0, 1), (-1, 0))

#: role -> symbol of the text grid (RAGEN's)
DEFAULT_SYMBOLS: Mapping[str, str] = {
    "player": "P",
    "frozen": "_",
    "hole": "O",
    "goal": "G",
    "player_in_hole": "X",
    "player_on_goal": "√",
}
_ROLE_MEANING = {"player": "player", "frozen": "frozen tile (safe)", "hole": "hole", "goal": "goal",
                 "player_in_hole": "player fell into a hole", "player_on_goal": "player on the goal"}

MAX_SIZE = 64

_INSTRUCTION = (
    "You are solving the FrozenLake puzzle. You are the player on a frozen lake: walk to the goal without stepping "
    "into a hole. Falling into a hole ends the game; reaching the goal wins it. Moving into the edge of the lake "
    "leaves you where you are."
)
_SLIPPERY = " The ice is slippery: a move may take you in a perpendicular direction instead of the one you chose."


class FrozenLakeGenerationError(RuntimeError):
    """No map with a path from start to goal was drawn within the allowed number of tries."""


# ----------------------------------------------------------------------------------------------------------- config

def _merge_symbols(value: Mapping[str, str] | None) -> dict[str, str]:
    """Symbols given by the user (possibly only some roles) merged over :data:`DEFAULT_SYMBOLS`."""
    return merge_symbols(DEFAULT_SYMBOLS, value)


@attrs.define
class FrozenLakeConfig:
    """Options of :class:`FrozenLakeEnv`.

    :ivar size: the map is ``size x size`` (2..64).
    :ivar p: probability that a tile is frozen (RAGEN's ``p``); start and goal are always frozen.
    :ivar success_rate: probability that a move goes where intended (1.0: not slippery).
    :ivar max_actions_per_traj: actions one trajectory may take (applied by the rollout loop).
    :ivar render_mode: ``"text"`` (symbol grid), ``"coord"`` (positions as text) or ``"grid_coord"`` (both).
    :ivar symbols: role -> symbol for the grid; roles not given keep RAGEN's symbols.
    :ivar max_generation_tries: maps drawn before :class:`FrozenLakeGenerationError`.
    """

    size: int = attrs.field(default=4, validator=integer(2, MAX_SIZE))
    p: float = attrs.field(default=0.9, validator=number(0, 1))
    success_rate: float = attrs.field(default=0.8, validator=number(0, 1))
    max_actions_per_traj: int = attrs.field(default=10, validator=integer(1))
    render_mode: Literal["text", "coord", "grid_coord"] = attrs.field(
        default="text", validator=attrs.validators.in_(("text", "coord", "grid_coord")))
    symbols: dict[str, str] = attrs.field(factory=lambda: dict(DEFAULT_SYMBOLS), converter=_merge_symbols,
                                          validator=symbols_validator(DEFAULT_SYMBOLS))
    max_generation_tries: int = attrs.field(default=10_000, validator=integer(1))

    @property
    def is_slippery(self) -> bool:
        """Whether moves may slip (``success_rate < 1``)."""
        return self.success_rate < 1.0


# -------------------------------------------------------------------------------------------------------------- maps

def _validate_desc(desc: Sequence[str]) -> list[str]:
    rows = [str(r) for r in desc]
    if not rows or len({len(r) for r in rows}) != 1 or not rows[0]:
        raise ValueError("a FrozenLake map must be a non-empty list of equally long rows")
    text = "".join(rows)
    if set(text) - set("SFHG"):
        raise ValueError(f"a FrozenLake map uses only the letters S, F, H, G; got {sorted(set(text) - set('SFHG'))}")
    if text.count("S") != 1 or text.count("G") != 1:
        raise ValueError("a FrozenLake map needs exactly one start 'S' and one goal 'G'")
    return rows


def shortest_path(desc: Sequence[str], start: tuple[int, int]) -> list[str] | None:
    """Fewest moves from ``start`` (row, col) to the goal over non-hole tiles, ignoring slips.

    :param desc: the map rows in gymnasium's letters (``S``, ``F``, ``H``, ``G``).
    :returns: the action names (``[]`` at the goal), or None when no path exists or ``start`` is a hole.
    """
    rows, cols = len(desc), len(desc[0])
    sr, sc = start
    if desc[sr][sc] == "H":
        return None
    if desc[sr][sc] == "G":
        return []
    parent: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {(sr, sc): None}
    queue = deque([(sr, sc)])
    while queue:
        r, c = queue.popleft()
        for a, (dr, dc) in enumerate(_MOVES):
            nr, nc = r + dr, c + dc
            if not (0 <= nr < rows and 0 <= nc < cols) or (nr, nc) in parent or desc[nr][nc] == "H":
                continue
            parent[(nr, nc)] = ((r, c), a)
            if desc[nr][nc] == "G":
                actions: list[str] = []
                link = parent[(nr, nc)]
                while link is not None:
                    cell, move = link
                    actions.append(ACTIONS[move])
                    link = parent[cell]
                return actions[::-1]
            queue.append((nr, nc))
    return None


@functools.lru_cache(maxsize=64)
def _lake_geometry(rows: int, cols: int) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, int, int, int], ...]]:
    """For a ``rows x cols`` lake (cells numbered ``row * cols + col``): each cell's neighbours, and the cell each
    action (gymnasium's order) leads to, a move into the edge staying in place."""
    neighbours: list[tuple[int, ...]] = []
    moves: list[tuple[int, int, int, int]] = []
    for r in range(rows):
        for c in range(cols):
            neighbours.append(tuple((r + dr) * cols + c + dc for dr, dc in _MOVES
                                    if 0 <= r + dr < rows and 0 <= c + dc < cols))
            left, down, right, up = (min(max(r + dr, 0), rows - 1) * cols + min(max(c + dc, 0), cols - 1)
                                     for dr, dc in _MOVES)
            moves.append((left, down, right, up))
    return tuple(neighbours), tuple(moves)


def _distance(hole: Sequence[bool], neighbours: Sequence[Sequence[int]], start: int, goal: int) -> int:
    """Fewest moves from ``start`` to ``goal`` over non-hole cells (breadth-first), or -1 when no path exists."""
    if start == goal:
        return 0
    seen = bytearray(len(hole))
    seen[start] = 1
    frontier = [start]
    steps = 0
    while frontier:
        steps += 1
        reached = []
        for cell in frontier:
            for nxt in neighbours[cell]:
                if not seen[nxt] and not hole[nxt]:
                    if nxt == goal:
                        return steps
                    seen[nxt] = 1
                    reached.append(nxt)
        frontier = reached
    return -1


@attrs.frozen
class _Lake:
    """A generated map: holes per cell, start and goal cells, and the start's distance to the goal."""

    size: int
    hole: list[bool]
    start: int
    goal: int
    distance: int

    def desc(self) -> list[str]:
        """The rows in gymnasium's letters."""
        letters = ["H" if h else "F" for h in self.hole]
        letters[self.start], letters[self.goal] = "S", "G"
        text = "".join(letters)
        return [text[i:i + self.size] for i in range(0, len(text), self.size)]


def _draw_lake(draws: RawDraws, size: int, p: float, max_tries: int) -> _Lake:
    """The map of :func:`generate_map`, drawn through ``draws`` (the generator's numbers, numpy's order)."""
    n = size * size
    threshold = p * DOUBLE_SCALE  # random() < p  <=>  (raw >> 11) < p * 2**53
    neighbours, _moves = _lake_geometry(size, size)
    for _ in range(max_tries):
        raw = draws.raw(n + (1 if draws.buffered else 2))  # the tiles' doubles, then the words of choice()
        hole = [x >> 11 >= threshold for x in raw[:n]]
        start, goal = draws.choice2(n, raw[:n - 1:-1])
        hole[start] = hole[goal] = False
        distance = _distance(hole, neighbours, start, goal)
        if distance >= 0:
            return _Lake(size, hole, start, goal, distance)
    raise FrozenLakeGenerationError(
        f"no {size}x{size} FrozenLake map with frozen probability p={p} had a path from start to goal in "
        f"{max_tries} draws; raise p")


def generate_map(rng: np.random.Generator, size: int = 4, p: float = 0.9, max_tries: int = 10_000) -> list[str]:
    """A random map with a path from start to goal (see the module docstring), drawn from ``rng`` only.

    :returns: the rows in gymnasium's letters.
    :raises FrozenLakeGenerationError: no connected map within ``max_tries`` draws.
    """
    draws = RawDraws(rng)
    try:
        return _draw_lake(draws, size, p, max_tries).desc()
    finally:
        draws.close()


# ------------------------------------------------------------------------------------------------------------- env

class FrozenLakeEnv(TextEnv):
    """FrozenLake as a text env with gymnasium's FrozenLake dynamics (see the module docstring)."""

    config_cls: ClassVar[type] = FrozenLakeConfig
    config: FrozenLakeConfig

    def __init__(self, config: FrozenLakeConfig | None = None, **options: Any) -> None:
        # ``render_mode`` is this env's text-layout option; gymnasium's own render mode is always "ansi" (text)
        if options.get("render_mode") == "ansi":
            options.pop("render_mode")
        if config is None:
            config = structure(FrozenLakeConfig, options, type(self).__name__)
        elif options:
            raise TypeError("pass either a config object or keyword options, not both")
        super().__init__(config, render_mode="ansi")
        cfg = self.config
        self.instruction = _INSTRUCTION + (_SLIPPERY if cfg.is_slippery else "")
        self.action_names = ACTIONS
        self.legend = {cfg.symbols[role]: meaning for role, meaning in _ROLE_MEANING.items()}
        self.max_actions_per_traj = cfg.max_actions_per_traj
        self._slippery = cfg.is_slippery
        self._grid_only = cfg.render_mode == "text"
        fail = (1.0 - cfg.success_rate) / 2.0
        # gymnasium's categorical sample: the first of (left turn, intended, right turn) whose cumulative
        # probability (numpy's cumsum, left to right) exceeds the draw; none (rounding) picks the first
        self._slip_cumulative = (fail, fail + cfg.success_rate, fail + cfg.success_rate + fail)
        self._desc: list[str] = []
        self._letters = ""
        self._cols = 1
        self._moves: tuple[tuple[int, int, int, int], ...] = ()
        self._s = 0
        self._goal = (0, 0)
        self._done = False
        self._slip_seed = 0
        self._slips: Pcg64Doubles | None = None
        self._cells: list[str] = []
        self._rows: list[str] = []
        self._renders: dict[int, str] = {}
        self._key_prefix = ""

    @property
    def gym_env(self) -> GymFrozenLakeEnv:
        """gymnasium's FrozenLake env on the current episode's map, with the player on its tile, built on demand for
        inspection (this env steps its own copy of the dynamics, so stepping that env does not move the player)."""
        self._require_episode()
        cfg = self.config
        env = GymFrozenLakeEnv(desc=self._desc, is_slippery=cfg.is_slippery, success_rate=cfg.success_rate)
        env.s = self._s
        return env

    @property
    def desc(self) -> list[str]:
        """The current map in gymnasium's letters."""
        return list(self._desc)

    @property
    def position(self) -> tuple[int, int]:
        """The player's (row, col)."""
        self._require_episode()
        row, col = divmod(self._s, self._cols)
        return row, col

    def _require_episode(self) -> None:
        if not self._desc:
            raise RuntimeError("FrozenLakeEnv has no episode before reset()")

    def state_key(self) -> str:
        """The map and the player's tile (``SFFH/.../FFFG@row,col``; empty before ``reset``): equal keys are equal
        states, so GiGPO's step groups (``estimator=gigpo``) compare the moves made from the same tile of the same
        map."""
        if not getattr(self, "_desc", None):
            return ""
        row, col = divmod(self._s, self._cols)
        return f"{self._key_prefix}@{row},{col}"

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode on a new random map (or on ``options["desc"]``, rows of ``S``/``F``/``H``/``G``)."""
        rng = seed_env(self, seed)
        cfg = self.config
        given = (options or {}).get("desc")
        if given is not None:
            desc = _validate_desc(given)
            text = "".join(desc)
            start, goal = text.index("S"), text.index("G")
            neighbours, _moves = _lake_geometry(len(desc), len(desc[0]))
            distance = _distance([ch == "H" for ch in text], neighbours, start, goal)
            self._slip_seed = int(rng.integers(2**31 - 1))
        else:
            draws = RawDraws(rng) if seed is None else RawDraws(rng, None)  # a fresh seed leaves no buffered word
            try:
                lake = _draw_lake(draws, cfg.size, cfg.p, cfg.max_generation_tries)
                self._slip_seed = draws.bounded(2**31 - 2)  # rng.integers(2**31 - 1)
            finally:
                draws.close()
            desc, start, goal, distance = lake.desc(), lake.start, lake.goal, lake.distance
        self._start_episode(desc, start, goal)
        info = self._info(valid=True, effective=False)
        info["optimal_moves"] = distance
        return self._render_text(), info

    def _start_episode(self, desc: list[str], start: int, goal: int) -> None:
        """Set up the episode's state and its rendering on ``desc`` (gymnasium's letters), the player on ``start``."""
        rows, cols = len(desc), len(desc[0])
        self._desc, self._letters, self._cols = desc, "".join(desc), cols
        self._moves = _lake_geometry(rows, cols)[1]
        self._s, self._goal, self._done = start, divmod(goal, cols), False
        self._slips = None
        syms = self.config.symbols
        role_symbol = {"H": syms["hole"], "G": syms["goal"]}
        self._cells = [role_symbol.get(letter, syms["frozen"]) for letter in self._letters]
        self._rows = ["".join(self._cells[r * cols:(r + 1) * cols]) for r in range(rows)]
        self._renders = {}
        self._key_prefix = "/".join(desc)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply one action name with gymnasium's dynamics (and gymnasium's slip draws)."""
        if not self._desc:
            self._require_episode()
        index = _ACTION_INDEX.get(action.strip().lower()) if isinstance(action, str) else None
        if index is None or self._done:
            return self._render_text(), 0.0, self._done, False, self._info(valid=False, effective=False)
        if self._slippery:
            index = self._slip(index)
        before = self._s
        self._s = self._moves[before][index]
        letter = self._letters[self._s]
        self._done = letter in "GH"
        reward = 1.0 if letter == "G" else 0.0
        return self._render_text(), reward, self._done, False, self._info(valid=True, effective=self._s != before)

    def _slip(self, index: int) -> int:
        """The direction the player actually moves: gymnasium's categorical sample over (left turn, intended, right
        turn), on the next draw of gymnasium's env seeded with the slip seed (whose reset took the first draw)."""
        if self._slips is None:
            self._slips = Pcg64Doubles(self._slip_seed)
            self._slips.next_double()
        u = self._slips.next_double()
        left, intended, right = self._slip_cumulative
        if left > u:
            return (index - 1) % 4
        if intended > u:
            return index
        return (index + 1) % 4 if right > u else (index - 1) % 4

    def _info(self, *, valid: bool, effective: bool) -> dict[str, Any]:
        r, c = divmod(self._s, self._cols)
        return {
            "success": self._letters[self._s] == "G",
            "action_is_valid": bool(valid),
            "action_is_effective": bool(effective),
            "distance_to_goal": abs(r - self._goal[0]) + abs(c - self._goal[1]),
        }

    # -- rendering ----------------------------------------------------------------------------------------------

    def render(self) -> str:
        """The state as text, in the configured ``render_mode`` (grid, coordinates, or both)."""
        self._require_episode()
        return self._render_text()

    def _render_text(self) -> str:
        if self._grid_only:
            return self._render_grid()
        if self.config.render_mode == "coord":
            return self._render_coords()
        return f"Coordinates:\n{self._render_coords()}\nGrid:\n{self._render_grid()}"

    def _render_grid(self) -> str:
        """The symbol grid (cached per player tile for the episode: only the player's row differs)."""
        cached = self._renders.get(self._s)
        if cached is not None:
            return cached
        syms = self.config.symbols
        r, c = divmod(self._s, self._cols)
        letter = self._letters[self._s]
        player = syms["player_in_hole"] if letter == "H" else syms["player_on_goal"] if letter == "G" else syms["player"]
        first = r * self._cols
        row = "".join(self._cells[first:first + c]) + player + "".join(self._cells[first + c + 1:first + self._cols])
        text = "\n".join([*self._rows[:r], row, *self._rows[r + 1:]])
        self._renders[self._s] = text
        return text

    def _render_coords(self) -> str:
        pr, pc = self.position
        rows, cols = len(self._desc), len(self._desc[0])
        holes = [f"({r}, {c})" for r in range(rows) for c in range(cols) if self._desc[r][c] == "H"]
        tile = self._desc[pr][pc]
        where = " (in a hole)" if tile == "H" else (" (on the goal)" if tile == "G" else "")
        return "\n".join([
            f"Lake: {rows} rows x {cols} columns, positions are (row, col) with (0, 0) at the top left.",
            f"Player at (row {pr}, col {pc}){where}.",
            f"Goal at ({self._goal[0]}, {self._goal[1]}).",
            f"Holes: {', '.join(holes) if holes else 'none'}.",
        ])

    # -- oracle -------------------------------------------------------------------------------------------------

    def oracle_action(self) -> str | None:
        """The first move of a shortest hole-free path to the goal (None when the episode is over or no path)."""
        if not self._desc or self._done:
            return None
        path = shortest_path(self._desc, self.position)
        return path[0] if path else None
