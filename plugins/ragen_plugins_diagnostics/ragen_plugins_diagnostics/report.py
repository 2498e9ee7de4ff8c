"""The run health report: ``ragen report RUN_DIR [--out DIR]`` or :func:`write_report` at the end of a run.

Reads the run directory's ``metrics.jsonl`` (one JSON object per line with a ``step``; several lines of one step
are merged, later values winning, so a resumed run's repeated steps count once), and ``config.yaml``,
``summary.json`` and ``samples.jsonl`` when present (:mod:`.report_data`, :mod:`.report_samples`). Writes to the
output directory (default: the run directory):

- ``report.md`` and its PNG plots (:mod:`.report_plots`: success, reward, reward std, format-penalty and
  truncation rates, entropy, losses, response length, collapse, filter effect, echo trap; each only when its
  metrics exist). Without matplotlib the report is written without plots and says so;
- ``report.html`` (:mod:`.report_html`): the same report as one self-contained page (plots inlined, no network)
  with a trajectory viewer over ``samples.jsonl`` (``run.trajectory_samples`` best, worst and random
  trajectories per step), or how to turn the sample on when the run has none.

The *Advice* section applies plain rules to the metrics (see :func:`advice`); each line says what it saw, what it
means and what to try.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .report_data import FAMILIES as _FAMILIES
from .report_data import REGIME_NAMES, RunData, load_run
from .report_data import read_json as _read_json
from .report_html import Page, render_html
from .report_plots import make_plots
from .report_samples import read_samples

__all__ = ["RunData", "advice", "learning_line", "load_run", "write_report"]

_KEY_METRICS = (
    "train/success", "val/success", "rollout/reward_mean", "rollout/in_group_reward_std",
    "rollout/chosen_in_group_reward_std", "rollout/filter_kept_ratio", "rollout/format_penalty_rate",
    "rollout/truncated_rate", "val/truncated_rate", "rollout/response_length_mean", "collapse/valid_thinking_rate",
    *(f"collapse/{f}/{m}" for f in _FAMILIES for m in ("mi_estimate", "mi_seq_estimate", "mi_fraction",
                                                       "conditional_entropy_est", "retrieval_accuracy", "regime")),
    "echo_trap/duplicate_rate", "echo_trap/distinct_2",
)


# --------------------------------------------------------------------------------------------- advice

def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return math.fsum(values) / len(values)


def _thirds(values: list[float]) -> tuple[float, float]:
    """Mean of the first and of the last third (at least one value each)."""
    k = max(1, len(values) // 3)
    return _mean(values[:k]), _mean(values[-k:])


def advice(run: RunData) -> list[str]:
    """Plain-language findings, most important first. Rules:

    - the run stopped early (``summary.json``'s ``stop_reason``);
    - reward std collapse: the mean ``rollout/in_group_reward_std`` of the last 10 steps (at most half the run)
      is below 10% of that of the first 10; and whether :class:`~.early_stop.EarlyStop` would have stopped;
    - format: the mean ``rollout/format_penalty_rate`` of the last 10 steps is above 50%;
    - validation: the last 5 ``val/success`` values are all below 1%;
    - per collapse family with at least 3 points, comparing the first and last third: MI (``mi_fraction``, else
      ``mi_estimate``) falls by more than 20% while H(Z|X) stays above 80% of its early level → template collapse;
      both fall → low-entropy collapse; the latest regime when it is a collapse; retrieval accuracy at most 1.5×
      chance at the last point;
    - reasoning: the last ``collapse/valid_thinking_rate`` below 50%; the last
      ``echo_trap/cross_group_duplicate_rate`` above 50% (echo trap);
    - filtering: a mean ``rollout/filter_kept_ratio`` below 25%; steps with nothing left after filtering;
    - truncation: the mean ``rollout/truncated_rate`` of the last 10 steps, or the last ``val/truncated_rate``, is
      at least 20% (:data:`ragen_core.runner.TRUNCATION_WARNING_RATE`);
    - validation decline: the last ``val/success`` is at least 0.1 and 20% below the best earlier one.

    The advice reads the run's ``config.yaml`` and never proposes a setting the run already has (no
    ``filter=top_p`` for a run that filters with ``top_p``, no warm start of as many steps as it had, ...); the
    current value is named where it helps. When no rule fires, one line says so.
    """
    lines: list[str] = []
    summary = run.summary or {}
    if summary.get("stop_reason"):
        lines.append(f"The run stopped early at step {summary.get('steps', '?')}: {summary['stop_reason']}.")
    lines += _reward_std_advice(run)
    truncation = _truncation_advice(run)
    lines += _format_advice(run, truncated=bool(truncation))
    lines += truncation
    lines += _no_success_advice(run)
    lines += _validation_decline_advice(run)
    for family in _FAMILIES:
        lines += _collapse_advice(run, family)
    lines += _reasoning_advice(run)
    lines += _filter_advice(run)
    if not lines:
        lines.append("No problem found by the rules (reward std, format, truncation, validation, collapse regimes, "
                     "echo trap, filtering).")
    return lines


def _format_advice(run: RunData, truncated: bool) -> list[str]:
    """The format rule: a mean ``rollout/format_penalty_rate`` above 50% over the last 10 steps (``truncated``: the
    truncation rule fired too, which the line mentions)."""
    _steps, fmt = run.series("rollout/format_penalty_rate")
    if fmt and (late := _mean(fmt[-10:])) > 0.5:
        return [f"format penalty rate above 50% ({late:.0%} of turns over the last {len(fmt[-10:])} steps): "
                "the model has not learned the output format <think>…</think><answer>…</answer>; "
                f"{_format_remedy(run)}." + (" Many turns are also cut by rollout.max_new_tokens (below)."
                                             if truncated else "")]
    return []


def _no_success_advice(run: RunData) -> list[str]:
    """The validation rule: the last 5 ``val/success`` values are all below 1%."""
    _steps, val = run.series("val/success")
    if len(val) >= 5 and all(v < 0.01 for v in val[-5:]):
        return ["validation success below 1% in the last 5 validations: the policy does not solve the task; "
                f"check the env settings, or {_format_remedy(run, short=True)}."]
    return []


def _reasoning_advice(run: RunData) -> list[str]:
    """The reasoning rules: few turns with reasoning (last ``collapse/valid_thinking_rate`` below 50%), and the
    echo trap (last ``echo_trap/cross_group_duplicate_rate`` above 50%)."""
    lines = []
    _steps, think = run.series("collapse/valid_thinking_rate")
    if think and think[-1] < 0.5:
        lines.append(f"only {think[-1]:.0%} of turns contain reasoning between <think> and </think>: the MI "
                     "diagnostics rest on few pairs, and the model may be skipping its reasoning.")
    _steps, echo = run.series("echo_trap/cross_group_duplicate_rate")
    if echo and echo[-1] > 0.5:
        lines.append(f"echo trap: {echo[-1]:.0%} of reasoning strings repeat word for word across groups (different "
                     "initial states): the reasoning ignores the input; "
                     + (f"{remedy}, and " if (remedy := _filter_remedy(run)) else "")
                     + f"{_raise(run, 'trainer.entropy_coeff')}.")
    return lines


def _filter_advice(run: RunData) -> list[str]:
    """The filtering rules: a mean ``rollout/filter_kept_ratio`` below 25%, and steps with nothing left after
    filtering."""
    lines = []
    _steps, kept = run.series("rollout/filter_kept_ratio")
    if kept and _mean(kept) < 0.25:
        looser = _looser_filter(run)
        lines.append(f"the filter keeps {_mean(kept):.0%} of the groups on average: each update sees little data; "
                     f"{_raise(run, 'rollout.env_groups', 'a larger')}" + (f" or {looser}" if looser else "")
                     + " keeps more.")
    _steps, empty = run.series("rollout/empty_after_filter")
    if sum(empty):
        extra = ("; or filter.include_zero=true, so that groups whose rewards did not vary stay candidates"
                 if run.setting("filter.include_zero") is False else "")
        lines.append(f"{int(sum(empty))} step(s) had nothing left after filtering and were skipped: no group's rewards "
                     f"varied; {_raise(run, 'rollout.group_size')} or {_raise(run, 'rollout.temperature', '')}"
                     f"{extra}.")
    return lines


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _raise(run: RunData, key: str, verb: str = "raise") -> str:
    """``raise KEY (now V)``: advice to raise a setting, naming its current value when the config has it."""
    value = run.setting(key)
    now = f" (now {value:g})" if _number(value) is not None else ""
    return f"{verb} {key}{now}".strip()


def _format_remedy(run: RunData, short: bool = False) -> str:
    """What teaches the output format, given what the run already did: a warm start (a longer one when it had one),
    or a stronger model when its trainer has no warm start."""
    steps = _number(run.setting("trainer.warm_start_steps"))
    no_warm_start = steps is None and run.setting("trainer.name") == "verl"
    if not no_warm_start and not steps:
        return ("use trainer.warm_start_steps" + ("" if short else " (e.g. trainer.warm_start_steps=50, a short "
                                                  "supervised warm start on demonstrations)")
                + " or start from a stronger base model")
    if no_warm_start:  # the verl trainer has no warm start
        model = run.setting("trainer.model")
        return "start from a model that already answers in the format" + (f" (trainer.model is {model})" if model
                                                                            else "")
    lr = _number(run.setting("trainer.warm_start_lr"))
    assert steps is not None  # both None cases returned above
    return (f"its warm start of {steps:g} steps was not enough: more steps (e.g. trainer.warm_start_steps="
            f"{2 * steps:g})" + (f", a higher trainer.warm_start_lr (now {lr:g})" if lr is not None else "")
            + " or a stronger base model")


def _filter_remedy(run: RunData) -> str | None:
    """RAGEN-2's filter (``filter=top_p filter.value=0.9``); None when the run already filters that way (or
    stricter): see :func:`_filtering`."""
    if run.setting("filter.name") != "top_p":
        return "try filter=top_p filter.value=0.9 (trains on the groups whose rewards still vary)"
    value = _number(run.setting("filter.value"))
    if value is not None and value > 0.9:
        return f"try filter.value=0.9 (top_p now keeps the groups up to {value:g} of the score mass)"
    return None


def _filtering(run: RunData) -> str:
    value = _number(run.setting("filter.value"))
    return "the run already filters with top_p" + (f" (filter.value {value:g})" if value is not None else "")


def _looser_filter(run: RunData) -> str:
    """A looser setting of the run's filter ('' when none is possible)."""
    name, value = run.setting("filter.name"), _number(run.setting("filter.value"))
    if value is None or name not in ("top_p", "top_k", "top_k_abs", "min_p"):
        return "a looser filter"
    if name == "min_p":  # keeps scores >= value × max: a lower value keeps more
        return f"a lower filter.value (now {value:g})"
    if name in ("top_p", "top_k") and value >= 1:
        return ""
    return f"a higher filter.value (now {value:g})"


def _truncation_advice(run: RunData) -> list[str]:
    from ragen_core.runner import TRUNCATION_WARNING_RATE as limit

    _steps, rates = run.series("rollout/truncated_rate")
    v_steps, val = run.series("val/truncated_rate")
    late = _mean(rates[-10:]) if rates else 0.0
    if late < limit and not (val and val[-1] >= limit):
        return []
    seen = []
    if rates and late >= limit:
        seen.append(f"{late:.0%} of the turns over the last {len(rates[-10:])} steps")
    if val and val[-1] >= limit:
        seen.append(f"{val[-1]:.0%} of the validation turns at step {v_steps[-1]}")
    budget = _number(run.setting("rollout.max_new_tokens"))
    now = f" ({budget:g} tokens)" if budget is not None else ""
    to = f" (e.g. rollout.max_new_tokens={2 * budget:g})" if budget is not None else ""
    think = (", or rollout.think=false (answers without the reasoning part)"
             if run.setting("rollout.think") is True else "")
    return [f"truncated answers: {' and '.join(seen)} hit rollout.max_new_tokens{now} before closing </answer>: such a "
            f"turn takes no action and gets the format penalty; raise rollout.max_new_tokens{to}{think}."]


def _nearest(by_step: dict[int, float], step: int) -> float | None:
    if not by_step:
        return None
    return by_step[min(by_step, key=lambda s: (abs(s - step), s))]


def _validation_decline_advice(run: RunData) -> list[str]:
    """The last validation well below the best one (at least 0.1 and 20% of the best lower)."""
    steps, val = run.series("val/success")
    if len(val) < 2:
        return []
    best = max(val)
    at = steps[val.index(best)]
    last, last_step = val[-1], steps[-1]
    if last_step <= at or best - last < 0.1 or best - last < 0.2 * best:
        return []
    line = f"validation success fell from its best, {best:.3g} at step {at}, to {last:.3g} at step {last_step}"
    groups, size = _number(run.setting("rollout.val_env_groups")), _number(run.setting("rollout.val_group_size"))
    if groups and size:
        n = groups * size
        se = math.sqrt(best * (1 - best) / n + last * (1 - last) / n)
        if se > 0:
            line += f" ({(best - last) / se:.1f} standard errors on {n:g} validation trajectories each)"
    std = dict(zip(*run.series("rollout/in_group_reward_std")))
    s0, s1 = _nearest(std, at), _nearest(std, last_step)
    collapsed = s0 is not None and s1 is not None and s1 < 0.5 * s0
    if s0 is not None and s1 is not None:
        line += f"; the in-group reward std went from {s0:.3g} to {s1:.3g} over those steps"
        if collapsed:
            line += " (the groups lost the reward variance that gives the update its signal)"
    remedies = []
    best_dir = run.run_dir / "checkpoints" / "best"
    kept = _read_json(best_dir / "state.json") or (run.summary or {}).get("best") or {}
    if kept:
        where = str(best_dir) if (best_dir / "state.json").is_file() else kept.get("checkpoint", str(best_dir))
        step = f" (step {kept['step']})" if "step" in kept and kept["step"] != at else ""
        remedies.append(f"use the best model, kept in {where}{step} (ragen eval -m {where})")
    elif run.setting("trainer.keep_best") is False:
        remedies.append(f"train with trainer.keep_best=true to keep the model of step {at}")
    else:
        remedies.append(f"keep the model of the best validation (a checkpoint near step {at})")
    lr = _number(run.setting("trainer.actor_lr"))
    remedies.append(f"lower trainer.actor_lr (now {lr:g}, e.g. {lr / 2:g})" if lr else "lower trainer.actor_lr")
    if collapsed and (remedy := _filter_remedy(run)):
        remedies.append(remedy)
    return [line + ": " + "; ".join(remedies) + "."]


def _reward_std_advice(run: RunData) -> list[str]:
    from .early_stop import EarlyStop

    steps, std = run.series("rollout/in_group_reward_std")
    lines = []
    if len(std) >= 4:
        k = min(10, len(std) // 2)
        early, late = _mean(std[:k]), _mean(std[-k:])
        if early > 0 and late < 0.1 * early:
            lines.append(f"reward std collapsed to below 10% of its early level ({early:.3g} → {late:.3g}): the "
                         "policy gets no learning signal (the trajectories of a group all score the same); "
                         + (f"{remedy}, or {_raise(run, 'rollout.temperature')}." if (remedy := _filter_remedy(run))
                            else f"{_filtering(run)}: {_raise(run, 'rollout.temperature')} or "
                                 f"{_raise(run, 'rollout.group_size', '')}, so that groups vary."))
    stopper = EarlyStop()
    for step, metrics in sorted(run.steps.items()):
        reason = stopper.update(metrics)
        if reason:
            if not (run.summary or {}).get("stop_reason"):
                lines.append(f"the early-stop rules would have stopped this run at step {step}: {reason}.")
            break
    return lines


def _collapse_advice(run: RunData, family: str) -> list[str]:
    prefix = f"collapse/{family}/"
    label = family.replace("_", "-")
    key = prefix + ("mi_fraction" if run.has(prefix + "mi_fraction") else "mi_estimate")
    mi_by_step = dict(zip(*run.series(key)))
    h_by_step = dict(zip(*run.series(prefix + "conditional_entropy_est")))
    common = sorted(set(mi_by_step) & set(h_by_step))
    lines = []
    if len(common) >= 3:
        mi0, mi1 = _thirds([mi_by_step[s] for s in common])
        h0, h1 = _thirds([h_by_step[s] for s in common])
        what = "MI / log N" if key.endswith("mi_fraction") else "MI"
        if mi0 > 0 and mi1 < 0.8 * mi0:
            if h1 >= 0.8 * h0:
                lines.append(f"{label} MI falling while entropy holds ({what} {mi0:.3g} → {mi1:.3g}, H(Z|X) "
                             f"{h0:.3g} → {h1:.3g} nats/token): template collapse — the reasoning still looks "
                             "varied but no longer depends on the input; "
                             + (f"{remedy}." if (remedy := _filter_remedy(run)) else
                                f"{_filtering(run)}, the usual remedy; a stronger base model may be needed."))
            else:
                lines.append(f"{label} MI and entropy both falling ({what} {mi0:.3g} → {mi1:.3g}, H(Z|X) "
                             f"{h0:.3g} → {h1:.3g} nats/token): low-entropy collapse — the policy turns "
                             f"deterministic and input-independent; {_raise(run, 'trainer.entropy_coeff')} or "
                             f"{_raise(run, 'rollout.temperature', '')}"
                             + (f"; {remedy}." if (remedy := _filter_remedy(run)) else "."))
    r_steps, regime = run.series(prefix + "regime")
    if regime and int(regime[-1]) in (1, 3):
        lines.append(f"{label} regime at step {r_steps[-1]}: {REGIME_NAMES[int(regime[-1])]} (thresholds: H(Z|X) "
                     f"{run.collapse_option('entropy_threshold', 0.5):g} nats/token, MI "
                     f"{run.collapse_option('mi_fraction_threshold', 0.5):g} × log N).")
    acc_steps, acc = run.series(prefix + "retrieval_accuracy")
    chance = dict(zip(*run.series(prefix + "retrieval_accuracy_chance")))
    if acc and acc_steps[-1] in chance and chance[acc_steps[-1]] < 0.5 and acc[-1] <= 1.5 * chance[acc_steps[-1]]:
        lines.append(f"{label} reasoning barely identifies its prompt: retrieval accuracy {acc[-1]:.2f} against "
                     f"chance {chance[acc_steps[-1]]:.2f} at step {acc_steps[-1]}.")
    return lines


# --------------------------------------------------------------------------------------------- the report

def _fmt(value: float) -> str:
    return f"{value:.4g}"


def _config_lines(config: dict[str, Any] | None) -> list[str]:
    if not config:
        return []
    lines = []

    def name(section: Any) -> str:
        if isinstance(section, dict):
            extra = ", ".join(f"{k}={v}" for k, v in section.items() if k != "name" and not isinstance(v, (dict, list)))
            return f"{section.get('name', '?')}" + (f" ({extra})" if extra and len(extra) < 120 else "")
        return str(section)

    trainer = config.get("trainer")
    if isinstance(trainer, dict):
        lines.append(f"trainer: {trainer.get('name', '?')}, model {trainer.get('model', '?')}, "
                     f"{trainer.get('steps', '?')} steps")
    envs = config.get("envs")
    if isinstance(envs, list):
        lines.append("envs: " + ", ".join(f"{e.get('name')} × {e.get('groups')} groups" for e in envs
                                            if isinstance(e, dict)))
    for key in ("filter", "estimator"):
        if key in config:
            lines.append(f"{key}: {name(config[key])}")
    diags = config.get("diagnostics")
    if isinstance(diags, list) and diags:
        lines.append("diagnostics: " + ", ".join(d.get("name", "?") if isinstance(d, dict) else str(d)
                                                   for d in diags))
    return lines


#: points of validation success above both step 0 and the random baseline that count as learning the task
LEARNED_POINTS = 20.0


def learning_line(run: RunData) -> str | None:
    """One line on whether the run learned the task: validation success at the first and the last validation,
    against ``val/random_success`` (random valid actions in a perfect format on the same validation set, logged
    by the torch trainer at step 0) when the run has it; None without two validations."""
    steps, values = run.series("val/success")
    if len(values) < 2:
        return None
    gain = 100 * (values[-1] - values[0])
    text = (f"learning: validation success {_fmt(values[0])} (step {steps[0]}) -> {_fmt(values[-1])} "
            f"(step {steps[-1]}), {gain:+.1f} points")
    _, randoms = run.series("val/random_success")
    if not randoms:
        return text
    over = 100 * (values[-1] - randoms[0])
    verdict = ("learned the task" if min(gain, over) >= LEARNED_POINTS
               else "at the random level: no task learned" if over < 5 else "some gain over random")
    return text + f"; {over:+.1f} points over a random policy with a perfect format ({_fmt(randoms[0])}): {verdict}"


def _replay_line(replay: Any) -> str | None:
    """What a replay (``ragen train --replay``) trained on: the recorded run and its steps; None for a run that
    sampled its own rollouts."""
    if not isinstance(replay, dict) or not replay.get("run_dir"):
        return None
    steps = replay.get("steps")
    span = f"steps {steps[0]}–{steps[1]} of " if isinstance(steps, list) and len(steps) == 2 else ""
    recorded = f" ({replay['recorded_steps']} recorded)" if replay.get("recorded_steps") is not None else ""
    return f"replay: trained on the recorded rollouts of {span}`{replay['run_dir']}`{recorded}"


def _header_lines(run: RunData) -> list[str]:
    """The report's opening lines (Markdown ``code`` spans; ``report.md`` lists them, ``report.html`` too)."""
    summary = run.summary or {}
    steps = sorted(run.steps)
    lines = [f"run directory: `{run.run_dir}`"]
    if summary:
        lines.append(f"status: {summary.get('status', '?')}, steps: {summary.get('steps', '?')}"
                     + (f", stopped: {summary['stop_reason']}" if summary.get("stop_reason") else ""))
    if (line := _replay_line(summary.get("replay") or _read_json(run.run_dir / "replay.json"))) is not None:
        lines.append(line)
    best = summary.get("best")
    if isinstance(best, dict) and {"step", "val_success"} <= set(best):
        lines.append(f"best validation: {best['val_success']:.4g} at step {best['step']}"
                     + (f" (`{best['checkpoint']}`)" if best.get("checkpoint") else ""))
    lines.append(f"metrics: {len(steps)} logged steps" + (f" ({steps[0]}–{steps[-1]})" if steps else ""))
    if (line := learning_line(run)) is not None:
        lines.append(line)
    if run.skipped_lines:
        lines.append(f"{run.skipped_lines} line(s) of metrics.jsonl were not readable and were skipped")
    return lines + _config_lines(run.config)


def _key_rows(run: RunData) -> list[tuple[str, str, str, str, str]]:
    """The key metrics the run has: name, first and last value (with their steps), min, max."""
    rows = []
    for key in _KEY_METRICS:
        s, values = run.series(key)
        if values:
            rows.append((key, f"{_fmt(values[0])} (step {s[0]})", f"{_fmt(values[-1])} (step {s[-1]})",
                         _fmt(min(values)), _fmt(max(values))))
    return rows


def _markdown(page: Page) -> str:
    md = [f"# {page.title}", "", *(f"- {line}" for line in page.header), "", "## Advice", ""]
    md += [f"- {line}" for line in page.advice]
    if page.rows:
        md += ["", "## Key metrics", "", "| metric | first | last | min | max |", "|---|---|---|---|---|"]
        md += [f"| `{key}` | {first} | {last} | {low} | {high} |" for key, first, last, low, high in page.rows]
    md += ["", "## Plots", ""]
    md += [f"- {note}" for note in page.notes] + ([""] if page.notes else [])
    for plot in page.plots:
        md += [f"### {plot.spec.title}", "", plot.spec.caption, "", f"![{plot.spec.title}]({plot.path.name})", ""]
    samples = page.samples
    md += ["## Trajectories", ""]
    if samples.steps:
        md.append(f"`samples.jsonl` holds the sampled trajectories of {samples.recorded} steps: open `report.html` "
                  "for the trajectory viewer.")
    else:
        md.append("No trajectory sample (`samples.jsonl`): `run.trajectory_samples=N` keeps the N best, N worst and "
                  "N random trajectories of each step for `report.html`'s viewer.")
    return "\n".join(md).rstrip() + "\n"


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write ``report.md`` with its PNG plots, and ``report.html`` (the same report as one self-contained page,
    with the trajectory viewer), for the run in ``run_dir`` into ``out`` (default: ``run_dir``); returns the path
    of ``report.md``."""
    run = load_run(run_dir)
    target = Path(out) if out is not None else run.run_dir
    target.mkdir(parents=True, exist_ok=True)
    plots, notes = make_plots(run, target)
    page = Page(f"Run report: {run.run_dir.name}", _header_lines(run), advice(run), _key_rows(run), plots, notes,
                read_samples(run.run_dir))
    report = target / "report.md"
    report.write_text(_markdown(page), encoding="utf-8", errors="replace")
    (target / "report.html").write_text(render_html(page), encoding="utf-8", errors="replace")
    return report
