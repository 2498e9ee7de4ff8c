"""``ragen rollout`` applies the configured filter as the trainers do: a third party's filter gets the in-group
statistics, and dynamic sampling rolls out extra rounds with fresh seeds and reports its metrics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragen_core.config import load_config, resolve_config
from ragen_core.plugins import build_plugin_manager, collect_registries
from ragen_core.runner import execute, run_scripted, start_run
from tests.filters.test_filter_metrics import COMMON, Plugin
from tests.needs import needs_plugin


def rollout(tmp_path: Path, *overrides: str, plugins: tuple[Any, ...] = ()) -> tuple[Any, dict[str, float]]:
    needs_plugin("ragen-plugins-envs", "rolls out FrozenLake")
    pm = build_plugin_manager(plugins=list(plugins))
    regs = collect_registries(pm)
    resolved = resolve_config(load_config(overrides=["env=frozenlake", "rollout.env_groups=8",
                                                     "rollout.group_size=4", "run.log_level=error", *overrides]),
                              regs, pm)
    run = start_run(resolved, regs, pm, "rollout", tmp_path / "run")
    kept: list[Any] = []

    class Keep:  # what the step saw as kept groups
        from ragen_core import hookimpl

        @hookimpl
        def ragen_on_step_end(self, ctx: Any) -> None:
            kept.append(ctx.kept)

    pm.register(Keep(), name="keep")
    result = execute(run, lambda r: run_scripted(r, steps=1, progress=False))
    return kept[0], result["metrics"]


def test_a_custom_filter_reports_the_in_group_statistics(tmp_path: Path) -> None:
    kept, metrics = rollout(tmp_path, "filter=every_other", plugins=(Plugin(),))
    assert set(COMMON) <= set(metrics)
    assert metrics["rollout/filter_kept_count"] == 4 and len(kept.group_ids()) == 4


def test_dynamic_sampling_rolls_out_more_rounds_with_fresh_seeds(tmp_path: Path) -> None:
    kept, metrics = rollout(tmp_path, "filter=dynamic")
    assert metrics["rollout/dynamic_sampling_rounds"] >= 1
    assert set(COMMON) <= set(metrics)
    if metrics["rollout/dynamic_sampling_short"] == 0:
        assert len(kept.group_ids()) == 8  # the batch is full of informative groups
    for group in kept.groups().values():  # every kept group has reward variance (dynamic sampling's criterion)
        assert len({t.score for t in group}) > 1
    first_round = set(range(8))
    extra = [g for g in kept.group_ids() if g not in first_round]
    assert all(g >= 10**7 for g in extra)  # extra rounds' group ids (and seeds) are new
    assert metrics["rollout/dynamic_sampling_rounds"] == 1 or extra
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert "rollout/dynamic_sampling_rounds" in lines[-1]
