"""Metrics of a rollout batch, shared by every trainer and by eval (part of the StarPO layer).

:func:`rollout_metrics` turns a :class:`~ragen_core.data.RolloutBatch` into the ``rollout/…`` (or ``val/…``,
``eval/…``) metrics: success, reward, pass@k per env variant and overall, format, truncation and error rates,
lengths, and the env's own numeric info keys; :func:`warn_truncation` logs when many responses hit the token limit.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from ragen_core.data import RolloutBatch, Trajectory

__all__ = ["STANDARD_INFO_KEYS", "TRUNCATION_WARNING_RATE", "final_info", "info_metrics", "rollout_metrics",
           "warn_truncation"]


#: the info keys every env reports (REFERENCE §7), covered by other metrics: never an ``info/`` metric
STANDARD_INFO_KEYS = frozenset({"success", "action_is_valid", "action_is_effective"})


def rollout_metrics(batch: RolloutBatch, prefix: str = "rollout") -> dict[str, float]:
    """Success, reward, pass@k per env variant and overall, format, truncation and error rates, lengths, and the
    env's own info metrics per variant (:func:`info_metrics`)."""
    metrics: dict[str, float] = {}
    ok = [t for t in batch if t.env_error is None]
    metrics[f"{prefix}/env_errors"] = float(len(batch) - len(ok))
    if not ok:
        return metrics
    turns = [turn for t in ok for turn in t.turns]
    metrics[f"{prefix}/success"] = sum(t.success for t in ok) / len(ok)
    metrics[f"{prefix}/reward_mean"] = sum(t.score for t in ok) / len(ok)
    metrics[f"{prefix}/turns_mean"] = sum(len(t.turns) for t in ok) / len(ok)
    if turns:
        metrics[f"{prefix}/format_penalty_rate"] = sum(turn.format_penalty != 0 for turn in turns) / len(turns)
        metrics[f"{prefix}/valid_action_rate"] = sum(bool(turn.actions) for turn in turns) / len(turns)
        metrics[f"{prefix}/response_length_mean"] = sum(len(turn.response_ids) for turn in turns) / len(turns)
        metrics[f"{prefix}/truncated_rate"] = sum(turn.truncated for turn in turns) / len(turns)
    metrics[f"{prefix}/context_truncated"] = float(sum(t.context_truncations for t in ok))
    for name in sorted({t.env for t in ok}):
        mine = [t for t in ok if t.env == name]
        metrics[f"{prefix}/{name}/success"] = sum(t.success for t in mine) / len(mine)
        metrics[f"{prefix}/{name}/reward_mean"] = sum(t.score for t in mine) / len(mine)
        groups: dict[int, list[Trajectory]] = {}
        for t in mine:
            groups.setdefault(t.group_id, []).append(t)
        metrics[f"{prefix}/{name}/pass@k"] = sum(any(t.success for t in g) for g in groups.values()) / len(groups)
        metrics.update({f"{prefix}/{name}/info/{key}": value for key, value in info_metrics(mine).items()})
    return metrics


#: a step whose share of truncated turns (``…/truncated_rate``) reaches this gets a ``responses_truncated`` warning
TRUNCATION_WARNING_RATE = 0.2


def warn_truncation(log: Any, step: int, metrics: dict[str, float], max_new_tokens: int,
                    threshold: float = TRUNCATION_WARNING_RATE) -> dict[str, float]:
    """Log one ``responses_truncated`` warning when a rate among ``rollout/truncated_rate``, ``val/truncated_rate``
    and ``eval/all/truncated_rate`` in ``metrics`` is at least ``threshold``: the rates, ``rollout.max_new_tokens``
    and the key to raise. Returns the high rates (empty: nothing logged). Every trainer calls it with its step's
    metrics."""
    high = {key: metrics[key] for key in ("rollout/truncated_rate", "val/truncated_rate", "eval/all/truncated_rate")
            if metrics.get(key, 0.0) >= threshold}
    if high:
        log.warning("responses_truncated", step=step, **{k: round(v, 4) for k, v in high.items()},
                    max_new_tokens=max_new_tokens,
                    hint=f"{max(high.values()):.0%} of the turns hit rollout.max_new_tokens={max_new_tokens} before "
                         f"</answer>; raise rollout.max_new_tokens (e.g. rollout.max_new_tokens={2 * max_new_tokens})")
    return high


def final_info(traj: Trajectory) -> dict[str, Any]:
    """The info of the trajectory's last env step ({} when no action ever reached the env)."""
    for turn in reversed(traj.turns):
        if turn.info:
            return turn.info
    return {}


def _info_number(value: Any) -> float | None:
    """An info value as a metric: numbers and booleans (as 0/1, numpy's too); None for anything else (text, lists,
    None) and for NaN or infinity."""
    if isinstance(value, (bool, numbers.Real)) or (hasattr(value, "dtype") and getattr(value, "shape", None) == ()):
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None
        return number if math.isfinite(number) else None
    return None


def info_metrics(trajectories: list[Trajectory]) -> dict[str, float]:
    """The env's own numeric info keys (REFERENCE §7: beyond ``success``, ``action_is_valid`` and
    ``action_is_effective``, numeric info keys become metrics): per key, the mean over ``trajectories`` of its value in
    the trajectory's :func:`final_info`, over the trajectories whose final info holds a number for it (booleans count
    as 0/1; text, lists, None, NaN and infinities are skipped). Keys are sorted; a ``/`` in a key becomes ``_``."""
    values: dict[str, list[float]] = {}
    for traj in trajectories:
        for key, value in final_info(traj).items():
            number = _info_number(value)
            if key not in STANDARD_INFO_KEYS and number is not None:
                values.setdefault(str(key).replace("/", "_"), []).append(number)
    return {key: _mean(vals) for key, vals in sorted(values.items())}


def _mean(values: list[float]) -> float:
    """The mean of finite ``values``, finite itself even when their sum overflows (an env's huge info value)."""
    try:
        return math.fsum(values) / len(values)
    except OverflowError:
        return math.fsum(v / len(values) for v in values)
