"""Starting runs, and the scripted-policy rollout run (``ragen rollout``).

:func:`start_run` is shared by every run kind: it creates the run directory, writes the resolved config and the plugin
list, logs both, and calls ``ragen_on_run_start``. :func:`run_scripted` rolls env groups out with a scripted policy
(random valid actions, or the env's oracle) through the same lifecycle hooks a trainer calls — a baseline for envs
and a smoke test for plugins, with no model involved.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from pathlib import Path
from typing import Any

import yaml

from ragen_core.context import RunContext
from ragen_core.errors import RagenError
from ragen_core.log import get_logger, live_display
from ragen_core.log import progress as progress_display
from ragen_core.plugins import plugin_infos
from ragen_core.registry import with_filter_metrics
from ragen_core.starpo.chat import ChatCodec, TextTokenizer
from ragen_core.starpo.metrics import (
    STANDARD_INFO_KEYS,
    TRUNCATION_WARNING_RATE,
    final_info,
    info_metrics,
    rollout_metrics,
    warn_truncation,
)
from ragen_core.starpo.rollout import ScriptedPolicy, extra_round, make_episodes, run_lockstep

__all__ = ["STANDARD_INFO_KEYS", "TRUNCATION_WARNING_RATE", "execute", "final_info", "group_seeds", "info_metrics",
           "new_run_dir", "rollout_metrics", "run_scripted", "start_run", "warn_truncation"]


#: the numbers of a ``ragen rollout`` step logged on a terminal (JSON logs carry every ``rollout/*`` metric; all are in
#: ``metrics.jsonl``)
ROLLOUT_LOG_KEYS = ("rollout/success", "rollout/reward_mean", "rollout/format_penalty_rate", "rollout/turns_mean",
                    "rollout/filter_kept_ratio")


def new_run_dir(output_dir: str | Path, name: str, mode: str) -> Path:
    """Create and return ``<output_dir>/<name>-<mode>-<YYYYmmdd-HHMMSS>``, exclusively: when that folder exists (a run
    started in the same second), ``-2``, ``-3``, ... is appended until ``mkdir`` creates a new one, so two runs
    never share a directory."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    root = Path(output_dir)
    root.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_000):
        candidate = root / (f"{name}-{mode}-{stamp}" + (f"-{n}" if n > 1 else ""))
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise RagenError(f"cannot create a run directory under {str(root)!r}: 10,000 runs named {name!r} this second")


def start_run(resolved: Any, registries: Any, pm: Any, mode: str, run_dir: str | Path | None = None, *,
              continue_run: bool = False) -> RunContext:
    """Create the run directory, write ``config.yaml`` and ``plugins.json``, log them, call ``ragen_on_run_start``.

    Without ``run_dir`` a new directory is created under ``run.output_dir`` (:func:`new_run_dir`). A given
    ``run_dir`` must be new or empty unless ``continue_run`` (a resumed run continues in its own directory): a run
    never writes into another run's files.
    """
    cfg = resolved.config
    if run_dir is None:
        run_dir = new_run_dir(cfg.run.output_dir, cfg.run.name, mode)
    run_dir = Path(run_dir)
    if not continue_run and run_dir.is_dir() and any(run_dir.iterdir()):
        raise RagenError(f"run directory {str(run_dir)!r} is not empty: a new run does not write into another "
                         "run's files", hint="give a new --run-dir (or none: one is created under run.output_dir), "
                                             "or continue that run with --resume")
    run_dir.mkdir(parents=True, exist_ok=True)
    data = resolved.to_data()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    infos = plugin_infos(pm, registries)
    (run_dir / "plugins.json").write_text(json.dumps(infos, indent=2))
    log = get_logger("ragen.run", run=run_dir.name, mode=mode)
    if live_display():  # a terminal: one line each; the full config and plugin list are in the run directory
        log.info("config", summary=config_summary(data, trainer=mode != "rollout"), full=str(run_dir / "config.yaml"))
        log.info("plugins", loaded=", ".join(p["name"] for p in infos if p["status"] == "loaded"))
    else:
        log.info("config", config=data)
        log.info("plugins", plugins=[{k: p[k] for k in ("name", "distribution", "version", "status")}
                                     for p in infos])
    run = RunContext(resolved=resolved, registries=registries, pm=pm, run_dir=run_dir, log=log, mode=mode)
    run.hook.ragen_on_run_start(run=run)
    return run


def config_summary(data: dict[str, Any], *, trainer: bool = True) -> str:
    """One line of a resolved config (its ``to_data()``): trainer, model and steps (unless not ``trainer``), envs,
    rollout shape, filter, estimator."""
    section, rollout = (data.get("trainer") or {}) if trainer else {}, data.get("rollout") or {}
    parts = [f"trainer {section.get('name')}" + (f" ({section['model']}, {section.get('steps')} steps)"
                                                 if "model" in section else "")] if section.get("name") else []
    envs = [f"{e.get('name')}×{e['groups']}" if e.get("groups") else str(e.get("name")) for e in data.get("envs") or []]
    parts += [f"envs {', '.join(envs)}",
              f"rollout {rollout.get('env_groups')}×{rollout.get('group_size')}, {rollout.get('max_turn')} turns"]
    parts += [f"{key} {(data.get(key) or {}).get('name')}" for key in ("filter", "estimator")
              if (data.get(key) or {}).get("name")]
    return " · ".join(parts)


def group_seeds(seed_base: int, counter: int, n_groups: int) -> list[int]:
    """RAGEN's seeding: group ``i`` of the step whose counter is ``counter`` resets with ``seed_base + counter + i``."""
    return [seed_base + counter + i for i in range(n_groups)]


def run_scripted(run: RunContext, *, policy: str = "random", steps: int = 1, progress: bool = True) -> dict[str, Any]:
    """Roll out ``steps`` steps of env groups with a scripted ``policy`` (``random`` or ``oracle``).

    Each step resets ``rollout.env_groups`` groups (split over the configured envs) of ``rollout.group_size``
    trajectories with RAGEN's training seeds, plays up to ``max_turn`` turns of up to ``max_actions_per_turn``
    actions, applies the configured filter when it is installed (its metrics are reported; ``ctx.kept`` holds the
    kept groups), and goes through the step hooks. Metrics go to ``metrics.jsonl``. Returns the run summary; wrap the
    call in :func:`execute` for the run-level hooks.
    """
    from rich.progress import BarColumn, TextColumn, TimeRemainingColumn

    cfg, plan = run.config, run.resolved.env_plan
    codec = ChatCodec(TextTokenizer(), think=cfg.rollout.think)
    counter = 0
    result: dict[str, Any] = {"status": "completed", "steps": 0, "metrics": {}}
    filt = (run.registries.filters.get(cfg.filter.name).create(run.resolved.filter)
            if run.resolved.filter is not None else None)
    columns = [TextColumn("[bold]rollout"), BarColumn(), TextColumn("step {task.completed}/{task.total}"),
               TextColumn("{task.fields[summary]}"), TimeRemainingColumn()]
    with progress_display(*columns, enabled=progress) as bar:
        task = bar.add_task("rollout", total=steps, summary="")
        for step in range(1, steps + 1):
            t0 = time.perf_counter()
            seeds = group_seeds(cfg.rollout.seed_train, counter, cfg.rollout.env_groups)
            counter += cfg.rollout.env_groups
            batch = _scripted_batch(run, plan, seeds, codec, policy, cfg.run.seed + step)
            ctx = run.begin_step(step, batch)
            ctx.add_metrics(rollout_metrics(batch), source="core")
            if filt is not None:
                ctx.kept, metrics = _filtered(run, filt, batch, step, codec, policy)
                ctx.add_metrics(metrics, source=f"filter {cfg.filter.name}")
            run.end_step(ctx, {"timing_s/step": time.perf_counter() - t0}, "core")
            result["steps"], result["metrics"] = step, dict(ctx.metrics)
            run.log.info("step", step=step, **{k: round(v, 4) for k, v in ctx.metrics.items()
                                               if k.startswith("rollout/") and k.count("/") == 1
                                               and (k in ROLLOUT_LOG_KEYS or not live_display())})
            bar.update(task, advance=1, summary=f"success {ctx.metrics.get('rollout/success', 0.0):.2f}")
            if ctx.stop_reason:
                result.update(status="stopped", stop_reason=ctx.stop_reason)
                break
    return result


def _scripted_batch(run: RunContext, plan: Any, seeds: list[int], codec: ChatCodec, policy: str, seed: int) -> Any:
    cfg = run.config.rollout
    episodes = make_episodes(run.registries.envs, plan, seeds=seeds, group_size=cfg.group_size, config=cfg,
                             codec=codec)
    return run_lockstep(episodes, ScriptedPolicy.for_episodes(episodes, policy, seed=seed),
                        env_workers=cfg.env_workers)


def _filtered(run: RunContext, filt: Any, batch: Any, step: int, codec: ChatCodec, policy: str
              ) -> tuple[Any, dict[str, float]]:
    """The kept groups and the filter's metrics (with every filter's in-group statistics); a dynamic-sampling
    filter (one with ``collect``) rolls out extra rounds as the trainers do (:func:`extra_round`)."""
    if hasattr(filt, "collect"):
        rounds = [0]

        def more(n: int) -> Any:
            rounds[0] += 1
            plan, seeds, base = extra_round(run.resolved.env_plan, run.config.rollout.seed_train, step, rounds[0], n)
            extra = _scripted_batch(run, plan, seeds, codec, policy, run.config.run.seed + base)
            for traj in extra:
                traj.group_id += base
            return extra

        kept, selection = filt.collect(more, run.config.rollout.env_groups, batch)
    else:
        selection = with_filter_metrics(batch, filt.select(batch))
        kept = batch.select_groups(selection.kept_groups)
    return kept, {**selection.metrics, **(filt.metrics() if hasattr(filt, "metrics") else {})}


def execute(run: RunContext, body: Any) -> dict[str, Any]:
    """Run ``body(run) -> summary`` inside the run lifecycle.

    On success writes ``summary.json`` and calls ``ragen_on_run_end``. On failure calls ``ragen_on_error`` with the
    run context, then ``ragen_on_run_end`` with ``status="failed"``, and re-raises.
    """
    try:
        result = dict(body(run) or {})
    except BaseException as exc:
        result = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        (run.run_dir / "summary.json").write_text(json.dumps(result, indent=2, sort_keys=True))
        run.hook.ragen_on_error(ctx=run, error=exc)
        run.hook.ragen_on_run_end(run=run, result=result)
        raise
    result.setdefault("status", "completed")
    (run.run_dir / "summary.json").write_text(json.dumps(result, indent=2, sort_keys=True, default=str))
    run.hook.ragen_on_run_end(run=run, result=result)
    return result
