"""Advantages of a veRL batch with ragen's estimator (what ragen's V1 trainer mode runs between values and update).

:func:`prepare_dataproto` turns the rows veRL hands to ``_compute_advantage`` into the columns of
:mod:`ragen_plugins_verl.dataproto`: the agent loop's ``extra_fields`` give the per-token rewards where the core put
them (trajectory score, or per-turn rewards with ``use_turn_scores``), the turn ids, the state keys and the episode;
veRL's padding rows (``uid`` starting with ``pad``) get zero rewards and an empty mask. :func:`compute_advantages`
then applies RAGEN's score normalisation and the configured core estimator (critic values included when it needs
them) and writes ``advantages``/``returns`` — the same numbers the native trainer computes for the same trajectories.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .dataproto import _objects, apply_reward_norm, to_advantage_input, write_advantages

__all__ = ["compute_advantages", "is_padding", "prepare_dataproto"]


def is_padding(uid: Any) -> bool:
    """veRL's synthetic padding rows carry a ``uid`` starting with ``pad``."""
    return str(uid).startswith("pad")


def prepare_dataproto(data: Any, extra_fields: list[dict[str, Any]]) -> Any:
    """Fill the ragen columns of ``data`` (veRL's rows, ``response_mask`` and ``rm_scores`` or
    ``token_level_scores`` set) from the agent loop's ``extra_fields``, one dict per row."""
    b, r = data.batch["response_mask"].shape
    if "token_level_scores" not in data.batch.keys():
        data.batch["token_level_scores"] = data.batch["rm_scores"].float()
    scores = torch.zeros((b, r), dtype=torch.float32)
    turn_ids = torch.full((b, r), -1, dtype=torch.long)
    mask = data.batch["response_mask"].clone()
    episodes: list[Any] = []
    envs: list[Any] = []
    keys: list[Any] = []
    success: list[Any] = []
    entropy: list[Any] = []
    for i in range(b):
        uid = data.non_tensor_batch["uid"][i]
        extra = extra_fields[i] or {}
        traj = extra.get("ragen_trajectory") or {}
        if is_padding(uid) or "ragen_token_rewards" not in extra:
            mask[i] = 0
            episodes.append(f"{uid}#{i}")
            envs.append(traj.get("env", ""))
            keys.append([])
            success.append(False)
            entropy.append(None)
            continue
        rewards = list(extra["ragen_token_rewards"])[:r]
        scores[i, :len(rewards)] = torch.tensor(rewards, dtype=torch.float32)
        tids = list(extra.get("ragen_turn_ids", []))[:r]
        turn_ids[i, :len(tids)] = torch.tensor(tids, dtype=torch.long)
        episodes.append(f"{uid}#{traj.get('episode_id', i)}")
        envs.append(traj.get("env", ""))
        keys.append([t.get("state_key", "") for t in traj.get("turns", [])])
        success.append(bool(traj.get("success", False)))
        entropy.append(traj.get("mean_entropy"))
    data.batch["response_mask"] = mask
    data.batch["token_level_scores"] = scores.to(mask.device) * mask
    data.batch["token_level_rewards"] = data.batch["token_level_scores"].clone()
    data.batch["ragen_turn_ids"] = turn_ids.to(mask.device)
    for name, values in (("ragen_episode", episodes), ("ragen_env", envs), ("ragen_state_keys", keys),
                         ("ragen_success", success), ("ragen_mean_entropy", entropy)):
        data.non_tensor_batch[name] = _objects(values)
    return data


def compute_advantages(data: Any, estimator: Any, *, reward_norm: str = "identity", reward_norm_by: str = "group",
                       use_turn_scores: bool = False, scale: float = 1.0) -> Any:
    """Normalise scores (trajectory level only, as the core), run ``estimator`` and store ``advantages`` and
    ``returns`` in ``data``. ``scale`` multiplies the advantages (the filter's loss scale; 0 for an empty
    selection): PPO's clipped objective is linear in the advantages, so this scales the policy-gradient loss."""
    if not use_turn_scores:
        real = np.array([not is_padding(u) for u in data.non_tensor_batch["uid"]])
        if real.all():
            apply_reward_norm(data, reward_norm, reward_norm_by)
        elif real.any() and reward_norm != "identity":
            sub = data.select_idxs(np.nonzero(real)[0])
            apply_reward_norm(sub, reward_norm, reward_norm_by)
            for key in ("token_level_scores", "token_level_rewards"):
                data.batch[key][torch.as_tensor(np.nonzero(real)[0])] = sub.batch[key]
    out = estimator.compute(to_advantage_input(data, with_values=bool(getattr(estimator, "needs_critic", False))))
    write_advantages(data, out)
    if scale != 1.0:
        data.batch["advantages"] = data.batch["advantages"] * float(scale)
    return data
