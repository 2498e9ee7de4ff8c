"""Validators for attrs config classes: the one way the core and every plugin check an option's value.

attrs' own validators (``attrs.validators.ge``, ``gt``, ``le``, ``in_``, ``and_``, ``optional``, ``min_len``) serve
where the type is already checked (a field read through :func:`ragen_core.structuring.structure` is). The factories
here also check the type, for classes that code builds directly, and each carries a readable ``description`` that
the error message and the generated docs use::

    @attrs.define
    class MyEnvConfig:
        size: int = attrs.field(default=4, validator=integer(2, 12))        # 'size' must be an integer in [2, 12]
        slip: float = attrs.field(default=0.0, validator=number(0, 1))      # ... a number in [0, 1]
        mode: str = attrs.field(default="easy", validator=one_of("easy", "hard"))
        name: str = attrs.field(default="x", validator=constraint("a non-blank string", lambda v: bool(v.strip())))

A validator function of your own documents its constraint in the first line of its docstring (the docs show it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs

from ragen_core.errors import suggest
from ragen_core.structuring import short_repr

__all__ = ["Constraint", "constraint", "integer", "number", "one_of"]


@attrs.frozen(repr=False)
class Constraint:
    """An attrs validator: ``test(value)`` must be true; otherwise ``ValueError("'NAME' must be DESCRIPTION: VALUE")``.

    :ivar description: what the value must be, read after "must be" ("an integer >= 1").
    :ivar test: the check; an exception it raises (a comparison with a wrong type) counts as a failed check.
    :ivar choices: names a refused string is compared with, to add "(did you mean 'x'?)" (:func:`one_of`'s).
    """

    description: str
    test: Callable[[Any], bool]
    choices: tuple[str, ...] = ()

    def __call__(self, _inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        try:
            ok = bool(self.test(value))
        except (TypeError, ValueError, AttributeError):
            ok = False
        if not ok:
            close = suggest(value, self.choices) if self.choices and isinstance(value, str) else None
            raise ValueError(f"'{attribute.name}' must be {self.description}: {short_repr(value)}"
                             + (f" (did you mean {close!r}?)" if close else ""))

    def __repr__(self) -> str:
        return f"<constraint: {self.description}>"


def constraint(description: str, test: Callable[[Any], bool]) -> Constraint:
    """A validator that requires ``test(value)``; ``description`` completes "must be ..." in its error message."""
    return Constraint(description, test)


def _show(bound: float) -> str:
    """A bound as the docs write it: ``1`` for ``1.0``, ``0.5`` for ``0.5``."""
    if isinstance(bound, float) and bound.is_integer() and abs(bound) < 1e15:
        return str(int(bound))
    return str(bound)


def _bounds(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{_show(low)}, {_show(high)}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {_show(low)}"
    if high is not None:
        return f"{'<' if high_open else '<='} {_show(high)}"
    return ""


def _within(value: float, low: float | None, high: float | None, low_open: bool, high_open: bool) -> bool:
    if low is not None and (value <= low if low_open else value < low):
        return False
    return not (high is not None and (value >= high if high_open else value > high))


def integer(low: int | None = None, high: int | None = None, *, note: str = "") -> Constraint:
    """An ``int`` (not a bool) in ``[low, high]`` (either bound optional); ``note`` explains a special value
    ("0: one per CPU") and is shown in parentheses after the range."""
    bounds = _bounds(low, high, False, False)
    description = f"an integer {bounds}".rstrip() + (f" ({note})" if note else "")
    return Constraint(description, lambda v: isinstance(v, int) and not isinstance(v, bool)
                      and _within(v, low, high, False, False))


def number(low: float | None = None, high: float | None = None, *, low_open: bool = False,
           high_open: bool = False, note: str = "") -> Constraint:
    """A finite real number (an int or a float, not a bool) between ``low`` and ``high`` (each optional; excluded
    with ``low_open`` / ``high_open``): ``number(0, 1)`` is a probability, ``number(0, low_open=True)`` a positive
    number. NaN and the infinities are refused; the description says "finite" where a side is unbounded."""
    bounds = _bounds(low, high, low_open, high_open)
    kind = "a number" if low is not None and high is not None else "a finite number"
    description = f"{kind} {bounds}".rstrip() + (f" ({note})" if note else "")
    return Constraint(description, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                      and math.isfinite(v) and _within(v, low, high, low_open, high_open))


def one_of(*choices: Any) -> Constraint:
    """One of ``choices``: equal to one and of its type, so ``one_of("a", "b")`` refuses ``1``, ``one_of(4, 9)``
    refuses ``4.0`` and ``True``, and ``one_of(None, "x")`` accepts None. A refused string close to a choice gets
    "(did you mean 'x'?)" in the message."""
    options = tuple(choices)
    return Constraint(f"one of {', '.join(map(repr, options))}", lambda v: any(_same(v, c) for c in options),
                      tuple(c for c in options if isinstance(c, str)))


def _same(value: Any, choice: Any) -> bool:
    return (isinstance(value, type(choice)) and isinstance(value, bool) == isinstance(choice, bool)
            and bool(value == choice))
