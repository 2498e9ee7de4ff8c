"""The per-step trajectory sample (``samples.jsonl``) that ``ragen report``'s viewer reads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_core.data import RolloutBatch, Trajectory, Turn, random_batch
from ragen_core.runner import execute, run_scripted
from ragen_core.starpo.samples import pick_samples, sample_record, write_samples
from tests.core.test_lifecycle import make_run


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10_000), per_pick=st.integers(0, 8))
def test_picks_are_the_extremes_and_each_trajectory_once(seed: int, per_pick: int) -> None:
    batch = random_batch(seed)
    picks = pick_samples(batch, per_pick, seed)
    chosen = [id(t) for _p, t in picks]
    assert len(chosen) == len(set(chosen)) == min(len(batch), 3 * per_pick)
    by_pick = {name: [t.score for p, t in picks if p == name] for name in ("best", "worst", "random")}
    assert all(len(v) <= per_pick for v in by_pick.values())
    others = [t.score for t in batch if id(t) not in {id(x) for p, x in picks if p == "best"}]
    assert not by_pick["best"] or not others or min(by_pick["best"]) >= max(others)
    middle = [t.score for t in batch if id(t) not in {id(x) for p, x in picks if p in ("best", "worst")}]
    assert not by_pick["worst"] or not middle or max(by_pick["worst"]) <= min(middle)
    assert picks == pick_samples(batch, per_pick, seed)  # the same seed, the same sample


def test_record_holds_what_the_viewer_shows() -> None:
    turn = Turn(observation="_P\nG_", response_text=" go left</think><answer>Left || Up</answer>", reasoning="go left",
                actions=["Left", "Up"], reward=0.5, format_penalty=0.0, info={"pos": np.array([1, 2])})
    bad = Turn(observation="x", response_text=" rambling", format_penalty=-0.1, truncated=True)
    traj = Trajectory(env="frozenlake", group_id=3, seed=3, turns=[turn, bad], success=True, score=0.4,
                      episode_id=9)
    record = sample_record(7, "best", traj)
    assert record["step"] == 7 and record["pick"] == "best" and record["reward"] == 0.5 and record["success"]
    first, second = record["turns"]
    assert first["response"] == "<think> go left</think><answer>Left || Up</answer>"
    assert first["answer"] == "Left || Up" and first["actions"] == ["Left", "Up"] and first["format_ok"]
    assert second["answer"] == "" and not second["format_ok"] and second["truncated"]
    assert sample_record(1, "random", traj, "<answer>")["turns"][0]["response"].startswith("<answer> go left")


def test_write_appends_whole_lines_with_numpy_infos(tmp_path: Path) -> None:
    batch = RolloutBatch([Trajectory(env="e", group_id=0, seed=0, score=float(i),
                                     turns=[Turn(info={"grid": np.zeros((2, 2)), "n": np.int64(i)})])
                          for i in range(10)])
    path = tmp_path / "samples.jsonl"
    assert write_samples(path, 1, batch, 2, seed=0) == 6
    assert write_samples(path, 2, batch, 0, seed=0) == 0
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["pick"] for r in rows] == ["best"] * 2 + ["worst"] * 2 + ["random"] * 2
    assert [r["score"] for r in rows[:4]] == [9.0, 8.0, 0.0, 1.0]
    assert rows[0]["turns"][0]["info"] == {"grid": [[0.0, 0.0], [0.0, 0.0]], "n": 9}


def test_a_rollout_run_writes_its_sample_per_step(tmp_path: Path) -> None:
    run = make_run(tmp_path, overrides=["run.trajectory_samples=1"])
    execute(run, lambda r: run_scripted(r, steps=3, progress=False))
    rows = [json.loads(line) for line in (run.run_dir / "samples.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert all(r["turns"] and r["turns"][0]["observation"] for r in rows)


def test_sampling_off_writes_no_file(tmp_path: Path) -> None:
    run = make_run(tmp_path, overrides=["run.trajectory_samples=0"])
    execute(run, lambda r: run_scripted(r, steps=1, progress=False))
    assert not (run.run_dir / "samples.jsonl").exists()
