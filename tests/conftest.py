"""Fixtures shared by the whole suite (none of them autouse: the core's zero-plugin tests stay untouched)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """torch's intra-op thread count at 1 for a module's tests, and ``OMP_NUM_THREADS=1`` for the processes they
    start; both restored afterwards.

    For the tests that train or serve the tiny model (hidden size 128): its ops are too small to gain from a second
    thread, and on a busy machine every parallel op waits until both of its threads get scheduled. Measured on the
    2-core machine under load (load average 4): a two-step training run took 12.4 s with torch's default 2 threads
    and 3.4 s with 1. Results do not depend on it (each test compares runs made under the same setting).
    """
    try:
        import torch
    except ImportError:  # a light install: nothing of torch's to set, the tests needing it skip themselves
        torch = None
    before = torch.get_num_threads() if torch is not None else None
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        if torch is not None:
            torch.set_num_threads(1)
        try:
            yield
        finally:
            if torch is not None:
                torch.set_num_threads(before)
