"""A bounded sample of each step's trajectories, for reading what the agent wrote (``samples.jsonl``).

Every run that goes through :meth:`~ragen_core.context.RunContext.end_step` with a batch (``ragen train``, ``ragen
rollout``) appends, per step, the ``run.trajectory_samples`` best, worst and random trajectories of the unfiltered
batch (best and worst by score; random ones drawn from the rest with a generator seeded by the run seed and the
step, so the sample never touches the trainer's randomness). ``ragen report`` shows them in its trajectory viewer.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

from ragen_core.data import RolloutBatch, Trajectory, Turn

__all__ = ["pick_samples", "sample_record", "write_samples"]

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


def _plain(value: Any) -> Any:
    """JSON for what env infos may hold beyond JSON types (numpy values; anything else as its repr)."""
    return value.tolist() if hasattr(value, "tolist") else repr(value)


def pick_samples(batch: RolloutBatch, per_pick: int, seed: int) -> list[tuple[str, Trajectory]]:
    """``(pick, trajectory)`` pairs: the ``per_pick`` highest-scoring (``best``), the ``per_pick`` lowest-scoring of
    the rest (``worst``) and ``per_pick`` drawn at random from what remains (``random``); each trajectory at most
    once, fewer when the batch is small. Ties keep batch order."""
    order = sorted(range(len(batch.trajectories)), key=lambda i: -batch.trajectories[i].score)
    best = order[:per_pick]
    rest = order[per_pick:]
    worst = rest[::-1][:per_pick]
    remaining = sorted(set(rest) - set(worst))
    drawn = sorted(random.Random(seed).sample(remaining, min(per_pick, len(remaining))))
    return [(pick, batch.trajectories[i]) for pick, chosen in (("best", best), ("worst", worst), ("random", drawn))
            for i in chosen]


def _turn_record(turn: Turn, open_tag: str) -> dict[str, Any]:
    response = open_tag + turn.response_text
    match = _ANSWER.search(response)
    return {"observation": turn.observation, "response": response, "reasoning": turn.reasoning,
            "answer": match.group(1).strip() if match else "", "actions": list(turn.actions), "reward": turn.reward,
            "format_penalty": turn.format_penalty, "format_ok": turn.format_penalty == 0, "truncated": turn.truncated,
            "info": turn.info}


def sample_record(step: int, pick: str, traj: Trajectory, open_tag: str = "<think>") -> dict[str, Any]:
    """One line of ``samples.jsonl``: the step, why it was picked, the outcome and each turn's observation,
    response (``open_tag``, which the prompt ends with, plus the generated text; the reasoning, the answer and
    the actions parsed from it), reward and format and truncation flags."""
    return {"step": step, "pick": pick, "env": traj.env, "group_id": traj.group_id, "seed": traj.seed,
            "episode_id": traj.episode_id, "success": bool(traj.success), "reward": traj.total_reward,
            "score": traj.score, "env_error": traj.env_error, "turns": [_turn_record(t, open_tag) for t in traj.turns]}


def write_samples(path: Path, step: int, batch: RolloutBatch, per_pick: int, seed: int, *, think: bool = True) -> int:
    """Append the step's sample to ``path`` (one write of whole lines); returns how many trajectories it holds.
    ``think`` is ``rollout.think``: the prompt ends with ``<think>`` (else ``<answer>``), which the record's
    responses start with."""
    tag = "<think>" if think else "<answer>"
    lines = [json.dumps(sample_record(step, pick, traj, tag), default=_plain) + "\n"
             for pick, traj in pick_samples(batch, per_pick, seed)]
    if lines:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write("".join(lines))
    return len(lines)
