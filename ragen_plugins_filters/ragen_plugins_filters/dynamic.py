"""DAPO-style dynamic sampling: drop zero-variance groups and roll out more until enough groups carry signal.

A group whose trajectory scores are all equal (reward std ``<= zero_eps``) gives GRPO no gradient. Dynamic sampling
drops such groups and keeps rolling out new groups until ``target_groups`` informative ones are found or
``max_rounds`` rollout rounds (the first included) are spent; then it uses what it has — it never raises for lack
of groups. Registered as the filter ``dynamic`` (``select`` alone is a one-round filter).

A trainer either drives the loop itself::

    sampler.reset()
    kept: list[int] = []
    batch = rollout(target)
    while True:
        kept += sampler.select(batch).kept_groups
        more = sampler.needs_more(kept, target)
        if more == 0:
            break
        batch = rollout(more)                    # new, distinct group ids
    metrics.update(sampler.metrics())

or calls :meth:`DynamicSampling.collect` with a ``rollout(n_groups) -> RolloutBatch`` callable.

Metrics: ``rollout/dynamic_sampling_rounds`` (rollout rounds used this step) and ``rollout/dynamic_sampling_short``
(groups still missing from the target at the last check: 0 when it was met, > 0 when the budget ran out).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ragen_core.data import RolloutBatch
from ragen_core.protocols import FilterResult
from ragen_plugins_filters.config import DynamicSamplingConfig
from ragen_plugins_filters.scores import filter_metrics, group_table

__all__ = ["DynamicSampling"]


class DynamicSampling:
    """Dynamic sampling (see the module docstring).

    ``select`` is stateless (deterministic, no mutation); ``needs_more`` counts rounds until :meth:`reset`.
    """

    config_cls = DynamicSamplingConfig

    def __init__(self, config: DynamicSamplingConfig) -> None:
        self.config = config
        self.rounds = 0
        self.short = 0

    def reset(self) -> None:
        """Start a new step: no rounds used, nothing missing."""
        self.rounds = 0
        self.short = 0

    def select(self, batch: Any) -> FilterResult:
        """Keep the groups whose reward std exceeds ``zero_eps`` (first-seen order); failed groups are never kept."""
        table = group_table(batch, "reward_variance")
        kept = tuple(g.group_id for g in table.scored if g.score > self.config.zero_eps)
        return FilterResult(kept, filter_metrics(table, kept))

    def needs_more(self, kept_groups: int | Sequence[int], target_groups: int) -> int:
        """Record one finished rollout round; return how many more groups to roll out (0: stop).

        :param kept_groups: the informative groups found so far this step (their ids, or their number).
        :param target_groups: how many the update wants.
        :returns: 0 when the target is met or the ``max_rounds`` budget is spent (then ``short`` records the
            missing groups), else ``ceil(missing × oversample)``.
        """
        have = kept_groups if isinstance(kept_groups, int) else len(kept_groups)
        if target_groups < 0 or have < 0:
            raise ValueError(f"needs_more: counts must be >= 0, got kept={have}, target={target_groups}")
        self.rounds += 1
        self.short = max(0, target_groups - have)
        if self.short == 0 or self.rounds >= self.config.max_rounds:
            return 0
        return math.ceil(self.short * self.config.oversample)

    def metrics(self) -> dict[str, float]:
        """``rollout/dynamic_sampling_rounds`` and ``rollout/dynamic_sampling_short`` of the current step."""
        return {"rollout/dynamic_sampling_rounds": float(self.rounds),
                "rollout/dynamic_sampling_short": float(self.short)}

    def collect(self, rollout: Callable[[int], RolloutBatch], target_groups: int,
                first: RolloutBatch | None = None) -> tuple[RolloutBatch, FilterResult]:
        """Run the whole loop for one step.

        :param rollout: ``rollout(n_groups)`` returns a batch of ``n_groups`` new groups; group ids must not repeat
            across rounds (``ValueError`` otherwise).
        :param target_groups: informative groups wanted.
        :param first: the step's first batch, when already rolled out (else ``rollout(target_groups)``).
        :returns: the batch of the kept groups (at most ``target_groups``, the earliest found) and a
            :class:`FilterResult` whose metrics cover every group rolled out this step plus the dynamic metrics.
        """
        self.reset()
        batch = first if first is not None else rollout(target_groups)
        trajectories: list[Any] = []
        seen: set[int] = set()
        kept: list[int] = []
        while True:
            ids = batch.group_ids()
            repeated = seen.intersection(ids)
            if repeated:
                raise ValueError(f"dynamic sampling: rollout round {self.rounds + 1} repeated group ids "
                                 f"{sorted(repeated)}; each round needs new group ids")
            seen.update(ids)
            trajectories.extend(batch.trajectories)
            kept.extend(self.select(batch).kept_groups)
            more = self.needs_more(kept, target_groups)
            if more == 0:
                break
            batch = rollout(more)
        chosen = tuple(kept[:target_groups])
        everything = RolloutBatch(list(trajectories))
        metrics = {**filter_metrics(group_table(everything, "reward_variance"), chosen), **self.metrics()}
        return everything.select_groups(chosen), FilterResult(chosen, metrics)
