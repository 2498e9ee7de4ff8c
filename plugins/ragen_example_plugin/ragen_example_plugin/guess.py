"""Guess the number: a small multi-turn env with free-form actions."""

from __future__ import annotations

from typing import Any

import attrs

from ragen_core.env import TextEnv
from ragen_core.validators import integer


@attrs.define
class GuessConfig:
    """``high``: numbers are 1..high; ``max_guesses``: guesses per episode."""

    high: int = attrs.field(default=16, validator=integer(2))
    max_guesses: int = attrs.field(default=5, validator=integer(1))


class GuessNumberEnv(TextEnv):
    """Each guess gets "higher", "lower" or "correct". +1 for the right number; a guess that is not a whole
    number in range is invalid (reward -0.1, nothing changes)."""

    config_cls = GuessConfig

    def __init__(self, config: Any = None, render_mode: str | None = "ansi", **options: Any) -> None:
        super().__init__(config, render_mode, **options)
        self.instruction = f"Find the hidden whole number between 1 and {self.config.high}. Answer with one number."
        self.action_names = None  # free-form: the answer is a number
        self.legend = {}
        self.max_actions_per_traj = self.config.max_guesses
        self._secret = 1
        self._low, self._high = 1, self.config.high
        self._history: list[str] = []
        self._done = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._secret = int(self.np_random.integers(1, self.config.high + 1))
        self._low, self._high = 1, self.config.high
        self._history = []
        self._done = False
        return self.render(), {}

    def render(self) -> str:
        lines = [f"The number is between 1 and {self.config.high}."]
        lines += self._history or ["No guesses yet."]
        return "\n".join(lines)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        text = action.strip() if isinstance(action, str) else ""
        guess = int(text) if text.isascii() and text.isdigit() and len(text) < 10 else None
        info: dict[str, Any]
        if self._done or guess is None or not 1 <= guess <= self.config.high:
            info = {"success": self._done, "action_is_valid": False, "action_is_effective": False}
            return self.render(), 0.0 if self._done else -0.1, self._done, False, info
        if guess == self._secret:
            self._history.append(f"{guess}: correct")
            self._done = True
        elif guess < self._secret:
            self._history.append(f"{guess}: higher")
            self._low = max(self._low, guess + 1)
        else:
            self._history.append(f"{guess}: lower")
            self._high = min(self._high, guess - 1)
        info = {"success": self._done, "action_is_valid": True, "action_is_effective": True,
                "range_left": float(self._high - self._low + 1)}
        return self.render(), 1.0 if self._done else 0.0, self._done, False, info

    def oracle_action(self) -> str | None:
        return None if self._done else str((self._low + self._high) // 2)
