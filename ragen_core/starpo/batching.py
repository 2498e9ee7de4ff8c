"""From trajectories to training samples and estimator inputs (shared by every trainer).

- :func:`normalise_scores` — RAGEN's optional score normalisation (identity, mean, mean_std, asym_clip) by group,
  env variant or whole batch.
- :func:`build_samples` — one sample per segment (the whole trajectory in ``full`` mode; one per turn in the
  per-turn modes): exactly the sampled ids spliced with the context ids, a response mask that is 1 only on
  generated tokens, log-probs aligned to tokens, turn ids, and the reward placement (trajectory score on the last
  generated token, or each turn's reward on that turn's last token with ``use_turn_scores``).
- :func:`advantage_input` — right-padded arrays for an estimator.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from ragen_core.data import RolloutBatch, Trajectory
from ragen_core.protocols import AdvantageInput

__all__ = ["Sample", "advantage_input", "build_samples", "normalise_scores"]


def normalise_scores(batch: RolloutBatch, method: str = "identity", by: str = "group") -> dict[int, float]:
    """Normalised score of each trajectory (by ``episode_id``); trajectories with an env error are skipped.

    ``mean``: x − μ; ``mean_std``: (x − μ)/(σ + 1e-6), 0 when σ ≈ 0 (population σ); ``asym_clip``: mean_std clipped
    to [−1, 3]. Non-finite scores raise ``ValueError`` naming the group.
    """
    trajs = [t for t in batch if t.env_error is None]
    for t in trajs:
        if not math.isfinite(t.score):
            raise ValueError(f"non-finite score {t.score} in group {t.group_id} (env {t.env}, seed {t.seed})")
    if method == "identity":
        return {t.episode_id: t.score for t in trajs}
    key: Callable[[Trajectory], Any] = {"group": lambda t: t.group_id, "variant": lambda t: t.env, "batch": lambda t: 0}[by]
    buckets: dict[Any, list[Trajectory]] = {}
    for t in trajs:
        buckets.setdefault(key(t), []).append(t)
    out = {}
    for members in buckets.values():
        x = np.array([t.score for t in members], dtype=float)
        mu, sigma = x.mean(), x.std()
        if method == "mean":
            y = x - mu
        else:
            y = np.zeros_like(x) if sigma < 1e-8 else (x - mu) / (sigma + 1e-6)
            if method == "asym_clip":
                y = np.clip(y, -1.0, 3.0)
        out.update({t.episode_id: float(v) for t, v in zip(members, y)})
    return out


@attrs.define
class Sample:
    """One training sequence."""

    input_ids: list[int]
    response_mask: list[int]
    logprobs: list[float]
    turn_ids: list[int]
    token_rewards: list[float]
    group_id: int
    episode_id: int
    env: str
    state_keys: list[str]


def build_samples(batch: RolloutBatch, scores: dict[int, float] | None = None, *, use_turn_scores: bool = False
                  ) -> list[Sample]:
    """Training samples of every trajectory without an env error (see the module docstring)."""
    scores = scores if scores is not None else {t.episode_id: t.score for t in batch}
    samples: list[Sample] = []
    for traj in batch:
        if traj.env_error is not None or not traj.turns:
            continue
        mine: list[Sample] = []
        for turn in traj.turns:
            if turn.new_segment or not mine:
                mine.append(Sample([], [], [], [], [], traj.group_id, traj.episode_id, traj.env, []))
            s = mine[-1]
            n_prompt, n_resp = len(turn.prompt_ids), len(turn.response_ids)
            s.input_ids += [*turn.prompt_ids, *turn.response_ids]
            s.response_mask += [0] * n_prompt + [1] * n_resp
            logprobs = list(turn.logprobs) + [0.0] * (n_resp - len(turn.logprobs))
            s.logprobs += [0.0] * n_prompt + logprobs[:n_resp]
            s.turn_ids += [-1] * n_prompt + [len(s.state_keys)] * n_resp  # turn index within the sample
            s.token_rewards += [0.0] * (n_prompt + n_resp)
            s.state_keys.append(turn.state_key)
            if use_turn_scores and n_resp:
                s.token_rewards[-1] += turn.reward + turn.format_penalty
        if not use_turn_scores:
            last = mine[-1]
            positions = [i for i, m in enumerate(last.response_mask) if m]
            if positions:
                last.token_rewards[positions[-1]] += scores.get(traj.episode_id, traj.score)
        samples += mine
    return samples


def advantage_input(samples: list[Sample], values: Any = None) -> AdvantageInput:
    """Right-padded ``[batch, tokens]`` arrays of the samples for an estimator (``values`` already padded)."""
    width = max((len(s.input_ids) for s in samples), default=0)

    def pad(rows: list[list[Any]], fill: Any, dtype: Any) -> np.ndarray:
        out = np.full((len(rows), width), fill, dtype=dtype)
        for i, r in enumerate(rows):
            out[i, :len(r)] = r
        return out

    episodes = [s.episode_id for s in samples]
    return AdvantageInput(
        token_rewards=pad([s.token_rewards for s in samples], 0.0, np.float64),
        response_mask=pad([s.response_mask for s in samples], 0, np.int64),
        group_ids=np.array([s.group_id for s in samples], dtype=np.int64),
        values=values,
        turn_ids=pad([s.turn_ids for s in samples], -1, np.int64),
        state_keys=[list(s.state_keys) for s in samples],
        episode_ids=np.array(episodes, dtype=np.int64) if len(set(episodes)) < len(episodes) else None,
    )
