"""The native trainer end to end on the tiny model: two multi-turn envs, finite losses, masks, metrics, resume."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("torch")
pytest.importorskip("transformers")

from click.testing import CliRunner  # noqa: E402

from ragen_core.cli import build_cli  # noqa: E402
from ragen_core.plugins import build_plugin_manager  # noqa: E402
from tests.plain_recipe import PLAIN  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SMALL = [
    *PLAIN,
    "envs=[{name: sokoban, groups: 1}, {name: frozenlake_det, groups: 1}]",
    "rollout.env_groups=2", "rollout.group_size=2", "rollout.max_turn=2", "rollout.max_new_tokens=12",
    "rollout.val_env_groups=2", "rollout.val_group_size=1",
    "trainer.name=torch", "trainer.model=tiny", "trainer.mini_batch_size=4", "trainer.micro_batch_size=2",
    "trainer.actor_lr=0.001", "trainer.critic_lr=0.001", "trainer.warm_start_steps=2", "trainer.warm_start_groups=4",
    "trainer.save_every=1", "trainer.val_every=0",
]


#: the console output (logs included) of each ``train`` call, by run directory (the last call's)
OUTPUT: dict[Path, str] = {}


def train(run_dir: Path, *extra: str, resume: bool = False) -> Any:
    if not resume and not any(e.startswith("filter=") for e in extra):
        extra = ("filter=none", *extra)
    args = ["train", *SMALL, *extra] if not resume else ["train", *extra, "--resume", str(run_dir)]
    if not resume:
        args += ["--run-dir", str(run_dir)]
    res = CliRunner().invoke(build_cli(build_plugin_manager()), args)
    assert res.exit_code == 0, res.output + repr(res.exception)
    OUTPUT[run_dir] = res.output
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def validations(lines: list[dict[str, Any]]) -> dict[int, float]:
    """``val/success`` by step (the last line of a step wins, as in the report)."""
    return {line["step"]: line["val/success"] for line in lines if "val/success" in line}


def step_lines(lines: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {line["step"]: line for line in lines if "actor/pg_loss" in line or "rollout/success" in line}


Run = tuple[Path, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def two_step_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Run]:
    """``two_step_run(estimator)``: the two-step run of ``SMALL`` under that estimator (GRPO's also records its
    rollouts), made on first use and shared by the tests that only read it (none writes into it)."""
    runs: dict[str, Run] = {}

    def get(estimator: str) -> Run:
        if estimator not in runs:
            run_dir = tmp_path_factory.mktemp(f"two_step_{estimator}") / "run"
            record = ["trainer.record_rollouts=true"] if estimator == "grpo" else []
            runs[estimator] = (run_dir, train(run_dir, f"estimator={estimator}", "trainer.steps=2", *record))
        return runs[estimator]

    return get


@pytest.mark.parametrize("estimator", ["gae", "grpo"])
def test_a_few_steps_of_the_full_loop(two_step_run: Callable[[str], Run], estimator: str) -> None:
    run_dir, lines = two_step_run(estimator)
    steps = step_lines(lines)
    assert sorted(steps) == [1, 2]
    for line in steps.values():
        for key in ("actor/pg_loss", "actor/entropy", "actor/pg_clipfrac", "actor/ppo_kl", "actor/grad_norm",
                    "response_length/mean", "rollout/format_penalty_rate", "rollout/truncated_rate", "rollout/env_errors",
                    "rollout/context_truncated", "rollout/token_drift", "timing_s/gen", "timing_s/update",
                    "perf/tokens_per_s", "train/sokoban/success", "train/frozenlake_det/success"):
            assert key in line, key
        assert all(isinstance(v, (int, float)) for v in line.values())
        if estimator == "gae":
            assert "critic/vf_loss" in line and "critic/values_mean" in line
        assert 0.0 <= line["rollout/token_drift"] <= 1.0
    assert any("val/sokoban/success" in line for line in lines)
    assert all("val/truncated_rate" in line for line in lines if "val/success" in line)
    # 12 new tokens cut the tiny model's answers: each line (a step's, or step 0's validation) with a rate of 20% or
    # more gets one responses_truncated warning naming the budget
    flagged = [line["step"] for line in lines
               if max(line.get("rollout/truncated_rate", 0.0), line.get("val/truncated_rate", 0.0)) >= 0.2]
    warned = [json.loads(x) for x in OUTPUT[run_dir].splitlines() if '"responses_truncated"' in x]
    assert flagged and [w["step"] for w in warned] == flagged
    assert all(w["max_new_tokens"] == 12 and "rollout.max_new_tokens=24" in w["hint"] for w in warned)
    ckpts = sorted((run_dir / "checkpoints").glob("step_*"))
    assert [c.name for c in ckpts] == ["step_000001", "step_000002"]
    assert (ckpts[-1] / "actor" / "config.json").exists() and (ckpts[-1] / "state.json").exists()
    # trainer.keep_best (default): the first validation with the highest val/success (steps 0 and 2 validated)
    val = validations(lines)
    best_step = min(s for s, v in val.items() if v == max(val.values()))
    state = json.loads((run_dir / "checkpoints" / "best" / "state.json").read_text())
    assert (state["step"], state["val_success"]) == (best_step, max(val.values()))
    assert (run_dir / "checkpoints" / "best" / "actor" / "config.json").exists()
    assert not list((run_dir / "checkpoints").glob(".*"))  # no temp or old folder left
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["best"] == {"step": best_step, "val_success": max(val.values()),
                               "checkpoint": str(run_dir / "checkpoints" / "best")}


def test_resume_continues_exactly(two_step_run: Callable[[str], Run], tmp_path: Path) -> None:
    """Stopped after step 1 and resumed, a run's step 2 is the uninterrupted run's step 2. The stopped run validated
    after its last step (1) and the uninterrupted one did not, so that validation must not disturb training either."""
    full = step_lines(two_step_run("gae")[1])
    train(tmp_path / "b", "estimator=gae", "trainer.steps=1")
    first_best = json.loads((tmp_path / "b" / "checkpoints" / "best" / "state.json").read_text())
    all_lines = train(tmp_path / "b", "trainer.steps=2", resume=True)
    resumed = step_lines(all_lines)
    assert sorted(resumed) == [1, 2]
    # the resumed run knows its best so far (validations at steps 0 and 1 before, 2 after)
    val = validations(all_lines)
    best = json.loads((tmp_path / "b" / "summary.json").read_text())["best"]
    assert best["val_success"] == max(val.values()) and val[best["step"]] == best["val_success"]
    if val[2] <= first_best["val_success"]:
        assert best["step"] == first_best["step"]
    for key, value in full[2].items():
        if key.startswith(("timing_s", "perf/")):
            continue
        assert resumed[2][key] == pytest.approx(value, rel=1e-6, abs=1e-9), key


@pytest.mark.parametrize("filt", [["filter=top_p", "filter.value=0.5", "filter.loss_scale=sqrt"],
                                  ["filter=dynamic", "filter.max_rounds=2", "trainer.keep_best=false"]])
def test_filters_plug_into_the_trainer(tmp_path: Path, filt: list[str]) -> None:
    lines = train(tmp_path / "run", "estimator=grpo", "trainer.steps=1", "trainer.warm_start_steps=0",
                  "rollout.group_size=3", *filt)
    step = step_lines(lines)[1]
    assert "rollout/filter_kept_ratio" in step and "rollout/in_group_reward_std" in step
    assert "rollout/empty_after_filter" in step
    if "filter=dynamic" in filt:
        assert 1 <= step["rollout/dynamic_sampling_rounds"] <= 2
    kept_best = (tmp_path / "run" / "checkpoints" / "best").exists()
    assert kept_best == ("trainer.keep_best=false" not in filt)
    assert ("best" in json.loads((tmp_path / "run" / "summary.json").read_text())) == kept_best


@pytest.mark.slow
def test_top_p_with_collapse_diagnostics_writes_metrics_and_a_report(tmp_path: Path) -> None:
    run = tmp_path / "run"
    lines = train(run, "filter=top_p", "filter.value=0.9", "estimator=grpo", "trainer.steps=2",
                  "trainer.warm_start_steps=40", "trainer.warm_start_groups=16", "trainer.diagnostics_every=1",
                  "rollout.max_new_tokens=24", "rollout.group_size=3", "rollout.think=true",
                  "diagnostics=[{name: collapse, pairs: 6}, echo_trap]")
    steps = step_lines(lines)
    for line in steps.values():
        for key in ("rollout/in_group_reward_std", "rollout/chosen_in_group_reward_std", "rollout/filter_kept_ratio",
                    "rollout/filter_kept_count", "rollout/filter_zero_count", "rollout/empty_after_filter",
                    "collapse/valid_thinking_rate"):
            assert key in line, key
    assert any(k.startswith("collapse/first_turn/mi") for line in steps.values() for k in line)
    assert (run / "report.md").exists() and list(run.glob("*.png"))


def test_lora_training_step_and_merged_checkpoint(tmp_path: Path) -> None:
    pytest.importorskip("peft")
    lines = train(tmp_path / "run", "estimator=grpo", "trainer.steps=1", "trainer.warm_start_steps=0",
                  "trainer.lora_rank=4")
    assert "actor/pg_loss" in step_lines(lines)[1]
    actor = next((tmp_path / "run" / "checkpoints").glob("step_*")) / "actor"
    assert (actor / "config.json").exists() and not (actor / "adapter_config.json").exists()


def test_replay_reproduces_the_recorded_updates_exactly(two_step_run: Callable[[str], Run], tmp_path: Path) -> None:
    recorded_dir, recorded_lines = two_step_run("grpo")  # recorded with trainer.record_rollouts=true
    recorded = step_lines(recorded_lines)
    files = sorted(p.name for p in (recorded_dir / "rollouts").iterdir())
    assert files == ["step_000001.jsonl.gz", "step_000002.jsonl.gz"]
    res = CliRunner().invoke(build_cli(build_plugin_manager()),
                             ["train", "--replay", str(recorded_dir), "--run-dir", str(tmp_path / "b")])
    assert res.exit_code == 0, res.output + repr(res.exception)
    replayed = step_lines([json.loads(x) for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()])
    assert sorted(replayed) == [1, 2]
    # the replay's trace: replay.json, a comment atop config.yaml (which still loads), summary.json and report.md
    source = str(recorded_dir.resolve())
    trace = {"run_dir": source, "recorded_steps": 2, "steps": [1, 2]}
    assert json.loads((tmp_path / "b" / "replay.json").read_text()) == trace
    config_text = (tmp_path / "b" / "config.yaml").read_text()
    assert config_text.startswith(f"# replay: trains on the rollouts steps 1..2 of {source} (2 recorded)")
    assert yaml.safe_load(config_text) == yaml.safe_load((recorded_dir / "config.yaml").read_text())
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["replay"] == trace
    assert f"- replay: trained on the recorded rollouts of steps 1–2 of `{source}` (2 recorded)" in (
        tmp_path / "b" / "report.md").read_text()
    assert "replay" not in json.loads((recorded_dir / "summary.json").read_text())
    for step in (1, 2):
        assert replayed[step]["timing_s/gen"] == 0.0  # nothing was sampled
        for key, value in recorded[step].items():
            if key.startswith(("actor/", "rollout/", "train/")) and not key.startswith("rollout/filter"):
                assert replayed[step][key] == pytest.approx(value, rel=1e-6, abs=1e-9), (step, key)
    # the same data under another estimator (PPO + GAE with a critic): a different update on identical rollouts
    res = CliRunner().invoke(build_cli(build_plugin_manager()),
                             ["train", "estimator=gae", "--replay", str(recorded_dir), "--run-dir",
                              str(tmp_path / "c")])
    assert res.exit_code == 0, res.output + repr(res.exception)
    other = step_lines([json.loads(x) for x in (tmp_path / "c" / "metrics.jsonl").read_text().splitlines()])
    assert other[1]["rollout/reward_mean"] == recorded[1]["rollout/reward_mean"]
    assert "critic/vf_loss" in other[1] and "critic/vf_loss" not in recorded[1]


def test_a_resumed_replay_goes_on_replaying(two_step_run: Callable[[str], Run], tmp_path: Path) -> None:
    recorded_dir, recorded_lines = two_step_run("grpo")
    cli, run = build_cli(build_plugin_manager()), tmp_path / "r"
    res = CliRunner().invoke(cli, ["train", "trainer.steps=1", "--replay", str(recorded_dir), "--run-dir", str(run)])
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert json.loads((run / "replay.json").read_text())["steps"] == [1, 1]
    res = CliRunner().invoke(cli, ["train", "trainer.steps=2", "--resume", str(run)])  # no --replay: replay.json
    assert res.exit_code == 0, res.output + repr(res.exception)
    step2 = step_lines([json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()])[2]
    assert step2["timing_s/gen"] == 0.0
    assert step2["rollout/reward_mean"] == step_lines(recorded_lines)[2]["rollout/reward_mean"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["replay"] == {"run_dir": str(recorded_dir.resolve()), "recorded_steps": 2, "steps": [1, 2]}
    assert (run / "config.yaml").read_text().startswith("# replay: trains on the rollouts steps 1..2 of ")


def test_replay_errors_are_clear(two_step_run: Callable[[str], Run], tmp_path: Path) -> None:
    recorded_dir, _ = two_step_run("grpo")  # rollouts recorded for steps 1 and 2
    cli = build_cli(build_plugin_manager())
    # more steps than recorded: refused up front (exit 2, one line, naming both numbers), before any model loads or
    # the warm-start runs, and before a run directory is made
    started = time.perf_counter()
    res = CliRunner().invoke(cli, ["train", "trainer.steps=3", "--replay", str(recorded_dir),
                                   "--run-dir", str(tmp_path / "b")])
    assert res.exit_code == 2, res.output + repr(res.exception)
    assert res.output == (f"ragen: error: cannot replay: trainer.steps=3 but {str(recorded_dir)!r} recorded rollouts "
                          "for 2 step(s) (steps 1..2): replay at most 2 step(s) (trainer.steps=2)\n")
    assert not (tmp_path / "b").exists() and time.perf_counter() - started < 20
    # a step missing inside the recording is refused the same way
    gap = tmp_path / "gap"
    shutil.copytree(recorded_dir, gap)
    (gap / "rollouts" / "step_000001.jsonl.gz").unlink()
    res = CliRunner().invoke(cli, ["train", "--replay", str(gap), "--run-dir", str(tmp_path / "c")])
    assert res.exit_code == 2 and "(steps 2..2, step 1 missing)" in res.output, res.output
    assert "record a run with trainer.record_rollouts=true" in res.output
    res = CliRunner().invoke(cli, ["train", "--replay", str(tmp_path / "nothing")])
    assert res.exit_code != 0 and "holds no recorded rollouts" in res.output + str(res.exception)


def test_the_kl_reference_is_the_warm_started_policy_and_survives_resume(tmp_path: Path) -> None:
    run = tmp_path / "kl"
    steps = step_lines(train(run, "trainer.steps=1", "trainer.use_kl_loss=true", "trainer.warm_start_steps=20",
                             "trainer.warm_start_lr=0.01", "trainer.ppo_epochs=1"))
    # against the untrained model the KL after 20 warm-start steps at lr 0.01 would be nats; against itself ~0 (one
    # epoch of one mini-batch: the KL is measured before the step's only optimiser step moves the policy)
    assert 0.0 <= steps[1]["actor/kl_loss"] < 1e-3
    assert (run / "reference" / "config.json").exists()
    resumed = step_lines(train(run, "trainer.steps=2", resume=True))
    assert 0.0 <= resumed[2]["actor/kl_loss"] < 0.5


def test_dynamics_pretraining_runs_before_the_warm_start_and_is_reported(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGEN_CACHE_DIR", str(tmp_path / "cache"))
    lines = train(tmp_path / "run", "trainer.steps=1", "trainer.dynamics_steps=3", "trainer.dynamics_groups=4")
    zero = {k: v for line in lines if line["step"] == 0 for k, v in line.items()}
    assert zero["dynamics/cached"] == 0.0 and zero["dynamics/samples"] >= 4 and zero["dynamics/loss_first"] > 0
    assert "warm_start/loss_last" in zero  # both stages ran, in one record
    assert len(list((tmp_path / "cache").glob("dynamics-*"))) == 1
    # another run seed starts from the same pretrained model (trainer.dynamics_seed), another dynamics seed does not
    again = train(tmp_path / "rerun", "trainer.steps=1", "trainer.dynamics_steps=3", "trainer.dynamics_groups=4",
                  "run.seed=7")
    assert [line["dynamics/cached"] for line in again if "dynamics/cached" in line] == [1.0]
    other = train(tmp_path / "other", "trainer.steps=1", "trainer.dynamics_steps=3", "trainer.dynamics_groups=4",
                  "trainer.dynamics_seed=1")
    assert [line["dynamics/cached"] for line in other if "dynamics/cached" in line] == [0.0]
    assert len(list((tmp_path / "cache").glob("dynamics-*"))) == 2


def test_lr_warmup_raises_the_rate_linearly_then_holds_it(tmp_path: Path) -> None:
    lines = train(tmp_path / "run", "trainer.steps=3", "trainer.lr_warmup_steps=2", "trainer.actor_lr=0.001")
    lrs = {step: line["actor/lr"] for step, line in step_lines(lines).items()}
    assert lrs == {1: pytest.approx(0.0005), 2: pytest.approx(0.001), 3: pytest.approx(0.001)}
    plain = step_lines(train(tmp_path / "plain", "trainer.steps=1", "trainer.actor_lr=0.001"))
    assert plain[1]["actor/lr"] == pytest.approx(0.001)


def test_dynamics_pretraining_is_skipped_where_no_observation_follows_an_action(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGEN_CACHE_DIR", str(tmp_path / "cache"))
    lines = train(tmp_path / "run", "envs=[{name: bandit, groups: 2}]", "rollout.max_turn=1", "trainer.steps=1",
                  "trainer.dynamics_steps=3", "trainer.dynamics_groups=4")
    zero = {k: v for line in lines if line["step"] == 0 for k, v in line.items()}
    assert "dynamics/cached" not in zero and "warm_start/loss_last" in zero
    assert "dynamics_skipped" in OUTPUT[tmp_path / "run"] and "rollout.max_turn is 1" in OUTPUT[tmp_path / "run"]
    assert not list((tmp_path / "cache").glob("dynamics-*"))


def test_kl_with_lora_and_a_warm_start_is_refused() -> None:
    from ragen_plugins_torch.trainer import TorchTrainerConfig

    with pytest.raises(ValueError, match="use_kl_loss"):
        TorchTrainerConfig(use_kl_loss=True, lora_rank=4, warm_start_steps=10)


# ------------------------------------------------------------------------------------------------ the best checkpoint

def fake_actor(folder: Path, marker: str = "model") -> None:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"marker": marker}))


def test_best_is_replaced_whole_or_not_at_all(tmp_path: Path) -> None:
    from ragen_plugins_torch.trainer import best_checkpoint, read_best, write_best

    assert best_checkpoint(tmp_path) is None and read_best(tmp_path) is None
    write_best(tmp_path, 3, 0.5, lambda f: fake_actor(f, "three"))
    assert read_best(tmp_path) == {"step": 3, "val_success": 0.5, "checkpoint": str(tmp_path / "checkpoints" / "best")}

    def broken(folder: Path) -> None:  # a save that fails half-way (a full disk)
        fake_actor(folder, "half")
        raise OSError("no space left on device")

    with pytest.raises(OSError):
        write_best(tmp_path, 5, 0.75, broken)
    best = tmp_path / "checkpoints" / "best"
    assert read_best(tmp_path)["step"] == 3  # the old best is untouched
    assert json.loads((best / "actor" / "config.json").read_text()) == {"marker": "three"}
    write_best(tmp_path, 7, 0.875, lambda f: fake_actor(f, "seven"))
    assert read_best(tmp_path)["step"] == 7
    assert json.loads((best / "actor" / "config.json").read_text()) == {"marker": "seven"}
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["best"]  # the temp folder went too
    # a replacement interrupted between its two renames: the previous best is put back
    (best).rename(tmp_path / "checkpoints" / ".old_best")
    assert best_checkpoint(tmp_path) == best and read_best(tmp_path)["step"] == 7


def stand_in_trainer(run_dir: Path, keep_last: int) -> tuple[Any, Any]:
    """A ``TorchTrainer`` whose model, tokenizer and optimiser are stand-ins (``_checkpoint`` writes small fake
    folders), and a run in ``run_dir``."""
    from types import SimpleNamespace

    import torch

    from ragen_plugins_torch.trainer import TorchTrainer, TorchTrainerConfig

    trainer = TorchTrainer(TorchTrainerConfig(keep_last=keep_last))
    saver = SimpleNamespace(save_pretrained=lambda folder: fake_actor(Path(folder)))
    trainer.torch, trainer.critic, trainer.empty_steps = torch, None, 0
    trainer.policy = SimpleNamespace(model=saver, tokenizer=SimpleNamespace(save_pretrained=lambda folder: None))
    trainer.optim = SimpleNamespace(state_dict=lambda: {})
    return trainer, SimpleNamespace(run_dir=run_dir)


def test_keep_last_never_deletes_best(tmp_path: Path) -> None:
    """``_checkpoint`` on stand-ins for the model, tokenizer and optimiser: keep_last=1 deletes older ``step_N``
    folders, never ``best``."""
    from ragen_plugins_torch.trainer import write_best

    trainer, run = stand_in_trainer(tmp_path, keep_last=1)
    trainer._checkpoint(run, 1)
    write_best(tmp_path, 1, 0.5, trainer._save_actor)
    for step in (2, 3):
        trainer._checkpoint(run, step)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["best", "step_000003"]
    assert (tmp_path / "checkpoints" / "best" / "actor" / "config.json").exists()


def test_keep_last_clean_up_killed_midway_leaves_only_whole_checkpoints(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A kill while keep_last deletes an old checkpoint (simulated: the delete removes ``state.json`` and then the
    process dies) leaves no ``step_*`` folder without its ``state.json``: the folder was renamed aside first. The
    next checkpoint removes what was set aside, and resume picks the newest whole checkpoint."""
    from ragen_core.cli import _latest_checkpoint
    from ragen_plugins_torch import trainer as trainer_module
    from ragen_plugins_torch.trainer import latest_checkpoint

    trainer, run = stand_in_trainer(tmp_path, keep_last=1)
    (tmp_path / "config.yaml").write_text("{}\n")  # what makes it a run directory for --resume
    trainer._checkpoint(run, 1)
    real_rmtree = trainer_module.shutil.rmtree

    def killed(path: Any, ignore_errors: bool = False) -> None:
        if Path(path).name.startswith(".old_step_") and Path(path).exists():
            (Path(path) / "state.json").unlink()
            raise KeyboardInterrupt  # the kill, half-way through the delete
        real_rmtree(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(trainer_module.shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        trainer._checkpoint(run, 2)
    monkeypatch.setattr(trainer_module.shutil, "rmtree", real_rmtree)
    root = tmp_path / "checkpoints"
    assert all((p / "state.json").is_file() for p in root.glob("step_*"))
    assert [p.name for p in root.glob("step_*")] == ["step_000002"]
    assert latest_checkpoint(tmp_path) == root / "step_000002" == _latest_checkpoint(tmp_path)
    trainer._checkpoint(run, 3)
    assert sorted(p.name for p in root.iterdir()) == ["step_000003"]
    # a step folder that lost its state.json some other way is never the one resumed from
    (root / "step_000004").mkdir()
    assert latest_checkpoint(tmp_path) == root / "step_000003" == _latest_checkpoint(tmp_path)


class _Payload:
    """Unpickling this runs code: it creates the file ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (Path.touch, (self.marker,))


def test_resume_never_unpickles_code_from_a_checkpoint(two_step_run: Callable[[str], Run], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A run directory someone sent you, whose optimiser state is a pickle that runs code when loaded: resume
    refuses it (torch.load with weights_only=True) and the code never runs. torch.load is made to default to full
    unpickling, as it does in the torch 2.4 and 2.5 that pyproject.toml admits, so only the trainer's own
    ``weights_only=True`` protects it."""
    import functools
    import shutil

    import torch

    monkeypatch.setattr(torch, "load", functools.partial(torch.load, weights_only=False))

    run_dir = tmp_path / "sent"
    shutil.copytree(two_step_run("gae")[0], run_dir)
    marker = tmp_path / "pwned"
    torch.save({"state": _Payload(marker)}, run_dir / "checkpoints" / "step_000002" / "actor_optim.pt")
    res = CliRunner().invoke(build_cli(build_plugin_manager()), ["train", "trainer.steps=3", "--resume", str(run_dir)])
    assert res.exit_code != 0
    assert not marker.exists()
    assert "weights_only" in res.output + repr(res.exception) or "Unpickl" in res.output + repr(res.exception)


def test_eval_of_a_training_run_writes_into_its_own_folder(two_step_run: Callable[[str], Run], tmp_path: Path) -> None:
    """`ragen eval --resume RUN` on a training run (validating its latest checkpoint with the trainer) leaves every
    file of the training run as training wrote it, and writes its own config, metrics and summary under
    RUN/evals/."""
    import shutil

    run_dir = tmp_path / "trained"
    shutil.copytree(two_step_run("grpo")[0], run_dir)
    files = ("summary.json", "config.yaml", "plugins.json", "metrics.jsonl", "report.md", "samples.jsonl")
    before = {name: (run_dir / name).read_bytes() for name in files if (run_dir / name).exists()}
    assert {"summary.json", "config.yaml", "metrics.jsonl", "samples.jsonl"} <= before.keys()
    res = CliRunner().invoke(build_cli(build_plugin_manager()), ["eval", "--resume", str(run_dir)])
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert {name: (run_dir / name).read_bytes() for name in before} == before
    (evals,) = (run_dir / "evals").iterdir()
    assert "-eval-" in evals.name
    summary = json.loads((evals / "summary.json").read_text())
    assert summary["status"] == "completed" and (evals / "config.yaml").exists()
    assert any("val/success" in json.loads(line) for line in (evals / "metrics.jsonl").read_text().splitlines())


def test_a_step_the_filter_empties_is_a_warning_and_enough_of_them_stop_the_run(tmp_path: Path) -> None:
    """Untrained, without a format penalty, every trajectory scores 0: ``include_zero=false`` drops every group."""
    lines = train(tmp_path / "e", "filter=top_k_abs", "filter.value=2", "filter.include_zero=false",
                  "rollout.format_penalty=0", "trainer.warm_start_steps=0", "trainer.steps=3",
                  "trainer.max_empty_steps=2", "run.log_format=json")
    steps = step_lines(lines)
    assert sorted(steps) == [1, 2] and all(steps[s]["rollout/empty_after_filter"] == 1.0 for s in (1, 2))
    warnings = [json.loads(line) for line in OUTPUT[tmp_path / "e"].splitlines()
                if line.startswith("{") and '"step_skipped"' in line]
    assert [(w["level"], w["step"], w["consecutive"]) for w in warnings] == [("warning", 1, 1), ("warning", 2, 2)]
    summary = json.loads((tmp_path / "e" / "summary.json").read_text())
    assert summary["status"] == "stopped" and "2 consecutive steps had nothing left" in summary["stop_reason"]
