"""Step metrics of the native trainer that count something: samples before and after the batch adjustment, the
generation rate under dynamic sampling, and what a validation logs."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path
from typing import Any

import pytest

from ragen_core.data import RolloutBatch, Trajectory, Turn

needs_torch = pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in ("torch", "transformers")),
                                 reason="needs torch and transformers")
pytestmark = pytest.mark.usefixtures("one_torch_thread")

SMALL = [
    "env=sokoban", "rollout.group_size=3", "rollout.max_turn=2", "rollout.max_new_tokens=12",
    "trainer.name=torch", "trainer.model=tiny", "trainer.mini_batch_size=4", "trainer.micro_batch_size=2",
    "trainer.steps=1", "trainer.save_every=0", "estimator=grpo", "diagnostics=[]",
]


def make_trainer(tmp_path: Path, *overrides: str) -> tuple[Any, Any]:
    """A set-up torch trainer and its run for ``SMALL`` plus ``overrides`` (no step taken yet)."""
    from ragen_core.config import load_config, resolve_config
    from ragen_core.plugins import build_plugin_manager, collect_registries, load_component_class
    from ragen_core.runner import start_run

    config = load_config(None, [*SMALL, *overrides])
    pm = build_plugin_manager(config)
    registries = collect_registries(pm)
    resolved = resolve_config(config, registries, pm, strict=True)
    trainer = load_component_class(registries.trainers.get("torch"))(resolved.trainer)
    run = start_run(resolved, registries, pm, "train", tmp_path / "run")
    trainer._setup(run)
    return trainer, run


@needs_torch
def test_samples_are_counted_before_and_after_the_batch_adjustment(tmp_path: Path) -> None:
    # three groups of 3, the filter keeps two: 6 samples (full context mode: one per trajectory), duplicated to 8
    trainer, run = make_trainer(tmp_path, "rollout.env_groups=3", "filter=top_k_abs", "filter.value=2",
                                "trainer.batch_adjust=duplicate")
    m = trainer._step(run, 1).metrics
    assert m["rollout/filter_kept_count"] == 2 and m["rollout/empty_after_filter"] == 0
    assert m["rollout/samples"] == 6.0
    assert m["rollout/adjusted_samples"] == 8.0
    # the update trained on the adjusted batch: the kept groups' 6 sequences plus 2 of them again
    lengths = {gid: [sum(len(turn.prompt_ids) + len(turn.response_ids) for turn in t.turns) for t in trajs]
               for gid, trajs in trainer._rounds[0].groups().items()}
    trained = m["rollout/trained_tokens"]
    assert len(lengths) == 3
    assert any(trained - sum(lengths[a] + lengths[b]) in {x + y for x in lengths[a] + lengths[b]
                                                          for y in lengths[a] + lengths[b]}
               for a, b in itertools.combinations(lengths, 2)), (trained, lengths)


@needs_torch
def test_tokens_per_second_covers_every_dynamic_sampling_round(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) \
        -> None:
    """A clock that advances one second per generated token and not otherwise: the rate must be exactly 1 token/s
    and all of the rollout's time generation, however many rounds dynamic sampling rolled out."""
    import types

    import ragen_plugins_torch.trainer as trainer_module

    # no group is informative (zero_eps is huge), so dynamic sampling spends all of its 3 rounds
    trainer, run = make_trainer(tmp_path, "rollout.env_groups=2", "filter=dynamic", "filter.max_rounds=3",
                                "filter.zero_eps=1e9")
    clock = {"now": 0.0}
    monkeypatch.setattr(trainer_module, "time", types.SimpleNamespace(perf_counter=lambda: clock["now"]))
    generate = trainer.policy.generate
    tokens = []

    def counted(requests: list[Any]) -> list[Any]:
        results = generate(requests)
        n = sum(len(r.token_ids) for r in results)
        tokens.append(n)
        clock["now"] += n
        return results

    monkeypatch.setattr(trainer.policy, "generate", counted)
    m = trainer._step(run, 1).metrics
    assert m["rollout/dynamic_sampling_rounds"] == 3 and len(trainer._rounds) == 3
    first_round = sum(len(turn.response_ids) for t in trainer._rounds[0] for turn in t.turns)
    total = sum(len(turn.response_ids) for batch in trainer._rounds for t in batch for turn in t.turns)
    assert total == sum(tokens) > first_round > 0
    assert m["timing_s/gen"] == total
    assert m["perf/tokens_per_s"] == 1.0
    assert m["timing_s/env"] == 0.0


def _traj(env: str, info: dict[str, Any], success: bool) -> Trajectory:
    return Trajectory(env=env, group_id=0, seed=0,
                      turns=[Turn(response_ids=[1, 2], info=info, format_penalty=0.0 if success else -0.1,
                                  truncated=env == "frozenlake")],
                      success=success, score=1.0 if success else -0.1)


def test_validation_logs_success_reward_pass_at_k_and_the_env_info_metrics() -> None:
    from ragen_plugins_torch.trainer import validation_metrics

    batch = RolloutBatch([_traj("sokoban", {"success": True, "box_target_distance": 0}, True),
                          _traj("sokoban", {"success": False, "box_target_distance": 2}, False),
                          _traj("frozenlake", {"distance_to_goal": 3, "on_ice": True}, False)])
    m = validation_metrics(batch)
    assert set(m) == {"val/success", "val/reward_mean", "val/format_penalty_rate", "val/truncated_rate",
                      "val/env_errors", "val/sokoban/success", "val/sokoban/pass@k",
                      "val/sokoban/reward_mean", "val/frozenlake/success", "val/frozenlake/pass@k",
                      "val/frozenlake/reward_mean", "val/sokoban/info/box_target_distance",
                      "val/frozenlake/info/distance_to_goal", "val/frozenlake/info/on_ice"}
    assert m["val/sokoban/info/box_target_distance"] == 1.0 and m["val/frozenlake/info/on_ice"] == 1.0
    assert m["val/success"] == pytest.approx(1 / 3) and m["val/reward_mean"] == pytest.approx(0.8 / 3)
    assert m["val/format_penalty_rate"] == pytest.approx(2 / 3)  # one turn each, two of them penalised
    assert m["val/truncated_rate"] == pytest.approx(1 / 3)  # the frozenlake turn was cut
    assert m["val/env_errors"] == 0.0


def test_validation_counts_env_errors_and_averages_the_rest() -> None:
    from ragen_plugins_torch.trainer import validation_metrics

    broken = _traj("sokoban", {}, False)
    broken.env_error = "RuntimeError: the env fell over"
    m = validation_metrics(RolloutBatch([_traj("sokoban", {"success": True}, True), broken,
                                         _traj("sokoban", {"success": False}, False)]))
    assert m["val/env_errors"] == 1.0
    assert m["val/success"] == pytest.approx(0.5)  # over the two trajectories whose env did not raise
