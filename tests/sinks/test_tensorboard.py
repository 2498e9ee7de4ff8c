"""The ``tensorboard`` sink through ``ragen rollout``: real event files whose scalars read back equal metrics.jsonl."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sinks.helpers import records, require, rollout, tb_scalars


@pytest.fixture(autouse=True)
def _tensorboard() -> None:
    require("tensorboard")


def test_scalars_read_back_equal_metrics_jsonl(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    res = rollout(run_dir, "sinks=[tensorboard]", "run.name=tb-test", steps=3)
    assert res.exit_code == 0, res.output
    written = records(run_dir)
    assert [r["step"] for r in written] == [1, 2, 3]
    files = list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    assert len(files) == 1 and files[0].stat().st_size > 0
    scalars, texts = tb_scalars(run_dir / "tensorboard")
    assert set(scalars) == {k for r in written for k in r if k != "step"}
    for record in written:
        step = record.pop("step")
        for name, value in record.items():
            assert scalars[name][step] == pytest.approx(value, rel=1e-6, abs=1e-6), (name, step)
    assert set(texts) == {"config"}
    assert "name: tb-test" in texts["config"] and "- name: tensorboard" in texts["config"]


def test_log_dir_and_every(tmp_path: Path) -> None:
    run_dir, elsewhere = tmp_path / "run", tmp_path / "tb" / "mine"
    res = rollout(run_dir, f"sinks=[{{name: tensorboard, log_dir: {elsewhere}, every: 2}}]", steps=5)
    assert res.exit_code == 0, res.output
    assert not (run_dir / "tensorboard").exists()
    scalars, _ = tb_scalars(elsewhere)
    written = {r["step"]: r for r in records(run_dir)}
    assert sorted(scalars["rollout/success"]) == [2, 4]
    assert scalars["rollout/reward_mean"][4] == pytest.approx(written[4]["rollout/reward_mean"], rel=1e-6)
