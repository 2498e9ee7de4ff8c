"""Per-group scores and the metrics every filter reports.

Arithmetic is plain Python floats with :func:`math.fsum` (exactly rounded sums), so a group's statistics do not
depend on the order of its trajectories and two groups holding the same values in any order score identically.

Trajectories with ``env_error`` set are left out of every statistic; a group whose trajectories all failed has no
score, is never kept, and is left out of the ``in_group_*`` averages (it still counts in the batch's number of
groups). A non-finite trajectory value, or a statistic that overflows, raises ``ValueError`` naming the group.

Metrics (RAGEN-2's names and definitions; "groups" are the scored groups, averages are plain means over groups):

- ``rollout/in_group_reward_std``: mean over groups of the group's unbiased std of trajectory scores;
- ``rollout/in_group_reward_max``: mean over groups of the group's **max** trajectory score (RAGEN averages the
  per-group maxima; it is not a max of stds);
- ``rollout/in_group_reward_mean``: mean over groups of the group's mean trajectory score;
- ``rollout/chosen_in_group_reward_std|max|mean``: the same over the kept groups (0 when none is kept);
- ``rollout/filter_kept_count``: number of kept groups;
- ``rollout/filter_kept_ratio``: kept groups / groups in the batch (0 for an empty batch);
- ``rollout/filter_zero_count``: scored groups whose ranking score is ``<= 1e-10`` in absolute value, before any
  filtering (with the default metric: zero-variance groups);
- ``rollout/filter_loss_scale``: 1 (``none``), the kept ratio (``linear``) or its square root (``sqrt``);
- ``rollout/filter_failed_groups``: groups left out because all their trajectories had an env error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs

__all__ = ["ZERO_EPS", "GroupScore", "GroupTable", "filter_metrics", "group_table", "mean", "unbiased_std"]

#: a score whose absolute value is at most this counts as zero
ZERO_EPS = 1e-10


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean of a non-empty sequence (exactly rounded sum)."""
    return math.fsum(values) / len(values)


def unbiased_std(values: Sequence[float]) -> float:
    """Standard deviation with the ``n - 1`` denominator; 0 for fewer than two values."""
    n = len(values)
    if n < 2:
        return 0.0
    m = mean(values)
    return math.sqrt(math.fsum((v - m) * (v - m) for v in values) / (n - 1))


@attrs.frozen
class GroupScore:
    """One scored group.

    :ivar group_id: the group.
    :ivar index: its position in the batch's first-seen group order.
    :ivar score: the ranking score (the configured metric).
    :ivar reward_std: unbiased std of its usable trajectories' scores.
    :ivar reward_mean: their mean; ``reward_max`` their maximum.
    """

    group_id: int
    index: int
    score: float
    reward_std: float
    reward_mean: float
    reward_max: float


@attrs.frozen
class GroupTable:
    """The groups of a batch: all ids in first-seen order, the scored ones, and the ids that all failed."""

    group_ids: tuple[int, ...]
    scored: tuple[GroupScore, ...]
    failed: tuple[int, ...]


def _values(group_id: int, trajs: list[Any], metric: str) -> list[float]:
    """The per-trajectory values an entropy or length metric ranks by."""
    if metric in ("entropy", "entropy_variance"):
        what, values = "mean_entropy", [t.mean_entropy for t in trajs]
        if any(v is None for v in values):
            raise ValueError(f"group {group_id}: a trajectory has no mean_entropy, so metric {metric!r} cannot rank "
                             f"it (the policy must report token entropies)")
    else:
        what, values = "response_length", [t.response_length for t in trajs]
    return _finite(group_id, what, values)


def _finite(group_id: int, what: str, values: list[Any]) -> list[float]:
    out = [float(v) for v in values]
    bad = [v for v in out if not math.isfinite(v)]
    if bad:
        raise ValueError(f"group {group_id}: non-finite trajectory {what} {bad[0]!r}; rollout filters need finite "
                         f"values (check the rewards and the reward normalisation)")
    return out


def _statistic(group_id: int, what: str, compute: Any, values: list[float]) -> float:
    try:
        out = compute(values)
    except (OverflowError, ValueError):
        out = math.inf
    if not math.isfinite(out):
        raise ValueError(f"group {group_id}: the {what} of its values is not finite (values too large)")
    return out


def _score(metric: str, values: list[float]) -> float:
    if metric in ("reward_variance", "entropy_variance"):
        return unbiased_std(values)
    if metric == "reward_sum":
        return math.fsum(values)
    return mean(values)


def group_table(batch: Any, metric: str) -> GroupTable:
    """Score every group of ``batch`` by ``metric`` (see :mod:`ragen_plugins_filters.config`)."""
    ids: list[int] = []
    scored: list[GroupScore] = []
    failed: list[int] = []
    for index, (gid, trajs) in enumerate(batch.groups().items()):
        ids.append(gid)
        usable = [t for t in trajs if t.env_error is None]
        if not usable:
            failed.append(gid)
            continue
        rewards = _finite(gid, "score", [t.score for t in usable])
        values = rewards if metric.startswith("reward") else _values(gid, usable, metric)
        scored.append(GroupScore(
            group_id=gid, index=index,
            score=_statistic(gid, metric, lambda v: _score(metric, v), values),
            reward_std=_statistic(gid, "reward std", unbiased_std, rewards),
            reward_mean=_statistic(gid, "reward mean", mean, rewards),
            reward_max=max(rewards),
        ))
    return GroupTable(tuple(ids), tuple(scored), tuple(failed))


def _avg(values: list[float]) -> float:
    """Mean over groups (0 for none); divides first so finite inputs never overflow."""
    return math.fsum(v / len(values) for v in values) if values else 0.0


def filter_metrics(table: GroupTable, kept: Sequence[int], loss_scale: str = "none") -> dict[str, float]:
    """The metrics of one selection (definitions in the module docstring)."""
    kept_set = set(kept)
    chosen = [g for g in table.scored if g.group_id in kept_set]
    ratio = len(kept_set) / len(table.group_ids) if table.group_ids else 0.0
    scale = {"none": 1.0, "linear": ratio, "sqrt": math.sqrt(ratio)}[loss_scale]
    out: dict[str, float] = {}
    for prefix, groups in (("rollout/in_group_reward", table.scored), ("rollout/chosen_in_group_reward", chosen)):
        out[f"{prefix}_std"] = _avg([g.reward_std for g in groups])
        out[f"{prefix}_max"] = _avg([g.reward_max for g in groups])
        out[f"{prefix}_mean"] = _avg([g.reward_mean for g in groups])
    out["rollout/filter_kept_count"] = float(len(kept_set))
    out["rollout/filter_kept_ratio"] = ratio
    out["rollout/filter_zero_count"] = float(sum(abs(g.score) <= ZERO_EPS for g in table.scored))
    out["rollout/filter_loss_scale"] = scale
    out["rollout/filter_failed_groups"] = float(len(table.failed))
    return out
