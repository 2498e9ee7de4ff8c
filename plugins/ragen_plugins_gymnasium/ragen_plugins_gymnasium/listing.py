"""The members of the ``gym`` namespace: the registered gymnasium ids the adapter can play, found at listing time.

:func:`runnable_ids` goes through ``gymnasium.registry`` in two stages:

1. a screen that imports nothing: the source of each entry point's module is located without running any package
   ``__init__`` and searched; the module passes when it names the ``"ansi"`` render mode or assigns an
   ``observation_space`` built by ``Text``, ``Discrete``, ``Tuple``, ``MultiDiscrete`` or ``MultiBinary``. The
   MuJoCo, Box2D and classic-control modules (``Box`` observations, no "ansi") fail it, so their heavy optional
   packages (mujoco, Box2D, jax) are never imported. An entry point that is not a ``"module:Class"`` string is
   kept only when it is a class (gymnasium's error stubs for removed versions and ragen's own ``ragen/*``
   factories are functions);
2. each id that passes is made as a :class:`~ragen_plugins_gymnasium.env.GymnasiumEnv` and reset once; an id whose
   entry point fails to import (a missing optional package), whose spaces the adapter refuses, or which fails in any
   other way is skipped.

The screen may miss an env whose class takes its spaces or render modes from a base class in another module;
``gym.<id>`` (or ``env: gymnasium`` with ``id``) still plays any id the adapter can run, listed or not.
The result is cached per set of registered ids. Measured on the 2-core machine with gymnasium 1.4 and none of its
optional packages: about 0.2 s for the 63 ids, 6 listed.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import re
import sys
import warnings
from typing import Any

__all__ = ["runnable_ids", "screen_source"]

_ANSI = re.compile(r"""["']ansi["']""")
_OBSERVATION_SPACE = re.compile(r"observation_space\s*(?::[^=\n]*)?=\s*(?:[\w.]*\.)?"
                                r"(?:Text|Discrete|Tuple|MultiDiscrete|MultiBinary)\(")


def runnable_ids() -> list[str]:
    """The sorted ids of ``gymnasium.registry`` that the adapter plays (see the module docstring)."""
    import gymnasium

    return list(_runnable(tuple(sorted(gymnasium.registry))))


@functools.lru_cache(maxsize=4)
def _runnable(ids: tuple[str, ...]) -> tuple[str, ...]:
    import gymnasium

    return tuple(i for i in ids if i in gymnasium.registry and _may_run(gymnasium.registry[i].entry_point)
                 and _plays(i))


def _may_run(entry_point: Any) -> bool:
    """Stage 1: whether the entry point may be an env the adapter plays, judged without importing its module."""
    if not isinstance(entry_point, str):
        return isinstance(entry_point, type)
    return _screen_module(entry_point.partition(":")[0])


@functools.lru_cache(maxsize=256)
def _screen_module(module: str) -> bool:
    source = _module_source(module)
    return True if source is None else screen_source(source)


def screen_source(source: str) -> bool:
    """Whether module source text names the "ansi" render mode (a quoted ``"ansi"``) or assigns an
    ``observation_space`` built by one of ``Text``, ``Discrete``, ``Tuple``, ``MultiDiscrete``, ``MultiBinary``.

    A text search, not a parse: a false positive only costs making the env once (stage 2 decides)."""
    return bool(_ANSI.search(source) or _OBSERVATION_SPACE.search(source))


def _module_source(name: str) -> str | None:
    """The source of module ``name``, found without importing it or its parent packages; None when it cannot be
    read (a compiled or zipped module: the screen then lets it pass)."""
    loaded = sys.modules.get(name)
    origin = getattr(loaded, "__file__", None) if loaded is not None else _locate(name)
    if not origin or not str(origin).endswith(".py"):
        return None
    try:
        with open(origin, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _locate(name: str) -> str | None:
    """The file of module ``name``: the top-level package is found (not imported), then each part in its parent's
    folder."""
    parts = name.split(".")
    try:
        spec = importlib.util.find_spec(parts[0]) if parts[0] not in sys.modules else sys.modules[parts[0]].__spec__
    except (ImportError, ValueError):
        return None
    for part in parts[1:]:
        if spec is None or not spec.submodule_search_locations:
            return None
        spec = importlib.machinery.PathFinder.find_spec(part, list(spec.submodule_search_locations))
    return spec.origin if spec is not None else None


def _plays(env_id: str) -> bool:
    """Stage 2: whether the adapter makes and resets ``env_id`` without an error."""
    from ragen_plugins_gymnasium.env import GymnasiumConfig, GymnasiumEnv

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            env = GymnasiumEnv(GymnasiumConfig(id=env_id))
        except Exception:  # noqa: BLE001 - any failure to make it means "not listed"
            return False
        try:
            env.reset(seed=0)
            return True
        except Exception:  # noqa: BLE001
            return False
        finally:
            env.close()
