"""Tests of ragen_plugins_envs.fast_rng: numpy's seeding and draws written out in Python give numpy's numbers."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.utils import seeding
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_plugins_envs.fast_rng import DOUBLE_SCALE, Pcg64Doubles, RawDraws, pcg64_state, seed_env

SEEDS = st.one_of(st.integers(0, 2**32 - 1), st.sampled_from([0, 1, 2**31 - 1, 2**31, 2**32 - 1]))


def _drawing_state(generator: np.random.Generator) -> dict:
    """The state that decides the next numbers (numpy keeps a used half-word in ``uinteger``, never read again)."""
    state = dict(generator.bit_generator.state)
    if not state["has_uint32"]:
        state["uinteger"] = 0
    return state


@settings(max_examples=500, deadline=None)
@given(seed=SEEDS)
def test_pcg64_state_is_numpys(seed: int) -> None:
    state = np.random.PCG64(seed).state["state"]
    assert pcg64_state(seed) == (state["state"], state["inc"])


@settings(max_examples=200, deadline=None)
@given(seed=SEEDS)
def test_pcg64_doubles_are_numpys(seed: int) -> None:
    doubles = Pcg64Doubles(seed)
    assert [doubles.next_double() for _ in range(20)] == np.random.default_rng(seed).random(20).tolist()


class _Env(gymnasium.Env):  # type: ignore[type-arg]
    """The smallest gymnasium env: only its np_random matters here."""


@settings(max_examples=200, deadline=None)
@given(seeds=st.lists(st.one_of(SEEDS, st.integers(2**32, 2**70), st.none()), min_size=1, max_size=5))
def test_seed_env_is_gymnasiums_reset(seeds: list[int | None]) -> None:
    """Seeding, re-seeding and continuing (seed None) give the numbers of ``gymnasium.Env.reset(seed=...)``."""
    ours, theirs = _Env(), _Env()
    ours.np_random, theirs.np_random = seeding.np_random(7)[0], seeding.np_random(7)[0]
    for seed in seeds:
        generator = seed_env(ours, seed)
        gymnasium.Env.reset(theirs, seed=seed)
        assert generator is ours.np_random and ours.np_random_seed == theirs.np_random_seed
        assert ours.np_random.random(3).tolist() == theirs.np_random.random(3).tolist()
        assert int(ours.np_random.integers(1000)) == int(theirs.np_random.integers(1000))


@pytest.mark.parametrize("seed", [-1, 1.5, "1"])
def test_seed_env_refuses_what_gymnasium_refuses(seed: Any) -> None:
    with pytest.raises(gymnasium.error.Error):
        seed_env(_Env(), seed)


_OPS = st.lists(st.one_of(
    st.tuples(st.just("doubles"), st.integers(1, 20)),
    st.tuples(st.just("bounded"), st.one_of(st.integers(1, 100), st.integers(2**31 - 5, 2**32 - 2))),
    st.tuples(st.just("choice2"), st.integers(2, 10_000)),
), min_size=1, max_size=12)


@settings(max_examples=400, deadline=None)
@given(seed=SEEDS, buffered=st.booleans(), ops=_OPS, known=st.booleans())
def test_raw_draws_are_numpys(seed: int, buffered: bool, ops: list[tuple[str, int]], known: bool) -> None:
    """Doubles, bounded integers (with the rejection loop: a range just above 2**31 rejects half the words) and
    pairs of ``choice`` match numpy's calls, and :meth:`RawDraws.close` leaves the generator where numpy does,
    whether the buffered half-word is read from the state or given."""
    ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
    if buffered:
        ours.integers(3), theirs.integers(3)
    start = int(ours.bit_generator.state["uinteger"]) if buffered else None
    draws = RawDraws(ours, start) if known else RawDraws(ours)
    for op, arg in ops:
        if op == "doubles":
            assert [(x >> 11) / DOUBLE_SCALE for x in draws.raw(arg)] == theirs.random(arg).tolist()
        elif op == "bounded":
            assert draws.bounded(arg) == int(theirs.integers(arg + 1))
        else:
            assert draws.choice2(arg) == tuple(int(i) for i in theirs.choice(arg, 2, replace=False))
    draws.close()
    assert _drawing_state(ours) == _drawing_state(theirs)
    assert ours.random(4).tolist() == theirs.random(4).tolist()
    assert ours.integers(2**20, size=5).tolist() == theirs.integers(2**20, size=5).tolist()


def test_prefetched_words_are_taken_first() -> None:
    """``bounded(rng, raw)`` takes 32-bit words from the prefetched outputs (``pop()`` order) before drawing."""
    ours, theirs = np.random.default_rng(3), np.random.default_rng(3)
    draws = RawDraws(ours, None)
    raw = draws.raw(2)[::-1]
    got = [draws.bounded(9, raw) for _ in range(5)]  # 4 words from the 2 prefetched outputs, then a fresh one
    assert raw == [] and got == [int(theirs.integers(10)) for _ in range(5)]
    draws.close()
    assert _drawing_state(ours) == _drawing_state(theirs)
