"""ragen's training samples ⇄ veRL's ``DataProto`` (veRL 0.9.1, ``verl.protocol``).

veRL splits every row into a prompt part, left-padded to ``P`` tokens, and a response part, right-padded to ``R``
tokens (its agent loop's layout). For a ragen sample the prompt part is everything before the first generated token
(the first turn's prompt); the response part is the rest: generated tokens (``response_mask`` 1) and the observation
and next-prompt tokens between turns (``response_mask`` 0). The tensors:

==========================  =====================================================================================
``prompts``                 ``[B, P]`` prompt ids, left-padded with ``pad_id``
``responses``               ``[B, R]`` response ids, right-padded
``input_ids``               ``[B, P + R]`` = prompts ‖ responses
``attention_mask``          ``[B, P + R]`` 1 on real tokens
``position_ids``            ``[B, P + R]`` veRL's ``compute_position_id_with_mask``: cumsum(mask) − 1, ≥ 0
``response_mask``           ``[B, R]`` 1 exactly on generated tokens
``token_level_scores``      ``[B, R]`` rewards where the core put them (trajectory score on the last generated
                            token, or each turn's reward on that turn's last token)
``token_level_rewards``     ``[B, R]`` the same (no KL in the reward: ragen's KL is a loss term)
``rollout_log_probs``       ``[B, R]`` the sampler's log-probs of the generated tokens (0 elsewhere)
``ragen_turn_ids``          ``[B, R]`` turn index of every generated token, −1 elsewhere
==========================  =====================================================================================

Non-tensor columns (object arrays): ``uid`` (the group id as a string — veRL's grouping key), ``ragen_episode``,
``ragen_env``, ``ragen_state_keys`` (one list per row), ``ragen_success``, ``ragen_mean_entropy``.

:func:`to_advantage_input` reads a ``DataProto`` back into the core's :class:`~ragen_core.protocols.AdvantageInput`
(response part only: estimators ignore masked tokens, so the advantages on generated tokens are the same as over the
whole sequence); :func:`to_rollout_batch` gives filters the trajectories they rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ragen_core.data import RolloutBatch, Trajectory, Turn
from ragen_core.protocols import AdvantageInput, AdvantageOutput
from ragen_core.starpo.batching import Sample, normalise_scores

__all__ = ["apply_reward_norm", "dense_groups", "from_dataproto_rows", "prompt_split", "samples_to_dataproto",
           "to_advantage_input", "to_rollout_batch", "write_advantages"]


def prompt_split(sample: Sample) -> int:
    """Index of the first generated token of a sample (its prompt length); the whole length without one."""
    for i, m in enumerate(sample.response_mask):
        if m:
            return i
    return len(sample.input_ids)


def samples_to_dataproto(samples: Sequence[Sample], *, pad_id: int = 0, prompt_length: int | None = None,
                         response_length: int | None = None, extras: Sequence[dict[str, Any]] | None = None
                         ) -> Any:
    """A ``DataProto`` of ``samples`` in veRL's layout (see the module docstring).

    ``prompt_length``/``response_length`` fix ``P``/``R`` (veRL pads to its configured lengths); by default the
    longest prompt and response. ``extras`` (one dict per sample) may carry ``success`` and ``mean_entropy``.
    """
    from verl import DataProto

    if not samples:
        raise ValueError("samples_to_dataproto needs at least one sample")
    splits = [prompt_split(s) for s in samples]
    p_len = max(splits) if prompt_length is None else prompt_length
    r_len = max(len(s.input_ids) - k for s, k in zip(samples, splits)) if response_length is None else response_length
    for i, (s, k) in enumerate(zip(samples, splits)):
        if k > p_len or len(s.input_ids) - k > r_len:
            raise ValueError(f"sample {i} has a prompt of {k} and a response of {len(s.input_ids) - k} tokens, over "
                             f"the lengths {p_len}/{r_len}")
    b = len(samples)
    prompts = torch.full((b, p_len), pad_id, dtype=torch.long)
    responses = torch.full((b, r_len), pad_id, dtype=torch.long)
    attn = torch.zeros((b, p_len + r_len), dtype=torch.long)
    resp_mask = torch.zeros((b, r_len), dtype=torch.long)
    scores = torch.zeros((b, r_len), dtype=torch.float32)
    logprobs = torch.zeros((b, r_len), dtype=torch.float32)
    turn_ids = torch.full((b, r_len), -1, dtype=torch.long)
    for i, (s, k) in enumerate(zip(samples, splits)):
        n = len(s.input_ids) - k
        if k:
            prompts[i, p_len - k:] = torch.tensor(s.input_ids[:k])
            attn[i, p_len - k:p_len] = 1
        if n:
            responses[i, :n] = torch.tensor(s.input_ids[k:])
            attn[i, p_len:p_len + n] = 1
            resp_mask[i, :n] = torch.tensor(s.response_mask[k:])
            scores[i, :n] = torch.tensor(s.token_rewards[k:], dtype=torch.float32)
            logprobs[i, :n] = torch.tensor(s.logprobs[k:], dtype=torch.float32)
            turn_ids[i, :n] = torch.tensor(s.turn_ids[k:])
    extras = list(extras) if extras is not None else [{} for _ in samples]
    tensors = {
        "prompts": prompts, "responses": responses, "input_ids": torch.cat([prompts, responses], 1),
        "attention_mask": attn, "position_ids": torch.clip(torch.cumsum(attn, dim=-1) - 1, min=0),
        "response_mask": resp_mask, "token_level_scores": scores, "token_level_rewards": scores.clone(),
        "rollout_log_probs": logprobs, "ragen_turn_ids": turn_ids,
    }
    non_tensors = {
        "uid": _objects([str(s.group_id) for s in samples]),
        "ragen_episode": _objects([int(s.episode_id) for s in samples]),
        "ragen_env": _objects([s.env for s in samples]),
        "ragen_state_keys": _objects([list(s.state_keys) for s in samples]),
        "ragen_success": _objects([bool(e.get("success", False)) for e in extras]),
        "ragen_mean_entropy": _objects([e.get("mean_entropy") for e in extras]),
    }
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)


def _objects(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def dense_groups(uids: Sequence[Any]) -> tuple[np.ndarray, list[Any]]:
    """Dense int group index of each row (first-seen order of ``uids``) and the uid of each index."""
    index: dict[Any, int] = {}
    dense = np.array([index.setdefault(u, len(index)) for u in uids], dtype=np.int64)
    return dense, list(index)


def to_advantage_input(data: Any, *, with_values: bool = False) -> AdvantageInput:
    """The core estimator input of a ``DataProto`` (response part).

    Rewards come from ``token_level_rewards`` (else ``token_level_scores``), groups from ``uid``; ``values``,
    ``ragen_turn_ids``, ``ragen_state_keys`` and ``ragen_episode`` are used when present. Episode ids are passed only
    when several rows share an episode (as :func:`ragen_core.starpo.batching.advantage_input` does).
    """
    batch, nt = data.batch, data.non_tensor_batch
    keys = set(batch.keys())
    rewards = batch["token_level_rewards"] if "token_level_rewards" in keys else batch["token_level_scores"]
    mask = batch["response_mask"]
    values = None
    if with_values:
        if "values" not in keys:
            raise ValueError("this estimator needs critic values but the DataProto has no 'values'")
        values = batch["values"].double().cpu().numpy()
    turn_ids = batch["ragen_turn_ids"].cpu().numpy() if "ragen_turn_ids" in keys else None
    episodes = None
    if "ragen_episode" in nt:
        ep = [str(e) for e in nt["ragen_episode"]]
        episodes = np.array(dense_groups(ep)[0]) if len(set(ep)) < len(ep) else None
    state_keys = [list(k) for k in nt["ragen_state_keys"]] if "ragen_state_keys" in nt else None
    return AdvantageInput(
        token_rewards=rewards.double().cpu().numpy(),
        response_mask=mask.long().cpu().numpy(),
        group_ids=dense_groups(list(nt["uid"]))[0],
        values=values, turn_ids=turn_ids, state_keys=state_keys, episode_ids=episodes)


def write_advantages(data: Any, out: AdvantageOutput) -> Any:
    """Store ``advantages`` and ``returns`` (float32, zero off the response mask) in ``data.batch``; returns it."""
    mask = data.batch["response_mask"].float()
    for key, arr in (("advantages", out.advantages), ("returns", out.returns)):
        t = torch.as_tensor(np.asarray(arr), dtype=torch.float32).to(mask.device)
        if t.shape != mask.shape:
            raise ValueError(f"estimator returned {key} of shape {tuple(t.shape)}, expected {tuple(mask.shape)}")
        data.batch[key] = t * mask
    return data


def to_rollout_batch(data: Any) -> tuple[RolloutBatch, list[Any]]:
    """Trajectories for the core's filters: one per row, ``group_id`` the dense index of ``uid`` (the second value
    maps it back), ``score`` the sum of the row's ``token_level_scores`` on generated tokens, one turn holding the
    generated tokens (so ``length`` ranks by generated tokens), ``mean_entropy`` from ``ragen_mean_entropy``,
    ``episode_id`` the row index."""
    batch, nt = data.batch, data.non_tensor_batch
    dense, uids = dense_groups(list(nt["uid"]))
    mask = batch["response_mask"].bool()
    scores = (batch["token_level_scores"] * mask).sum(-1).double().tolist()
    resp = batch["responses"]
    ent = nt.get("ragen_mean_entropy")
    env = nt.get("ragen_env")
    trajs = []
    for i in range(len(dense)):
        ids = resp[i][mask[i]].tolist()
        trajs.append(Trajectory(
            env=str(env[i]) if env is not None else "", group_id=int(dense[i]), seed=0,
            turns=[Turn(response_ids=ids)], score=float(scores[i]),
            success=bool(nt["ragen_success"][i]) if "ragen_success" in nt else False,
            mean_entropy=None if ent is None or ent[i] is None else float(ent[i]), episode_id=i))
    return RolloutBatch(trajs), uids


def from_dataproto_rows(data: Any, rows: Sequence[int]) -> Any:
    """The ``DataProto`` holding ``rows`` (in that order)."""
    return data.select_idxs(np.asarray(list(rows), dtype=np.int64))


def apply_reward_norm(data: Any, method: str, by: str) -> Any:
    """RAGEN's score normalisation on a ``DataProto`` (trajectory-level placement): each row's score (the sum of its
    ``token_level_scores``) is replaced by the core's :func:`~ragen_core.starpo.batching.normalise_scores` value, on the row's
    last generated token. ``identity`` leaves the data as it is."""
    if method == "identity":
        return data
    batch, _uids = to_rollout_batch(data)
    if by == "variant" and "ragen_env" not in data.non_tensor_batch:
        raise ValueError("reward_norm_by=variant needs the 'ragen_env' column")
    norm = normalise_scores(batch, method, by)
    mask = data.batch["response_mask"].bool()
    scores = torch.zeros_like(data.batch["token_level_scores"])
    for i, traj in enumerate(batch):
        pos = torch.nonzero(mask[i]).flatten()
        if len(pos):
            scores[i, pos[-1]] = norm[traj.episode_id]
    data.batch["token_level_scores"] = scores
    data.batch["token_level_rewards"] = scores.clone()
    return data
