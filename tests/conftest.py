"""Fixtures shared by the whole suite (none of them autouse: the core's zero-plugin tests stay untouched), and the
settings of a parallel run (pytest-xdist; ``make test`` runs ``-n 2 --dist worksteal``).

Under xdist:

- each worker gets an equal share of the cores for torch's intra-op threads (``OMP_NUM_THREADS``, set before any test
  imports torch, and inherited by the processes tests start): two workers each running ops on 2 threads on the
  2-core machine would oversubscribe it, and an op on 2 threads waits until both get scheduled;
- the slowest modules come first (:data:`SLOWEST_MODULES`), so that the workers end together.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest


def _under_xdist() -> bool:
    return "PYTEST_XDIST_WORKER" in os.environ


def worker_threads() -> int | None:
    """torch intra-op threads for one pytest-xdist worker: the usable cores divided among the workers, at least 1;
    None outside xdist, or when ``OMP_NUM_THREADS`` is already set (by the user, or inherited by a subprocess)."""
    if not _under_xdist() or "OMP_NUM_THREADS" in os.environ:
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores // max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)))


def pytest_configure(config: pytest.Config) -> None:
    threads = worker_threads()
    if threads is None:
        return
    os.environ["OMP_NUM_THREADS"] = str(threads)
    if "torch" in sys.modules:  # already imported (by a plugin): the variable is read at import, so set it too
        sys.modules["torch"].set_num_threads(threads)


#: the modules that take longest, heaviest first, with their seconds on one worker of ``make test`` on the 2-core
#: machine: under xdist they run first (the rest keep their order), so that the other worker balances the end with
#: the many short tests instead of idling while a 3-minute test started last finishes. A stale entry costs balance,
#: nothing else.
SLOWEST_MODULES = (
    "tests/test_fresh_install.py",  # 330 s: every wheel built, 7 venvs installed and tested
    "tests/test_lint.py",  # 210 s: mypy on every plugin, and on the core with --strict
    "tests/torch/test_learning.py",  # 210 s: two learning runs
    "tests/torch/test_trainer.py",  # 125 s
    "tests/verl/test_registration.py",  # 75 s: a Ray process
    "tests/torch/test_models.py",  # 55 s: SmolLM2's conversion
    "tests/envs/test_deepcoder.py",  # 45 s: HumanEval in the sandbox
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _under_xdist():
        return  # one process: the order does not change the wall time; pytest's stays
    rank = {module: i for i, module in enumerate(SLOWEST_MODULES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: modules stay whole


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
