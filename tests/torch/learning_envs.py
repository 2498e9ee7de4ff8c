"""Clean-signal tasks for the learning regression tests (a test-only plugin, loaded by tests/torch/test_learning.py).

``pair``: a two-turn task whose reward comes only after the second turn but is decided by the first. Turn 1 shows
the names ``Left`` and ``Right`` (in an order drawn from the seed); the answer must be one of them. Turn 2 asks
again, with no reward and no hint of whether the first answer was right; its answer does not matter (as long as it
is a valid name, which ends the episode). The episode then pays 1.0 when the turn-1 answer was ``Right``, else 0.0.
Chance is 0.5; a policy learns it only if the trajectory's credit reaches the first turn's tokens.
"""

from __future__ import annotations

from typing import Any

from ragen_core import hookimpl
from ragen_core.env import TextEnv

__all__ = ["PairEnv", "RANKING", "ragen_register_envs"]

#: best first
RANKING = ("Right", "Left")


class PairEnv(TextEnv):
    """See the module docstring."""

    instruction = ("Two names are shown; pick the better one. The game has two turns; it pays only at the end, and "
                   "only for the answer of the first turn.")
    legend: dict[str, str] = {}
    max_actions_per_traj = 2

    def __init__(self, config: Any = None, render_mode: str | None = "ansi", **options: Any) -> None:
        super().__init__(config, render_mode, **options)
        self.action_names = RANKING
        self._pair: tuple[str, str] = RANKING[:2]
        self._first: str | None = None
        self._turn, self._done = 0, True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        i, j = (int(x) for x in self.np_random.choice(len(RANKING), size=2, replace=False))
        self._pair = (RANKING[i], RANKING[j])
        self.action_names = self._pair
        self._first, self._turn, self._done = None, 0, False
        return self.render(), {}

    def render(self) -> str:
        if self._turn == 0:
            return f"Names: {self._pair[0]}, {self._pair[1]}. Pick one."
        return "Answer again with either name (it does not matter)."

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        name = {n.lower(): n for n in self._pair}.get(str(action).strip().lower())
        if self._done or name is None:
            info = {"success": False, "action_is_valid": False, "action_is_effective": False}
            return self.render(), 0.0, self._done, False, info
        self._turn += 1
        if self._turn == 1:
            self._first = name
            return self.render(), 0.0, False, False, {"success": False, "action_is_valid": True,
                                                      "action_is_effective": True}
        self._done = True
        won = self._first == min(self._pair, key=RANKING.index)
        return "Done.", float(won), True, False, {"success": won, "action_is_valid": True, "action_is_effective": True}


@hookimpl
def ragen_register_envs(registry: Any) -> None:
    registry.register("pair", "tests.torch.learning_envs:PairEnv",
                      description="two turns; the final reward is decided by the first turn (test-only)")
