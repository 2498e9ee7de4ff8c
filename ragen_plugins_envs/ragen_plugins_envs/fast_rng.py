"""numpy's seeding and draws, written out for the grid envs' resets: the same numbers at a fraction of the cost.

gymnasium seeds an env with ``np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))``, which takes about
45 us (building the seed sequence and the bit generator); a FrozenLake reset then draws a couple of dozen numbers
through numpy calls of 2 to 30 us each (``Generator.choice`` is the slowest). For a reset that should take tens of
microseconds that overhead is most of the cost, so this module reproduces numpy exactly, in plain Python:

- :func:`pcg64_state` is numpy's ``SeedSequence`` mixing and ``PCG64`` seeding for a seed in ``[0, 2**32)``, and
  :func:`seed_env` uses it to do what ``gymnasium.Env.reset(seed=seed)`` does to ``env.np_random``: the env's
  generator gets the state of gymnasium's fresh one (the generator object is kept and re-seeded in place; larger
  seeds go through gymnasium itself).
- :class:`RawDraws` makes ``Generator.random``, ``Generator.integers`` and ``Generator.choice(n, 2, replace=False)``
  draws from the bit generator's raw 64-bit outputs, including numpy's buffered 32-bit half-words (a bounded draw
  takes 32 bits; numpy keeps the other half of the 64-bit output for the next one), and leaves the generator in the
  state numpy would.
- :class:`Pcg64Doubles` is a pure-Python PCG64 stream of ``Generator.random()`` doubles for a seed.

``tests/envs/test_fast_rng.py`` checks every one against numpy on many seeds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.utils import seeding

__all__ = ["Pcg64Doubles", "RawDraws", "pcg64_state", "seed_env"]

_M32 = 0xFFFFFFFF
_M64 = (1 << 64) - 1
_M128 = (1 << 128) - 1
_PCG_MULT = 0x2360ED051FC65DA44385DF649FCCF645  # PCG's default 128-bit multiplier (numpy's PCG64)
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715  # SeedSequence's mix() multipliers
#: a double is (raw >> 11) * 2**-53: comparing (raw >> 11) with p * 2**53 compares the double with p, exactly
DOUBLE_SCALE = float(1 << 53)


def pcg64_state(seed: int) -> tuple[int, int]:
    """The ``(state, inc)`` of ``np.random.PCG64(seed)`` for ``0 <= seed < 2**32``, without numpy.

    numpy hashes the seed word into a pool of four 32-bit words (``SeedSequence``: one ``hashmix`` per word, then
    every word mixed into every other), draws eight words from the pool, and seeds PCG64 with them (state and
    increment, then one step). The hash constants of each step are fixed (the hash multiplier advances by a known
    factor at every call), so they are written out below.
    """
    a = ((seed ^ 0x43B0D7E5) * 0xAE5A53A9) & _M32
    a ^= a >> 16
    b, c, d = 0x8A9C19D9, 0x894CFDD1, 0x30409F75  # hashmix(0) of the three empty pool words
    a, b, c, d = _mix_source_a(a, b, c, d)
    a, b, c, d = _mix_source_b(a, b, c, d)
    a, b, c, d = _mix_sources_cd(a, b, c, d)
    w0 = ((a ^ 0x8B51F9DD) * 0x464A0A99) & _M32
    w1 = ((b ^ 0x464A0A99) * 0x819D14A5) & _M32
    w2 = ((c ^ 0x819D14A5) * 0xD369FDC1) & _M32
    w3 = ((d ^ 0xD369FDC1) * 0x501638AD) & _M32
    w4 = ((a ^ 0x501638AD) * 0xA600C129) & _M32
    w5 = ((b ^ 0xA600C129) * 0x8B0167F5) & _M32
    w6 = ((c ^ 0x8B0167F5) * 0x5C1E2ED1) & _M32
    w7 = ((d ^ 0x5C1E2ED1) * 0x301D747D) & _M32
    init_state = ((w0 ^ w0 >> 16) | (w1 ^ w1 >> 16) << 32) << 64 | (w2 ^ w2 >> 16) | (w3 ^ w3 >> 16) << 32
    init_seq = ((w4 ^ w4 >> 16) | (w5 ^ w5 >> 16) << 32) << 64 | (w6 ^ w6 >> 16) | (w7 ^ w7 >> 16) << 32
    inc = (init_seq << 1 | 1) & _M128
    return ((inc + init_state) * _PCG_MULT + inc) & _M128, inc


def _mix_source_a(a: int, b: int, c: int, d: int) -> tuple[int, int, int, int]:
    """Pool word 0 mixed into words 1, 2, 3 (``mix(dst, hashmix(src))``)."""
    h = ((a ^ 0x9205B1D5) * 0xE9096E59) & _M32
    b = (_MIX_L * b - _MIX_R * (h ^ h >> 16)) & _M32
    b ^= b >> 16
    h = ((a ^ 0xE9096E59) * 0x8D5CB6AD) & _M32
    c = (_MIX_L * c - _MIX_R * (h ^ h >> 16)) & _M32
    c ^= c >> 16
    h = ((a ^ 0x8D5CB6AD) * 0x9BB16511) & _M32
    d = (_MIX_L * d - _MIX_R * (h ^ h >> 16)) & _M32
    return a, b, c, d ^ d >> 16


def _mix_source_b(a: int, b: int, c: int, d: int) -> tuple[int, int, int, int]:
    """Pool word 1 mixed into words 0, 2, 3."""
    h = ((b ^ 0x9BB16511) * 0x00C238C5) & _M32
    a = (_MIX_L * a - _MIX_R * (h ^ h >> 16)) & _M32
    a ^= a >> 16
    h = ((b ^ 0x00C238C5) * 0x4D029A09) & _M32
    c = (_MIX_L * c - _MIX_R * (h ^ h >> 16)) & _M32
    c ^= c >> 16
    h = ((b ^ 0x4D029A09) * 0xCC132E1D) & _M32
    d = (_MIX_L * d - _MIX_R * (h ^ h >> 16)) & _M32
    return a, b, c, d ^ d >> 16


def _mix_sources_cd(a: int, b: int, c: int, d: int) -> tuple[int, int, int, int]:
    """Pool word 2 mixed into words 0, 1, 3, then word 3 into words 0, 1, 2."""
    h = ((c ^ 0xCC132E1D) * 0x83A97B41) & _M32
    a = (_MIX_L * a - _MIX_R * (h ^ h >> 16)) & _M32
    a ^= a >> 16
    h = ((c ^ 0x83A97B41) * 0xFA8DDCB5) & _M32
    b = (_MIX_L * b - _MIX_R * (h ^ h >> 16)) & _M32
    b ^= b >> 16
    h = ((c ^ 0xFA8DDCB5) * 0xAC4C06B9) & _M32
    d = (_MIX_L * d - _MIX_R * (h ^ h >> 16)) & _M32
    d ^= d >> 16
    h = ((d ^ 0xAC4C06B9) * 0x26FF5A8D) & _M32
    a = (_MIX_L * a - _MIX_R * (h ^ h >> 16)) & _M32
    a ^= a >> 16
    h = ((d ^ 0x26FF5A8D) * 0x0E554A71) & _M32
    b = (_MIX_L * b - _MIX_R * (h ^ h >> 16)) & _M32
    b ^= b >> 16
    h = ((d ^ 0x0E554A71) * 0x78C50DA5) & _M32
    c = (_MIX_L * c - _MIX_R * (h ^ h >> 16)) & _M32
    return a, b, c ^ c >> 16, d


def seed_env(env: Any, seed: int | None) -> np.random.Generator:
    """Seed ``env.np_random`` as ``gymnasium.Env.reset(seed=seed)`` would, and return it.

    ``seed=None`` keeps the current generator (gymnasium's own lazy one when there is none yet). A seed in
    ``[0, 2**32)`` re-seeds the env's PCG64 generator in place (state from :func:`pcg64_state`, no buffered half-word),
    creating it on first use; anything else goes through ``gymnasium.utils.seeding.np_random``, which also validates
    it. Either way ``env.np_random`` afterwards draws the numbers of gymnasium's freshly seeded generator.
    """
    if seed is None:
        current: np.random.Generator = env.np_random
        return current
    if type(seed) is not int or not 0 <= seed <= _M32:
        fresh, env._np_random_seed = seeding.np_random(seed)
        env._np_random = fresh
        return fresh
    generator: np.random.Generator | None = getattr(env, "_fast_rng_generator", None)
    if generator is None:
        generator = np.random.Generator(np.random.PCG64(seed))
        env._fast_rng_generator = generator
    else:
        state, inc = pcg64_state(seed)
        generator.bit_generator.state = {"bit_generator": "PCG64", "state": {"state": state, "inc": inc},
                                         "has_uint32": 0, "uinteger": 0}
    env._np_random, env._np_random_seed = generator, seed
    return generator


class RawDraws:
    """Draws of a numpy ``Generator`` (PCG64) made in Python from its raw 64-bit outputs, exactly as numpy makes them.

    A double (``Generator.random``) is ``(raw >> 11) * 2**-53`` and does not touch the 32-bit buffer. A bounded
    integer in ``[0, rng]`` with ``rng < 2**32`` (``Generator.integers``, and each step of ``Generator.choice``) is
    Lemire's multiply-and-reject on a 32-bit word; numpy splits each raw output into two such words, the low half
    first, and keeps the high half in the bit generator for the next bounded draw. :meth:`close` writes that
    buffer back, so the generator continues exactly as if numpy had made the draws.

    :param buffered: the buffered half-word at the start (None: none), when the caller knows it (a freshly seeded
        generator has none); left out, it is read from the generator's state.
    """

    __slots__ = ("_bitgen", "_buffer", "_start_buffer")

    _UNKNOWN: Any = object()

    def __init__(self, generator: np.random.Generator, buffered: int | None | Any = _UNKNOWN) -> None:
        self._bitgen: Any = generator.bit_generator
        if buffered is RawDraws._UNKNOWN:
            state = self._bitgen.state
            buffered = int(state["uinteger"]) if state["has_uint32"] else None
        self._buffer: int | None = buffered
        self._start_buffer = buffered

    def raw(self, count: int) -> list[int]:
        """``count`` raw 64-bit outputs."""
        words: list[int] = self._bitgen.random_raw(count).tolist()
        return words

    @property
    def buffered(self) -> bool:
        """Whether a 32-bit half-word is buffered (the next bounded draw takes it instead of a raw output)."""
        return self._buffer is not None

    def _uint32(self, raw: list[int]) -> int:
        """The next 32-bit word: the buffered half, else the low half of the next raw output (``raw`` first, which
        the caller prefetched, then fresh ones)."""
        if self._buffer is not None:
            value, self._buffer = self._buffer, None
            return value
        word = raw.pop() if raw else int(self._bitgen.random_raw())
        self._buffer = word >> 32
        return word & _M32

    def bounded(self, rng: int, raw: list[int] | None = None) -> int:
        """An integer in ``[0, rng]`` (``0 <= rng < 2**32 - 1``), as ``Generator.integers(rng + 1)`` draws it (numpy
        draws nothing for ``rng == 0``).

        :param raw: prefetched raw outputs to take words from first, in reverse order (``list.pop()`` takes the
            next); the caller gets back whatever is left unused.
        """
        if rng == 0:
            return 0
        raw = [] if raw is None else raw
        excl = rng + 1
        product = self._uint32(raw) * excl
        low = product & _M32
        if low < excl:
            threshold = (_M32 - rng) % excl
            while low < threshold:
                product = self._uint32(raw) * excl
                low = product & _M32
        return product >> 32

    def choice2(self, n: int, raw: list[int] | None = None) -> tuple[int, int]:
        """Two distinct integers in ``[0, n)`` (``2 <= n <= 10_000``), as ``Generator.choice(n, 2, replace=False)``
        draws them: Floyd's algorithm, then a shuffle of the pair."""
        first = self.bounded(n - 2, raw)
        second = self.bounded(n - 1, raw)
        if second == first:
            second = n - 1
        if self.bounded(1, raw) == 0:
            return second, first
        return first, second

    def close(self) -> None:
        """Write the buffered half-word back into the bit generator when it differs from the one at the start."""
        if self._buffer == self._start_buffer:
            return
        state = self._bitgen.state
        state["has_uint32"] = int(self._buffer is not None)
        state["uinteger"] = self._buffer or 0
        self._bitgen.state = state


class Pcg64Doubles:
    """``np.random.Generator(np.random.PCG64(seed)).random()`` doubles in plain Python, for ``0 <= seed < 2**32``
    (PCG64: a 128-bit linear congruential step, then the XSL-RR output of the new state)."""

    __slots__ = ("_inc", "_state")

    def __init__(self, seed: int) -> None:
        self._state, self._inc = pcg64_state(seed)

    def next_double(self) -> float:
        """The next ``Generator.random()`` value."""
        state = (self._state * _PCG_MULT + self._inc) & _M128
        self._state = state
        rot = state >> 122
        word = ((state >> 64) ^ state) & _M64
        word = ((word >> rot) | (word << (64 - rot))) & _M64
        return (word >> 11) / DOUBLE_SCALE
