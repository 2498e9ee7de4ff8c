"""Two-armed bandit whose arms are named after a low-risk and a high-risk profession (RAGEN's Bandit).

Each episode shows two arms, e.g. ``Teacher`` and ``Trader``. The low-risk arm always pays ``low_reward`` (0.1);
the high-risk arm pays ``high_reward`` (1.0) with probability ``high_prob`` (0.25) and 0 otherwise, so its expected
payout (0.25) is higher. The agent has to infer from the names alone which arm is which; success means it pulled
the high-risk arm. The episode is a single turn.

Decisions (where RAGEN is silent or loose):

- ``reset(seed)`` draws the profession pair and the display order from ``self.np_random`` only, so every trajectory
  of a group (same seed) sees the same pair in the same order, in any process. The payout of the high-risk arm is
  drawn from the same stream at the pull, so the same seed and the same action also give the same reward (the
  env contract demands replayable episodes); the payout probability holds across seeds.
- The action is an arm's name, matched case-insensitively after stripping whitespace. Anything else is invalid:
  reward 0, the state is unchanged and the episode continues (the trajectory's action limit, 1, ends it).
- ``action_names`` lists every arm name of the split (alphabetically, so it reveals nothing) before the first
  reset, then the current episode's two names in display order.
- A step after the pull (or before any reset) is invalid, reward 0, ``terminated=True``.
- ``split="train"`` uses 12 profession pairs, ``split="test"`` 8 held-out pairs that share no name with them.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from ragen_core.env import TextEnv
from ragen_core.validators import number, one_of

__all__ = ["TEST_PAIRS", "TRAIN_PAIRS", "BanditConfig", "BanditEnv"]

#: (low-risk, high-risk) profession pairs used for training
TRAIN_PAIRS: tuple[tuple[str, str], ...] = (
    ("Teacher", "Trader"),
    ("Librarian", "Gambler"),
    ("Accountant", "Speculator"),
    ("Nurse", "Stuntman"),
    ("Clerk", "Entrepreneur"),
    ("Baker", "Prospector"),
    ("Postman", "Daredevil"),
    ("Pharmacist", "Wildcatter"),
    ("Cashier", "Adventurer"),
    ("Dentist", "Inventor"),
    ("Tailor", "Racer"),
    ("Secretary", "Influencer"),
)

#: held-out (low-risk, high-risk) pairs for evaluation; no name is shared with :data:`TRAIN_PAIRS`
TEST_PAIRS: tuple[tuple[str, str], ...] = (
    ("Plumber", "Explorer"),
    ("Janitor", "Mountaineer"),
    ("Receptionist", "Freelancer"),
    ("Auditor", "Stockbroker"),
    ("Bookkeeper", "Bettor"),
    ("Electrician", "Founder"),
    ("Archivist", "Astronaut"),
    ("Registrar", "Bullfighter"),
)

_INSTRUCTION = (
    "You are playing a two-armed bandit game. Goal: maximise your reward by choosing which arm to pull. "
    "There are two arms, each named after a profession and shown in the state. Each arm has its own reward "
    "distribution, related to its name: think about what the profession's name suggests about how risky and how "
    "rewarding it is. You pull exactly one arm: answer with the arm's name only, e.g. <answer>Teacher</answer>."
)


@attrs.define
class BanditConfig:
    """Options of :class:`BanditEnv` (RAGEN's defaults).

    :ivar split: ``"train"`` (12 profession pairs) or ``"test"`` (8 held-out pairs).
    :ivar low_reward: the low-risk arm's fixed payout.
    :ivar high_reward: the high-risk arm's payout when it pays.
    :ivar high_prob: probability that the high-risk arm pays.
    """

    split: str = attrs.field(default="train", validator=one_of("train", "test"))
    low_reward: float = attrs.field(default=0.1, validator=number())
    high_reward: float = attrs.field(default=1.0, validator=number())
    high_prob: float = attrs.field(default=0.25, validator=number(0, 1))


class BanditEnv(TextEnv):
    """RAGEN's two-armed profession bandit (single turn). See the module docstring for the rules."""

    config_cls: ClassVar[type] = BanditConfig
    config: BanditConfig

    def __init__(self, config: BanditConfig | None = None, render_mode: str | None = "ansi", **options: Any) -> None:
        super().__init__(config, render_mode, **options)
        self.pairs: tuple[tuple[str, str], ...] = TRAIN_PAIRS if self.config.split == "train" else TEST_PAIRS
        self.instruction = _INSTRUCTION
        self.action_names = tuple(sorted(name for pair in self.pairs for name in pair))
        self.legend = {}
        self.max_actions_per_traj = 1
        self._low: str = ""
        self._high: str = ""
        self._arms: tuple[str, str] | None = None
        self._pulled: str | None = None
        self._payout: float = 0.0
        self._done = True

    # ------------------------------------------------------------------------------------------ gymnasium API

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Pick the profession pair and the arm order from the seed."""
        super().reset(seed=seed)
        index = int(self.np_random.integers(len(self.pairs)))
        self._low, self._high = self.pairs[index]
        flip = bool(self.np_random.integers(2))
        self._arms = (self._high, self._low) if flip else (self._low, self._high)
        self.action_names = self._arms
        self._pulled = None
        self._payout = 0.0
        self._done = False
        return self.render(), {"pair_index": index}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Pull the arm named ``action`` (case-insensitive); anything else is invalid (reward 0)."""
        if self._done or self._arms is None:
            return self.render(), 0.0, True, False, self._info(valid=False)
        arm = self._match(action)
        if arm is None:
            return self.render(), 0.0, False, False, self._info(valid=False)
        if arm == self._low:
            reward = self.config.low_reward
        else:
            pays = float(self.np_random.random()) < self.config.high_prob
            reward = self.config.high_reward if pays else 0.0
        self._pulled = arm
        self._payout = float(reward)
        self._done = True
        return self.render(), float(reward), True, False, self._info(valid=True)

    def render(self) -> str:
        """The two arms in display order and, after the pull, its result."""
        if self._arms is None:
            return "No episode yet: call reset()."
        first, second = self._arms
        text = f"Arms: {first}, {second}. Pull one arm by answering with its name."
        if self._pulled is not None:
            text += f"\nYou pulled {self._pulled} and received {self._payout:g}."
        return text

    def oracle_action(self) -> str | None:
        """The high-risk arm (higher expected payout), or None when the episode is over."""
        return None if self._done or self._arms is None else self._high

    # ------------------------------------------------------------------------------------------ helpers

    @property
    def arms(self) -> tuple[str, str] | None:
        """The current episode's arm names in display order (None before the first reset)."""
        return self._arms

    @property
    def high_risk_arm(self) -> str | None:
        """The current episode's high-risk arm (None before the first reset)."""
        return self._high if self._arms is not None else None

    def _match(self, action: Any) -> str | None:
        if not isinstance(action, str) or self._arms is None or len(action) > 200:
            return None
        wanted = action.strip().casefold()
        for arm in self._arms:
            if arm.casefold() == wanted:
                return arm
        return None

    def _info(self, *, valid: bool) -> dict[str, Any]:
        chose_high = valid and self._pulled == self._high
        return {
            "success": bool(chose_high),
            "action_is_valid": bool(valid),
            "action_is_effective": bool(valid),
            "chose_high_risk": float(chose_high),
            "payout": float(self._payout) if valid else 0.0,
        }
