"""Sokoban: push every box onto a target (RAGEN's Sokoban, gym-sokoban's rules, our own fast generator).

Rules (gym-sokoban's, which RAGEN uses unchanged):

- The room is a grid enclosed by walls. The player moves ``Up``, ``Down``, ``Left`` or ``Right``; walking into a box
  pushes it one cell if the cell behind it is free (not a wall, not another box). Boxes cannot be pulled.
- Reward per step: ``-0.1`` (option ``step_penalty``); ``+1`` when the step pushes a box onto a target, ``-1`` when
  it pushes one off a target; ``+10`` when every box is on a target, which ends the episode (``terminated=True``, ``success=True``).
- Walking into a wall, or pushing a box into a wall or another box, is a *valid* action that changes nothing:
  ``action_is_valid=True``, ``action_is_effective=False``, reward ``-0.1`` (as in gym-sokoban).
- Anything that is not one of the four action names (matched case-insensitively after stripping whitespace) is
  *invalid*: reward ``0.0``, state unchanged, ``action_is_valid=False``. A step after the episode ended is invalid
  too and returns the final state with ``terminated=True``.
- ``max_steps`` (gym-sokoban's episode limit, 100) sets ``truncated=True`` once that many valid actions were taken;
  the env keeps working if stepped further. The rollout's own limit (``max_actions_per_traj``) is applied by the
  rollout loop or gymnasium's ``TimeLimit``, not here.

Generation (gym-sokoban's method, reimplemented for speed and seeded only by ``self.np_random``):

1. *Topology*: a random walk of ``num_gen_steps`` steps (default ``int(1.7 * (rows + cols))``) that changes
   direction with probability ``p_change_directions`` (0.35) and carves one of five small masks around each
   position; the border is always wall.
2. *Placement*: the player and ``num_boxes`` targets on distinct random floor cells; every box starts on its target.
3. *Reverse play*: starting from the solved state, the player walks or *pulls* the box behind it. gym-sokoban's
   depth-first search is reproduced state for state (``reverse_search="dfs"``, the default; ``search_depth`` is its
   time-to-live): each state first reached with every target uncovered (no box and no player on a target) is scored
   ``pulls on the path x total box displacement`` (Manhattan distance of each box from its own target) --
   gym-sokoban's ``box_swaps x displacement``, whose ``box_swaps`` counts pulls in practice -- and the first
   best-scoring state becomes the start. Reversing the pulls solves it, so every generated room is solvable by
   construction (and :func:`solve` confirms it).
4. A topology without any positive score is discarded and generation retries, at most ``max_generation_tries``
   times, then raises :class:`SokobanGenerationError`.

Same rooms, faster: on the same topology and placement the depth-first search returns exactly gym-sokoban's start
state and score, but works on tuples of flat cell indices instead of copying and hashing numpy arrays (with one box,
the default, each state is packed into one integer and marked in a bytearray), and the env is seeded through
:mod:`ragen_plugins_envs.fast_rng` (gymnasium's generator state without its construction cost), so a 6x6 room with
one box takes about 0.2 ms, its optimal solution included (gym-sokoban: 4 to 7 ms;
``bench/sokoban_vs_gym_sokoban.py``; RAGEN's own env: ``bench/envs_vs_ragen.py``). gym-sokoban
always searches with a time-to-live of 300; RAGEN passes its ``search_depth`` there. Our default of 30 gives the same
difficulty on 6x6 rooms with one box (about 3 optimal moves on average, at most about 13) and is cheaper on larger
rooms. The depth-first pull counts depend on the search path and favour states near the solution; the alternative
``reverse_search="bfs"`` scores each state by the pulls of a shortest reverse path (breadth-first, ``search_depth``
reverse moves, ties broken by the seeded generator) and gives harder rooms (about 5.5 optimal moves on 6x6).

:func:`solve` is an exact breadth-first solver (optimal number of moves) with dead-square pruning (one box: states
packed into integers, same order, same plan); it powers :meth:`SokobanEnv.oracle_action` and
``info["optimal_moves"]`` at reset.

Rooms are integer arrays with the cell codes :data:`WALL` 0, :data:`FLOOR` 1, :data:`TARGET` 2,
:data:`BOX_ON_TARGET` 3, :data:`BOX` 4, :data:`PLAYER` 5, :data:`PLAYER_ON_TARGET` 6 (RAGEN's render lookup);
one array holds the whole state. ``reset(options={"room": ...})`` loads a hand-built room (such an array, or text
in the env's symbols).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import attrs
import numpy as np

from ragen_core.config import structure
from ragen_core.env import TextEnv
from ragen_core.validators import constraint, integer, number
from ragen_plugins_envs.fast_rng import seed_env
from ragen_plugins_envs.grid_symbols import merge_symbols, symbols_validator

__all__ = [
    "ACTIONS",
    "BOX",
    "BOX_ON_TARGET",
    "DEFAULT_SYMBOLS",
    "FLOOR",
    "PLAYER",
    "PLAYER_ON_TARGET",
    "TARGET",
    "WALL",
    "SokobanConfig",
    "SokobanEnv",
    "SokobanGenerationError",
    "generate_room",
    "parse_room",
    "render_room",
    "solve",
]

WALL, FLOOR, TARGET, BOX_ON_TARGET, BOX, PLAYER, PLAYER_ON_TARGET = range(7)

#: action names in RAGEN's order (its action ids 1..4)
ACTIONS: tuple[str, ...] = ("Up", "Down", "Left", "Right")
_ACTION_INDEX = {name.lower(): i for i, name in enumerate(ACTIONS)}
#: (row, col) change of each action
_MOVES: tuple[tuple[int, int], ...] = ((-1, 0), (1, 0), (0, -1), (0, 1))

#: role -> symbol of the text grid (RAGEN's)
DEFAULT_SYMBOLS: Mapping[str, str] = {
    "wall": "#",
    "empty": "_",
    "target": "O",
    "box_on_target": "√",
    "box": "X",
    "player": "P",
    "player_on_target": "S",
}
_ROLE_CODE = {"wall": WALL, "empty": FLOOR, "target": TARGET, "box_on_target": BOX_ON_TARGET, "box": BOX,
              "player": PLAYER, "player_on_target": PLAYER_ON_TARGET}
_ROLE_MEANING = {"wall": "wall", "empty": "empty floor", "target": "target (empty)", "box_on_target": "box on a target",
                 "box": "box not on a target", "player": "player", "player_on_target": "player standing on a target"}

STEP_PENALTY = -0.1
BOX_ON_REWARD = 1.0
BOX_OFF_PENALTY = -1.0
FINISH_REWARD = 10.0

_INSTRUCTION = (
    "You are solving the Sokoban puzzle. You are the player and you need to push all boxes onto targets. "
    "When you are right next to a box, you can push it by moving in its direction; the box moves one cell. "
    "You cannot push a box into a wall or another box, you cannot push two boxes at once, and you cannot pull a box. "
    "A box pushed into a corner that is not a target can never be moved to a target again, so plan ahead."
)

# the five carving masks of gym-sokoban's random walk, as (row, col) offsets from the walk position
_MASK_OFFSETS: tuple[tuple[tuple[int, int], ...], ...] = tuple(
    tuple((r - 1, c - 1) for r in range(3) for c in range(3) if mask[r][c])
    for mask in (
        ((0, 0, 0), (1, 1, 1), (0, 0, 0)),
        ((0, 1, 0), (0, 1, 0), (0, 1, 0)),
        ((0, 0, 0), (1, 1, 0), (0, 1, 0)),
        ((0, 0, 0), (1, 1, 0), (1, 1, 0)),
        ((0, 0, 0), (0, 1, 1), (0, 1, 0)),
    )
)
_WALK_DIRECTIONS = ((1, 0), (0, 1), (-1, 0), (0, -1))

MIN_DIM, MAX_DIM = 5, 32


class SokobanGenerationError(RuntimeError):
    """No room with a positive difficulty score was found within the allowed number of tries."""


# ----------------------------------------------------------------------------------------------------------- config

def _merge_symbols(value: Mapping[str, str] | None) -> dict[str, str]:
    """Symbols given by the user (possibly only some roles) merged over :data:`DEFAULT_SYMBOLS`."""
    return merge_symbols(DEFAULT_SYMBOLS, value)


_dim_room = constraint(f"(rows, cols), each in [{MIN_DIM}, {MAX_DIM}] (the border is wall)",
                       lambda v: len(v) == 2 and all(MIN_DIM <= int(x) <= MAX_DIM for x in v))


@attrs.define
class SokobanConfig:
    """Options of :class:`SokobanEnv` (RAGEN's defaults).

    :ivar dim_room: (rows, cols) of the room including the wall border, each 5..32.
    :ivar num_boxes: boxes (and targets); at most ``(interior cells - 2) // 2``.
    :ivar max_steps: gym-sokoban's episode limit: ``truncated=True`` after this many valid actions.
    :ivar search_depth: time-to-live of the depth-first reverse play (``"bfs"``: reverse moves) picking the start.
    :ivar max_actions_per_traj: actions one trajectory may take (applied by the rollout loop).
    :ivar render_mode: ``"text"`` (symbol grid), ``"coord"`` (positions as text) or ``"grid_coord"`` (both).
    :ivar symbols: role -> symbol for the grid; roles not given keep RAGEN's symbols.
    :ivar num_gen_steps: random-walk steps of the topology (None: ``int(1.7 * (rows + cols))``, gym-sokoban's).
    :ivar p_change_directions: probability that the random walk turns at a step.
    :ivar max_generation_tries: topologies tried before :class:`SokobanGenerationError`.
    :ivar reverse_search: ``"dfs"`` (gym-sokoban's reverse play, RAGEN's rooms) or ``"bfs"`` (harder rooms).
    :ivar compute_optimal_moves: solve each new room at reset and report ``info["optimal_moves"]``.
    :ivar step_penalty: reward of every valid action on top of the box rewards (RAGEN's and gym-sokoban's -0.1).
        With a weak policy whose episodes rarely succeed, this cost is most of the reward signal and rewards doing
        less (fewer actions, or unparseable answers, which cost only the format penalty); 0 leaves the outcome
        rewards alone.
    """

    dim_room: tuple[int, int] = attrs.field(default=(6, 6), converter=tuple, validator=_dim_room)
    num_boxes: int = attrs.field(default=1, validator=integer(1))
    max_steps: int = attrs.field(default=100, validator=integer(1))
    search_depth: int = attrs.field(default=30, validator=integer(1))
    max_actions_per_traj: int = attrs.field(default=10, validator=integer(1))
    render_mode: Literal["text", "coord", "grid_coord"] = attrs.field(
        default="text", validator=attrs.validators.in_(("text", "coord", "grid_coord")))
    symbols: dict[str, str] = attrs.field(factory=lambda: dict(DEFAULT_SYMBOLS), converter=_merge_symbols,
                                          validator=symbols_validator(DEFAULT_SYMBOLS))
    num_gen_steps: int | None = attrs.field(default=None, validator=attrs.validators.optional(integer(1)))
    p_change_directions: float = attrs.field(default=0.35, validator=number(0, 1))
    max_generation_tries: int = attrs.field(default=1000, validator=integer(1))
    reverse_search: Literal["dfs", "bfs"] = attrs.field(default="dfs", validator=attrs.validators.in_(("dfs", "bfs")))
    compute_optimal_moves: bool = True
    step_penalty: float = STEP_PENALTY

    def __attrs_post_init__(self) -> None:
        rows, cols = self.dim_room
        interior = (rows - 2) * (cols - 2)
        most = (interior - 2) // 2
        if self.num_boxes > most:
            raise ValueError(f"num_boxes={self.num_boxes} is too many for dim_room={self.dim_room}: its "
                             f"{interior} interior cells hold at most {most} boxes (each box needs a target and room "
                             f"to move, plus the player)")

    @property
    def walk_steps(self) -> int:
        """The random-walk length actually used."""
        rows, cols = self.dim_room
        return self.num_gen_steps if self.num_gen_steps is not None else int(1.7 * (rows + cols))


# ----------------------------------------------------------------------------------------------------------- rooms

@attrs.frozen
class _Layout:
    """A room decoded to flat cell indices (``index = row * cols + col``)."""

    rows: int
    cols: int
    free: tuple[bool, ...]  # not a wall
    targets: tuple[int, ...]
    player: int
    boxes: tuple[int, ...]

    @classmethod
    def from_array(cls, room: Any) -> _Layout:
        arr = np.asarray(room)
        if arr.ndim != 2 or arr.shape[0] < 3 or arr.shape[1] < 3:
            raise ValueError(f"a room must be a 2-D grid of at least 3x3 cells, got shape {arr.shape}")
        if not np.issubdtype(arr.dtype, np.integer) or arr.min() < WALL or arr.max() > PLAYER_ON_TARGET:
            raise ValueError("room cells must be integer codes 0..6 (wall, floor, target, box on target, box, "
                             "player, player on target)")
        rows, cols = arr.shape
        flat = arr.ravel().tolist()
        border = np.concatenate([arr[0], arr[-1], arr[:, 0], arr[:, -1]])
        if (border != WALL).any():
            raise ValueError("a room must be enclosed by walls (every border cell a wall)")
        players = [i for i, v in enumerate(flat) if v in (PLAYER, PLAYER_ON_TARGET)]
        if len(players) != 1:
            raise ValueError(f"a room needs exactly one player, found {len(players)}")
        targets = tuple(i for i, v in enumerate(flat) if v in (TARGET, BOX_ON_TARGET, PLAYER_ON_TARGET))
        boxes = tuple(i for i, v in enumerate(flat) if v in (BOX, BOX_ON_TARGET))
        if not boxes or len(boxes) != len(targets):
            raise ValueError(f"a room needs as many targets as boxes (at least one): {len(boxes)} boxes, "
                             f"{len(targets)} targets")
        return cls(rows, cols, tuple(v != WALL for v in flat), targets, players[0], boxes)

    def to_array(self, player: int | None = None, boxes: Sequence[int] | None = None) -> np.ndarray:
        player = self.player if player is None else player
        boxes = self.boxes if boxes is None else boxes
        flat = np.where(np.asarray(self.free), FLOOR, WALL).astype(np.int8)
        flat[list(self.targets)] = TARGET
        target_set = set(self.targets)
        for b in boxes:
            flat[b] = BOX_ON_TARGET if b in target_set else BOX
        flat[player] = PLAYER_ON_TARGET if player in target_set else PLAYER
        return flat.reshape(self.rows, self.cols)


def parse_room(text: str, symbols: Mapping[str, str] | None = None) -> np.ndarray:
    """Parse a text grid (rows separated by newlines, one symbol per cell) into a room array.

    :param text: the grid, e.g. the env's text rendering; surrounding blank lines are ignored.
    :param symbols: role -> symbol (defaults to :data:`DEFAULT_SYMBOLS`); symbols may be several characters long.
    :raises ValueError: unknown symbol, ragged rows, or a room that breaks :func:`solve`'s rules.
    """
    syms = _merge_symbols(symbols)
    by_symbol = {sym: _ROLE_CODE[role] for role, sym in syms.items()}
    ordered = sorted(by_symbol, key=len, reverse=True)
    grid: list[list[int]] = []
    for line in text.strip("\n").split("\n"):
        line = line.rstrip("\r")
        row: list[int] = []
        pos = 0
        while pos < len(line):
            for sym in ordered:
                if line.startswith(sym, pos):
                    row.append(by_symbol[sym])
                    pos += len(sym)
                    break
            else:
                raise ValueError(f"unknown symbol {line[pos]!r} in room row {line!r}")
        grid.append(row)
    if not grid or len({len(r) for r in grid}) != 1:
        raise ValueError("room rows must all have the same number of cells")
    room = np.array(grid, dtype=np.int8)
    _Layout.from_array(room)  # validate
    return room


def render_room(room: Any, symbols: Mapping[str, str] | None = None) -> str:
    """The text grid of a room array (rows joined by newlines)."""
    syms = _merge_symbols(symbols)
    lookup = {code: syms[role] for role, code in _ROLE_CODE.items()}
    return "\n".join("".join(lookup[int(v)] for v in row) for row in np.asarray(room))


# ------------------------------------------------------------------------------------------------------ generation

@functools.lru_cache(maxsize=32)
def _flat_masks(cols: int) -> tuple[tuple[int, ...], ...]:
    """The five carving masks as flat-index offsets in a room ``cols`` wide."""
    return tuple(tuple(mr * cols + mc for mr, mc in mask) for mask in _MASK_OFFSETS)


def _topology(rows: int, cols: int, p_change: float, num_steps: int, rng: np.random.Generator) -> list[bool]:
    """gym-sokoban's random-walk topology as a flat floor mask (True = floor); the border is wall.

    The walk starts at a uniform cell of rows/cols ``1..n-1``, turns to a uniform direction with probability
    ``p_change`` before each step, is clamped to the interior and carves a uniform choice of the five masks.
    All draws come from one ``rng.random`` call.
    """
    u = rng.random(3 + 3 * num_steps).tolist()
    direction = int(u[0] * 4)
    r, c = 1 + int(u[1] * (rows - 1)), 1 + int(u[2] * (cols - 1))
    level = [False] * (rows * cols)
    masks = _flat_masks(cols)
    n_masks = len(masks)
    last_r, last_c = rows - 2, cols - 2
    for k in range(3, 3 + 3 * num_steps, 3):
        if u[k] < p_change:
            direction = int(u[k + 1] * 4)
        dr, dc = _WALK_DIRECTIONS[direction]
        r = 1 if r + dr < 1 else (last_r if r + dr > last_r else r + dr)
        c = 1 if c + dc < 1 else (last_c if c + dc > last_c else c + dc)
        centre = r * cols + c
        for offset in masks[int(u[k + 2] * n_masks)]:
            level[centre + offset] = True
    last = (rows - 1) * cols
    for i in range(cols):
        level[i] = level[last + i] = False
    for i in range(0, rows * cols, cols):
        level[i] = level[i + cols - 1] = False
    return level


def _single_box_key(p: int, boxes: tuple[int, ...], moved: int) -> Any:
    """A reverse-play state's key with one box (see :func:`_boxes_key`)."""
    return p, boxes[0], moved


def _boxes_key(p: int, boxes: tuple[int, ...], moved: int) -> Any:
    """A reverse-play state's key: gym-sokoban keys states by the room array, in which a box that was ever pulled has
    its own cell code (each box position and whether it moved, encoded as 2 * position + flag)."""
    return p, tuple(sorted(2 * b + (moved >> i & 1) for i, b in enumerate(boxes)))


def _displacement(boxes: tuple[int, ...], origins: list[tuple[int, int]], cols: int) -> int:
    """The boxes' total Manhattan distance from the targets they started on."""
    total = 0
    for b, (tr, tc) in zip(boxes, origins):
        br, bc = divmod(b, cols)
        total += abs(br - tr) + abs(bc - tc)
    return total


_ReverseState = tuple[int, tuple[int, ...], int, int, int, Any]


def _reverse_children(free: Sequence[bool], deltas: tuple[int, ...], state: tuple[int, tuple[int, ...], int, int, int],
                      key_of: Any, explored: set[Any]) -> tuple[list[_ReverseState], list[_ReverseState]]:
    """The unexplored children of ``state`` (player, boxes, moved mask, pulls, time-to-live) in gym-sokoban's action
    order: ``(pulled, walked)``, the children of the pull actions and of the move actions."""
    p, boxes, moved, pulls, life = state
    pulled: list[_ReverseState] = []
    walked: list[_ReverseState] = []
    for d in deltas:
        q = p + d
        if not free[q] or q in boxes:
            continue  # blocked: the child is this (explored) state
        behind = p - d
        if behind in boxes:
            i = boxes.index(behind)
            nboxes, nmoved = boxes[:i] + (p,) + boxes[i + 1:], moved | 1 << i
            nkey = key_of(q, nboxes, nmoved)
            if nkey not in explored:
                pulled.append((q, nboxes, nmoved, pulls + 1, life, nkey))
            nkey = key_of(q, boxes, moved)
            if nkey not in explored:
                walked.append((q, boxes, moved, pulls, life, nkey))
        else:  # a pull without a box is the move (its duplicate, expanded later, would be skipped)
            nkey = key_of(q, boxes, moved)
            if nkey not in explored:
                pulled.append((q, boxes, moved, pulls, life, nkey))
    return pulled, walked


def _reverse_dfs(free: Sequence[bool], cols: int, targets: tuple[int, ...], player: int, ttl: int,
                 max_states: int = 300_000) -> tuple[int, tuple[int, ...], int]:
    """gym-sokoban's reverse play, state for state: a depth-first search with time-to-live ``ttl``.

    Actions are tried in gym-sokoban's order (pull up/down/left/right, then move up/down/left/right); a state
    (positions, and which boxes were ever pulled) is expanded only on its first visit; the score of a state is
    ``pulls on the path that first reached it x total displacement``, 0 unless every target is uncovered; the first
    state with the highest score wins. Returns ``(player, boxes, score)`` where ``boxes[i]`` started on
    ``targets[i]``.

    Children that are already explored, or whose time-to-live would run out on arrival, are not pushed: gym-sokoban
    visits and discards them, with the same outcome.
    """
    if len(targets) == 1:
        return _reverse_dfs_one_box(free, cols, targets[0], player, ttl, max_states)
    return _reverse_dfs_boxes(free, cols, targets, player, ttl, max_states)


def _reverse_dfs_boxes(free: Sequence[bool], cols: int, targets: tuple[int, ...], player: int, ttl: int,
                       max_states: int) -> tuple[int, tuple[int, ...], int]:
    """:func:`_reverse_dfs` for any number of boxes, states as tuples (the one-box search is checked against it)."""
    deltas = (-cols, cols, -1, 1)
    target_set = frozenset(targets)
    origins = [divmod(t, cols) for t in targets]
    single = len(targets) == 1
    tr0, tc0 = origins[0]

    key_of = _single_box_key if single else _boxes_key
    explored: set[Any] = set()
    best_score, best = -1, (player, targets)
    # (player, boxes, bit mask of boxes pulled at least once, pulls, time-to-live, key)
    stack: list[tuple[int, tuple[int, ...], int, int, int, Any]] = [
        (player, targets, 0, 0, ttl, key_of(player, targets, 0))]
    while stack:
        p, boxes, moved, pulls, life, key = stack.pop()
        life -= 1
        if life <= 0 or len(explored) >= max_states or key in explored:
            continue
        explored.add(key)
        if pulls and p not in target_set and target_set.isdisjoint(boxes):
            if single:
                br, bc = divmod(boxes[0], cols)
                score = pulls * (abs(br - tr0) + abs(bc - tc0))
            else:
                score = pulls * _displacement(boxes, origins, cols)
        else:
            score = 0
        if score > best_score:
            best_score, best = score, (p, boxes)
        if life <= 1:
            continue
        pulled, walked = _reverse_children(free, deltas, (p, boxes, moved, pulls, life), key_of, explored)
        # LIFO: push in reverse so children are expanded in action order, like gym-sokoban's recursion
        stack.extend(reversed(walked))
        stack.extend(reversed(pulled))
    return best[0], best[1], max(best_score, 0)


def _reverse_dfs_one_box(free: Sequence[bool], cols: int, target: int, player: int, ttl: int,
                         max_states: int) -> tuple[int, tuple[int, ...], int]:
    """:func:`_reverse_dfs` with one box (the default room), state for state: a state is packed into one integer
    (player, box, whether the box was pulled yet) marked in a bytearray, children are pushed straight onto the stack
    (the moves that only walk away from a box first, so that they pop after every pull, in action order), and each
    cell's open directions are listed once."""
    n = len(free)
    deltas = (-cols, cols, -1, 1)
    tr, tc = divmod(target, cols)
    explored = bytearray(2 * n * n)
    count = 0
    best_score, best_player, best_box = 0, player, target
    open_moves: list[tuple[tuple[int, int], ...] | None] = [None] * n
    stack = [(player, target, 0, 0, ttl)]
    pop, push = stack.pop, stack.append
    while stack:
        p, b, moved, pulls, life = pop()
        life -= 1
        key = (p * n + b) << 1 | moved
        if life <= 0 or count >= max_states or explored[key]:
            continue
        explored[key] = 1
        count += 1
        if pulls and p != target and b != target:
            br, bc = divmod(b, cols)
            score = pulls * (abs(br - tr) + abs(bc - tc))
            if score > best_score:
                best_score, best_player, best_box = score, p, b
        if life <= 1:
            continue
        moves = open_moves[p]
        if moves is None:  # (next cell, cell behind) per open direction, last direction first (LIFO)
            moves = open_moves[p] = tuple((p + d, p - d) for d in reversed(deltas) if free[p + d])
        for q, behind in moves:  # walking away from the box instead of pulling it
            if behind == b and not explored[(q * n + b) << 1 | moved]:
                push((q, b, moved, pulls, life))
        for q, behind in moves:
            if q == b:
                continue
            if behind == b:
                if not explored[(q * n + p) << 1 | 1]:
                    push((q, p, 1, pulls + 1, life))
            elif not explored[(q * n + b) << 1 | moved]:
                push((q, b, moved, pulls, life))
    return best_player, (best_box,), best_score


def _reverse_bfs(free: Sequence[bool], cols: int, targets: tuple[int, ...], player: int, depth: int,
                 rng: np.random.Generator) -> tuple[int, tuple[int, ...], int]:
    """Breadth-first reverse play up to ``depth`` reverse moves: scores use the pulls of a shortest reverse path.

    Picks uniformly (by ``rng``) among the best-scoring states. Gives harder rooms than the depth-first search,
    whose path-dependent pull counts favour states close to the solution.
    """
    deltas = (-cols, cols, -1, 1)
    target_set = frozenset(targets)
    origins = [divmod(t, cols) for t in targets]
    single = len(targets) == 1
    visited: set[Any] = {(player, targets[0]) if single else (player, targets)}
    frontier: list[tuple[int, tuple[int, ...], int]] = [(player, targets, 0)]
    best_score = 0
    best: list[tuple[int, tuple[int, ...]]] = []
    for _ in range(depth):
        nxt: list[tuple[int, tuple[int, ...], int]] = []
        for p, boxes, pulls in frontier:
            for d in deltas:
                q = p + d
                if not free[q] or q in boxes:
                    continue
                behind = p - d
                successors = [(boxes, pulls)]
                if behind in boxes:
                    successors.append((tuple(p if b == behind else b for b in boxes), pulls + 1))
                for nboxes, npulls in successors:
                    key: Any = (q, nboxes[0]) if single else (q, tuple(sorted(nboxes)))
                    if key in visited:
                        continue
                    visited.add(key)
                    nxt.append((q, nboxes, npulls))
                    if npulls == 0 or q in target_set or not target_set.isdisjoint(nboxes):
                        continue
                    displacement = 0
                    for b, (tr, tc) in zip(nboxes, origins):
                        br, bc = divmod(b, cols)
                        displacement += abs(br - tr) + abs(bc - tc)
                    score = npulls * displacement
                    if score > best_score:
                        best_score, best = score, [(q, nboxes)]
                    elif score == best_score:
                        best.append((q, nboxes))
        if not nxt:
            break
        frontier = nxt
    if best_score == 0:
        return player, targets, 0
    p, boxes = best[int(rng.integers(len(best)))] if len(best) > 1 else best[0]
    return p, boxes, best_score


def _generate_layout(rng: np.random.Generator, dim_room: tuple[int, int], num_boxes: int, search_depth: int,
                     num_gen_steps: int | None, p_change_directions: float, max_tries: int,
                     reverse_search: str) -> _Layout:
    rows, cols = dim_room
    steps = num_gen_steps if num_gen_steps is not None else int(1.7 * (rows + cols))
    for _ in range(max_tries):
        free = _topology(rows, cols, p_change_directions, steps, rng)
        cells = [i for i, f in enumerate(free) if f]
        n = len(cells)
        if n <= num_boxes + 1:
            continue
        # the player and the targets: distinct uniform floor cells (a partial Fisher-Yates shuffle)
        for j, u in enumerate(rng.random(num_boxes + 1).tolist()):
            k = j + int(u * (n - j))
            cells[j], cells[k] = cells[k], cells[j]
        player, targets = cells[0], tuple(sorted(cells[1:num_boxes + 1]))
        if reverse_search == "dfs":
            player, boxes, score = _reverse_dfs(free, cols, targets, player, search_depth)
        else:
            player, boxes, score = _reverse_bfs(free, cols, targets, player, search_depth, rng)
        if score > 0:
            return _Layout(rows, cols, tuple(free), targets, player, boxes)
    raise SokobanGenerationError(
        f"no Sokoban room with {num_boxes} box(es) in {rows}x{cols} reached a positive difficulty score in "
        f"{max_tries} tries (search_depth={search_depth}); use fewer boxes, a larger room or a deeper search")


def generate_room(rng: np.random.Generator, dim_room: tuple[int, int] = (6, 6), num_boxes: int = 1,
                  search_depth: int = 30, num_gen_steps: int | None = None, p_change_directions: float = 0.35,
                  max_tries: int = 1000, reverse_search: str = "dfs") -> np.ndarray:
    """Generate a solvable room (see the module docstring), drawing randomness from ``rng`` only.

    :param reverse_search: ``"dfs"`` (gym-sokoban's depth-first reverse play, ``search_depth`` is its time-to-live)
        or ``"bfs"`` (breadth-first, ``search_depth`` reverse moves, harder rooms).
    :returns: the room as an ``int8`` array of cell codes.
    :raises SokobanGenerationError: no topology gave a positive score within ``max_tries`` tries.
    """
    return _generate_layout(rng, (int(dim_room[0]), int(dim_room[1])), num_boxes, search_depth, num_gen_steps, p_change_directions,
                            max_tries, reverse_search).to_array()


# ---------------------------------------------------------------------------------------------------------- solver

def _live_cells(free: Sequence[bool], cols: int, targets: Sequence[int]) -> list[bool]:
    """Cells from which a lone box can still be pushed onto some target (the rest are dead squares)."""
    live = [False] * len(free)
    stack = list(targets)
    for t in stack:
        live[t] = True
    deltas = (-cols, cols, -1, 1)
    while stack:
        y = stack.pop()
        for d in deltas:
            x, stand = y - d, y - 2 * d  # the box came from x, pushed by a player standing on x - d
            if 0 <= stand < len(free) and free[x] and free[stand] and not live[x]:
                live[x] = True
                stack.append(x)
    return live


def _solve_layout(layout: _Layout, max_states: int) -> list[str] | None:
    """Breadth-first over (player, boxes) with dead-square pruning: an optimal plan, or None (see :func:`solve`)."""
    if len(layout.boxes) == 1:
        return _solve_one_box(layout, max_states)
    return _solve_boxes(layout, max_states)


def _solve_one_box(layout: _Layout, max_states: int) -> list[str] | None:
    """:func:`_solve_boxes` with one box, in the same breadth-first order (so the same plan), a state packed into
    one integer (``player * cells + box``) and its parent link into another (``parent state * 4 + action``)."""
    free, cols = layout.free, layout.cols
    n = len(free)
    target, box = layout.targets[0], layout.boxes[0]
    if box == target:
        return []
    live = _live_cells(free, cols, layout.targets)
    if not live[box]:
        return None
    deltas = tuple(enumerate((-cols, cols, -1, 1)))
    start = layout.player * n + box
    parent = {start: -1}
    frontier = [start]
    while frontier:
        reached = []
        for state in frontier:
            p, b = divmod(state, n)
            for a, d in deltas:
                q = p + d
                if not free[q]:
                    continue
                if q == b:
                    new = q * n + q + d
                    if not free[q + d] or not live[q + d] or new in parent:
                        continue
                    parent[new] = state * 4 + a
                    if q + d == target:
                        return _plan_packed(parent, new)
                else:
                    new = q * n + b
                    if new in parent:
                        continue
                    parent[new] = state * 4 + a
                reached.append(new)
            if len(parent) > max_states:
                return None
        frontier = reached
    return None


def _plan_packed(parent: Mapping[int, int], state: int) -> list[str]:
    """The actions that led to ``state`` in :func:`_solve_one_box`'s parent links."""
    actions: list[str] = []
    link = parent[state]
    while link >= 0:
        state, a = divmod(link, 4)
        actions.append(ACTIONS[a])
        link = parent[state]
    actions.reverse()
    return actions


def _solve_boxes(layout: _Layout, max_states: int) -> list[str] | None:
    """:func:`_solve_layout` for any number of boxes, states as (player, sorted boxes) tuples."""
    target_set = frozenset(layout.targets)
    boxes0 = tuple(sorted(layout.boxes))
    if all(b in target_set for b in boxes0):
        return []
    free, cols = layout.free, layout.cols
    live = _live_cells(free, cols, layout.targets)
    if not all(live[b] for b in boxes0):
        return None
    deltas = (-cols, cols, -1, 1)
    start = (layout.player, boxes0)
    parent: dict[tuple[int, tuple[int, ...]], tuple[Any, int] | None] = {start: None}
    frontier = [start]
    while frontier:
        nxt = []
        for state in frontier:
            p, boxes = state
            for a, d in enumerate(deltas):
                q = p + d
                if not free[q]:
                    continue
                if q in boxes:
                    r = q + d
                    if not free[r] or r in boxes or not live[r]:
                        continue
                    nboxes = tuple(sorted(r if b == q else b for b in boxes))
                    new = (q, nboxes)
                    if new in parent:
                        continue
                    parent[new] = (state, a)
                    if all(b in target_set for b in nboxes):
                        return _plan(parent, new)
                else:
                    new = (q, boxes)
                    if new in parent:
                        continue
                    parent[new] = (state, a)
                nxt.append(new)
            if len(parent) > max_states:
                return None
        frontier = nxt
    return None


def _plan(parent: Mapping[Any, tuple[Any, int] | None], state: Any) -> list[str]:
    actions: list[str] = []
    link = parent[state]
    while link is not None:
        state, a = link
        actions.append(ACTIONS[a])
        link = parent[state]
    actions.reverse()
    return actions


def solve(room: Any, max_states: int = 2_000_000) -> list[str] | None:
    """An optimal (fewest moves) action sequence that puts every box on a target, or None.

    :param room: a room array of cell codes (or text in the default symbols).
    :param max_states: give up (return None) after exploring this many states.
    :returns: the action names; ``[]`` when the room is already solved; None when it is unsolvable (or the search
        gave up).
    """
    layout = _Layout.from_array(parse_room(room) if isinstance(room, str) else room)
    return _solve_layout(layout, max_states)


# ------------------------------------------------------------------------------------------------------------- env

class SokobanEnv(TextEnv):
    """Sokoban as a text env (see the module docstring for rules, rewards and generation)."""

    config_cls: ClassVar[type] = SokobanConfig
    config: SokobanConfig

    def __init__(self, config: SokobanConfig | None = None, **options: Any) -> None:
        # ``render_mode`` is this env's text-layout option; gymnasium's own render mode is always "ansi" (text)
        if options.get("render_mode") == "ansi":
            options.pop("render_mode")
        if config is None:
            config = structure(SokobanConfig, options, type(self).__name__)
        elif options:
            raise TypeError("pass either a config object or keyword options, not both")
        super().__init__(config, render_mode="ansi")
        cfg = self.config
        self.instruction = _INSTRUCTION
        self.action_names = ACTIONS
        self.legend = {cfg.symbols[role]: meaning for role, meaning in _ROLE_MEANING.items()}
        self.max_actions_per_traj = cfg.max_actions_per_traj
        self._layout: _Layout | None = None
        self._target_set: frozenset[int] = frozenset()
        self._base: list[str] = []
        self._player = 0
        self._boxes: set[int] = set()
        self._num_steps = 0
        self._done = False
        self._plan: list[str] | None = None
        self._plan_key: tuple[int, frozenset[int]] | None = None

    # -- episode ------------------------------------------------------------------------------------------------

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode on a new room (or on ``options["room"]``: a room array or text in the env's symbols)."""
        seed_env(self, seed)  # gymnasium.Env.reset(seed=seed)'s generator, without its construction cost
        cfg = self.config
        room = (options or {}).get("room")
        if room is None:
            layout = _generate_layout(self.np_random, cfg.dim_room, cfg.num_boxes, cfg.search_depth,
                                      cfg.num_gen_steps, cfg.p_change_directions, cfg.max_generation_tries,
                                      cfg.reverse_search)
        else:
            layout = _Layout.from_array(parse_room(room, cfg.symbols) if isinstance(room, str) else room)
        self._layout = layout
        self._target_set = frozenset(layout.targets)
        wall, empty, target = cfg.symbols["wall"], cfg.symbols["empty"], cfg.symbols["target"]
        self._base = [target if i in self._target_set else (empty if f else wall) for i, f in enumerate(layout.free)]
        self._player = layout.player
        self._boxes = set(layout.boxes)
        self._num_steps = 0
        self._done = self._boxes_on_target() == len(self._boxes)
        self._plan, self._plan_key = None, None
        info = self._info(valid=True, effective=False)
        if cfg.compute_optimal_moves:
            plan = self._current_plan()
            info["optimal_moves"] = len(plan) if plan is not None else -1
        return self.render(), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply one action name (see the module docstring for the reward rules)."""
        if self._layout is None:
            raise RuntimeError("SokobanEnv.step() called before reset()")
        index = _ACTION_INDEX.get(action.strip().lower()) if isinstance(action, str) else None
        if index is None or self._done:
            return self.render(), 0.0, self._done, self._truncated(), self._info(valid=False, effective=False)
        key_before = self._key()
        on_before = self._boxes_on_target()
        moved = self._move(index)
        self._num_steps += 1
        on_after = self._boxes_on_target()
        reward = self.config.step_penalty
        if on_after > on_before:
            reward += BOX_ON_REWARD
        elif on_after < on_before:
            reward += BOX_OFF_PENALTY
        if on_after == len(self._boxes):
            reward += FINISH_REWARD
            self._done = True
        if self._plan is not None and self._plan_key == key_before and self._plan and self._plan[0] == ACTIONS[index]:
            self._plan, self._plan_key = self._plan[1:], self._key()
        return (self.render(), float(reward), self._done, self._truncated(),
                self._info(valid=True, effective=moved))

    def _move(self, index: int) -> bool:
        assert self._layout is not None
        dr, dc = _MOVES[index]
        d = dr * self._layout.cols + dc
        free = self._layout.free
        nxt = self._player + d
        if not free[nxt]:
            return False
        if nxt in self._boxes:
            beyond = nxt + d
            if not free[beyond] or beyond in self._boxes:
                return False
            self._boxes.remove(nxt)
            self._boxes.add(beyond)
        self._player = nxt
        return True

    # -- state --------------------------------------------------------------------------------------------------

    def _key(self) -> tuple[int, frozenset[int]]:
        return self._player, frozenset(self._boxes)

    def _boxes_on_target(self) -> int:
        return sum(1 for b in self._boxes if b in self._target_set)

    def _truncated(self) -> bool:
        return not self._done and self._num_steps >= self.config.max_steps

    def _info(self, *, valid: bool, effective: bool) -> dict[str, Any]:
        return {
            "success": bool(self._done),
            "action_is_valid": bool(valid),
            "action_is_effective": bool(effective),
            "boxes_on_target": self._boxes_on_target(),
            "box_target_distance": self._box_target_distance(),
        }

    def _box_target_distance(self) -> int:
        """Sum over boxes of the Manhattan distance to the nearest target."""
        assert self._layout is not None
        cols = self._layout.cols
        total = 0
        for b in self._boxes:
            br, bc = divmod(b, cols)
            total += min(abs(br - tr) + abs(bc - tc) for tr, tc in (divmod(t, cols) for t in self._layout.targets))
        return total

    def room(self) -> np.ndarray:
        """The current state as a room array of cell codes."""
        if self._layout is None:
            raise RuntimeError("SokobanEnv has no room before reset()")
        return self._layout.to_array(self._player, tuple(self._boxes))

    # -- rendering ----------------------------------------------------------------------------------------------

    def render(self) -> str:
        """The state as text, in the configured ``render_mode`` (grid, coordinates, or both)."""
        if self._layout is None:
            raise RuntimeError("SokobanEnv.render() called before reset()")
        mode = self.config.render_mode
        if mode == "text":
            return self._render_grid()
        if mode == "coord":
            return self._render_coords()
        return f"Coordinates:\n{self._render_coords()}\nGrid:\n{self._render_grid()}"

    def _render_grid(self) -> str:
        assert self._layout is not None
        syms = self.config.symbols
        cells = list(self._base)
        for b in self._boxes:
            cells[b] = syms["box_on_target"] if b in self._target_set else syms["box"]
        cells[self._player] = syms["player_on_target"] if self._player in self._target_set else syms["player"]
        cols = self._layout.cols
        return "\n".join("".join(cells[r * cols:(r + 1) * cols]) for r in range(self._layout.rows))

    def _render_coords(self) -> str:
        layout = self._layout
        assert layout is not None
        rows, cols = layout.rows, layout.cols

        def fmt(cells: Any) -> str:
            items = [f"({r}, {c})" for r, c in sorted(divmod(i, cols) for i in cells)]
            return ", ".join(items) if items else "none"

        inner_walls = [i for i, f in enumerate(layout.free)
                       if not f and 0 < i // cols < rows - 1 and 0 < i % cols < cols - 1]
        pr, pc = divmod(self._player, cols)
        on_target = " (on a target)" if self._player in self._target_set else ""
        return "\n".join([
            f"Room: {rows} rows x {cols} columns, positions are (row, col) with (0, 0) at the top left; "
            f"every border cell is a wall.",
            f"Player at (row {pr}, col {pc}){on_target}.",
            f"Boxes: {fmt(self._boxes)}.",
            f"Targets: {fmt(layout.targets)}.",
            f"Boxes on targets: {fmt(b for b in self._boxes if b in self._target_set)}.",
            f"Walls inside the border: {fmt(inner_walls)}.",
        ])

    # -- oracle -------------------------------------------------------------------------------------------------

    def _current_plan(self) -> list[str] | None:
        key = self._key()
        if self._plan_key != key:
            assert self._layout is not None
            layout = attrs.evolve(self._layout, player=self._player, boxes=tuple(self._boxes))
            self._plan, self._plan_key = _solve_layout(layout, 2_000_000), key
        return self._plan

    def oracle_action(self) -> str | None:
        """The next move of an optimal solution from the current state (None when solved or unsolvable)."""
        if self._layout is None or self._done:
            return None
        plan = self._current_plan()
        return plan[0] if plan else None
