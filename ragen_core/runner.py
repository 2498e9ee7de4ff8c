"""Starting runs, and the scripted-policy rollout run (``ragen rollout``).

:func:`start_run` is shared by every run kind: it creates the run directory, writes the resolved config and the plugin
list, logs both, and calls ``ragen_on_run_start``. :func:`run_scripted` rolls env groups out with a scripted policy
(random valid actions, or the env's oracle) through the same lifecycle hooks a trainer calls — a baseline for envs
and a smoke test for plugins, with no model involved.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import numbers
import time
from pathlib import Path
from typing import Any

import yaml

from ragen_core.context import RunContext
from ragen_core.chat import ChatCodec, TextTokenizer
from ragen_core.data import RolloutBatch, Trajectory
from ragen_core.log import get_logger
from ragen_core.plugins import plugin_infos
from ragen_core.rollout import ScriptedPolicy, make_episodes, run_lockstep

__all__ = ["STANDARD_INFO_KEYS", "TRUNCATION_WARNING_RATE", "execute", "final_info", "group_seeds", "info_metrics",
           "rollout_metrics", "run_scripted", "start_run", "warn_truncation"]


def start_run(resolved: Any, registries: Any, pm: Any, mode: str, run_dir: str | Path | None = None) -> RunContext:
    """Create the run directory, write ``config.yaml`` and ``plugins.json``, log them, call ``ragen_on_run_start``."""
    cfg = resolved.config
    if run_dir is None:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        run_dir = Path(cfg.run.output_dir) / f"{cfg.run.name}-{mode}-{stamp}"
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    data = resolved.to_data()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    infos = plugin_infos(pm, registries)
    (run_dir / "plugins.json").write_text(json.dumps(infos, indent=2))
    log = get_logger("ragen.run", run=run_dir.name, mode=mode)
    log.info("config", config=data)
    log.info("plugins", plugins=[{k: p[k] for k in ("name", "distribution", "version", "status")} for p in infos])
    run = RunContext(resolved=resolved, registries=registries, pm=pm, run_dir=run_dir, log=log, mode=mode)
    run.hook.ragen_on_run_start(run=run)
    return run


def group_seeds(seed_base: int, counter: int, n_groups: int) -> list[int]:
    """RAGEN's seeding: group ``i`` of the step whose counter is ``counter`` resets with ``seed_base + counter + i``."""
    return [seed_base + counter + i for i in range(n_groups)]


#: the info keys every env reports (REFERENCE §7), covered by other metrics: never an ``info/`` metric
STANDARD_INFO_KEYS = frozenset({"success", "action_is_valid", "action_is_effective"})


def rollout_metrics(batch: RolloutBatch, prefix: str = "rollout") -> dict[str, float]:
    """Success, reward, pass@k per env variant and overall, format, truncation and error rates, lengths, and the
    env's own info metrics per variant (:func:`info_metrics`)."""
    metrics: dict[str, float] = {}
    ok = [t for t in batch if t.env_error is None]
    metrics[f"{prefix}/env_errors"] = float(len(batch) - len(ok))
    if not ok:
        return metrics
    turns = [turn for t in ok for turn in t.turns]
    metrics[f"{prefix}/success"] = sum(t.success for t in ok) / len(ok)
    metrics[f"{prefix}/reward_mean"] = sum(t.score for t in ok) / len(ok)
    metrics[f"{prefix}/turns_mean"] = sum(len(t.turns) for t in ok) / len(ok)
    if turns:
        metrics[f"{prefix}/format_penalty_rate"] = sum(turn.format_penalty != 0 for turn in turns) / len(turns)
        metrics[f"{prefix}/valid_action_rate"] = sum(bool(turn.actions) for turn in turns) / len(turns)
        metrics[f"{prefix}/response_length_mean"] = sum(len(turn.response_ids) for turn in turns) / len(turns)
        metrics[f"{prefix}/truncated_rate"] = sum(turn.truncated for turn in turns) / len(turns)
    metrics[f"{prefix}/context_truncated"] = float(sum(t.context_truncations for t in ok))
    for name in sorted({t.env for t in ok}):
        mine = [t for t in ok if t.env == name]
        metrics[f"{prefix}/{name}/success"] = sum(t.success for t in mine) / len(mine)
        metrics[f"{prefix}/{name}/reward_mean"] = sum(t.score for t in mine) / len(mine)
        groups: dict[int, list[Trajectory]] = {}
        for t in mine:
            groups.setdefault(t.group_id, []).append(t)
        metrics[f"{prefix}/{name}/pass@k"] = sum(any(t.success for t in g) for g in groups.values()) / len(groups)
        metrics.update({f"{prefix}/{name}/info/{key}": value for key, value in info_metrics(mine).items()})
    return metrics


#: a step whose share of truncated turns (``…/truncated_rate``) reaches this gets a ``responses_truncated`` warning
TRUNCATION_WARNING_RATE = 0.2


def warn_truncation(log: Any, step: int, metrics: dict[str, float], max_new_tokens: int,
                    threshold: float = TRUNCATION_WARNING_RATE) -> dict[str, float]:
    """Log one ``responses_truncated`` warning when a rate among ``rollout/truncated_rate``, ``val/truncated_rate``
    and ``eval/all/truncated_rate`` in ``metrics`` is at least ``threshold``: the rates, ``rollout.max_new_tokens``
    and the key to raise. Returns the high rates (empty: nothing logged). Every trainer calls it with its step's
    metrics."""
    high = {key: metrics[key] for key in ("rollout/truncated_rate", "val/truncated_rate", "eval/all/truncated_rate")
            if metrics.get(key, 0.0) >= threshold}
    if high:
        log.warning("responses_truncated", step=step, **{k: round(v, 4) for k, v in high.items()},
                    max_new_tokens=max_new_tokens,
                    hint=f"{max(high.values()):.0%} of the turns hit rollout.max_new_tokens={max_new_tokens} before "
                         f"</answer>; raise rollout.max_new_tokens (e.g. rollout.max_new_tokens={2 * max_new_tokens})")
    return high


def final_info(traj: Trajectory) -> dict[str, Any]:
    """The info of the trajectory's last env step ({} when no action ever reached the env)."""
    for turn in reversed(traj.turns):
        if turn.info:
            return turn.info
    return {}


def _info_number(value: Any) -> float | None:
    """An info value as a metric: numbers and booleans (as 0/1, numpy's too); None for anything else (text, lists,
    None) and for NaN or infinity."""
    if isinstance(value, (bool, numbers.Real)) or (hasattr(value, "dtype") and getattr(value, "shape", None) == ()):
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None
        return number if math.isfinite(number) else None
    return None


def info_metrics(trajectories: list[Trajectory]) -> dict[str, float]:
    """The env's own numeric info keys (REFERENCE §7: beyond ``success``, ``action_is_valid`` and
    ``action_is_effective``, numeric info keys become metrics): per key, the mean over ``trajectories`` of its value in
    the trajectory's :func:`final_info`, over the trajectories whose final info holds a number for it (booleans count
    as 0/1; text, lists, None, NaN and infinities are skipped). Keys are sorted; a ``/`` in a key becomes ``_``."""
    values: dict[str, list[float]] = {}
    for traj in trajectories:
        for key, value in final_info(traj).items():
            number = _info_number(value)
            if key not in STANDARD_INFO_KEYS and number is not None:
                values.setdefault(str(key).replace("/", "_"), []).append(number)
    return {key: math.fsum(vals) / len(vals) for key, vals in sorted(values.items())}


def run_scripted(run: RunContext, *, policy: str = "random", steps: int = 1, progress: bool = True) -> dict[str, Any]:
    """Roll out ``steps`` steps of env groups with a scripted ``policy`` (``random`` or ``oracle``).

    Each step resets ``rollout.env_groups`` groups (split over the configured envs) of ``rollout.group_size``
    trajectories with RAGEN's training seeds, plays up to ``max_turn`` turns of up to ``max_actions_per_turn``
    actions, applies the configured filter when it is installed (its metrics are reported; ``ctx.kept`` holds the
    kept groups), and goes through the step hooks. Metrics go to ``metrics.jsonl``. Returns the run summary; wrap the
    call in :func:`execute` for the run-level hooks.
    """
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    cfg = run.config
    plan = run.resolved.env_plan
    codec = ChatCodec(TextTokenizer(), think=cfg.rollout.think)
    counter = 0
    result: dict[str, Any] = {"status": "completed", "steps": 0, "metrics": {}}
    filt = None
    if run.resolved.filter is not None:
        filt = run.registries.filters.get(cfg.filter.name).create(run.resolved.filter)
    columns = [TextColumn("[bold]rollout"), BarColumn(), TextColumn("step {task.completed}/{task.total}"),
               TextColumn("{task.fields[summary]}"), TimeRemainingColumn()]
    console = Console(stderr=True)
    with Progress(*columns, console=console, disable=not progress or not console.is_terminal) as bar:
        task = bar.add_task("rollout", total=steps, summary="")
        for step in range(1, steps + 1):
            t0 = time.perf_counter()
            ctx = run.step_context(step)
            seeds = group_seeds(cfg.rollout.seed_train, counter, cfg.rollout.env_groups)
            counter += cfg.rollout.env_groups
            episodes = make_episodes(run.registries.envs, plan, seeds=seeds, group_size=cfg.rollout.group_size,
                                     config=cfg.rollout, codec=codec)
            ctx.batch = run_lockstep(episodes, ScriptedPolicy.for_episodes(episodes, policy, seed=cfg.run.seed + step),
                                     env_workers=cfg.rollout.env_workers)
            for traj in ctx.batch:
                if traj.env_error is not None:
                    run.log.warning("env_error", env=traj.env, seed=traj.seed, error=traj.env_error)
                    run.hook.ragen_on_error(ctx=ctx, error=RuntimeError(f"env {traj.env}: {traj.env_error}"))
            run.hook.ragen_on_rollout_end(ctx=ctx)
            ctx.add_metrics(rollout_metrics(ctx.batch), source="core")
            if filt is not None:
                selection = filt.select(ctx.batch)
                ctx.kept = ctx.batch.select_groups(selection.kept_groups)
                ctx.add_metrics(selection.metrics, source=f"filter {cfg.filter.name}")
            ctx.add_metrics({"timing_s/step": time.perf_counter() - t0}, source="core")
            run.collect_metrics(ctx)
            run.hook.ragen_on_step_end(ctx=ctx)
            run.write_metrics(step, ctx.metrics)
            warn_truncation(run.log, step, ctx.metrics, cfg.rollout.max_new_tokens)
            result["steps"], result["metrics"] = step, dict(ctx.metrics)
            run.log.info("step", step=step, **{k: round(v, 4) for k, v in ctx.metrics.items()
                                               if k.startswith("rollout/") and k.count("/") == 1})
            bar.update(task, advance=1, summary=f"success {ctx.metrics.get('rollout/success', 0.0):.2f}")
            if ctx.stop_reason:
                result["status"] = "stopped"
                result["stop_reason"] = ctx.stop_reason
                break
    return result


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
