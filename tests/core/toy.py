"""Toy components for the core's own tests (no built-in plugin is involved)."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from ragen_core import hookimpl
from ragen_core.env import TextEnv
from ragen_core.protocols import AdvantageInput, AdvantageOutput, DiagnosticContext, FilterResult


@attrs.define
class CounterConfig:
    """Reach ``target`` from 0 with Inc/Dec."""

    target: int = attrs.field(default=3, validator=attrs.validators.ge(1))
    max_actions: int = attrs.field(default=6, validator=attrs.validators.ge(1))
    random_start: bool = False


class CounterEnv(TextEnv):
    """A counter: Inc/Dec until it equals the target; +1 on reaching it, -0.1 for invalid actions."""

    config_cls = CounterConfig

    def __init__(self, config: Any = None, render_mode: str | None = "ansi", **options: Any) -> None:
        super().__init__(config, render_mode, **options)
        self.instruction = f"Move the counter to {self.config.target}."
        self.action_names = ("Inc", "Dec")
        self.legend = {"n": "the counter"}
        self.max_actions_per_traj = self.config.max_actions
        self.value = 0
        self.done = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.value = int(self.np_random.integers(-2, 3)) if self.config.random_start else 0
        self.done = False
        return self.render(), {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        key = action.strip().lower() if isinstance(action, str) else ""
        if self.done or key not in ("inc", "dec"):
            info = {"success": self.value == self.config.target, "action_is_valid": False,
                    "action_is_effective": False}
            return self.render(), -0.1 if not self.done else 0.0, self.done, False, info
        self.value += 1 if key == "inc" else -1
        self.done = self.value == self.config.target
        info = {"success": self.done, "action_is_valid": True, "action_is_effective": True,
                "distance": float(abs(self.config.target - self.value))}
        return self.render(), 1.0 if self.done else 0.0, self.done, False, info

    def render(self) -> str:
        return f"n = {self.value}"

    def oracle_action(self) -> str | None:
        if self.done:
            return None
        return "Inc" if self.value < self.config.target else "Dec"


@attrs.define
class KeepTopConfig:
    """Keep the ``k`` groups with the highest mean score."""

    k: int = attrs.field(default=2, validator=attrs.validators.ge(1))


class KeepTopFilter:
    config_cls = KeepTopConfig

    def __init__(self, config: KeepTopConfig) -> None:
        self.config = config

    def select(self, batch: Any) -> FilterResult:
        groups = batch.groups()
        scores = {g: sum(t.score for t in ts) / len(ts) for g, ts in groups.items()}
        order = sorted(groups, key=lambda g: (-scores[g], list(groups).index(g)))
        kept = tuple(order[: self.config.k])
        return FilterResult(kept, {"rollout/filter_kept_count": float(len(kept))})


class ReturnToGo:
    """Advantage = sum of future rewards over generated tokens (a reference REINFORCE estimator)."""

    needs_critic = False

    def __init__(self, config: Any = None) -> None:
        self.config = config

    def compute(self, inputs: AdvantageInput) -> AdvantageOutput:
        r = np.asarray(inputs.token_rewards, dtype=float) * inputs.response_mask
        rtg = np.flip(np.cumsum(np.flip(r, axis=1), axis=1), axis=1) * inputs.response_mask
        return AdvantageOutput(advantages=rtg, returns=rtg.copy())


class MeanScoreDiagnostic:
    def __init__(self, config: Any = None) -> None:
        self.config = config

    def compute(self, ctx: DiagnosticContext) -> dict[str, float]:
        scores = [t.score for t in ctx.batch]
        return {"toy/score_mean": float(np.mean(scores)) if scores else 0.0}


@attrs.define
class ToyTrainerConfig:
    steps: int = attrs.field(default=2, validator=attrs.validators.ge(1))


class ToyTrainer:
    """A 'trainer' that rolls out with the oracle: proves ``ragen train`` dispatches to the configured trainer."""

    config_cls = ToyTrainerConfig

    def __init__(self, config: ToyTrainerConfig) -> None:
        self.config = config

    def train(self, run: Any) -> dict[str, Any]:
        from ragen_core.runner import run_scripted

        return run_scripted(run, policy="oracle", steps=self.config.steps, progress=False)

    def evaluate(self, run: Any) -> dict[str, Any]:
        from ragen_core.runner import run_scripted

        return run_scripted(run, policy="random", steps=1, progress=False)


class ToyPlugin:
    """Registers every toy component (as a third-party plugin would)."""

    @hookimpl
    def ragen_register_envs(self, registry: Any) -> None:
        registry.register("counter", "tests.core.toy:CounterEnv", description="count to a target",
                          guide={"success": "the counter equals the target.", "rules": "Inc adds one, Dec takes one."})
        registry.register_variant("counter5", env="counter", params={"target": 5, "max_actions": 8},
                                  description="count to 5")

    @hookimpl
    def ragen_register_filters(self, registry: Any) -> None:
        registry.register("keep_top", "tests.core.toy:KeepTopFilter", description="keep the top k groups")

    @hookimpl
    def ragen_register_estimators(self, registry: Any) -> None:
        registry.register("rtg", "tests.core.toy:ReturnToGo", description="return to go", default=True)

    @hookimpl
    def ragen_register_diagnostics(self, registry: Any) -> None:
        registry.register("mean_score", "tests.core.toy:MeanScoreDiagnostic", description="mean score")

    @hookimpl
    def ragen_register_trainers(self, registry: Any) -> None:
        registry.register("toy", "tests.core.toy:ToyTrainer", description="oracle rollouts", default=True)


def toy_config_overrides() -> list[str]:
    """Overrides selecting the toy components."""
    return ["env=counter", "filter=keep_top", "estimator=rtg", "trainer=toy", "rollout.env_groups=2",
            "rollout.group_size=2"]
