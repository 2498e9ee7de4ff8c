"""Every metric ragen writes is in docs/metrics.md.

Keys are collected from what the code actually emits: a scripted ``ragen rollout`` (the core's rollout metrics and a
filter's), every built-in filter and diagnostic run on synthetic batches, and (slow) a tiny training run of the
native trainer with a critic, the KL loss, a warm-start and validation, plus a ``ragen eval`` of the tiny model.
Glossary entries may be patterns: ``<variant>``, ``<family>`` or ``<k>`` stand for one path segment or part of one.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragen_core.cli import build_cli
from ragen_core.data import RolloutBatch, Trajectory, Turn, random_batch
from ragen_core.plugins import build_plugin_manager
from ragen_core.protocols import DiagnosticContext
from ragen_core.runner import rollout_metrics
from tests.docs.gen import ROOT, load_generator
from tests.plain_recipe import PLAIN

GLOSSARY = ROOT / "docs" / "metrics.md"


def documented(*, cpu_only: bool = False) -> list[str]:
    """The metric names (or patterns) in the first column of the glossary's tables (``cpu_only``: leave out the
    rows marked "`trainer: verl` only", which no CPU run can emit)."""
    names = []
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\|\s*`([^`]+)`\s*\|", line)
        if m and "/" in m.group(1) and not (cpu_only and "`trainer: verl` only" in line):
            names.append(m.group(1))
    return names


def _regex(pattern: str) -> re.Pattern[str]:
    parts = re.split(r"(<[a-z_]+>)", pattern)
    return re.compile("".join("[^/]+" if p.startswith("<") else re.escape(p) for p in parts) + "$")


def undocumented(keys: set[str]) -> list[str]:
    patterns = [_regex(p) for p in documented()]
    return sorted(k for k in keys if k != "step" and not any(p.match(k) for p in patterns))


def _run_keys(run_dir: Path) -> set[str]:
    return {k for line in (run_dir / "metrics.jsonl").read_text().splitlines() for k in json.loads(line)}


def _cli(args: list[str]) -> None:
    res = CliRunner().invoke(build_cli(build_plugin_manager()), args)
    assert res.exit_code == 0, res.output + repr(res.exception)


def component_keys() -> set[str]:
    """Metrics of every built-in filter and diagnostic on synthetic batches, and the env info metrics of a batch
    whose actions reached the env (the tiny model's runs may take no action) as a rollout and a validation log them."""
    from tests.diagnostics.helpers import CopyScorer, copy_batch

    registries = load_generator().builtin_registries()
    keys: set[str] = set()
    for spec in registries.filters:
        flt = spec.create()
        for seed in range(3):
            keys |= set(flt.select(random_batch(seed)).metrics)
        if hasattr(flt, "metrics"):
            keys |= set(flt.metrics())
    ctx = DiagnosticContext(batch=copy_batch(4, 2, n_turns=2), step=1, scorer=CopyScorer())
    for spec in registries.diagnostics:
        keys |= set(spec.create().compute(ctx))
    acted = RolloutBatch([Trajectory(env="sokoban", group_id=0, seed=0, turns=[Turn(info={"boxes_on_target": 0})])])
    keys |= set(rollout_metrics(acted))
    if importlib.util.find_spec("ragen_plugins_torch") is not None:
        from ragen_plugins_torch.trainer import validation_metrics

        keys |= set(validation_metrics(acted))
    return keys


def test_glossary_entries_are_well_formed() -> None:
    names = documented()
    assert len(names) == len(set(names)), "a metric is listed twice in docs/metrics.md"
    for name in names:
        assert re.fullmatch(r"[a-z_]+(/[a-z0-9_@<>]+)+", name), f"odd metric name in docs/metrics.md: {name!r}"


def test_scripted_rollout_and_component_metrics_are_documented(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _cli(["rollout", "envs=[{name: sokoban, groups: 1}, {name: frozenlake_det, groups: 1}]", "rollout.env_groups=2",
          "rollout.group_size=2", "rollout.max_turn=2", "filter=top_p", "--policy", "random", "--steps", "2",
          "--run-dir", str(run)])
    keys = _run_keys(run) | component_keys()
    assert {"rollout/success", "rollout/sokoban/pass@k", "rollout/filter_kept_ratio", "collapse/valid_thinking_rate",
            "collapse/first_turn/mi_estimate", "echo_trap/distinct_2", "rollout/dynamic_sampling_rounds"} <= keys
    missing = undocumented(keys)
    assert not missing, f"metrics missing from docs/metrics.md (add a row: meaning, healthy, what to do): {missing}"


@pytest.mark.slow
@pytest.mark.usefixtures("one_torch_thread")
def test_training_metrics_are_documented_and_the_glossary_is_not_stale(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    run = tmp_path / "run"
    _cli(["train", *PLAIN, "envs=[{name: sokoban, groups: 1}, {name: frozenlake_det, groups: 1}]",
          "rollout.env_groups=2", "rollout.group_size=2", "rollout.max_turn=2", "rollout.max_new_tokens=12",
          "rollout.val_env_groups=2", "rollout.val_group_size=1", "trainer.name=torch", "trainer.model=tiny",
          "trainer.steps=1", "trainer.mini_batch_size=4", "trainer.micro_batch_size=2",
          "trainer.warm_start_steps=1", "trainer.warm_start_groups=2", "trainer.use_kl_loss=true",
          "trainer.val_every=1", "trainer.save_every=0", "estimator=gae", "filter=none", "diagnostics=[echo_trap]",
          "--run-dir", str(run)])
    run_keys = _run_keys(run)
    assert {"actor/pg_loss", "actor/kl_loss", "critic/vf_loss", "warm_start/loss_last", "val/success"} <= run_keys
    _cli(["eval", "--model", "tiny", "--env", "sokoban", "--groups", "1", "--group-size", "2",
          "--run-dir", str(tmp_path / "eval")])
    eval_keys = _run_keys(tmp_path / "eval")
    assert {"eval/sokoban/success", "eval/all/pass@2"} <= eval_keys
    keys = run_keys | eval_keys | component_keys()
    missing = undocumented(keys)
    assert not missing, f"metrics missing from docs/metrics.md (add a row: meaning, healthy, what to do): {missing}"
    stale = [name for name in documented(cpu_only=True) if not any(_regex(name).match(k) for k in keys)]
    assert not stale, f"docs/metrics.md lists metrics nothing emits (renamed or removed?): {stale}"
