"""Shared helpers of the veRL plugin tests.

The tests that need veRL skip without it, except when ``RAGEN_REQUIRE_VERL=1`` (CI sets it): then a missing veRL
fails them, so CI can never pass by skipping.
"""

from __future__ import annotations

import importlib.util
import os
import random
from typing import Any

import pytest

from ragen_core.config import RolloutConfig
from ragen_core.data import RolloutBatch
from ragen_core.starpo.chat import ChatCodec, TextTokenizer
from ragen_core.starpo.rollout import ScriptedPolicy, make_episodes, run_lockstep

HAVE_VERL = importlib.util.find_spec("verl") is not None


def require_verl() -> None:
    """Skip (or fail, under ``RAGEN_REQUIRE_VERL=1``) when veRL is not installed."""
    if HAVE_VERL:
        return
    if os.environ.get("RAGEN_REQUIRE_VERL") == "1":
        pytest.fail("veRL is not installed but RAGEN_REQUIRE_VERL=1: pip install 'ragen[verl]' (in a clone: make setup)")
    pytest.skip("veRL is not installed (pip install 'ragen[verl]'; in a clone: make setup)")


@pytest.fixture
def verl_available() -> None:
    require_verl()


@pytest.fixture(scope="session")
def registries() -> Any:
    from ragen_core.plugins import build_plugin_manager, collect_registries

    return collect_registries(build_plugin_manager())


def rollout(registries: Any, *, env: str = "sokoban", groups: int = 3, group_size: int = 4, seed: int = 0,
            max_turn: int = 3, use_turn_scores: bool = False, kind: str = "random") -> RolloutBatch:
    """A real multi-turn batch: the core loop with a scripted policy (character tokens, log-probs 0 replaced by
    random values so they are distinguishable)."""
    cfg = RolloutConfig(env_groups=groups, group_size=group_size, max_turn=max_turn, use_turn_scores=use_turn_scores)
    codec = ChatCodec(TextTokenizer())
    episodes = make_episodes(registries.envs, [(env, groups, {})], seeds=[seed + i for i in range(groups)],
                             group_size=group_size, config=cfg, codec=codec)
    batch = run_lockstep(episodes, ScriptedPolicy.for_episodes(episodes, kind, seed=seed))
    rng = random.Random(seed)
    for t in batch:
        t.mean_entropy = rng.uniform(0, 2)
        for turn in t.turns:
            turn.logprobs = [-rng.random() for _ in turn.response_ids]
    return batch
