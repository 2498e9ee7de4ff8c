"""Context objects passed to lifecycle hooks (narrow hooks: one object instead of loose arguments)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from ragen_core.data import RolloutBatch
from ragen_core.errors import PluginError
from ragen_core.starpo.metrics import warn_truncation
from ragen_core.starpo.samples import write_samples

if TYPE_CHECKING:  # pragma: no cover
    from pluggy import HookRelay, PluginManager

    from ragen_core.config import RagenConfig, ResolvedConfig
    from ragen_core.registry import Registries

__all__ = ["RunContext", "StepContext"]


@attrs.define(eq=False)
class RunContext:
    """One run: its resolved config, plugins, registries, directory and logger.

    :ivar resolved: the :class:`~ragen_core.config.ResolvedConfig`.
    :ivar registries: the :class:`~ragen_core.registry.Registries` of this run's plugin manager.
    :ivar pm: the run's plugin manager (call hooks through ``run.hook``).
    :ivar run_dir: where the config, plugin list, ``metrics.jsonl`` and checkpoints go.
    :ivar log: a structlog logger bound to the run.
    :ivar mode: ``"train"``, ``"eval"`` or ``"rollout"``.
    """

    resolved: ResolvedConfig
    registries: Registries
    pm: PluginManager  # the run's RagenPluginManager
    run_dir: Path
    log: Any  # a structlog bound logger (whatever logger factory the run's logging set up)
    mode: str = "train"
    state: dict[str, Any] = attrs.field(factory=dict)

    @property
    def config(self) -> RagenConfig:
        """The core :class:`~ragen_core.config.RagenConfig`."""
        return self.resolved.config

    @property
    def hook(self) -> HookRelay:
        """The plugin manager's hook relay (``run.hook.ragen_on_step_end(ctx=...)``)."""
        return self.pm.hook

    def write_metrics(self, step: int, metrics: dict[str, float]) -> None:
        """Append one JSON line ``{"step": step, **metrics}`` to ``metrics.jsonl``, then call ``ragen_on_metrics``
        (the metric sinks)."""
        with open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"step": step, **metrics}, sort_keys=True) + "\n")
        self.pm.hook.ragen_on_metrics(run=self, step=step, metrics=dict(metrics))

    def step_context(self, step: int, batch: RolloutBatch | None = None) -> StepContext:
        """A new :class:`StepContext` for ``step``."""
        return StepContext(run=self, step=step, batch=batch)

    def begin_step(self, step: int, batch: RolloutBatch | None) -> StepContext:
        """The step sequence's first half, the same for every trainer, ``ragen rollout`` and ``ragen eval``: each
        trajectory whose env failed is logged and passed to ``ragen_on_error``, then ``ragen_on_rollout_end``."""
        ctx = self.step_context(step, batch)
        for traj in [t for t in batch or () if t.env_error is not None]:
            self.log.warning("env_error", env=traj.env, seed=traj.seed, error=traj.env_error)
            self.pm.hook.ragen_on_error(ctx=ctx, error=RuntimeError(f"env {traj.env}: {traj.env_error}"))
        self.pm.hook.ragen_on_rollout_end(ctx=ctx)
        return ctx

    def end_step(self, ctx: StepContext, metrics: dict[str, Any], source: str, max_new_tokens: int | None = None) -> None:
        """The second half: the driver's ``metrics`` (reported by ``source``), ``ragen_collect_metrics``,
        ``ragen_on_step_end``, the ``metrics.jsonl`` line and ``ragen_on_metrics``, the step's trajectory sample
        (``samples.jsonl``, ``run.trajectory_samples``), then a warning when many answers hit ``max_new_tokens``
        (default: ``rollout.max_new_tokens``)."""
        ctx.add_metrics(metrics, source=source)
        self.collect_metrics(ctx)
        self.pm.hook.ragen_on_step_end(ctx=ctx)
        self.write_metrics(ctx.step, ctx.metrics)
        if ctx.batch is not None and self.config.run.trajectory_samples:
            write_samples(self.run_dir / "samples.jsonl", ctx.step, ctx.batch, self.config.run.trajectory_samples,
                          seed=self.config.run.seed * 1_000_003 + ctx.step, think=self.config.rollout.think)
        warn_truncation(self.log, ctx.step, ctx.metrics, max_new_tokens or self.config.rollout.max_new_tokens)

    def collect_metrics(self, ctx: StepContext) -> None:
        """Call ``ragen_collect_metrics`` plugin by plugin and merge the results into ``ctx.metrics``."""
        for impl in reversed(self.pm.hook.ragen_collect_metrics.get_hookimpls()):
            caller = self.pm.subset_hook_caller(
                "ragen_collect_metrics",
                remove_plugins=[p for p in self.pm.get_plugins() if p is not impl.plugin])
            for result in caller(ctx=ctx):
                ctx.add_metrics(result or {}, source=impl.plugin_name)


@attrs.define(eq=False)
class StepContext:
    """One step of a run.

    :ivar batch: the unfiltered rollout batch (None before the rollout).
    :ivar kept: the groups kept by the filter (None before filtering).
    :ivar metrics: the step's metrics so far (name → float).
    :ivar stop_reason: set by a hook to stop the run after this step.
    """

    run: RunContext
    step: int
    batch: RolloutBatch | None = None
    kept: RolloutBatch | None = None
    metrics: dict[str, float] = attrs.field(factory=dict)
    stop_reason: str | None = None

    def add_metrics(self, metrics: dict[str, Any], source: str = "?") -> None:
        """Merge ``metrics``; a name already present or a non-finite value is an error naming ``source``."""
        for name, value in metrics.items():
            if name in self.metrics:
                raise PluginError(f"plugin {source!r} reported metric {name!r}, which is already set this step",
                                  hint="metric names must be unique; prefix yours with your plugin's family")
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise PluginError(f"plugin {source!r} reported metric {name!r} = {value!r}, not a number") from None
            if not math.isfinite(number):
                raise PluginError(f"plugin {source!r} reported metric {name!r} = {value!r}, not finite")
            self.metrics[name] = number
