"""``ragen eval`` on real models: the built-in tiny model and a checkpoint of a (very short) real training run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from click.testing import CliRunner  # noqa: E402

from ragen_core.cli import build_cli  # noqa: E402
from ragen_core.plugins import build_plugin_manager  # noqa: E402
from ragen_core.starpo.chat import ChatCodec  # noqa: E402
from tests.plain_recipe import PLAIN  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TRAIN = [*PLAIN, "envs=[{name: sokoban, groups: 1}, {name: frozenlake_det, groups: 1}]", "rollout.env_groups=2",
         "rollout.group_size=2", "rollout.max_turn=2", "rollout.max_new_tokens=10", "rollout.val_env_groups=2",
         "rollout.val_group_size=1", "trainer.name=torch", "trainer.model=tiny", "estimator=grpo", "filter=none",
         "trainer.mini_batch_size=4", "trainer.micro_batch_size=2", "trainer.actor_lr=0.001",
         "trainer.warm_start_steps=0", "trainer.save_every=1", "trainer.val_every=0", "trainer.steps=2",
         "run.log_level=error"]


def ragen(*args: str) -> Any:
    return CliRunner().invoke(build_cli(build_plugin_manager()), list(args))


def lines(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "trajectories.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory, one_torch_thread: None) -> Path:
    """A real two-step ``ragen train`` run of the tiny model (a checkpoint after each step)."""
    run = tmp_path_factory.mktemp("train") / "run"
    res = ragen("train", *TRAIN, "--run-dir", str(run))
    assert res.exit_code == 0, res.output
    assert [p.name for p in sorted((run / "checkpoints").glob("step_*"))] == ["step_000001", "step_000002"]
    return run


def test_eval_of_a_training_run_takes_its_newest_checkpoint_and_its_config(trained_run: Path, tmp_path: Path) -> None:
    res = ragen("eval", "-m", str(trained_run), "--groups", "2", "--group-size", "2", "--run-dir", str(tmp_path / "e"))
    assert res.exit_code == 0, res.output
    settings = json.loads((tmp_path / "e" / "eval.json").read_text())
    assert settings["model"] == str(trained_run / "checkpoints" / "step_000002") and settings["backend"] == "hf"
    assert settings["envs"] == [["sokoban", {}], ["frozenlake_det", {}]]  # the run's envs and rollout settings
    assert settings["rollout"]["max_new_tokens"] == 10 and settings["rollout"]["max_turn"] == 2
    records = lines(tmp_path / "e")
    assert len(records) == 2 * 2 * 2 and {r["env"] for r in records} == {"sokoban", "frozenlake_det"}
    from transformers import AutoTokenizer

    codec = ChatCodec(AutoTokenizer.from_pretrained(trained_run / "checkpoints" / "step_000002" / "actor"))
    for r in records:
        first = r["turn_details"][0]
        assert first["prompt_tokens"] == len(codec.prompt(r["messages"][:2]))  # the messages are what it saw
        assert all(1 <= t["response_tokens"] <= 10 for t in r["turn_details"])
        assert r["response_tokens"] == sum(t["response_tokens"] for t in r["turn_details"])
    assert "sokoban" in res.output and "pass@2" in res.output


def test_a_checkpoint_folder_evaluates_reproducibly(trained_run: Path, tmp_path: Path) -> None:
    ckpt = str(trained_run / "checkpoints" / "step_000001")
    args = ["-m", ckpt, "--env", "sokoban", "--groups", "2", "--group-size", "3", "--batch-groups", "1"]
    assert ragen("eval", *args, "--run-dir", str(tmp_path / "a")).exit_code == 0
    assert ragen("eval", *args, "--run-dir", str(tmp_path / "b")).exit_code == 0
    a, b = lines(tmp_path / "a"), lines(tmp_path / "b")
    assert a == b and len(a) == 6
    assert len({r["messages"][2]["content"] for r in a}) > 1  # temperature 1: the samples differ


def test_greedy_samples_of_a_group_are_identical(tmp_path: Path) -> None:
    res = ragen("eval", "-m", "tiny", "--env", "bandit", "--groups", "2", "--group-size", "3", "--temperature", "0",
                "rollout.max_new_tokens=12", "run.log_level=error", "--run-dir", str(tmp_path / "e"))
    assert res.exit_code == 0, res.output
    records = lines(tmp_path / "e")
    for seed in {r["seed"] for r in records}:
        answers = {json.dumps(r["messages"]) for r in records if r["seed"] == seed}
        assert len(answers) == 1
    assert json.loads((tmp_path / "e" / "summary.json").read_text())["token_unit"] == "token"


def test_missing_checkpoints_are_clear_errors(trained_run: Path, tmp_path: Path) -> None:
    res = ragen("eval", "-m", str(trained_run / "checkpoints" / "step_000099"), "--env", "sokoban")
    assert res.exit_code == 1 and "checkpoint" in res.output and "does not exist" in res.output
    assert "checkpoints there: step_000001, step_000002" in res.output and "Traceback" not in res.output
    empty = tmp_path / "run"
    empty.mkdir()
    (empty / "config.yaml").write_text((trained_run / "config.yaml").read_text())
    res = ragen("eval", "-m", str(empty))
    assert res.exit_code == 1 and f"run directory {str(empty)!r} has no checkpoint" in res.output
    res = ragen("eval", "-m", str(tmp_path / "no" / "model"), "--env", "sokoban")
    assert res.exit_code == 1 and "does not exist" in res.output and "Traceback" not in res.output


def test_the_best_checkpoint_loads_by_its_folder_and_run_colon_best_is_refused(trained_run: Path,
                                                                            tmp_path: Path) -> None:
    """``trainer.keep_best`` (default) kept ``checkpoints/best``; ``ragen eval -m RUN/checkpoints/best`` evaluates it
    with the run's config, and ``ragen serve`` resolves it the same way; ``RUN:best`` is an error with the spelling."""
    from ragen_core.errors import RagenError
    from ragen_plugins_torch.serve import resolve_checkpoint

    best = trained_run / "checkpoints" / "best"
    state = json.loads((best / "state.json").read_text())
    summary = json.loads((trained_run / "summary.json").read_text())
    assert summary["best"]["step"] == state["step"] and summary["best"]["checkpoint"] == str(best)
    assert resolve_checkpoint(str(best)) == str(best / "actor")  # what ragen serve and the hf backend load
    res = ragen("eval", "-m", str(best), "--env", "sokoban", "--groups", "1", "--group-size", "2",
                "--run-dir", str(tmp_path / "e"))
    assert res.exit_code == 0, res.output
    settings = json.loads((tmp_path / "e" / "eval.json").read_text())
    assert settings["model"] == str(best) and settings["rollout"]["max_new_tokens"] == 10  # the run's config
    summary = json.loads((tmp_path / "e" / "summary.json").read_text())
    assert 0.0 <= summary["variants"]["all"]["truncated_rate"] <= 1.0
    res = ragen("eval", "-m", f"{trained_run}:best", "--env", "sokoban")
    assert res.exit_code == 1 and "is not a model" in res.output and str(best) in res.output
    assert "Traceback" not in res.output
    with pytest.raises(RagenError, match="is not a model") as err:
        resolve_checkpoint(f"{trained_run}:best")
    assert str(best) in err.value.hint
    bare = tmp_path / "bare"
    (bare / "checkpoints").mkdir(parents=True)
    (bare / "config.yaml").write_text((trained_run / "config.yaml").read_text())
    with pytest.raises(RagenError, match="kept no best checkpoint") as err:
        resolve_checkpoint(str(bare / "checkpoints" / "best"))
    assert "trainer.keep_best=false" in err.value.hint


def test_config_show_previews_exactly_the_config_an_eval_writes(tmp_path: Path) -> None:
    """``ragen config show --command eval ARGS`` (and ``ragen eval ARGS --show-config``) print the eval's
    ``config.yaml`` before any model is loaded."""
    args = ["-m", "tiny", "--env", "bandit", "--groups", "1", "--group-size", "2", "--temperature", "0.5",
            "rollout.max_new_tokens=8", "run.log_level=error"]
    shown = ragen("config", "show", "--command", "eval", *args)
    assert shown.exit_code == 0, shown.output + repr(shown.exception)
    direct = ragen("eval", *args, "--show-config")
    assert direct.exit_code == 0 and direct.output == shown.output
    assert not list(tmp_path.iterdir())  # nothing written
    res = ragen("eval", *args, "--run-dir", str(tmp_path / "e"))
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert (tmp_path / "e" / "config.yaml").read_text() == shown.output
    bad = ragen("config", "show", "--command", "eval", "--env", "bandit")  # eval's own errors, unchanged
    assert bad.exit_code != 0 and "--model" in bad.output
    # without a model, ragen eval validates the trainer's model with the training config: the same preview
    plain = ragen("config", "show", "rollout.max_turn=2")
    assert ragen("eval", "--show-config", "rollout.max_turn=2").output == plain.output
    assert ragen("config", "show", "--command", "eval", "rollout.max_turn=2").output == plain.output
