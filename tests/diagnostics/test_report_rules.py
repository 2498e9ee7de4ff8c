"""The report's advice rules on synthetic run folders: truncation, validation decline, and that no rule advises a
setting the run already has (its ``config.yaml``)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_plugins_diagnostics.report import RunData, advice, load_run
from tests.diagnostics.test_report import write_run


def config(**sections: dict[str, Any]) -> dict[str, Any]:
    """A config.yaml as a run writes it (only the keys the rules read), with ``sections`` merged in."""
    base: dict[str, Any] = {
        "rollout": {"env_groups": 8, "group_size": 4, "max_new_tokens": 64, "think": True, "temperature": 1.0,
                    "val_env_groups": 4, "val_group_size": 4},
        "filter": {"name": "none"},
        "estimator": {"name": "grpo"},
        "trainer": {"name": "torch", "model": "tiny", "steps": 30, "actor_lr": 1e-6, "entropy_coeff": 0.001,
                    "warm_start_steps": 0, "warm_start_lr": 0.001, "keep_best": True},
    }
    for name, values in sections.items():
        base[name] = {**base.get(name, {}), **values}
    return base


def lines_of(tmp_path: Path, records: list[dict[str, Any]], name: str = "run", **kwargs: Any) -> str:
    return "\n".join(advice(load_run(write_run(tmp_path / name, records, **kwargs))))


def bandit_decline() -> list[dict[str, Any]]:
    """The measured Bandit run of the issue: validation peaks at 0.812 (step 20), ends at 0.625 (step 30), while the
    in-group reward std falls from 0.51 to 0.06."""
    records = []
    for s in range(1, 31):
        r: dict[str, Any] = {"step": s, "train/success": 0.7, "rollout/format_penalty_rate": 0.0,
                             "rollout/in_group_reward_std": 0.51 if s <= 20 else 0.51 - 0.045 * (s - 20)}
        records.append(r)
    records[29]["rollout/in_group_reward_std"] = 0.06
    records += [{"step": 0, "val/success": 0.5}, {"step": 10, "val/success": 0.688},
                {"step": 20, "val/success": 0.812}, {"step": 30, "val/success": 0.625}]
    return records


# --------------------------------------------------------------------------------------------- truncation

def truncating(rate: float, val_rate: float | None = None, steps: int = 12) -> list[dict[str, Any]]:
    records = [{"step": s, "rollout/truncated_rate": rate, "rollout/in_group_reward_std": 0.5}
               for s in range(1, steps + 1)]
    if val_rate is not None:
        records.append({"step": steps, "val/truncated_rate": val_rate, "val/success": 0.3})
    return records


def test_truncation_names_the_budget_and_a_larger_one(tmp_path: Path) -> None:
    text = lines_of(tmp_path, truncating(0.5), config=config())
    assert "truncated answers: 50% of the turns over the last 10 steps hit rollout.max_new_tokens (64 tokens)" in text
    assert "rollout.max_new_tokens=128" in text and "rollout.think=false" in text
    assert "No problem found" not in text


def test_truncation_without_reasoning_does_not_advise_think_false(tmp_path: Path) -> None:
    text = lines_of(tmp_path, truncating(0.3), config=config(rollout={"think": False, "max_new_tokens": 100}))
    assert "rollout.max_new_tokens=200" in text and "rollout.think" not in text


def test_truncation_in_validation_alone_and_below_the_threshold(tmp_path: Path) -> None:
    text = lines_of(tmp_path, truncating(0.05, val_rate=0.25), "val", config=config())
    assert "25% of the validation turns at step 12" in text and "of the turns over the last" not in text
    quiet = lines_of(tmp_path, truncating(0.19, val_rate=0.1), "quiet", config=config())
    assert "truncated" not in quiet and "No problem found" in quiet
    assert "truncation" in quiet  # the no-problem line lists the rule


def test_truncation_without_a_config_still_advises(tmp_path: Path) -> None:
    text = lines_of(tmp_path, truncating(0.9))
    assert "raise rollout.max_new_tokens." in text and "tokens)" not in text


def test_format_failures_from_truncation_say_so(tmp_path: Path) -> None:
    records = [{**r, "rollout/format_penalty_rate": 0.8} for r in truncating(0.7)]
    text = lines_of(tmp_path, records, config=config())
    assert "format penalty rate above 50%" in text and "Many turns are also cut by rollout.max_new_tokens" in text


# --------------------------------------------------------------------------------------------- validation decline

def test_the_measured_bandit_decline_is_flagged(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", bandit_decline(), config=config(),
                    summary={"status": "completed", "steps": 30})
    (run / "checkpoints" / "best").mkdir(parents=True)
    (run / "checkpoints" / "best" / "state.json").write_text('{"step": 20, "val_success": 0.812}')
    text = "\n".join(advice(load_run(run)))
    assert "validation success fell from its best, 0.812 at step 20, to 0.625 at step 30" in text
    assert "in-group reward std went from 0.51 to 0.06" in text
    assert f"use the best model, kept in {run / 'checkpoints' / 'best'}" in text
    assert "lower trainer.actor_lr (now 1e-06, e.g. 5e-07)" in text
    assert "filter=top_p filter.value=0.9" in text
    # 16 validation trajectories each: the drop is about 1.2 standard errors, and the report says so
    se = math.sqrt(0.812 * 0.188 / 16 + 0.625 * 0.375 / 16)
    assert f"({(0.812 - 0.625) / se:.1f} standard errors on 16 validation trajectories each)" in text
    assert "No problem found" not in text


def test_the_report_names_the_best_checkpoint(tmp_path: Path) -> None:
    from ragen_plugins_diagnostics.report import write_report

    run = write_run(tmp_path / "run", bandit_decline()[:3], config=config(), summary={
        "status": "completed", "steps": 30, "best": {"step": 20, "val_success": 0.8125, "checkpoint": "r/best"}})
    assert "- best validation: 0.8125 at step 20 (`r/best`)" in write_report(run, tmp_path / "out").read_text()


def test_decline_advice_respects_what_the_run_has(tmp_path: Path) -> None:
    no_keep = lines_of(tmp_path, bandit_decline(), "a", config=config(trainer={"keep_best": False},
                                                                       filter={"name": "top_p", "value": 0.9}))
    assert "trainer.keep_best=true" in no_keep and "use the best model" not in no_keep
    assert "filter=top_p" not in no_keep and "filter.value" not in no_keep
    from_summary = lines_of(tmp_path, bandit_decline(), "b", config=config(),
                            summary={"best": {"step": 20, "val_success": 0.812, "checkpoint": "/x/best"}})
    assert "use the best model, kept in /x/best" in from_summary and "trainer.keep_best=true" not in from_summary


def test_small_or_relative_small_declines_and_a_best_last_are_not_flagged(tmp_path: Path) -> None:
    for name, values in (("small", [0.5, 0.9, 0.82]),       # 0.08 below the best
                         ("relative", [0.5, 0.9, 0.75]),    # 0.15 below, but 17% of the best
                         ("rising", [0.2, 0.5, 0.6])):
        records = [{"step": 10 * i, "val/success": v} for i, v in enumerate(values)]
        assert "fell from its best" not in lines_of(tmp_path, records, name, config=config()), name
    records = [{"step": 10 * i, "val/success": v} for i, v in enumerate([0.5, 0.6, 0.45])]
    assert "fell from its best, 0.6 at step 10, to 0.45 at step 20" in lines_of(tmp_path, records, "flag")


# --------------------------------------------------------------------------------------------- already has

def collapsing_everything(steps: int = 20) -> list[dict[str, Any]]:
    """Metrics that fire every rule that gives settings advice."""
    records = []
    for s in range(1, steps + 1):
        t = s / steps
        records.append({"step": s, "rollout/in_group_reward_std": math.exp(-0.5 * (s - 1)),
                        "rollout/format_penalty_rate": 0.8, "rollout/truncated_rate": 0.6,
                        "rollout/filter_kept_ratio": 0.1, "rollout/empty_after_filter": float(s == 3),
                        "collapse/first_turn/mi_estimate": 1.0 - 0.9 * t,
                        "collapse/first_turn/conditional_entropy_est": 1.0,
                        "collapse/trajectory/mi_estimate": 1.0 - 0.9 * t,
                        "collapse/trajectory/conditional_entropy_est": 1.0 - 0.9 * t,
                        "echo_trap/cross_group_duplicate_rate": 0.8})
    records += [{"step": 0, "val/success": 0.0}] + [{"step": s, "val/success": 0.0} for s in (4, 8, 12, 16, 20)]
    return records


def test_every_rule_fires_on_the_collapsing_run(tmp_path: Path) -> None:
    text = lines_of(tmp_path, collapsing_everything(), config=config())
    for needle in ("reward std collapsed", "format penalty rate above 50%", "truncated answers",
                   "validation success below 1%", "template collapse", "low-entropy collapse", "echo trap",
                   "the filter keeps 10%", "had nothing left after filtering"):
        assert needle in text, needle
    assert text.count("filter=top_p filter.value=0.9") >= 3
    assert "trainer.warm_start_steps=50" in text


def test_rules_do_not_advise_the_filter_or_warm_start_the_run_has(tmp_path: Path) -> None:
    cfg = config(filter={"name": "top_p", "value": 0.9, "include_zero": True},
                 trainer={"warm_start_steps": 50, "warm_start_lr": 0.002})
    text = lines_of(tmp_path, collapsing_everything(), config=cfg)
    assert "filter=top_p" not in text and "filter.value=0.9" not in text
    assert "already filters with top_p (filter.value 0.9): raise rollout.temperature (now 1) or " \
           "rollout.group_size (now 4)" in text
    assert "already filters with top_p (filter.value 0.9), the usual remedy" in text
    assert "trainer.warm_start_steps=50" not in text and "its warm start of 50 steps was not enough" in text
    assert "trainer.warm_start_steps=100" in text and "trainer.warm_start_lr (now 0.002)" in text
    assert "filter.include_zero" not in text
    assert "a higher filter.value (now 0.9)" in text
    looser = lines_of(tmp_path, collapsing_everything(), "top_p_1",
                      config=config(filter={"name": "top_p", "value": 1.0}))
    assert "filter=top_p" not in looser and "try filter.value=0.9" in looser
    assert "a higher filter.value" not in looser  # value 1 keeps every group already
    min_p = lines_of(tmp_path, collapsing_everything(), "min_p",
                     config=config(filter={"name": "min_p", "value": 0.5, "include_zero": False}))
    assert "a lower filter.value (now 0.5)" in min_p and "filter.include_zero=true" in min_p
    verl = lines_of(tmp_path, collapsing_everything(), "verl",
                    config=config(trainer={"name": "verl", "model": "Qwen/Qwen2.5-0.5B-Instruct",
                                           "warm_start_steps": None}))
    assert "warm_start" not in verl and "trainer.model is Qwen/Qwen2.5-0.5B-Instruct" in verl


ADVISED = re.compile(r"([a-z_]+(?:\.[a-z_]+)*)=([^\s,;:)]+?)(?=[\s,;:)]|\.(?:\s|$)|$)")


def _current(cfg: dict[str, Any], key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node.get("name") if isinstance(node, dict) else node


@settings(max_examples=60, deadline=None)
@given(filter_name=st.sampled_from(["none", "top_p", "top_k", "top_k_abs", "min_p", "dynamic"]),
       value=st.sampled_from([0.25, 0.5, 0.9, 1.0, 2.0]), include_zero=st.booleans(),
       warm=st.sampled_from([0, 25, 50, 100]), tokens=st.sampled_from([16, 64, 128, 256]), think=st.booleans(),
       keep_best=st.booleans(), trainer=st.sampled_from(["torch", "verl"]),
       temperature=st.sampled_from([0.5, 1.0, 1.5]), decline=st.booleans())
def test_no_rule_advises_a_setting_the_run_already_has(filter_name: str, value: float, include_zero: bool,
                                                       warm: int, tokens: int, think: bool, keep_best: bool,
                                                       trainer: str, temperature: float, decline: bool) -> None:
    """Every ``key=value`` the advice proposes differs from the run's own setting of that key."""
    trainer_section: dict[str, Any] = {"name": trainer, "keep_best": keep_best}
    if trainer == "torch":
        trainer_section["warm_start_steps"] = warm
    options = {"value": value, "include_zero": include_zero} if filter_name not in ("none", "dynamic") else {}
    cfg = config(filter={"name": filter_name, **options},
                 rollout={"max_new_tokens": tokens, "think": think, "temperature": temperature},
                 trainer=trainer_section)
    if trainer == "verl":
        del cfg["trainer"]["warm_start_steps"], cfg["trainer"]["warm_start_lr"], cfg["trainer"]["keep_best"]
    records = collapsing_everything()
    if decline:
        records += [{"step": 21, "val/success": 0.8}, {"step": 22, "val/success": 0.3}]
    steps: dict[int, dict[str, float]] = {}
    for r in records:
        steps.setdefault(r["step"], {}).update({k: float(v) for k, v in r.items() if k != "step"})
    lines = advice(RunData(Path("/nonexistent/run"), steps, config=cfg))
    advised = []
    for line in lines:
        pairs = ADVISED.findall(line)
        switches = any(key == "filter" for key, _v in pairs)  # filter=X's options are the new filter's
        advised += [(key, val) for key, val in pairs if not (switches and key.startswith("filter."))]
    assert advised, lines
    for key, text in advised:
        current = _current(cfg, key)
        assert current is None or yaml.safe_load(text) != current, (key, text, lines)


def test_the_report_says_in_one_line_whether_the_task_was_learned(tmp_path: Path) -> None:
    from ragen_plugins_diagnostics.report import learning_line, write_report

    learned = [{"step": 0, "val/success": 0.469, "val/random_success": 0.502}, {"step": 30, "val/success": 0.664},
               {"step": 60, "val/success": 0.914}]
    line = learning_line(load_run(write_run(tmp_path / "a", learned, config=config())))
    assert line == ("learning: validation success 0.469 (step 0) -> 0.914 (step 60), +44.5 points; +41.2 points "
                    "over a random policy with a perfect format (0.502): learned the task")
    report = write_report(tmp_path / "a").read_text()
    assert sum("learned the task" in x for x in report.splitlines()) == 1
    # format repair up to the random level is not learning (the old Sokoban default: 0.086 -> 0.141, random 0.145)
    repaired = [{"step": 0, "val/success": 0.086, "val/random_success": 0.145}, {"step": 25, "val/success": 0.141}]
    line = learning_line(load_run(write_run(tmp_path / "b", repaired, config=config())))
    assert line.endswith("at the random level: no task learned") and "+5.5 points" in line
    # a gain over random but not 20 points over both is reported as such; without a baseline only the gain
    some = [{"step": 0, "val/success": 0.5, "val/random_success": 0.5}, {"step": 10, "val/success": 0.6}]
    assert learning_line(load_run(write_run(tmp_path / "c", some, config=config()))).endswith("some gain over random")
    bare = [{"step": 0, "val/success": 0.2}, {"step": 10, "val/success": 0.3}]
    assert learning_line(load_run(write_run(tmp_path / "d", bare, config=config()))).endswith("+10.0 points")
    assert learning_line(load_run(write_run(tmp_path / "e", bare[:1], config=config()))) is None
