"""The ``wandb`` sink through the run lifecycle, offline: the run's history read back (with W&B's own reader)
equals metrics.jsonl; the run is finished with exit code 0, or 1 when the run fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragen_core import hookimpl
from tests.sinks.helpers import ROLLOUT, records, require, rollout, wandb_records


@pytest.fixture(autouse=True)
def _wandb() -> None:
    require("wandb")


def history(recs: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for r in recs:
        if r.get("type") == "history":
            item = r["history"]["item"]
            out[item["_step"]] = {k: v for k, v in item.items() if not k.startswith("_")}
    return out


def one(recs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [r[kind] for r in recs if r.get("type") == kind]
    assert len(found) == 1, f"{len(found)} {kind} records"
    return found[0]


def test_offline_history_equals_metrics_jsonl(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    res = rollout(run_dir, "run.name=wb-test",
                  "sinks=[{name: wandb, run_name: first, tags: [smoke], group: g1}]", steps=3)
    assert res.exit_code == 0, res.output
    recs = wandb_records(run_dir)
    hist = history(recs)
    written = records(run_dir)
    assert sorted(hist) == [1, 2, 3]
    for record in written:
        step = record.pop("step")
        assert set(hist[step]) == set(record)
        for name, value in record.items():
            assert hist[step][name] == pytest.approx(value, rel=1e-9, abs=1e-12), (name, step)
    started = one(recs, "run")
    assert started["project"] == "wb-test" and started["display_name"] == "first"
    assert started["tags"] == ["smoke"] and started["run_group"] == "g1" and started["job_type"] == "rollout"
    config = started["config"]["update"]
    assert config["rollout"]["group_size"] == 2 and config["sinks"][0]["name"] == "wandb"
    assert one(recs, "exit")["exit_code"] == 0


class Crasher:
    """Fails the run at step 2."""

    @hookimpl
    def ragen_on_step_end(self, ctx: Any) -> None:
        if ctx.step == 2:
            raise RuntimeError("boom at step 2")


def test_a_failed_run_finishes_the_wandb_run_with_exit_code_1(tmp_path: Path) -> None:
    from ragen_core.config import load_config, resolve_config
    from ragen_core.plugins import build_plugin_manager, collect_registries
    from ragen_core.runner import execute, run_scripted, start_run

    config = load_config(overrides=[*ROLLOUT, "sinks=[{name: wandb, project: crash}]"])
    pm = build_plugin_manager(config, plugins=[Crasher()])  # the installed plugins, and one that fails the run
    registries = collect_registries(pm)
    run = start_run(resolve_config(config, registries, pm, strict=False), registries, pm, "rollout",
                    tmp_path / "run")
    with pytest.raises(RuntimeError, match="boom"):
        execute(run, lambda r: run_scripted(r, steps=3, progress=False))
    recs = wandb_records(run.run_dir)
    assert sorted(history(recs)) == [1]
    assert one(recs, "exit")["exit_code"] == 1
