"""What the Lean and Coq env tests share: fuzzing a tactic-proof env with its own reward checks."""

from __future__ import annotations

import math
from typing import Any

from ragen_core.checks import fuzz_env

#: the rewards a step can earn under the default rewards: accepted, accepted without a new state, rejected, accepted
#: on the last step, the proof completed
STEP_REWARDS = (0.9, -0.1, -1.1, -2.1, 10.9)


def fuzz_prover(env: Any, seed: int, actions: list[str]) -> None:
    """:func:`~ragen_core.checks.fuzz_env` (no step raises, the contract's types, an invalid action changes
    nothing), plus: the prover never fails, an invalid action costs -1.1, every step earns one of
    :data:`STEP_REWARDS`."""

    def check(action: str, step: tuple[Any, ...], before: str) -> None:
        _obs, reward, _terminated, _truncated, info = step
        assert not info["prover_error"], info
        if not info["action_is_valid"]:
            assert math.isclose(reward, -1.1) and env.render() == before
        else:
            assert any(math.isclose(reward, r) for r in STEP_REWARDS), (action, reward)

    fuzz_env(env, actions, seed=seed % 1000, check=check)
