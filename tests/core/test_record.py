"""Recorded rollouts read back as they were written (token ids, log-probs, rewards, infos)."""

from __future__ import annotations

import gzip
from pathlib import Path

import attrs
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_core.data import RolloutBatch, Trajectory, Turn, random_batch, read_batches, write_batches


@settings(max_examples=30, deadline=None)
@given(seeds=st.lists(st.integers(0, 10_000), min_size=1, max_size=3))
def test_round_trip(tmp_path_factory, seeds) -> None:
    path = tmp_path_factory.mktemp("rec") / "step_000001.jsonl.gz"
    batches = [random_batch(s) for s in seeds]
    write_batches(path, batches)
    back = read_batches(path)
    assert [attrs.asdict(b) for b in back] == [attrs.asdict(b) for b in batches]


def test_infos_with_numpy_values_are_recorded_as_plain_json(tmp_path: Path) -> None:
    turn = Turn(prompt_ids=[1, 2], response_ids=[3], logprobs=[-0.5], reward=1.0,
                info={"success": np.bool_(True), "pos": np.array([1, 2]), "n": np.int64(3), "seen": {2, 1}})
    batch = RolloutBatch([Trajectory(env="e", group_id=0, seed=0, turns=[turn], success=True)])
    write_batches(tmp_path / "x.jsonl.gz", [batch])
    info = read_batches(tmp_path / "x.jsonl.gz")[0].trajectories[0].turns[0].info
    assert info == {"success": True, "pos": [1, 2], "n": 3, "seen": [1, 2]}


def test_an_unrecordable_info_value_is_a_clear_error_and_leaves_no_file(tmp_path: Path) -> None:
    batch = RolloutBatch([Trajectory(env="e", group_id=0, seed=0, turns=[Turn(info={"obj": object()})])])
    try:
        write_batches(tmp_path / "x.jsonl.gz", [batch])
    except TypeError as exc:
        assert "cannot record a object" in str(exc)
    else:
        raise AssertionError("expected a TypeError")
    assert not list(tmp_path.iterdir())


def test_the_file_is_gzipped_json_lines(tmp_path: Path) -> None:
    write_batches(tmp_path / "x.jsonl.gz", [random_batch(1, 2, 2), random_batch(2, 1, 1)])
    lines = gzip.open(tmp_path / "x.jsonl.gz", "rt").read().splitlines()
    assert len(lines) == 5 and all(line.startswith('{"batch": ') for line in lines)
