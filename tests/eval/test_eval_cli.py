"""``ragen eval`` end to end with a scripted policy backend (a test plugin, no model): the JSONL schema, the summary,
resuming an interrupted eval, and one clear error line for each kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ragen_core.cli import build_cli
from ragen_core.plugins import build_plugin_manager
from ragen_plugins_eval.engine import eval_metrics
from tests.needs import needs_plugin

SCRIPTED = ["-m", "scripted://policy", "--env", "eval_counter_far", "--env", "eval_counter", "--groups", "4",
            "--group-size", "3", "rollout.max_turn=3", "rollout.max_actions_per_turn=1", "run.log_level=error"]


@pytest.fixture(autouse=True)
def _scripted_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGEN_PLUGINS", "tests.eval.scripted_backend")
    monkeypatch.delenv("RAGEN_DISABLE_PLUGIN_AUTOLOAD", raising=False)


def ragen(*args: str) -> Any:
    return CliRunner().invoke(build_cli(build_plugin_manager()), list(args))


def lines(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "trajectories.jsonl").read_text().splitlines()]


def test_eval_writes_trajectories_and_a_summary(tmp_path: Path) -> None:
    res = ragen("eval", *SCRIPTED, "--batch-groups", "3", "--run-dir", str(tmp_path / "e"))
    assert res.exit_code == 0, res.output
    records = lines(tmp_path / "e")
    assert len(records) == 2 * 4 * 3
    keys = {"env", "group_id", "seed", "episode_id", "success", "reward", "score", "turns", "prompt_tokens",
            "response_tokens", "context_truncations", "env_error", "messages", "turn_details"}
    for r in records:
        assert set(r) == keys
        assert isinstance(r["success"], bool) and r["env_error"] is None and 1 <= r["turns"] <= 3
        assert r["messages"][0]["role"] == "system" and len(r["messages"]) == 1 + 2 * r["turns"]
        assert r["messages"][-1]["content"].startswith("<think>I count.</think><answer>")
        assert r["prompt_tokens"] == sum(t["prompt_tokens"] for t in r["turn_details"]) > 0
        assert r["response_tokens"] == sum(t["response_tokens"] for t in r["turn_details"]) > 0
        assert r["reward"] == pytest.approx(sum(t["reward"] for t in r["turn_details"]))
    seeds = {(r["env"], r["group_id"]): r["seed"] for r in records}
    assert sorted(seeds.values()) == [123, 123, 124, 124, 125, 125, 126, 126]  # group i of each env: seed_val + i
    assert len({r["episode_id"] for r in records}) == len(records)
    summary = json.loads((tmp_path / "e" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["variants"] == eval_metrics(records, 3)
    assert 0 < summary["variants"]["all"]["success"] < 1  # the scripted policy sometimes reaches the target
    assert summary["metrics"]["eval/eval_counter/pass@3"] == summary["variants"]["eval_counter"]["pass@3"]
    metrics = json.loads((tmp_path / "e" / "metrics.jsonl").read_text())
    assert metrics == {"step": 0, **summary["metrics"]}
    settings = json.loads((tmp_path / "e" / "eval.json").read_text())
    assert settings["backend"] == "scripted" and settings["group_size"] == 3 and settings["temperature"] == 1.0
    for word in ("eval_counter_far", "pass@3", "avg@3", "success", "all"):
        assert word in res.output


def test_an_interrupted_eval_resumes_to_the_same_result(tmp_path: Path) -> None:
    full = ragen("eval", *SCRIPTED, "--batch-groups", "2", "--run-dir", str(tmp_path / "full"))
    assert full.exit_code == 0, full.output
    cut = ragen("eval", *SCRIPTED, "--batch-groups", "2", "-o", "interrupt_after=5", "--run-dir",
                str(tmp_path / "cut"))
    assert cut.exit_code == 130
    assert f"continue with: ragen eval --resume {tmp_path / 'cut'}" in cut.output
    partial = lines(tmp_path / "cut")
    assert 0 < len(partial) < 24 and len(partial) % 3 == 0  # whole groups only
    assert json.loads((tmp_path / "cut" / "summary.json").read_text())["status"] == "failed"
    with open(tmp_path / "cut" / "trajectories.jsonl", "a") as fh:  # and a torn line, as if killed mid-write
        fh.write('{"env": "eval_counter", "gro')
    settings = json.loads((tmp_path / "cut" / "eval.json").read_text())
    settings["backend_options"] = {}  # what a user would do after a crash: resume without the crash switch
    (tmp_path / "cut" / "eval.json").write_text(json.dumps(settings))
    res = ragen("eval", "--resume", str(tmp_path / "cut"))
    assert res.exit_code == 0, res.output
    resumed = lines(tmp_path / "cut")
    assert resumed[:len(partial)] == partial
    key = lambda r: (r["env"], r["seed"], r["episode_id"])  # noqa: E731
    assert sorted(resumed, key=key) == sorted(lines(tmp_path / "full"), key=key)
    assert json.loads((tmp_path / "cut" / "summary.json").read_text())["variants"] == \
        json.loads((tmp_path / "full" / "summary.json").read_text())["variants"]


def test_the_same_run_dir_continues_and_a_finished_eval_is_not_redone(tmp_path: Path) -> None:
    assert ragen("eval", *SCRIPTED, "--run-dir", str(tmp_path / "e")).exit_code == 0
    before = (tmp_path / "e" / "trajectories.jsonl").read_text()
    res = ragen("eval", *SCRIPTED, "--run-dir", str(tmp_path / "e"))
    assert res.exit_code == 0 and (tmp_path / "e" / "trajectories.jsonl").read_text() == before
    other = ragen("eval", *SCRIPTED, "--group-size", "2", "--run-dir", str(tmp_path / "e"))
    assert other.exit_code == 2
    assert "holds an eval with other settings (group_size" in other.output and "Traceback" not in other.output


def test_env_errors_are_recorded_and_counted(tmp_path: Path) -> None:
    res = ragen("eval", "-m", "scripted://p", "--env", "eval_flaky", "--groups", "4", "--group-size", "2",
                "--seed", "10", "run.log_level=error", "--run-dir", str(tmp_path / "e"))
    assert res.exit_code == 0, res.output
    records = lines(tmp_path / "e")
    broken = [r for r in records if r["env_error"]]
    assert {r["seed"] for r in broken} == {11, 13} and all("flaky reset" in r["env_error"] for r in broken)
    assert all(r["messages"] == [] and r["turns"] == 0 for r in broken)
    m = json.loads((tmp_path / "e" / "summary.json").read_text())["variants"]["eval_flaky"]
    assert m["env_errors"] == 4 and m["groups"] == 2 and m["trajectories"] == 4


def test_the_config_file_and_overrides_shape_the_eval(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("val_envs: [{name: eval_counter, options: {target: 1}}]\n"
                   "rollout: {val_env_groups: 2, val_group_size: 2, seed_val: 7, max_turn: 1}\n"
                   "run: {log_level: error}\n")
    res = ragen("eval", "-m", "scripted://p", str(cfg), "-o", "p_inc=1.0", "--run-dir", str(tmp_path / "e"))
    assert res.exit_code == 0, res.output
    records = lines(tmp_path / "e")
    assert {r["seed"] for r in records} == {7, 8} and len(records) == 4
    assert all(r["success"] for r in records)  # target 1, always Inc: one action suffices
    data = json.loads((tmp_path / "e" / "eval.json").read_text())
    assert data["envs"] == [["eval_counter", {"target": 1}]] and data["backend_options"] == {"p_inc": 1.0}


@pytest.mark.parametrize(("args", "expected", "status"), [
    (["-m", "scripted://p", "--env", "eval_countre"], "unknown env 'eval_countre'; did you mean 'eval_counter'?", 2),
    (["-m", "scripted://p", "--env", "eval_counter", "--backend", "scripted2"],
     "unknown policy backend 'scripted2'; did you mean 'scripted'?", 1),
    (["-m", "ftp://host/model", "--env", "eval_counter"], "no policy backend serves ftp models", 1),
    (["-m", "scripted://missing", "--env", "eval_counter"], "scripted model 'scripted://missing' does not exist", 1),
    (["-m", "scripted://p", "--env", "eval_counter", "-o", "p_inc=oops"], "scripted.p_inc: expected a number", 2),
    (["-m", "scripted://p", "--env", "eval_counter", "-o", "temprature=1"], "unknown config key 'scripted.temprature'", 2),
    (["--resume", "RUN", "--groups", "2"], "--resume takes the eval's settings from", 2),
    (["--groups", "2"], "need --model", 2),
    (["-m", "scripted://p"], "nothing to evaluate: no --env given and the config names no env", 2),
])
def test_bad_input_is_one_clear_error(tmp_path: Path, args: list[str], expected: str, status: int) -> None:
    args = [a.replace("RUN", str(tmp_path)) for a in args]
    (tmp_path / "eval.json").write_text("{}")  # (for --resume)
    res = ragen("eval", *args, "run.log_level=error", "--run-dir", str(tmp_path / "e"))
    assert res.exit_code == status, res.output
    assert expected in res.output and "Traceback" not in res.output
    assert not (tmp_path / "e").exists()  # nothing is written for bad input


def test_without_model_eval_is_still_the_trainers_validation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    needs_plugin("ragen-plugins-filters", "the trainer's validation resolves the default filter 'none'")
    monkeypatch.setenv("RAGEN_PLUGINS", "tests.core.toy_plugin")
    res = ragen("eval", "env=counter", "trainer=toy", "estimator=rtg", "rollout.env_groups=2", "rollout.group_size=2",
                "--run-dir", str(tmp_path / "v"))
    assert res.exit_code == 0, res.output
    assert "status: completed" in res.output and (tmp_path / "v" / "metrics.jsonl").exists()
    assert not (tmp_path / "v" / "trajectories.jsonl").exists()
