"""``ragen report`` / ``write_report`` on synthetic run directories."""

from __future__ import annotations

import json
import math
import sys

import pytest
import yaml

from ragen_plugins_diagnostics.report import advice, load_run, write_report

PNG = b"\x89PNG\r\n\x1a\n"


def write_run(root, records, *, config=None, summary=None, extra_lines=()):
    root.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r) for r in records] + list(extra_lines)
    (root / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    if config is not None:
        (root / "config.yaml").write_text(yaml.safe_dump(config))
    if summary is not None:
        (root / "summary.json").write_text(json.dumps(summary))
    return root


def collapsing_run(steps=30):
    """Reward std decays to ~1% of its start, the format is never learned, first-turn MI falls while the entropy
    holds (template collapse), the filter keeps some groups."""
    records = [{"step": 0, "val/success": 0.0}]
    for s in range(1, steps + 1):
        r = {"step": s, "train/success": min(0.5, 0.02 * s), "rollout/reward_mean": 0.1 * s,
             "rollout/in_group_reward_std": 1.0 * math.exp(-0.2 * (s - 1)),
             "rollout/chosen_in_group_reward_std": 1.2 * math.exp(-0.2 * (s - 1)),
             "rollout/filter_kept_ratio": 0.5, "rollout/format_penalty_rate": 0.7}
        if s == 1 or s % 5 == 0:
            t = s / steps
            r.update({"collapse/valid_thinking_rate": 0.9,
                      "collapse/first_turn/mi_estimate": 1.8 * (1 - t) + 0.1,
                      "collapse/first_turn/mi_seq_estimate": 2.0 * (1 - t) + 0.1,
                      "collapse/first_turn/mi_fraction": 0.95 * (1 - t) + 0.05,
                      "collapse/first_turn/mi_upper_bound": math.log(8),
                      "collapse/first_turn/conditional_entropy_est": 1.0 + 0.01 * (s % 3),
                      "collapse/first_turn/retrieval_accuracy": 0.9 * (1 - t) + 0.125,
                      "collapse/first_turn/retrieval_accuracy_chance": 0.125,
                      "collapse/first_turn/regime": 0.0 if t < 0.5 else 1.0,
                      "echo_trap/duplicate_rate": t, "echo_trap/distinct_2": 1 - t})
        if s % 10 == 0:
            r["val/success"] = 0.1 * s / steps
        records.append(r)
    return records


def healthy_run(steps=20):
    records = []
    for s in range(1, steps + 1):
        r = {"step": s, "train/success": 0.03 * s, "rollout/in_group_reward_std": 0.8,
             "rollout/format_penalty_rate": 0.05}
        if s % 5 == 0:
            r["val/success"] = 0.03 * s
        records.append(r)
    return records


def test_collapsing_run_report(tmp_path):
    run = write_run(tmp_path / "run", collapsing_run(),
                    config={"trainer": {"name": "torch", "model": "tiny", "steps": 30},
                            "envs": [{"name": "sokoban", "groups": 8, "options": {}}],
                            "filter": {"name": "top_k", "value": 0.5}, "estimator": {"name": "grpo"},
                            "diagnostics": [{"name": "collapse", "entropy_threshold": 0.7}, {"name": "echo_trap"}]},
                    summary={"status": "completed", "steps": 30, "metrics": {}})
    path = write_report(run)
    assert path == run / "report.md"
    text = path.read_text()
    for png in ("success.png", "reward.png", "reward_std.png", "rates.png", "collapse.png", "filter.png",
                "echo_trap.png"):
        assert (run / png).read_bytes().startswith(PNG), png
        assert f"]({png})" in text
    assert not (run / "losses.png").exists() and not (run / "entropy.png").exists()  # no such metrics
    page = (run / "report.html").read_text()
    assert page.count('<img src="data:image/png;base64,') == 7 and "template collapse" in page
    assert "run.trajectory_samples=N" in page and "run.trajectory_samples=N" in text  # no samples.jsonl
    assert "MI falling while entropy holds" in text and "template collapse" in text
    assert "filter=top_p filter.value=0.9" in text
    assert "reward std collapsed to below 10% of its early level" in text
    assert "the policy gets no learning signal" in text
    assert "format penalty rate above 50%" in text and "has not learned the output format" in text
    assert "trainer.warm_start_steps" in text
    assert "regime at step 30: template collapse" in text and "H(Z|X) 0.7 nats/token" in text
    assert "the early-stop rules would have stopped this run" in text
    assert "model tiny" in text and "filter: top_k (value=0.5)" in text
    assert "| `train/success` |" in text
    assert "No problem found" not in text


def test_healthy_run_has_no_advice_and_only_its_plots(tmp_path):
    run = write_run(tmp_path / "ok", healthy_run())
    out = tmp_path / "out"
    path = write_report(run, out)
    assert path == out / "report.md"
    text = path.read_text()
    assert "No problem found" in text
    assert (out / "success.png").exists() and (out / "reward_std.png").exists()
    assert not (out / "collapse.png").exists() and not (out / "filter.png").exists()
    assert not (run / "report.md").exists()


def test_low_validation_and_skipped_lines(tmp_path):
    records = [{"step": s, "train/success": 0.0, **({"val/success": 0.0} if s % 2 == 0 else {})}
               for s in range(1, 13)]
    run = write_run(tmp_path / "bad", records, extra_lines=['{"step": 13, "train/succ', "[1, 2]", ""],
                    summary={"status": "stopped", "steps": 12, "stop_reason": "validation stayed low"})
    data = load_run(run)
    assert data.skipped_lines == 2 and sorted(data.steps) == list(range(1, 13))
    lines = advice(data)
    assert lines[0].startswith("The run stopped early at step 12: validation stayed low")
    assert any("validation success below 1% in the last 5 validations" in line for line in lines)
    text = write_report(run).read_text()
    assert "2 line(s) of metrics.jsonl were not readable" in text


def test_repeated_steps_merge_later_wins(tmp_path):
    run = write_run(tmp_path / "r", [{"step": 1, "a/x": 1.0, "a/y": 5.0}, {"step": 2, "a/x": 2.0},
                                     {"step": 1, "a/x": 3.0, "a/z": float("nan")}])
    data = load_run(run)
    assert data.steps[1] == {"a/x": 3.0, "a/y": 5.0}
    assert data.series("a/x") == ([1, 2], [3.0, 2.0])


def test_missing_metrics_is_a_clear_error(tmp_path):
    from ragen_core.errors import RagenError

    with pytest.raises(RagenError, match="no metrics.jsonl"):
        write_report(tmp_path)


def test_without_matplotlib_the_report_says_so(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    run = write_run(tmp_path / "run", healthy_run(5))
    text = write_report(run).read_text()
    assert "Plots skipped: matplotlib is not installed" in text
    assert not (run / "success.png").exists()
    page = (run / "report.html").read_text()
    assert "Plots skipped: matplotlib is not installed" in page and "<img" not in page


def test_the_report_command(tmp_path):
    from click.testing import CliRunner

    from ragen_core.cli import build_cli
    from ragen_core.plugins import build_plugin_manager

    pm = build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1",
                                       "RAGEN_PLUGINS": "ragen_plugins_diagnostics"})
    cli = build_cli(pm)
    run = write_run(tmp_path / "run", healthy_run(6))
    result = CliRunner().invoke(cli, ["report", str(run), "--out", str(tmp_path / "rep")])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [str(tmp_path / "rep" / "report.md"), str(tmp_path / "rep" / "report.html")]
    assert (tmp_path / "rep" / "report.md").exists() and (tmp_path / "rep" / "report.html").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(cli, ["report", str(empty)])
    assert result.exit_code == 1 and "no metrics.jsonl" in result.output


def test_other_advice_rules(tmp_path):
    records = []
    for s in range(1, 16):
        t = s / 15
        records.append({"step": s, "rollout/filter_kept_ratio": 0.1, "rollout/empty_after_filter": float(s in (3, 4)),
                        "collapse/trajectory/mi_estimate": 1.0 - 0.9 * t,
                        "collapse/trajectory/conditional_entropy_est": 1.0 - 0.9 * t,
                        "collapse/trajectory/regime": 3.0 if t > 0.5 else 0.0,
                        "collapse/valid_thinking_rate": 0.3,
                        "echo_trap/cross_group_duplicate_rate": 0.8})
    lines = advice(load_run(write_run(tmp_path / "run", records)))
    text = "\n".join(lines)
    assert "trajectory MI and entropy both falling" in text and "low-entropy collapse" in text
    assert "trainer.entropy_coeff" in text
    assert "regime at step 15: low-entropy collapse" in text
    assert "only 30% of turns contain reasoning" in text
    assert "echo trap: 80% of reasoning strings repeat" in text
    assert "the filter keeps 10% of the groups" in text
    assert "2 step(s) had nothing left after filtering" in text
    assert "MI falling while entropy holds" not in text
