"""Countdown: combine the given numbers with + - * / into an expression equal to the target (RAGEN's Countdown).

The state is ``Target: 24, nums: [3, 4, 5, 6]``. The agent answers with one arithmetic expression that uses every
given number exactly once. RAGEN scores the answer with Python's evaluator; this module uses its own parser instead
(:func:`parse_expression`, a shunting-yard parser with exact :class:`fractions.Fraction` arithmetic), so no model
text is ever executed.

Expression grammar (anything else is malformed)::

    expr   := term (("+" | "-") term)*
    term   := factor (("*" | "/") factor)*
    factor := NUMBER | "(" expr ")"
    NUMBER := [0-9]+ ("." [0-9]+)?          (ASCII digits; a decimal point needs digits on both sides)

- Multiplication may be written ``*``, ``×``, ``x`` or ``X``; division ``/`` or ``÷``; subtraction ``-`` or ``−``.
- There is **no unary minus or plus** (``-3``, ``+3``, ``-(1+2)`` are malformed): the numbers are used as given.
- No implicit multiplication (``2(3+4)``), no exponent, no ``=`` part (``3*8=24`` is malformed), no other
  characters (tags, letters, commas). Whitespace is free. At most ``max_expression_length`` (200, at most 1,000)
  characters and number literals of at most 100 characters, which bound every intermediate value; the parser is
  iterative, so nesting depth cannot exhaust the stack.
- Literals are compared with the given numbers by value (``3.0`` counts as ``3``) as a multiset.
- Division by zero makes the value undefined: such an answer is well-formed but wrong.

Rewards (RAGEN's): ``correct_reward`` (1.0) when the expression uses exactly the given numbers and equals the target
exactly; ``format_reward`` (0.1) when it uses exactly the given numbers but the value differs (or is undefined);
0 when the numbers differ. These three outcomes are valid actions and end the (single-turn) episode. A malformed
expression (or any non-expression text) is an invalid action: reward 0, the state is unchanged and the episode does
not end (the trajectory's action limit, 1, ends it). A step after the answer (or before any reset) is invalid,
reward 0, ``terminated=True``.

Problems come from a generator (``data_path=None``): ``num_count`` numbers drawn uniformly from ``number_range``,
then a target drawn uniformly among the integers in ``target_range`` that some expression over all the numbers
reaches (found by exhaustive search, so every generated problem is solvable); numbers are redrawn when no target
is reachable. With ``data_path`` set, problems are rows ``{"target": int, "nums": [int, ...]}`` of the public
dataset (e.g. ``Jiayi-Pan/Countdown-Tasks-3to4``) read from JSONL (no dependency), or parquet / a hub id through
``datasets`` (see :func:`ragen_plugins_envs.metamath.load_records`); a row is picked by the seed.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np

from ragen_core.env import TextEnv
from ragen_core.validators import Constraint, constraint, integer, number, one_of

__all__ = [
    "MAX_EXPRESSION_LENGTH",
    "MAX_EXPRESSION_LENGTH_LIMIT",
    "MAX_LITERAL_CHARS",
    "MAX_SOLVER_NUMBERS",
    "CountdownConfig",
    "CountdownEnv",
    "CountdownProblem",
    "ExpressionError",
    "ParsedExpression",
    "generate_problem",
    "load_problems",
    "parse_expression",
    "reachable_values",
    "solve",
]

#: default cap on the length of an answer expression
MAX_EXPRESSION_LENGTH = 200
#: the hard cap on ``max_expression_length`` (keeps every exact value far below Python's int-to-text digit limit)
MAX_EXPRESSION_LENGTH_LIMIT = 1000
#: the longest number literal accepted
MAX_LITERAL_CHARS = 100
#: the exhaustive solver refuses more numbers than this (the search grows super-exponentially)
MAX_SOLVER_NUMBERS = 6

_OPERATORS = {"+": "+", "-": "-", "\u2212": "-", "*": "*", "\u00d7": "*", "x": "*", "X": "*", "/": "/", "\u00f7": "/"}
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}
_NUMBER_RE = re.compile(r"[0-9]+(?:\.[0-9]+)?")


class ExpressionError(ValueError):
    """The text is not a well-formed expression of the Countdown grammar (see the module docstring)."""


@dataclass(frozen=True)
class ParsedExpression:
    """A parsed answer.

    :ivar numbers: the number literals in reading order, as exact fractions.
    :ivar value: the exact value, or None when the expression divides by zero.
    :ivar rpn: the expression in reverse Polish notation (numbers and ``+ - * /``).
    """

    numbers: tuple[Fraction, ...]
    value: Fraction | None
    rpn: tuple[Fraction | str, ...]


def _tokens(text: str) -> list[Fraction | str]:
    out: list[Fraction | str] = []
    pos, end = 0, len(text)
    while pos < end:
        ch = text[pos]
        if ch.isspace():
            pos += 1
            continue
        match = _NUMBER_RE.match(text, pos)
        if match:
            if match.end() - pos > MAX_LITERAL_CHARS:
                raise ExpressionError(f"number literal longer than {MAX_LITERAL_CHARS} characters at position {pos}")
            out.append(Fraction(match.group()))
            pos = match.end()
            continue
        if ch in _OPERATORS:
            out.append(_OPERATORS[ch])
        elif ch in "()":
            out.append(ch)
        else:
            raise ExpressionError(f"unexpected character {ch!r} at position {pos}")
        pos += 1
    return out


def parse_expression(text: str, *, max_length: int = MAX_EXPRESSION_LENGTH) -> ParsedExpression:
    """Parse and evaluate a Countdown answer exactly.

    :param text: the expression (surrounding whitespace ignored).
    :param max_length: the longest accepted expression, after stripping.
    :raises ExpressionError: the text is not a well-formed expression (message says why).
    """
    if not isinstance(text, str):
        raise ExpressionError(f"expected a string, got {type(text).__name__}")
    text = text.strip()
    if not text:
        raise ExpressionError("empty expression")
    if len(text) > max_length:
        raise ExpressionError(f"expression longer than {max_length} characters")
    output: list[Fraction | str] = []
    stack: list[str] = []
    expect_operand = True
    for token in _tokens(text):
        if expect_operand:
            if isinstance(token, Fraction):
                output.append(token)
                expect_operand = False
            elif token == "(":
                stack.append(token)
            else:
                raise ExpressionError(f"expected a number or '(' but found {token!r} (no unary operators)")
        elif isinstance(token, Fraction) or token == "(":
            raise ExpressionError("expected an operator or ')' (no implicit multiplication)")
        elif token == ")":
            while stack and stack[-1] != "(":
                output.append(stack.pop())
            if not stack:
                raise ExpressionError("unbalanced ')'")
            stack.pop()
        else:
            while stack and stack[-1] != "(" and _PRECEDENCE[stack[-1]] >= _PRECEDENCE[token]:
                output.append(stack.pop())
            stack.append(token)
            expect_operand = True
    if expect_operand:
        raise ExpressionError("incomplete expression")
    while stack:
        op = stack.pop()
        if op == "(":
            raise ExpressionError("unbalanced '('")
        output.append(op)
    numbers = tuple(t for t in output if isinstance(t, Fraction))
    return ParsedExpression(numbers=numbers, value=_evaluate_rpn(output), rpn=tuple(output))


def _apply(op: str, a: Fraction | None, b: Fraction | None) -> Fraction | None:
    if a is None or b is None:
        return None
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    return None if b == 0 else a / b


def _evaluate_rpn(rpn: Sequence[Fraction | str]) -> Fraction | None:
    values: list[Fraction | None] = []
    for token in rpn:
        if isinstance(token, Fraction):
            values.append(token)
        else:
            b = values.pop()
            a = values.pop()
            values.append(_apply(token, a, b))
    return values[0]


# --------------------------------------------------------------------------------------------- exhaustive search
#
# The search holds exact rationals as plain ints, or, when not whole, as a reduced pair ``(numerator, denominator)``
# with ``denominator >= 2``: one spelling per value, so equal values are equal dict/set keys, as with
# :class:`fractions.Fraction`, without the cost of a Fraction object per operation (its hashing and normalising
# dominated the generator). The problem generator only needs the whole targets, so it keeps unordered value sets and
# prunes the last combination to whole results; :func:`solve` keeps the ordered tables with origins, so it finds
# exactly the expression the Fraction tables did.

#: an exact value of the search: an int, or a reduced non-whole fraction ``(numerator, denominator >= 2)``
_Value = int | tuple[int, int]
#: how one value of a subset was made: (left subset mask, left value, operator, right subset mask, right value)
_Origin = tuple[int, _Value, str, int, _Value]
#: the values of one subset, split into the whole ones and the others
_Split = tuple[list[int], list[tuple[int, int]]]


def _ratio(n: int, d: int) -> _Value:
    """``n / d`` (``d != 0``) as a search value."""
    if n % d == 0:
        return n // d
    g = math.gcd(n, d)
    if d < 0:
        g = -g
    return (n // g, d // g)


def _to_value(number: int | Fraction) -> _Value:
    exact = Fraction(number)
    return exact.numerator if exact.denominator == 1 else (exact.numerator, exact.denominator)


def _results(a: _Value, b: _Value) -> list[tuple[_Value, bool, str]]:
    """``a + b, a * b, a - b, b - a, a / b, b / a`` (divisions only by non-zero values), in this order, each with
    whether its operands are swapped (``b`` first) and its operator."""
    if isinstance(a, int) and isinstance(b, int):
        out: list[tuple[_Value, bool, str]] = [(a + b, False, "+"), (a * b, False, "*"), (a - b, False, "-"),
                                               (b - a, True, "-")]
        if b:
            out.append((_ratio(a, b), False, "/"))
        if a:
            out.append((_ratio(b, a), True, "/"))
        return out
    p, q = (a, 1) if isinstance(a, int) else a
    r, s = (b, 1) if isinstance(b, int) else b
    out = [(_ratio(p * s + r * q, q * s), False, "+"), (_ratio(p * r, q * s), False, "*"),
           (_ratio(p * s - r * q, q * s), False, "-"), (_ratio(r * q - p * s, q * s), True, "-")]
    if r:
        out.append((_ratio(p * s, q * r), False, "/"))
    if p:
        out.append((_ratio(r * q, s * p), True, "/"))
    return out


def _check_count(count: int) -> None:
    if count > MAX_SOLVER_NUMBERS:
        raise ValueError(f"the exhaustive search handles at most {MAX_SOLVER_NUMBERS} numbers, got {count}")


def _checked(nums: Sequence[int | Fraction]) -> tuple[_Value, ...]:
    _check_count(len(nums))
    return tuple(_to_value(n) for n in nums)


def _splits(mask: int) -> Iterator[tuple[int, int]]:
    """Each unordered split of ``mask`` into two non-empty subsets, once: ``(sub, other)`` with ``sub < other``, in
    descending order of ``sub``."""
    sub = (mask - 1) & mask
    while sub:
        other = mask ^ sub
        if sub < other:
            yield sub, other
        sub = (sub - 1) & mask


def _combine_into(out: set[_Value], left: _Split, right: _Split) -> None:
    """Add every value of ``a op b`` (``a`` from ``left``, ``b`` from ``right``, both orders) to ``out``."""
    add, update = out.add, out.update
    for a in left[0]:
        for b in right[0]:
            update((a + b, a * b, a - b, b - a))
            if b:
                add(a // b if a % b == 0 else _ratio(a, b))
            if a:
                add(b // a if b % a == 0 else _ratio(b, a))
    for frac in left[1]:
        for b in right[0]:
            update(value for value, _swapped, _op in _results(frac, b))
        for other in right[1]:
            update(value for value, _swapped, _op in _results(frac, other))
    for whole in left[0]:
        for other in right[1]:
            update(value for value, _swapped, _op in _results(whole, other))


def _split(values: set[_Value]) -> _Split:
    return [v for v in values if isinstance(v, int)], [v for v in values if not isinstance(v, int)]


def _value_sets(nums: tuple[_Value, ...], *, full: bool) -> list[_Split]:
    """The values an expression over exactly each subset (bit mask) of ``nums`` reaches; the full set's left empty
    unless ``full``."""
    n = len(nums)
    tables: list[_Split] = [([], []) for _ in range(1 << n)]
    for i, value in enumerate(nums):
        tables[1 << i] = _split({value})
    for mask in range(1, (1 << n) if full else (1 << n) - 1):
        if mask & (mask - 1):
            out: set[_Value] = set()
            for sub, other in _splits(mask):
                _combine_into(out, tables[sub], tables[other])
            tables[mask] = _split(out)
    return tables


def _whole_into(out: set[int], left: _Split, right: _Split) -> None:
    """Add to ``out`` every whole value of ``a op b`` (``a`` from ``left``, ``b`` from ``right``, both orders); a
    fraction ``p/q`` is reduced and ``q >= 2``, which rules out most combinations with one."""
    add, update = out.add, out.update
    for a in left[0]:
        for b in right[0]:
            update((a + b, a * b, a - b, b - a))
            if b and a % b == 0:
                add(a // b)
            if a and b % a == 0:
                add(b // a)
        for r, s in right[1]:  # a * r/s and a / (r/s) = a*s/r
            if a % s == 0:
                add(r * (a // s))
            if a % r == 0:
                add((a // r) * s)
    for p, q in left[1]:
        for b in right[0]:  # p/q * b and b / (p/q) = b*q/p
            if b % q == 0:
                add(p * (b // q))
            if b % p == 0:
                add((b // p) * q)
        for r, s in right[1]:
            if q == s:  # p/q + r/q and p/q - r/q (both orders)
                if (p + r) % q == 0:
                    add((p + r) // q)
                if (p - r) % q == 0:
                    update(((p - r) // q, (r - p) // q))
            if r % q == 0 and p % s == 0:
                add((p // s) * (r // q))
            if p % r == 0 and s % q == 0:
                add((p // r) * (s // q))
            if r % p == 0 and q % s == 0:
                add((r // p) * (q // s))


@functools.lru_cache(maxsize=256)
def _whole_targets(nums: tuple[_Value, ...], low: int, high: int) -> tuple[int, ...]:
    """The whole values in ``[low, high]`` an expression over all of ``nums`` reaches, ascending. The value set
    does not depend on the order of ``nums``; the generator passes them sorted, so a group of trajectories (one
    problem) and a repeated multiset share one entry."""
    n = len(nums)
    if n <= 1:
        found = {v for v in nums if isinstance(v, int)}
    else:
        tables, found = _value_sets(nums, full=False), set()
        for sub, other in _splits((1 << n) - 1):
            _whole_into(found, tables[sub], tables[other])
    return tuple(sorted(v for v in found if low <= v <= high))


def reachable_values(nums: Sequence[int | Fraction]) -> frozenset[Fraction]:
    """Every exact value of an expression using each of ``nums`` exactly once with + - * / and parentheses.

    :raises ValueError: more than :data:`MAX_SOLVER_NUMBERS` numbers.
    """
    values = _checked(nums)
    if not values:
        return frozenset()
    whole, other = _value_sets(values, full=True)[-1]
    return frozenset([*map(Fraction, whole), *(Fraction(p, q) for p, q in other)])


def _made(tables: Sequence[dict[_Value, _Origin | None]], mask: int) -> Iterator[tuple[_Value, _Origin]]:
    """Every value an expression over exactly ``mask`` makes from the tables of its subsets, with how, in the order
    of the search (repeats included): each unordered split once, the left subset's values in the outer loop."""
    for sub, other in _splits(mask):
        for a in tables[sub]:
            for b in tables[other]:
                for value, swapped, op in _results(a, b):
                    yield value, ((other, b, op, sub, a) if swapped else (sub, a, op, other, b))


@functools.lru_cache(maxsize=32)
def _origin_tables(nums: tuple[_Value, ...]) -> tuple[dict[_Value, _Origin | None], ...]:
    """For every proper subset of ``nums`` (a bit mask), each exact value an expression over exactly that subset
    reaches, with how it was first made (dynamic programming over subsets, every intermediate set deduplicated); the
    full set's entry is left empty (:func:`solve` searches it for its target only). Cached per problem."""
    n = len(nums)
    tables: list[dict[_Value, _Origin | None]] = [{} for _ in range(1 << n)]
    for i, value in enumerate(nums):
        tables[1 << i] = {value: None}
    for mask in range(1, (1 << n) - 1):
        if mask & (mask - 1):
            out = tables[mask]
            for value, origin in _made(tables, mask):
                if value not in out:
                    out[value] = origin
    return tuple(tables)


def _literal(value: _Value) -> str:
    return str(value) if isinstance(value, int) else f"({value[0]} / {value[1]})"


def _rebuild(tables: Sequence[dict[_Value, _Origin | None]], mask: int, value: _Value) -> str:
    origin = tables[mask][value]
    if origin is None:
        return _literal(value)
    left_mask, left, op, right_mask, right = origin
    return f"({_rebuild(tables, left_mask, left)} {op} {_rebuild(tables, right_mask, right)})"


def solve(nums: Sequence[int | Fraction], target: int | Fraction) -> str | None:
    """An expression over ``nums`` (each exactly once) equal to ``target``, or None when there is none.

    Exhaustive search with exact rational arithmetic (division only by non-zero values); the result parses with
    :func:`parse_expression` to exactly ``target`` (for non-negative integer numbers). The expression is the first
    one the search makes for the target.

    :raises ValueError: more than :data:`MAX_SOLVER_NUMBERS` numbers.
    """
    values = _checked(nums)
    if not values:
        return None
    goal = _to_value(target)
    if len(values) == 1:
        return _literal(goal) if values[0] == goal else None
    tables = _origin_tables(values)
    origin = next((how for value, how in _made(tables, len(tables) - 1) if value == goal), None)
    if origin is None:
        return None
    left_mask, left, op, right_mask, right = origin
    return f"{_rebuild(tables, left_mask, left)} {op} {_rebuild(tables, right_mask, right)}"


# --------------------------------------------------------------------------------------------- problems

@dataclass(frozen=True)
class CountdownProblem:
    """One Countdown problem: reach ``target`` using each of ``nums`` exactly once."""

    target: int
    nums: tuple[int, ...]


def generate_problem(rng: np.random.Generator, *, num_count: tuple[int, int], number_range: tuple[int, int],
                     target_range: tuple[int, int], max_tries: int = 1000) -> CountdownProblem:
    """Draw a solvable problem from ``rng`` (see the module docstring).

    :raises ValueError: no solvable problem was found in ``max_tries`` draws (the ranges do not fit together).
    """
    lo_t, hi_t = target_range
    for _ in range(max_tries):
        count = int(rng.integers(num_count[0], num_count[1] + 1))
        nums = tuple(int(v) for v in rng.integers(number_range[0], number_range[1] + 1, size=count))
        _check_count(len(nums))
        targets = _whole_targets(tuple(sorted(nums)), lo_t, hi_t)
        if targets:
            return CountdownProblem(target=targets[int(rng.integers(len(targets)))], nums=nums)
    raise ValueError(
        f"no solvable problem with num_count={num_count}, number_range={number_range}, target_range={target_range} "
        f"in {max_tries} draws")


def _as_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{what} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ValueError(f"{what} must be an integer, got {value!r}")


def load_problems(path: str, *, split: str = "train", loader: str = "auto") -> tuple[CountdownProblem, ...]:
    """Read Countdown rows (``target`` and ``nums``) from a JSONL/parquet file, directory or hub id.

    :raises ValueError: unreadable source, or a row without an integer ``target`` and non-negative integer ``nums``.
    """
    from ragen_plugins_envs.metamath import load_records

    problems = []
    for i, row in enumerate(load_records(path, split=split, loader=loader)):
        where = f"{path}: row {i}"
        if "target" not in row or "nums" not in row:
            raise ValueError(f"{where} needs 'target' and 'nums' (has {sorted(row)})")
        nums_raw = row["nums"]
        if not isinstance(nums_raw, (list, tuple)) or not 1 <= len(nums_raw) <= MAX_SOLVER_NUMBERS:
            raise ValueError(f"{where}: 'nums' must be a list of 1 to {MAX_SOLVER_NUMBERS} integers, got {nums_raw!r}")
        nums = tuple(_as_int(v, f"{where}: nums item") for v in nums_raw)
        if any(v < 0 for v in nums):
            raise ValueError(f"{where}: 'nums' must be non-negative, got {list(nums)}")
        problems.append(CountdownProblem(target=_as_int(row["target"], f"{where}: target"), nums=nums))
    if not problems:
        raise ValueError(f"{path}: no Countdown rows")
    return tuple(problems)


# --------------------------------------------------------------------------------------------- config and env

def _int_range(lowest: int, highest: int | None = None, *, allow_int: bool = False) -> Constraint:
    """An inclusive ``[low, high]`` pair of integers within ``[lowest, highest]`` (or one such int when
    ``allow_int``)."""
    top = f" <= {highest}" if highest is not None else ""
    pair = f"[low, high] with {lowest} <= low <= high{top}"
    single = f"an integer in [{lowest}, {highest}]" if highest is not None else f"an integer >= {lowest}"

    def test(value: Any) -> bool:
        if allow_int and isinstance(value, int) and not isinstance(value, bool):
            value = (value, value)
        if not (isinstance(value, (list, tuple)) and len(value) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
            return False
        lo, hi = value
        return bool(lowest <= lo <= hi and (highest is None or hi <= highest))

    return constraint(f"{single} or {pair}" if allow_int else pair, test)


def _as_pair(value: Any) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


@attrs.define
class CountdownConfig:
    """Options of :class:`CountdownEnv`.

    :ivar num_count: how many numbers (an int, or ``[low, high]`` drawn uniformly per problem), 2 to 6.
    :ivar number_range: ``[low, high]`` of the numbers (inclusive, low >= 1).
    :ivar target_range: ``[low, high]`` of the target (inclusive).
    :ivar data_path: JSONL/parquet file, dataset directory or hub id of rows ``{target, nums}``; None: generate.
    :ivar data_split: the split read through ``datasets`` (directories and hub ids).
    :ivar loader: ``auto`` (JSONL read directly, the rest through ``datasets``), ``jsonl`` or ``datasets``.
    :ivar max_expression_length: longest accepted answer, in characters.
    :ivar correct_reward: reward of a correct expression.
    :ivar format_reward: reward of an expression using exactly the numbers but with the wrong value.
    """

    num_count: int | tuple[int, int] = attrs.field(default=(3, 4),
                                                   validator=_int_range(2, MAX_SOLVER_NUMBERS, allow_int=True))
    number_range: tuple[int, int] = attrs.field(default=(1, 99), validator=_int_range(1))
    target_range: tuple[int, int] = attrs.field(default=(1, 99), validator=_int_range(-(10**12), 10**12))
    data_path: str | None = None
    data_split: str = "train"
    loader: str = attrs.field(default="auto", validator=one_of("auto", "jsonl", "datasets"))
    max_expression_length: int = attrs.field(default=MAX_EXPRESSION_LENGTH,
                                              validator=integer(1, MAX_EXPRESSION_LENGTH_LIMIT))
    correct_reward: float = attrs.field(default=1.0, validator=number())
    format_reward: float = attrs.field(default=0.1, validator=number())

    def __attrs_post_init__(self) -> None:
        self.num_count = _as_pair(self.num_count)
        self.number_range = _as_pair(self.number_range)
        self.target_range = _as_pair(self.target_range)
        if self.data_path is not None and not self.data_path.strip():
            raise ValueError("data_path must be a path or hub id, or null for generated problems")
        if self.data_path is None:
            error = _unreachable(self.num_count, self.number_range, self.target_range)
            if error is not None:
                raise ValueError(error)


@functools.lru_cache(maxsize=64)
def _unreachable(num_count: tuple[int, int], number_range: tuple[int, int],
                 target_range: tuple[int, int]) -> str | None:
    """Why generated problems miss ``target_range`` (200 draws from seed 0 find no solvable one), or None. A pure
    function of the three ranges, cached: every env construction validates its config."""
    try:
        generate_problem(np.random.Generator(np.random.PCG64(0)), num_count=num_count, number_range=number_range,
                         target_range=target_range, max_tries=200)
    except ValueError as exc:
        return f"target_range {list(target_range)} is not reachable: {exc}"
    return None


_INSTRUCTION = (
    "You are solving the Countdown puzzle. Combine all the given numbers, each exactly once, with + - * / and "
    "parentheses into an expression whose value equals the target. Answer with the expression only, e.g. "
    "<answer>(6 - 4) * (3 + 9)</answer>. No other text, no '=' and no unary minus."
)


@functools.lru_cache(maxsize=8)
def _cached_problems(stamp: tuple[str, int, int], split: str, loader: str) -> tuple[CountdownProblem, ...]:
    return load_problems(stamp[0], split=split, loader=loader)


class CountdownEnv(TextEnv):
    """RAGEN's Countdown with a real expression parser (single turn). See the module docstring."""

    config_cls: ClassVar[type] = CountdownConfig
    config: CountdownConfig

    def __init__(self, config: CountdownConfig | None = None, render_mode: str | None = "ansi",
                 **options: Any) -> None:
        super().__init__(config, render_mode, **options)
        cfg = self.config
        self.problems: tuple[CountdownProblem, ...] | None = None
        if cfg.data_path is not None:
            from ragen_plugins_envs.metamath import source_stamp

            self.problems = _cached_problems(source_stamp(cfg.data_path), cfg.data_split, cfg.loader)
        self.instruction = _INSTRUCTION
        self.action_names = None
        self.legend = {}
        self.max_actions_per_traj = 1
        self.problem: CountdownProblem | None = None
        self._answer: str | None = None
        self._verdict = ""
        self._done = True
        self._solution: str | None = None
        self._solved_for: CountdownProblem | None = None

    # ------------------------------------------------------------------------------------------ gymnasium API

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Draw (or pick from the dataset) a problem from the seed."""
        super().reset(seed=seed)
        cfg = self.config
        if self.problems is not None:
            self.problem = self.problems[int(self.np_random.integers(len(self.problems)))]
        else:
            self.problem = generate_problem(self.np_random, num_count=_as_pair(cfg.num_count),
                                            number_range=cfg.number_range,
                                            target_range=cfg.target_range)
        self._answer = None
        self._verdict = ""
        self._done = False
        return self.render(), {"num_count": len(self.problem.nums), "target": self.problem.target}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Score one answer expression; malformed text is invalid (reward 0, state unchanged)."""
        if self._done or self.problem is None:
            return self.render(), 0.0, True, False, self._info(valid=False)
        try:
            parsed = parse_expression(action, max_length=self.config.max_expression_length)
        except ExpressionError:
            return self.render(), 0.0, False, False, self._info(valid=False)
        numbers_match = Counter(parsed.numbers) == Counter(Fraction(n) for n in self.problem.nums)
        correct = numbers_match and parsed.value is not None and parsed.value == self.problem.target
        if correct:
            reward, verdict = self.config.correct_reward, "correct"
        elif numbers_match:
            reward, verdict = self.config.format_reward, "wrong value"
        else:
            reward, verdict = 0.0, "does not use exactly the given numbers"
        value = "undefined (division by zero)" if parsed.value is None else _format_fraction(parsed.value)
        self._answer = " ".join(action.split())
        self._verdict = f"= {value} ({verdict})"
        self._done = True
        info = self._info(valid=True, success=correct)
        info["numbers_match"] = float(numbers_match)
        return self.render(), float(reward), True, False, info

    def render(self) -> str:
        """The target and numbers, then either brief instructions or the scored answer."""
        if self.problem is None:
            return "No episode yet: call reset()."
        head = f"Target: {self.problem.target}, nums: {list(self.problem.nums)}"
        if self._answer is None:
            return head + "\nUse each number exactly once with + - * / and parentheses; answer with the expression."
        return head + f"\nYour answer: {self._answer} {self._verdict}"

    def oracle_action(self) -> str | None:
        """An expression the exhaustive solver found, or None (episode over, or no solution)."""
        if self._done or self.problem is None or len(self.problem.nums) > MAX_SOLVER_NUMBERS:
            return None
        if self._solved_for != self.problem:
            self._solution = solve(self.problem.nums, self.problem.target)
            self._solved_for = self.problem
        return self._solution

    # ------------------------------------------------------------------------------------------ helpers

    def _info(self, *, valid: bool, success: bool = False) -> dict[str, Any]:
        return {"success": bool(success), "action_is_valid": bool(valid), "action_is_effective": bool(valid),
                "numbers_match": 0.0}


def _format_fraction(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
