"""RAGEN's early-stop rules, as a small stateful object a trainer feeds each step's metrics.

``update(metrics)`` returns a sentence saying why to stop, or None:

- **reward-variance collapse**: the in-group reward std (``rollout/in_group_reward_std``) of the first
  ``std_baseline_steps`` (10) steps that report it gives a baseline (their mean); afterwards, ``std_patience`` (10)
  consecutive steps below ``std_fraction`` (10%) of that baseline stop the run. A baseline of 0 never triggers
  (nothing can fall below it).
- **validation failure**: ``val_patience`` (5) consecutive validations (steps whose metrics hold ``val/success``)
  below ``val_threshold`` (1%) stop the run.

Steps without the metric leave the corresponding rule untouched. The trainer's own rule for consecutive empty
steps after filtering (``trainer.max_empty_steps``) is separate. :meth:`EarlyStop.state_dict` /
:meth:`EarlyStop.load_state_dict` carry the state across a resume; replaying ``metrics.jsonl`` through ``update``
gives the same state.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["EarlyStop"]


class EarlyStop:
    """The early-stop rules (see the module docstring); one instance per run."""

    def __init__(self, *, std_key: str = "rollout/in_group_reward_std", std_fraction: float = 0.1,
                 std_baseline_steps: int = 10, std_patience: int = 10, val_key: str = "val/success",
                 val_threshold: float = 0.01, val_patience: int = 5) -> None:
        if not 0.0 < std_fraction < 1.0:
            raise ValueError(f"std_fraction must be in (0, 1): {std_fraction}")
        if std_baseline_steps < 1 or std_patience < 1 or val_patience < 1:
            raise ValueError("std_baseline_steps, std_patience and val_patience must be >= 1")
        self.std_key, self.std_fraction = std_key, std_fraction
        self.std_baseline_steps, self.std_patience = std_baseline_steps, std_patience
        self.val_key, self.val_threshold, self.val_patience = val_key, val_threshold, val_patience
        self.early_stds: list[float] = []
        self.low_std_steps = 0
        self.low_val_count = 0

    @property
    def baseline(self) -> float | None:
        """The mean reward std of the first ``std_baseline_steps`` steps, once they are in."""
        if len(self.early_stds) < self.std_baseline_steps:
            return None
        return math.fsum(self.early_stds) / len(self.early_stds)

    def update(self, metrics: Mapping[str, Any]) -> str | None:
        """Feed one step's metrics; return the reason to stop, or None to go on."""
        reasons = []
        std = _finite(metrics.get(self.std_key))
        if std is not None:
            baseline = self.baseline
            if baseline is None:
                self.early_stds.append(std)
            elif std < self.std_fraction * baseline:
                self.low_std_steps += 1
                if self.low_std_steps >= self.std_patience:
                    reasons.append(
                        f"reward std ({self.std_key}) stayed below {self.std_fraction:.0%} of its first-"
                        f"{self.std_baseline_steps}-step mean ({baseline:.4g}) for {self.low_std_steps} consecutive "
                        f"steps: the policy gets no learning signal")
            else:
                self.low_std_steps = 0
        val = _finite(metrics.get(self.val_key))
        if val is not None:
            self.low_val_count = self.low_val_count + 1 if val < self.val_threshold else 0
            if self.low_val_count >= self.val_patience:
                reasons.append(f"validation success ({self.val_key}) stayed below {self.val_threshold:.0%} for "
                               f"{self.low_val_count} consecutive validations")
        return "; ".join(reasons) or None

    def state_dict(self) -> dict[str, Any]:
        """The rule state, JSON-friendly (for checkpoints)."""
        return {"early_stds": list(self.early_stds), "low_std_steps": self.low_std_steps,
                "low_val_count": self.low_val_count}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        self.early_stds = [float(v) for v in state.get("early_stds", [])]
        self.low_std_steps = int(state.get("low_std_steps", 0))
        self.low_val_count = int(state.get("low_val_count", 0))


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)
