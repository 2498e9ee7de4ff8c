"""``ragen_core.validators``: each factory against a plain reference predicate, the error message, and what the
generated docs show for each kind of validator (``scripts/gen_docs.py``'s ``describe_validator``)."""

from __future__ import annotations

import math
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragen_core.errors import ConfigError
from ragen_core.structuring import ECHO_LIMIT, structure
from ragen_core.validators import Constraint, constraint, integer, number, one_of
from tests.docs.gen import load_generator

gen = load_generator()

#: values of every kind a config may carry: ints and floats around small bounds, the special floats, bools, other
values = st.one_of(
    st.integers(-6, 6),
    st.floats(-6, 6),
    st.sampled_from([0.5, -0.5, 1e-12, -1e-12, math.nan, math.inf, -math.inf, 10**20, -(10**20)]),
    st.booleans(),
    st.none(),
    st.text(max_size=2),
    st.lists(st.integers(), max_size=2),
)
bounds = st.none() | st.integers(-4, 4)


@attrs.define
class _Attr:
    """Stands in for the ``attrs.Attribute`` a validator receives (it reads only ``name``)."""

    name: str = "opt"


def accepts(validator: Any, value: Any) -> bool:
    try:
        validator(None, _Attr(), value)
    except ValueError:
        return False
    return True


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_real(v: Any) -> bool:
    return type(v) in (int, float) and v - v == 0  # nan - nan and inf - inf are nan


# ------------------------------------------------------------------------------------------------- reference checks

@given(value=values, low=bounds, high=bounds)
def test_integer_matches_the_reference(value: Any, low: int | None, high: int | None) -> None:
    expected = _is_int(value) and (low is None or value >= low) and (high is None or value <= high)
    assert accepts(integer(low, high), value) == expected


@given(value=values, low=bounds, high=bounds, low_open=st.booleans(), high_open=st.booleans())
def test_number_matches_the_reference(value: Any, low: int | None, high: int | None, low_open: bool,
                                      high_open: bool) -> None:
    expected = _is_real(value) and (low is None or (value > low if low_open else value >= low)) and (
        high is None or (value < high if high_open else value <= high))
    assert accepts(number(low, high, low_open=low_open, high_open=high_open), value) == expected


@given(value=values, choices=st.lists(st.sampled_from([0, 1, 4, 9, 0.5, True, False, None, "a", "", "1"]),
                                      min_size=1, max_size=4))
def test_one_of_matches_the_reference(value: Any, choices: list[Any]) -> None:
    expected = any(type(value) is type(c) and value == c for c in choices)
    assert accepts(one_of(*choices), value) == expected


@given(value=values)
def test_constraint_accepts_what_its_test_accepts_and_a_failing_test_refuses(value: Any) -> None:
    assert accepts(constraint("a string", lambda v: isinstance(v, str)), value) == isinstance(value, str)
    # a test that raises (comparing a string with a number) refuses the value instead of leaking the exception
    assert accepts(constraint("an even number", lambda v: v % 2 == 0), value) == (
        type(value) in (int, float, bool) and not math.isnan(value) and value % 2 == 0)


def test_bools_and_non_finite_numbers_are_refused() -> None:
    assert not accepts(integer(0, 1), True) and not accepts(integer(), False)
    assert not accepts(number(0, 1), True) and not accepts(number(), False)
    assert not accepts(one_of(1, 0), True) and not accepts(one_of(4, 9), 4.0)
    assert accepts(one_of(True, False), False) and not accepts(one_of(True, False), 0)
    for bad in (math.nan, math.inf, -math.inf):
        assert not accepts(number(), bad)
    assert accepts(number(0, low_open=True), 1e-300) and not accepts(number(0, low_open=True), 0.0)
    assert accepts(number(0, 1, high_open=True), 0) and not accepts(number(0, 1, high_open=True), 1)


# ---------------------------------------------------------------------------------------- descriptions and messages

@pytest.mark.parametrize(("validator", "description"), [
    (integer(), "an integer"),
    (integer(1), "an integer >= 1"),
    (integer(high=8), "an integer <= 8"),
    (integer(0, 10), "an integer in [0, 10]"),
    (integer(0, note="0: one per CPU"), "an integer >= 0 (0: one per CPU)"),
    (number(), "a finite number"),
    (number(0), "a finite number >= 0"),
    (number(0, low_open=True), "a finite number > 0"),
    (number(high=1.0, high_open=True), "a finite number < 1"),
    (number(0, 1), "a number in [0, 1]"),
    (number(0.0, 1.0, low_open=True), "a number in (0, 1]"),
    (number(0, 0.5, high_open=True), "a number in [0, 0.5)"),
    (number(0, 600, low_open=True, note="seconds"), "a number in (0, 600] (seconds)"),
    (one_of("a", "b"), "one of 'a', 'b'"),
    (one_of(None, 4), "one of None, 4"),
    (constraint("a folder path", bool), "a folder path"),
])
def test_descriptions(validator: Constraint, description: str) -> None:
    assert validator.description == description
    assert repr(validator) == f"<constraint: {description}>"


def test_the_message_names_the_option_the_constraint_and_the_value() -> None:
    with pytest.raises(ValueError) as info:
        integer(1)(None, _Attr("pairs"), 0)
    assert str(info.value) == "'pairs' must be an integer >= 1: 0"
    with pytest.raises(ValueError) as info:
        one_of("a", "b")(None, _Attr("mode"), "c")
    assert str(info.value) == "'mode' must be one of 'a', 'b': 'c'"
    with pytest.raises(ValueError) as info:
        constraint("short", lambda v: len(v) < 3)(None, _Attr("name"), "x" * 10_000)
    assert len(str(info.value)) < ECHO_LIMIT + 40 and str(info.value).endswith("...")


@attrs.define
class _Options:
    size: int = attrs.field(default=4, validator=integer(2, 12))
    slip: float = attrs.field(default=0.0, validator=number(0, 1))
    mode: str = attrs.field(default="easy", validator=one_of("easy", "hard"))


@pytest.mark.parametrize(("data", "message"), [
    ({"size": 13}, "env.size: must be an integer in [2, 12]: 13"),
    ({"slip": 1.5}, "env.slip: must be a number in [0, 1]: 1.5"),
    ({"mode": "medium"}, "env.mode: must be one of 'easy', 'hard': 'medium'"),
])
def test_a_config_error_names_the_key_path(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        structure(_Options, data, "env")
    assert str(info.value) == message
    assert structure(_Options, {"size": 12, "slip": 1, "mode": "hard"}, "env") == _Options(12, 1, "hard")


# ------------------------------------------------------------------------------------------------------ the docs

def _documented(_inst: Any, attribute: Any, value: Any) -> None:
    """At least one family, none repeated.

    The rest of the docstring is not shown.
    """


def _acronym(_inst: Any, attribute: Any, value: Any) -> None:
    """HTTP(S) URLs only."""


def _undocumented(_inst: Any, attribute: Any, value: Any) -> None:
    pass


@pytest.mark.parametrize(("validator", "shown"), [
    (None, []),
    (attrs.validators.ge(1), [">= 1"]),
    (attrs.validators.lt(0.5), ["< 0.5"]),
    (attrs.validators.instance_of(bool), []),
    (attrs.validators.in_(("seq", "token")), []),
    (integer(1), ["an integer >= 1"]),
    (number(0, 1, high_open=True), ["a number in [0, 1)"]),
    (one_of("a", "b"), ["one of 'a', 'b'"]),
    (constraint("a plain folder name", bool), ["a plain folder name"]),
    (attrs.validators.optional(integer(1)), ["an integer >= 1"]),
    (attrs.validators.and_(attrs.validators.ge(0), number(high=9)), [">= 0", "a finite number <= 9"]),
    ([attrs.validators.gt(0), constraint("odd", bool)], ["> 0", "odd"]),
    (_documented, ["at least one family, none repeated"]),
    (_acronym, ["HTTP(S) URLs only"]),
    (_undocumented, []),
    (lambda _i, _a, _v: None, []),
])
def test_describe_validator(validator: Any, shown: list[str]) -> None:
    assert gen.describe_validator(validator) == shown


def test_option_rows_show_the_descriptions() -> None:
    rows = {r.key: r.allowed for r in gen.option_rows(_Options)}
    assert rows == {"size": "an integer in [2, 12]", "slip": "a number in [0, 1]", "mode": "one of 'easy', 'hard'"}


def test_one_of_suggests_the_nearest_choice_for_a_typo() -> None:
    import attrs as _attrs

    from ragen_core.validators import one_of as _one_of

    @_attrs.define
    class C:
        mode: str = _attrs.field(default="linear", validator=_one_of("linear", "softmax"))

    with pytest.raises(ValueError, match=r"'mode' must be one of 'linear', 'softmax': 'softmx' \(did you mean 'softmax'\?\)"):
        C(mode="softmx")
    with pytest.raises(ValueError) as far:
        C(mode="zzzzzz")
    assert "did you mean" not in str(far.value)
