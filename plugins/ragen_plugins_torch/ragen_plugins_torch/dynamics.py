"""Dynamics pretraining: before the format warm-start, the model learns to predict the env's next observation.

The data are random-play transitions in the run's own prompt format: the rollout loop plays the run's envs with
:class:`~ragen_plugins_torch.sft.DemoPolicy` (uniformly random valid actions, never an oracle's), and every turn
becomes one sequence

    <the exact prompt the run shows at that turn> <the random answer> "\\nState:\\n" <the observation it led to>

with the loss on the observation after the marker only. The model so learns what each action does to each board,
in the very context where RL later asks it to choose one, and nothing about which action is good: any success gained
later is RL's. (A supervised check on the 3x3 lake, bench/README.md: after 300 such steps, 300 supervised policy
steps reach 0.87 exact-match against the oracle's move; from scratch they reach 0.61.)

The pretrained weights are cached in ragen's model cache (``dynamics-<hash>``, the hash of the base model, the env
plan, the rollout settings and the stage's own settings), written atomically like the built models, so a second run
with the same settings loads them in a second instead of training again.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import attrs

from ragen_core.errors import ConfigError, RagenError
from ragen_core.starpo.chat import ChatCodec
from ragen_core.starpo.rollout import make_episodes, run_lockstep

from .models import MARKER, _build_atomically, _is_built, _settings_hash, _versions, model_cache_dir
from .sft import DemoPolicy, check_demonstration_budget, scale_plan, warm_start

__all__ = ["MARKER_TEXT", "Transition", "dynamics_cache_folder", "pretrain_dynamics", "transition_samples"]

#: what separates a turn's answer from the observation the model learns to predict (RAGEN's own "State:" label)
MARKER_TEXT = "\nState:\n"
#: bump when the data or the objective change, so older cached weights are not reused
RECIPE = 1
#: the base of the reset seeds of the random-play episodes (training's are below 10**6 + ..., the warm-start's 10**6)
SEED_BASE = 2 * 10**6


@attrs.define
class Transition:
    """One training sequence: ``input_ids``, and ``response_mask`` 1 on the observation tokens the loss covers (the
    name :func:`~ragen_plugins_torch.sft.warm_start` reads)."""

    input_ids: list[int]
    response_mask: list[int]


class _Recorder:
    """Delegates to an env and remembers the observation of its last ``step``."""

    def __init__(self, env: Any) -> None:
        self._env, self.last_obs = env, None

    def step(self, action: Any) -> Any:
        out = self._env.step(action)
        self.last_obs = out[0]
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


def transition_samples(registries: Any, plan: list[Any], codec: ChatCodec, rollout: Any, *, groups: int,
                       seed: int, model: str | None = None) -> list[Transition]:
    """Random-play transitions of ``groups`` trajectories (one per group, seeds apart from training's, validation's
    and the warm-start's), as :class:`Transition` sequences in the run's prompt format (see the module docstring).

    Turns whose answer moved nothing (no action executed) still count: the observation they lead to is the same
    board, which is what the env does. Trajectories that hit an env error are skipped."""
    episodes = make_episodes(registries.envs, scale_plan(plan, groups),
                             seeds=[SEED_BASE + seed + i for i in range(groups)], group_size=1, config=rollout,
                             codec=codec)
    first: dict[str, Any] = {}
    for ep in episodes:
        first.setdefault(ep.name, ep.env)
        ep.env = _Recorder(ep.env)
    check_demonstration_budget(codec.tokenizer, list(first.items()), rollout, model=model)
    policy = DemoPolicy(codec.tokenizer, episodes, max_actions=rollout.max_actions_per_turn,
                        action_sep=rollout.action_sep, seed=seed, think=rollout.think)
    final = {ep.episode_id: ep.env for ep in episodes}
    out: list[Transition] = []
    for traj in run_lockstep(episodes, policy):
        if traj.env_error is not None:
            continue
        sequence: list[int] = []
        for i, turn in enumerate(traj.turns):
            sequence = list(turn.prompt_ids) if turn.new_segment else [*sequence, *turn.prompt_ids]
            sequence += turn.response_ids
            if i + 1 < len(traj.turns):
                nxt = traj.turns[i + 1].observation
            else:
                nxt = final[traj.episode_id].last_obs if turn.actions else turn.observation
            if nxt is None:
                continue
            target = codec.tokenizer.encode(MARKER_TEXT + str(nxt), add_special_tokens=False)
            out.append(Transition([*sequence, *target], [0] * len(sequence) + [1] * len(target)))
    return out


#: rollout keys the stage's data do not depend on: the batch shape and sampling of training and validation (random
#: play has its own seeds, group count and policy), reward shaping. Every other key (turns, actions per turn, context
#: mode and window, the token budget the prompt states, thinking, the separator) shapes the prompts, so it is hashed.
_NOT_IN_THE_DATA = frozenset({"env_groups", "group_size", "val_env_groups", "val_group_size", "seed_train", "seed_val",
                              "temperature", "top_p", "top_k", "val_temperature", "env_workers", "reward_norm",
                              "reward_norm_by", "use_turn_scores"})


def dynamics_cache_folder(base_model: str, plan: list[Any], rollout: Any, settings: dict[str, Any]) -> Path:
    """The cache folder of the pretrained weights for these inputs (see the module docstring). Only what the data
    and the training depend on is hashed: the env plan's proportions (``settings["groups"]`` trajectories in all),
    not its group counts, and not the rollout keys in :data:`_NOT_IN_THE_DATA`, so a run with another batch shape
    (a smoke run, a larger group) loads the same weights."""
    return model_cache_dir() / f"dynamics-{_settings_hash(_key(base_model, plan, rollout, settings))}"


def _key(base_model: str, plan: list[Any], rollout: Any, settings: dict[str, Any]) -> dict[str, Any]:
    folder = Path(base_model)
    fingerprint = ""
    for name in (MARKER, "config.json", "model.safetensors"):
        f = folder / name
        if f.is_file():
            digest = hashlib.sha256()
            with f.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
            fingerprint += f"{name}:{digest.hexdigest()};"
    shaping = {k: v for k, v in attrs.asdict(rollout).items() if k not in _NOT_IN_THE_DATA}
    scaled = scale_plan(plan, int(settings["groups"])) if "groups" in settings else plan
    return {"recipe": RECIPE, "base": str(folder.resolve()) if folder.exists() else base_model,
            "fingerprint": fingerprint, "plan": json.loads(json.dumps(scaled, default=str)),
            "rollout": json.loads(json.dumps(shaping, default=str)), **settings}


def pretrain_dynamics(policy: Any, registries: Any, plan: list[Any], codec: ChatCodec, rollout: Any, *,
                      base_model: str, steps: int, groups: int, lr: float, batch_size: int, seed: int,
                      log: Any = None) -> dict[str, float]:
    """Train ``policy.model`` on next-observation prediction, or load the cached result; returns metrics
    (``dynamics/loss_first``, ``dynamics/loss_last``, ``dynamics/samples``, ``dynamics/cached``)."""
    import torch

    model = policy.model
    # the parameter names too: a LoRA-wrapped model's state dict is not a plain one's, so neither loads the other's
    names = hashlib.sha256("\n".join(sorted(model.state_dict())).encode()).hexdigest()[:12]
    settings = {"steps": steps, "groups": groups, "lr": lr, "batch_size": batch_size, "seed": seed, "params": names}
    folder = dynamics_cache_folder(base_model, plan, rollout, settings)
    if _is_built(folder):
        record = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        model.load_state_dict(torch.load(folder / "weights.pt", map_location=policy.device, weights_only=True))
        if log is not None:
            log.info("dynamics_cached", folder=str(folder), loss_last=record["loss_last"])
        return {"dynamics/loss_first": record["loss_first"], "dynamics/loss_last": record["loss_last"],
                "dynamics/samples": float(record["samples"]), "dynamics/cached": 1.0}
    started = time.perf_counter()
    samples = transition_samples(registries, plan, codec, rollout, groups=groups, seed=seed)
    if not samples:
        raise ConfigError("trainer.dynamics_steps: random play produced no transitions (every trajectory hit an "
                          "env error); set trainer.dynamics_steps=0")
    if log is not None:
        log.info("dynamics_start", transitions=len(samples), steps=steps)
    losses = warm_start(policy, samples, steps=steps, lr=lr, batch_size=batch_size, seed=seed, log=log,
                        event="dynamics")
    record = {"loss_first": losses[0], "loss_last": losses[-1], "samples": len(samples), "settings": settings,
              "versions": _versions(), "seconds": round(time.perf_counter() - started, 1)}

    def build(tmp: Path) -> dict[str, Any]:
        torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, tmp / "weights.pt")
        return record

    try:
        _build_atomically(folder, build, force=False)
    except (RagenError, OSError) as exc:  # an unwritable cache costs the next run the stage's time, not this run
        if log is not None:
            log.warning("dynamics_not_cached", folder=str(folder), error=str(exc))
    return {"dynamics/loss_first": losses[0], "dynamics/loss_last": losses[-1],
            "dynamics/samples": float(len(samples)), "dynamics/cached": 0.0}
