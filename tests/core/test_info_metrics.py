"""The env's own info keys become rollout metrics: ``<prefix>/<variant>/info/<key>`` (REFERENCE §7)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_core.config import RolloutConfig
from ragen_core.data import RolloutBatch, Trajectory, Turn
from ragen_core.runner import STANDARD_INFO_KEYS, final_info, rollout_metrics
from ragen_core.starpo.chat import ChatCodec, TextTokenizer
from ragen_core.starpo.rollout import Episode, ScriptedPolicy, run_lockstep
from tests.core.toy import CounterEnv

values_st = st.one_of(
    st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3),
    st.none(), st.lists(st.integers(), max_size=2), st.sampled_from([np.float32(1.5), np.int64(-3), np.bool_(True)]))
info_st = st.dictionaries(st.sampled_from(["success", "action_is_valid", "action_is_effective", "dist", "goals",
                                           "flag", "a/b"]), values_st, max_size=5)
traj_st = st.tuples(st.sampled_from(["sokoban", "frozenlake"]), st.lists(info_st, max_size=4), st.booleans())


def reference(trajs: list[Trajectory], prefix: str) -> dict[str, float]:
    """The metric as specified, computed the slow way: per variant and key, the mean of the finite numbers (bools as
    0/1) that the info of the trajectory's last env step holds, over the trajectories without an env error."""
    out: dict[str, float] = {}
    for env in {t.env for t in trajs if t.env_error is None}:
        per_key: dict[str, list[float]] = {}
        for t in trajs:
            if t.env != env or t.env_error is not None:
                continue
            stepped = [turn.info for turn in t.turns if turn.info]
            for key, value in (stepped[-1] if stepped else {}).items():
                if key in ("success", "action_is_valid", "action_is_effective"):
                    continue
                if isinstance(value, (bool, np.bool_)):
                    number = 1.0 if value else 0.0
                elif isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(float(value)):
                    number = float(value)
                else:
                    continue
                per_key.setdefault(key.replace("/", "_"), []).append(number)
        for key, vals in per_key.items():
            out[f"{prefix}/{env}/info/{key}"] = float(sum(map(Fraction, vals)) / len(vals))  # exact: no overflow
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(traj_st, max_size=8), st.sampled_from(["rollout", "val"]))
def test_info_metrics_match_a_slow_reference(rows: list[tuple[str, list[dict[str, Any]], bool]], prefix: str) -> None:
    trajs = [Trajectory(env=env, group_id=i, seed=i, turns=[Turn(info=info) for info in infos],
                        env_error="boom" if failed else None) for i, (env, infos, failed) in enumerate(rows)]
    metrics = rollout_metrics(RolloutBatch(trajs), prefix)
    got = {k: v for k, v in metrics.items() if "/info/" in k}
    expected = reference(trajs, prefix)
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
    assert all(math.isfinite(v) for v in metrics.values())
    assert not any(k.rsplit("/", 1)[-1] in STANDARD_INFO_KEYS for k in got)


def test_huge_info_values_average_to_a_finite_metric() -> None:
    """Two finite values whose sum overflows a float (hypothesis found it) still average to a finite metric."""
    big = 8.988465674311579e307
    trajs = [Trajectory(env="maze", group_id=i, seed=i, turns=[Turn(info={"goals": big})]) for i in range(2)]
    assert rollout_metrics(RolloutBatch(trajs), "rollout")["rollout/maze/info/goals"] == pytest.approx(big)


def test_worked_example_final_info_bools_and_skipped_values() -> None:
    trajs = [
        # the last turn took no action (empty info): the final info is the second turn's
        Trajectory(env="maze", group_id=0, seed=0, turns=[Turn(info={"dist": 5, "flag": False}),
                                                          Turn(info={"dist": 2, "flag": True, "note": "x"}), Turn()]),
        Trajectory(env="maze", group_id=0, seed=0, turns=[Turn(info={"dist": float("nan"), "flag": False})]),
        Trajectory(env="maze", group_id=1, seed=1, turns=[Turn()]),  # never reached the env: no final info
        Trajectory(env="maze", group_id=1, seed=1, turns=[Turn(info={"dist": 100})], env_error="RuntimeError"),
        Trajectory(env="lake", group_id=2, seed=2, turns=[Turn(info={"success": True, "distance_to_goal": 0})]),
    ]
    m = rollout_metrics(RolloutBatch(trajs), "rollout")
    assert final_info(trajs[0]) == {"dist": 2, "flag": True, "note": "x"} and final_info(trajs[2]) == {}
    assert m["rollout/maze/info/dist"] == 2.0  # NaN skipped, the failed env's 100 left out
    assert m["rollout/maze/info/flag"] == 0.5  # True and False over the two trajectories that report it
    assert m["rollout/lake/info/distance_to_goal"] == 0.0
    assert "rollout/maze/info/note" not in m and "rollout/lake/info/success" not in m
    assert not any(k.startswith("rollout/info") for k in m)  # per variant only


def test_a_real_rollout_reports_the_env_info_of_the_last_step() -> None:
    """The counter env reports ``distance`` to its target: 0 at the end of an oracle episode; after random play,
    the mean distance at which the episodes ended (replayed here from the executed actions)."""
    config = RolloutConfig(max_turn=5, max_actions_per_turn=2, max_new_tokens=64)
    codec = ChatCodec(TextTokenizer(), think=True)
    for policy in ("oracle", "random"):
        eps = [Episode(CounterEnv(target=3, max_actions=6), name="counter", group_id=i // 2, seed=i // 2,
                       episode_id=i, config=config, codec=codec) for i in range(6)]
        batch = run_lockstep(eps, ScriptedPolicy.for_episodes(eps, policy, seed=7))
        ended = []
        for t in batch:
            value = 0
            for action in [a for turn in t.turns for a in turn.actions]:
                value += 1 if action == "Inc" else -1
                if value == 3:
                    break
            ended.append(abs(3 - value))
        m = rollout_metrics(batch, "val")
        assert m["val/counter/info/distance"] == pytest.approx(sum(ended) / len(ended))
        if policy == "oracle":
            assert all(t.success for t in batch) and m["val/counter/info/distance"] == 0.0
