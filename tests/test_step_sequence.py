"""One step sequence: ``ragen rollout``, the torch trainer, ``ragen eval`` and veRL's trainer mode call the step
hooks in the same order (``RunContext.begin_step`` / ``end_step``), and docs/plugins.md shows that order.

Each driver runs one step on two envs: ``bandit`` and ``exploding`` (its reset raises, so its two trajectories are
env errors), with a recording plugin (``tests/step_recorder.py``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragen_core.cli import build_cli
from ragen_core.plugins import build_plugin_manager
from tests.needs import needs_plugin
from tests.plain_recipe import PLAIN

ROOT = Path(__file__).resolve().parents[1]
ENVS = "envs=[{name: bandit, groups: 1}, {name: exploding, groups: 1}]"
SHAPE = [ENVS, "rollout.env_groups=2", "rollout.group_size=2", "rollout.max_turn=1", "rollout.max_actions_per_turn=1",
         "trainer.mini_batch_size=4", "trainer.micro_batch_size=4", "run.log_level=error"]
#: one step, in the order every driver calls it: two env errors, the rollout, then the end of the step
SEQUENCE = ["ragen_on_error", "ragen_on_error", "ragen_on_rollout_end", "ragen_collect_metrics", "ragen_on_step_end",
            "ragen_on_metrics"]


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "record.jsonl"
    monkeypatch.setenv("RAGEN_TEST_STEP_RECORD", str(path))
    monkeypatch.setenv("RAGEN_PLUGINS", "tests.step_recorder,tests.eval.scripted_backend")
    monkeypatch.delenv("RAGEN_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    return path


def calls(path: Path, step: int) -> list[str]:
    return [hook for hook, s in (json.loads(line) for line in path.read_text().splitlines()) if s == step]


def ragen(*args: str) -> None:
    res = CliRunner().invoke(build_cli(build_plugin_manager()), list(args))
    assert res.exit_code == 0, res.output + repr(res.exception)


def test_the_scripted_rollout(record: Path, tmp_path: Path) -> None:
    ragen("rollout", "--steps", "1", *SHAPE, "--run-dir", str(tmp_path / "r"))
    assert calls(record, 1) == SEQUENCE


def test_the_torch_trainer(record: Path, tmp_path: Path) -> None:
    needs_plugin("ragen-plugins-torch", "the torch trainer")
    ragen("train", *PLAIN, "trainer=torch", "trainer.model=tiny", "trainer.steps=1", "trainer.warm_start_steps=0",
          "trainer.val_every=0", "trainer.save_every=0", "rollout.max_new_tokens=8", *SHAPE,
          "--run-dir", str(tmp_path / "t"))
    assert calls(record, 1) == SEQUENCE


def test_ragen_eval(record: Path, tmp_path: Path) -> None:
    """An evaluation is one step (0) rolled out in batches: here one batch holds both groups."""
    needs_plugin("ragen-plugins-eval", "ragen eval")
    ragen("eval", "-m", "scripted://policy", "--env", "bandit", "--env", "exploding", "--groups", "1",
          "--group-size", "2", "--batch-groups", "2", "rollout.max_turn=1", "run.log_level=error",
          "--run-dir", str(tmp_path / "e"))
    assert calls(record, 0) == SEQUENCE


def test_verls_trainer_mode(record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU side of a veRL step: ``RagenPPOTrainer._compute_metrics`` on the agent loop's trajectories (veRL's
    own metrics and TransferQueue replaced by what they would return)."""
    needs_plugin("ragen-plugins-verl", "veRL's trainer mode")
    pytest.importorskip("verl")
    import numpy as np
    from verl import DataProto
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    import ragen_plugins_verl.verl_trainer as vt
    from ragen_core.config import load_config, resolve_config
    from ragen_core.plugins import collect_registries
    from ragen_core.runner import start_run
    from ragen_core.starpo.chat import ChatCodec, TextTokenizer
    from ragen_core.starpo.rollout import ScriptedPolicy, make_episodes, run_lockstep
    from ragen_plugins_verl.agent_loop import trajectory_output
    from ragen_plugins_verl.dataproto import _objects

    pm = build_plugin_manager()
    regs = collect_registries(pm)
    resolved = resolve_config(load_config(overrides=["trainer=verl", *SHAPE]), regs, pm)
    run = start_run(resolved, regs, pm, "train", tmp_path / "v")
    episodes = make_episodes(regs.envs, resolved.env_plan, seeds=[0, 1], group_size=2, config=resolved.config.rollout,
                             codec=ChatCodec(TextTokenizer()))
    batch = run_lockstep(episodes, ScriptedPolicy.for_episodes(episodes, "random", seed=0))
    data = DataProto.from_dict(non_tensors={"uid": np.array([f"g{t.group_id}" for t in batch], dtype=object),
                                            "extra_fields": _objects([trajectory_output(t)["extra_fields"]
                                                                      for t in batch])})
    monkeypatch.setattr(vt, "fetch_dataproto", lambda _batch, _fields=None: data)
    monkeypatch.setattr(PPOTrainerSync, "_compute_metrics", lambda *a, **k: None)
    trainer = vt.RagenPPOTrainer.__new__(vt.RagenPPOTrainer)
    trainer._run, trainer.diagnostics = run, []
    trainer.ragen = type("W", (), {"resolved": resolved})()
    trainer._compute_metrics(None, {"actor/pg_loss": 0.5}, {}, 1, 0)
    assert calls(record, 1) == SEQUENCE
    assert json.loads((tmp_path / "v" / "metrics.jsonl").read_text())["actor/pg_loss"] == 0.5


def test_docs_show_the_order_the_code_calls() -> None:
    text = (ROOT / "docs" / "plugins.md").read_text()
    block = text[text.index("  └─ for each step"):text.index("  └─ ragen_on_run_end")]
    assert re.findall(r"ragen_on_\w+|ragen_collect_metrics", block) == list(dict.fromkeys(SEQUENCE))
