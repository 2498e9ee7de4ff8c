"""Sudoku on 4×4 or 9×9 grids with a verified unique solution (RAGEN's Sudoku, done better).

Generation (deterministic from the seed): a random complete grid (randomised backtracking), then cells are removed
in a random order, each removal kept only if :func:`count_solutions` still finds exactly one solution, until
``round(fraction × cells)`` cells are empty (easy 40%, medium 50%, hard 60%). If uniqueness stops the removal
earlier, the puzzle keeps the closest reachable count; ``info["removed_fraction"]`` reports the real fraction.
RAGEN claims unique solutions but never checks them; here every puzzle is checked.

Actions (1-based rows and columns, ASCII digits, case-insensitive, surrounding whitespace ignored); R = row,
C = column, N = number:

- ``place N at row R col C`` (also ``column``; verbs ``place/put/write/fill/enter/set`` or none; ``at/in/on/into``;
  an optional comma before ``col``)
- ``place N at (R, C)`` / ``N at R,C``
- ``R,C,N`` / ``(R, C, N)`` / ``[R, C, N]`` (commas, optional spaces)
- ``R C N`` (spaces)
- ``row R col C N`` / ``row R col C: N`` / ``row R, column C = N``
- ``rRcC N`` / ``rRcC=N`` / ``R1C2: 3``
- ``(R, C) = N`` / ``R,C: N``

Rewards: +1 (``correct_reward``) for a placement equal to the solution; +0.5 (``valid_reward``) for a rule-valid
placement (no conflict in its row, column or box) that differs from the solution; −0.1 (``invalid_reward``) for an
invalid action (unparsable, out of range, a given cell, an occupied cell, a conflict): the state is unchanged; the
placement that completes the grid earns its +1 plus the +10 ``solve_bonus`` and ends the episode with success.

Decisions:

- A rule-valid wrong placement **stays on the board** (as in RAGEN); it may make the puzzle unsolvable.
- With ``allow_overwrite=False`` (default, RAGEN-like) every filled cell is locked: placing into it is invalid.
  With ``allow_overwrite=True`` a non-given filled cell may be overwritten by a rule-valid different number; such an
  overwrite earns +1 when it turns a wrong cell correct, −1 when it turns a correct cell wrong and 0 otherwise
  (so no overwrite cycle gains reward).
- The env never truncates by itself: the trajectory's action limit ``max_actions_per_traj`` (``max_steps``, by
  default the number of cells to remove plus the grid size) is enforced by the rollout loop.
- A step after the grid is solved (or before any reset) is invalid, reward 0, ``terminated=True``.
- ``oracle_action`` proposes the solution's number for the first empty cell (row-major) where it is rule-valid,
  else any rule-valid placement (after wrong placements), else an overwrite back to the solution when allowed.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import attrs
import numpy as np

from ragen_core.env import TextEnv
from ragen_core.validators import integer, number, one_of

__all__ = [
    "DIFFICULTY_FRACTIONS",
    "SudokuConfig",
    "SudokuEnv",
    "SudokuPuzzle",
    "count_solutions",
    "generate_puzzle",
    "is_valid_solution",
    "parse_action",
]

#: fraction of the cells removed per difficulty (RAGEN's)
DIFFICULTY_FRACTIONS = {"easy": 0.4, "medium": 0.5, "hard": 0.6}

_MAX_ACTION_CHARS = 80


# --------------------------------------------------------------------------------------------- solver

def _box_side(size: int) -> int:
    side = math.isqrt(size)
    if side * side != size or side < 1:
        raise ValueError(f"the grid size must be a perfect square (4, 9, 16, ...), got {size}")
    return side


def _flatten(grid: Sequence[Sequence[int]] | Sequence[int]) -> tuple[list[int], int]:
    """A flat row-major copy of ``grid`` (2-D rows or flat) and its side length."""
    cells = ([list(row) for row in grid]  # type: ignore[arg-type]  # rows: checked by the isinstance
             if grid and isinstance(grid[0], (list, tuple)) else None)
    if cells is not None:
        size = len(cells)
        if any(len(row) != size for row in cells):
            raise ValueError("the grid must be square")
        flat = [int(v) for row in cells for v in row]
    else:
        flat = [int(v) for v in grid]  # type: ignore[arg-type]
        size = math.isqrt(len(flat))
        if size * size != len(flat):
            raise ValueError(f"a flat grid needs a square number of cells, got {len(flat)}")
    _box_side(size)
    if any(not 0 <= v <= size for v in flat):
        raise ValueError(f"cells must be 0 (empty) or 1..{size}")
    return flat, size


class _Board:
    """Bitmask bookkeeping of one grid for the backtracking search (bit ``v - 1`` = number ``v``)."""

    def __init__(self, flat: list[int], size: int) -> None:
        self.size = size
        self.side = _box_side(size)
        self.flat = flat
        self.full = (1 << size) - 1
        self.rows = [0] * size
        self.cols = [0] * size
        self.boxes = [0] * size
        self.box_of = [(i // size // self.side) * self.side + (i % size) // self.side for i in range(size * size)]
        self.consistent = True
        for i, v in enumerate(flat):
            if v:
                bit = 1 << (v - 1)
                r, c, b = i // size, i % size, self.box_of[i]
                if (self.rows[r] | self.cols[c] | self.boxes[b]) & bit:
                    self.consistent = False
                self.rows[r] |= bit
                self.cols[c] |= bit
                self.boxes[b] |= bit

    def set(self, i: int, v: int) -> None:
        bit = 1 << (v - 1)
        r, c, b = divmod(i, self.size) + (self.box_of[i],)
        self.rows[r] |= bit
        self.cols[c] |= bit
        self.boxes[b] |= bit
        self.flat[i] = v

    def clear(self, i: int, v: int) -> None:
        bit = ~(1 << (v - 1))
        r, c, b = divmod(i, self.size) + (self.box_of[i],)
        self.rows[r] &= bit
        self.cols[c] &= bit
        self.boxes[b] &= bit
        self.flat[i] = 0

    def candidates(self, i: int) -> int:
        r, c = divmod(i, self.size)
        return self.full & ~(self.rows[r] | self.cols[c] | self.boxes[self.box_of[i]])

    def search(self, limit: int, rng: np.random.Generator | None = None) -> int:
        """Count solutions up to ``limit`` (most-constrained cell first); the first one stays in ``flat``."""
        found = 0
        empties = [i for i, v in enumerate(self.flat) if v == 0]

        def recurse() -> bool:
            nonlocal found
            best, best_mask, best_count = -1, 0, self.size + 1
            for i in empties:
                if self.flat[i]:
                    continue
                mask = self.candidates(i)
                count = mask.bit_count()
                if count < best_count:
                    best, best_mask, best_count = i, mask, count
                    if count <= 1:
                        break
            if best < 0:
                found += 1
                return found >= limit
            if best_count == 0:
                return False
            values = [v + 1 for v in range(self.size) if best_mask >> v & 1]
            if rng is not None:
                values = [values[k] for k in rng.permutation(len(values))]
            for v in values:
                self.set(best, v)
                if recurse():
                    return True
                self.clear(best, v)
            return False

        if self.consistent:
            recurse()
        return found


def count_solutions(grid: Sequence[Sequence[int]] | Sequence[int], limit: int = 2) -> int:
    """Number of solutions of ``grid`` (rows of ints, 0 = empty; or a flat row-major list), counted up to ``limit``.

    A bitmask backtracking search that always branches on the cell with the fewest candidates. A grid whose givens
    already conflict has 0 solutions.

    :raises ValueError: the grid is not square with a perfect-square side, or holds a number outside 0..size.
    """
    flat, size = _flatten(grid)
    return _Board(flat, size).search(max(1, limit))


def is_valid_solution(grid: Sequence[Sequence[int]] | Sequence[int]) -> bool:
    """True when ``grid`` is complete and every row, column and box holds each number exactly once."""
    try:
        flat, size = _flatten(grid)
    except ValueError:
        return False
    board = _Board(flat, size)
    return board.consistent and all(flat)


def _random_full_grid(size: int, rng: np.random.Generator) -> list[int]:
    board = _Board([0] * (size * size), size)
    board.search(1, rng)
    return board.flat


@dataclass(frozen=True)
class SudokuPuzzle:
    """A generated puzzle: ``puzzle`` (flat, 0 = empty) with the unique ``solution``."""

    size: int
    puzzle: tuple[int, ...]
    solution: tuple[int, ...]

    @property
    def removed_fraction(self) -> float:
        """Fraction of the cells that are empty."""
        return self.puzzle.count(0) / len(self.puzzle)


def generate_puzzle(size: int, removal_fraction: float, rng: np.random.Generator) -> SudokuPuzzle:
    """A random puzzle with a unique solution and (up to uniqueness) ``round(removal_fraction × cells)`` blanks."""
    _box_side(size)
    if not 0.0 <= removal_fraction <= 1.0:
        raise ValueError(f"removal_fraction must be in [0, 1], got {removal_fraction}")
    solution = _random_full_grid(size, rng)
    puzzle = list(solution)
    target = math.floor(removal_fraction * size * size + 0.5)
    removed = 0
    for i in rng.permutation(size * size):
        if removed >= target:
            break
        value, puzzle[int(i)] = puzzle[int(i)], 0
        if removed and _Board(list(puzzle), size).search(2) != 1:
            puzzle[int(i)] = value
        else:
            removed += 1
    return SudokuPuzzle(size=size, puzzle=tuple(puzzle), solution=tuple(solution))


@functools.lru_cache(maxsize=256)
def _cached_puzzle(size: int, difficulty: str, seed: int) -> SudokuPuzzle:
    return generate_puzzle(size, DIFFICULTY_FRACTIONS[difficulty], np.random.Generator(np.random.PCG64(seed)))


# --------------------------------------------------------------------------------------------- actions

_N = r"([0-9]{1,3})"
_VERB = r"(?:(?:place|put|write|fill|enter|set)\s*)?(?:(?:number|digit|value)\s*)?"
_AT = r"\s*(?:at|in|into|on)\s*(?:cell\s*)?"
_COL = r"(?:col|column)"
_PATTERNS: tuple[tuple[re.Pattern[str], tuple[int, int, int]], ...] = tuple(
    (re.compile(pattern), order) for pattern, order in (
        # place N at row R col C
        (rf"{_VERB}{_N}{_AT}row\s*{_N}\s*,?\s*(?:and\s*)?{_COL}\s*{_N}", (2, 3, 1)),
        # place N at (R, C)
        (rf"{_VERB}{_N}{_AT}\(\s*{_N}\s*,\s*{_N}\s*\)", (2, 3, 1)),
        (rf"{_VERB}{_N}{_AT}{_N}\s*,\s*{_N}", (2, 3, 1)),
        # R,C,N  (R, C, N)  [R, C, N]
        (rf"{_N}\s*,\s*{_N}\s*,\s*{_N}", (1, 2, 3)),
        (rf"\(\s*{_N}\s*,\s*{_N}\s*,\s*{_N}\s*\)", (1, 2, 3)),
        (rf"\[\s*{_N}\s*,\s*{_N}\s*,\s*{_N}\s*\]", (1, 2, 3)),
        # R C N
        (rf"{_N}\s+{_N}\s+{_N}", (1, 2, 3)),
        # row R col C N  /  row R col C: N  /  row R, column C = N
        (rf"row\s*{_N}\s*,?\s*{_COL}\s*{_N}\s*(?:[:=,]|is|->)?\s*{_N}", (1, 2, 3)),
        # rRcC N  /  rRcC=N
        (rf"r\s*{_N}\s*c\s*{_N}\s*(?:[:=,]|->)?\s*{_N}", (1, 2, 3)),
        # (R, C) = N   R,C: N
        (rf"\(\s*{_N}\s*,\s*{_N}\s*\)\s*(?:[:=]|->)\s*{_N}", (1, 2, 3)),
        (rf"{_N}\s*,\s*{_N}\s*(?:[:=]|->)\s*{_N}", (1, 2, 3)),
    )
)


def parse_action(text: str) -> tuple[int, int, int] | None:
    """``(row, col, number)`` (1-based, not range-checked) from any accepted spelling, or None."""
    if not isinstance(text, str) or len(text) > _MAX_ACTION_CHARS:
        return None
    s = " ".join(text.strip().lower().split())
    for pattern, (ri, ci, ni) in _PATTERNS:
        match = pattern.fullmatch(s)
        if match:
            return int(match.group(ri)), int(match.group(ci)), int(match.group(ni))
    return None


# --------------------------------------------------------------------------------------------- config and env

@attrs.define
class SudokuConfig:
    """Options of :class:`SudokuEnv`.

    :ivar size: 4 (2×2 boxes) or 9 (3×3 boxes).
    :ivar difficulty: ``easy``/``medium``/``hard``: remove 40%/50%/60% of the cells (as uniqueness allows).
    :ivar max_steps: actions per trajectory; None: cells to remove + size.
    :ivar allow_overwrite: whether non-given filled cells may be overwritten (see the module docstring).
    :ivar correct_reward: reward of a placement equal to the solution.
    :ivar valid_reward: reward of a rule-valid placement that differs from the solution.
    :ivar invalid_reward: reward of an invalid action.
    :ivar solve_bonus: added when the grid is solved.
    """

    size: int = attrs.field(default=4, validator=one_of(4, 9))
    difficulty: str = attrs.field(default="easy", validator=one_of(*DIFFICULTY_FRACTIONS))
    max_steps: int | None = attrs.field(default=None, validator=attrs.validators.optional(integer(1)))
    allow_overwrite: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    correct_reward: float = attrs.field(default=1.0, validator=number())
    valid_reward: float = attrs.field(default=0.5, validator=number())
    invalid_reward: float = attrs.field(default=-0.1, validator=number())
    solve_bonus: float = attrs.field(default=10.0, validator=number())


class SudokuEnv(TextEnv):
    """RAGEN's Sudoku with unique, verified solutions. See the module docstring for actions and rewards."""

    config_cls: ClassVar[type] = SudokuConfig
    config: SudokuConfig

    def __init__(self, config: SudokuConfig | None = None, render_mode: str | None = "ansi", **options: Any) -> None:
        super().__init__(config, render_mode, **options)
        cfg = self.config
        self.size = cfg.size
        self.side = _box_side(cfg.size)
        target = math.floor(DIFFICULTY_FRACTIONS[cfg.difficulty] * cfg.size * cfg.size + 0.5)
        self.instruction = (
            f"You are solving a {cfg.size}x{cfg.size} Sudoku. Fill the empty cells (_) so that every row, every "
            f"column and every {self.side}x{self.side} box contains each number from 1 to {cfg.size} exactly once. "
            "Rows and columns are numbered from 1 (top, left). Place one number per action, written as "
            "'place N at row R col C' (or 'R,C,N'), e.g. <answer>place 3 at row 1 col 2</answer>. "
            "A correct number earns 1, a number that breaks no rule but is not the solution 0.5, an invalid move -0.1 "
            "(nothing changes), and solving the puzzle 10 more. Filled cells "
            + ("you placed may be overwritten." if cfg.allow_overwrite else "cannot be changed.")
        )
        self.action_names = None
        self.legend = {"_": "empty cell", "|": "vertical box boundary", "-": "horizontal box boundary"}
        self.max_actions_per_traj = cfg.max_steps if cfg.max_steps is not None else target + cfg.size
        self.puzzle: SudokuPuzzle | None = None
        self.grid: list[int] = []
        self._board: _Board | None = None
        self._done = True

    # ------------------------------------------------------------------------------------------ gymnasium API

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Generate the puzzle from the seed (a puzzle seed drawn from ``np_random``; puzzles are cached by it)."""
        super().reset(seed=seed)
        puzzle_seed = int(self.np_random.integers(0, 2**63 - 1))
        self.puzzle = _cached_puzzle(self.size, self.config.difficulty, puzzle_seed)
        self.grid = list(self.puzzle.puzzle)
        self._board = _Board(self.grid, self.size)
        self._done = False
        return self.render(), self._metrics()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply one placement; anything invalid costs ``invalid_reward`` and changes nothing."""
        if self._done or self.puzzle is None or self._board is None:
            return self.render(), 0.0, True, False, self._info(valid=False)
        cfg = self.config
        invalid = (self.render(), float(cfg.invalid_reward), False, False, self._info(valid=False))
        parsed = parse_action(action)
        if parsed is None:
            return invalid
        row, col, value = parsed
        n = self.size
        if not (1 <= row <= n and 1 <= col <= n and 1 <= value <= n):
            return invalid
        i = (row - 1) * n + (col - 1)
        current = self.grid[i]
        if self.puzzle.puzzle[i] or current == value or (current and not cfg.allow_overwrite):
            return invalid
        if current:
            self._board.clear(i, current)
        if not self._board.candidates(i) >> (value - 1) & 1:
            if current:
                self._board.set(i, current)
            return invalid
        self._board.set(i, value)
        target = self.puzzle.solution[i]
        if current:
            reward = cfg.correct_reward * (int(value == target) - int(current == target))
        else:
            reward = cfg.correct_reward if value == target else cfg.valid_reward
        solved = tuple(self.grid) == self.puzzle.solution
        if solved:
            reward += cfg.solve_bonus
            self._done = True
        return self.render(), float(reward), solved, False, self._info(valid=True, success=solved)

    def render(self) -> str:
        """The grid with row and column numbers; ``_`` marks empty cells, ``|`` and ``-`` box boundaries."""
        if self.puzzle is None:
            return "No episode yet: call reset()."
        n, side = self.size, self.side
        width = len(str(n))

        def cell(v: int) -> str:
            return (str(v) if v else "_").rjust(width)

        def join(values: Sequence[str]) -> str:
            chunks = [" ".join(values[k:k + side]) for k in range(0, n, side)]
            return " | ".join(chunks)

        label = len(str(n))
        header = " " * (label + 2) + join([str(c).rjust(width) for c in range(1, n + 1)])
        rule_chunks = ["-" * (side * (width + 1) - 1)] * side
        rule = " " * (label + 2) + "-+-".join(rule_chunks)
        lines = [header]
        for r in range(n):
            if r and r % side == 0:
                lines.append(rule)
            lines.append(f"{str(r + 1).rjust(label)}  " + join([cell(v) for v in self.grid[r * n:(r + 1) * n]]))
        return "\n".join(lines)

    def oracle_action(self) -> str | None:
        """A rule-valid placement, preferring the solution's number (see the module docstring), or None."""
        if self._done or self.puzzle is None or self._board is None:
            return None
        n = self.size
        empties = [i for i, v in enumerate(self.grid) if v == 0]
        for i in empties:
            if self._board.candidates(i) >> (self.puzzle.solution[i] - 1) & 1:
                return self._spell(i, self.puzzle.solution[i])
        for i in empties:
            mask = self._board.candidates(i)
            for v in range(1, n + 1):
                if mask >> (v - 1) & 1:
                    return self._spell(i, v)
        if self.config.allow_overwrite:
            for i, v in enumerate(self.grid):
                target = self.puzzle.solution[i]
                if v and v != target and not self.puzzle.puzzle[i]:
                    self._board.clear(i, v)
                    ok = self._board.candidates(i) >> (target - 1) & 1
                    self._board.set(i, v)
                    if ok:
                        return self._spell(i, target)
        return None

    def state_key(self) -> str:
        """The grid contents (row-major digits, ``0`` for empty)."""
        return "".join(map(str, self.grid)) if self.puzzle is not None else ""

    # ------------------------------------------------------------------------------------------ helpers

    def _spell(self, i: int, value: int) -> str:
        row, col = divmod(i, self.size)
        return f"place {value} at row {row + 1} col {col + 1}"

    def _metrics(self) -> dict[str, Any]:
        if self.puzzle is None:
            return {"removed_fraction": 0.0, "empty_cells": 0, "correct_cells": 0}
        return {
            "removed_fraction": float(self.puzzle.removed_fraction),
            "empty_cells": self.grid.count(0),
            "correct_cells": sum(1 for v, s in zip(self.grid, self.puzzle.solution) if v == s),
        }

    def _info(self, *, valid: bool, success: bool = False) -> dict[str, Any]:
        return {"success": bool(success), "action_is_valid": bool(valid), "action_is_effective": bool(valid),
                **self._metrics()}
