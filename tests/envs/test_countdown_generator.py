"""The Countdown search and problem generator against a plain reference: the algorithm they replaced (subset
dynamic programming over :class:`fractions.Fraction` values, kept below unchanged), on fixed seeds and on
hypothesis' seeds, option ranges and number lists. The fast search must give exactly the same problems (numbers,
target, the same RNG draws), the same value sets and the same solver expressions."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragen_plugins_envs.countdown as countdown_module
from ragen_core.errors import ConfigError
from ragen_plugins_envs.countdown import (
    CountdownConfig,
    CountdownEnv,
    CountdownProblem,
    generate_problem,
    reachable_values,
    solve,
)
from ragen_plugins_envs.registration_text import TEXT_ENV_VARIANTS

VARIANTS = {name: params for name, (env, params, _d) in TEXT_ENV_VARIANTS.items() if env == "countdown"}
SLOW = settings(max_examples=120, deadline=None, database=None)

# ------------------------------------------------------------------------------------------------ the reference

_RefOrigin = tuple[int, Fraction, str, int, Fraction]


def ref_value_table(nums: tuple[Fraction, ...]) -> list[dict[Fraction, _RefOrigin | None]]:
    n = len(nums)
    table: list[dict[Fraction, _RefOrigin | None]] = [{} for _ in range(1 << n)]
    for i, value in enumerate(nums):
        table[1 << i] = {value: None}
    for mask in range(1, 1 << n):
        if mask & (mask - 1) == 0:
            continue
        out = table[mask]
        sub = (mask - 1) & mask
        while sub:
            other = mask ^ sub
            if sub < other:
                for a in table[sub]:
                    for b in table[other]:
                        candidates = [(a + b, sub, a, "+", other, b), (a * b, sub, a, "*", other, b),
                                      (a - b, sub, a, "-", other, b), (b - a, other, b, "-", sub, a)]
                        if b != 0:
                            candidates.append((a / b, sub, a, "/", other, b))
                        if a != 0:
                            candidates.append((b / a, other, b, "/", sub, a))
                        for value, *origin in candidates:
                            if value not in out:
                                out[value] = tuple(origin)  # type: ignore[assignment]
            sub = (sub - 1) & mask
    return table


def ref_reachable_values(nums: Sequence[int | Fraction]) -> frozenset[Fraction]:
    values = tuple(Fraction(n) for n in nums)
    return frozenset(ref_value_table(values)[-1]) if values else frozenset()


def _ref_rebuild(table: Sequence[dict[Fraction, _RefOrigin | None]], mask: int, value: Fraction) -> str:
    origin = table[mask][value]
    if origin is None:
        return str(value.numerator) if value.denominator == 1 else f"({value.numerator} / {value.denominator})"
    left_mask, left, op, right_mask, right = origin
    return f"({_ref_rebuild(table, left_mask, left)} {op} {_ref_rebuild(table, right_mask, right)})"


def ref_solve(nums: Sequence[int | Fraction], target: int | Fraction,
              table: list[dict[Fraction, _RefOrigin | None]] | None = None) -> str | None:
    values = tuple(Fraction(n) for n in nums)
    if not values:
        return None
    table = table or ref_value_table(values)
    if Fraction(target) not in table[-1]:
        return None
    text = _ref_rebuild(table, len(table) - 1, Fraction(target))
    return text[1:-1] if len(values) > 1 else text


def ref_generate_problem(rng: np.random.Generator, *, num_count: tuple[int, int], number_range: tuple[int, int],
                         target_range: tuple[int, int], max_tries: int = 1000) -> CountdownProblem:
    lo_t, hi_t = target_range
    for _ in range(max_tries):
        count = int(rng.integers(num_count[0], num_count[1] + 1))
        nums = tuple(int(v) for v in rng.integers(number_range[0], number_range[1] + 1, size=count))
        targets = sorted(int(v) for v in ref_reachable_values(nums) if v.denominator == 1 and lo_t <= v <= hi_t)
        if targets:
            return CountdownProblem(target=targets[int(rng.integers(len(targets)))], nums=nums)
    raise ValueError(
        f"no solvable problem with num_count={num_count}, number_range={number_range}, target_range={target_range} "
        f"in {max_tries} draws")


def both_generate(seed: int, **options: Any) -> None:
    """The generator and the reference draw the same problem (or fail alike) and leave the RNG in the same state."""
    rngs = [np.random.default_rng(seed), np.random.default_rng(seed)]
    results = []
    for rng, generate in zip(rngs, (generate_problem, ref_generate_problem)):
        try:
            results.append(generate(rng, **options))
        except ValueError as exc:
            results.append(str(exc))
    assert results[0] == results[1], (seed, options)
    assert rngs[0].bit_generator.state == rngs[1].bit_generator.state, (seed, options)


# ------------------------------------------------------------------------------------------------ fixed seeds

#: sha256 of the JSON ``[[target, nums], ...]`` for seeds 0..299, drawn with the Fraction search (before the fast one)
GOLDEN = {"countdown": "46e7ebfb25801b5c97d3a4b20d79b7ac425c4786943ed0f4c1bc5f7e122fe005",
          "countdown_3": "9e561b5a08542307cb713273aa75e10ca5da5a1f60ba0ce6e4629ee2c86ecb99",
          "countdown_4": "264bfda9d730aedb424176eca3ea0827652a86286dd50364a60a5b099a0b7a81"}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_problems_of_seeds_0_to_299_are_pinned(name: str) -> None:
    env = CountdownEnv(**({} if name == "countdown" else VARIANTS[name]))
    rows = []
    for seed in range(300):
        env.reset(seed=seed)
        assert env.problem is not None
        rows.append([env.problem.target, list(env.problem.nums)])
    assert hashlib.sha256(json.dumps(rows).encode()).hexdigest() == GOLDEN[name]


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_observations_info_and_answers_match_the_reference(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeds 0..39: the observation, the info, the oracle's answer and its scoring, with the fast generator and
    solver and with the reference's patched in."""
    def episodes() -> list[Any]:
        env, out = CountdownEnv(**({} if name == "countdown" else VARIANTS[name])), []
        for seed in range(40):
            obs, info = env.reset(seed=seed)
            answer = env.oracle_action()
            out.append((obs, info, answer, env.step(answer or "0")))
        return out

    fast = episodes()
    monkeypatch.setattr(countdown_module, "generate_problem", ref_generate_problem)
    monkeypatch.setattr(countdown_module, "solve", ref_solve)
    assert fast == episodes()


def test_five_numbers_and_wide_ranges() -> None:
    for seed in range(2):
        both_generate(seed, num_count=(5, 5), number_range=(1, 30), target_range=(1, 200))
    for seed in range(10):
        both_generate(seed, num_count=(2, 4), number_range=(0, 6), target_range=(-40, 40), max_tries=20)
        both_generate(seed, num_count=(2, 3), number_range=(-9, 9), target_range=(-500, 500), max_tries=20)


def test_unreachable_targets_fail_alike_and_config_validation_is_cached() -> None:
    options = {"num_count": (2, 2), "number_range": (1, 2), "target_range": (10**6, 10**6 + 1)}
    both_generate(0, max_tries=200, **options)
    with pytest.raises(ValueError) as caught:
        ref_generate_problem(np.random.Generator(np.random.PCG64(0)), max_tries=200, **options)
    expected = f"target_range [1000000, 1000001] is not reachable: {caught.value}"
    countdown_module._unreachable.cache_clear()
    for _ in range(3):
        with pytest.raises(ValueError) as error:
            CountdownConfig(**options)  # type: ignore[arg-type]
        assert str(error.value) == expected
        with pytest.raises(ConfigError, match="is not reachable"):
            CountdownEnv(**options)
    info = countdown_module._unreachable.cache_info()
    assert (info.misses, info.hits) == (1, 5)


# ------------------------------------------------------------------------------------------------ hypothesis

PAIRS = st.tuples(st.integers(-20, 120), st.integers(0, 150)).map(lambda t: (t[0], t[0] + t[1]))


@SLOW
@given(seed=st.integers(0, 2**32 - 1), low_count=st.integers(0, 4), extra=st.integers(0, 2),
       number_low=st.integers(-12, 60), number_width=st.integers(0, 60), target_range=PAIRS,
       max_tries=st.integers(1, 4))
def test_generator_matches_the_reference(seed: int, low_count: int, extra: int, number_low: int,
                                         number_width: int, target_range: tuple[int, int], max_tries: int) -> None:
    both_generate(seed, num_count=(low_count, min(4, low_count + extra)),
                  number_range=(number_low, number_low + number_width), target_range=target_range,
                  max_tries=max_tries)


NUMBERS = st.one_of(st.integers(0, 99), st.integers(-12, 12),
                    st.fractions(min_value=-20, max_value=20, max_denominator=8))


@SLOW
@given(nums=st.lists(NUMBERS, max_size=4), goals=st.lists(st.integers(-150, 150), max_size=6))
def test_values_and_solutions_match_the_reference(nums: list[int | Fraction], goals: list[int]) -> None:
    table = ref_value_table(tuple(Fraction(n) for n in nums))
    expected = frozenset(table[-1]) if nums else frozenset()
    assert reachable_values(nums) == expected
    whole = tuple(sorted(int(v) for v in expected if v.denominator == 1 and -150 <= v <= 150))
    assert countdown_module._whole_targets(countdown_module._checked(nums), -150, 150) == whole
    for goal in [*goals, *sorted(expected)[:: max(1, len(expected) // 12)]]:
        assert solve(nums, goal) == ref_solve(nums, goal, table), (nums, goal)
