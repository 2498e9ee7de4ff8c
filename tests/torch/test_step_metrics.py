"""Step metrics of the native trainer that count something: samples before and after the batch adjustment, the
generation rate under dynamic sampling, and what a validation logs."""

from __future__ import annotations

from typing import Any

import pytest

from ragen_core.data import RolloutBatch, Trajectory, Turn


def _traj(env: str, info: dict[str, Any], success: bool) -> Trajectory:
    return Trajectory(env=env, group_id=0, seed=0, turns=[Turn(response_ids=[1, 2], info=info)], success=success,
                      score=1.0 if success else -0.1)


def test_validation_logs_success_reward_pass_at_k_and_the_env_info_metrics() -> None:
    from ragen_plugins_torch.trainer import validation_metrics

    batch = RolloutBatch([_traj("sokoban", {"success": True, "box_target_distance": 0}, True),
                          _traj("sokoban", {"success": False, "box_target_distance": 2}, False),
                          _traj("frozenlake", {"distance_to_goal": 3, "on_ice": True}, False)])
    m = validation_metrics(batch)
    assert set(m) == {"val/success", "val/reward_mean", "val/sokoban/success", "val/sokoban/pass@k",
                      "val/sokoban/reward_mean", "val/frozenlake/success", "val/frozenlake/pass@k",
                      "val/frozenlake/reward_mean", "val/sokoban/info/box_target_distance",
                      "val/frozenlake/info/distance_to_goal", "val/frozenlake/info/on_ice"}
    assert m["val/sokoban/info/box_target_distance"] == 1.0 and m["val/frozenlake/info/on_ice"] == 1.0
    assert m["val/success"] == pytest.approx(1 / 3) and m["val/reward_mean"] == pytest.approx(0.8 / 3)
