"""Shared helpers of the estimators: input coercion, config validators, group statistics, whitening, turns.

Every estimator works on float64 copies of its inputs (it never mutates them) and returns arrays that are exactly 0
where ``response_mask`` is 0. Rewards and values on masked tokens (prompt, observation, padding) are ignored.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import attrs
import numpy as np

from ragen_core.protocols import AdvantageInput, AdvantageOutput
from ragen_core.validators import number

__all__ = [
    "WHITEN_EPS",
    "Prepared",
    "Turn",
    "episode_advantages",
    "episode_scores",
    "freeze_key",
    "group_normalise",
    "masked_whiten",
    "non_negative",
    "output",
    "positive",
    "prepare",
    "row_turns",
    "unit_interval",
]

#: variance floor of :func:`masked_whiten` (veRL's ``masked_whiten`` adds the same constant).
WHITEN_EPS = 1e-8


# --------------------------------------------------------------------------------------------- config validators

#: a finite number in [0, 1] (discount factors, GAE lambdas)
unit_interval = number(0, 1)
#: a finite number > 0 (epsilons)
positive = number(0, low_open=True)
#: a finite number >= 0 (weights)
non_negative = number(0)


# --------------------------------------------------------------------------------------------- inputs

@attrs.frozen
class Prepared:
    """Validated float64 copies of an :class:`AdvantageInput`.

    :ivar rewards: ``[b, t]`` token rewards, zeroed on masked tokens.
    :ivar mask: ``[b, t]`` bool, True on generated tokens.
    :ivar groups: ``[b]`` dense int group index of each row (first-appearance order of ``group_ids``).
    :ivar values: ``[b, t]`` critic values zeroed on masked tokens, or None when not requested.
    :ivar turn_ids: ``[b, t]`` int turn ids, or None when not requested.
    :ivar episodes: ``[b]`` dense int episode index of each row (each row its own episode without ``episode_ids``).
    :ivar episode_groups: ``[n_episodes]`` dense group index of each episode.
    """

    rewards: np.ndarray
    mask: np.ndarray
    groups: np.ndarray
    values: np.ndarray | None
    turn_ids: np.ndarray | None
    episodes: np.ndarray
    episode_groups: np.ndarray


def _dense(keys: Sequence[Any], name: str) -> np.ndarray:
    """Map arbitrary hashable ids to 0..n-1 in order of first appearance."""
    index: dict[Hashable, int] = {}
    out = np.empty(len(keys), dtype=np.int64)
    for i, key in enumerate(keys):
        k = freeze_key(key, name)
        out[i] = index.setdefault(k, len(index))
    return out


def _ids(value: Any, b: int, name: str) -> list[Any]:
    if isinstance(value, np.ndarray):
        if value.ndim != 1 or value.shape[0] != b:
            raise ValueError(f"{name} must have shape [batch] = [{b}], got {value.shape}")
        return list(value)
    items = list(value)  # a list of ids (which may themselves be tuples)
    if len(items) != b:
        raise ValueError(f"{name} must have one id per row ({b}), got {len(items)}")
    return items


def prepare(inputs: AdvantageInput, *, values: bool = False, turns: bool = False) -> Prepared:
    """Check shapes and copy the inputs an estimator needs (never a view of the caller's arrays)."""
    rewards = np.array(inputs.token_rewards, dtype=np.float64, copy=True)
    if rewards.ndim != 2:
        raise ValueError(f"token_rewards must be [batch, tokens], got shape {rewards.shape}")
    b, _t = rewards.shape
    mask = np.asarray(inputs.response_mask)
    if mask.shape != rewards.shape:
        raise ValueError(f"response_mask shape {mask.shape} != token_rewards shape {rewards.shape}")
    mask = mask != 0
    rewards[~mask] = 0.0
    if not np.isfinite(rewards).all():
        raise ValueError("token_rewards must be finite on generated tokens")
    groups = _dense(_ids(inputs.group_ids, b, "group_ids"), "group_ids")
    vals = _checked_values(inputs, mask) if values else None
    tids = _checked_turn_ids(inputs, mask) if turns else None
    episodes, episode_groups = _episodes(inputs, groups, b)
    return Prepared(rewards=rewards, mask=mask, groups=groups, values=vals, turn_ids=tids, episodes=episodes,
                    episode_groups=episode_groups)


def _checked_values(inputs: AdvantageInput, mask: np.ndarray) -> np.ndarray:
    """A copy of the critic's values, shaped like the rewards, 0 off the generated tokens and finite on them."""
    if inputs.values is None:
        raise ValueError("this estimator needs critic values (AdvantageInput.values is None)")
    vals = np.array(inputs.values, dtype=np.float64, copy=True)
    if vals.shape != mask.shape:
        raise ValueError(f"values shape {vals.shape} != token_rewards shape {mask.shape}")
    vals[~mask] = 0.0
    if not np.isfinite(vals).all():
        raise ValueError("values must be finite on generated tokens")
    return vals


def _checked_turn_ids(inputs: AdvantageInput, mask: np.ndarray) -> np.ndarray:
    """A copy of the turn ids as int64: integers, shaped like the rewards, and on each row's generated tokens
    non-negative and never decreasing."""
    if inputs.turn_ids is None:
        raise ValueError("this estimator needs turn ids (AdvantageInput.turn_ids is None)")
    tids = np.array(inputs.turn_ids, copy=True)
    if tids.shape != mask.shape:
        raise ValueError(f"turn_ids shape {tids.shape} != token_rewards shape {mask.shape}")
    if not np.issubdtype(tids.dtype, np.integer):
        if not np.all(np.equal(np.mod(tids[mask], 1), 0)):
            raise ValueError("turn_ids must be integers")
    tids = tids.astype(np.int64)
    for i in range(mask.shape[0]):
        ids = tids[i, mask[i]]
        if len(ids) and ids.min() < 0:
            raise ValueError(f"row {i}: a generated token has no turn id (turn_ids < 0 where response_mask is 1)")
        if len(ids) > 1 and np.any(np.diff(ids) < 0):
            raise ValueError(f"row {i}: turn ids must not decrease along the generated tokens of a row")
    return tids


def _episodes(inputs: AdvantageInput, groups: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
    """Dense episode ids of the rows (each row its own episode without ``episode_ids``) and each episode's group;
    the rows of one episode must share their group."""
    if inputs.episode_ids is None:
        return np.arange(b, dtype=np.int64), groups.copy()
    episodes = _dense(_ids(inputs.episode_ids, b, "episode_ids"), "episode_ids")
    n = int(episodes.max()) + 1 if b else 0
    episode_groups = np.full(n, -1, dtype=np.int64)
    for i in range(b):
        e = episodes[i]
        if episode_groups[e] == -1:
            episode_groups[e] = groups[i]
        elif episode_groups[e] != groups[i]:
            raise ValueError(f"rows of one episode must share a group id (row {i}: episode "
                             f"{inputs.episode_ids[i]!r} is in two groups)")
    return episodes, episode_groups


def output(advantages: np.ndarray, returns: np.ndarray, mask: np.ndarray) -> AdvantageOutput:
    """Wrap the results, forcing exact zeros on masked tokens."""
    adv = np.where(mask, advantages, 0.0).astype(np.float64, copy=False)
    ret = np.where(mask, returns, 0.0).astype(np.float64, copy=False)
    return AdvantageOutput(advantages=adv, returns=ret)


def freeze_key(key: Any, name: str = "key") -> Hashable:
    """A hashable, value-based form of an id or state key (numpy scalars and arrays, lists, dicts included)."""
    if isinstance(key, np.generic):
        return key.item()
    if isinstance(key, np.ndarray):
        return ("ndarray", key.shape, tuple(freeze_key(x, name) for x in key.ravel().tolist()))
    if isinstance(key, (list, tuple)):
        return tuple(freeze_key(x, name) for x in key)
    if isinstance(key, dict):
        return ("dict", tuple(sorted((str(k), freeze_key(v, name)) for k, v in key.items())))
    if isinstance(key, (set, frozenset)):
        return ("set", tuple(sorted(repr(freeze_key(x, name)) for x in key)))
    try:
        hash(key)
    except TypeError:
        raise TypeError(f"{name}: cannot use {type(key).__name__} {key!r:.60} as a key") from None
    return key


# --------------------------------------------------------------------------------------------- statistics

def masked_whiten(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """veRL's ``masked_whiten``: ``(x - mean) / sqrt(var + 1e-8)`` over the masked entries of the whole batch.

    ``mean`` is the masked mean and ``var`` the *unbiased* masked variance (Bessel factor ``n / (n - 1)``), as in
    ``verl.utils.torch_functional.masked_var``. Where veRL divides by zero for a single masked entry, that entry
    becomes 0 here (the variance is taken as 0); with no masked entry the result is all zeros. Masked-out entries
    are 0.
    """
    n = int(mask.sum())
    out = np.zeros_like(x, dtype=np.float64)
    if n == 0:
        return out
    sel = x[mask]
    mean = sel.sum() / n
    var = float(((sel - mean) ** 2).sum() / n * (n / (n - 1))) if n > 1 else 0.0
    out[mask] = (sel - mean) / math.sqrt(var + WHITEN_EPS)
    return out


def group_normalise(scores: np.ndarray, groups: np.ndarray, *, eps: float, norm_by_std: bool) -> np.ndarray:
    """GRPO's per-group normalisation ``(s - mean) / (std + eps)`` (or ``s - mean`` without ``norm_by_std``).

    ``std`` is the unbiased standard deviation; a group with one member uses mean 0 and std 1 (veRL's
    ``compute_grpo_outcome_advantage``).
    """
    out = np.empty(len(scores), dtype=np.float64)
    for g in np.unique(groups):
        idx = groups == g
        s = scores[idx]
        if len(s) == 1:
            mean, std = 0.0, 1.0
        else:
            mean, std = float(s.mean()), float(s.std(ddof=1))
        out[idx] = (s - mean) / (std + eps) if norm_by_std else s - mean
    return out


def episode_scores(p: Prepared) -> np.ndarray:
    """Score of each episode: the sum of its rows' token rewards within the mask."""
    row_scores = p.rewards.sum(axis=1)
    return np.bincount(p.episodes, weights=row_scores, minlength=len(p.episode_groups)).astype(np.float64)


def episode_advantages(p: Prepared, *, eps: float, norm_by_std: bool) -> np.ndarray:
    """Per-row GRPO advantage of the row's episode (statistics count each episode once)."""
    adv = group_normalise(episode_scores(p), p.episode_groups, eps=eps, norm_by_std=norm_by_std)
    return adv[p.episodes]


# --------------------------------------------------------------------------------------------- turns

@attrs.frozen
class Turn:
    """One assistant turn of a row: its id, the positions of its generated tokens (ascending) and its reward."""

    row: int
    turn_id: int
    positions: np.ndarray
    reward: float


def row_turns(p: Prepared, row: int) -> list[Turn]:
    """The turns of ``row`` in order: runs of equal turn ids along the row's generated tokens."""
    assert p.turn_ids is not None
    pos = np.flatnonzero(p.mask[row])
    if len(pos) == 0:
        return []
    ids = p.turn_ids[row, pos]
    starts = np.concatenate([[0], np.flatnonzero(ids[1:] != ids[:-1]) + 1])
    ends = np.concatenate([starts[1:], [len(pos)]])
    rewards = np.add.reduceat(p.rewards[row, pos], starts)
    return [Turn(row=row, turn_id=int(ids[s]), positions=pos[s:e], reward=float(r))
            for s, e, r in zip(starts, ends, rewards)]
