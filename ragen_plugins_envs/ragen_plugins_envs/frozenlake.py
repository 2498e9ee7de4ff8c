"""FrozenLake: walk over a frozen lake to the goal without falling into a hole (RAGEN's FrozenLake).

Rules:

- The map is a ``size x size`` grid (default 4x4) of frozen tiles and holes with one start and one goal. Actions are
  ``Left``, ``Down``, ``Right``, ``Up`` (gymnasium's order, ids 0..3); a move into the edge stays in place.
- The dynamics are gymnasium's own ``FrozenLakeEnv`` (``gymnasium.envs.toy_text.frozen_lake``), composed, not
  rewritten: with ``success_rate < 1`` the lake is slippery and a move goes where intended with probability
  ``success_rate``, otherwise to one of the two perpendicular directions (``(1 - success_rate) / 2`` each);
  ``success_rate == 1`` is deterministic (``is_slippery=False``). The inner env is seeded from ``self.np_random`` at
  every reset, so an episode is a function of the seed and the actions.
- Reward ``+1.0`` on reaching the goal, otherwise ``0.0``. The episode ends (``terminated=True``) in a hole or at the
  goal; ``success`` means the player is on the goal.
- Anything that is not one of the four action names (matched case-insensitively after stripping whitespace) is
  invalid: reward ``0.0``, state unchanged, ``action_is_valid=False``. A step after the episode ended is invalid too
  and returns the final state with ``terminated=True``. ``action_is_effective`` is True when the player moved
  (a slip that ends where the player stood, e.g. into the edge, is not effective).
- The step limit (``max_actions_per_traj``) is applied by the rollout loop or gymnasium's ``TimeLimit``.

Maps: each tile is frozen with probability ``p`` (0.9, RAGEN's frozen probability), start and goal are two distinct
random tiles (always frozen), and a map is redrawn until a path of frozen tiles joins them (at most
``max_generation_tries`` draws, then :class:`FrozenLakeGenerationError`). All draws use ``self.np_random``.
``reset(options={"desc": [...]})`` plays a given map instead, in gymnasium's letters (``S`` start, ``F`` frozen,
``H`` hole, ``G`` goal).

Success rate: RAGEN's base FrozenLake tag uses 0.8 and its main experiment configs 1.0; the default here is 0.8 and
the variant ``frozenlake_det`` sets 1.0.

Text rendering uses RAGEN's symbols: ``P`` player, ``_`` frozen (the start too), ``O`` hole, ``G`` goal, ``X``
player in a hole, ``√`` player on the goal. ``render_mode="coord"`` lists positions instead and ``"grid_coord"``
shows both. :func:`shortest_path` (breadth-first over frozen tiles, ignoring slips) powers the oracle.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv as GymFrozenLakeEnv

from ragen_core.config import structure
from ragen_core.env import TextEnv
from ragen_core.validators import integer, number
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


def generate_map(rng: np.random.Generator, size: int = 4, p: float = 0.9, max_tries: int = 10_000) -> list[str]:
    """A random map with a path from start to goal (see the module docstring), drawn from ``rng`` only.

    :returns: the rows in gymnasium's letters.
    :raises FrozenLakeGenerationError: no connected map within ``max_tries`` draws.
    """
    for _ in range(max_tries):
        frozen = rng.random((size, size)) < p
        start, goal = (int(i) for i in rng.choice(size * size, size=2, replace=False))
        grid = [["F" if f else "H" for f in row] for row in frozen.tolist()]
        grid[start // size][start % size] = "S"
        grid[goal // size][goal % size] = "G"
        desc = ["".join(row) for row in grid]
        if shortest_path(desc, divmod(start, size)) is not None:
            return desc
    raise FrozenLakeGenerationError(
        f"no {size}x{size} FrozenLake map with frozen probability p={p} had a path from start to goal in "
        f"{max_tries} draws; raise p")


# ------------------------------------------------------------------------------------------------------------- env

class FrozenLakeEnv(TextEnv):
    """FrozenLake as a text env over gymnasium's FrozenLake dynamics (see the module docstring)."""

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
        self._inner: GymFrozenLakeEnv | None = None
        self._desc: list[str] = []
        self._goal = (0, 0)
        self._done = False

    @property
    def gym_env(self) -> GymFrozenLakeEnv:
        """The gymnasium FrozenLake env that carries the dynamics of the current episode."""
        if self._inner is None:
            raise RuntimeError("FrozenLakeEnv has no episode before reset()")
        return self._inner

    @property
    def desc(self) -> list[str]:
        """The current map in gymnasium's letters."""
        return list(self._desc)

    @property
    def position(self) -> tuple[int, int]:
        """The player's (row, col)."""
        row, col = divmod(int(self.gym_env.s), len(self._desc[0]))
        return row, col

    def state_key(self) -> str:
        """The map and the player's tile (``SFFH/.../FFFG@row,col``; empty before ``reset``): equal keys are equal
        states, so GiGPO's step groups (``estimator=gigpo``) compare the moves made from the same tile of the same
        map."""
        if getattr(self, "_inner", None) is None:
            return ""
        row, col = self.position
        return f"{'/'.join(self._desc)}@{row},{col}"

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode on a new random map (or on ``options["desc"]``, rows of ``S``/``F``/``H``/``G``)."""
        super().reset(seed=seed)
        cfg = self.config
        given = (options or {}).get("desc")
        if given is not None:
            desc = _validate_desc(given)
        else:
            desc = generate_map(self.np_random, cfg.size, cfg.p, cfg.max_generation_tries)
        self._desc = desc
        goal = "".join(desc).index("G")
        self._goal = divmod(goal, len(desc[0]))
        self._inner = GymFrozenLakeEnv(desc=desc, is_slippery=cfg.is_slippery, success_rate=cfg.success_rate)
        self._inner.reset(seed=int(self.np_random.integers(2**31 - 1)))
        self._done = False
        info = self._info(valid=True, effective=False)
        path = shortest_path(desc, self.position)
        info["optimal_moves"] = len(path) if path is not None else -1
        return self.render(), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply one action name through gymnasium's dynamics."""
        inner = self.gym_env
        index = _ACTION_INDEX.get(action.strip().lower()) if isinstance(action, str) else None
        if index is None or self._done:
            return self.render(), 0.0, self._done, False, self._info(valid=False, effective=False)
        before = int(inner.s)
        state, reward, terminated, _truncated, _info = inner.step(index)
        self._done = bool(terminated)
        return self.render(), float(reward), self._done, False, self._info(valid=True, effective=int(state) != before)

    def _tile(self) -> str:
        r, c = self.position
        return self._desc[r][c]

    def _info(self, *, valid: bool, effective: bool) -> dict[str, Any]:
        r, c = self.position
        return {
            "success": self._tile() == "G",
            "action_is_valid": bool(valid),
            "action_is_effective": bool(effective),
            "distance_to_goal": abs(r - self._goal[0]) + abs(c - self._goal[1]),
        }

    # -- rendering ----------------------------------------------------------------------------------------------

    def render(self) -> str:
        """The state as text, in the configured ``render_mode`` (grid, coordinates, or both)."""
        mode = self.config.render_mode
        if mode == "text":
            return self._render_grid()
        if mode == "coord":
            return self._render_coords()
        return f"Coordinates:\n{self._render_coords()}\nGrid:\n{self._render_grid()}"

    def _render_grid(self) -> str:
        syms = self.config.symbols
        pr, pc = self.position
        lines = []
        for r, row in enumerate(self._desc):
            cells = []
            for c, letter in enumerate(row):
                if (r, c) == (pr, pc):
                    role = {"H": "player_in_hole", "G": "player_on_goal"}.get(letter, "player")
                else:
                    role = {"H": "hole", "G": "goal"}.get(letter, "frozen")
                cells.append(syms[role])
            lines.append("".join(cells))
        return "\n".join(lines)

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
        if self._inner is None or self._done:
            return None
        path = shortest_path(self._desc, self.position)
        return path[0] if path else None
