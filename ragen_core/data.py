"""The trajectory data model shared by the rollout loop, filters, estimators, diagnostics and trainers.

One schema serves all of it: per turn the prompt ids, the sampled response ids and log-probs, the parsed actions,
the reward and the info; per trajectory the group id, seed, env (variant) name, success and totals. Trajectories
with the same ``group_id`` started from the same seed (GRPO-style groups).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

__all__ = ["RolloutBatch", "Trajectory", "Turn", "random_batch", "read_batches", "write_batches"]


@attrs.define
class Turn:
    """One assistant turn: what the model saw and said, what the env did with it.

    ``prompt_ids`` are the ids placed before the response: the whole prompt when ``new_segment`` is True (the first
    turn, every turn in per-turn context modes, and after a context truncation), otherwise only the ids appended
    after the previous response (closing of that turn, the new user turn, the generation prompt). Concatenating a
    segment's ``prompt_ids + response_ids`` turn by turn gives the exact sequence the model saw and produced.

    ``truncated`` is True when the response hit ``rollout.max_new_tokens`` before closing the answer (the policy's
    ``finish_reason`` was ``length`` and no stop string, ``</answer>``, is in the response).
    """

    observation: str = ""
    state_key: str = ""
    new_segment: bool = True
    prompt_ids: list[int] = attrs.field(factory=list)
    response_ids: list[int] = attrs.field(factory=list)
    logprobs: list[float] = attrs.field(factory=list)
    response_text: str = ""
    reasoning: str = ""
    actions: list[str] = attrs.field(factory=list)
    reward: float = 0.0
    format_penalty: float = 0.0
    info: dict[str, Any] = attrs.field(factory=dict)
    truncated: bool = False


@attrs.define
class Trajectory:
    """One episode of one env instance.

    :ivar env: the env or variant name it ran on.
    :ivar group_id: trajectories sharing it started from the same seed.
    :ivar score: the trajectory's training score (rewards + format penalties, after any normalisation).
    :ivar env_error: set when the env raised; such a trajectory is excluded from updates.
    :ivar mean_entropy: mean token entropy of its responses, when the policy reports it.
    """

    env: str
    group_id: int
    seed: int
    turns: list[Turn] = attrs.field(factory=list)
    success: bool = False
    score: float = 0.0
    env_error: str | None = None
    mean_entropy: float | None = None
    episode_id: int = 0
    context_truncations: int = 0

    @property
    def total_reward(self) -> float:
        """Sum of the env's rewards over all turns (no penalties)."""
        return float(sum(t.reward for t in self.turns))

    @property
    def response_length(self) -> int:
        """Number of generated tokens over all turns."""
        return sum(len(t.response_ids) for t in self.turns)


@attrs.define
class RolloutBatch:
    """The trajectories of one rollout step."""

    trajectories: list[Trajectory] = attrs.field(factory=list)

    def group_ids(self) -> list[int]:
        """Distinct group ids, in first-seen order."""
        return list(dict.fromkeys(t.group_id for t in self.trajectories))

    def groups(self) -> dict[int, list[Trajectory]]:
        """Trajectories by group id (first-seen order)."""
        out: dict[int, list[Trajectory]] = {}
        for t in self.trajectories:
            out.setdefault(t.group_id, []).append(t)
        return out

    def select_groups(self, group_ids: Any) -> RolloutBatch:
        """A new batch holding only the given groups (whole groups, original order)."""
        keep = set(group_ids)
        return RolloutBatch([t for t in self.trajectories if t.group_id in keep])

    def fingerprint(self) -> str:
        """A digest of the whole content (used to check that components do not mutate their input)."""
        blob = json.dumps(attrs.asdict(self), sort_keys=True, default=repr)
        return hashlib.sha256(blob.encode()).hexdigest()

    def __iter__(self) -> Iterator[Trajectory]:
        return iter(self.trajectories)

    def __len__(self) -> int:
        return len(self.trajectories)


def _plain(value: Any) -> Any:
    """JSON for what env infos may hold beyond JSON types (numpy scalars and arrays, tuples, sets)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    raise TypeError(f"cannot record a {type(value).__name__} in a trajectory: {value!r:.80}")


def write_batches(path: str | os.PathLike[str], batches: list[RolloutBatch]) -> None:
    """Write ``batches`` (one rollout step: the first batch and any extra rounds) to ``path`` as gzipped JSON lines,
    one trajectory per line tagged with its batch index, atomically (a partial file never appears)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with gzip.open(tmp, "wt", encoding="utf-8") as fh:
            for i, batch in enumerate(batches):
                for traj in batch:
                    fh.write(json.dumps({"batch": i, **attrs.asdict(traj)}, default=_plain) + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_batches(path: str | os.PathLike[str]) -> list[RolloutBatch]:
    """Read what :func:`write_batches` wrote: the same trajectories, token ids, log-probs and rewards."""
    batches: list[RolloutBatch] = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            index, turns = row.pop("batch"), [Turn(**t) for t in row.pop("turns")]
            while len(batches) <= index:
                batches.append(RolloutBatch())
            batches[index].trajectories.append(Trajectory(**row, turns=turns))
    return batches


def random_batch(seed: int, n_groups: int | None = None, group_size: int | None = None) -> RolloutBatch:
    """A random batch for contract tests: random group counts and sizes, rewards with ties, zeros and
    identical groups, random entropies and lengths."""
    rng = random.Random(seed)
    n_groups = n_groups if n_groups is not None else rng.randint(1, 12)
    group_size = group_size if group_size is not None else rng.randint(1, 6)
    trajs = []
    for g in range(n_groups):
        kind = rng.random()
        for _ in range(group_size):
            if kind < 0.25:
                reward = 0.0
            elif kind < 0.4:
                reward = 1.0
            else:
                reward = rng.choice([0.0, 1.0, -0.1, 10.0, rng.uniform(-2, 2)])
            n_turns = rng.randint(1, 3)
            turns = [Turn(response_ids=list(range(rng.randint(1, 20))), reward=reward / n_turns)
                     for _ in range(n_turns)]
            trajs.append(Trajectory(env="random", group_id=g * 7 + 3, seed=g, turns=turns, success=reward > 0,
                                    score=reward, mean_entropy=rng.uniform(0.0, 3.0)))
    return RolloutBatch(trajs)
