"""The shared thread pools of the sandbox (one per size); each thread drives its own sandbox process.

Part of :mod:`ragen_plugins_envs.sandbox`, whose docstring describes the design; import public names from there.
"""

from __future__ import annotations

import concurrent.futures
import threading

_POOLS: dict[int, concurrent.futures.ThreadPoolExecutor] = {}
_POOL_LOCK = threading.Lock()
_IN_POOL = threading.local()


def _mark_pool_thread() -> None:
    _IN_POOL.active = True


def shared_pool(size: int) -> concurrent.futures.ThreadPoolExecutor:
    """The shared pool of ``size`` threads (made on first use)."""
    with _POOL_LOCK:
        pool = _POOLS.get(size)
        if pool is None:
            pool = concurrent.futures.ThreadPoolExecutor(max_workers=size, thread_name_prefix="ragen-sandbox",
                                                         initializer=_mark_pool_thread)
            _POOLS[size] = pool
        return pool


def in_pool_thread() -> bool:
    """Whether this thread is one of a shared pool's (work submitted from it runs inline instead)."""
    return bool(getattr(_IN_POOL, "active", False))
